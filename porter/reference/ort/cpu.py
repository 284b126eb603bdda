"""Which CPU's onnxruntime arithmetic an ONNX port reproduces: the targets, and how one is chosen.

onnxruntime's CPU provider computes with MLAS, which picks its kernels by CPUID once, when it
starts (`MLAS_PLATFORM::MLAS_PLATFORM` in onnxruntime/core/mlas/lib/platform.cpp). Read from
onnxruntime 1.32's sources and its machine code, two of those choices change the bits of the
graphs porter compiles:

- the u8 x s8 GEMM kernel of quantize_dynamic's layers (`GemmU8S8Kernel`, run by the AVX2
  dispatch `MlasGemmU8S8DispatchAvx2` on every x86 CPU with AVX2): `MlasGemmU8S8KernelAvx2`
  and, with AVX-512 BW/DQ/VL, `MlasGemmU8S8KernelAvx512Core` multiply with vpmaddubsw, which
  adds each pair of products in int16 with saturation; AVX-VNNI's `MlasGemmU8S8KernelAvxVnni`
  and AVX512-VNNI's `MlasGemmU8S8KernelAvx512Vnni` use vpdpbusds, whose four-product sums are
  exact (as ARM's udot);
- softmax's exponentials and their sum (`ComputeSumExpF32Kernel`): `MlasComputeSumExpF32KernelFma3`
  on AVX2 (8 lanes, 2^m built from its exponent bits), `MlasComputeSumExpF32KernelAvx512F` with
  AVX-512F (16 lanes, 2^m applied by vscalefps); porter.reference.ort.floats.softmax has both.

The other kernels AVX-512F swaps in give the same bits on these graphs, measured against
onnxruntime's goldens from both CPUs: SGEMM (`MlasGemmFloatKernelAvx512F` keeps one fma chain
per output in k order and the same blocking), GELU (`MlasGeluErfKernelAvx512F`: the same erf
polynomials; its clamp of |x| at 3.925 only ever meets inputs whose erf already rounds to 1),
`MlasQuantizeLinearU8KernelAvx512F` (the same division; it clamps before rounding, which
commutes) and the maximum. The SGEMM M = 1 kernel (`MlasSgemmKernelM1Avx`), erf
(`MlasErfKernelFma3`), LayerNormalization (`MlasLayerNormKernelAvx2`; the library holds no
AVX-512 one) and SkipLayerNormalization are the same on both.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from porter.errors import PorterError
from porter.reference.quant import EXACT_DOT, INT16_PAIRS_SATURATED

# MLAS's float kernel families (OrtCpu.floats), as porter.reference.ort.floats names them
AVX2_FLOATS = "avx2"  # the AVX2 / FMA3 kernels
AVX512_FLOATS = "avx512f"  # the AVX-512F kernels

AUTO = "auto"  # --ort-cpu auto: the golden's CPU where one is given, else this machine's


@dataclass(frozen=True)
class OrtCpu:
    name: str
    cpus: str  # which CPUs onnxruntime takes this path on
    floats: str  # AVX2_FLOATS or AVX512_FLOATS
    integer_dot: str  # quantize_dynamic's u8 x s8 dot (porter.reference.quant.u8s8_dot)
    kernels: str  # the MLAS kernels that make it this target

    def describe(self) -> str:
        return f"{self.name} ({self.cpus}: {self.kernels})"


TARGETS = {cpu.name: cpu for cpu in (
    OrtCpu("avx2", "x86 with AVX2 and FMA, no VNNI, no AVX-512", AVX2_FLOATS, INT16_PAIRS_SATURATED,
           "MlasGemmU8S8KernelAvx2 (int16-pair-saturating vpmaddubsw), "
           "MlasComputeSumExpF32KernelFma3 (8-lane softmax sum)"),
    OrtCpu("avxvnni", "x86 with AVX-VNNI, no AVX-512", AVX2_FLOATS, EXACT_DOT,
           "MlasGemmU8S8KernelAvxVnni (exact vpdpbusds), MlasComputeSumExpF32KernelFma3 (8-lane softmax sum)"),
    OrtCpu("avx512", "x86 with AVX-512F, no AVX512-VNNI", AVX512_FLOATS, INT16_PAIRS_SATURATED,
           "MlasGemmU8S8KernelAvx512Core or Avx2 (int16-pair-saturating vpmaddubsw), "
           "MlasComputeSumExpF32KernelAvx512F (16-lane softmax sum, vscalefps)"),
    OrtCpu("avx512vnni", "x86 with AVX-512 BW/DQ/VL and AVX512-VNNI", AVX512_FLOATS, EXACT_DOT,
           "MlasGemmU8S8KernelAvx512Vnni (exact vpdpbusds), "
           "MlasComputeSumExpF32KernelAvx512F (16-lane softmax sum, vscalefps)"),
)}
# Paths onnxruntime takes elsewhere that porter does not reproduce: on ARM64 the exact udot /
# sdot GEMMs (MlasGemmU8X8DispatchUdot), the generic four-lane softmax and erf kernels of
# compute.cpp and erf.cpp, the NEON SGEMM and the scalar LayerNormalization fallback (no MLAS
# kernel): no golden from such a CPU checks them.
NOT_REPRODUCED = {"arm64": "ARM64 (NEON floats, udot / sdot)"}

# The flags every CPU onnxruntime's arithmetic is reproduced for has (target_for_flags): a
# golden whose flags lack one is from another CPU or lists them partially.
REQUIRED_FLAGS = ("avx2", "fma")
# /proc/cpuinfo flags that MLAS's dispatch reads (a golden's manifest records these)
DISPATCH_FLAG_PREFIXES = ("avx2", "avx512", "avx_vnni", "fma", "amx")
CPUINFO = Path("/proc/cpuinfo")


def choices() -> str:
    return "|".join([AUTO, *TARGETS])


def target(name: str) -> OrtCpu:
    """The target of that name; a one-line error for any other (ARM64's is named as such)."""
    if name in TARGETS:
        return TARGETS[name]
    if name in NOT_REPRODUCED:
        raise PorterError(f"--ort-cpu {name}: onnxruntime's {NOT_REPRODUCED[name]} arithmetic is "
                          f"not reproduced; choose {'|'.join(TARGETS)}")
    raise PorterError(f"--ort-cpu {name}: choose {choices()}")


def target_for_flags(flags: set[str] | list[str], where: str) -> OrtCpu:
    """The target onnxruntime 1.32 runs on a CPU with these /proc/cpuinfo flags, decided as
    MlasPlatform decides: its AVX2 block needs AVX2 and FMA; AVX-VNNI makes the u8 x s8 kernel
    exact; AVX-512F brings the AVX-512F float kernels, and with BW/DQ/VL the AVX-512 core u8 x s8
    kernel, which saturates unless the CPU also has AVX512-VNNI. (AMX, where present, takes the
    u8 x s8 GEMM too: exact, and every CPU with it has AVX512-VNNI.)"""
    flags = set(flags)
    if not set(REQUIRED_FLAGS) <= flags:
        raise PorterError(f"{where} has no AVX2 with FMA (flags: {' '.join(sorted(flags)) or 'none'}): "
                          f"onnxruntime's arithmetic there is not reproduced; choose --ort-cpu "
                          f"{'|'.join(TARGETS)}")
    exact = "avx_vnni" in flags
    if "avx512f" not in flags:
        return TARGETS["avxvnni" if exact else "avx2"]
    if {"avx512bw", "avx512dq", "avx512vl"} <= flags:
        exact = "avx512_vnni" in flags
    return TARGETS["avx512vnni" if exact else "avx512"]


@dataclass(frozen=True)
class HostCpu:
    model: str
    flags: list[str]  # the dispatch flags only, sorted
    all_flags: set[str]  # every flag, for the target


def host_cpu(cpuinfo: Path = CPUINFO) -> HostCpu:
    """This machine's CPU model and flags, from the first processor of /proc/cpuinfo."""
    try:
        text = cpuinfo.read_text()
    except OSError as e:
        raise PorterError(f"cannot read {cpuinfo} to find this machine's CPU ({e}); choose "
                          f"--ort-cpu {'|'.join(TARGETS)}") from None
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the first processor is enough: they all share the flags
            continue
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    if "flags" not in fields:
        # ARM64 kernels list "Features"; no x86 flags, so no target porter reproduces
        raise PorterError(f"{cpuinfo} lists no x86 flags (features: {fields.get('Features', 'none')}): "
                          f"onnxruntime's arithmetic on this CPU is not reproduced; choose --ort-cpu "
                          f"{'|'.join(TARGETS)}")
    every = set(fields["flags"].split())
    return HostCpu(fields.get("model name", "unknown"), dispatch_flags(every), every)


def dispatch_flags(flags: set[str]) -> list[str]:
    return sorted(f for f in flags if f.startswith(DISPATCH_FLAG_PREFIXES))


def host_target() -> OrtCpu:
    cpu = host_cpu()
    return target_for_flags(cpu.all_flags, f"this machine's CPU ({cpu.model})")


def golden_target(manifest: dict, name: str) -> OrtCpu | None:
    """The target of the CPU a golden was made on, when its manifest records the CPU's flags."""
    if "cpu_flags" not in manifest:
        return None
    return target_for_flags(manifest["cpu_flags"], f"the CPU golden {name} was made on "
                                                   f"({manifest.get('cpu_model', 'unknown')})")


def resolve(choice: str, manifest: dict | None = None, golden_name: str = "") -> OrtCpu:
    """--ort-cpu CHOICE: a target by name, or for auto the golden's (when a golden with
    recorded flags is given), else this machine's."""
    if choice != AUTO:
        return target(choice)
    from_golden = None if manifest is None else golden_target(manifest, golden_name)
    return from_golden or host_target()
