"""The forward crate's kernel checks (templates/rust_forward/checks), run in wasm.

- SIMD against scalar: GELU (exact and tanh), LiteRT's TANH and LOGISTIC, SOFTMAX's exp (in general
  and for inputs <= 0: s - max, which the attention's softmax and erfc take) and row
  quantisation over f32 bit patterns (a sample by default, all 2^32 with `-m slow`), 20,000 awkward random rows per
  quantisation scheme, every int8 value widened under 20,000 scales (weight-only int8), and the
  other kernels (GEMM, attention, Eigen sums, float Linear) on
  random shapes.
- onnxruntime's one-input functions (erf, its two GELU spellings, FastGelu, softmax's exp as its AVX2 and
  its AVX-512F kernel scale it, and its Exp op's two kernels, a float16 graph's softmax body) four lanes at a time with relaxed_madd against their scalar
  emulation, in a crate built as ONNX crates are; sampled by default, erf and both exps over all
  2^32 with `-m slow`.
- onnxruntime's float16 rounding (a float16 graph's round_half steps) four lanes at a time against its
  scalar definition, bit for bit NaNs included: sampled by default, all 2^32 with `-m slow`; the
  scalar one against numpy on every class it branches on by default (subnormal halves, ties,
  overflow to infinity, NaN payloads) and on all 2^32 with `-m slow`.
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
from porter import TEMPLATES_DIR
from porter.reference.litert import floats as LF
from porter.reference.ort import floats as OF
from porter.reference import quant
from porter.reference.ort.cpu import AVX2_FLOATS, AVX512_FLOATS
from porter.reference.ort.float16 import round_half
from porter.reference.ops import softmax_function
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


ONE_INPUT_KERNELS = ["gelu", "litert-fn tanh", "litert-fn logistic", "litert-fn gelu-tanh", "litert-fn exp",
                     "litert-fn exp-nonpositive", "quant sym", "quant asym"]


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


@pytest.mark.parametrize("function", ["tanh", "logistic", "gelu-tanh", "exp", "exp-nonpositive"])
def test_litert_function_lanes_match_scalar_around_special_values(checks_wasm, wasm_runtime, function):
    for centre in LITERT_CENTRES:
        for sign in (0, 0x80000000):
            start = ((centre | sign) - 2048) % ALL_PATTERNS
            assert_check_passes(wasm_runtime, checks_wasm, "litert-fn", function, start, 4096, 1)


ORT_FUNCTIONS_X4 = ["erf", "gelu", "gelu-mul", "fast-gelu", "exp", "exp-scalef", "exp-op", "exp-op-scalef"]
# erf's polynomial switch, exp's input clamp, exp's last normal power of two (m = -126 | -127),
# 0 and the subnormals, 1, infinity, the quiet NaNs; the Exp op's clamps (-103.97, 88.78)
ORT_CENTRES = (0x3F6C0000, 0x42B0C0A5, 0x42AF5DC2, 0x00000000, 0x3F800000, 0x7F800000, 0x7FC00000,
               0x42CFF1B5, 0x42B18D72)


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


@pytest.mark.parametrize("stride", [SAMPLE_STRIDE, SCATTER_STRIDE])
def test_float16_rounding_lanes_match_scalar_on_sampled_bit_patterns(ort_checks_wasm, wasm_runtime, stride):
    assert_check_passes(wasm_runtime, ort_checks_wasm, "round-half", 0, 1_000_000, stride)


def test_float16_rounding_lanes_match_scalar_around_every_half(ort_checks_wasm, wasm_runtime):
    """Every float16's neighbourhood: the values just below, at and above each midpoint and each
    half (float32 patterns whose low 13 bits are near 0 or 0x1000), over every exponent and sign."""
    for low in (0x0FFF, 0x1000, 0x1FFF):
        assert_check_passes(wasm_runtime, ort_checks_wasm, "round-half", low, 1 << 19, 1 << 13)


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
def test_float16_rounding_lanes_match_scalar_on_every_bit_pattern(ort_checks_wasm, wasm_runtime, chunk):
    size = ALL_PATTERNS // EXHAUSTIVE_CHUNKS
    assert_check_passes(wasm_runtime, ort_checks_wasm, "round-half", chunk * size, size, 1, timeout_s=CHUNK_TIMEOUT_S)


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(EXHAUSTIVE_CHUNKS))
@pytest.mark.parametrize("function", ["erf", "exp", "exp-scalef", "fast-gelu", "exp-op", "exp-op-scalef"])  # GELU: erf + IEEE steps
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
                 "ort-exp-scalef": OF.SUM_EXP[AVX512_FLOATS],
                 # a float16 graph's Exp kernels (its Softmax function body) on each CPU family
                 "ort-exp-fma3": lambda x: OF.exp(x, AVX2_FLOATS), "ort-exp-avx512": lambda x: OF.exp(x, AVX512_FLOATS)}


@pytest.mark.parametrize("op", list(ORT_FUNCTIONS))
def test_scalar_onnxruntime_functions_match_numpy(ort_checks_wasm, wasm_runtime, op):
    x = interesting_floats(np.random.default_rng(4), 200_000)
    x = np.concatenate([x, np.linspace(-12, 12, 100_001, dtype=np.float32), np.linspace(-89, -87, 20_001, dtype=np.float32),
                        np.float32([-88.5, -88.3, 0.921875, 88.7, 89.0, 200.0])])
    ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op, x[None, :]), "<f4")
    with np.errstate(all="ignore"):
        assert_same_floats(ours, ORT_FUNCTIONS[op](x).astype(np.float32))


def test_scalar_float16_rounding_matches_numpy_on_every_class(ort_checks_wasm, wasm_runtime):
    """The scalar round_half against porter.reference.ort.float16.round_half (onnxruntime's two
    Casts: tests/test_ort_float16.py) on every class it branches on, bit for bit NaNs included."""
    from test_ort_float16 import round_half_classes

    x = round_half_classes()
    ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, "ort-round-half", x[None, :]), "<f4")
    assert np.array_equal(ours.view(np.uint32), round_half(x).view(np.uint32))


@pytest.mark.slow
def test_scalar_float16_rounding_matches_numpy_on_every_bit_pattern(ort_checks_wasm, wasm_runtime):
    chunk = 1 << 24
    for start in range(0, ALL_PATTERNS, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, "ort-round-half", x[None, :]), "<f4")
        assert np.array_equal(ours.view(np.uint32), round_half(x).view(np.uint32)), hex(start)


@pytest.mark.slow
@pytest.mark.parametrize("op", ["ort-erf", "ort-exp", "ort-exp-scalef", "ort-fast-gelu", "ort-exp-fma3",
                                "ort-exp-avx512"])  # GELU adds only IEEE steps around erf
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
            if cols % 4 == 0:  # a float16 graph's Softmax: its function body (onnxruntime's rows are aligned)
                x[::5, ::3] = np.float32(-10000)  # a converted model's mask value, subnormal exps around it
                x[1::5, ::2] -= np.float32(100)
                ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, op.replace("softmax", "softmax-function"),
                                                      x), "<f4").reshape(x.shape)
                assert_same_floats(ours, softmax_function(x, floats))
    for scale in (1e-3, 1.0, 40.0):
        x = (rng.standard_normal((30, 128)) * scale).astype(np.float32)
        x[3, :5] = [0.5, -0.5, 1.5, 2.5, 0.0]
        data = scalar_reference(wasm_runtime, ort_checks_wasm, "ort-quantize", x)
        ours_scale, ours_zp = struct.unpack_from("<fi", data)
        ours_q = np.frombuffer(data, "<i2", offset=8)
        ref_q, ref_scale, ref_zp = quant.ort_dynamic_quantize(x)
        assert (ours_scale, ours_zp) == (ref_scale, ref_zp)
        assert np.array_equal(ours_q, ref_q.ravel().astype(np.int16))


def m1_transpose_b_cases(rng):
    """(A, B rows) for FusedMatMul's one-row transposed-B kernel: depths around its eight lanes,
    column counts that end in a group of four, a pair and a single, values over wide ranges."""
    for k in (1, 5, 8, 9, 16, 23, 64):
        for n in (1, 2, 3, 4, 5, 6, 7, 13):
            a = (rng.standard_normal(k) * np.exp2(rng.integers(-8, 8, k))).astype(np.float32)
            b = (rng.standard_normal((n, k)) * np.exp2(rng.integers(-8, 8, (n, k)))).astype(np.float32)
            yield a, b


def test_scalar_onnxruntime_fused_one_row_matches_numpy(ort_checks_wasm, wasm_runtime):
    for a, b in m1_transpose_b_cases(np.random.default_rng(21)):
        ours = np.frombuffer(scalar_reference(wasm_runtime, ort_checks_wasm, "ort-m1-transpose-b",
                                              np.concatenate([a[None], b])), "<f4")
        assert_same_floats(ours, OF.fused_m1(a[None], b.T)[0])


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
    # GELU's list of long-path lanes growing by one a vector however many it packs: the others
    # keep the short path's result (or are overwritten by the next vector's).
    "gelu list grows by one a vector": ("src/kernels/litert/mathfn.rs",
                                        "n += long.count_ones() as usize;", "n += (long != 0) as usize;",
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
                                               "WriteMask::Replace(kept) => v128_bitselect(x, self.mask_value, ",
                                               "WriteMask::Replace(kept) => v128_bitselect(x, f32x4_add(x, self.mask_value), ",
                                               ["kernels", 11]),
    # The adding mask left out of the scores' write: dropped keys count in the softmax.
    "written mask not added": ("src/kernels/litert/attention.rs",
                               "*addend = if kept { -0.0 } else { p.mask_value };", "*addend = -0.0;", ["kernels", 11]),
    # A mask left out unless it drops every key (it is left out only where it drops none).
    "mask that drops some keys left out": ("src/kernels/litert/attention.rs",
                                           "keep.iter().take(keys).any(|&kept| !kept)",
                                           "keep.iter().take(keys).all(|&kept| !kept)", ["kernels", 11]),
    # The score tile's second dimension of a pair multiplied by the first dimension's keys.
    "score tile pairs a dimension with the previous keys": ("src/kernels/litert/attention.rs",
                                                            "f32x4_add(sum[0], f32x4_mul(q, next0))",
                                                            "f32x4_add(sum[0], f32x4_mul(q, k0))", ["kernels", 11]),
    # The context's products of a step paired with the step's value rows in reverse.
    "context value rows reversed": ("src/kernels/litert/attention.rs",
                                    "acc = f32x4_add(acc, f32x4_mul(pr[u], value[u]));",
                                    "acc = f32x4_add(acc, f32x4_mul(pr[u], value[U - u]));",
                                    ["kernels", 11]),
    # The score tiles' query splats with the four dimensions of a load in reverse.
    "query splats reversed in fours": ("src/kernels/litert/attention.rs",
                                       "*out.add(c + u) = lane;", "*out.add(c + 3 - u) = lane;", ["kernels", 11]),
    # The second row of a context pair given the first row's probabilities.
    "context pair shares its first row's probabilities": ("src/kernels/litert/attention.rs",
                                                          "probabilities::<U>(exps.add((r + i) * keys), inverse[i])",
                                                          "probabilities::<U>(exps.add(r * keys), inverse[i])",
                                                          ["kernels", 11]),
    # The context's negligible products left out whatever the sums they would join: where a row's
    # sums are still small, those products are all it has.
    "negligible products left out of small sums": ("src/kernels/litert/attention.rs",
                                                   "exp < NEGLIGIBLE_EXP && sums_at_least(row_sums, DV, sums_from)",
                                                   "exp < NEGLIGIBLE_EXP", ["kernels", 11]),
    # The context's key-by-key step (a step with negligible products) taking its keys last first.
    "key-by-key context step in reverse": ("src/kernels/litert/attention.rs",
                                           "        for u in 0..U {\n            let exp = ",
                                           "        for u in (0..U).rev() {\n            let exp = ", ["kernels", 11]),
    # softmax's sum adding every packet into one accumulator (Eigen alternates two).
    "softmax sum in one accumulator": ("src/kernels/litert/attention.rs",
                                       "acc1 = f32x4_add(acc1, packet(j + 12));", "acc0 = f32x4_add(acc0, packet(j + 12));",
                                       ["kernels", 11]),
    # softmax's positive beta (not 1) left out of its exps' inputs.
    "softmax beta dropped": ("src/kernels/litert/attention.rs",
                             "exponentiate_with(s, max, beta, |x| exp_nonpositive_x4(f32x4_mul(x, beta_x4)))",
                             "exponentiate_with(s, max, beta, |x| exp_nonpositive_x4(x))", ["kernels", 11]),
    # exp's NaN rule with its operands swapped: pmax(0, NaN) is 0, so exp(NaN) comes out 0.
    "exp NaN rule operands swapped": ("src/kernels/litert/mathfn.rs",
                                      "f32x4_pmax(x_in, v128_and(out, f32x4_le(splat(EXP_LO), x_in)))",
                                      "f32x4_pmax(v128_and(out, f32x4_le(splat(EXP_LO), x_in)), x_in)",
                                      ["litert-fn", "exp", 0x7FC00000, 64, 1]),
    # The non-positive exp's two ldexp products in the other order: 2^m formed first is exact down
    # to 2^-149, but 2^-150 (m = -150, x just above -104) rounds to 0, where y * 2^-150 need not.
    "exp nonpositive power formed first": ("src/kernels/litert/mathfn.rs",
                                           "f32x4_mul(f32x4_mul(y, pow2), splat(TWO_TO_MINUS_24))",
                                           "f32x4_mul(y, f32x4_mul(pow2, splat(TWO_TO_MINUS_24)))",
                                           ["litert-fn", "exp-nonpositive", 0xC2D00000 - 4096, 4097, 1]),
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
    # The float16 rounding's overflow test made strict in the SIMD kernel: 65520, a tie between
    # 65504 and the first value past float16's range, stays 65504 instead of becoming infinity.
    "round half overflow strict": ("src/kernels/ort/float/half.rs",
                                   "i32x4_ge(a, u32x4_splat(HALF_OVERFLOW))", "i32x4_gt(a, u32x4_splat(HALF_OVERFLOW))",
                                   ["round-half", 0x477FF000 - 8, 16, 1]),
    "masked tail cut unchecked": ("src/kernels/ort/float/masked_tail.rs",
                                  "term_exponent <= biased_exponent(bits).max(1) - 153",
                                  "term_exponent <= biased_exponent(bits).max(1) + 153",
                                  ["kernels", 11]),
}


# Each mutant builds a checks crate of its own (half a minute on two cores). The mutants check the
# checks, not the kernels, which the default suite's checks cover: so the default suite runs two,
# the first of MUTATIONS (a SIMD kernel against its scalar twin) and the softmax fold (a kernel
# against numpy), which show both harnesses can fail, and `-m slow` runs every one.
def first_by_default(names) -> list:
    names = list(names)
    return names[:1] + slow_only(names[1:])


def slow_only(names) -> list:
    return [pytest.param(n, marks=pytest.mark.slow) for n in names]


@pytest.mark.parametrize("name", first_by_default(MUTATIONS))
def test_mutated_kernel_fails_its_check(toolchain, wasm_runtime, tmp_path, checks_wasm, name):
    assert_mutant_fails(toolchain, wasm_runtime, tmp_path, checks_wasm, "litert-dq8.tflite", *MUTATIONS[name])


@pytest.mark.parametrize("name", slow_only(ORT_MUTATIONS))
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
    # FusedMatMul's one-row kernel summing a pair of columns' lanes as a single column's.
    "ort fused one row pair order": ("dq8pc.onnx", "src/kernels/ort/float/sgemm.rs",
                                     "((l[0] + l[2]) + (l[4] + l[6])) + ((l[1] + l[3]) + (l[5] + l[7]))",
                                     "((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]))"),
    # The float16 rounding's ties rounded up (away from zero) in the scalar kernel, not to even.
    "round half ties up": ("dq8pc.onnx", "src/kernels/ort/float/half.rs",
                           "(a + (DROPPED >> 1) + ((a >> 13) & 1)) & !DROPPED", "(a + (DROPPED >> 1) + 1) & !DROPPED"),
    # MLAS's AVX2 Exp with 2^m applied in one factor (no normal clamp): subnormal results rounded twice.
    "exp fma3 one scale": ("dq8pc.onnx", "src/kernels/ort/float/half.rs",
                           "let normal = shifted.clamp(EXP_MIN_EXPONENT, EXP_MAX_EXPONENT);", "let normal = shifted;"),
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
@pytest.mark.parametrize("name, op, reference", [("round half ties up", "ort-round-half", round_half),
                                                 ("exp fma3 one scale", "ort-exp-fma3", ORT_FUNCTIONS["ort-exp-fma3"])])
def test_mutated_float16_graph_kernels_fail_against_numpy(toolchain, wasm_runtime, tmp_path, name, op, reference):
    from test_ort_float16 import round_half_classes

    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS[name])
    x = np.concatenate([round_half_classes(), np.linspace(-104, -87, 20_001, dtype=np.float32)])
    ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, op, x[None, :]), "<f4")
    assert not np.array_equal(ours.view(np.uint32), reference(x).view(np.uint32))


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
def test_mutated_fused_one_row_fails_against_numpy(toolchain, wasm_runtime, tmp_path):
    mutant = build_mutant(toolchain, tmp_path, *NUMPY_MUTATIONS["ort fused one row pair order"])
    differs = False
    for a, b in m1_transpose_b_cases(np.random.default_rng(22)):
        ours = np.frombuffer(scalar_reference(wasm_runtime, mutant, "ort-m1-transpose-b", np.concatenate([a[None], b])), "<f4")
        differs |= not np.array_equal(ours.view(np.uint32), OF.fused_m1(a[None], b.T)[0].view(np.uint32))
    assert differs


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

from porter.errors import PorterError  # noqa: E402
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


# Quantisations on which LiteRT's loops disagree on many pairs (found by search in numpy,
# measured against LiteRT in tests/test_litert_int8_paths.py): the combined shift's and the floor
# shift's roundings, int16 wrapping of results far outside int8.
INT8_TIES = [((0.3125, 50), (0.875, -36), (0.25, 14)), ((0.0546875, -127), (0.001953125, 65), (0.0625, -117)),
             ((0.078125, 74), (3.75, 87), (0.0009765625, 79)), ((0.5, -72), (0.0625, 127), (0.00146484375, -84))]
INT8_PATHS = {"add": ["scalar", "vector", "broadcast-vector"], "mul": ["scalar", "vector"],
              "sub": ["scalar"], "squared-difference": ["scalar"], "div": ["scalar"]}
# DIV's: a dividend at its zero point past a shift of 31, a multiplier far above one (a negative shift)
INT8_DIV_TIES = [((0.01975412108004093, 43), (0.02366747334599495, 46), (0.016851525753736496, -78)),
                 ((1.0, 3), (1e-4, 0), (1e-4, 5))]
PATH_CODES = {"scalar": K.SCALAR, "vector": K.VECTOR, "broadcast-vector": K.BROADCAST_VECTOR}


def int8_run(wasm_runtime, wasm, args, rows: np.ndarray) -> bytes | None:
    """A `reference` command's output on rows of values, or None where it fails (a mutant may
    index out of bounds: a trap, which is a mismatch as much as a wrong value is)."""
    rows = np.ascontiguousarray(rows, dtype="<f4")
    try:
        run = wasm_runtime.run_command(wasm, ["reference", *map(str, args)], struct.pack("<II", *rows.shape) + rows.tobytes())
    except PorterError:
        return None
    return run.stdout if run.exit_code == 0 else None


def int8_binary_args(combine, x_q, y_q, out_q) -> list:
    """XZ YZ LEFT_SHIFT MX SX MY SY MO SO OZ of the checks crate's int8-binary and int8-walk."""
    if combine in ("mul", "div"):
        multiplier = K.mul_multiplier if combine == "mul" else K.divide_multiplier
        shift, mx, my, mo = 0, (0, 0), (0, 0), multiplier(x_q[0], y_q[0], out_q[0])
    else:
        squared = combine == "squared-difference"
        shift = K.SQUARED_DIFFERENCE_LEFT_SHIFT if squared else K.ADD_LEFT_SHIFT
        mx, my, mo = K.rescale_multipliers(x_q[0], y_q[0], out_q[0], shift, squared)
    return [x_q[1], y_q[1], shift, *mx, *my, *mo, out_q[1]]


def int8_pair_kernel(combine, path):
    """porter.reference.litert.int8's formula of one loop for each pair."""
    if combine == "add":
        return lambda *a: K.add_by_path(*a, PATH_CODES[path])
    if combine == "mul":
        return lambda *a: K.mul_by_path(*a, PATH_CODES[path])
    return {"sub": K.sub, "squared-difference": K.squared_difference, "div": K.divide}[combine]


def int8_binary_matches(wasm_runtime, wasm, combine, seed=84) -> bool:
    """Every int8 pair through each of the op's loops under the tie quantisations and seeded ones."""
    rng = np.random.default_rng(seed)
    x, every_y = (a.ravel() for a in np.meshgrid(EVERY_INT8, EVERY_INT8))
    reciprocals = np.array([K.reciprocal(b) if b else (0, 0) for b in range(256)], np.int32).ravel()
    for quants in INT8_TIES + INT8_DIV_TIES + list(zip(int8_params(rng, 3), int8_params(rng, 3), int8_params(rng, 3))):
        y, rows = every_y, [x, every_y]
        if combine == "div":  # every divisor but the zero point, and the reciprocal table
            zp = quants[1][1]
            y = np.where(every_y == zp, zp + 1 if zp < 127 else zp - 1, every_y)
            rows = [x, y, np.resize(reciprocals, x.size).view(np.float32)]  # the table as its bits
        for path in INT8_PATHS[combine]:
            out = int8_run(wasm_runtime, wasm, ["int8-binary", combine, path, *int8_binary_args(combine, *quants)],
                           np.stack([r if r.dtype == np.float32 else r.astype(np.float32) for r in rows]))
            want = int8_pair_kernel(combine, path)(x, quants[0], y, quants[1], quants[2])
            if out is None or not np.array_equal(np.frombuffer(out, np.int8), want):
                return False
    return True


@pytest.mark.parametrize("combine", list(INT8_PATHS))
def test_int8_binary_every_input_pair(wasm_runtime, checks_wasm, combine):
    """ADD, SUB, SQUARED_DIFFERENCE, MUL and DIV on all 65,536 int8 pairs (DIV's divisors less the
    zero point) by each loop LiteRT runs them in (ADD: the reference formula, AddElementwiseInt8's
    and AddScalarBroadcast's NEON blocks; MUL: the reference formula and its NEON blocks), under
    quantisations that separate the loops, DIV's shifts past 31 and below 0, and seeded ones."""
    assert int8_binary_matches(wasm_runtime, checks_wasm, combine)


# Operand shapes that take every walk of LiteRT's ADD / MUL (porter.reference.litert.int8.broadcast_walk):
# flat with a tail; five-fold runs of y4 > 1 with a tail, switched or not; runs of y3 against a
# broadcast value (y4 == 1) with a tail, switched or not; a broadcast leading axis; a true scalar;
# a rank-5 pattern with every one of y0..y4 above one.
INT8_WALK_SHAPES = [((4103,), (4103,)), ((6, 29), (1, 29)), ((1, 29), (6, 29)), ((37, 1), (1, 45)),
                    ((3, 45), (3, 1)), ((3, 4, 20), (4, 20)), ((), (50,)), ((2, 5, 3, 1, 7), (2, 1, 3, 4, 7))]


def int8_walks_match(wasm_runtime, wasm, seed=85) -> bool:
    """ADD and MUL through the crate's walk of each shape pair against numpy's per-element paths."""
    rng = np.random.default_rng(seed)
    for combine, kernel in (("add", K.add), ("mul", K.mul)):
        for quants in INT8_TIES[:2] + INT8_TIES[3:]:
            for x_shape, y_shape in INT8_WALK_SHAPES:
                kind, dims, swapped = K.broadcast_walk(x_shape, y_shape)
                x, y = (rng.integers(-128, 128, s).astype(np.int64) for s in (x_shape, y_shape))
                walk = ["flat"] if kind == "flat" else ["five", *dims, int(swapped)]
                args = ["int8-walk", combine, "-", *int8_binary_args(combine, *quants), x.size, *walk]
                out = int8_run(wasm_runtime, wasm, args, np.concatenate([x.ravel(), y.ravel()])[None])
                want = kernel(x, quants[0], y, quants[1], quants[2]).ravel()
                if out is None or not np.array_equal(np.frombuffer(out, np.int8), want):
                    return False
    return True


def test_int8_walks_take_litert_paths(wasm_runtime, checks_wasm):
    assert int8_walks_match(wasm_runtime, checks_wasm)


def int8_mean_4d_matches(wasm_runtime, wasm, seed=86) -> bool:
    """Mean4D's outputs from raw sums (every residue of the rounding shifts among them) for depths
    with and without a tail past its blocks of 16 channels, under seeded quantisations."""
    rng = np.random.default_rng(seed)
    for depth in (16, 21, 48, 7):
        for x_q, out_q in zip(int8_params(rng, 6), int8_params(rng, 6)):
            count = int(rng.integers(1, 400))
            m, shift, bias = K.mean_4d_parameters(x_q, out_q, count)
            sums = rng.integers(-128 * count, 128 * count, (64, depth))
            out = int8_run(wasm_runtime, wasm, ["int8-mean-4d", m, shift, bias], sums)
            if out is None or not np.array_equal(np.frombuffer(out, np.int8), K.mean_4d_from_sums(sums, m, shift, bias).ravel()):
                return False
    return True


def test_int8_mean_4d_in_blocks_and_tail(wasm_runtime, checks_wasm):
    assert int8_mean_4d_matches(wasm_runtime, checks_wasm)


def int8_add_pairs_match(wasm_runtime, wasm) -> bool:
    return int8_binary_matches(wasm_runtime, wasm, "add")


# One mutant per loop of ADD and MUL, each seen by its numpy comparison (the first by default),
# and Mean4D's.
INT8_ELEMENTWISE_RS = "src/kernels/litert/int8/elementwise.rs"
INT8_MUTATIONS = {
    # AddElementwiseInt8's combined shift taken in two steps (as AddScalarBroadcast does)
    "add elementwise shift in two steps": ("srdhm(vshl(offset, self.left_shift as i32 + shift), m)",
                                           "vshl(srdhm(vshl(offset, self.left_shift as i32), m), shift)",
                                           int8_add_pairs_match),
    # AddScalarBroadcast's floor shift rounding instead
    "add broadcast shift rounds": ("vshl(srdhm(vshl(offset, self.left_shift as i32), m), shift)",
                                   "rounding_divide_by_pot(srdhm(vshl(offset, self.left_shift as i32), m), (-shift) as u32)",
                                   int8_add_pairs_match),
    # ADD's VMOVN saturating instead of wrapping
    "add narrowing saturates": ("saturate((out as i16).wrapping_add(p.out_zp as i16) as i64)",
                                "saturate(out as i64 + p.out_zp as i64)", int8_add_pairs_match),
    # MUL's zero point added in int16 saturating instead of wrapping
    "mul offset saturates": ("saturate(out.wrapping_add(p.out_zp as i16) as i64)", "saturate(out as i64 + p.out_zp as i64)",
                             lambda rt, wasm: int8_binary_matches(rt, wasm, "mul")),
    # AddScalarBroadcast's block of 8 taken as 16
    "add broadcast block": ("if combine == Combine::Add { (16, 8) }", "if combine == Combine::Add { (16, 16) }",
                            int8_walks_match),
    # the five-fold walk not switching its inputs back
    "walk not switched": ("let (ix, iy) = if swapped { (b, a) } else { (a, b) };", "let (ix, iy) = (a, b);",
                          int8_walks_match),
    # DIV's rounding shift past 31 as a plain (saturating) shift, not x86's count modulo 32
    "div shift past 31": ("(x >> (exponent & 31)) + ((x & mask) > threshold) as i32",
                          "x.checked_shr(exponent as u32).unwrap_or(x >> 31) + ((x & mask) > threshold) as i32",
                          lambda rt, wasm: int8_binary_matches(rt, wasm, "div")),
    # Mean4D's tail channels by the NEON loop's rounding too
    "mean 4d without a tail": ("pub const MEAN_4D_BLOCK: usize = 16;", "pub const MEAN_4D_BLOCK: usize = 1;",
                               int8_mean_4d_matches),
}


@pytest.mark.parametrize("name", slow_only(INT8_MUTATIONS))
def test_mutated_int8_kernel_fails_its_check(toolchain, wasm_runtime, tmp_path, checks_wasm, name):
    original, mutated, matches = INT8_MUTATIONS[name]
    assert matches(wasm_runtime, checks_wasm)  # the unmutated kernel passes
    mutant = build_mutant(toolchain, tmp_path, "litert-dq8.tflite", INT8_ELEMENTWISE_RS,
                          original, mutated)
    assert not matches(wasm_runtime, mutant)


# ---- onnxruntime's QDQ kernels (kernels/ort/qdq.rs) -----------------------------------------------------

from porter.reference.ort import qdq as QDQ  # noqa: E402

F32 = np.float32
LIMITS = {"uint8": (0, 255), "int8": (-128, 127)}


def f32_bits(v) -> int:
    return int(np.float32(v).view(np.uint32))


def qdq_params(rng, n, dtype):
    """(scale, zero point) pairs: seeded scales over six decades, zero points over the type."""
    lo, hi = LIMITS[dtype]
    return [(float(F32(10.0 ** rng.uniform(-4, 1))), int(rng.integers(lo, hi + 1))) for _ in range(n)]


def test_qdq_gemm_tiles_match_scalar(ort_checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, ort_checks_wasm, "qdq", 3)


def _dequantize_matches(wasm_runtime, wasm) -> bool:
    """DequantizeLinear of every uint8 and int8 value under seeded scales and zero points."""
    rng = np.random.default_rng(91)
    for dtype in LIMITS:
        every = np.arange(*LIMITS[dtype][:1], LIMITS[dtype][1] + 1)
        for scale, zp in qdq_params(rng, 20, dtype):
            ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-dequantize", [f32_bits(scale), zp],
                                                every[None].astype(F32)), "<f4")
            if not np.array_equal(ours.view(np.uint32), QDQ.dequantize_linear(every, scale, zp).view(np.uint32)):
                return False
    return True


def _quantize_matches(wasm_runtime, wasm) -> bool:
    """QuantizeLinear of random values, the ties of every step (k + 1/2) * scale, both ends of
    the range and past them, infinities and NaN."""
    rng = np.random.default_rng(92)
    for dtype in LIMITS:
        for scale, zp in qdq_params(rng, 20, dtype):
            steps = np.arange(-300, 300) + 0.5
            x = np.concatenate([(steps * scale).astype(F32), (rng.standard_normal(2000) * 200 * scale).astype(F32),
                                F32([0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38, -3.4e38])])
            args = [f32_bits(scale), zp, *LIMITS[dtype]]
            ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-quantize", args, x[None]), "<i4")
            if not np.array_equal(ours, QDQ.quantize_linear(x, scale, zp, dtype).astype(np.int32)):
                return False
    return True


def _requantize_matches(wasm_runtime, wasm) -> bool:
    """MlasRequantizeOutput of int32 accumulators (small, large, ties of the scale) at seeded
    output scales."""
    rng = np.random.default_rng(93)
    for dtype in LIMITS:
        for scale, zp in qdq_params(rng, 20, dtype):
            acc = np.concatenate([rng.integers(-40000, 40000, 3000), rng.integers(-(1 << 31), 1 << 31, 500),
                                  np.arange(-300, 300)]).astype(np.int32)
            args = [f32_bits(scale), zp, *LIMITS[dtype]]
            ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-requantize", args, acc.view(F32)[None]), "<i4")
            want = QDQ.requantize_output(acc, np.float32(scale), zp, dtype).astype(np.int32)
            if not np.array_equal(ours, want):
                return False
    return True


def _qlinear_add_matches(wasm_runtime, wasm) -> bool:
    """QLinearAdd on every pair of 8-bit values, both operands whole and each one scalar per run."""
    rng = np.random.default_rng(94)
    for dtype in LIMITS:
        every = np.arange(LIMITS[dtype][0], LIMITS[dtype][1] + 1)
        a, b = (v.ravel() for v in np.meshgrid(every, every, indexing="ij"))
        for quants in zip(qdq_params(rng, 4, dtype), qdq_params(rng, 4, dtype), qdq_params(rng, 4, dtype)):
            ra, rb, fixed = QDQ.add_parameters(*quants)
            for a_scalar, b_scalar in ((0, 0), (1, 0), (0, 1)):
                args = [f32_bits(ra), f32_bits(rb), f32_bits(fixed), a_scalar, b_scalar, *LIMITS[dtype]]
                ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-add", args,
                                                    np.stack([a, b]).astype(F32)), "<i4").reshape(every.size, every.size)
                if a_scalar:  # each a a scalar against every b
                    want = np.stack([QDQ.qlinear_add(np.array([x]), quants[0], every, quants[1], quants[2], dtype)
                                     for x in every])
                elif b_scalar:
                    want = np.stack([QDQ.qlinear_add(every, quants[0], np.array([y]), quants[1], quants[2], dtype)
                                     for y in every]).T
                else:
                    want = QDQ.qlinear_add(a, quants[0], b, quants[1], quants[2], dtype).reshape(every.size, every.size)
                if not np.array_equal(ours, want.astype(np.int32)):
                    return False
    return True


def _qlinear_softmax_matches(wasm_runtime, wasm) -> bool:
    """QLinearSoftmax rows of several widths (every uint8 value among them, and a row of equal
    values, whose quotients multiplier / width tie at an odd multiplier) under seeded scales and
    multipliers 253, 254 and 255."""
    rng = np.random.default_rng(95)
    for width in (1, 2, 5, 16, 64, 256):
        y_params = qdq_params(rng, 6, "uint8") + [(1 / (m + 0.5), int(rng.integers(0, 256))) for m in (253, 254, 255)]
        for (x_scale, _), (y_scale, y_zp) in zip(qdq_params(rng, 9, "uint8"), y_params):
            y_scale = min(y_scale, 1 / 253)  # an output scale a softmax's [0, 1] could have
            table = QDQ.softmax_table(x_scale, width, LF.log_op)
            rows = rng.integers(0, 256, (40, width)).astype(np.uint8)
            rows[0] = np.resize(np.arange(256), width)
            rows[1] = rows[1, 0]
            args = [f32_bits(QDQ.softmax_multiplier(y_scale)), y_zp, width]
            ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-softmax", args,
                                                np.concatenate([table, rows.ravel().astype(F32)])[None]),
                                 np.uint8).reshape(rows.shape)
            if not np.array_equal(ours, QDQ.qlinear_softmax(rows, table, y_scale, y_zp)):
                return False
    return True


def _qgemm_matches(wasm_runtime, wasm) -> bool:
    """QLinearMatMul / QGemm's scalar kernel on random shapes: a constant int8 B (saturating
    pairs and exact) and an activation B (uint8 and int8), zero points, biases, each output."""
    rng = np.random.default_rng(96)
    for trial in range(120):
        m, k, n = int(rng.integers(1, 9)), int(rng.integers(1, 70)), int(rng.integers(1, 20))
        b_const = trial % 2 == 0
        b_dtype = "int8" if b_const or trial % 4 == 1 else "uint8"
        a = rng.integers(0, 256, (m, k)).astype(np.uint8)
        b = rng.integers(*LIMITS[b_dtype], (k, n), endpoint=True).astype(b_dtype)
        b_zp = rng.integers(*LIMITS[b_dtype], n, endpoint=True) if trial % 3 == 0 else np.zeros(n, np.int64)
        if not b_const:
            b_zp = np.full(n, b_zp[0])
        scales = (rng.random(n) * 1e-2 + 1e-3).astype(F32)
        bias = rng.integers(-10000, 10000, n)
        output = trial % 3  # float, uint8, int8
        out_dtype = [None, "uint8", "int8"][output]
        zp = int(rng.integers(*LIMITS[out_dtype])) if out_dtype else 0
        saturating = b_dtype == "int8" and trial % 5 < 3
        with_bias = trial % 2 == 1
        stored = b.T if b_const else b  # a constant B is stored [n, k]
        data = np.concatenate([a.ravel(), stored.ravel(), b_zp, scales, bias]).astype(F32)
        args = [m, k, n, int(rng.integers(0, 256)), output, zp, int(saturating), int(with_bias), int(b_const)]
        ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-gemm", args, data[None]), "<f4").reshape(m, n)
        want = QDQ.qgemm(a, (1.0, args[3]), b, b_zp, scales, None if output == 0 else (1.0, zp),
                         out_dtype or "float32", bias if with_bias else None,
                         quant.INT16_PAIRS_SATURATED if saturating else quant.EXACT_DOT)
        if not np.array_equal(ours.view(np.uint32), want.astype(F32).view(np.uint32)):
            return False
    return True


QDQ_KERNEL_CHECKS = {"dequantize": _dequantize_matches, "quantize": _quantize_matches,
                     "requantize": _requantize_matches, "qlinear-add": _qlinear_add_matches,
                     "qlinear-softmax": _qlinear_softmax_matches, "qgemm": _qgemm_matches}


@pytest.mark.parametrize("kernel", list(QDQ_KERNEL_CHECKS))
def test_qdq_scalar_kernels_match_numpy(ort_checks_wasm, wasm_runtime, kernel):
    """kernels/ort/qdq.rs against porter.reference.ort.qdq: every 8-bit input of DequantizeLinear
    and every pair of QLinearAdd's, QuantizeLinear's ties and ends, requantised accumulators,
    QLinearSoftmax rows and QGemm products."""
    assert QDQ_KERNEL_CHECKS[kernel](wasm_runtime, ort_checks_wasm)


# One mutant per QDQ kernel, each seen by its check (the tiles by the tiles-against-scalar check,
# the scalar kernels by their numpy comparison); the first by default, the rest with -m slow.
QDQ_RS = "src/kernels/ort/qdq.rs"
QDQ_MUTATIONS = {
    # the tiled GEMM without onnxruntime's AVX2 pair saturation
    "qgemm tiles lose saturation": ("integer_gemm::<true, GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, rows, &weights, out, finish);",
                                    "integer_gemm::<false, GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, rows, &weights, out, finish);",
                                    lambda rt, wasm: run_check(rt, wasm, "qdq", 3)[0] == 0),
    # MLAS's conversions rounding halves away from zero instead of to even
    "quantize rounds half away": ("v.round_ties_even() as i32 + zp", "v.round() as i32 + zp", _quantize_matches),
    # DequantizeLinear as q * scale - zp * scale (LiteRT's block form, another rounding)
    "dequantize distributes the scale": ("(q - zp) as f32 * scale", "q as f32 * scale - zp as f32 * scale",
                                         _dequantize_matches),
    # QLinearAdd's fma chain taking a before b
    "qlinear add fma order": ("fma(a, p.ra, fma(b, p.rb, p.fixed))", "fma(b, p.rb, fma(a, p.ra, p.fixed))",
                              _qlinear_add_matches),
    # QLinearSoftmax rounding half away from zero (std::round) instead of nearbyint's half to even
    "qlinear softmax rounds half away": ("(value(v) as f64 * multiplier / sum).round_ties_even()",
                                         "(value(v) as f64 * multiplier / sum).round()", _qlinear_softmax_matches),
    # the zero points' term K * za * zb dropped
    "qgemm zero point product dropped": ("+ self.k as i32 * self.a_zp * zb ", "", _qgemm_matches),
}


@pytest.mark.parametrize("name", slow_only(QDQ_MUTATIONS))
def test_mutated_qdq_kernel_fails_its_check(toolchain, wasm_runtime, tmp_path, ort_checks_wasm, name):
    original, mutated, matches = QDQ_MUTATIONS[name]
    assert matches(wasm_runtime, ort_checks_wasm)  # the unmutated kernel passes
    mutant = build_mutant(toolchain, tmp_path, "dq8pc.onnx", QDQ_RS, original, mutated)
    assert not matches(wasm_runtime, mutant)


# ---- tensor steps (kernels/common/tensor.rs): what score terms are computed from ------------------

import tensor_cases as TC  # noqa: E402
from porter.errors import PorterError  # noqa: E402
from porter.ir.encoder import Reference  # noqa: E402


def test_tensor_batch_matmul_simd_matches_scalar(checks_wasm, wasm_runtime):
    assert_check_passes(wasm_runtime, checks_wasm, "tensor-simd", 3)


def test_tensor_steps_match_numpy(checks_wasm, wasm_runtime):
    """Every tensor kernel in LiteRT's arithmetic on random operands of each dtype it takes (float
    specials, integer extremes, broadcasts, constant indices stored once per head, boxes of the
    output), against porter.reference.execute.tensor_step: products (BATCH_MATMUL's k-order chain,
    B transposed or shared by the batch), moves, gathers, casts, comparisons, selections, integer
    arithmetic and running sums."""
    cases = TC.every_case(np.random.default_rng(91), Reference.LITERT_BUILTIN)
    assert TC.mismatches(wasm_runtime, checks_wasm, cases) == []


@pytest.mark.parametrize("crate", ["litert", "ort"])
def test_onnxruntime_tensor_steps_match_numpy(checks_wasm, ort_checks_wasm, wasm_runtime, crate):
    """The same in onnxruntime's: MatMul as MLAS's SGEMM (its blocks along k, alpha), with the scalar
    emulation (a TFLite model's crate) and with relaxed_madd (an ONNX model's), negative indices
    counted from the end."""
    rng = np.random.default_rng(92)
    cases = TC.matmul_cases(rng, Reference.ONNXRUNTIME_CPU) + TC.gather_cases(rng, Reference.ONNXRUNTIME_CPU)
    assert TC.mismatches(wasm_runtime, ort_checks_wasm if crate == "ort" else checks_wasm, cases) == []


def test_tensor_log_matches_numpy_on_sampled_bit_patterns(checks_wasm, wasm_runtime):
    """LiteRT's LOG (glibc's logf) on a sample of every f32 bit pattern, the subnormals, the
    table's subintervals, 1, 0, -0, infinities and NaNs."""
    sample = np.arange(0, ALL_PATTERNS, SAMPLE_STRIDE, dtype=np.uint64).astype(np.uint32)
    edges = np.uint32([0x3F800000, 0x3F7FFFFF, 0x3F800001, 0x3F330000, 0x3F32FFFF, 0x00000001, 0x007FFFFF,
                       0x00800000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000])
    x = np.concatenate([sample, edges]).view(np.float32)
    assert TC.mismatches(wasm_runtime, checks_wasm, TC.log_cases(x)) == []


def test_onnxruntime_tensor_log_matches_numpy_on_sampled_bit_patterns(checks_wasm, wasm_runtime):
    """onnxruntime's Log (Eigen's plog in packets of four, glibc's logf on the rest) on the same
    sample, in cases of 4093 values, so that each has a tail."""
    x = np.arange(0, ALL_PATTERNS, SAMPLE_STRIDE, dtype=np.uint64).astype(np.uint32).view(np.float32)
    assert TC.mismatches(wasm_runtime, checks_wasm, TC.log_cases(x, Reference.ONNXRUNTIME_CPU, 4093)) == []


@pytest.mark.slow
@pytest.mark.parametrize("ref", [Reference.LITERT_BUILTIN, Reference.ONNXRUNTIME_CPU])
def test_tensor_log_matches_numpy_on_every_bit_pattern(checks_wasm, wasm_runtime, ref):
    chunk = 1 << 22
    for start in range(0, ALL_PATTERNS, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        assert TC.mismatches(wasm_runtime, checks_wasm, TC.log_cases(x, ref, 4093)) == [], hex(start)


def test_a_gather_index_out_of_range_stops_the_module(checks_wasm, wasm_runtime):
    """An index past its axis (or a negative one under LiteRT) ends the run with a message naming
    the kernel and the index, as the reference fails the run; nothing is read out of place."""
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    for index, ref in ((3, Reference.ONNXRUNTIME_CPU), (-1, Reference.LITERT_BUILTIN)):
        case = TC.Case(TC.TensorOp.GATHER_ELEMENTS, [data, np.array([[0, index]], np.int64)], (1, 2), "float32",
                       {"axis": 1}, ref=ref)
        with pytest.raises(PorterError, match=f"gather_elements: index {index} out of range for an axis of 3"):
            wasm_runtime.run_command(checks_wasm, ["tensor-cases"], case.encode())


# Mutants of the tensor kernels the numpy comparison must see.
TENSOR_MUTATIONS = {
    # A constant index stored once per head read with its own strides instead of broadcast: every
    # head but the first reads past the index's rows (another head's buckets).
    "gather index not broadcast": ("src/kernels/common/tensor.rs",
                                   "let index_strides = broadcast(step.operands[1].shape, step.shape);",
                                   "let index_strides = natural(step.operands[1].shape);"),
    # BATCH_MATMUL's chain started at the first product instead of +0: -0 products stay -0.
    "batch matmul chain start": ("src/kernels/litert/batch_matmul.rs",
                                 "let mut total = 0.0f32;\n        for (k, &x) in a.iter().enumerate() {\n            total += x * b[k * ldb + j];",
                                 "let mut total = -0.0f32;\n        for (k, &x) in a.iter().enumerate() {\n            total += x * b[k * ldb + j];"),
    # A float cast to int rounded to nearest instead of truncated (the cast typed programs share).
    "cast rounds": ("src/kernels/common/exact.rs", "v.trunc() as i64", "v.round() as i64"),
    # logf's subinterval read one bit too high: the wrong 1/c and log(c) for half the inputs.
    "logf table index": ("src/kernels/litert/libm.rs", "LOGF_TABLE[((tmp >> 19) % 16) as usize]",
                         "LOGF_TABLE[((tmp >> 20) % 16) as usize]"),
    # Eigen's plog taking the mantissa below sqrt(1/2) without doubling it (a cycle of the range
    # reduction lost): wrong for every value whose mantissa is small.
    "plog range reduction": ("src/kernels/ort/float/math.rs", "m = (m - 1.0) + if small { m } else { 0.0 };",
                             "m = m - 1.0;"),
}


@pytest.mark.parametrize("name", slow_only(TENSOR_MUTATIONS))
def test_mutated_tensor_kernel_fails_against_numpy(toolchain, wasm_runtime, tmp_path, checks_wasm, name):
    source, original, mutated = TENSOR_MUTATIONS[name]
    rng = np.random.default_rng(93)
    cases = TC.every_case(rng, Reference.LITERT_BUILTIN)
    if name.startswith("logf"):
        cases = TC.log_cases(np.arange(0x3F000000, 0x40000000, 97, dtype=np.uint32).view(np.float32))
    if name.startswith("plog"):
        cases = TC.log_cases(np.arange(0x3F000000, 0x40000000, 97, dtype=np.uint32).view(np.float32),
                             Reference.ONNXRUNTIME_CPU, 4093)
    if name.startswith("batch matmul"):  # zeros times negatives: a chain of -0 products
        a, b = -np.ones((1, 1, 2, 3), np.float32), np.zeros((1, 1, 3, 5), np.float32)
        cases.append(TC.Case(TC.TensorOp.MATMUL, [a, b], (1, 1, 2, 5), "float32", {"adj_b": False, "alpha": 1.0}))
    assert TC.mismatches(wasm_runtime, checks_wasm, cases) == []  # the unmutated kernels pass
    mutant = build_mutant(toolchain, tmp_path, "litert-dq8.tflite", source, original, mutated)
    assert TC.mismatches(wasm_runtime, mutant, cases)


# ---- the exact element work typed programs and tensor steps share (kernels/common/exact.rs), QLinearMul, Pow

from porter.reference import exact as E, ops as OPS, typed as T  # noqa: E402

I32, I64 = np.iinfo(np.int32), np.iinfo(np.int64)
# values at every edge int32 and int64 arithmetic wraps or compares at, and small ones
EDGE_INTS = np.array(sorted({0, 1, -1, 2, -2, 7, -7, 255, -256, 65535, -65536, I32.max, I32.min, I32.max - 1,
                             I32.min + 1, 1 << 31, -(1 << 31) - 1, 1 << 32, I64.max, I64.min, I64.max - 1,
                             I64.min + 1, 3037000499, -3037000499}), np.int64)


def typed_reference(wasm_runtime, wasm, op, args, words: np.ndarray):
    """A typed-* check on stdin words (int64 values travel as two words each); the output bytes,
    or None where the module failed (a trap)."""
    words = np.ascontiguousarray(words).view("<f4").reshape(1, -1)
    stdin = struct.pack("<II", *words.shape) + words.tobytes()
    try:
        result = wasm_runtime.run_command(wasm, ["reference", op, *map(str, args)], stdin)
    except PorterError:  # the module trapped
        return None
    return result.stdout if result.exit_code == 0 else None


def _int_pairs(rng) -> tuple[np.ndarray, np.ndarray]:
    """Every pair of edge values, and random int32 and int64 pairs."""
    a, b = (v.ravel() for v in np.meshgrid(EDGE_INTS, EDGE_INTS, indexing="ij"))
    r32 = rng.integers(I32.min, I32.max, (2, 3000), endpoint=True)
    r64 = rng.integers(I64.min, I64.max, (2, 3000), endpoint=True, dtype=np.int64)
    return np.concatenate([a, r32[0], r64[0]]), np.concatenate([b, r32[1], r64[1]])


def _compare_matches(wasm_runtime, wasm) -> bool:
    rng = np.random.default_rng(101)
    a, b = _int_pairs(rng)
    specials = F32([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1, -1, 3.4e38])
    fa, fb = (v.ravel() for v in np.meshgrid(specials, specials, indexing="ij"))
    fa, fb = np.concatenate([fa, rng.standard_normal(2000).astype(F32)]), np.concatenate([fb, rng.standard_normal(2000).astype(F32)])
    for kind in E.COMPARE:
        ours = typed_reference(wasm_runtime, wasm, "typed-compare", [kind], np.concatenate([a, b]))
        floats = typed_reference(wasm_runtime, wasm, "typed-compare-f32", [kind], np.concatenate([fa, fb]))
        if ours is None or floats is None or not np.array_equal(np.frombuffer(ours, np.uint8), E.compare(kind, a, b)) \
                or not np.array_equal(np.frombuffer(floats, np.uint8), E.compare(kind, fa, fb)):
            return False
    return True


def _arithmetic_matches(wasm_runtime, wasm) -> bool:
    a, b = _int_pairs(np.random.default_rng(102))
    for kind in E.ARITHMETIC:
        for dtype, bits in (("int32", 32), ("int64", 64)):
            x, y = (v.astype(dtype) for v in (a, b)) if dtype == "int32" else (a, b)
            ours = typed_reference(wasm_runtime, wasm, "typed-arith", [kind, bits],
                                   np.concatenate([x, y]).astype(np.int64))
            if ours is None or not np.array_equal(np.frombuffer(ours, "<i8"), E.arithmetic(kind, x, y, dtype)):
                return False
    return True


def _cumsum_matches(wasm_runtime, wasm) -> bool:
    rng = np.random.default_rng(103)
    for trial in range(60):
        shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
        axis = int(rng.integers(0, len(shape)))
        dtype = ("int32", "int64")[trial % 2]
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, shape, endpoint=True, dtype=np.int64).astype(dtype) if trial % 3 == 0 \
            else rng.integers(-5, 5, shape).astype(dtype)
        exclusive, reverse = bool(trial & 4), bool(trial & 8)
        outer, n, inner = int(np.prod(shape[:axis])), shape[axis], int(np.prod(shape[axis + 1:]))
        ours = typed_reference(wasm_runtime, wasm, "typed-cumsum",
                               [outer, n, inner, int(exclusive), int(reverse), np.iinfo(dtype).bits], x.astype(np.int64))
        if ours is None or not np.array_equal(np.frombuffer(ours, "<i8"), E.cumsum(x, axis, exclusive, reverse).ravel()):
            return False
    return True


def _gathers_match(wasm_runtime, wasm) -> bool:
    """GatherND and GatherElements on random shapes and depths, negative indices wrapped (the
    table positions each reads, against numpy's gather of a table of its positions)."""
    rng = np.random.default_rng(104)
    for trial in range(60):
        table_shape = tuple(int(d) for d in rng.integers(1, 6, int(rng.integers(1, 4))))
        positions = np.arange(int(np.prod(table_shape))).reshape(table_shape)
        depth = int(rng.integers(1, len(table_shape) + 1))
        dims = table_shape[:depth]
        index = np.stack([rng.integers(-d, d, (3, 4)) for d in dims], axis=-1)
        ours = typed_reference(wasm_runtime, wasm, "typed-gather-nd",
                               [int(np.prod(table_shape[depth:])), 1, *dims], index.astype(np.int64))
        if ours is None or not np.array_equal(np.frombuffer(ours, "<i8"), T.gather_nd(positions, index, True).ravel()):
            return False
        axis = int(rng.integers(0, len(table_shape)))
        shape = tuple(int(rng.integers(1, d + 1)) for d in table_shape)
        index = rng.integers(-table_shape[axis], table_shape[axis], shape)
        strides = [int(np.prod(table_shape[a + 1:])) for a in range(len(table_shape))]
        ours = typed_reference(wasm_runtime, wasm, "typed-gather-elements",
                               [axis, table_shape[axis], 1, len(shape), *shape, *strides], index.astype(np.int64))
        if ours is None or not np.array_equal(np.frombuffer(ours, "<i8"),
                                              T.gather_elements(positions, index, axis, True).ravel()):
            return False
    # an index outside the axis, or a negative one where the runtime does not wrap: refused (a trap)
    return all(typed_reference(wasm_runtime, wasm, "typed-gather-nd", [1, wraps, 4], np.array([i], np.int64)) is None
               for i, wraps in ((4, 1), (-5, 1), (-1, 0)))


def _float_to_int_matches(wasm_runtime, wasm) -> bool:
    """Every class the cast branches on: NaN, infinities, zeros, subnormals, the values either side
    of each type's range and of the halves, sampled patterns of every exponent."""
    edges = [np.nextafter(F32(v), F32(t)) for v in (2.0 ** 31, -(2.0 ** 31), 2.0 ** 63, -(2.0 ** 63), 0.5, -0.5, 1.5)
             for t in (np.inf, -np.inf)]
    x = np.concatenate([F32([np.nan, np.inf, -np.inf, 0, -0.0, 1e-45, -1e-45, 2.0 ** 31, -(2.0 ** 31), 2.0 ** 63,
                             -(2.0 ** 63), 0.5, -0.5, 1.5, -2.5]), F32(edges),
                        np.arange(0, 1 << 32, 65537, dtype=np.uint64).astype(np.uint32).view(F32)])
    for wide, dtype in ((0, "int32"), (1, "int64")):
        ours = typed_reference(wasm_runtime, wasm, "typed-float-to-int", [wide], x)
        if ours is None or not np.array_equal(np.frombuffer(ours, "<i8"), T.cast(x, dtype).astype(np.int64)):
            return False
    return True


def _qlinear_mul_matches(wasm_runtime, wasm) -> bool:
    """QLinearMul on every pair of 8-bit values under seeded quantisations, one of them so fine
    that the conversion overflows."""
    rng = np.random.default_rng(105)
    for dtype in LIMITS:
        every = np.arange(LIMITS[dtype][0], LIMITS[dtype][1] + 1)
        a, b = (v.ravel() for v in np.meshgrid(every, every, indexing="ij"))
        for trial, quants in enumerate(zip(qdq_params(rng, 4, dtype), qdq_params(rng, 4, dtype), qdq_params(rng, 4, dtype))):
            if trial == 0:
                quants = (quants[0], quants[1], (1e-6, quants[2][1]))
            (sa, za), (sb, zb), (sc, zc) = quants
            args = [f32_bits(QDQ.mul_ratio(sa, sb, sc)), za, zb, zc, *LIMITS[dtype]]
            ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-mul", args, np.stack([a, b]).astype(F32)), "<i4")
            if not np.array_equal(ours, QDQ.qlinear_mul(a, quants[0], b, quants[1], quants[2], dtype).astype(np.int32)):
                return False
    return True


def _pow_matches(wasm_runtime, wasm) -> bool:
    """Pow by 2 and by 3 on sampled bit patterns of every exponent and the special values."""
    x = np.concatenate([np.arange(0, 1 << 32, SAMPLE_STRIDE, dtype=np.uint64).astype(np.uint32).view(F32),
                        F32([0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e30, -1e30, 3.4e38])])
    for cube, exponent in ((0, 2.0), (1, 3.0)):
        ours = np.frombuffer(int8_reference(wasm_runtime, wasm, "qdq-pow", [cube], x[None]), "<f4")
        with np.errstate(all="ignore"):
            want = OPS.evaluate("pow", {}, [x, F32(exponent)], Reference.ONNXRUNTIME_CPU)
        if not np.array_equal(ours.view(np.uint32), want.view(np.uint32)):
            return False
    return True


TYPED_KERNEL_CHECKS = {"compare": _compare_matches, "arithmetic": _arithmetic_matches, "cumsum": _cumsum_matches,
                       "gathers": _gathers_match, "float-to-int": _float_to_int_matches}


@pytest.mark.parametrize("kernel", list(TYPED_KERNEL_CHECKS))
def test_typed_integer_kernels_match_numpy(checks_wasm, wasm_runtime, kernel):
    """kernels/common/exact.rs against porter.reference.exact and .typed: comparisons and int32 / int64
    arithmetic on every pair of edge values and random ones, running sums (wrapping), the gathers'
    positions with negative indices, and the float-to-integer cast on every class it branches on."""
    assert TYPED_KERNEL_CHECKS[kernel](wasm_runtime, checks_wasm)


@pytest.mark.parametrize("kernel", ["qlinear-mul", "pow"])
def test_qlinear_mul_and_pow_match_numpy(ort_checks_wasm, wasm_runtime, kernel):
    """kernels/ort/qdq.rs's QLinearMul on every pair of 8-bit values, and Pow by 2 and 3
    (kernels/ort/float/math.rs), against porter.reference.ort.qdq and porter.reference.ops."""
    assert {"qlinear-mul": _qlinear_mul_matches, "pow": _pow_matches}[kernel](wasm_runtime, ort_checks_wasm)


# One mutant per kernel of this section, each seen by its numpy comparison; the first by default.
EXACT_RS, ORT_MATH_RS = "src/kernels/common/exact.rs", "src/kernels/ort/float/math.rs"
TYPED_MUTATIONS = {
    # an exclusive running sum that includes each value
    "cumsum exclusive includes the value": (EXACT_RS, "write(at, total);\n                total = total.wrapping_add(v);",
                                            "total = total.wrapping_add(v);\n                write(at, total);",
                                            _cumsum_matches),
    # int64 sums saturating instead of wrapping
    "arithmetic saturates": (EXACT_RS, "Arithmetic::Add => a.wrapping_add(b)", "Arithmetic::Add => a.saturating_add(b)",
                             _arithmetic_matches),
    # a negative index taken as it is (a trap) where the runtime counts it from the end
    "gather ignores the wrap": (EXACT_RS, "let j = if wraps && i < 0 { i + dim as i64 } else { i };", "let j = i;",
                                _gathers_match),
    # Rust's saturating float-to-int conversion instead of x86's integer indefinite
    "cast saturates": (EXACT_RS, "if v.is_nan() || v <= lo - 1.0 || v >= hi {", "if v.is_nan() {", _float_to_int_matches),
    # equality as less-or-equal
    "compare equal as less-equal": (EXACT_RS, "Comparison::Equal => a == b,", "Comparison::Equal => a <= b,",
                                    _compare_matches),
    # QLinearMul rounding half away from zero instead of cvtps_epi32's half to even
    "qlinear mul rounds half away": (QDQ_RS, "let r = v.round_ties_even();", "let r = v.round();", _qlinear_mul_matches),
    # Pow by 3 rounded once (in f64) instead of after each product
    "pow cube rounded once": (ORT_MATH_RS, "if cube { square * x } else { square }",
                              "if cube { (x as f64 * x as f64 * x as f64) as f32 } else { square }", _pow_matches),
}


@pytest.mark.parametrize("name", slow_only(TYPED_MUTATIONS))
def test_mutated_typed_kernel_fails_its_check(toolchain, wasm_runtime, tmp_path, checks_wasm, name):
    source, original, mutated, matches = TYPED_MUTATIONS[name]
    assert matches(wasm_runtime, checks_wasm)  # the unmutated kernel passes
    mutant = build_mutant(toolchain, tmp_path, "litert-dq8.tflite", source, original, mutated)
    assert not matches(wasm_runtime, mutant)


# ---- every mutant's site ---------------------------------------------------------------------------

def mutation_sites():
    """(table, mutant, template source, original text) of every mutant above: most of them build
    only under -m slow, so the default suite checks here that each still names code that exists."""
    yield from (("MUTATIONS", n, src, o) for n, (src, o, _, _) in MUTATIONS.items())
    yield from (("ORT_MUTATIONS", n, src, o) for n, (src, o, _, _) in ORT_MUTATIONS.items())
    yield from (("NUMPY_MUTATIONS", n, src, o) for n, (_, src, o, *_) in NUMPY_MUTATIONS.items())
    yield from (("INT8_MUTATIONS", n, INT8_ELEMENTWISE_RS, o) for n, (o, _, _) in INT8_MUTATIONS.items())
    yield from (("QDQ_MUTATIONS", n, QDQ_RS, o) for n, (o, _, _) in QDQ_MUTATIONS.items())
    yield from (("TENSOR_MUTATIONS", n, src, o) for n, (src, o, _) in TENSOR_MUTATIONS.items())
    yield from (("TYPED_MUTATIONS", n, src, o) for n, (src, o, *_) in TYPED_MUTATIONS.items())


def test_every_mutation_site_is_found_once_in_its_kernel():
    stale = []
    for table, name, source, original in mutation_sites():
        path = TEMPLATES_DIR / "rust_forward" / source
        text = path.read_text() if path.exists() else ""
        if text.count(original) != 1:
            stale.append(f"{table}[{name!r}]: {source} holds its original {text.count(original)} times")
    assert not stale, "\n".join(stale)
