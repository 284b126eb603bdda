"""porter.reference.litert.floats against the runtime it emulates: ai-edge-litert's builtin kernels
(BUILTIN_WITHOUT_DEFAULT_DELEGATES, one thread), bit for bit.

- Single-op models (graphs/probes/single_op.py) probe one kernel at a time on shapes and values
  chosen to take each of its paths: FULLY_CONNECTED's Eigen products and GEBP blocks, BATCH_MATMUL,
  TANH, LOGISTIC (its tensor tail), EXP, SUM / MEAN / REDUCE_MAX over any axes, L2_NORMALIZATION;
  the one-input functions on sampled f32 bit patterns (all 2^32 with `-m slow`).
- The committed fixtures run with every intermediate preserved, and each float op porter emulates
  is recomputed from its preserved inputs (graphs/probes/zoo_ops.py).
- The elementwise kernels porter takes for plain IEEE operations are pinned down as what they are
  (MAXIMUM is `a > b ? a : b`, DIV clamps to the float range, ...), so a runtime that changed them
  would show here.
"""

import json
import sys

import numpy as np
import pytest

from fixtures import REPO, TFLITE_F32, TF_DQ8, fixture_id, require
from porter.reference.litert import floats as LF

sys.path.insert(0, str(REPO / "graphs" / "probes"))
from single_op import Const, Input, S, fully_connected_model, interpreter, run_builtin, single_op_model  # noqa: E402
import zoo_ops  # noqa: E402

F32 = np.float32
FLT_MAX = np.finfo(F32).max
ALL_PATTERNS = 1 << 32
CHUNK = 1 << 22


def mismatches(ours, theirs) -> int:
    ours, theirs = np.asarray(ours, F32), np.asarray(theirs, F32).reshape(np.shape(ours))
    same = (ours.view(np.uint32) == theirs.view(np.uint32)) | (np.isnan(ours) & np.isnan(theirs))
    return int((~same).sum())


def spread(rng, shape) -> np.ndarray:
    """Values of scales 2^-6 .. 2^6 apart, so that summation orders give different roundings."""
    return (rng.standard_normal(shape) * np.exp2(rng.integers(-6, 7, shape))).astype(F32)


# ---- FULLY_CONNECTED and BATCH_MATMUL ---------------------------------------------------------------

# LiteRT runs here, and Eigen blocks deep float products by the L1 data cache size it reads from
# CPUID: the emulation follows this machine's (32 KiB on AMD Zen 3 / 4, 48 KiB on recent Intel).
HOST_L1D = LF.host_l1d_bytes()
OTHER_L1D = 48 * 1024 if HOST_L1D != 48 * 1024 else 32 * 1024

# (rows, out, k): every product Eigen picks and every GEBP block, the fixtures' and the zoo's heads,
# a depth split into blocks (k > 680), and the tiny coefficient-based products.
FC_SHAPES = [
    (64, 128, 128), (64, 512, 128), (64, 128, 512), (256, 384, 1536),  # 2-packet blocks, depth blocks
    (64, 3, 128), (64, 5, 64), (64, 9, 64), (64, 2, 64), (32, 7, 64), (66, 12, 67), (31, 13, 13),  # last rows
    (1, 64, 64), (1, 5, 64), (1, 3, 7), (1, 2, 64),  # GEMV over the weights
    (7, 1, 37), (64, 1, 64), (2, 1, 3),  # GEMV over the input
    (1, 1, 37), (1, 1, 12), (1, 1, 3), (1, 1, 129),  # inner product
    (2, 2, 15), (3, 4, 2), (5, 4, 9), (4, 4, 11),  # coefficient-based
    (16, 16, 688), (8, 13, 2000),
]


@pytest.mark.parametrize("rows, out, k", FC_SHAPES)
def test_fully_connected_matches_litert(rows, out, k):
    rng = np.random.default_rng(rows * 7919 + out * 31 + k)
    x, w, b = spread(rng, (rows, k)), spread(rng, (out, k)), spread(rng, (out,))
    with_bias = run_builtin(fully_connected_model(rows, out, k, True), [x, w, b])[0]
    without = run_builtin(fully_connected_model(rows, out, k, False), [x, w])[0]
    assert mismatches(LF.fully_connected(x, w, b, HOST_L1D), with_bias) == 0
    assert mismatches(LF.fully_connected(x, w, None, HOST_L1D), without) == 0


def test_deep_products_are_blocked_by_the_cpus_l1_size():
    """Both sizes are real: with the other CPU kind's L1 the deep products come out otherwise, and
    only this machine's matches LiteRT here (the depth-1536 layer: blocks of 680 or 1020)."""
    rng = np.random.default_rng(256 * 7919 + 384 * 31 + 1536)
    x, w = spread(rng, (256, 1536)), spread(rng, (384, 1536))
    ref = run_builtin(fully_connected_model(256, 384, 1536, False), [x, w])[0]
    assert mismatches(LF.fully_connected(x, w, None, HOST_L1D), ref) == 0
    assert mismatches(LF.fully_connected(x, w, None, OTHER_L1D), ref) > 0
    assert LF.blocks_differ(1536, 384, 256, 32 * 1024, 48 * 1024)
    assert not LF.blocks_differ(384, 1536, 256, 32 * 1024, 48 * 1024)  # depth 384: one block on both


def test_fully_connected_on_random_shapes_matches_litert():
    rng = np.random.default_rng(7)
    bad = []
    for t in range(120):
        rows = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 33, 64, 65]))
        out = int(rng.integers(1, 40))
        k = int(rng.integers(1, 300)) if t % 6 else int(rng.integers(600, 1800))
        x, w = spread(rng, (rows, k)), spread(rng, (out, k))
        if mismatches(LF.fully_connected(x, w, None, HOST_L1D), run_builtin(fully_connected_model(rows, out, k, False), [x, w])[0]):
            bad.append((rows, out, k))
    assert not bad


def test_fully_connected_constant_weights_and_special_values_match_litert():
    """Constant weights take the same kernel; infinities clamp to +-FLT_MAX (the activation range
    of NONE), a NaN stays."""
    rng = np.random.default_rng(8)
    x, w, b = spread(rng, (8, 16)), np.abs(spread(rng, (12, 16))) * F32(1e10), spread(rng, (12,))
    x[0, 0], x[1, 0], x[2] = np.inf, np.nan, 1e30
    model = fully_connected_model(8, 12, 16, True, const_weights=w, const_bias=b)
    ref = run_builtin(model, [x])[0]
    assert ref[0, 0] == FLT_MAX and ref[2, 0] == FLT_MAX and np.isnan(ref[1]).all()
    with np.errstate(all="ignore"):
        assert mismatches(LF.fully_connected(x, w, b, HOST_L1D), ref) == 0


def batch_matmul_model(a_shape, b_shape, adj_x, adj_y):
    a_rows = a_shape[-1] if adj_x else a_shape[-2]
    b_cols = b_shape[-2] if adj_y else b_shape[-1]
    out = np.broadcast_shapes(a_shape[:-2], b_shape[:-2]) + (a_rows, b_cols)
    opts = S.BatchMatMulOptionsT()
    opts.adjX, opts.adjY = adj_x, adj_y
    return single_op_model(S.BuiltinOperator.BATCH_MATMUL, [Input(a_shape), Input(b_shape)], [out], opts,
                           S.BuiltinOptions.BatchMatMulOptions)


# the zoo's attention (head_dim 16 and 32, seq 32 / 64, 4 heads) and shapes no GEMM blocks evenly
BMM_SHAPES = [((4, 64, 16), (4, 16, 64), False, False), ((4, 64, 64), (4, 64, 16), False, False),
              ((1, 4, 32, 16), (1, 4, 32, 16), False, True), ((4, 32, 32), (4, 32, 16), False, False),
              ((4, 1, 16), (4, 16, 5), False, False), ((4, 5, 16), (4, 16, 1), False, False),
              ((2, 3, 700), (2, 700, 9), False, False), ((4, 16, 7), (4, 16, 9), True, False),
              ((3, 5, 7), (1, 7, 6), False, False)]


@pytest.mark.parametrize("a_shape, b_shape, adj_x, adj_y", BMM_SHAPES)
def test_batch_matmul_matches_litert(a_shape, b_shape, adj_x, adj_y):
    rng = np.random.default_rng(len(a_shape) * 100 + a_shape[-1])
    a, b = spread(rng, a_shape), spread(rng, b_shape)
    ref = run_builtin(batch_matmul_model(a_shape, b_shape, adj_x, adj_y), [a, b])[0]
    a = np.swapaxes(a, -1, -2) if adj_x else a
    b = np.swapaxes(b, -1, -2) if adj_y else b
    assert mismatches(LF.batch_matmul(a, b), ref) == 0


# ---- TANH, LOGISTIC, EXP --------------------------------------------------------------------------

ONE_INPUT = {"tanh": (S.BuiltinOperator.TANH, LF.tanh), "logistic": (S.BuiltinOperator.LOGISTIC, LF.logistic),
             "exp": (S.BuiltinOperator.EXP, LF.exp_op), "log": (S.BuiltinOperator.LOG, LF.log_op)}
SPECIAL = np.float32([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 7.9073896, -7.9073896, 7.91, 16.6355324, 16.64,
                      -103.28, -103.5, -103.97, -103.98, -104, -104.1, 88.72, 88.73, 88.0, -88.0])


def one_input_interpreter(op: str, n: int):
    return interpreter(single_op_model(ONE_INPUT[op][0], [Input((n,))], [(n,)]))


def patterns(start: int, count: int, step: int) -> np.ndarray:
    return ((np.arange(count, dtype=np.uint64) * np.uint64(step) + np.uint64(start)) % np.uint64(ALL_PATTERNS)) \
        .astype(np.uint32).view(F32)


@pytest.mark.parametrize("op", list(ONE_INPUT))
def test_one_input_functions_match_litert_on_sampled_bit_patterns(op):
    """2^23 patterns 511 apart and the special values, in tensors whose length leaves LOGISTIC a
    scalar tail of three values."""
    n = CHUNK + 3
    interp = one_input_interpreter(op, n)
    emulate = ONE_INPUT[op][1]
    for c in range(2):
        x = patterns(c * n * 511, n, 511)
        x[:SPECIAL.size] = SPECIAL
        x[-SPECIAL.size:] = SPECIAL[::-1]
        assert mismatches(emulate(x), run_builtin(interp, [x])[0]) == 0


def test_logistic_tail_takes_the_scalar_formula():
    """The values after the last whole packet of a tensor go through libm's expf: for lengths 1
    to 7 they differ from the packet formula somewhere, and the emulation follows each."""
    rng = np.random.default_rng(12)
    for n in range(1, 8):
        interp = one_input_interpreter("logistic", n)
        for _ in range(100):
            x = (rng.standard_normal(n) * 8).astype(F32)
            assert mismatches(LF.logistic(x), run_builtin(interp, [x])[0]) == 0


def test_exp_op_is_not_softmaxs_exp():
    """EXP is libm's expf per value, SOFTMAX's exp is Eigen's pexp_float: they differ."""
    x = np.linspace(-20, 20, 100_001, dtype=F32)
    ref = run_builtin(one_input_interpreter("exp", x.size), [x])[0]
    assert mismatches(LF.exp_op(x), ref) == 0
    assert mismatches(LF.exp(x), ref) > 1000


@pytest.mark.slow
@pytest.mark.parametrize("op", list(ONE_INPUT))
def test_one_input_functions_match_litert_on_every_bit_pattern(op):
    interp = one_input_interpreter(op, CHUNK)
    emulate = ONE_INPUT[op][1]
    for start in range(0, ALL_PATTERNS, CHUNK):
        x = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32).view(F32)
        assert mismatches(emulate(x), run_builtin(interp, [x])[0]) == 0, hex(start)


# ---- reductions and L2_NORMALIZATION ------------------------------------------------------------------

REDUCTIONS = {"sum": (S.BuiltinOperator.SUM, LF.reduce_sum), "mean": (S.BuiltinOperator.MEAN, LF.reduce_mean),
              "max": (S.BuiltinOperator.REDUCE_MAX, LF.reduce_max)}
# mean pooling (axis 1), LayerNorm rows, rows of widths that are not multiples of four (MEAN's
# alignment heads), one-row tensors (MEAN's sequential sum), axes apart and together
REDUCE_CASES = [((1, 64, 64), (1,)), ((1, 32, 64), (2,)), ((1, 64, 5), (2,)), ((7, 13), (1,)), ((3, 5, 7), (2,)),
                ((1, 1, 64), (2,)), ((1, 64), (1,)), ((1, 64), (-1,)), ((2, 3, 4, 5), (0, 2)), ((2, 3, 4, 5), (1, 3)),
                ((4, 9), (0, 1)), ((1, 64, 64), (0, 1)), ((5, 7), (0,)), ((6, 31), (1,)), ((3, 2, 6), (1, 2)),
                ((4, 1, 6), (2,))]


@pytest.mark.parametrize("kind", list(REDUCTIONS))
@pytest.mark.parametrize("shape, axes", REDUCE_CASES)
def test_reductions_match_litert(kind, shape, axes):
    code, emulate = REDUCTIONS[kind]
    opts = S.ReducerOptionsT()
    opts.keepDims = True
    out = tuple(1 if (a in axes or a - len(shape) in axes) else d for a, d in enumerate(shape))
    interp = interpreter(single_op_model(code, [Input(shape), Const(np.array(axes, np.int32))], [out], opts,
                                         S.BuiltinOptions.ReducerOptions))
    rng = np.random.default_rng(sum(shape) * 10 + len(axes))
    for t in range(10):
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(F32)
        if t == 0:
            x.flat[::3] = np.nan
        if t == 1:
            x.flat[::2] = -0.0
        assert mismatches(emulate(x, axes), run_builtin(interp, [x])[0]) == 0


@pytest.mark.parametrize("shape", [(1, 64), (4, 64), (3, 7), (1, 384), (2, 3, 5)])
def test_l2_normalization_matches_litert(shape):
    interp = interpreter(single_op_model(S.BuiltinOperator.L2_NORMALIZATION, [Input(shape)], [shape],
                                         S.L2NormOptionsT(), S.BuiltinOptions.L2NormOptions))
    rng = np.random.default_rng(len(shape))
    for t in range(20):
        x = (rng.standard_normal(shape) * np.exp2(rng.integers(-10, 10, shape))).astype(F32)
        if t < 2:
            x[...] = (0.0, 1e-8)[t]  # norms below epsilon
        if t == 2:
            x.flat[0] = np.inf
        with np.errstate(all="ignore"):
            assert mismatches(LF.l2_normalization(x), run_builtin(interp, [x])[0]) == 0


# ---- the fixtures, op by op ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", TFLITE_F32 + TF_DQ8, ids=fixture_id)
def test_every_emulated_float_op_of_a_fixture_matches_litert(path):
    """FULLY_CONNECTED (float weights), BATCH_MATMUL, TANH, MEAN, SUM, L2_NORMALIZATION, ...
    recomputed from LiteRT's preserved inputs on a random window."""
    tally = zoo_ops.check_file(require(path))
    assert tally, "no emulated op in the file"
    bad = {key: counts for key, counts in tally.items() if counts[0]}
    assert not bad


# ---- elementwise kernels, as they are -----------------------------------------------------------------

def elementwise_inputs() -> tuple[np.ndarray, np.ndarray]:
    """Every pair of special values, then random magnitudes and random bit patterns."""
    rng = np.random.default_rng(9)
    special = np.float32([0, -0.0, 1, -1, np.inf, -np.inf, np.nan, FLT_MAX, -FLT_MAX, 1e-45, -1e-45, 3e38, 0.5, 1e20, -1e20])
    a = np.concatenate([np.repeat(special, special.size), spread(rng, 20_000),
                        rng.integers(0, ALL_PATTERNS, 100_000, dtype=np.uint64).astype(np.uint32).view(F32)])
    b = np.concatenate([np.tile(special, special.size), spread(rng, 20_000),
                        rng.integers(0, ALL_PATTERNS, 100_000, dtype=np.uint64).astype(np.uint32).view(F32)])
    return a, b


def clamped(y):
    """std::min(std::max(y, lowest), max): the activation range of NONE (a NaN stays)."""
    y = np.where(y < -FLT_MAX, -FLT_MAX, y)
    return np.where(FLT_MAX < y, FLT_MAX, y).astype(F32)


ELEMENTWISE = {
    "SQRT": lambda a, b: np.sqrt(a),
    "RSQRT": lambda a, b: (F32(1) / np.sqrt(a)).astype(F32),
    "ABS": lambda a, b: np.abs(a),
    "NEG": lambda a, b: -a,
    "DIV": lambda a, b: clamped(a / b),
    "ADD": lambda a, b: clamped(a + b),
    "SUB": lambda a, b: clamped(a - b),
    "MUL": lambda a, b: clamped(a * b),
    "MAXIMUM": lambda a, b: np.where(a > b, a, b),
    "MINIMUM": lambda a, b: np.where(a < b, a, b),
    "SQUARED_DIFFERENCE": lambda a, b: ((a - b) * (a - b)).astype(F32),
}
UNARY = {"SQRT", "RSQRT", "ABS", "NEG"}


@pytest.mark.parametrize("name", list(ELEMENTWISE))
def test_elementwise_kernel_is_this_ieee_expression(name):
    """SQRT, RSQRT (1 / sqrt), ABS, NEG and SQUARED_DIFFERENCE ((a - b) * (a - b)) are the plain
    IEEE operations; ADD, SUB, MUL and DIV clamp to +-FLT_MAX (their NONE activation range), so
    an infinity becomes FLT_MAX; MAXIMUM is `a > b ? a : b` and MINIMUM `a < b ? a : b` (a tie
    of -0 and +0, or a NaN, gives b), not std::max / std::min."""
    a, b = elementwise_inputs()
    code = getattr(S.BuiltinOperator, name)
    inputs = [Input(a.shape)] if name in UNARY else [Input(a.shape), Input(b.shape)]
    ref = run_builtin(single_op_model(code, inputs, [a.shape]), [a] if name in UNARY else [a, b])[0]
    with np.errstate(all="ignore"):
        assert mismatches(ELEMENTWISE[name](a, b), ref) == 0


def test_pow_with_an_integer_scalar_exponent_is_repeated_multiplication():
    """POW by a one-value exponent within 1e-5 of an integer n >= 1 is IntegerExponentPow:
    repeated MUL, each product clamped (2: x * x, 3: x * (x * x)); any other exponent, and an
    exponent tensor of x's shape, is libm's powf, which is not x * x for every x."""
    rng = np.random.default_rng(10)
    x = np.concatenate([rng.integers(0, ALL_PATTERNS, 1 << 20, dtype=np.uint64).astype(np.uint32).view(F32),
                        (rng.standard_normal(1 << 18) * 4).astype(F32), np.float32([0, -0.0, np.inf, -np.inf, np.nan])])
    with np.errstate(all="ignore"):
        square = clamped(x * x)
        for exponent, expected in ((2.0, square), (2.000001, square), (3.0, clamped(x * square)), (1.0, x)):
            model = single_op_model(S.BuiltinOperator.POW, [Input(x.shape), Const(np.float32([exponent]))], [x.shape])
            assert mismatches(expected, run_builtin(model, [x])[0]) == 0, exponent
        model = single_op_model(S.BuiltinOperator.POW, [Input(x.shape), Input(x.shape)], [x.shape])
        assert mismatches((x * x).astype(F32), run_builtin(model, [x, np.full_like(x, 2.0)])[0]) > 0


# ---- which CPU's blocking a program follows -----------------------------------------------------

def test_a_program_follows_the_l1_size_it_was_compiled_for():
    """The committed golden (32 KiB) is reproduced by the program for 32 KiB and not by the one
    for 48 KiB, on the fixture whose FFN is 1536 deep; the size is in the program's summary."""
    from porter.check.golden import load_golden
    from porter.frontends import load_graph
    from porter.recover.encoder import recover_encoder
    from porter.reference import execute

    path = require(TFLITE_F32[0])
    golden = load_golden(REPO / "golden" / f"{path.name}.builtin.npz")
    w = int(np.argmax(golden.live))  # the fullest window
    rows = int(golden.live[w])
    for l1d, exact in ((32 * 1024, True), ("48K", False)):
        program = recover_encoder(load_graph(path), l1d=l1d)
        ours = execute.run(program, golden.ids[w], golden.attention_mask[w])[:rows]
        assert np.array_equal(ours, golden.logits[w][:rows]) == exact, l1d
    assert program.summary()["eigen_l1d"] == 48 * 1024


def test_verify_refuses_a_golden_whose_l1_size_blocks_a_layer_otherwise(tmp_path):
    from porter.check.golden import load_golden
    from porter.check.modules import Module
    from porter.check.verify import check_same_blocking
    from porter.errors import PorterError

    golden = load_golden(REPO / "golden" / f"{TFLITE_F32[0].name}.builtin.npz")  # no size recorded: 32 KiB
    module = Module(tmp_path / "m.wasm", tmp_path / "compiled", "encoder", 256, 9, TFLITE_F32[0], "", None,
                    48 * 1024, ((384, 1536), (1536, 384)))
    with pytest.raises(PorterError, match="32 KiB L1 data cache.*depth 1536.*--l1d 32K"):
        check_same_blocking(module, golden)
    shallow = Module(tmp_path / "m.wasm", tmp_path / "compiled", "encoder", 256, 9, TFLITE_F32[0], "", None,
                     48 * 1024, ((384, 384), (384, 600)))
    check_same_blocking(shallow, golden)  # depths under 680 are one block on both


def test_the_l1_size_comes_from_sysfs_and_is_refused_where_it_means_nothing(tmp_path):
    for index, (level, kind, size) in enumerate([("1", "Instruction", "32K"), ("1", "Data", "48K"), ("2", "Unified", "2048K")]):
        directory = tmp_path / f"index{index}"
        directory.mkdir()
        for name, value in (("level", level), ("type", kind), ("size", size)):
            (directory / name).write_text(value + "\n")
    assert LF.host_l1d_bytes(str(tmp_path)) == 48 * 1024
    assert LF.host_l1d_bytes(str(tmp_path / "nothing")) == LF.EIGEN_L1_BYTES
    assert LF.parse_cache_size("32K") == 32768 and LF.parse_cache_size("49152") == 49152
    assert LF.golden_l1d({"cpu_l1d_bytes": 49152}) == 49152 and LF.golden_l1d({}) == 32768
    from fixtures import assert_one_line_error, run_porter, spec

    assert_one_line_error(run_porter("compile", require(spec.TINY.path("f32.onnx")), "-o", tmp_path / "o", "--l1d", "48K"),
                          "--l1d 48K", "--ort-cpu")
    assert_one_line_error(run_porter("compile", require(spec.TINY.path("f32.tflite")), "-o", tmp_path / "o", "--l1d", "lots"),
                          "--l1d lots", "not a cache size")


def test_run_against_a_golden_made_here_takes_its_cpus_blocking(tmp_path):
    """A golden `porter golden` makes records the CPU (flags and L1 size); `porter run` of a
    TFLite model against it reproduces it, taking the L1 size and no onnxruntime target."""
    from fixtures import run_porter, spec

    model = require(spec.TINY.path("f32.tflite"))
    made = run_porter("golden", model, "--random", "2", "-o", tmp_path / "g")
    assert made.returncode == 0, made.stderr
    assert json.loads((tmp_path / "g.json").read_text())["cpu_l1d_bytes"] == HOST_L1D
    result = run_porter("run", model, "--golden", tmp_path / "g.npz")
    assert result.returncode == 0, result.stderr
    assert "max |dlogit| 0," in result.stdout.splitlines()[-1]
