"""The forward crate's kernel checks (templates/rust_forward/checks), run in wasm.

- SIMD against scalar: GELU (exact and tanh), LiteRT's TANH and LOGISTIC, SOFTMAX's exp and row
  quantisation over f32 bit patterns (a sample by default, all 2^32 with `-m slow`), 20,000 awkward random rows per
  quantisation scheme, every int8 value widened under 20,000 scales (weight-only int8), and the
  other kernels (GEMM, attention, Eigen sums, float Linear) on
  random shapes.
- onnxruntime's one-input functions (erf, its two GELU spellings, FastGelu, softmax's exp as its AVX2 and
  its AVX-512F kernel scale it) four lanes at a time with relaxed_madd against their scalar
  emulation, in a crate built as ONNX crates are; sampled by default, erf and both exps over all
  2^32 with `-m slow`.
- The scalar references against porter's numpy definitions (porter.reference.quant, porter.reference.litert.floats,
  porter.reference.ort.floats). onnxruntime's scalar erf and exps, and LiteRT's tanh, logistic and EXP
  (glibc's expf), are compared with numpy over every f32 bit pattern with `-m slow` (erf 26
  minutes, each exp 9 minutes on this machine; GELU adds only IEEE divisions and products to erf,
  the logistic's scalar tail only e / (1 + e) to expf). The float Linear, the reductions and
  L2_NORMALIZATION are compared on shapes that take each of their paths.
- Mutation: a copy of the crate with one comparison flipped in a SIMD kernel, or one constant
  changed in a scalar one, must fail its check.
"""

import struct
from pathlib import Path

import numpy as np
import pytest

from fixtures import require, spec
from porter.reference.litert import floats as LF
from porter.reference.ort import floats as OF
from porter.reference import quant
from porter.reference.ort.cpu import AVX2_FLOATS, AVX512_FLOATS
from porter.codegen.encoder import build_forward_crate, render_forward_crate
from porter.codegen.compile import recover

ALL_PATTERNS = 1 << 32
EXHAUSTIVE_CHUNKS = 4  # separate runs, so each stays well inside its timeout
CHUNK_TIMEOUT_S = 3600


def render_checks_crate(directory: Path, fixture: str = "litert-dq8.tflite") -> Path:
    """Kernels do not depend on the model: any fixture's crate carries the same checks. An ONNX
    fixture's crate is built with relaxed_madd (the fused-madd feature), a TFLite one without."""
    return render_forward_crate(recover(require(spec.TINY.path(fixture))), directory)


@pytest.fixture(scope="session")
def checks_wasm(toolchain, tmp_path_factory) -> Path:
    """Built as a TFLite model's crate is: LiteRT's kernels compile as they are deployed."""
    crate = render_checks_crate(tmp_path_factory.mktemp("checks") / "crate")
    return build_forward_crate(crate, toolchain, checks=True)


@pytest.fixture(scope="session")
def ort_checks_wasm(toolchain, tmp_path_factory) -> Path:
    """Built as an ONNX model's crate is, with relaxed_madd for onnxruntime's products."""
    crate = render_checks_crate(tmp_path_factory.mktemp("ort-checks") / "crate", "dq8pc.onnx")
    return build_forward_crate(crate, toolchain, checks=True)


def run_check(wasm_runtime, wasm, *args, timeout_s=600):
    result = wasm_runtime.run_command(wasm, [str(a) for a in args], timeout_s=timeout_s)
    return result.exit_code, result.stdout.decode()


def assert_check_passes(wasm_runtime, wasm, *args, timeout_s=600) -> str:
    code, out = run_check(wasm_runtime, wasm, *args, timeout_s=timeout_s)
    print(out.strip())
    assert code == 0, out
    assert " 0 mismatches" in out
    return out


# ---- SIMD against scalar, sampled (default suite) ----------------------------------------------

# A stride coprime with 2^32 visits patterns from every exponent, sign and NaN payload range.
SAMPLE_STRIDE = 4099
# Another one that also scatters the four lanes of each vector across exponents and signs, so
# that vectors mix lanes taking different paths (neighbours 4099 apart mostly share an exponent).
SCATTER_STRIDE = 0x9E3779B9


ONE_INPUT_KERNELS = ["gelu", "litert-fn tanh", "litert-fn logistic", "litert-fn gelu-tanh", "litert-fn exp", "quant sym",
                     "quant asym"]


@pytest.mark.parametrize("stride", [SAMPLE_STRIDE, SCATTER_STRIDE])
@pytest.mark.parametrize("kernel", ONE_INPUT_KERNELS)
def test_simd_matches_scalar_on_sampled_bit_patterns(checks_wasm, wasm_runtime, kernel, stride):
    assert_check_passes(wasm_runtime, checks_wasm, *kernel.split(), 0, ALL_PATTERNS // SAMPLE_STRIDE, stride)


@pytest.mark.parametrize("kernel", ["gelu", "quant sym", "quant asym"])
def test_simd_matches_scalar_around_special_values(checks_wasm, wasm_runtime, kernel):
    """Every pattern near 0.5 (rounding ties), 1.0, 127, infinity and the quiet NaNs, both signs."""
    for centre in (0x3F000000, 0x3F800000, 0x42FE0000, 0x7F800000, 0x7FC00000):
        for sign in (0, 0x80000000):
            start = (centre | sign) - 2048
            assert_check_passes(wasm_runtime, checks_wasm, *kernel.split(), start, 4096, 1)


# tanh's clamp, the logistic's upper and lower cut-offs (the lower one exp's too), exp's clamp and
# its last normal power of two (m = -126 | -127), 0 and the subnormals, infinity, the quiet NaNs
LITERT_CENTRES = (0x40FD0956, 0x41851592, 0x42D00000, 0x42B1722D, 0x42AEAC4F, 0x00000000, 0x7F800000, 0x7FC00000)


@pytest.mark.parametrize("function", ["tanh", "logistic", "gelu-tanh", "exp"])
def test_litert_function_lanes_match_scalar_around_special_values(checks_wasm, wasm_runtime, function):
    for centre in LITERT_CENTRES:
        for sign in (0, 0x80000000):
            start = ((centre | sign) - 2048) % ALL_PATTERNS
            assert_check_passes(wasm_runtime, checks_wasm, "litert-fn", function, start, 4096, 1)


ORT_FUNCTIONS_X4 = ["erf", "gelu", "gelu-mul", "fast-gelu", "exp", "exp-scalef"]
# erf's polynomial switch, exp's input clamp, exp's last normal power of two (m = -126 | -127),
# 0 and the subnormals, 1, infinity, the quiet NaNs
ORT_CENTRES = (0x3F6C0000, 0x42B0C0A5, 0x42AF5DC2, 0x00000000, 0x3F800000, 0x7F800000, 0x7FC00000)


def assert_fused_check_passes(wasm_runtime, wasm, *args, timeout_s=600):
    """The check passed, and compared relaxed_madd lanes (not the scalar path with itself)."""
    out = assert_check_passes(wasm_runtime, wasm, *args, timeout_s=timeout_s)
    assert "fused=true" in out, "this engine does not fuse f32x4.relaxed_madd: the lanes went unchecked"


@pytest.mark.parametrize("function", ORT_FUNCTIONS_X4)
def test_onnxruntime_function_lanes_match_scalar_on_sampled_bit_patterns(ort_checks_wasm, wasm_runtime, function):
    assert_fused_check_passes(wasm_runtime, ort_checks_wasm, "ort-fn", function, 0, ALL_PATTERNS // SAMPLE_STRIDE,
                              SAMPLE_STRIDE)


@pytest.mark.parametrize("function", ORT_FUNCTIONS_X4)
def test_onnxruntime_function_lanes_match_scalar_around_special_values(ort_checks_wasm, wasm_runtime, function):
    for centre in ORT_CENTRES:
        for sign in (0, 0x80000000):
            start = ((centre | sign) - 2048) % ALL_PATTERNS
            assert_fused_check_passes(wasm_runtime, ort_checks_wasm, "ort-fn", function, start, 4096, 1)


SUBNORMAL_PATTERNS = 1 << 24  # sign and 23-bit significand


def test_softmax_scaling_of_subnormals_matches_the_multiply_on_sampled_patterns(ort_checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, ort_checks_wasm, "ort-scale", 1, SUBNORMAL_PATTERNS // 97, 97)


@pytest.mark.slow
def test_softmax_scaling_of_subnormals_matches_the_multiply_on_every_pattern(ort_checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, ort_checks_wasm, "ort-scale", 0, SUBNORMAL_PATTERNS, 1)


@pytest.mark.parametrize("scheme", ["sym", "asym"])
def test_quantisation_matches_scalar_on_random_rows(checks_wasm, wasm_runtime, scheme):
    assert_check_passes(wasm_runtime, checks_wasm, "quant-random", scheme, 7, 20_000)


def test_weight_only_int8_widening_matches_scalar_for_every_value(checks_wasm, wasm_runtime):
    """Rows that run through all 256 int8 values under 20,000 random finite scales."""
    assert_check_passes(wasm_runtime, checks_wasm, "dequant", 5, 20_000)


def test_scalar_weight_only_int8_widening_matches_numpy(checks_wasm, wasm_runtime):
    """Every int8 value under random scales of every exponent (porter.reference.ops' fold)."""
    from porter.ir.encoder import Reference
    from porter.reference.ops import evaluate

    rng = np.random.default_rng(29)
    scales = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scales = np.concatenate([scales[np.isfinite(scales)], np.float32([1.0, 1e-45, 3.4028235e38, -0.0])])
    values = np.arange(-128, 128, dtype=np.int8)
    rows = np.concatenate([scales[:, None], np.broadcast_to(values.astype(np.float32), (scales.size, 256))], 1)
    got = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "dequant", rows), "<f4").reshape(-1, 256)
    attrs = {"scale": scales, "zero_point": np.zeros(scales.size, np.int64), "axis": 0}
    with np.errstate(over="ignore"):  # scales near the float32 maximum overflow to infinity, as in the kernel
        want = evaluate("dequantize", attrs, [np.broadcast_to(values, (scales.size, 256))], Reference.LITERT_BUILTIN)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_float16_widening_matches_scalar_for_every_half(checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, checks_wasm, "halves", 0, 1 << 16)


def test_scalar_float16_widening_matches_numpy_for_every_half(checks_wasm, wasm_runtime):
    """Every one of the 65536 halves, against numpy's IEEE binary16 (NaNs as NaNs)."""
    halves = np.arange(1 << 16, dtype=np.uint16)
    got = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "halves", halves.astype(np.float32)[None]), "<f4")
    want = halves.view(np.float16).astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), want[~nan].view(np.uint32))


def test_int4_unpacking_matches_scalar_for_every_byte(checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, checks_wasm, "int4")


def test_scalar_int4_unpacking_reads_porters_packing_for_every_byte(checks_wasm, wasm_runtime):
    """Every pair of int4 values (so all 256 bytes), packed by porter's packer and unpacked by the
    scalar kernel, with the pairs in different lanes of their blocks."""
    from porter.codegen.pack import pack_int4

    pairs = np.array([(low, high) for low in range(-8, 8) for high in range(-8, 8)], np.int8)
    # 16 blocks of 32 values: value i and value 16 + i of block j are pair 16j + i
    blocks = pairs.reshape(16, 16, 2).transpose(0, 2, 1)
    assert sorted(pack_int4(blocks.reshape(-1)).tolist()) == list(range(256))
    for shift in (0, 5):
        values = np.roll(blocks, shift, axis=2).reshape(-1)
        rows = pack_int4(values).astype(np.float32)[None]
        got = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "int4", rows), "<f4")
        assert np.array_equal(got, values.astype(np.float32))


def test_gemm_attention_sums_and_float_linear_match_scalar(checks_wasm, ort_checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, checks_wasm, "kernels", 11)
    # onnxruntime's products: relaxed_madd tiles against the exact scalar emulation
    assert_check_passes(wasm_runtime, ort_checks_wasm, "kernels", 11)


# ---- SIMD against scalar, exhaustive (-m slow) ---------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(EXHAUSTIVE_CHUNKS))
@pytest.mark.parametrize("kernel", ONE_INPUT_KERNELS)
def test_simd_matches_scalar_on_every_bit_pattern(checks_wasm, wasm_runtime, kernel, chunk):
    size = ALL_PATTERNS // EXHAUSTIVE_CHUNKS
    assert_check_passes(wasm_runtime, checks_wasm, *kernel.split(), chunk * size, size, 1,
                        timeout_s=CHUNK_TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(EXHAUSTIVE_CHUNKS))
@pytest.mark.parametrize("function", ["erf", "exp", "exp-scalef", "fast-gelu"])  # GELU adds only IEEE steps around erf
def test_onnxruntime_function_lanes_match_scalar_on_every_bit_pattern(ort_checks_wasm, wasm_runtime, function, chunk):
    size = ALL_PATTERNS // EXHAUSTIVE_CHUNKS
    assert_fused_check_passes(wasm_runtime, ort_checks_wasm, "ort-fn", function, chunk * size, size, 1,
                              timeout_s=CHUNK_TIMEOUT_S)


# ---- scalar references against numpy ---------------------------------------------------------------

def scalar_reference(wasm_runtime, wasm, op, x: np.ndarray) -> bytes:
    x = np.ascontiguousarray(x, dtype="<f4")
    rows, cols = x.shape
    stdin = struct.pack("<II", rows, cols) + x.tobytes()
    result = wasm_runtime.run_command(wasm, ["reference", op], stdin)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def interesting_floats(rng, n) -> np.ndarray:
    """Random magnitudes over the whole exponent range plus the special values."""
    special = np.array([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 11.0, -11.0, 88.7, 89.0, -104.0, -105.0,
                        1e-40, -1e-40, np.inf, -np.inf, np.float32(3.4028235e38)], np.float32)
    spread = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 8, n))).astype(np.float32)
    bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    bits = bits[np.isfinite(bits)]
    return np.concatenate([special, spread, bits])


def assert_same_floats(ours: np.ndarray, theirs: np.ndarray):
    both_nan = np.isnan(ours) & np.isnan(theirs)
    same = (ours.view(np.uint32) == theirs.view(np.uint32)) | both_nan
    assert same.all(), (np.flatnonzero(~same)[:5], ours[~same][:5], theirs[~same][:5])


LITERT_FUNCTIONS = {"gelu": LF.gelu_exact, "gelu-tanh": LF.gelu_tanh, "exp": LF.exp, "erfc": LF.erfc, "tanh": LF.tanh,
                    "logistic": LF.logistic_packet, "logistic-tail": LF.logistic_scalar, "exp-op": LF.exp_op}
# tanh's clamp, the logistic's cut-offs, glibc expf's overflow and underflow thresholds
LITERT_EDGES = np.uint32([0x40FD0956, 0x40FD0955, 0x41851592, 0x41851593, 0xC2D00000, 0x42B17217, 0x42B17218,
                          0xC2CFF1B4, 0xC2CFF1B5, 0xC2CE8ECF, 0xC2CE8ED0]).view(np.float32)


@pytest.mark.parametrize("op", list(LITERT_FUNCTIONS))
def test_scalar_float_functions_match_numpy(checks_wasm, wasm_runtime, op):
    x = interesting_floats(np.random.default_rng(1), 200_000)
    x = np.concatenate([x, np.linspace(-120, 120, 100_001, dtype=np.float32), LITERT_EDGES, -LITERT_EDGES])
    ours = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, op, x[None, :]), "<f4")
    with np.errstate(all="ignore"):
        assert_same_floats(ours, LITERT_FUNCTIONS[op](x).astype(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["tanh", "logistic", "exp-op", "gelu-tanh"])  # the logistic's tail is expf then IEEE steps
def test_scalar_litert_functions_match_numpy_on_every_bit_pattern(checks_wasm, wasm_runtime, op):
    chunk = 1 << 24
    for start in range(0, ALL_PATTERNS, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        ours = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, op, x[None, :]), "<f4")
        with np.errstate(all="ignore"):
            assert_same_floats(ours, LITERT_FUNCTIONS[op](x).astype(np.float32))


def test_scalar_logistic_of_whole_tensors_matches_numpy(checks_wasm, wasm_runtime):
    """Each row a tensor: the packet formula, then the scalar one on the last len % 4 values."""
    rng = np.random.default_rng(6)
    for cols in (1, 2, 3, 4, 5, 7, 8, 67):
        x = (rng.standard_normal((300, cols)) * 8).astype(np.float32)
        ours = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "logistic-rows", x), "<f4").reshape(x.shape)
        assert_same_floats(ours, np.stack([LF.logistic(row) for row in x]))


def reference_with_args(wasm_runtime, wasm, op, data: np.ndarray, *args) -> np.ndarray:
    data = np.ascontiguousarray(data, dtype="<f4").reshape(1, -1)
    stdin = struct.pack("<II", *data.shape) + data.tobytes()
    result = wasm_runtime.run_command(wasm, ["reference", op, *map(str, args)], stdin)
    assert result.exit_code == 0, result.stderr
    return np.frombuffer(result.stdout, "<f4")


def _int4_case(rng, rows, outs, k, bias):
    x = (rng.standard_normal((rows, k)) * np.exp2(rng.integers(-6, 7, (rows, 1)))).astype(np.float32)
    x[rng.random((rows, k)) < 0.05] = 0.0
    if rows > 1:
        x[0] = 0.0  # an all-zero row: scale 1, q 0
    w = rng.integers(-7, 8, (outs, k)).astype(np.int8)
    w_scale = (rng.random(outs) * 0.1 + 1e-3).astype(np.float32)
    b = (rng.standard_normal(outs) * 0.1).astype(np.float32) if bias else None
    return x, w, w_scale, b


def _int4_mismatches(wasm_runtime, wasm) -> list:
    """LiteRT's 4-bit layer (quant.int4_fully_connected) against the scalar kernel on random
    shapes, with and without a bias: the shapes whose outputs differ in any bit."""
    rng = np.random.default_rng(41)
    bad = []
    for t in range(60):
        # the 4-bit kernels' domain (quant.uses_4bit_kernels); smaller layers run the int8 GEMM
        rows, outs = int(rng.integers(1, 9)), int(rng.integers(4, 13))
        k = int(rng.choice([32, 34, 64, 96, 128, 300]))
        x, w, w_scale, b = _int4_case(rng, rows, outs, k, bias=t % 2 == 0)
        data = np.concatenate([x.ravel(), w.astype(np.float32).ravel(), w_scale] + ([b] if b is not None else []))
        ours = reference_with_args(wasm_runtime, wasm, "int4-linear", data, rows, outs, int(b is not None))
        want = quant.int4_fully_connected(x, w, w_scale, b)
        if not np.array_equal(ours.view(np.uint32), want.ravel().view(np.uint32)):
            bad.append((rows, outs, k))
    return bad


def test_scalar_int4_linear_matches_numpy(checks_wasm, wasm_runtime):
    """The int4 output's float steps are what only this compares (SIMD and scalar share them)."""
    assert _int4_mismatches(wasm_runtime, checks_wasm) == []


@pytest.mark.slow
def test_mutated_int4_output_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    """The offset's term with the two scales multiplied first (the int8 layer's order, not the
    4-bit kernels'): the numpy comparison must see it."""
    mutant = build_mutant(toolchain, tmp_path, "litert-dq8.tflite", "src/kernels/common/gemm.rs",
                          "let first = offset as f32 * row_scale * self.scale_of(o);",
                          "let first = offset as f32 * (row_scale * self.scale_of(o));")
    assert _int4_mismatches(wasm_runtime, mutant)


def test_scalar_float_linear_matches_numpy(checks_wasm, wasm_runtime):
    """The first rows of tensors of 1 to 64 rows (the live rows the forward pass computes)
    against litert.fully_connected on the whole tensor: every Eigen product, every GEBP block
    and a depth in blocks (the crate's, this machine's L1 data cache size: compiled with auto)."""
    rng = np.random.default_rng(13)
    for t in range(150):
        tensor_rows = int(rng.choice([1, 2, 3, 5, 8, 13, 33, 64]))
        live = int(rng.integers(1, tensor_rows + 1))
        outs = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 64]))
        k = int(rng.choice([1, 3, 4, 5, 8, 13, 16, 17, 31, 64, 100, 700, 1536]))
        scale = lambda shape: np.exp2(rng.integers(-6, 7, shape))  # noqa: E731
        x = (rng.standard_normal((tensor_rows, k)) * scale((tensor_rows, k))).astype(np.float32)
        w = (rng.standard_normal((outs, k)) * scale((outs, k))).astype(np.float32)
        bias = rng.standard_normal(outs).astype(np.float32) if t % 2 else None
        data = np.concatenate([x[:live].ravel(), w.ravel()] + ([bias] if bias is not None else []))
        ours = reference_with_args(wasm_runtime, checks_wasm, "linear-f32", data, live, tensor_rows, outs,
                                   int(bias is not None))
        assert_same_floats(ours.reshape(live, outs), LF.fully_connected(x, w, bias, LF.host_l1d_bytes())[:live])


REDUCTIONS = {"sum": LF.reduce_sum, "mean": LF.reduce_mean, "max": LF.reduce_max}


@pytest.mark.parametrize("kind", list(REDUCTIONS))
def test_scalar_reductions_match_numpy(checks_wasm, wasm_runtime, kind):
    """Every set of axes of shapes with size-one axes (the normalisation), rows that are not
    multiples of four (MEAN's alignment heads) and NaNs (REDUCE_MAX's comparison)."""
    rng = np.random.default_rng(14)
    for shape in [(1, 64, 64, 1), (1, 1, 32, 64), (1, 1, 64, 5), (1, 3, 5, 7), (1, 1, 1, 64), (2, 3, 4, 5), (1, 9, 1, 3)]:
        for mask in range(1, 16):
            axes = tuple(a for a in range(4) if mask >> (3 - a) & 1)
            x = (rng.standard_normal(shape) * np.exp2(rng.integers(-8, 9, shape))).astype(np.float32)
            if mask % 4 == 0:
                x.flat[::7] = np.nan
            ours = reference_with_args(wasm_runtime, checks_wasm, f"reduce-{kind}", x, *shape, mask)
            assert_same_floats(ours, REDUCTIONS[kind](x, axes).ravel())


def test_scalar_l2_normalization_matches_numpy(checks_wasm, wasm_runtime):
    rng = np.random.default_rng(15)
    for cols in (1, 3, 7, 64, 384):
        x = (rng.standard_normal((50, cols)) * np.exp2(rng.integers(-10, 10, (50, 1)))).astype(np.float32)
        x[0], x[1] = 0.0, 1e-9  # norms below epsilon
        ours = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "l2-norm", x), "<f4")
        assert_same_floats(ours, LF.l2_normalization(x).ravel())


ORT_FUNCTIONS = {"ort-erf": OF.erf, "ort-gelu": OF.gelu_erf, "ort-fast-gelu": OF.fast_gelu, "ort-exp": OF.SUM_EXP[AVX2_FLOATS],
                 "ort-exp-scalef": OF.SUM_EXP[AVX512_FLOATS]}


@pytest.mark.parametrize("op", list(ORT_FUNCTIONS))
def test_scalar_onnxruntime_functions_match_numpy(ort_checks_wasm, wasm_runtime, op):
    x = interesting_floats(np.random.default_rng(4), 200_000)
    x = np.concatenate([x, np.linspace(-12, 12, 100_001, dtype=np.float32), np.linspace(-89, -87, 20_001, dtype=np.float32),
                        np.float32([-88.5, -88.3, 0.921875, 88.7, 89.0, 200.0])])
    ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op, x[None, :]), "<f4")
    with np.errstate(all="ignore"):
        assert_same_floats(ours, ORT_FUNCTIONS[op](x).astype(np.float32))


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ort-erf", "ort-exp", "ort-exp-scalef", "ort-fast-gelu"])  # GELU adds only IEEE steps around erf
def test_scalar_onnxruntime_functions_match_numpy_on_every_bit_pattern(ort_checks_wasm, wasm_runtime, op):
    chunk = 1 << 24
    for start in range(0, ALL_PATTERNS, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op, x[None, :]), "<f4")
        with np.errstate(all="ignore"):
            assert_same_floats(ours, ORT_FUNCTIONS[op](x).astype(np.float32))


@pytest.mark.parametrize("op, numpy_kernel", [("ort-layer-norm", OF.layer_norm),
                                               ("ort-skip-layer-norm", OF.skip_layer_norm),
                                               ("ort-embed-layer-norm", OF.embed_layer_norm)])
def test_rust_layer_norms_match_numpy(ort_checks_wasm, wasm_runtime, op, numpy_kernel):
    """Every lane and tail path: widths of 8 to 390, row scales and offsets far apart."""
    rng = np.random.default_rng(11)
    for cols in (8, 11, 12, 13, 15, 16, 128, 384, 390):
        gamma, beta = rng.uniform(0.5, 1.5, (2, cols)).astype(np.float32)
        x = (rng.standard_normal((60, cols)) * rng.uniform(1e-3, 50, (60, 1))
             + rng.uniform(-20, 20, (60, 1))).astype(np.float32)
        data = np.concatenate([gamma[None], beta[None], x])
        ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op, data), "<f4").reshape(x.shape)
        assert_same_floats(ours, numpy_kernel(x, gamma, beta, 1e-12))


# the softmax of each family of MLAS float kernels, as the checks crate names it
ORT_SOFTMAX = {"ort-softmax": AVX2_FLOATS, "ort-softmax-avx512": AVX512_FLOATS}
# every tail of the 8- and 16-lane sums, and beyond one and two accumulators' width
SOFTMAX_WIDTHS = (1, 7, 8, 9, 15, 16, 17, 31, 33, 48, 64, 256, 257)


def test_scalar_onnxruntime_softmax_and_quantisation_match_numpy(ort_checks_wasm, wasm_runtime):
    rng = np.random.default_rng(5)
    for op, floats in ORT_SOFTMAX.items():
        for cols in SOFTMAX_WIDTHS:
            x = (rng.standard_normal((40, cols)) * 8).astype(np.float32)
            x[::5, ::3] += np.float32(-3.4028235e38)  # masked keys
            ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op, x), "<f4").reshape(x.shape)
            assert_same_floats(ours, OF.softmax(x, floats))
    for scale in (1e-3, 1.0, 40.0):
        x = (rng.standard_normal((30, 128)) * scale).astype(np.float32)
        x[3, :5] = [0.5, -0.5, 1.5, 2.5, 0.0]
        data = scalar_reference(wasm_runtime, ort_checks_wasm, "ort-quantize", x)
        ours_scale, ours_zp = struct.unpack_from("<fi", data)
        ours_q = np.frombuffer(data, "<i2", offset=8)
        ref_q, ref_scale, ref_zp = quant.ort_dynamic_quantize(x)
        assert (ours_scale, ours_zp) == (ref_scale, ref_zp)
        assert np.array_equal(ours_q, ref_q.ravel().astype(np.int16))


def test_scalar_eigen_sum_matches_numpy(checks_wasm, wasm_runtime):
    rng = np.random.default_rng(2)
    for cols in (1, 3, 4, 5, 8, 12, 13, 16, 33, 383, 384, 1536):
        x = (rng.standard_normal((50, cols)) * 10).astype(np.float32)
        ours = np.frombuffer(scalar_reference(wasm_runtime, checks_wasm, "eigen-sum", x), "<f4")
        assert_same_floats(ours, LF.eigen_sum(x))


def decode_quantised(data: bytes, rows: int, cols: int):
    record = np.dtype([("scale", "<f4"), ("zp", "<i4"), ("q", "<i2", (cols,))])
    out = np.frombuffer(data, record, count=rows)
    return out["q"], out["scale"], out["zp"]


@pytest.mark.parametrize("scheme", ["sym", "asym"])
def test_scalar_quantisation_matches_numpy(checks_wasm, wasm_runtime, scheme):
    rng = np.random.default_rng(3)
    for cols in (1, 7, 16, 128, 384):
        x = (rng.standard_normal((400, cols)) * np.exp2(rng.integers(-20, 21, (400, 1)))).astype(np.float32)
        x[::7] = np.round(x[::7] * 2) / 2  # ties
        x[::11] = 0.0
        x[::13, ::2] = -0.0
        x[::17] = np.abs(x[::17])
        q, scale, zp = decode_quantised(scalar_reference(wasm_runtime, checks_wasm, f"quant-{scheme}", x), 400, cols)
        if scheme == "sym":
            ref_q, ref_scale = quant.quantize_rows_symmetric(x)
            ref_zp = np.zeros(400, np.int32)
        else:
            ref_q, ref_scale, ref_zp = quant.quantize_rows_asymmetric(x)
        assert_same_floats(scale, ref_scale)
        assert np.array_equal(zp, ref_zp)
        # The kernels store q - zp, the value the GEMM multiplies.
        assert np.array_equal(q.astype(np.int32), ref_q.astype(np.int32) - ref_zp[:, None])


# ---- mutation: the checks can fail ---------------------------------------------------------------------

MUTATIONS = {
    # Round halves toward zero instead of away: 0.5 quantises to 0.
    "rounding >= becomes >": ("src/kernels/litert/quantize.rs",
                              "f32x4_ge(f32x4_abs(f32x4_sub(v, t)), f32x4_splat(0.5))",
                              "f32x4_gt(f32x4_abs(f32x4_sub(v, t)), f32x4_splat(0.5))",
                              ["quant", "sym", 0x3F000000 - 8, 16, 1]),
    # pmin with the bound first: a NaN value comes out as 127 instead of 0.
    "pmin argument order": ("src/kernels/litert/quantize.rs",
                            "f32x4_pmax(f32x4_pmin(v, f32x4_splat(hi)), f32x4_splat(lo))",
                            "f32x4_pmax(f32x4_pmin(f32x4_splat(hi), v), f32x4_splat(lo))",
                            ["quant", "sym", 0x7FC00000, 64, 1]),
    # GELU skipping erfc's long path unless every lane needs it (instead of when none does).
    "erfc long path skipped": ("src/kernels/litert/mathfn.rs",
                               "if !v128_any_true(takes_large) {", "if !i32x4_all_true(takes_large) {",
                               ["gelu", 0, 100_000, SCATTER_STRIDE]),
    # tanh's clamp with its operands swapped: pmin(c, NaN) is c, so tanh(NaN) comes out as 1.
    "tanh clamp operands swapped": ("src/kernels/litert/activation.rs",
                                    "f32x4_pmin(a, splat(TANH_CLAMP))", "f32x4_pmin(splat(TANH_CLAMP), a)",
                                    ["litert-fn", "tanh", 0x7FC00000, 64, 1]),
    # The logistic's range reduction rounding to nearest instead of down.
    "logistic reduction rounds to nearest": ("src/kernels/litert/activation.rs",
                                             "f32x4_floor(madd(x, splat(LOG2E), splat(0.5)))",
                                             "f32x4_nearest(madd(x, splat(LOG2E), splat(0.5)))",
                                             ["litert-fn", "logistic", 0x3F000000, 4096, 1]),
    # The tanh GELU halving after the product instead of before (Eigen evaluates (0.5 * x) * (1 + t)):
    # x * 2 overflows where (0.5 * x) * 2 does not.
    "gelu-tanh half applied last": ("src/kernels/litert/activation.rs",
                                    "f32x4_mul(f32x4_mul(splat(0.5), x), f32x4_add(splat(1.0), t))",
                                    "f32x4_mul(splat(0.5), f32x4_mul(x, f32x4_add(splat(1.0), t)))",
                                    ["litert-fn", "gelu-tanh", 0, 100_000, SCATTER_STRIDE]),
    # GEBP's last-rows block combining its k mod 4 lanes as (c0 + c2) + (c1 + c3).
    "float linear k mod 4 combine": ("src/kernels/litert/linear_f32.rs",
                                     "f32x4_add(f32x4_add(acc[c][0], acc[c][1]), f32x4_add(acc[c][2], acc[c][3]))",
                                     "f32x4_add(f32x4_add(acc[c][0], acc[c][2]), f32x4_add(acc[c][1], acc[c][3]))",
                                     ["kernels", 11]),
    # A replacing mask (Keras' masked softmax) added to the dropped keys' scores in the SIMD kernel.
    "attention mask adds instead of replacing": ("src/kernels/litert/attention.rs",
                                                 "mask_and_max(ptr, keep, full, |_| f32x4_splat(p.mask_value))",
                                                 "mask_and_max(ptr, keep, full, |x| f32x4_add(x, f32x4_splat(p.mask_value)))",
                                                 ["kernels", 11]),
    # The same as the scores are written (no score terms): the replacing mask added.
    "written mask adds instead of replacing": ("src/kernels/litert/attention.rs",
                                               "let dropped = if replaces { f32x4_splat(value) } else { f32x4_add(x, f32x4_splat(value)) };",
                                               "let dropped = f32x4_add(x, f32x4_splat(value));",
                                               ["kernels", 11]),
    # The context's products of a step paired with the step's value rows in reverse.
    "context value rows reversed": ("src/kernels/litert/attention.rs",
                                    "acc = f32x4_add(acc, f32x4_mul(pr[u], value(u)));",
                                    "acc = f32x4_add(acc, f32x4_mul(pr[u], value(U - u)));",
                                    ["kernels", 11]),
    # softmax's sum adding every packet into one accumulator (Eigen alternates two).
    "softmax sum in one accumulator": ("src/kernels/litert/attention.rs",
                                       "acc1 = f32x4_add(acc1, packet(j + 4));", "acc0 = f32x4_add(acc0, packet(j + 4));",
                                       ["kernels", 11]),
    # exp's clamp with its operands swapped: pmin(c, NaN) is c, so exp(NaN) comes out finite.
    "exp clamp operands swapped": ("src/kernels/litert/mathfn.rs",
                                   "f32x4_pmin(x_in, splat(EXP_HI))", "f32x4_pmin(splat(EXP_HI), x_in)",
                                   ["litert-fn", "exp", 0x7FC00000, 64, 1]),
    # The score terms (a relative-position bias) of every row of a query block read at the block's
    # first row: each later row gets another query's bias.
    "score terms at the block's first row": ("src/kernels/litert/attention.rs",
                                             "terms.add_to_row(head, i0 + r, row)", "terms.add_to_row(head, i0, row)",
                                             ["kernels", 11]),
    # Weight-only int8 widened as unsigned bytes: every negative value in the first eight lanes is wrong.
    "dequant widens unsigned": ("src/kernels/common/dequantize.rs",
                                "i16x8_extend_low_i8x16(v)", "u16x8_extend_low_u8x16(v)", ["dequant", 5, 2000]),
    # float16 widening without its scale to 2^112 in the scalar kernel: every finite half is wrong.
    "halves scale dropped": ("src/kernels/common/dequantize.rs",
                             "f32::from_bits(magnitude << 13) * f32::from_bits(TWO_TO_112)",
                             "f32::from_bits(magnitude << 13)", ["halves", 0, 1 << 16]),
    # int4's high nibbles shifted down logically in the SIMD kernel: negative ones come out as 8..15.
    "int4 high nibble unsigned": ("src/kernels/common/int4.rs",
                                  "v128_store(values.as_mut_ptr().add(BLOCK_BYTES) as *mut v128, i8x16_shr(v, 4))",
                                  "v128_store(values.as_mut_ptr().add(BLOCK_BYTES) as *mut v128, u8x16_shr(v, 4))",
                                  ["int4"]),
    # onnxruntime's dot without its int16 saturation in the SIMD kernel only.
    "ort dot saturation dropped": ("src/kernels/common/gemm.rs",
                                   "i16x8_add_sat(i16x8_mul(acts[h], weights[h])", "i16x8_add(i16x8_mul(acts[h], weights[h])",
                                   ["kernels", 11]),
    # The GEMM's reduction of four outputs' sums taking two lanes of the wrong pair.
    "gemm four-output reduction mixed": ("src/kernels/common/gemm.rs",
                                         "i32x4_shuffle::<2, 3, 6, 7>(t0, t1))", "i32x4_shuffle::<2, 3, 6, 7>(t1, t0))",
                                         ["kernels", 11]),
    # The full-integer int8 dot reading y's upper (zero) lanes: every product of y vanishes.
    "int8 dot lanes": ("src/kernels/litert/int8/dot.rs",
                       "let wb = i16x8_sub(i16x8_extend_low_i8x16(vb), zb);",
                       "let wb = i16x8_sub(i16x8_extend_high_i8x16(vb), zb);",
                       ["int8", 3]),
}


# The same for the relaxed_madd lanes of onnxruntime's functions, in an ONNX model's crate.
ORT_MUTATIONS = {
    # erf's first polynomial in x * |x| instead of |x|^2: wrong for every negative x below the switch.
    "erf square loses its sign": ("src/kernels/ort/float/lanes.rs",
                                  "horner4(&ERF_SMALL, f32x4_mul(a, a))", "horner4(&ERF_SMALL, f32x4_mul(a, x))",
                                  ["ort-fn", "erf", 0xBF000000 - 8, 16, 1]),
    # FastGelu's inner polynomial fused into one madd (the CPU provider is built without fma).
    "fast gelu inner fused": ("src/kernels/ort/float/lanes.rs",
                              "f32x4_add(f32x4_mul(cx, x), f32x4_splat(FAST_GELU_B))",
                              "fma4(cx, x, f32x4_splat(FAST_GELU_B))",
                              ["ort-fn", "fast-gelu", 0x40000000, 4096, 1]),
    # exp's range reduction subtracting ln 2's two parts in the other order: off by an ulp here and there.
    "exp reduction order": ("src/kernels/ort/float/lanes.rs",
                            "fma4(m, f32x4_splat(LN2_LO), fma4(m, f32x4_splat(LN2_HI), x))",
                            "fma4(m, f32x4_splat(LN2_HI), fma4(m, f32x4_splat(LN2_LO), x))",
                            ["ort-fn", "exp", 0x40000000, 4096, 1]),
    # AVX-512F's exp taking its one-product path for m = -127 too: 2^-127 from exponent bits is 0,
    # not vscalefps's subnormal (x around -88, a masked key's clamped score).
    "exp-scalef normal range": ("src/kernels/ort/float/lanes.rs",
                                "f32x4_ge(m, f32x4_splat(-126.0))", "f32x4_ge(m, f32x4_splat(-127.0))",
                                ["ort-fn", "exp-scalef", 0xC2B00000 - 8, 16, 1]),
    # The context cut at the masked keys whatever their products: a masked key's subnormal
    # probability times a huge value row counts, and the cut must then not be taken.
    # The Gemm Linear's panel adding four values of k in reverse order: the same products, another
    # rounding of each chain.
    "panel chain order": ("src/kernels/ort/float/sgemm.rs",
                          "for (u, &xu) in xs.iter().enumerate() {", "for (u, &xu) in xs.iter().enumerate().rev() {",
                          ["kernels", 11]),
    # softmax's exact subnormal product scaled by 2^-148 instead of 2^-149.
    "subnormal scaling exponent": ("src/kernels/ort/float/math.rs",
                                   "f64::from_bits((1023 - 149) << 52)", "f64::from_bits((1023 - 148) << 52)",
                                   ["ort-scale", 1, 4096, 4099]),
    "masked tail cut unchecked": ("src/kernels/ort/float/masked_tail.rs",
                                  "term_exponent <= biased_exponent(bits).max(1) - 153",
                                  "term_exponent <= biased_exponent(bits).max(1) + 153",
                                  ["kernels", 11]),
}


# Each mutant builds a checks crate of its own (half a minute on two cores), so the default suite
# runs the first mutant of each table, which shows the harness can fail, and `-m slow` runs every
# one: the mutants check the checks, not the kernels, which the default suite's checks cover.
def first_by_default(names) -> list:
    names = list(names)
    return names[:1] + [pytest.param(n, marks=pytest.mark.slow) for n in names[1:]]


@pytest.mark.parametrize("name", first_by_default(MUTATIONS))
def test_mutated_kernel_fails_its_check(toolchain, wasm_runtime, tmp_path, checks_wasm, name):
    assert_mutant_fails(toolchain, wasm_runtime, tmp_path, checks_wasm, "litert-dq8.tflite", *MUTATIONS[name])


@pytest.mark.parametrize("name", first_by_default(ORT_MUTATIONS))
def test_mutated_onnxruntime_lanes_fail_their_check(toolchain, wasm_runtime, tmp_path, ort_checks_wasm, name):
    assert_mutant_fails(toolchain, wasm_runtime, tmp_path, ort_checks_wasm, "dq8pc.onnx", *ORT_MUTATIONS[name])


def assert_mutant_fails(toolchain, wasm_runtime, tmp_path, unmutated, fixture, source, original, mutated, check):
    assert_check_passes(wasm_runtime, unmutated, *check)  # the unmutated kernel passes it
    mutant = build_mutant(toolchain, tmp_path, fixture, source, original, mutated)
    code, out = run_check(wasm_runtime, mutant, *check)
    print(out.strip())
    assert code == 1 and "MISMATCH" in out


def build_mutant(toolchain, tmp_path, fixture, source, original, mutated):
    """The checks module of `fixture`'s crate with `original` (found exactly once) replaced in `source`."""
    crate = render_checks_crate(tmp_path / "mutant", fixture)
    path = crate / source
    text = path.read_text()
    assert text.count(original) == 1, f"mutation site not found in {source}"
    path.write_text(text.replace(original, mutated))
    return build_forward_crate(crate, toolchain, checks=True)


# Mutants the numpy comparisons below must see (their checks compare against numpy, not a scalar twin).
NUMPY_MUTATIONS = {
    # AVX-512F's sum folding its sixteen lanes in adjacent pairs instead of halves.
    "ort softmax fold": ("dq8pc.onnx", "src/kernels/ort/float/math.rs",
                         "core::array::from_fn(|i| wide[i + 8] + wide[i])",
                         "core::array::from_fn(|i| wide[2 * i] + wide[2 * i + 1])"),
    # erf's polynomial switch point moved by one ulp.
    "ort erf switch": ("litert-dq8.tflite", "src/kernels/ort/float/math.rs",
                       "pub(super) const ERF_SPLIT: f32 = f32::from_bits(0x3f6c0000);",
                       "pub(super) const ERF_SPLIT: f32 = f32::from_bits(0x3f6c0001);"),
    # glibc's overflow threshold made inclusive: exp(log(2^128)'s float) must stay finite.
    "expf overflow inclusive": ("litert-dq8.tflite", "src/kernels/litert/libm.rs",
                                "if x > OVERFLOW_ABOVE {", "if x >= OVERFLOW_ABOVE {"),
    # EmbedLayerNormalization's squared deviations fused into one fma each (the CPU provider's
    # contrib kernels are built without fma).
    "embed layer norm fused squares": ("dq8pc.onnx", "src/kernels/ort/float/layer_norm.rs",
                                       "squares += d * d;", "squares = fma(d, d, squares);"),
}


def test_mutated_onnxruntime_softmax_fold_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS["ort softmax fold"])
    x = (np.random.default_rng(6).standard_normal((40, 48)) * 8).astype(np.float32)
    ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, "ort-softmax-avx512", x), "<f4").reshape(x.shape)
    assert not np.array_equal(ours.view(np.uint32), OF.softmax(x, AVX512_FLOATS).view(np.uint32))


@pytest.mark.slow  # the numpy-compared mutants: the softmax fold's runs by default
def test_mutated_embed_layer_norm_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS["embed layer norm fused squares"])
    rng = np.random.default_rng(12)
    gamma, beta = rng.uniform(0.5, 1.5, (2, 64)).astype(np.float32)
    x = (rng.standard_normal((60, 64)) * 3).astype(np.float32)
    data = np.concatenate([gamma[None], beta[None], x])
    ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, "ort-embed-layer-norm", data), "<f4").reshape(x.shape)
    assert not np.array_equal(ours.view(np.uint32), OF.embed_layer_norm(x, gamma, beta, 1e-12).view(np.uint32))


@pytest.mark.slow  # the numpy-compared mutants: the softmax fold's runs by default
def test_mutated_onnxruntime_erf_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS["ort erf switch"])
    x = np.uint32([0x3F6C0001, 0xBF6C0001, 0x3F6C0002]).view(np.float32)  # just past the switch
    ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, "ort-erf", x[None, :]), "<f4")
    assert not np.array_equal(ours.view(np.uint32), OF.erf(x).view(np.uint32))


@pytest.mark.slow  # the numpy-compared mutants: the softmax fold's runs by default
def test_mutated_expf_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS["expf overflow inclusive"])
    x = np.uint32([0x42B17217, 0x42B17216]).view(np.float32)  # the threshold and just below
    ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, "exp-op", x[None, :]), "<f4")
    assert not np.array_equal(ours.view(np.uint32), LF.exp_op(x).view(np.uint32))


# ---- full-integer int8 kernels (kernels/litert/int8/) -------------------------------------------

from porter.reference.litert import int8 as K  # noqa: E402

EVERY_INT8 = np.arange(-128, 128, dtype=np.int64)


def int8_reference(wasm_runtime, wasm, op, args, x: np.ndarray) -> bytes:
    x = np.ascontiguousarray(x, dtype="<f4")
    stdin = struct.pack("<II", *x.shape) + x.tobytes()
    result = wasm_runtime.run_command(wasm, ["reference", op, *map(str, args)], stdin)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def int8_params(rng, n):
    """(scale, zero point) pairs: seeded scales over six decades and zero points over int8."""
    return [(float(np.float32(10.0 ** rng.uniform(-4, 1))), int(rng.integers(-128, 128))) for _ in range(n)]


def test_int8_dot_simd_matches_scalar(wasm_runtime, checks_wasm):
    assert_check_passes(wasm_runtime, checks_wasm, "int8", 3)


def test_int8_requantize_every_input_in_blocks_and_tail(wasm_runtime, checks_wasm):
    """Every int8 input through the vector loop (a row of 256) and the scalar tail (rows of 15)."""
    rng = np.random.default_rng(81)
    tail = np.resize(EVERY_INT8, (18, 15))
    for x_q, out_q in zip(int8_params(rng, 12), int8_params(rng, 12)):
        m, shift = K.requantize_multiplier(x_q[0], out_q[0])
        for rows in (EVERY_INT8[None], tail):
            ours = np.frombuffer(int8_reference(wasm_runtime, checks_wasm, "int8-requantize",
                                                [x_q[1], m, shift, out_q[1]], rows), np.int8).reshape(rows.shape)
            want = np.stack([K.requantize(r, x_q, out_q) for r in rows])
            assert np.array_equal(ours, want), (x_q, out_q, rows.shape)


@pytest.mark.parametrize("op", ["int8-dequantize", "int8-output"])
def test_int8_dequantize_every_input(wasm_runtime, checks_wasm, op):
    rng = np.random.default_rng(82)
    reference = K.dequantize if op == "int8-dequantize" else K.dequantize_output
    tail = np.resize(EVERY_INT8, (37, 7))
    for scale, zp in int8_params(rng, 12):
        bits = int(np.float32(scale).view(np.uint32))
        for rows in (EVERY_INT8[None], tail):
            ours = np.frombuffer(int8_reference(wasm_runtime, checks_wasm, op, [zp, bits], rows), "<f4")
            want = np.concatenate([reference(r, (scale, zp)) for r in rows])
            assert np.array_equal(ours.view(np.uint32), want.view(np.uint32)), (op, scale, zp)


def test_int8_tables_every_input(wasm_runtime, checks_wasm):
    """RSQRT's, GELU's and TANH's tables (as recovery builds them) read for every input."""
    rng = np.random.default_rng(83)
    for (x_q, out_q) in zip(int8_params(rng, 3), int8_params(rng, 3)):
        for table in (K.rsqrt_table(x_q, out_q), K.lookup_table(x_q, out_q, K.gelu_exact),
                      K.lookup_table(x_q, out_q, K.libm("tanhf"))):
            ours = np.frombuffer(int8_reference(wasm_runtime, checks_wasm, "int8-table", [],
                                                np.stack([table, EVERY_INT8])), np.int8)
            assert np.array_equal(ours, K.apply_table(EVERY_INT8, table))


@pytest.mark.parametrize("combine", ["add", "sub", "squared-difference", "mul"])
def test_int8_binary_every_input_pair(wasm_runtime, checks_wasm, combine):
    """ADD, SUB, SQUARED_DIFFERENCE and MUL on all 65,536 int8 pairs, under seeded quantisations."""
    rng = np.random.default_rng(84)
    x, y = (a.ravel() for a in np.meshgrid(EVERY_INT8, EVERY_INT8))
    kernels = {"add": K.add_sub, "sub": lambda *a: K.add_sub(*a, subtract=True),
               "squared-difference": K.squared_difference, "mul": K.mul}
    for x_q, y_q, out_q in zip(int8_params(rng, 3), int8_params(rng, 3), int8_params(rng, 3)):
        if combine == "mul":
            shift, mx, my, mo = 0, (0, 0), (0, 0), K.mul_multiplier(x_q[0], y_q[0], out_q[0])
        else:
            squared = combine == "squared-difference"
            shift = K.SQUARED_DIFFERENCE_LEFT_SHIFT if squared else K.ADD_LEFT_SHIFT
            mx, my, mo = K.rescale_multipliers(x_q[0], y_q[0], out_q[0], shift, squared)
        args = [combine, x_q[1], y_q[1], shift, *mx, *my, *mo, out_q[1]]
        ours = np.frombuffer(int8_reference(wasm_runtime, checks_wasm, "int8-binary", args, np.stack([x, y])), np.int8)
        assert np.array_equal(ours, kernels[combine](x, x_q, y, y_q, out_q)), (combine, x_q, y_q, out_q)
