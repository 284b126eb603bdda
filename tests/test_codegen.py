"""The generated forward crate: compiled, built to wasm and run on real fixtures, it must give
the numpy executor's logits bit for bit, and LiteRT's builtin-kernel goldens too; and no shape
may be written into the templates.

Each fixture's crate is built once per session into the shared cargo target directory.
"""

import re

import numpy as np
import pytest

from fixtures import (GOLDEN_L1D, MINILM_DQ8PC_ONNX, MINILM_LITERT_DQ8, MINILM_SMALL_F32_ONNX, MINILM_TF_DQ8, REPO,
                      executor_is_sampled, executor_windows, fixture_id, ort_golden, require, run_porter, spec)
from porter.runtime import evalproto
from porter.reference import execute
from porter.codegen.encoder import build_forward_crate, render_forward_crate
from porter.codegen.compile import compile_model, recover
from porter.check.golden import load_golden

GOLDEN = REPO / "golden"
# The MiniLMs' modules take a minute each to build and run; the bundled one is built and checked
# against its golden and baseline by default in tests/test_verify.py, so here they run with -m slow.
BUILT = [spec.TINY.path("litert-dq8.tflite"), spec.TINY.path("tf-dq8.tflite"),
         spec.SMALL.path("litert-dq8.tflite"), spec.SMALL.path("tf-dq8.tflite"),
         *[pytest.param(p, marks=pytest.mark.slow, id=p.name) for p in (MINILM_LITERT_DQ8, MINILM_TF_DQ8)],
         spec.TINY.path("f32.tflite")]


@pytest.fixture(scope="session")
def crates(toolchain, tmp_path_factory):
    """(path, onnxruntime CPU target) -> (ir, wasm), compiled and built on first use; ONNX
    graphs take the AVX2 target unless told otherwise, TFLite graphs none."""
    built = {}

    def get(path, target=None):
        target = target or ("avx2" if path.suffix == ".onnx" else "auto")
        if (path, target) not in built:
            crate = tmp_path_factory.mktemp("forward") / f"{path.name.replace('.', '-')}-{target}"
            l1d = GOLDEN_L1D if path.suffix == ".tflite" else "auto"
            ir = compile_model(require(path), crate, ort_cpu=target, l1d=l1d)
            built[path, target] = ir, build_forward_crate(crate, toolchain)
        return built[path, target]

    return get


def run_golden_windows(wasm_runtime, wasm, golden, extent=evalproto.LIVE_ROWS):
    request = evalproto.encode_request(golden.ids, golden.attention_mask, golden.live, extent)
    result = wasm_runtime.run_command(wasm, [], request, timeout_s=600)
    assert result.exit_code == 0, result.stderr.decode(errors="replace")
    windows, load_ms = evalproto.decode_reply(result.stdout)
    assert load_ms < 1.0
    return windows


def live_rows_computed(ir, live: int, mask: np.ndarray) -> int:
    """Rows the live run computes: up to the last kept token where padding is inert (attention
    reads that many keys, rounded up to its key block), the whole window otherwise."""
    if not ir.padding_is_inert:
        return ir.seq
    return max(live, int(np.flatnonzero(mask).max(initial=-1)) + 1, 1)


@pytest.mark.parametrize("path", BUILT, ids=fixture_id)
def test_eval_module_is_bit_identical_to_executor_and_litert(path, crates, wasm_runtime):
    """Both the live-rows run and the whole-window run give the executor's bits."""
    ir, wasm = crates(path)
    golden = load_golden(GOLDEN / f"{path.name}.builtin.npz")
    windows = run_golden_windows(wasm_runtime, wasm, golden)
    whole = run_golden_windows(wasm_runtime, wasm, golden, evalproto.WHOLE_WINDOW)
    assert len(windows) == len(whole) == golden.windows
    worst_vs_litert = 0.0
    for w, (ours, ours_whole) in enumerate(zip(windows, whole)):
        live = int(golden.live[w])
        reference = execute.run(ir, golden.ids[w], golden.attention_mask[w])[:live]
        assert ours.logits.shape == (live, ir.width)
        assert ours_whole.rows == ir.seq
        assert ours.rows == live_rows_computed(ir, live, golden.attention_mask[w]), f"window {w}"
        assert np.array_equal(ours.logits.view(np.uint32), reference.view(np.uint32)), f"window {w}"
        assert np.array_equal(ours_whole.logits.view(np.uint32), reference.view(np.uint32)), f"window {w}"
        litert = golden.logits[w][:live]
        assert (ours.logits.argmax(-1) == litert.argmax(-1)).all(), f"window {w}"
        worst_vs_litert = max(worst_vs_litert, float(np.abs(ours.logits - litert).max()))
    print(f"{path.name}: {golden.windows} windows, bit-identical to the executor, "
          f"max |dlogit| vs LiteRT builtin {worst_vs_litert:.3g}")
    assert worst_vs_litert == 0.0


def test_padding_rows_are_not_computed(crates, wasm_runtime):
    """A window's reply holds live rows only, its layers compute 7 rows for 7 live tokens
    (attention runs over 8 keys, the eighth with zero K and V), and its logits ignore the
    padded ids."""
    path = spec.TINY.path("litert-dq8.tflite")
    ir, wasm = crates(path)
    rng = np.random.default_rng(5)
    live = 7
    ids = rng.integers(1, ir.vocab, (2, ir.seq)).astype(np.int32)
    ids[1, :live] = ids[0, :live]
    mask = np.tile((np.arange(ir.seq) < live).astype(np.int32), (2, 1))
    request = evalproto.encode_request(ids, mask, np.array([live, live]))
    windows, _ = evalproto.decode_reply(wasm_runtime.run_command(wasm, [], request).stdout)
    assert windows[0].logits.shape == (live, ir.width) and windows[0].rows == live
    assert np.array_equal(windows[0].logits, windows[1].logits)
    assert np.array_equal(windows[0].logits, execute.run(ir, ids[0], mask[0])[:live])


def test_eval_module_refuses_bad_requests(crates, wasm_runtime):
    ir, wasm = crates(spec.TINY.path("litert-dq8.tflite"))
    ids = np.zeros((1, ir.seq), np.int32)
    ids[0, 3] = ir.vocab
    bad_id = evalproto.encode_request(ids, ids, np.array([4]))
    result = wasm_runtime.run_command(wasm, [], bad_id)
    assert result.exit_code == 2 and b"outside the vocabulary" in result.stderr
    wrong_seq = evalproto.encode_request(np.zeros((1, ir.seq + 1), np.int32), np.zeros((1, ir.seq + 1), np.int32),
                                         np.array([1]))
    result = wasm_runtime.run_command(wasm, [], wrong_seq)
    assert result.exit_code == 2 and b"window" in result.stderr


# `const NAME: type = value;`: a constant of a kernel (a reference runtime's block size), not a
# model's shape written inline.
NAMED_CONSTANT = re.compile(r"^\s*(pub )?const [A-Z][A-Z0-9_]*: [^=]+ = [^;]+;\s*(//.*)?$")


def shape_numbers(ir) -> set[int]:
    """The sizes of a model that must only ever appear in the generated model.rs."""
    widths = {n for lin in ir.linears() for n in (lin.in_features, lin.out_features)}
    head_dims = {a.head_dim for a in ir.attentions()}
    numbers = {ir.seq, ir.vocab} | widths | head_dims | {3 * w for w in widths}
    # 127/128/255 are int8 quantisation constants, not sizes.
    return {n for n in numbers if n >= 16} - {127, 128, 255}


@pytest.mark.parametrize("path", [MINILM_LITERT_DQ8, spec.SMALL.path("tf-dq8.tflite")], ids=fixture_id)
def test_rendered_crate_writes_shapes_only_in_model_rs(path, tmp_path):
    ir = recover(require(path))
    crate = render_forward_crate(ir, tmp_path / "crate")
    numbers = shape_numbers(ir)
    model_rs = (crate / "src" / "model.rs").read_text()
    assert f"pub const SEQ: usize = {ir.seq};" in model_rs and f"pub const VOCAB: usize = {ir.vocab};" in model_rs
    offenders = []
    # checks/ is the kernel-check harness (its own random lengths), not the model's crate.
    for source in sorted((crate / "src").rglob("*.rs")):
        if source.name == "model.rs":
            continue
        for line_number, line in enumerate(source.read_text().splitlines(), 1):
            if NAMED_CONSTANT.match(line):  # a kernel's own constant, named where it is defined
                continue
            # A SIMD shuffle's const generics are lane indices, not sizes.
            code = re.sub(r"::<[^>]*>", "", line.split("//")[0])
            literals = {int(m) for m in re.findall(r"(?<![\w.])(\d+)(?![\w.])", code)}
            if literals & numbers:
                offenders.append(f"{source.relative_to(crate)}:{line_number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_templates_hold_no_shape_literals():
    """The same on the template sources: no fixture's size appears outside model.rs.j2."""
    sizes = {64, 256, 384, 512, 1024, 1536, 4096, 8192, 30522}
    template = REPO / "porter" / "templates" / "rust_forward"
    offenders = []
    for source in sorted(template.rglob("*")):
        # checks/ is the kernel-check harness (its own lengths and every byte value), not the model's crate
        if not source.is_file() or source.name.startswith("model.rs") or "checks" in source.relative_to(template).parts:
            continue
        for line_number, line in enumerate(source.read_text().splitlines(), 1):
            code = line.split("//")[0]
            if {int(m) for m in re.findall(r"(?<![\w.])(\d+)(?![\w.])", code)} & sizes:
                offenders.append(f"{source.relative_to(template)}:{line_number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_porter_compile_then_build_prints_the_wasm(tmp_path, crates):
    path = require(spec.TINY.path("litert-dq8.tflite"))
    crates(path)  # the shared target dir is warm: this build only compiles the crate itself
    out = tmp_path / "tiny"
    compiled = run_porter("compile", path, "-o", out)
    assert compiled.returncode == 0, compiled.stderr
    assert (out / "Cargo.toml").is_file() and (out / "src" / "forward.rs").is_file()
    built = run_porter("build", out)
    assert built.returncode == 0, built.stderr
    assert ".wasm (" in built.stdout and " MB" in built.stdout
    assert any(out.glob("*.wasm"))


def test_porter_build_names_a_directory_that_is_not_a_crate(tmp_path):
    result = run_porter("build", tmp_path)
    assert result.returncode == 2 and "not a porter forward crate" in result.stderr


def test_whole_window_module_attends_over_the_padding(crates, wasm_runtime):
    """The graph without a mask input: the module must take the padding into account exactly as
    LiteRT does (live logits change with what the padding holds)."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    path = require(spec.TINY.path("nomask.litert-dq8.tflite"))
    ir, wasm = crates(path)
    golden = load_golden(GOLDEN / f"{spec.TINY.path('litert-dq8.tflite').name}.builtin.npz")
    ids = golden.ids.copy()
    ids[1::2][golden.attention_mask[1::2] == 0] = 1  # every other window padded with id 1
    mask = np.ones_like(ids)
    request = evalproto.encode_request(ids, mask, golden.live)
    result = wasm_runtime.run_command(wasm, [], request, timeout_s=600)
    assert result.exit_code == 0, result.stderr.decode(errors="replace")
    windows, _ = evalproto.decode_reply(result.stdout)
    runner = Interpreter(model_path=str(path), num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES
                         ).get_signature_runner()
    for w, ours in enumerate(windows):
        live = int(golden.live[w])
        litert = next(iter(runner(**{ir.ids_input: ids[w][None]}).values()))[0][:live]
        assert np.array_equal(ours.logits.view(np.uint32), litert.view(np.uint32)), f"window {w}"


# ONNX graphs: the crate runs onnxruntime's arithmetic (kernels/ort/float/, kernels/ort/quant.rs) as
# on the CPU it was compiled for, the same bits as onnxruntime's goldens from such a CPU
# (ORT_ENABLE_ALL) on every window, and as the numpy executor (which the MiniLMs' 256-token
# windows make too slow to run here: see fixtures.executor_windows). Both targets' modules run
# the small float, TorchScript and quantize_dynamic fixtures (the AVX2 one every small fixture); the
# MiniLMs' modules (their executor windows are checked by default in test_onnx_recover) add four
# crate builds, and run with -m slow.
SMALL_ONNX = [spec.TINY.path("f32.onnx"), spec.TINY.path("f32-ts.onnx"), spec.TINY.path("dq8pc.onnx"),
              spec.TINY.path("dq8pt.onnx"), spec.SMALL.path("dq8pc.onnx")]
MINILM_ONNX = [MINILM_SMALL_F32_ONNX, MINILM_DQ8PC_ONNX]
ONNX_MODULES = ([pytest.param(p, "avx2", id=f"{p.name}-avx2") for p in SMALL_ONNX]
                + [pytest.param(p, "avx512vnni", id=f"{p.name}-avx512vnni") for p in SMALL_ONNX
                   if p.name != spec.TINY.path("dq8pt.onnx").name]
                + [pytest.param(p, t, id=f"{p.name}-{t}", marks=pytest.mark.slow)
                   for p in MINILM_ONNX for t in ("avx2", "avx512vnni")])


@pytest.mark.parametrize("path, target", ONNX_MODULES)
def test_onnx_module_is_bit_identical_to_the_executor_and_onnxruntime(path, target, crates, wasm_runtime):
    ir, wasm = crates(path, target)
    assert ir.ort_cpu == target
    # live rows only for float programs whose softmax is MLAS's AVX2 kernel (exact zeros for the
    # masked keys); AVX-512's subnormal probabilities and DynamicQuantizeLinear's tensor-wide
    # scale make the others run the whole window (porter.recover.rows)
    assert ir.padding_is_inert == (target == "avx2" and ".f32" in path.name)
    golden = load_golden(ort_golden(path, target))
    windows = run_golden_windows(wasm_runtime, wasm, golden)
    whole = run_golden_windows(wasm_runtime, wasm, golden, evalproto.WHOLE_WINDOW)
    # Sampled fixtures' executor windows are checked against this same golden in test_onnx_recover;
    # a second target's executor runs there on a sample, and here on the same sample.
    check_executor = set() if executor_is_sampled(golden) else set(executor_windows(golden, target == "avx2"))
    for w, (ours, ours_whole) in enumerate(zip(windows, whole)):
        live = int(golden.live[w])
        assert ours.rows == live_rows_computed(ir, live, golden.attention_mask[w]) and ours_whole.rows == ir.seq
        for run in (ours, ours_whole):
            assert np.array_equal(run.logits.view(np.uint32), golden.logits[w][:live].view(np.uint32)), \
                f"window {w} against onnxruntime"
        if w in check_executor:
            reference = execute.run(ir, golden.ids[w], golden.attention_mask[w])[:live]
            assert np.array_equal(ours.logits.view(np.uint32), reference.view(np.uint32)), f"window {w}"
