"""porter verify against a fake eval module (tests/data/fake_eval) whose logits numpy recomputes
exactly, so every number in the report can be checked by hand: agreement, timing, thresholds,
baselines, the JSON report, the PNG plot, and one-line errors. Then the real eval module of the
bundled MiniLM against its LiteRT builtin golden and its committed baseline."""

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from fixtures import MINILM_LITERT_DQ8, REPO, require, run_porter
from porter.codegen.render import render_and_build
from porter.cli import main

FAKE_TEMPLATE = Path(__file__).parent / "data" / "fake_eval"
MINILM_BUILTIN = REPO / "golden" / "minilm6-tok9-s256.litert-dq8.tflite.builtin.npz"
MINILM_BASELINE = REPO / "golden" / "baselines" / "minilm6-tok9-s256.litert-dq8.eval.npz"
SEQ, LABELS = 8, 5
TRAP_ID, SPIN_ID, DRIFT_ID = -1, -2, -3  # window-leading ids that make the fake module trap, loop
#                                          or answer differently for live rows and whole windows
LIVE = [5, 8, 2]
TEXT_INDEX = [0, 0, 1]


@dataclass(frozen=True)
class FakeModule:
    compiled_dir: Path  # ir.json and the eval module
    wasm: Path
    model_sha256: str


@pytest.fixture(scope="session")
def fake(toolchain, tmp_path_factory) -> FakeModule:
    # Laid out as `porter compile` + `porter build` leave a crate: ir.json beside the .wasm.
    root = tmp_path_factory.mktemp("fake") / "compiled"
    variables = {"crate_name": "porter-fake-eval", "seq": SEQ, "labels": LABELS}
    wasm = render_and_build(FAKE_TEMPLATE, root, variables, toolchain)
    model = root.parent / "fake-model.tflite"
    model.write_bytes(b"a stand-in for the graph file the module was compiled from")
    (root / "ir.json").write_text(json.dumps({"source": str(model), "seq": SEQ, "labels": LABELS}))
    return FakeModule(root, wasm, hashlib.sha256(model.read_bytes()).hexdigest())


def fake_logits(ids: np.ndarray, live: int) -> np.ndarray:
    """What the fake module answers for one window: [seq, labels], zero past `live`."""
    t = np.arange(SEQ)[:, None]
    l = np.arange(LABELS)[None, :]
    k = (ids.astype(np.int64)[:, None] * 31 + t * 7 + l * 13) % 97 - 48
    logits = (k / 8.0).astype(np.float32)
    logits[live:] = 0
    return logits


def windows(first_ids=()) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(4)
    ids = rng.integers(0, 1000, (len(LIVE), SEQ)).astype(np.int32)
    mask = (np.arange(SEQ)[None, :] < np.array(LIVE)[:, None]).astype(np.int32)
    ids[mask == 0] = 0
    for w, first in enumerate(first_ids):
        ids[w, 0] = first
    return ids, mask, np.array(LIVE, np.int32)


def write_golden(path: Path, logits: np.ndarray, model_sha256: str, ids=None, mask=None, live=None,
                 cpu_flags: str | None = None) -> Path:
    """cpu_flags: recorded as the CPU the golden was made on (onnxruntime goldens record theirs)."""
    if ids is None:
        ids, mask, live = windows()
    np.savez(path, ids=ids, attention_mask=mask, live=live,
             text_index=np.array(TEXT_INDEX[: len(ids)], np.int32), logits=logits)
    manifest = {"model_file": "fake-model.tflite", "model_sha256": model_sha256,
                "runtime": "fake", "mode": "exact"}
    if cpu_flags is not None:
        manifest.update(cpu_model="AMD EPYC", cpu_flags=cpu_flags.split())
    path.with_suffix(".json").write_text(json.dumps(manifest))
    return path


def exact_logits() -> np.ndarray:
    ids, _, live = windows()
    return np.stack([fake_logits(ids[w], int(live[w])) for w in range(len(LIVE))])


@pytest.fixture
def exact_golden(fake, tmp_path) -> Path:
    return write_golden(tmp_path / "fake.exact.npz", exact_logits(), fake.model_sha256)


@pytest.fixture
def perturbed_golden(fake, tmp_path) -> tuple[Path, dict]:
    """The exact logits with one logit moved by 0.5 (window 0) and one label flipped (window 1)."""
    logits = exact_logits()
    logits[0, 1, 2] += 0.5
    row = logits[1, 3]
    other = (int(row.argmax()) + 1) % LABELS
    flip = float(row.max()) + 2.0 - float(row[other])  # the new winner's |dlogit|
    row[other] = row.max() + 2.0
    return write_golden(tmp_path / "fake.perturbed.npz", logits, fake.model_sha256), {"flip": flip}


def verify(*args) -> Result:
    return CliRunner().invoke(main, ["verify", *map(str, args)])


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def test_report_numbers_match_a_hand_computed_comparison(fake, perturbed_golden, tmp_path):
    golden, facts = perturbed_golden
    report_path = tmp_path / "report.json"
    result = verify(fake.compiled_dir, "--golden", golden, "--max-abs", "10",
                    "--min-label-agreement", "0.9", "--report", report_path)
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    [g] = report["goldens"]
    tokens = sum(LIVE)
    assert g["overall"] == {"tokens": tokens, "labels_agree": tokens - 1,
                            "label_rate": (tokens - 1) / tokens, "max_abs": max(0.5, facts["flip"]),
                            "mean_abs": pytest.approx((0.5 + facts["flip"]) / (tokens * LABELS))}
    w0, w1, w2 = g["sequences"]
    assert (w0["window"], w0["text_index"], w0["live"]) == (0, 0, 5)
    assert (w0["labels_agree"], w0["max_abs"], w0["mean_abs"]) == (5, 0.5, pytest.approx(0.5 / (5 * LABELS)))
    assert (w1["labels_agree"], w1["max_abs"]) == (7, facts["flip"])
    assert (w2["text_index"], w2["labels_agree"], w2["max_abs"], w2["mean_abs"]) == (1, 2, 0.0, 0.0)
    assert g["logits_compared"] == tokens * LABELS and g["logits_identical"] == tokens * LABELS - 2
    # The fake reports matmul 2(w+1), attention 1, other w/4 ms for window w, and loads in 0.125 ms.
    assert (w1["matmul_ms"], w1["attention_ms"], w1["other_ms"], w1["forward_ms"]) == (4.0, 1.0, 0.25, 5.25)
    t = report["timing"]
    assert t["windows"] == 3
    assert t["forward_ms"] == {"mean": 5.25, "median": 5.25}
    assert t["matmul_ms"] == {"mean": 4.0, "median": 4.0}
    assert t["other_ms"] == {"mean": 0.25, "median": 0.25}
    assert t["model_load_ms"] == {"mean": 0.125, "median": 0.125, "runs": 1}
    assert report["passed"] is True
    assert last_line(result.output).startswith("porter verify: PASS")


def test_report_schema(fake, exact_golden, perturbed_golden, tmp_path):
    report_path = tmp_path / "r.json"
    result = verify(fake.wasm, "--golden", exact_golden, "--compare", perturbed_golden[0],
                    "--report", report_path, "--plot", tmp_path / "p.png")
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    assert set(report) == {"format", "kind", "wasm", "wasm_sha256", "compiled_dir", "model", "model_sha256",
                           "ort_cpu", "eigen_l1d", "thresholds", "goldens", "timing", "baseline", "live_rows", "plot",
                           "passed", "failures"}
    assert report["ort_cpu"] is None  # a LiteRT graph's module
    assert report["format"] == "porter.verify/1"
    assert report["model_sha256"] == fake.model_sha256
    assert Path(report["compiled_dir"]) == fake.compiled_dir.resolve()
    assert report["thresholds"] == {"min_label_agreement": 1.0, "max_abs": 0.05}
    gated, informative = report["goldens"]
    assert set(gated) == {"name", "path", "reference", "ort_cpu", "gated", "windows", "overall",
                          "logits_compared", "logits_identical", "sequences", "timing", "failures"}
    assert (gated["name"], gated["gated"], informative["gated"]) == ("fake.exact", True, False)
    assert set(gated["sequences"][0]) == {"window", "text_index", "live", "tokens", "labels_agree",
                                          "label_rate", "max_abs", "mean_abs", "matmul_ms",
                                          "attention_ms", "other_ms", "forward_ms"}
    assert set(report["timing"]) == {"windows", "forward_ms", "matmul_ms", "attention_ms", "other_ms",
                                     "model_load_ms"}
    # The informative golden is below both thresholds, yet the run passes.
    assert informative["overall"]["label_rate"] < 1 and informative["failures"] == []
    # Both goldens hold the same windows, so the module ran once for the two of them.
    assert report["timing"]["model_load_ms"]["runs"] == 1 and report["timing"]["windows"] == 3


def test_live_rows_run_is_compared_with_the_whole_window_run(fake, exact_golden, tmp_path):
    report_path = tmp_path / "r.json"
    result = verify(fake.compiled_dir, "--golden", exact_golden, "--report", report_path)
    assert result.exit_code == 0, result.output
    live_rows = json.loads(report_path.read_text())["live_rows"]
    # The fake computes live rows rounded up to 8 (all of its 8-token window) in a live-rows run.
    assert live_rows["rows"] == [8, 8, 8] and live_rows["seq"] == SEQ and live_rows["identical"]
    assert live_rows["live_forward_ms"] == live_rows["whole_window_forward_ms"] == {"mean": 5.25, "median": 5.25}
    assert "live rows: every window computed all 8 rows" in result.output


def test_a_live_rows_run_that_drifts_from_the_whole_window_fails(fake, tmp_path):
    ids, mask, live = windows(first_ids=[0, DRIFT_ID])
    logits = np.stack([fake_logits(ids[w], int(live[w])) for w in range(len(LIVE))])
    golden = write_golden(tmp_path / "drift.npz", logits, fake.model_sha256, ids, mask, live)
    result = verify(fake.compiled_dir, "--golden", golden, "--max-abs", "1",
                    "--report", tmp_path / "r.json", "--plot", tmp_path / "p.png")
    assert result.exit_code == 1, result.output
    assert "the live-rows run differs at golden drift window 1 (text 0) token 0 label 0" in last_line(result.stdout)
    report = json.loads((tmp_path / "r.json").read_text())["live_rows"]
    assert report["identical"] is False and report["differing_logits"] == LIVE[1] * LABELS
    assert report["max_abs"] == 0.125


def test_default_report_and_plot_go_to_the_compiled_dir(fake, exact_golden):
    result = verify(fake.compiled_dir, "--golden", exact_golden)
    assert result.exit_code == 0, result.output
    assert json.loads((fake.compiled_dir / "verify-report.json").read_text())["passed"]
    assert (fake.compiled_dir / "verify-dlogit.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("golden_name", ["exact_golden", "perturbed_golden"])
def test_plot_is_a_png(fake, golden_name, request, tmp_path):
    golden = request.getfixturevalue(golden_name)
    golden = golden[0] if isinstance(golden, tuple) else golden
    plot = tmp_path / "dlogit.png"
    verify(fake.compiled_dir, "--golden", golden, "--plot", plot, "--report", tmp_path / "r.json")
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("options, reason", [
    ([], "label agreement 93.33% < 100.00% vs fake.perturbed"),
    (["--min-label-agreement", "0.9", "--max-abs", "0.4"], "max |dlogit|"),
])
def test_below_thresholds_exits_1_with_a_clear_last_line(fake, perturbed_golden, tmp_path, options, reason):
    result = verify(fake.compiled_dir, "--golden", perturbed_golden[0], *options,
                    "--report", tmp_path / "r.json", "--plot", tmp_path / "p.png")
    assert result.exit_code == 1
    assert last_line(result.stdout).startswith("porter verify: FAIL: ")
    assert reason in last_line(result.stdout)
    assert json.loads((tmp_path / "r.json").read_text())["passed"] is False


def test_baseline_identity_passes_and_a_perturbed_copy_fails(fake, exact_golden, tmp_path):
    baseline = tmp_path / "base.npz"
    common = ["--report", tmp_path / "r.json", "--plot", tmp_path / "p.png"]
    written = verify(fake.compiled_dir, "--golden", exact_golden, "--write-baseline", baseline, *common)
    assert written.exit_code == 0, written.output
    first_bytes = baseline.read_bytes()
    verify(fake.compiled_dir, "--golden", exact_golden, "--write-baseline", baseline, *common)
    assert baseline.read_bytes() == first_bytes  # reproducible: rewriting changes nothing

    same = verify(fake.compiled_dir, "--golden", exact_golden, "--baseline", baseline, *common)
    assert same.exit_code == 0, same.output
    assert "bit-identical" in same.output

    with np.load(baseline) as stored:
        arrays = {k: stored[k] for k in stored.files}
    arrays["fake.exact#w001"][4, 0] = np.nextafter(arrays["fake.exact#w001"][4, 0], np.float32(10))
    perturbed = tmp_path / "perturbed.npz"
    np.savez(perturbed, **arrays)
    differs = verify(fake.compiled_dir, "--golden", exact_golden, "--baseline", perturbed, *common)
    assert differs.exit_code == 1
    assert "window 1 (text 0) token 4 label 0" in last_line(differs.stdout)
    assert json.loads((tmp_path / "r.json").read_text())["baseline"]["first_difference"] == {
        "golden": "fake.exact", "window": 1, "text_index": 0, "token": 4, "label": 0,
        "ours": float(exact_logits()[1, 4, 0]), "baseline": float(arrays["fake.exact#w001"][4, 0])}


def test_baseline_is_not_written_for_a_failing_module(fake, perturbed_golden, tmp_path):
    baseline = tmp_path / "base.npz"
    result = verify(fake.compiled_dir, "--golden", perturbed_golden[0], "--write-baseline", baseline,
                    "--report", tmp_path / "r.json", "--plot", tmp_path / "p.png")
    assert result.exit_code == 1
    assert "not written" in last_line(result.stdout)
    assert not baseline.exists()


def assert_one_line_error(result, *fragments):
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("porter: error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_missing_wasm_is_one_line(tmp_path, exact_golden):
    assert_one_line_error(verify(tmp_path / "nothing.wasm", "--golden", exact_golden), "no such eval module")
    (tmp_path / "compiled").mkdir()
    assert_one_line_error(verify(tmp_path / "compiled", "--golden", exact_golden), "no built eval module")
    (tmp_path / "compiled/a.wasm").write_bytes(b"")
    (tmp_path / "compiled/b.wasm").write_bytes(b"")
    assert_one_line_error(verify(tmp_path / "compiled", "--golden", exact_golden), "2 .wasm files")


def test_golden_of_another_model_is_one_line(fake, tmp_path):
    golden = write_golden(tmp_path / "other.npz", exact_logits(), "0" * 64)
    assert_one_line_error(verify(fake.compiled_dir, "--golden", golden), "other.npz was made from a model")


def test_golden_of_another_window_length_is_one_line(fake, tmp_path):
    ids = np.zeros((1, 2 * SEQ), np.int32)
    golden = write_golden(tmp_path / "long.npz", np.zeros((1, 2 * SEQ, LABELS), np.float32),
                          fake.model_sha256, ids, ids, np.array([1], np.int32))
    assert_one_line_error(verify(fake.compiled_dir, "--golden", golden), f"windows of {2 * SEQ} tokens")


def test_baseline_of_another_model_is_one_line(fake, exact_golden, tmp_path):
    baseline = tmp_path / "base.npz"
    np.savez(baseline, __meta__=np.array(json.dumps({"format": "porter.baseline/1", "model_sha256": "f" * 64})))
    assert_one_line_error(verify(fake.compiled_dir, "--golden", exact_golden, "--baseline", baseline),
                          "written for a model with sha256 ffffffffffff")


def test_trapping_module_is_one_line(fake, tmp_path):
    ids, mask, live = windows(first_ids=[7, TRAP_ID])
    golden = write_golden(tmp_path / "trap.npz", exact_logits(), fake.model_sha256, ids, mask, live)
    assert_one_line_error(verify(fake.compiled_dir, "--golden", golden), "trapped", "fake trap in window 1")


def test_module_past_its_deadline_is_one_line(fake, tmp_path):
    ids, mask, live = windows(first_ids=[SPIN_ID])
    golden = write_golden(tmp_path / "spin.npz", exact_logits(), fake.model_sha256, ids, mask, live)
    result = verify(fake.compiled_dir, "--golden", golden, "--timeout", "0.1")
    assert_one_line_error(result, "exceeded its timeout of 0.3 s", "epoch deadline")


def test_the_installed_command_reports_errors_on_one_line(fake, tmp_path):
    # The same path a user takes: a fresh interpreter, click's real exit handling.
    result = run_porter("verify", tmp_path / "absent", "--golden", tmp_path / "absent.npz")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "porter: error:" in result.stderr


AVX2_FLAGS, AVX512_VNNI_FLAGS = "avx2 fma", "avx2 fma avx512f avx512bw avx512dq avx512vl avx512_vnni"


@pytest.fixture
def fake_avx2(fake, tmp_path) -> Path:
    """The fake module's compiled directory as if compiled from an ONNX graph for AVX2 CPUs."""
    compiled = tmp_path / "fake-avx2"
    shutil.copytree(fake.compiled_dir, compiled)
    ir = json.loads((compiled / "ir.json").read_text())
    (compiled / "ir.json").write_text(json.dumps({**ir, "ort_cpu": "avx2"}))
    return compiled


def test_a_golden_of_another_cpu_path_is_refused_on_one_line(fake, fake_avx2, tmp_path):
    golden = write_golden(tmp_path / "zen4.npz", exact_logits(), fake.model_sha256, cpu_flags=AVX512_VNNI_FLAGS)
    assert_one_line_error(verify(fake_avx2, "--golden", golden), "zen4.npz was made where onnxruntime takes its "
                          "avx512vnni path", "reproduces its avx2 path", "--ort-cpu avx512vnni")


def test_a_golden_of_the_same_cpu_path_gates_and_another_is_compared(fake, fake_avx2, tmp_path):
    same = write_golden(tmp_path / "zen3.npz", exact_logits(), fake.model_sha256, cpu_flags=AVX2_FLAGS)
    other = write_golden(tmp_path / "zen4.npz", exact_logits(), fake.model_sha256, cpu_flags=AVX512_VNNI_FLAGS)
    report_path = tmp_path / "report.json"
    result = verify(fake_avx2, "--golden", same, "--compare", other, "--report", report_path)
    assert result.exit_code == 0, result.output
    assert "onnxruntime on avx2 (x86 with AVX2 and FMA" in result.output.splitlines()[0]
    assert "CPU path avx2; 3 windows; gated" in result.output
    assert "CPU path avx512vnni; 3 windows; informative" in result.output
    report = json.loads(report_path.read_text())
    assert report["ort_cpu"] == "avx2"
    assert [g["ort_cpu"] for g in report["goldens"]] == ["avx2", "avx512vnni"]


@pytest.fixture(scope="session")
def minilm_module(toolchain, tmp_path_factory) -> Path:
    """The bundled MiniLM compiled and built once: the crate directory, its .wasm inside."""
    from porter.codegen.encoder import build_forward_crate
    from porter.codegen.compile import compile_model

    crate = tmp_path_factory.mktemp("minilm") / "crate"
    compile_model(require(MINILM_LITERT_DQ8), crate)
    build_forward_crate(crate, toolchain)
    return crate


def test_bundled_model_is_bit_identical_to_its_builtin_golden_and_baseline(minilm_module, tmp_path):
    report_path = tmp_path / "report.json"
    result = verify(minilm_module, "--golden", MINILM_BUILTIN, "--baseline", MINILM_BASELINE,
                    "--max-abs", "0", "--report", report_path, "--plot", tmp_path / "p.png")
    assert result.exit_code == 0, result.output
    report = json.loads(report_path.read_text())
    [golden] = report["goldens"]
    assert golden["overall"]["label_rate"] == 1.0 and golden["overall"]["max_abs"] == 0.0
    assert golden["logits_identical"] == golden["logits_compared"] == 1242 * 9
    assert report["baseline"]["identical"] is True
    timing = report["timing"]
    assert timing["windows"] == 20 and timing["matmul_ms"]["mean"] > 0 and timing["attention_ms"]["mean"] > 0
