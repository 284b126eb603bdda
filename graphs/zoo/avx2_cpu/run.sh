#!/bin/sh
# Runs a command on this CPU as an AVX2 one (no AVX-512, AVX-VNNI or AMX in CPUID; avx2_cpu.c),
# so that onnxruntime picks the kernels of the AVX2 CPU golden/zoo/'s ONNX goldens were made on:
#     graphs/zoo/avx2_cpu/run.sh ~/.cache/porter/export-venv/bin/python graphs/zoo/make_goldens.py NAME
# Needs gcc and a CPU with CPUID faulting (/proc/cpuinfo flag cpuid_fault; Intel since Ivy Bridge,
# and most hypervisors pass it on). make_goldens.py records the masked flags (PORTER_CPU_MASK).
set -e
here=$(cd "$(dirname "$0")" && pwd)
lib=${TMPDIR:-/tmp}/porter-avx2-cpu-$(id -u).so
if [ ! -f "$lib" ] || [ "$here/avx2_cpu.c" -nt "$lib" ]; then
    gcc -O2 -shared -fPIC -o "$lib.tmp" "$here/avx2_cpu.c" && mv "$lib.tmp" "$lib"
fi
grep -qw cpuid_fault /proc/cpuinfo || { echo "avx2_cpu: this CPU has no cpuid_fault" >&2; exit 2; }
PORTER_CPU_MASK=avx2 LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}" exec "$@"
