#!/usr/bin/env bash
# The test suite: set-up first (idempotent), then pytest over tests/ (the default suite, as CI runs it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
.venv/bin/porter doctor
# The exhaustive kernel checks (-m slow, minutes each) are their own step: `bash scripts/test.sh -m slow`
# (a later -m wins over this one). --durations names the slowest tests, to keep CI's time in view.
# One worker per core (-n auto), each test file on one worker (--dist loadfile: a module's crates
# are built once); one BLAS thread per worker: the executor's many small float64 GEMMs only slow
# down when threads contend for the cores.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
exec .venv/bin/python -m pytest -q -n auto --dist loadfile -m "not slow" --durations=15 "$@"
