#!/usr/bin/env bash
# porter's main job on the bundled real model (MiniLM-L6 token classifier, LiteRT dynamic-range
# int8): check the toolchain, inspect the graph, compile it, and run the recovered IR on every
# window of its LiteRT builtin-kernel golden. Set-up first (idempotent). Output goes to
# ${PORTER_EXAMPLE_OUT:-build/example}.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh

model=graphs/minilm6-tok9-s256.litert-dq8.tflite
golden=golden/minilm6-tok9-s256.litert-dq8.tflite.builtin.npz
out=${PORTER_EXAMPLE_OUT:-build/example}
porter=.venv/bin/porter

step() { printf '\n== %s\n' "$*"; }

step "porter doctor"
$porter doctor
step "porter inspect $model"
$porter inspect "$model"
step "porter compile $model -o $out"
$porter compile "$model" -o "$out"
step "porter run $model --golden $golden (numpy executor)"
$porter run "$model" --golden "$golden"
