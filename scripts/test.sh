#!/usr/bin/env bash
# The test suite: set-up first (idempotent), then pytest over tests/ (the default suite, as CI runs it).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
.venv/bin/porter doctor
# The exhaustive kernel checks (-m slow, minutes each) are their own step: `bash scripts/test.sh -m slow`
# (a later -m wins over this one). --durations names the slowest tests, to keep CI's time in view.
exec .venv/bin/python -m pytest -q -m "not slow" --durations=15 "$@"
