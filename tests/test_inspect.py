"""`porter inspect` on the real fixtures: the JSON schema, the facts it reports, the text report,
and that nothing but porter's validating frontend opens the file."""

import json
import subprocess
import sys

import pytest
from fixtures import (
    ALL_FIXTURES,
    MINILM_DQ8PC_ONNX,
    MINILM_LITERT_DQ8,
    MINILM_TF_DQ8,
    ONNX_DQ8PC,
    REPO,
    assert_one_line_error,
    fixture_id,
    require,
    run_porter,
    spec,
)

from porter.frontends.inspect import SCHEMA, inspect_model

TOP_LEVEL_KEYS = {
    "schemes",
    "schema", "path", "format", "file_size", "signature", "opsets", "inputs", "outputs", "op_count",
    "op_histogram", "op_versions", "tensor_count", "constant_count", "buffers", "weights",
    "quantization_summary", "arithmetic_options",
}


def _inspect_json(path) -> dict:
    result = run_porter("inspect", "--json", path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _option_counts(report: dict, op_type: str, option: str) -> dict:
    return {v["value"]: v["count"] for v in report["arithmetic_options"][op_type][option]}


@pytest.mark.parametrize("path", ALL_FIXTURES, ids=fixture_id)
def test_every_fixture_reports_the_stable_schema(path):
    report = inspect_model(require(path))
    assert set(report) == TOP_LEVEL_KEYS
    assert report["schema"] == SCHEMA
    assert report["op_count"] == sum(report["op_histogram"].values()) > 0
    assert report["buffers"]["ranges_checked"] is True
    assert report["inputs"] and report["outputs"]
    json.dumps(report)  # plain JSON types only


def test_litert_fixture_report():
    report = _inspect_json(require(MINILM_LITERT_DQ8))
    assert report["format"] == "tflite" and report["signature"] == "serving_default"
    assert report["op_histogram"]["FULLY_CONNECTED"] == 37
    external = report["buffers"]["external"]
    assert external["count"] > 0 and 0 < external["bytes"] <= report["file_size"]
    assert _option_counts(report, "FULLY_CONNECTED", "asymmetric_quantize_inputs") == {False: 37}
    fc_weights = [w for w in report["weights"] if w["read_by"] == ["FULLY_CONNECTED"]]
    assert len(fc_weights) == 37
    for w in fc_weights:
        q = w["quantization"]
        assert w["dtype"] == "int8" and w["storage"] == "external"
        assert q["granularity"] == "per-channel" and q["axis"] == 0 and q["channels"] == w["shape"][0]
        assert q["zero_points_all_zero"] and 0 < q["scale_min"] <= q["scale_max"]
    assert _option_counts(report, "GELU", "approximate") == {False: 6}
    assert _option_counts(report, "SOFTMAX", "beta") == {1.0: 6}


def test_tf_fixture_report_says_inputs_are_quantised_asymmetrically():
    report = _inspect_json(require(MINILM_TF_DQ8))
    assert report["op_histogram"]["FULLY_CONNECTED"] == 37
    assert _option_counts(report, "FULLY_CONNECTED", "asymmetric_quantize_inputs") == {True: 37}
    assert report["buffers"]["external"]["count"] > 0
    adj_y = _option_counts(report, "BATCH_MATMUL", "adj_y")
    assert adj_y.get(True, 0) > 0


@pytest.mark.parametrize("path", ONNX_DQ8PC, ids=fixture_id)
def test_onnx_report_names_quantised_weights_and_their_parameters(path):
    report = inspect_model(require(path))
    assert report["format"] == "onnx" and report["opsets"][""] >= 13
    matmul_weights = [w for w in report["weights"] if "MatMulInteger" in w["read_by"]]
    assert len(matmul_weights) == report["op_histogram"]["MatMulInteger"]
    for w in matmul_weights:
        q = w["quantization"]
        assert q["granularity"] == "per-channel" and q["axis"] == 1
        assert q["scale_tensor"] and q["zero_point_tensor"]


def test_text_report_reads_well():
    result = run_porter("inspect", require(MINILM_LITERT_DQ8))
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "signature: serving_default" in text
    assert "FULLY_CONNECTED" in text and "   37   (version 5)" in text
    assert "every byte range checked" in text
    assert "FULLY_CONNECTED.asymmetric_quantize_inputs: false x37" in text
    assert "per-channel along axis 0, zero points all 0" in text


def test_onnx_text_report_lists_opsets():
    result = run_porter("inspect", require(MINILM_DQ8PC_ONNX))
    assert result.returncode == 0, result.stderr
    assert "opsets: ai.onnx" in result.stdout and "MatMulInteger" in result.stdout


@pytest.mark.parametrize("path", [MINILM_LITERT_DQ8, MINILM_DQ8PC_ONNX], ids=fixture_id)
def test_inspect_opens_the_file_with_porter_only(path):
    """No runtime (LiteRT, TensorFlow, onnxruntime) is loaded, so none can read the file."""
    check = (
        "import sys; from porter.frontends.inspect import inspect_model; inspect_model(sys.argv[1]); "
        "loaded = [m for m in sys.modules if m.split('.')[0] in ('ai_edge_litert', 'tensorflow', 'onnxruntime')]; "
        "assert not loaded, loaded"
    )
    result = subprocess.run([sys.executable, "-c", check, str(require(path))], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_inspect_errors_are_one_line(tmp_path):
    assert_one_line_error(run_porter("inspect", "--json", tmp_path / "nothing.onnx"), "nothing.onnx", "no such file")
    assert_one_line_error(run_porter("inspect", tmp_path), "not a regular file")


def test_onnx_external_data_is_counted_as_external(tmp_path):
    import onnx

    model = onnx.load(str(require(spec.TINY.path("f32.onnx"))))
    out = tmp_path / "external.onnx"
    onnx.save(model, str(out), save_as_external_data=True, location="external.data", size_threshold=1024)
    report = _inspect_json(out)
    external = report["buffers"]["external"]
    assert external["count"] > 0 and external["files"] == ["external.data"]
    assert external["bytes"] <= (tmp_path / "external.data").stat().st_size
