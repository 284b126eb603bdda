"""LiteRT's builtin integer kernels for full-integer int8 graphs, in numpy.

The arithmetic of the kernels LiteRT's builtin resolver (BUILTIN_WITHOUT_DEFAULT_DELEGATES, one
thread, x86) runs for ai-edge-quantizer's static_wi8_ai8 and TFLiteConverter's full-integer
files, read from TFLite's kernels and measured op by op against LiteRT itself
(tests/test_int8_full.py):

- every real multiplier becomes a fixed-point multiplier and shift (QuantizeMultiplier: frexp,
  the mantissa rounded half away from zero to 31 bits). This LiteRT build applies it with
  double rounding everywhere (TFLITE_SINGLE_ROUNDING off: a single-rounding model of the
  products misses about one output in 600): gemmlowp's SaturatingRoundingDoublingHighMul (ties
  up, as NEON's VQRDMULH) and RoundingDivideByPOT (ties away from zero) in the elementwise
  kernels, MEAN, RSQRT and BATCH_MATMUL, and ruy's form in the per-channel FULLY_CONNECTED,
  whose final right shift rounds ties up (toward +inf): -0.5 exactly becomes 0 there, -1 in
  gemmlowp; MUL's and DIV's real multipliers are float32 arithmetic on the scales;
- ADD / SUB rescale both inputs to a common scale at 2^20 (SQUARED_DIFFERENCE at 2^7) before the
  output multiplier; MUL multiplies the offset inputs and applies one multiplier. ADD and MUL
  run NEON loops (through NEON_2_SSE) on whole blocks of each run ProcessBroadcastShapes makes of
  the two shapes and the reference formula on the rest, which round and narrow otherwise:
  broadcast_walk and binary_paths say which loop takes each element;
- MEAN takes the int32 sum less count * zero point through one multiplier with the count
  folded into it (the older float division of TFLite's reference kernel misses ~40%), except
  over axes 1 and 2 of a 4-D tensor with keep_dims (Mean4D: its own bias, NEON blocks);
- SUM is still float (round(sum * scale + bias)); DIV multiplies by gemmlowp's fixed-point
  reciprocal of the divisor;
- RSQRT runs gemmlowp's fixed-point Newton iteration per input value;
- SOFTMAX takes a float table of exp(-scale * d) for the 256 distances d from the row's
  maximum, sums it in order in float32 and rounds each probability to the output scale;
- GELU (and LOGISTIC / TANH) are 256-entry tables filled by the float function at Prepare,
  SQRT's the same but truncated;
- QUANTIZE (float -> int8, int8 -> int8) and DEQUANTIZE run NEON vector loops through
  NEON_2_SSE on whole blocks and a scalar loop on the rest, with different roundings, so a value's
  result depends on where in the tensor it sits.

Every function takes and returns numpy integer arrays (int8 activations, int32 accumulators);
quantisation parameters are the tensors' float32 scales and integer zero points.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math

import numpy as np

INT8_MIN, INT8_MAX = -128, 127
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


# --- fixed-point multipliers -------------------------------------------------------------------

def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite's QuantizeMultiplier: real = m * 2^(shift - 31) with m in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    mantissa, shift = math.frexp(real)
    q = int(math.floor(abs(mantissa) * (1 << 31) + 0.5)) * (1 if mantissa > 0 else -1)
    if q == 1 << 31:
        q //= 2
        shift += 1
    if shift < -31:  # too small to represent: the multiplier is zero
        return 0, 0
    return q, shift


def _wrap32(x: np.ndarray) -> np.ndarray:
    """int64 values taken modulo 2^32 into int32 range (C's wrapping int32 arithmetic)."""
    return ((np.asarray(x, np.int64) + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturating_rounding_doubling_high_mul(a: np.ndarray, b: int) -> np.ndarray:
    """gemmlowp's SaturatingRoundingDoublingHighMul: (ab + nudge) / 2^31 with C's truncating
    division, the nudge 2^30 for a positive product and 1 - 2^30 for a negative one, which is
    floor((ab + 2^30) / 2^31): ties rounded up (toward +inf), exactly as NEON's VQRDMULH (and
    NEON_2_SSE's emulation of it) rounds them; INT32_MIN * INT32_MIN saturates."""
    a = np.asarray(a, np.int64)
    ab = a * np.int64(b)
    nudge = np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    t = ab + nudge
    high = np.where(t >= 0, t >> 31, -((-t) >> 31))  # C++ division truncates toward zero
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), high)


def rounding_divide_by_pot(x: np.ndarray, exponent: int) -> np.ndarray:
    """gemmlowp: x / 2^exponent rounded to nearest, ties away from zero."""
    x = np.asarray(x, np.int64)
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_double_rounding(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    """TFLite's MultiplyByQuantizedMultiplier as built without TFLITE_SINGLE_ROUNDING."""
    left, right = max(shift, 0), max(-shift, 0)
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(
        _wrap32(np.asarray(x, np.int64) * (1 << left)), m), right)


def multiply_ruy(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    """ruy's multiplier (LiteRT's per-channel FULLY_CONNECTED on x86): the left shift, then
    (x * m + 2^30) >> 31, then a right shift rounding half up (not away from zero)."""
    left, right = max(shift, 0), max(-shift, 0)
    v = (_wrap32(np.asarray(x, np.int64) << left) * np.int64(m) + np.int64(1 << 30)) >> 31
    return (v + np.int64(1 << (right - 1))) >> right if right else v


def vshl(x: np.ndarray, shift: int) -> np.ndarray:
    """NEON's VSHL by a register (NEON_2_SSE's serial loop): a left shift wrapping to 32 bits, or
    for a negative count an arithmetic right shift (a floor, no rounding); 0 past 31."""
    x = np.asarray(x, np.int64)
    if abs(shift) >= 32:
        return np.zeros_like(x)
    return _wrap32(x << shift) if shift >= 0 else x >> -shift


def _wrap16(x: np.ndarray) -> np.ndarray:
    """int values taken modulo 2^16 into int16 range (vmovn, and NEON's wrapping int16 adds)."""
    return ((np.asarray(x, np.int64) + (1 << 15)) & 0xFFFF) - (1 << 15)


def _saturate(x: np.ndarray, lo: int = INT8_MIN, hi: int = INT8_MAX) -> np.ndarray:
    return np.clip(x, lo, hi).astype(np.int8)


def _round_half_away(v: np.ndarray) -> np.ndarray:
    """TfLiteRound (std::round) on float32 values: ties away from zero."""
    return np.sign(v) * np.floor(np.abs(v) + np.float32(0.5))


# --- which loop of LiteRT's optimized ADD / MUL computes an element ------------------------------

SCALAR, VECTOR, BROADCAST_VECTOR = 0, 1, 2  # the loops: reference formula, NEON block, scalar-broadcast block
ADD_BLOCKS = (16, 8)  # AddElementwiseInt8's and AddScalarBroadcast's NEON blocks
MUL_BLOCKS = (16, 16)  # MulElementwise's and MulSimpleBroadcast's


def broadcast_walk(x_shape, y_shape) -> tuple[str, tuple[int, ...], bool]:
    """ProcessBroadcastShapes: how LiteRT's optimized binary kernels walk two operands. "flat" when
    the shapes are equal once extended to one rank (one elementwise run over the flat size);
    "five_fold" with (y0, y1, y2, y3, y4) and whether the inputs are switched (the second one
    broadcasts innermost); "generic" when no five-fold pattern fits (the reference 6-D loop)."""
    rank = max(len(x_shape), len(y_shape))
    x = (1,) * (rank - len(x_shape)) + tuple(x_shape)
    y = (1,) * (rank - len(y_shape)) + tuple(y_shape)
    if x == y:
        return "flat", (), False
    inner = next(i for i in reversed(range(rank)) if x[i] != y[i])
    if x[inner] != 1 and y[inner] != 1:
        return "generic", (), False
    swapped = x[inner] != 1  # the second input broadcasts there: the kernels take it first
    a, b = (y, x) if swapped else (x, y)
    dims = [1] * 5
    i = rank - 1
    for k, test in ((4, lambda i: a[i] == b[i]), (3, lambda i: a[i] == 1), (2, lambda i: a[i] == b[i]),
                    (1, lambda i: b[i] == 1), (0, lambda i: a[i] == b[i])):
        while i >= 0 and test(i):
            dims[k] *= max(a[i], b[i])
            i -= 1
    return ("generic", (), False) if i >= 0 else ("five_fold", tuple(dims), swapped)


def binary_paths(x_shape, y_shape, block: int, broadcast_block: int) -> np.ndarray:
    """The loop each output element of ADD / MUL takes (SCALAR, VECTOR, BROADCAST_VECTOR), over the
    broadcast output shape. A flat run (equal shapes) and the five-fold walk's inner runs of y4 > 1
    take `block` values at a time by the NEON loop, the rest of each run by the scalar one; with
    y4 == 1 the runs of y3 against one broadcast value take `broadcast_block`; a generic broadcast
    is the reference loop throughout."""
    out_shape = np.broadcast_shapes(tuple(x_shape), tuple(y_shape))
    kind, dims, _ = broadcast_walk(x_shape, y_shape)
    size = int(np.prod(out_shape, dtype=np.int64))
    if kind == "generic":
        return np.full(out_shape, SCALAR, np.int64)
    if kind == "flat":
        run, width, path = size, block, VECTOR
    elif dims[4] > 1:
        run, width, path = dims[4], block, VECTOR
    else:
        run, width, path = dims[3], broadcast_block, BROADCAST_VECTOR
    at = np.arange(size, dtype=np.int64) % run
    return np.where(at < run - run % width, path, SCALAR).reshape(out_shape)


# --- matrix products ---------------------------------------------------------------------------

def requantize_channels(acc: np.ndarray, multipliers, out_zp: int) -> np.ndarray:
    """int32 accumulators [..., n] to int8 with ruy's multiplier, one (m, shift) per channel."""
    acc = np.asarray(acc, np.int64)
    out = np.empty(acc.shape, np.int64)
    for c, (m, s) in enumerate(multipliers):
        out[..., c] = multiply_ruy(acc[..., c], m, s)
    return _saturate(out + out_zp)


def fully_connected(x: np.ndarray, x_zp: int, w: np.ndarray, bias: np.ndarray | None,
                    multipliers, out_zp: int) -> np.ndarray:
    """int8 x [rows, k] by int8 weights [n, k] (zero point 0) + int32 bias -> int8 [rows, n]."""
    acc = (np.asarray(x, np.int64) - x_zp) @ np.asarray(w, np.int64).T
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)
    return requantize_channels(acc, multipliers, out_zp)


def fully_connected_multipliers(x_scale: float, w_scales: np.ndarray, out_scale: float):
    """One (m, shift) per output channel: x_scale * w_scale / out_scale, in double."""
    return [quantize_multiplier(float(np.float32(x_scale)) * float(s) / float(np.float32(out_scale)))
            for s in np.asarray(w_scales, np.float32).ravel()]


def batch_matmul(a: np.ndarray, a_zp: int, b: np.ndarray, b_zp: int, multiplier, out_zp: int) -> np.ndarray:
    """int8 [..., m, k] @ int8 [..., k, n] with both zero points -> int8 [..., m, n]."""
    acc = np.matmul(np.asarray(a, np.int64) - a_zp, np.asarray(b, np.int64) - b_zp)
    return _saturate(multiply_double_rounding(acc, *multiplier) + out_zp)


def batch_matmul_multiplier(a_scale: float, b_scale: float, out_scale: float):
    """GetQuantizedConvolutionMultipler: the input product in float32, divided in double."""
    product = float(np.float32(a_scale) * np.float32(b_scale))
    return quantize_multiplier(product / float(np.float32(out_scale)))


# --- elementwise -------------------------------------------------------------------------------

def _scale(q) -> float:
    return float(np.float32(q))


ADD_LEFT_SHIFT, SQUARED_DIFFERENCE_LEFT_SHIFT = 20, 7


def rescale_multipliers(x_scale: float, y_scale: float, out_scale: float, left_shift: int, squared: bool):
    """ADD / SUB (squared False) and SQUARED_DIFFERENCE: each input's multiplier to twice the
    larger scale, and the output's (the scale squared, and the shift twice, for a square)."""
    twice_max = 2.0 * max(_scale(x_scale), _scale(y_scale))
    mx = quantize_multiplier(_scale(x_scale) / twice_max)
    my = quantize_multiplier(_scale(y_scale) / twice_max)
    if squared:
        mo = quantize_multiplier(twice_max * twice_max / (float(1 << (2 * left_shift)) * _scale(out_scale)))
    else:
        mo = quantize_multiplier(twice_max / (float(1 << left_shift) * _scale(out_scale)))
    return mx, my, mo


def _rescaled_inputs(x, x_q, y, y_q, out_q, left_shift: int, squared: bool):
    """Both inputs less their zero points, shifted left and rescaled (MultiplyByQuantizedMultiplier-
    SmallerThanOneExp), and the output's multiplier: the reference formula of ADD / SUB /
    SQUARED_DIFFERENCE."""
    (xs, xz), (ys, yz), (os_, oz) = x_q, y_q, out_q
    mx, my, mo = rescale_multipliers(xs, ys, os_, left_shift, squared)
    sx = multiply_double_rounding((np.asarray(x, np.int64) - xz) << left_shift, *mx)
    sy = multiply_double_rounding((np.asarray(y, np.int64) - yz) << left_shift, *my)
    return sx, sy, mo


def _add_scalar(x, x_q, y, y_q, out_q, subtract: bool = False) -> np.ndarray:
    """The reference formula (LiteRT's scalar loops): each input rescaled to twice the larger
    scale at 2^20 by gemmlowp's rounding, summed, rescaled."""
    sx, sy, mo = _rescaled_inputs(x, x_q, y, y_q, out_q, ADD_LEFT_SHIFT, squared=False)
    return _saturate(multiply_double_rounding(sx - sy if subtract else sx + sy, *mo) + out_q[1])


def _add_vector(x, x_q, y, y_q, out_q, broadcast: bool) -> np.ndarray:
    """ADD's NEON loops (through NEON_2_SSE; VQRDMULH rounds as gemmlowp's high multiply does).
    AddElementwiseInt8 (broadcast False) shifts each input left by 20 plus its (negative) shift
    at once, then multiplies: one rounding where the reference formula rounds the product and
    then divides with a second. AddScalarBroadcast (broadcast True) shifts by 20, multiplies,
    then shifts right by the input's shift with VSHL: a floor, not a rounding. Then both take the
    sum through the output multiplier and gemmlowp's RoundingDivideByPOT, narrow it to int16
    (VMOVN: wrapping, not saturating), add the output offset in int16 (wrapping) and saturate to
    int8 (VQMOVN)."""
    (xs, xz), (ys, yz), (os_, oz) = x_q, y_q, out_q
    mx, my, mo = rescale_multipliers(xs, ys, os_, ADD_LEFT_SHIFT, squared=False)

    def rescaled(q, zp, mult):
        offset = np.asarray(q, np.int64) - zp
        if broadcast:
            return vshl(saturating_rounding_doubling_high_mul(vshl(offset, ADD_LEFT_SHIFT), mult[0]), mult[1])
        return saturating_rounding_doubling_high_mul(vshl(offset, ADD_LEFT_SHIFT + mult[1]), mult[0])

    raw = _wrap32(rescaled(x, xz, mx) + rescaled(y, yz, my))
    out = rounding_divide_by_pot(saturating_rounding_doubling_high_mul(raw, mo[0]), -mo[1])
    return _saturate(_wrap16(_wrap16(out) + oz))


def add_by_path(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q, path: int) -> np.ndarray:
    """int8 ADD of each pair (broadcast) by one loop's formula: SCALAR, VECTOR or BROADCAST_VECTOR."""
    x, y = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(y, np.int64))
    if path == SCALAR:
        return _add_scalar(x, x_q, y, y_q, out_q)
    return _add_vector(x, x_q, y, y_q, out_q, broadcast=path == BROADCAST_VECTOR)


def add(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q) -> np.ndarray:
    """int8 ADD as LiteRT's x86 build runs it (optimized_integer_ops::Add and BroadcastAddDispatch):
    each element by the loop its position falls in (binary_paths), all three on the same
    rescaling to twice the larger scale at 2^20 but rounding differently."""
    paths = binary_paths(np.shape(x), np.shape(y), *ADD_BLOCKS)
    return np.choose(paths, [add_by_path(x, x_q, y, y_q, out_q, p) for p in (SCALAR, VECTOR, BROADCAST_VECTOR)])


def sub(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q) -> np.ndarray:
    """int8 SUB: LiteRT runs the reference kernel (Sub, BroadcastQuantSubSlow) for every shape."""
    x, y = np.broadcast_arrays(np.asarray(x, np.int64), np.asarray(y, np.int64))
    return _add_scalar(x, x_q, y, y_q, out_q, subtract=True)


def mul_multiplier(x_scale: float, y_scale: float, out_scale: float):
    """x_scale * y_scale / out_scale in float32, as mul.cc's Prepare computes it from the
    tensors' float scales (only then widened to double)."""
    return quantize_multiplier(float(np.float32(np.float32(x_scale) * np.float32(y_scale)) / np.float32(out_scale)))


def _mul_scalar(prod: np.ndarray, m, out_zp: int) -> np.ndarray:
    """The reference formula: MultiplyByQuantizedMultiplier of the product, plus the zero point."""
    return _saturate(multiply_double_rounding(prod, *m) + out_zp)


def _mul_vector(prod: np.ndarray, m, out_zp: int) -> np.ndarray:
    """MUL's NEON loops (MulElementwise, MulSimpleBroadcast): the reference formula's rounding,
    then the result saturated to int16 (VQMOVN), the zero point added in int16 (wrapping: a result
    far past the int8 range can come back with the other sign) and saturated to int8."""
    out = multiply_double_rounding(prod, *m)
    return _saturate(_wrap16(np.clip(out, -(1 << 15), (1 << 15) - 1) + out_zp))


def mul_by_path(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q, path: int) -> np.ndarray:
    """int8 MUL of each pair (broadcast) by one loop's formula (both NEON loops share one)."""
    (xs, xz), (ys, yz), (os_, oz) = x_q, y_q, out_q
    m = mul_multiplier(xs, ys, os_)
    prod = (np.asarray(x, np.int64) - xz) * (np.asarray(y, np.int64) - yz)
    return _mul_scalar(prod, m, oz) if path == SCALAR else _mul_vector(prod, m, oz)


def mul(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q) -> np.ndarray:
    """int8 MUL as LiteRT's x86 build runs it (optimized_integer_ops::Mul, BroadcastMulDispatch):
    (x - zx)(y - zy) by one multiplier x_scale * y_scale / out_scale, each element by the loop
    its position falls in (binary_paths)."""
    paths = binary_paths(np.shape(x), np.shape(y), *MUL_BLOCKS)
    return np.choose(paths, [mul_by_path(x, x_q, y, y_q, out_q, p) for p in (SCALAR, VECTOR, BROADCAST_VECTOR)])


def squared_difference(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q) -> np.ndarray:
    """int8 SQUARED_DIFFERENCE: inputs rescaled at 2^7, the difference squared, rescaled."""
    sx, sy, mo = _rescaled_inputs(x, x_q, y, y_q, out_q, SQUARED_DIFFERENCE_LEFT_SHIFT, squared=True)
    diff = sx - sy
    return _saturate(multiply_double_rounding(diff * diff, *mo) + out_q[1])


def is_mean_4d(shape, axes: tuple[int, ...], keep_dims: bool) -> bool:
    """Whether LiteRT's EvalMean takes its optimized Mean4D kernel: a 4-D input, its axes 1 and 2,
    keep_dims (an image's spatial mean)."""
    return keep_dims and len(shape) == 4 and tuple(sorted(axes)) == (1, 2)


def mean(x: np.ndarray, x_q, axes: tuple[int, ...], out_q, keep_dims: bool) -> np.ndarray:
    """int8 MEAN (QuantizedMeanOrSum): the int32 sum over the axes less count * in_zp, by the
    multiplier in_scale / out_scale with the count folded in: shifted left by floor(log2 count)
    (at most 32, and no further than a shift of -31 allows), integer-divided by the count.
    Over axes 1 and 2 of a 4-D tensor with keep_dims LiteRT runs Mean4D instead (mean_4d)."""
    if is_mean_4d(np.shape(x), axes, keep_dims):
        return mean_4d(x, x_q, out_q)
    (xs, xz), (os_, oz) = x_q, out_q
    count = math.prod(x.shape[a] for a in axes)
    total = np.sum(np.asarray(x, np.int64), axis=axes, keepdims=keep_dims) - count * xz
    return _saturate(multiply_double_rounding(total, *mean_multiplier(xs, os_, count)) + oz)


# Mean4D's NEON loop takes 16 channels at a time (one thread: the whole depth in one task).
MEAN_4D_BLOCK = 16


def mean_4d_parameters(x_q, out_q, count: int) -> tuple[int, int, int]:
    """Mean4D's multiplier in_scale / (count * out_scale) and its bias out_zp - in_zp * in_scale /
    out_scale, both in float32 as optimized_integer_ops::Mean computes them, the bias rounded
    half away from zero by adding +-0.5 and truncating."""
    f = np.float32
    (xs, xz), (os_, oz) = x_q, out_q
    temp = f(f(xz) * f(xs)) / f(os_)
    temp = temp + f(0.5) if temp > 0 else temp - f(0.5)
    m, shift = quantize_multiplier(float(f(xs) / (f(count) * f(os_))))
    return m, shift, oz - int(temp)


def mean_4d(x: np.ndarray, x_q, out_q) -> np.ndarray:
    """int8 MEAN over axes 1 and 2 of [batch, h, w, depth] with keep_dims (optimized Mean4D): the
    raw sum (zero point not subtracted) by one multiplier, plus the bias; channels in whole blocks
    of 16 by the NEON loop (MultiplyByQuantizedMultiplier4Rows: the right shift rounds ties up),
    the rest by gemmlowp's (ties away)."""
    x = np.asarray(x, np.int64)
    parameters = mean_4d_parameters(x_q, out_q, x.shape[1] * x.shape[2])
    return mean_4d_from_sums(x.sum(axis=(1, 2), keepdims=True), *parameters)


def mean_4d_from_sums(total: np.ndarray, m: int, shift: int, bias: int) -> np.ndarray:
    """Mean4D's outputs from the raw sums [..., depth]: whole blocks of 16 channels by the NEON
    loop's rounding, the rest by gemmlowp's, plus the bias."""
    depth = np.shape(total)[-1]
    vector = np.arange(depth) < depth - depth % MEAN_4D_BLOCK
    scaled = np.where(vector, _requantize_vector(total, m, shift), multiply_double_rounding(total, m, shift))
    return _saturate(scaled + bias)


def mean_multiplier(x_scale: float, out_scale: float, count: int):
    """MEAN's multiplier in_scale / out_scale with the count folded in."""
    m, shift = quantize_multiplier(_scale(x_scale) / _scale(out_scale))
    fold = min(count.bit_length() - 1, 32, 31 + shift)
    return (m << fold) // count, shift - fold


def sum_scale_bias(x_q, out_scale: float, count) -> tuple[np.float32, np.float32]:
    """SUM's float32 scale in_scale / out_scale and bias -in_zp * scale * count."""
    xs, xz = x_q
    scale = np.float32(xs) / np.float32(out_scale)
    return scale, np.float32(-xz) * scale * np.float32(count)


def reduce_sum(x: np.ndarray, x_q, axes: tuple[int, ...], out_q, keep_dims: bool) -> np.ndarray:
    """int8 SUM, still in float in LiteRT's kernel: round(sum * scale + bias) + out_zp with scale
    = in_scale / out_scale and bias = -in_zp * scale * count, all float32, rounded half away.
    (floor(that + 0.5) and round((sum - count * in_zp) * scale) agree with it on every input
    measured; a fixed-point multiplier, as MEAN's, misses about one output in 200.)"""
    (xs, xz), (os_, oz) = x_q, out_q
    count = np.float32(math.prod(x.shape[a] for a in axes))
    total = np.sum(np.asarray(x, np.int64), axis=axes, keepdims=keep_dims)
    scale, bias = sum_scale_bias(x_q, os_, count)
    return _saturate(_round_half_away(total.astype(np.float32) * scale + bias).astype(np.int64) + oz)


def _leading_sign_bits(x: int) -> int:
    """CountLeadingSignBits of an int32 (31 for 0 and -1)."""
    return 31 - (x if x >= 0 else ~x).bit_length()


RECIPROCAL_NEWTON_STEPS = 3


def _one_over_one_plus_x(a: int) -> int:
    """gemmlowp's one_over_one_plus_x_for_x_in_0_1 on F0 raw values: 1 / (1 + a) by three Newton
    steps in F2 (constants 48/17 and -32/17)."""
    half_denominator = (a + INT32_MAX + (1 if a + INT32_MAX >= 0 else -1))
    half_denominator = int(half_denominator / 2) if half_denominator >= 0 else -((-half_denominator) // 2)
    x = int(_wrap32(np.int64(1515870810 + _srdhm(half_denominator, -1010580540))))
    for _ in range(RECIPROCAL_NEWTON_STEPS):
        product = _srdhm(half_denominator, x)  # F2
        one_minus = int(_wrap32(np.int64((1 << 29) - product)))
        x = int(_wrap32(np.int64(x + _saturating_shift_left(_srdhm(x, one_minus), 2))))
    return _saturating_shift_left(x, 1)  # ExactMulByPot<-1> to F1, then Rescale<0>


def reciprocal(value: int) -> tuple[int, int]:
    """GetReciprocal(value, 31): 1 / value as an F0 raw value and the bits above one."""
    headroom_plus_one = 32 - value.bit_length()
    shifted_minus_one = int(_wrap32(np.int64(((value << headroom_plus_one) & 0xFFFFFFFF) - (1 << 31))))
    return _one_over_one_plus_x(shifted_minus_one), 31 - headroom_plus_one


def divide_multiplier(x_scale: float, y_scale: float, out_scale: float):
    """x_scale / (y_scale * out_scale) in float32, as div.cc's Prepare computes it."""
    f = np.float32
    return quantize_multiplier(float(f(x_scale) / (f(y_scale) * f(out_scale))))


def divide(x: np.ndarray, x_q, y: np.ndarray, y_q, out_q) -> np.ndarray:
    """int8 DIV (reference DivElementwise): both offsets negated where the divisor's is negative,
    then x - zx (shifted left by its headroom) times gemmlowp's reciprocal of y - zy, then the
    multiplier x_scale / (y_scale * out_scale) with the reciprocal's and the headroom's shifts."""
    (xs, xz), (ys, yz), (os_, oz) = x_q, y_q, out_q
    m, shift = divide_multiplier(xs, ys, os_)
    a, b = np.broadcast_arrays(np.asarray(x, np.int64) - xz, np.asarray(y, np.int64) - yz)
    if (b == 0).any():
        raise ValueError("int8 DIV by its divisor's zero point (LiteRT refuses it)")
    a, b = np.where(b < 0, -a, a), np.abs(b)
    recip = {int(v): reciprocal(int(v)) for v in np.unique(b)}
    inverse = np.vectorize(lambda v: recip[v][0], otypes=[np.int64])(b)
    recip_shift = np.vectorize(lambda v: recip[v][1], otypes=[np.int64])(b)
    headroom = np.vectorize(_leading_sign_bits, otypes=[np.int64])(a)
    quotient = _srdhm_vector(_wrap32(a << headroom), inverse)
    total = shift - recip_shift - headroom
    scaled = saturating_rounding_doubling_high_mul(quotient, m)
    return _saturate(_rounding_divide_by_pots(scaled, -total) + oz)


def _srdhm_vector(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """saturating_rounding_doubling_high_mul with a multiplier per element."""
    ab = np.asarray(a, np.int64) * np.asarray(b, np.int64)
    t = ab + np.where(ab >= 0, np.int64(1 << 30), np.int64(1 - (1 << 30)))
    high = np.where(t >= 0, t >> 31, -((-t) >> 31))
    return np.where((a == INT32_MIN) & (b == INT32_MIN), np.int64(INT32_MAX), high)


def _rounding_divide_by_pots(x: np.ndarray, exponents: np.ndarray) -> np.ndarray:
    """rounding_divide_by_pot with an exponent per element. DIV's small dividends (a large
    headroom) give exponents past 31, and a multiplier far above one negative exponents, which
    gemmlowp asserts against and LiteRT's release build computes as x86 does: the mask 2^e - 1
    is made in 64 bits (the count taken modulo 64) and cut to 32 (all ones past 31); the int32
    shift takes its count modulo 32 (so a dividend at its zero point comes out one above the
    output's zero point past 31)."""
    x, e = np.asarray(x, np.int64), np.asarray(exponents, np.int64)
    mask = _wrap32(((np.int64(1) << (e & 63)) - 1).astype(np.uint64).astype(np.int64))
    threshold = (mask >> 1) + (x < 0)
    return (x >> (e & 31)) + ((x & mask) > threshold)


def maximum(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """int8 MAXIMUM: the larger stored value (both inputs share the output's quantisation)."""
    return np.maximum(np.asarray(x, np.int8), np.asarray(y, np.int8))


# --- one-input kernels: a value per int8 input ---------------------------------------------------

def rsqrt_table(x_q, out_q) -> np.ndarray:
    """int8 RSQRT for every input value -128..127 (index value + 128): gemmlowp's fixed-point
    inverse square root of (value - zp), rescaled by 1 / (sqrt(in_scale) * out_scale)."""
    (xs, xz), (os_, oz) = x_q, out_q
    k_shift = 20
    m, shift = quantize_multiplier(1.0 / (math.sqrt(_scale(xs)) * _scale(os_)))
    table = np.empty(256, np.int8)
    for q in range(INT8_MIN, INT8_MAX + 1):
        value = q - xz
        if value <= 0:  # LiteRT returns the largest output for 0 (and refuses negative inputs)
            table[q + 128] = INT8_MAX
            continue
        inv_m, inv_shift = inv_sqrt_multiplier(value)
        data = multiply_double_rounding(np.int64(1), inv_m, inv_shift + k_shift)
        out = int(multiply_double_rounding(data, m, shift - k_shift)) + oz
        table[q + 128] = min(max(out, INT8_MIN), INT8_MAX)
    return table


def _srdhm(a: int, b: int) -> int:
    """saturating_rounding_doubling_high_mul on two Python ints (the fixed-point iterations')."""
    if a == b == INT32_MIN:
        return INT32_MAX
    t = a * b + ((1 << 30) if a * b >= 0 else 1 - (1 << 30))
    return t >> 31 if t >= 0 else -((-t) >> 31)


def _saturating_shift_left(x: int, exponent: int) -> int:
    """gemmlowp's SaturatingRoundingMultiplyByPOT for a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    if x > threshold:
        return INT32_MAX
    if x < -threshold:
        return INT32_MIN
    return x << exponent


def inv_sqrt_multiplier(value: int) -> tuple[int, int]:
    """GetInvSqrtQuantizedMultiplierExp(value, kReverseShift): 1/sqrt(value) as a multiplier and a
    left shift, by five Newton steps in gemmlowp's 3-integer-bit fixed point."""
    if value <= 1:
        return INT32_MAX, 0
    shift = 11
    while value >= 1 << 29:
        value //= 4
        shift += 1
    leading_zeros = 32 - value.bit_length()
    pairs = (leading_zeros - 1) // 2 - 1
    shift -= pairs
    value <<= 2 * pairs
    x_in = value >> 1  # F3 raw
    half_in = int(rounding_divide_by_pot(np.int64(x_in), 1))
    half_three = (1 << 28) + (1 << 27)
    x = 1 << 28  # F3 one
    for _ in range(5):
        x2 = _srdhm(x, x)  # F6
        x3 = _saturating_shift_left(_srdhm(x2, x), 6)  # F9 -> F3
        a = _srdhm(half_three, x)  # F6
        b = _srdhm(half_in, x3)  # F6
        x = _saturating_shift_left(int(_wrap32(np.int64(a - b))), 3)  # F6 -> F3
    x = _srdhm(x, 1518500250)  # times sqrt(2)/2 in F0
    if shift < 0:
        x <<= -shift
        shift = 0
    return x, -shift


def lookup_table(x_q, out_q, fn) -> np.ndarray:
    """LiteRT's LUTPopulate: every int8 input dequantised in float32, fn applied in float32, rounded
    half away from zero at the output scale (index value + 128)."""
    (xs, xz), (os_, oz) = x_q, out_q
    q = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int32)
    dequantized = np.float32(xs) * (q - xz).astype(np.float32)
    transformed = np.array([fn(np.float32(v)) for v in dequantized], np.float32)
    scaled = transformed * (np.float32(1.0) / np.float32(os_))
    return _saturate(_round_half_away(scaled).astype(np.int64) + oz)


def apply_table(x: np.ndarray, table: np.ndarray) -> np.ndarray:
    return table[np.asarray(x, np.int64) + 128]


_LIBM = ctypes.CDLL(ctypes.util.find_library("m"))
for _name in ("expf", "erff", "erfcf", "tanhf"):
    getattr(_LIBM, _name).restype = ctypes.c_float
    getattr(_LIBM, _name).argtypes = [ctypes.c_float]


def libm(name: str):
    """The C library's float function LiteRT's tables are filled with."""
    fn = getattr(_LIBM, name)
    return lambda v: np.float32(fn(float(v)))


def gelu_exact(v: np.float32) -> np.float32:
    """LiteRT's GeluTransform(approximate=false) in float32: 0.5 x erfc(-x / sqrt 2)."""
    f = np.float32
    return f(f(0.5) * v) * libm("erfcf")(f(-v) * f(math.sqrt(0.5)))


def sqrt_table(x_q, out_q) -> np.ndarray:
    """int8 SQRT for every input value: sqrtf of the dequantised input over the output scale,
    truncated toward zero (not rounded), plus the zero point; inputs below the zero point are
    outside the op's domain (LiteRT refuses them)."""
    (xs, xz), (os_, oz) = x_q, out_q
    q = np.arange(INT8_MIN, INT8_MAX + 1, dtype=np.int64)
    root = np.sqrt(np.maximum(np.float32(xs) * (q - xz).astype(np.float32), np.float32(0)))
    return _saturate(np.trunc(root / np.float32(os_)).astype(np.int64) + oz)


def logistic(v: np.float32) -> np.float32:
    """LOGISTIC's table function: 1 / (1 + expf(-x)) in float32."""
    return np.float32(1.0) / (np.float32(1.0) + libm("expf")(-v))


def gelu_tanh(v: np.float32) -> np.float32:
    """GeluTransform(approximate=true): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    f = np.float32
    inner = f(math.sqrt(2.0 / math.pi)) * (v + f(0.044715) * v * v * v)
    return f(0.5) * v * (f(1.0) + libm("tanhf")(inner))


def softmax_table(x_scale: float, beta: float) -> np.ndarray:
    """PopulateSoftmaxLookupTable: table[255 - d] = expf(-x_scale * beta * d), d = 0..255."""
    scale = np.float32(-np.float32(x_scale) * np.float32(beta))
    expf = libm("expf")
    table = np.empty(256, np.float32)
    for d in range(256):
        table[255 - d] = expf(np.float32(scale * np.float32(d)))
    return table


def softmax(x: np.ndarray, x_scale: float, beta: float, out_q) -> np.ndarray:
    """int8 SOFTMAX over the last axis, LiteRT's optimized (float table) kernel: each row's exps
    are read from the table at 255 - max + x, summed in order in float32, and every
    probability is table * (1 / (sum * out_scale)) rounded half away from zero plus out_zp."""
    return softmax_from_table(x, softmax_table(x_scale, beta), out_q)


def softmax_from_table(x: np.ndarray, table: np.ndarray, out_q) -> np.ndarray:
    """softmax with its exp table (softmax_table of the input's scale and beta) given."""
    os_, oz = out_q
    rows = np.asarray(x, np.int64).reshape(-1, x.shape[-1])
    exps = table[255 - rows.max(axis=-1, keepdims=True) + rows]
    total = np.cumsum(exps, axis=-1, dtype=np.float32)[:, -1:]  # in order, one float32 add at a time
    inverse = np.float32(1.0) / (total * np.float32(os_))
    return _saturate(_round_half_away(exps * inverse).astype(np.int64) + oz).reshape(x.shape)


# AffineQuantize's vector loop (NEON intrinsics, which LiteRT's x86 build runs through NEON_2_SSE)
# takes 8 values at a time; the rest go through its scalar loop.
QUANTIZE_BLOCK = 8


def quantize(x: np.ndarray, out_q) -> np.ndarray:
    """float32 -> int8 QUANTIZE: in whole blocks of 8, x * (1 / scale) in float32 rounded half to
    even; the last values (flat size mod 8), x / scale in double rounded half away from zero."""
    os_, oz = out_q
    flat = np.asarray(x, np.float32).ravel()
    vector = (flat.size // QUANTIZE_BLOCK) * QUANTIZE_BLOCK
    rounded = np.concatenate([_quantize_vector(flat[:vector], np.float32(os_)),
                              _round_half_away(flat[vector:].astype(np.float64) / float(np.float32(os_)))])
    return _saturate(rounded.astype(np.int64) + oz).reshape(np.shape(x))


def _quantize_vector(values: np.ndarray, scale: np.float32) -> np.ndarray:
    """The vector loop: a product by the float32 reciprocal, vcvtn's rounding (ties to even)."""
    return np.rint(values * (np.float32(1.0) / scale))


# Requantize's vector loop (NEON through NEON_2_SSE, as QUANTIZE's) takes 16 values at a time.
REQUANTIZE_BLOCK = 16


def _requantize_vector(x: np.ndarray, m: int, shift: int) -> np.ndarray:
    """The vector loop's multiplier (MultiplyByQuantizedMultiplier4Rows): vqrdmulh after the left
    shift, then vrshl's rounding right shift, both rounding ties up."""
    left, right = max(shift, 0), max(-shift, 0)
    high = saturating_rounding_doubling_high_mul(_wrap32(np.asarray(x, np.int64) << left), m)
    return (high + np.int64(1 << (right - 1))) >> right if right else high


def requantize_multiplier(x_scale: float, out_scale: float):
    return quantize_multiplier(_scale(x_scale) / _scale(out_scale))


def requantize(x: np.ndarray, x_q, out_q) -> np.ndarray:
    """int8 -> int8 QUANTIZE (a change of scale): (q - in_zp) by one multiplier in_scale /
    out_scale, plus out_zp; whole blocks of 16 by the vector loop's rounding, the rest (flat
    size mod 16) by gemmlowp's, which differ where the first rounding lands on a half."""
    (xs, xz), (os_, oz) = x_q, out_q
    m, shift = requantize_multiplier(xs, os_)
    flat = np.asarray(x, np.int64).ravel() - xz
    vector = (flat.size // REQUANTIZE_BLOCK) * REQUANTIZE_BLOCK
    out = np.concatenate([_requantize_vector(flat[:vector], m, shift),
                          multiply_double_rounding(flat[vector:], m, shift)])
    return _saturate(out + oz).reshape(np.shape(x))


# Dequantize's vector loop (NEON through NEON_2_SSE) takes 8 values at a time.
DEQUANTIZE_BLOCK = 8


def dequantize(x: np.ndarray, x_q) -> np.ndarray:
    """int8 -> float32 DEQUANTIZE: whole blocks of 8 as q * scale - zero_point * scale (the vector
    loop's multiply-subtract, two roundings), the rest as (q - zero_point) * scale."""
    xs, xz = x_q
    flat = np.asarray(x, np.int32).ravel()
    vector = (flat.size // DEQUANTIZE_BLOCK) * DEQUANTIZE_BLOCK
    scale = np.float32(xs)
    head = flat[:vector].astype(np.float32) * scale - np.float32(xz) * scale
    tail = (flat[vector:] - xz).astype(np.float32) * scale
    return np.concatenate([head, tail]).reshape(np.shape(x))


def dequantize_output(x: np.ndarray, x_q) -> np.ndarray:
    """A graph's int8 output as porter's goldens record it: (q - zero_point) in float32, times
    the scale (porter.check.references)."""
    xs, xz = x_q
    return (np.asarray(x, np.int32) - xz).astype(np.float32) * np.float32(xs)
