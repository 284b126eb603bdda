"""Quantisation schemes: what porter accepts, and the reference arithmetic of each.

Defined once here and used by the recovery (assertions), the packer (which arrays a scheme
needs) and the numpy executor (the arithmetic). The Rust templates implement the same
functions and are checked against these.

TFLite hybrid FULLY_CONNECTED (int8 weights, float activations), as TFLite's builtin kernels
compute it (kernels/fully_connected.cc EvalHybridDense with tensor_utils):
  1. each input row is quantised on the fly:
     symmetric:  s = max|x| / 127, q = round(x * (127 / max|x|)) clamped to [-127, 127];
     asymmetric: the range [min(0, x), max(0, x)] over 255 steps (in float32), a nudged
                 zero point, q = round(x * (1 / s)) + zp clamped to [-128, 127];
     round() is half away from zero; an all-zero row quantises to zeros with s = 1;
  2. acc = sum(q * w) in int32, minus zp * sum(w) for asymmetric rows;
  3. y = bias + acc * (w_scale[o] * s)   (per-tensor: the product s * w_scale is formed first,
     too), float32 throughout, in exactly that order;
  4. if the whole input tensor is zero, y = bias.

onnxruntime's dynamic quantisation (quantize_dynamic graphs; the kernels of onnxruntime's CPU
provider: DynamicQuantizeLinear, and the fused MatMulIntegerToFloat / DynamicQuantizeMatMul it
turns MatMulInteger -> Cast -> Mul -> Add into, which compute the same thing):
  1. the WHOLE input tensor (every row of the window, padding included) gets one uint8 scale and
     zero point: lo = min(0, min x), hi = max(0, max x) (exact), s = (hi - lo) / 255 in float32
     (s = 1 when hi == lo), zp = round_half_even(clamp(0 - lo / s, 0, 255));
  2. q = clamp(round_half_even(x / s) + zp, 0, 255): a float32 division, not a multiplication
     by 1 / s (MLAS's QuantizeLinear kernels divide);
  3. acc = sum(q * w) - zp * sum(w) in int32 (weights int8, zero point 0), where MLAS's u8 x s8
     GEMM kernels for AVX2 and AVX-512 without VNNI (vpmaddubsw) first add the products of each
     pair of inputs (k = 2i, 2i + 1) into an int16 with saturation; the VNNI kernels (vpdpbusds)
     sum exactly, and differ from it wherever a pair leaves [-32768, 32767]. Measured against
     onnxruntime 1.32's goldens from an AVX2 CPU (saturating) and an AVX512-VNNI one (exact);
     Linear.integer_dot names the variant, the one of the IR's CPU (porter.reference.ort.cpu);
  4. y = float(acc) * (s * w_scale[o]) + bias[o]: the scale product rounded to float32 first,
     then the product, then the sum, each rounded (the graph's Mul(Mul(s, w_scale)), Add order).

Weight-only int8 (ai-edge-quantizer's weight_only_wi8_afp32: int8 constants -> DEQUANTIZE ->
float ops; a DequantizeLinear of a constant in ONNX): the float32 weights are float(q) *
w_scale[o], one rounding (LiteRT forms it in double, onnxruntime in float: the same, since the
product of an int8 and a float32 is exact before it rounds); the layer is then the float one.
porter's recovery folds exactly these weights, and stores the int8 values where they give them;
float16 weights (FLOAT_CASTING, TFLiteConverter's float16) are widened exactly, likewise.
"""

from __future__ import annotations

import numpy as np


F32 = np.float32


ZERO_POINT_4BIT = -7  # LiteRT's optimized_4bit: weights made unsigned as w - (-7)
FILTER_WIDTH_4BIT, FILTER_DEPTH_4BIT = 4, 32  # its 4 x 32 weight blocks


def uses_4bit_kernels(outs: int, k: int) -> bool:
    """Whether LiteRT runs an int4 FULLY_CONNECTED on its 4-bit kernels (fully_connected.cc
    PrepareImpl: at least one 4 x 32 block, an even depth); otherwise the int8 hybrid path runs
    on the same values."""
    return outs >= FILTER_WIDTH_4BIT and k >= FILTER_DEPTH_4BIT and k % 2 == 0


def int4_fully_connected(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """LiteRT's hybrid FULLY_CONNECTED with int4 weights (kernels/internal/optimized/4bit,
    fully_connected_reference.cc): each row quantised as the int8 path quantises it (symmetric;
    its double divisions round as the float ones do), the weights made unsigned (w + 7) with the
    zero point folded into a per-row offset -7 * sum(q); then, each step rounded to float32,
    y = ((offset * s_row) * w_scale[o] + bias[o]) + (acc_u * s_row) * w_scale[o] with
    acc_u = sum((w + 7) * q) (no bias: the first term without the addition). A layer too small
    for those kernels (uses_4bit_kernels) runs the int8 hybrid arithmetic. Measured bit for bit
    against the ai-edge-litert builtin kernels (dynamic_wi4_afp32 files: 64 to 384 outputs, and
    classifiers of 3 and 5)."""
    if not uses_4bit_kernels(*np.shape(w)):
        return hybrid_fully_connected(x, w, w_scale, bias, False)
    q, s_row = quantize_rows_symmetric(x)
    q = q.astype(np.int64)
    offset = q.sum(axis=1) * ZERO_POINT_4BIT
    acc_u = q @ (np.asarray(w, np.int64) - ZERO_POINT_4BIT).T
    w_scale = np.asarray(w_scale, F32)[None, :]
    first = ((offset.astype(F32) * s_row).astype(F32)[:, None] * w_scale).astype(F32)
    if bias is not None:
        first = (first + np.asarray(bias, F32)[None, :]).astype(F32)
    second = ((acc_u.astype(F32) * s_row[:, None]).astype(F32) * w_scale).astype(F32)
    return (first + second).astype(F32)


def weight_only_float(w: np.ndarray, w_scale: np.ndarray | None) -> np.ndarray:
    """The float32 [out, in] weights of a weight-only layer: float16 widened (exact), or int8 as
    float(q) * w_scale[o] (one scale for a per-tensor weight)."""
    if w_scale is None:
        return np.asarray(w).astype(F32)
    scale = np.asarray(w_scale, F32).reshape(-1, 1)
    return (np.asarray(w).astype(F32) * scale).astype(F32)


def round_half_away(v: np.ndarray) -> np.ndarray:
    """C's roundf: halves go away from zero (numpy's round goes to even)."""
    t = np.trunc(v)
    away = np.abs(v - t) >= F32(0.5)  # exact: v - trunc(v) only drops integer bits
    return (t + np.where(away, np.copysign(F32(1), v), F32(0))).astype(v.dtype)


def quantize_rows_symmetric(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric int8 quantisation of a [rows, k] float32 matrix -> (q, scale[rows])."""
    x = np.asarray(x, dtype=F32)
    rng = np.maximum(np.abs(x.min(axis=1)), np.abs(x.max(axis=1))).astype(F32)
    zero = rng == 0
    safe = np.where(zero, F32(1), rng)
    scale = np.where(zero, F32(1), safe / F32(127)).astype(F32)
    inv = (F32(127) / safe).astype(F32)
    q = round_half_away((x * inv[:, None]).astype(F32))
    q = np.clip(q, -127, 127).astype(np.int8)
    q[zero] = 0
    return q, scale


def quantize_rows_asymmetric(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-row asymmetric int8 quantisation -> (q, scale[rows], zero_point[rows] int32).

    Measured against the ai-edge-litert wheel (whose kernels predate the double-precision
    rewrite in LiteRT's current sources): the scale is (max(0, x) - min(0, x)) / 255 in float32
    (a double division differs in about one row in four), and each value is rounded before
    the zero point is added, round(x / s) + zp, not round(zp + x / s).
    """
    x = np.asarray(x, dtype=F32)
    rmin = np.minimum(F32(0), x.min(axis=1)).astype(F32)
    rmax = np.maximum(F32(0), x.max(axis=1)).astype(F32)
    flat = rmin == rmax
    scale = np.where(flat, F32(1), ((rmax - rmin).astype(F32) / F32(255)).astype(F32))
    zp_from_min = (F32(-128) - (rmin / scale).astype(F32)).astype(F32)
    zp_from_max = (F32(127) - (rmax / scale).astype(F32)).astype(F32)
    err_min = (F32(128) + np.abs((rmin / scale).astype(F32))).astype(F32)
    err_max = (F32(127) + np.abs((rmax / scale).astype(F32))).astype(F32)
    zp_real = np.where(err_min < err_max, zp_from_min, zp_from_max)
    zp = np.where(zp_real <= -128, -128, np.where(zp_real >= 127, 127,
                                                 round_half_away(zp_real))).astype(np.int32)
    zp[flat] = 0
    inv = (F32(1) / scale).astype(F32)
    q = round_half_away((x * inv[:, None]).astype(F32)).astype(np.int64) + zp[:, None]
    q = np.clip(q, -128, 127).astype(np.int8)
    q[flat] = 0
    return q, scale.astype(F32), zp


def integer_matmul(q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact integer dot products, q [rows, k] @ w [out, k]^T (|q| <= 255, w int8).

    Computed with float64 BLAS: every product and partial sum is an integer below 2^53
    (k * 256 * 128 << 2^53 for any real k), so the result is exact in any summation order,
    and much faster than numpy's integer matmul.
    """
    if q.shape[1] * 256 * 128 >= 2**53:
        raise ValueError("integer_matmul: k too large for an exact float64 accumulation")
    return (q.astype(np.float64) @ w.astype(np.float64).T).astype(np.int64)


def hybrid_fully_connected(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray,
                           bias: np.ndarray | None, asymmetric: bool) -> np.ndarray:
    """TFLite's builtin hybrid FULLY_CONNECTED on a [rows, k] float32 input, exactly."""
    x = np.asarray(x, dtype=F32)
    out_features = w.shape[0]
    b = np.zeros(out_features, F32) if bias is None else bias.astype(F32)
    if not x.any():
        return np.broadcast_to(b, (x.shape[0], out_features)).copy()
    if asymmetric:
        q, s, zp = quantize_rows_asymmetric(x)
    else:
        q, s = quantize_rows_symmetric(x)
        zp = np.zeros(x.shape[0], np.int32)
    acc = integer_matmul(q, w)
    if asymmetric:
        acc = acc - zp[:, None].astype(np.int64) * w.astype(np.int64).sum(axis=1)[None, :]
    w_scale = np.broadcast_to(np.asarray(w_scale, F32), (out_features,))
    row_scale = (w_scale[None, :] * s[:, None]).astype(F32)
    return (b[None, :] + (acc.astype(F32) * row_scale).astype(F32)).astype(F32)


def ort_dynamic_quantize(x: np.ndarray) -> tuple[np.ndarray, np.float32, int]:
    """onnxruntime's DynamicQuantizeLinear over the whole tensor -> (q uint8, scale, zero point)."""
    x = np.asarray(x, dtype=F32)
    lo = min(F32(0), x.min())
    hi = max(F32(0), x.max())
    scale = F32(1) if hi == lo else F32((hi - lo) / F32(255))
    zero_point = int(np.rint(np.clip(F32(0) - F32(lo / scale), F32(0), F32(255))))
    # np.rint rounds half to even, like the MLAS kernels' float -> int conversion.
    q = np.clip(np.rint((x / scale).astype(F32)) + zero_point, 0, 255)
    return q.astype(np.uint8), scale, zero_point


EXACT_DOT = "exact"
INT16_PAIRS_SATURATED = "int16_pairs_saturated"


def u8s8_dot(q: np.ndarray, w: np.ndarray, integer_dot: str) -> np.ndarray:
    """sum_k q[r, k] * w[o, k] for uint8 q [rows, k] and int8 w [out, k], as `integer_dot` says."""
    acc = integer_matmul(q, w)
    if integer_dot == EXACT_DOT:
        return acc
    if integer_dot != INT16_PAIRS_SATURATED:
        raise ValueError(f"unknown integer dot product {integer_dot!r}")
    if w.shape[1] % 2:  # the kernels pad k with zeros
        q, w = np.pad(q, ((0, 0), (0, 1))), np.pad(w, ((0, 0), (0, 1)))
    q_even, q_odd = q[:, 0::2].astype(np.int32), q[:, 1::2].astype(np.int32)
    w_even, w_odd = w[:, 0::2].astype(np.int32), w[:, 1::2].astype(np.int32)
    # With q <= 255 a pair stays within int16 unless |w_even| + |w_odd| > 128 (255 * 128 =
    # 32640): only those (output, pair) positions can saturate, and they are few.
    outs, pairs = np.nonzero(np.abs(w_even) + np.abs(w_odd) > 128)
    if outs.size:
        pair_sums = q_even[:, pairs] * w_even[outs, pairs] + q_odd[:, pairs] * w_odd[outs, pairs]
        lost = np.clip(pair_sums, -32768, 32767) - pair_sums
        np.add.at(acc, (slice(None), outs), lost.astype(np.int64))
    return acc


def ort_dynamic_linear(x: np.ndarray, w: np.ndarray, w_scale: np.ndarray,
                       bias: np.ndarray | None, integer_dot: str) -> np.ndarray:
    """quantize_dynamic's linear layer on [rows, k] float32 input, w [out, k] int8, exactly."""
    q, scale, zero_point = ort_dynamic_quantize(x)
    acc = u8s8_dot(q, w, integer_dot) - zero_point * w.astype(np.int64).sum(axis=1)[None, :]
    w_scale = np.broadcast_to(np.asarray(w_scale, F32), (w.shape[0],))
    y = (acc.astype(F32) * (scale * w_scale).astype(F32)).astype(F32)
    return y if bias is None else (y + bias.astype(F32)).astype(F32)
