"""onnxruntime's CPU float kernels for an encoder, emulated in numpy: bit-exact where noted.

What onnxruntime 1.32 (CPU provider, AVX2 machine) runs for a torch.onnx BERT export, read from
its optimised graph and MLAS's sources, each kernel then measured against onnxruntime:

- LayerNormalization: its AVX2 kernel, read from onnxruntime 1.32's machine code and emulated
  exactly (layer_norm). With ORT_ENABLE_ALL (the goldens) a LayerNormalization that reads a
  residual Add is fused with it into com.microsoft.SkipLayerNormalization, a different kernel
  (Welford's running mean and variance in float32), also emulated exactly (skip_layer_norm).
- MatMul (and Q.K^T * scale, fused into FusedMatMul(alpha)): MLAS SGEMM, one fma chain per
  output in k order: emulated exactly (matmul) for the attention products (k = head size, seq).
- MatMul + Add become Gemm with the bias as C: emulated as an exact dot product rounded once,
  then + bias (MLAS blocks long k into several chains): within an ulp, not bit-exact.
- Erf: MLAS's polynomial, emulated step by step (erf).
- Softmax: MLAS's exp polynomial, an 8-lane sum, then * (1 / sum): emulated exactly (softmax).

The float Gemm is the one kernel left within an ulp rather than exact, which is why the ONNX
float path is measured against the ort goldens with a tolerance (1e-4). The dynamically
quantised layers are exact given their input (porter.quant), but an ulp upstream can move a
whole tensor's uint8 scale or flip a rounding, so quantised graphs inherit any float
difference, amplified.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32


def _fma(a, b, c):
    """fmaf through float64: the product is exact; the sum rounds once more than a true fma
    only when it needs more than 53 bits, which float32 operands of similar size never do."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + c).astype(F32)


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., m, k] @ b [..., k, n] as MLAS's SGEMM kernels compute it for k <= 256: one fma
    chain per output, in k order (measured bit-exact on the attention MatMuls)."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    acc = np.zeros(np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,))[:-1]
                   + (a.shape[-2], b.shape[-1]), F32)
    for k in range(a.shape[-1]):
        acc = _fma(a[..., :, k:k + 1], b[..., k:k + 1, :], acc)
    return acc


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """An exact dot product rounded once: within an ulp of MLAS's blocked fma chains."""
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(F32)


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Gemm with the bias as C: round(x @ w^T), then + bias (MLAS adds the block to C)."""
    y = _dot(x, np.asarray(w).T)
    return y if bias is None else (y + bias.astype(F32)).astype(F32)


# Both LayerNorm kernels were read from onnxruntime 1.32's x86-64 machine code (found by a
# hardware watchpoint on the op's output under gdb) and then measured element for element
# against onnxruntime on random rows (tests/test_ort_float.py).
_MEAN_LANES = 4  # float64 accumulators of the mean
_VAR_LANES = 8  # float32 fma accumulators of the squared deviations
MIN_LAYER_NORM_WIDTH = 8  # narrower rows take another code path, not reproduced


def layer_norm(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """LayerNormalization's AVX2 kernel. The mean: four float64 lanes over blocks of four, the
    lanes added as (0 + 2) + (1 + 3), the tail after them, divided in float64 and rounded.
    The variance of d = x - mean (float32): eight fma lanes over blocks of eight, reduced as
    ((0 + 4) + (2 + 6)) + ((1 + 5) + (3 + 7)); a tail of four or more adds four rounded
    squares one by one, the last one to three are fma'd; then / n, + eps, sqrtf, 1 / that.
    out = fma(d * inv_std, gamma, beta)."""
    v = np.asarray(v, F32)
    n = v.shape[-1]
    if n < MIN_LAYER_NORM_WIDTH:
        raise ValueError(f"onnxruntime's LayerNormalization kernel is reproduced for rows of "
                         f"{MIN_LAYER_NORM_WIDTH} or more values, not {n}")
    wide = v.astype(np.float64)
    blocks = n - n % _MEAN_LANES
    lanes = np.zeros(v.shape[:-1] + (_MEAN_LANES,))
    for i in range(0, blocks, _MEAN_LANES):
        lanes = lanes + wide[..., i:i + _MEAN_LANES]
    total = (lanes[..., 0] + lanes[..., 2]) + (lanes[..., 1] + lanes[..., 3])
    for i in range(blocks, n):
        total = total + wide[..., i]
    mean = (total / n).astype(F32)[..., None]
    d = (v - mean).astype(F32)
    var = _squared_deviations(d)
    inv_std = (F32(1) / np.sqrt((var / F32(n)).astype(F32) + F32(eps)).astype(F32)).astype(F32)
    return _fma((d * inv_std[..., None]).astype(F32), gamma, beta)


def _squared_deviations(d: np.ndarray) -> np.ndarray:
    n = d.shape[-1]
    blocks = n - n % _VAR_LANES
    acc = np.zeros(d.shape[:-1] + (_VAR_LANES,), F32)
    for i in range(0, blocks, _VAR_LANES):
        acc = _fma(d[..., i:i + _VAR_LANES], d[..., i:i + _VAR_LANES], acc)
    half = (acc[..., :4] + acc[..., 4:]).astype(F32)
    total = ((half[..., 0] + half[..., 2]).astype(F32) + (half[..., 1] + half[..., 3])).astype(F32)
    i = blocks
    if n - blocks >= 4:  # one four-wide step: rounded squares, added in order
        for i in range(blocks, blocks + 4):
            total = (total + (d[..., i] * d[..., i]).astype(F32)).astype(F32)
        i = blocks + 4
    for j in range(i, n):
        total = _fma(d[..., j], d[..., j], total)
    return total


def skip_layer_norm(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """SkipLayerNormalization's float kernel on v = input + skip (the caller adds them: float
    addition commutes). Welford's algorithm, all float32: for k = 1..n, delta = x - mean,
    mean += delta / k, m2 += (x - mean) * delta; std = sqrtf(m2 / n + eps);
    out = (x - mean) / std * gamma + beta, each step rounded (no fma)."""
    v = np.asarray(v, F32)
    n = v.shape[-1]
    mean = np.zeros(v.shape[:-1], F32)
    m2 = np.zeros(v.shape[:-1], F32)
    for k in range(n):
        x = v[..., k]
        delta = (x - mean).astype(F32)
        mean = (mean + (delta / F32(k + 1)).astype(F32)).astype(F32)
        m2 = (m2 + ((x - mean).astype(F32) * delta).astype(F32)).astype(F32)
    std = np.sqrt(((m2 / F32(n)).astype(F32) + F32(eps)).astype(F32)).astype(F32)[..., None]
    normalised = ((v - mean[..., None]).astype(F32) / std).astype(F32)
    return ((normalised * gamma).astype(F32) + beta).astype(F32)


# MLAS's exp for softmax (mlas/lib/compute.cpp, MlasComputeSumExpVector): range reduction by
# 2^m, then a degree-6 polynomial, every step an fma; inputs below -88.376 give 2^-127 * p.
_SUMEXP_LOW = F32(-88.3762626647949)
_SUMEXP_POLY = [F32(float.fromhex(h)) for h in ("0x1.694000p-10", "0x1.125edcp-7", "0x1.555b5ap-5",
                                                "0x1.555450p-3", "0x1.fffff6p-2", "0x1.000000p+0")]
_LOG2E, _LN2_HI, _LN2_LO = F32(1.44269504088896341), F32(-6.93145752e-1), F32(-1.42860677e-6)
_ROUNDING_MAGIC = F32(12582912.0)  # 1.5 * 2^23: adding and subtracting it rounds to an integer
_SUM_LANES = 8  # the AVX2 kernel's accumulator


def _sum_exp(x: np.ndarray) -> np.ndarray:
    x = np.maximum(_SUMEXP_LOW, x)
    biased = _fma(x, _LOG2E, _ROUNDING_MAGIC)
    m = (biased - _ROUNDING_MAGIC).astype(F32)
    r = _fma(m, _LN2_LO, _fma(m, _LN2_HI, x))
    # 2^m from the integer in biased's low mantissa bits, moved into the exponent field
    scale = ((biased.view(np.int32) << 23) + np.int32(0x3F800000)).view(F32)
    p = np.full_like(r, _SUMEXP_POLY[0])
    for c in _SUMEXP_POLY[1:]:
        p = _fma(p, r, c)
    p = _fma(p, r, _SUMEXP_POLY[-1])
    return (p * scale).astype(F32)


def _lane_sum(e: np.ndarray) -> np.ndarray:
    """One 8-lane accumulator over the row, lanes added in adjacent pairs, then the tail
    (measured: every softmax output bit-exact on MiniLM rows of 256 keys)."""
    n = e.shape[-1]
    full = n - n % _SUM_LANES
    acc = np.zeros(e.shape[:-1] + (_SUM_LANES,), F32)
    for i in range(0, full, _SUM_LANES):
        acc = (acc + e[..., i:i + _SUM_LANES]).astype(F32)
    while acc.shape[-1] > 1:
        acc = (acc[..., 0::2] + acc[..., 1::2]).astype(F32)
    total = acc[..., 0]
    for i in range(full, n):
        total = (total + e[..., i]).astype(F32)
    return total


def softmax(x: np.ndarray) -> np.ndarray:
    """MLAS softmax: e = exp(x - max) (MLAS's exp), sum, then e * (1 / sum)."""
    x = np.asarray(x, F32)
    e = _sum_exp((x + (-x.max(axis=-1, keepdims=True))).astype(F32))
    return (e * (F32(1) / _lane_sum(e)).astype(F32)[..., None]).astype(F32)


# MLAS's erf (mlas/lib/erf.cpp and its FMA3 kernel): odd polynomial up to |x| = 0.921875,
# 1 - exp(-poly(|x|)) beyond, every step an fma. The C source clamps |x| to 3.725; the FMA3
# kernel onnxruntime runs on AVX2 does not (measured: with the clamp, GELU differs below -5).
_ERF_SPLIT = F32(0.921875)
_ERF_SMALL = [F32(c) for c in (-5.99104969e-4, 4.99339588e-3, -2.67667342e-2, 1.12818025e-1,
                               -3.76124859e-1, 1.28379151e-1)]
_ERF_BIG = [F32(c) for c in (1.72948930e-5, -3.83208680e-4, 3.88393435e-3, -2.42545605e-2,
                             1.06777847e-1, 6.34846687e-1, 1.28717512e-1)]
_EXP_POLY = [F32(c) for c in (1.38319808e-3, 8.37550033e-3, 4.16689515e-2, 1.66664466e-1,
                              4.99999851e-1, 1.0, 1.0)]


def erf(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    a = np.abs(x)
    square = (a * a).astype(F32)
    small = np.full_like(a, _ERF_SMALL[0])
    for c in _ERF_SMALL[1:]:
        small = _fma(small, square, c)
    small = _fma(small, a, a)
    big = np.full_like(a, _ERF_BIG[0])
    for c in _ERF_BIG[1:]:
        big = _fma(big, a, c)
    t = np.maximum(_SUMEXP_LOW, -_fma(big, a, a))
    n = (_fma(_LOG2E, t, _ROUNDING_MAGIC) - _ROUNDING_MAGIC).astype(F32)
    f = _fma(n, _LN2_LO, _fma(n, _LN2_HI, t))
    e = np.full_like(a, _EXP_POLY[0])
    for c in _EXP_POLY[1:]:
        e = _fma(e, f, c)
    big = (F32(1) - np.ldexp(e, n.astype(np.int32)).astype(F32)).astype(F32)
    return np.copysign(np.where(a > _ERF_SPLIT, big, small), x).astype(F32)


_SQRT2 = F32(np.sqrt(2))


def gelu_erf(h: np.ndarray) -> np.ndarray:
    """h * (0.5 * (erf(h / sqrt 2) + 1)) in the graph's order (the * 0.5 is exact either way)."""
    h = np.asarray(h, F32)
    e = erf((h / _SQRT2).astype(F32))
    return (h * ((e + F32(1)).astype(F32) * F32(0.5)).astype(F32)).astype(F32)
