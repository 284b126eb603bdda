#!/usr/bin/env bash
# The test suite: set-up first (idempotent), then pytest over tests/ (the default suite, as CI runs it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
.venv/bin/porter doctor
# The exhaustive kernel checks (-m slow, minutes each) are their own step: `bash scripts/test.sh -m slow`
# (a later -m wins over this one). --durations names the slowest tests, to keep CI's time in view.
# One worker per core (-n auto), at most four: each worker after the first builds std once into a
# cargo target directory of its own (tests/conftest.py), about 2 GB after a few runs, and half a
# hundred test files gain little from more. Each test file on one worker (--dist loadfile: a
# module's crates are built once); one BLAS thread per worker: the executor's many small float64
# GEMMs only slow down when threads contend for the cores.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
exec .venv/bin/python -m pytest -q -n auto --maxprocesses 4 --dist loadfile -m "not slow" --durations=15 "$@"
