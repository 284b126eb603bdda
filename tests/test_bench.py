"""porter bench on the small TINY network: every runner really runs (porter's wasm under wasmtime,
LiteRT both ways, onnxruntime, ONNX Runtime Web in Node; tract in test_bench_tract.py, as its
first build takes minutes) and the report's numbers hang together, the roofline's included.
Speed itself is not asserted: the numbers are the bench's output, not a test's."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fixtures import REPO, assert_one_line_error, require, run_porter, spec
from porter.bench import mca, profile
from porter.bench.bench import PORTER, make_cases, text_cases
from porter.bench.machine import cache_sizes, host_cpu, machine_line, microarchitecture
from porter.bench.roofline import stage_work
from porter.errors import PorterError
from porter.codegen.encoder import build_forward_crate
from porter.codegen.compile import compile_model
from porter.codegen.tuning import Tuning
from porter.reference.litert.floats import host_l1d_bytes

TINY = spec.TINY.path("litert-dq8.tflite")
TINY_ONNX = spec.TINY.path("dq8pc.onnx")
RUNNERS = {PORTER, "LiteRT builtin", "LiteRT XNNPACK", "onnxruntime", "ONNX Runtime Web (Node)"}
NOT_TRACT = "litert-builtin,litert-xnnpack,ort,ort-web"


@pytest.fixture(scope="module")
def compiled(toolchain, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tiny"
    compile_model(require(TINY), out)
    build_forward_crate(out, toolchain)
    return out


def test_the_machine_is_named_by_its_family_and_caches(tmp_path):
    """A cloud CPU's bare "AMD EPYC" is told apart by family and model: Zen 3 (Milan, model 1),
    Zen 4 (Genoa, model 0x11), an Intel Sapphire Rapids; caches as sysfs writes them."""
    assert [microarchitecture("AuthenticAMD", 25, m) for m in (0x01, 0x11, 0x61, 0x30)] == \
        ["Zen 3", "Zen 4", "Zen 4", "unknown"]
    assert microarchitecture("GenuineIntel", 6, 0x8F) == "Sapphire Rapids"
    for i, (level, kind, size) in enumerate([("1", "Data", "48K"), ("1", "Instruction", "32K"),
                                             ("2", "Unified", "2048K"), ("3", "Unified", "105M")]):
        index = tmp_path / f"index{i}"
        index.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (index / name).write_text(value + "\n")
    assert cache_sizes(str(tmp_path)) == {"l1d_bytes": 48 * 1024, "l2_bytes": 2 * 1024 * 1024}
    assert cache_sizes(str(tmp_path / "none")) == {"l1d_bytes": None, "l2_bytes": None}


def test_cases_come_from_the_window():
    full, short = make_cases(64, 30522)
    assert (full.live, int(full.mask.sum()), short.live, int(short.mask.sum())) == (64, 64, 20, 20)
    assert (short.ids[20:] == 0).all() and (full.ids[:20] == short.ids[:20]).all()
    assert [c.name for c in make_cases(16, 100)] == ["full window"]  # no short case in a 16-token window


TINY_GOLDEN = REPO / "golden" / (TINY.name + ".builtin.npz")


def test_text_cases_come_from_the_goldens_first_full_window(tmp_path):
    golden = np.load(TINY_GOLDEN)
    first_full = next(w for w, mask in enumerate(golden["attention_mask"]) if mask.all())
    (full, short), ids = text_cases(TINY_GOLDEN, 64, 30522)
    assert ids == f"text: window {first_full} of {TINY_GOLDEN.name}"
    assert (full.ids == golden["ids"][first_full]).all() and full.live == 64 and full.mask.all()
    assert short.live == 20 and (short.ids[:20] == full.ids[:20]).all() and (short.ids[20:] == 0).all()
    with pytest.raises(PorterError, match="windows of 64 tokens; the module's hold 128"):
        text_cases(TINY_GOLDEN, 128, 30522)
    with pytest.raises(PorterError, match="outside the module's vocabulary of 100"):
        text_cases(TINY_GOLDEN, 64, 100)
    # a golden of short texts only: nothing to time as a full window
    arrays = dict(golden)
    arrays["attention_mask"] = arrays["attention_mask"].copy()
    arrays["attention_mask"][:, -1] = 0
    np.savez(tmp_path / "short.npz", **arrays)
    with pytest.raises(PorterError, match="no window with all 64 tokens live"):
        text_cases(tmp_path / "short.npz", 64, 30522)


def test_bench_times_text_from_a_golden(compiled, tmp_path):
    json_path = tmp_path / "bench.json"
    result = run_porter("bench", compiled, "--golden", TINY_GOLDEN, "--peers", "", "--rounds", "1", "--iterations", "1",
                        "--json", json_path, "--png", tmp_path / "bench.png")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "token ids text: window" in result.stdout
    assert json.loads(json_path.read_text())["token_ids"].startswith("text: window")
    result = run_porter("bench", compiled, "--golden", tmp_path / "none.npz", "--peers", "", "--rounds", "1")
    assert_one_line_error(result, "no such file")


def test_bench_runs_every_peer_and_reports_ratios(compiled, tmp_path):
    json_path, png_path = tmp_path / "bench.json", tmp_path / "bench.png"
    result = run_porter("bench", compiled, "--onnx", require(TINY_ONNX), "--peers", NOT_TRACT, "--rounds", "2",
                        "--iterations", "1", "--json", json_path, "--png", png_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(json_path.read_text())
    assert report["format"] == "porter.bench/1" and report["skipped"] == {}
    assert list(report["cases"]) == ["full window", "20 tokens"]
    for name, case in report["cases"].items():
        assert set(case["runners"]) == RUNNERS
        porter_median = case["runners"][PORTER]["median"]
        for runner in case["runners"].values():
            assert runner["runs"] == 2 and 0 < runner["min"] <= runner["median"]
            assert runner["ratio_to_porter"] == pytest.approx(runner["median"] / porter_median)
        assert all(ms >= 0 for ms in case["porter_stages_ms"].values())
    # TINY masks its padding: 20 live tokens compute 20 rows (attention runs over 24 keys), a full
    # window 64.
    assert report["cases"]["full window"]["porter_rows_computed"] == 64
    assert report["cases"]["20 tokens"]["porter_rows_computed"] == 20
    startup = report["porter_startup_ms"]
    assert startup["instantiate"]["runs"] >= 10
    assert 0 < startup["instantiate"]["min"] <= startup["instantiate"]["median"]
    assert png_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "x porter" in result.stdout and "porter start-up: instantiate" in result.stdout
    # What it ran on, and with which kernels, beside the figures.
    cpu = report["machine"]["cpu"]
    assert cpu == host_cpu() and cpu["l1d_bytes"] == host_l1d_bytes()
    assert report["kernel_variant"] == {"gemm_tile": [Tuning().tile_rows, Tuning().tile_outs],
                                        "attention_query_rows": Tuning().query_rows, "chosen_by": "default",
                                        "gemm_row_block_bytes": 16 * 1024, "attention_key_panel": 32}
    assert machine_line(cpu, report["kernel_variant"]) in result.stdout.splitlines()
    assert_roofline(report, json.loads((compiled / "ir.json").read_text()))
    assert "roofline: floors in wasm under wasmtime" in result.stdout


def assert_roofline(report: dict, ir: dict) -> None:
    """Every stage's work is the IR's, its floor time that work at the floors' rates, its share
    of the floor that time over the stage's median."""
    roofline = report["roofline"]
    assert roofline["floor_rounds"] == report["rounds"]
    assert set(roofline["floors"]) == {"int8_products", "f32_multiply_adds", "exps"}
    assert all(f["per_second"] > 0 for f in roofline["floors"].values())
    for name, stages in roofline["cases"].items():
        work = stage_work(ir, report["cases"][name]["live_tokens"])
        assert list(stages) == ["matmul", "attention", "other"] and list(work) == ["matmul", "attention"]
        for stage, r in stages.items():
            assert r["median_ms"] == pytest.approx(report["cases"][name]["porter_stages_ms"][stage])
            if stage == "other":  # elementwise, not counted: no floor
                assert r["work"] == {} and r["floor_ms"] is None and r["of_floor_median"] is None
                continue
            assert r["work"] == {unit: n for unit, n in work[stage].items() if n}
            floor_ms = sum(1000 * n / roofline["floors"][u]["per_second"] for u, n in r["work"].items())
            assert r["floor_ms"] == pytest.approx(floor_ms)
            assert r["of_floor_median"] == pytest.approx(floor_ms / r["median_ms"])


def test_peers_without_an_onnx_file_are_skipped_with_the_reason(compiled, tmp_path):
    result = run_porter("bench", compiled, "--peers", "ort,tract", "--rounds", "1", "--iterations", "1",
                        "--json", tmp_path / "b.json", "--png", tmp_path / "b.png")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads((tmp_path / "b.json").read_text())
    reason = "give --onnx FILE, an ONNX export of the same network"
    assert report["skipped"] == {"ort": reason, "tract": reason}
    assert set(report["cases"]["full window"]["runners"]) == {PORTER}


@pytest.mark.parametrize("args, fragment", [
    (["--peers", "tvm"], "unknown peer tvm"),
    (["--onnx", "no-such.onnx"], "no-such.onnx: no such ONNX file"),
    (["--rounds", "0"], "--rounds and --iterations must be at least 1"),
])
def test_bad_options_are_one_line_errors(compiled, args, fragment):
    assert_one_line_error(run_porter("bench", compiled, *args), fragment)


def test_a_directory_without_a_module_is_a_one_line_error(tmp_path):
    assert_one_line_error(run_porter("bench", tmp_path), "no built eval module")


TINY_F32 = spec.TINY.path("f32.tflite")


@pytest.fixture(scope="module")
def compiled_f32(toolchain, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "tiny-f32"
    compile_model(require(TINY_F32), out)
    build_forward_crate(out, toolchain)
    return out


def test_also_times_another_scheme_of_the_network_in_the_same_rounds(compiled, compiled_f32, tmp_path):
    """--also: the float32 build of TINY beside its hybrid int8 build, each with its size,
    scheme and stages, interleaved with LiteRT."""
    json_path = tmp_path / "bench.json"
    result = run_porter("bench", compiled, "--also", compiled_f32, "--peers", "litert-builtin", "--rounds", "2",
                        "--iterations", "1", "--json", json_path, "--png", tmp_path / "bench.png")
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(json_path.read_text())
    other = f"porter {TINY_F32.name}"
    for case in report["cases"].values():
        assert set(case["runners"]) == {PORTER, other, "LiteRT builtin"}
        assert case["runners"][other]["runs"] == 2
    hybrid, f32 = report["modules"]
    assert (hybrid["name"], f32["name"]) == (PORTER, other)
    assert hybrid["scheme"] == "weights int8_per_channel, activations tflite_hybrid_symmetric"
    assert f32["scheme"] == "weights float32, activations float"
    assert f32["wasm_bytes"] > hybrid["wasm_bytes"]  # float weights take four bytes where int8 take one
    assert set(f32["stages_ms"]) == set(report["cases"])
    assert f"{other}: {f32['wasm_bytes'] / 2**20:.1f} MiB module, {f32['scheme']}" in result.stdout


def test_also_refuses_a_module_of_another_window(compiled, tmp_path):
    """The window is read from the other module's ir.json (SMALL's, 128 tokens) before anything
    runs; the .wasm beside it is TINY's, as the check never gets to it."""
    import shutil

    other = tmp_path / "small"
    compile_model(require(spec.SMALL.path("litert-dq8.tflite")), other)
    wasm = next(compiled.glob("*.wasm"))
    shutil.copy(wasm, other / wasm.name)
    result = run_porter("bench", compiled, "--also", other, "--peers", "litert-builtin", "--rounds", "1",
                        "--iterations", "1", "--json", tmp_path / "b.json", "--png", tmp_path / "b.png")
    assert_one_line_error(result, "window 128 and vocabulary 8192, not 64 and 4096")


def test_the_profile_samples_every_kernel_the_model_names(compiled, tmp_path):
    """scripts/model_kernels.py's profile: the tiny model's module really run under perf (cpu-clock
    sampling, wasmtime's jitdump), its samples landing in its wasm functions' code, and each kernel
    the model names found among them with a block that does its work: a kernel renamed or inlined
    elsewhere would drop out of the model's report without this."""
    samples = profile.record(compiled, tmp_path, windows=200)
    assert samples.total > 0 and all(address in dict(samples.code[f]) for f, address in samples.samples)
    for kernel in mca.KERNELS:
        hottest = samples.hottest_block(kernel.function, mca.basic_blocks)
        assert hottest is not None and hottest[1] > 0 and mca.work_of(hottest[0], kernel.work) > 0, kernel.name


def test_the_kernel_model_refuses_what_it_cannot_run(tmp_path):
    done = subprocess.run([sys.executable, "scripts/model_kernels.py", str(tmp_path / "missing")], capture_output=True,
                          text=True, cwd=Path(__file__).parent.parent)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.splitlines() == [f"model_kernels: {tmp_path / 'missing'}: no such eval module or compiled directory"]
