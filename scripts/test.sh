#!/usr/bin/env bash
# The whole test suite: set-up first (idempotent), then pytest over tests/.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh
.venv/bin/porter doctor
exec .venv/bin/python -m pytest -q "$@"
