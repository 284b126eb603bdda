"""Real files of forms porter refuses today, for the tests that the refusal names its real cause:
graphs/zoo/refused/<file> + sidecar json (not zoo members: the zoo's rows must all be exact).

    ~/.cache/porter/export-venv/bin/python graphs/zoo/make_refused.py

- bert-tok.ortopt-f32.onnx: bert-tok.ts-dyn-f32.onnx (TorchScript, dynamic axes, eager attention)
  through onnxruntime.transformers.optimizer.optimize_model(model_type="bert", num_heads=4,
  hidden_size=64) at its default opt_level: com.microsoft EmbedLayerNormalization, Attention,
  SkipLayerNormalization and BiasGelu, opset domains it declares and never uses (ai.onnx.ml ...),
  no value_info. (The optimizer imports torch, so it cannot run in porter's own environment.)
"""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

ZOO = Path(__file__).resolve().parent
sys.path.insert(0, str(ZOO.parent))  # graphs/: fixture_info
import fixture_info  # noqa: E402

OUT = ZOO / "refused"


def ortopt(source: str = "bert-tok.ts-dyn-f32.onnx") -> Path:
    from onnxruntime.transformers.optimizer import optimize_model

    out = OUT / source.replace("ts-dyn-f32", "ortopt-f32")
    optimize_model(str(ZOO / source), model_type="bert", num_heads=4, hidden_size=64).save_model_to_file(str(out))
    fixture_info.write_json_atomic(out.with_name(out.name + ".json"), {
        "file": out.name, "source": source, "source_sha256": fixture_info.sha256(ZOO / source),
        "recipe": "onnxruntime.transformers.optimizer.optimize_model(path, model_type='bert', num_heads=4, "
                  "hidden_size=64), default opt_level",
        "versions": {p: version(p) for p in ("onnxruntime", "onnx")},
        "size_bytes": out.stat().st_size, "sha256": fixture_info.sha256(out), "ops": fixture_info.ops(out),
    })
    return out


if __name__ == "__main__":
    OUT.mkdir(exist_ok=True)
    print(ortopt())
