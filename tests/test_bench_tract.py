"""porter bench's tract peer: the runner crate builds with porter's toolchain (the first build
compiles tract from crates.io: minutes, hence slow), runs under porter's wasmtime engine, and
computes what onnxruntime computes on the same ONNX file and window."""

import json

import numpy as np
import onnxruntime as ort
import pytest

from fixtures import require, run_porter, spec
from porter.bench.bench import make_cases, onnx_feeds
from porter.bench.tract import ensure_tract_wasm, run_tract
from porter.codegen.compile import compile_model
from porter.codegen.encoder import build_forward_crate

TINY = spec.TINY
# The float export only sums in another order. quantize_dynamic: tract's integer and float steps
# need not be onnxruntime's, whose u8 x s8 dot saturates int16 pairs on some CPUs (the avx2 and
# avx512 targets), so a quantised value may land a step apart. Measured on this fixture, on an
# AVX-512 VNNI host: max |delta| 6e-7 (f32) and 5e-7 (dq8pc); on MiniLM-L6 dq8pc it is 0.19.
TOLERANCES = {"f32.onnx": 1e-4, "dq8pc.onnx": 0.05}


@pytest.fixture(scope="module")
def tract_module():
    return ensure_tract_wasm(echo=lambda *_: None)


@pytest.mark.slow
@pytest.mark.parametrize("flavour", sorted(TOLERANCES))
def test_tract_agrees_with_onnxruntime_on_one_window(tract_module, flavour):
    onnx_path = require(TINY.path(flavour))
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    case = make_cases(TINY.seq, TINY.vocab)[1]  # 20 live tokens, padded: the mask matters
    feeds = onnx_feeds(session.get_inputs(), case)
    reply = run_tract(tract_module, onnx_path.read_bytes(), list(feeds.values()), runs=2, timeout_s=120.0)
    expected = session.run(None, {name: values.reshape(dims) for name, (_, dims, values) in feeds.items()})[0]
    assert reply.output.shape == expected.shape and len(reply.run_ms) == 2 and reply.load_ms > 0
    np.testing.assert_allclose(reply.output, expected, rtol=0, atol=TOLERANCES[flavour])
    assert (reply.output.argmax(-1) == expected.argmax(-1)).mean() >= 0.95


@pytest.mark.slow
def test_bench_runs_tract_beside_porter_and_reports_its_start_up(tract_module, toolchain, tmp_path):
    compiled = tmp_path / "tiny"
    compile_model(require(TINY.path("litert-dq8.tflite")), compiled)
    build_forward_crate(compiled, toolchain)
    json_path = tmp_path / "bench.json"
    result = run_porter("bench", compiled, "--onnx", require(TINY.path("dq8pc.onnx")), "--peers", "tract",
                        "--rounds", "2", "--iterations", "1", "--json", json_path, "--png", tmp_path / "b.png")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(json_path.read_text())
    name = "tract (wasmtime)"
    for case in report["cases"].values():
        runner = case["runners"][name]
        assert runner["runs"] == 2 and 0 < runner["min"] <= runner["median"]
    startup = report["peer_startup_ms"][name]
    assert set(startup) == set(report["cases"]) and all(s["runs"] == 2 and s["min"] > 0 for s in startup.values())
    assert f"{name} start-up, per instance" in result.stdout
