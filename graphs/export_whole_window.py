"""A whole-window fixture: TINY's network exported with no attention-mask input.

`<TINY>.nomask.litert-dq8.tflite` is litert-torch + ai-edge-quantizer dynamic int8 (as
export_litert.py), of torch_model.WholeWindow: every position attends to every other, so the
logits of live tokens depend on what the padding holds. porter must decide that from the graph
(no mask path in attention -> "whole_window") — tests/test_execute.py checks the decision
against LiteRT at two different paddings.

    python graphs/export_whole_window.py [--force]
"""

import sys
import tempfile
from pathlib import Path

GRAPHS_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(GRAPHS_DIR))

import spec  # noqa: E402
import fixture_info  # noqa: E402
from export_litert import _export_atomic, quantize_dq8  # noqa: E402

NET = spec.TINY
OUT = NET.path("nomask.litert-dq8.tflite")


def export(out: Path) -> None:
    import litert_torch
    import torch
    import torch_model

    model = torch_model.WholeWindow(torch_model.build(NET)).eval()
    ids, _ = torch_model.sample_inputs(NET, torch.int32)
    with torch.no_grad():
        edge = litert_torch.convert(model, sample_kwargs={"input_ids": ids})
    with tempfile.TemporaryDirectory() as tmp:
        f32 = Path(tmp) / "whole_window.f32.tflite"
        _export_atomic(lambda p: edge.export(str(p)), f32)
        quantize_dq8(f32, out)


if __name__ == "__main__":
    if OUT.exists() and "--force" not in sys.argv:
        print(f"{OUT.name} exists (use --force to remake)")
    else:
        export(OUT)
        print(f"wrote {OUT.name}: {OUT.stat().st_size} bytes, sha256 {fixture_info.sha256(OUT)[:12]}")
