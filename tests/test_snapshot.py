"""The rendered model.rs of one TFLite and one ONNX program, compared with a committed snapshot:
a codegen or recovery change shows up here as a readable diff, without a wasm build.

    PORTER_UPDATE_SNAPSHOTS=1 pytest tests/test_snapshot.py   # accept the new rendering
"""

import difflib
import os

import pytest

from fixtures import REPO, recovered, spec
from porter.codegen.encoder import render_forward_crate

SNAPSHOTS = REPO / "tests" / "data" / "snapshots"
CASES = [(spec.TINY.path("litert-dq8.tflite"), None), (spec.TINY.path("dq8pc.onnx"), "avx2")]


@pytest.mark.parametrize("path, target", CASES, ids=lambda v: getattr(v, "name", v))
def test_model_rs_matches_its_snapshot(path, target, tmp_path):
    from porter.frontends import load_graph
    from porter.recover.encoder import recover_encoder

    program = recovered(path) if target is None else recover_encoder(load_graph(path), target)
    crate = render_forward_crate(program, tmp_path / "crate")
    rendered = (crate / "src" / "model.rs").read_text()
    snapshot = SNAPSHOTS / f"{path.name}.model.rs"
    if os.environ.get("PORTER_UPDATE_SNAPSHOTS"):
        snapshot.write_text(rendered)
    expected = snapshot.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(True), rendered.splitlines(True),
                                        str(snapshot.relative_to(REPO)), "rendered"))
    assert rendered == expected, f"model.rs changed (PORTER_UPDATE_SNAPSHOTS=1 accepts it):\n{diff[:6000]}"
