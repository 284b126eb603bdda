"""The model zoo (graphs/zoo/): exports porter's own fixtures were not made like, through every
exporter. Each encoder file is recovered, its architecture checked against its member's spec and
its program run on every golden window (graphs/zoo/coverage.py); the row must be exact and be
the row docs/coverage.md shows. A representative subset is compiled, built and verified as wasm;
every file is under `-m slow`.
"""

import numpy as np
import pytest

from fixtures import REPO, run_porter

import sys

sys.path.insert(0, str(REPO / "graphs" / "zoo"))
import coverage  # noqa: E402

ENCODERS = [p for p in coverage.model_files() if not coverage.is_decoder(p)
            and coverage.refused_scheme(p) is None and coverage.refused_form(p) is None]
# One real file per quantisation scheme porter does not reproduce (graphs/zoo/members.py).
REFUSED = [p for p in coverage.model_files() if coverage.refused_scheme(p) is not None]
# Members of a form porter does not take yet (graphs/zoo/members.py REFUSED_FORMS).
REFUSED_FORM = [p for p in coverage.model_files() if coverage.refused_form(p) is not None]
# One file per kernel family and form (every file runs through wasm under -m slow): litert-torch's
# hybrid int8 (a token head; mean pooling), quantize_dynamic with ELECTRA's projection, a constant
# relative-position bias (MPNet), score terms computed per window with token types (DeBERTa),
# full-integer int8 (LiteRT's integer kernels), onnxruntime.transformers' contrib ops, onnxruntime's
# static QDQ (its fused QLinear kernels), float16 with dynamic axes (onnxruntime's casts and roundings).
WASM_SUBSET = ["bert-tok.litert-dq8.tflite", "st-bert-mean.litert-dq8.tflite", "electra-tok.dq8pc.onnx",
               "mpnet-tok.litert-dq8.tflite", "deberta-seq.dynamo-f32.onnx", "bert-tok.aeq-si8.tflite",
               "bert-tok.ortopt-dyn-f32.onnx", "bert-tok.qdq8pc.onnx", "bert-tok.dyn-f16.onnx"]


@pytest.fixture(scope="module")
def published_rows() -> set[str]:
    return {line for line in coverage.COVERAGE_MD.read_text().splitlines() if line.startswith("| ")}


@pytest.mark.parametrize("path", ENCODERS, ids=lambda p: p.name)
def test_zoo_member_is_exact_and_is_the_published_row(path, published_rows):
    row = coverage.encoder_row(path)
    print(row.markdown())
    assert row.outcome == "exact", row.markdown()
    assert row.markdown() in published_rows, (
        f"docs/coverage.md is out of date for {path.name}: run python graphs/zoo/coverage.py\n{row.markdown()}")


@pytest.mark.parametrize("path", REFUSED, ids=lambda p: p.name)
def test_zoo_scheme_porter_does_not_reproduce_is_refused_by_its_name(path, published_rows):
    """The refusal is the scheme's, found before recovery, not a symptom deep in the graph."""
    row = coverage.encoder_row(path)
    assert row.outcome == "refused", row.markdown()
    assert row.detail.startswith(coverage.refused_scheme(path)), row.detail
    assert "not reproduced" in row.detail, row.detail
    assert row.markdown() in published_rows, (
        f"docs/coverage.md is out of date for {path.name}: run python graphs/zoo/coverage.py\n{row.markdown()}")


@pytest.mark.parametrize("path", REFUSED_FORM, ids=lambda p: p.name)
def test_zoo_form_porter_does_not_take_is_refused_naming_the_cause(path, published_rows):
    row = coverage.row(path)
    assert row.outcome == "refused" and coverage.refused_form(path) in row.detail, row.markdown()
    assert row.markdown() in published_rows, (
        f"docs/coverage.md is out of date for {path.name}: run python graphs/zoo/coverage.py\n{row.markdown()}")


# On AVX-512 VNNI only the softmax and the u8 x s8 dots differ from the AVX2 path every ONNX file
# is checked on by default (test_zoo_member_is_exact_and_is_the_published_row), so by default one
# file per onnxruntime program kind runs on that target too, and every ONNX file with -m slow.
AVX512VNNI_SUBSET = ["bert-tok.dynamo-f32.onnx", "bert-tok.dq8pc.onnx", "bert-tok.ortopt-dyn-f32.onnx",
                     "bert-tok.qdq8pc.onnx", "xlmr-seq.qdq8pc.onnx", "bert-tok.f16.onnx",
                     "deberta-tok.dynamo-dyn-f32.onnx", "mpnet-tok.dq8pc.onnx"]


@pytest.mark.parametrize("path", [p if p.name in AVX512VNNI_SUBSET else pytest.param(p, marks=pytest.mark.slow)
                                  for p in ENCODERS if p.suffix == ".onnx"], ids=lambda p: p.name)
def test_zoo_onnx_member_is_exact_on_an_avx512vnni_cpu_too(path):
    """golden/zoo/avx512vnni/: onnxruntime on an AVX-512 VNNI CPU (exact u8 x s8 dots, AVX-512
    softmax); the program compiled for that target reproduces it bit for bit."""
    row = coverage.encoder_row(path, "avx512vnni")
    assert row.outcome == "exact", row.markdown()


def test_coverage_page_lists_every_zoo_file(published_rows):
    listed = {line.split("|")[1].strip() for line in published_rows}
    assert {p.name for p in coverage.model_files()} <= listed


def _compile_build_verify(path, tmp_path):
    out = tmp_path / path.name.replace(".", "-")
    golden = coverage.golden_path(path)
    # The golden's window, as a user compiling a dynamic-axes file for it would give it (a static
    # graph's own window is accepted too); a RoBERTa export's positions bound no window themselves.
    window = ["--window", str(np.load(golden)["ids"].shape[1])]
    compiled = run_porter("compile", path, "-o", out, *window,
                          *(["--ort-cpu", "avx2"] if path.suffix == ".onnx" else []))
    assert compiled.returncode == 0, compiled.stderr
    built = run_porter("build", out)
    assert built.returncode == 0, built.stderr[-3000:]
    verified = run_porter("verify", out, "--golden", golden, "--max-abs", "0")
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    return verified.stdout


@pytest.mark.parametrize("name", WASM_SUBSET)
def test_zoo_subset_through_wasm(name, tmp_path):
    path = coverage.ZOO_DIR / name
    out = _compile_build_verify(path, tmp_path)
    assert "porter verify: PASS" in out


@pytest.mark.slow
@pytest.mark.parametrize("path", [p for p in ENCODERS if p.name not in WASM_SUBSET], ids=lambda p: p.name)
def test_every_zoo_member_through_wasm(path, tmp_path):
    out = _compile_build_verify(path, tmp_path)
    assert "porter verify: PASS" in out
