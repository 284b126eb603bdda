#!/usr/bin/env bash
# porter's main job on the bundled real model (MiniLM-L6 token classifier, LiteRT dynamic-range
# int8): check the toolchain, inspect the graph, compile it to a Rust crate, build that to a
# wasm32-wasip1 simd128 eval module, and verify the module on every window of the LiteRT goldens:
# gated by the builtin-kernel golden and the committed baseline (bit for bit), with the XNNPACK
# golden as an informative second comparison. Set-up first (idempotent). The crate, the report
# and the |dlogit| plot go to ${PORTER_EXAMPLE_OUT:-build/example}.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
cd "$here"
bash scripts/setup.sh

model=graphs/minilm6-tok9-s256.litert-dq8.tflite
golden=golden/minilm6-tok9-s256.litert-dq8.tflite
baseline=golden/baselines/minilm6-tok9-s256.litert-dq8.eval.npz
out=${PORTER_EXAMPLE_OUT:-build/example}
porter=.venv/bin/porter

step() { printf '\n== %s\n' "$*"; }

step "porter doctor"
$porter doctor
step "porter inspect $model"
$porter inspect "$model"
step "porter compile $model -o $out"
$porter compile "$model" -o "$out"
step "porter build $out"
$porter build "$out"
step "porter verify $out"
$porter verify "$out" --golden "$golden.builtin.npz" --baseline "$baseline" \
    --compare "$golden.xnnpack.npz"
