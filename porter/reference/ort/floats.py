"""onnxruntime's CPU float kernels for an encoder, emulated in numpy: bit-exact where noted.

What onnxruntime 1.32 (CPU provider) runs for a torch.onnx BERT export, read from its
optimised graph and MLAS's sources, each kernel then measured against onnxruntime. MLAS picks
some kernels by CPU; of these, softmax's takes the target's float kernel family (`floats`,
porter.reference.ort.cpu), and the rest give the same bits on every target:

- LayerNormalization: its AVX2 kernel, read from onnxruntime 1.32's machine code and emulated
  exactly (layer_norm). With ORT_ENABLE_ALL (the goldens) a LayerNormalization that reads a
  residual Add is fused with it into com.microsoft.SkipLayerNormalization, a different kernel
  (Welford's running mean and variance in float32), also emulated exactly (skip_layer_norm).
- MatMul, FusedMatMul(alpha) (Q.K^T * scale) and Gemm (MatMul + Add fused, the bias as C):
  MLAS SGEMM, one fma chain per output and block along k (256 deep for a prepacked weight, a
  size-dependent depth otherwise), each block fma'd into C; a one-row MatMul of two
  activations takes MLAS's M = 1 kernel instead: emulated exactly (sgemm, matmul).
- Erf: MLAS's polynomial, emulated step by step (erf).
- Softmax: MLAS's exp polynomial, an 8-lane sum (AVX2) or a 16-lane one with vscalefps's
  power of two (AVX-512F), then * (1 / sum): emulated exactly (softmax).

The dynamically quantised layers are exact too (porter.reference.quant), so an encoder graph reproduces
onnxruntime's logits bit for bit; that matters most for them, since an ulp before a
DynamicQuantizeLinear can move the whole tensor's uint8 scale, amplified layer by layer.
"""

from __future__ import annotations

import numpy as np

from porter.reference.ort.cpu import AVX2_FLOATS, AVX512_FLOATS

F32 = np.float32


def _fma(a, b, c):
    """fmaf, correctly rounded, through float64. The product of two float32 values is exact in
    float64, so only the float64 sum rounds before the final rounding to float32; rounding twice
    differs from one rounding only when the float64 sum lands exactly halfway between two float32
    values (its low 29 bits 1 followed by zeros) or in float32's subnormal range. Those rare
    elements take the exact path (_fma_round_to_odd); the rest are already right."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    with np.errstate(invalid="ignore"):
        suspect = ((s.view(np.int64) & _LOW_29) == _HALF_29) | ((np.abs(s) < _F32_SMALLEST_NORMAL) & (s != 0))
    out = s.astype(F32)
    if suspect.any():
        p, c = np.broadcast_to(p, s.shape), np.broadcast_to(c, s.shape)
        out[suspect] = _fma_round_to_odd(p[suspect], c[suspect], s[suspect])
    return out


fma = _fma  # the same, for the other kernels of onnxruntime (porter.reference.ort.qdq)

_LOW_29 = (1 << 29) - 1  # the float64 mantissa bits float32 drops
_HALF_29 = 1 << 28
_F32_SMALLEST_NORMAL = np.float64(np.finfo(np.float32).tiny)


def _fma_round_to_odd(p, c, s):
    """The float64 sum rounded to odd (nudged off an even last bit when inexact, its exact error
    found by TwoSum), which makes the rounding to float32 correct."""
    back = s - p
    error = (p - (s - back)) + (c - back)
    with np.errstate(invalid="ignore"):
        even = (s.view(np.int64) & 1) == 0
        nudge = np.isfinite(s) & (error != 0) & even
    s = np.where(nudge, np.nextafter(s, np.where(error > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


PACKED_STRIDE_K = 256  # depth of MLAS's blocks of a prepacked B (a constant weight)
_STRIDE = 128  # MLAS_SGEMM_STRIDEN and _STRIDEK: blocks of a B packed on the fly


def stride_k(n: int, k: int, prepacked: bool) -> int:
    """The depth of MLAS's SGEMM blocks: fixed for a prepacked B; otherwise 128, doubled while
    the N stride (128, halved each time, down to 16) still covers n, when n < k."""
    if prepacked:
        return PACKED_STRIDE_K
    stride_n, depth = _STRIDE, _STRIDE
    if n < k:
        while stride_n > 16 and stride_n // 2 >= n:
            stride_n, depth = stride_n // 2, depth * 2
    return depth


def sgemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, alpha: float = 1.0,
          prepacked: bool = False) -> np.ndarray:
    """alpha * a [..., m, k] @ b [..., k, n] (+ c) as MLAS's SGEMM computes it: for each block
    along k (stride_k), one fma chain per output in k order from zero, then C = fma(chain,
    alpha, C) (the first block writes chain * alpha when there is no C). Measured bit-exact on
    MatMul, Gemm and FusedMatMul."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    shape = np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,))[:-1] + (a.shape[-2], b.shape[-1])
    depth = a.shape[-1]
    block = stride_k(b.shape[-1], depth, prepacked)
    # float64 copies once (exact), k-major so each step reads a contiguous slice
    a64 = np.ascontiguousarray(np.moveaxis(a, -1, 0), np.float64)[..., None]
    b64 = np.ascontiguousarray(np.moveaxis(b, -2, 0), np.float64)[..., None, :]
    for start in range(0, depth, block):
        chain = np.zeros(shape, F32)
        for k in range(start, min(depth, start + block)):
            chain = _fma(a64[k], b64[k], chain)
        # the kernel's first store multiplies by alpha; later blocks fma into C
        c = (chain * F32(alpha)).astype(F32) if c is None else _fma(chain, F32(alpha), c)
    return np.zeros(shape, F32) if c is None else c


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MatMul of two activations (B not prepacked, alpha 1): for one row of A, MLAS's M = 1
    kernel; otherwise sgemm. (FusedMatMul's alpha other than 1 and the weights' prepacked B take
    sgemm; FusedMatMul's transposed B at alpha 1 and one row, fused_m1.)"""
    return _sgemm_m1(a, b) if np.shape(a)[-2] == 1 else sgemm(a, b)


def _sgemm_m1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """MLAS's SgemmKernelM1Avx: k in groups of four, then two, then one; each group's rounded
    products added left to right (no fma), then added to C (zero before the first group)."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    depth = a.shape[-1]
    product = lambda k: (a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(F32)  # noqa: E731
    c = np.zeros(np.broadcast_shapes(a.shape[:-1], b.shape[:-2] + (1,))[:-1] + (1, b.shape[-1]), F32)
    k = 0
    for group in (4, 2, 1):
        while depth - k >= group:
            t = product(k)
            for j in range(k + 1, k + group):
                t = (t + product(j)).astype(F32)
            c = (t + c).astype(F32)
            k += group
            if group < 4:
                break
    return c


def fused_m1(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., 1, k] @ b [..., k, n] as FusedMatMul(transB, alpha 1) computes one row: MLAS's
    SgemmKernelM1TransposeBAvx (every CPU target). Each output column is a row of B dotted with
    A in eight lanes (lane l takes k = l, l + 8, ...: products added in order, no fma; a masked
    tail adds 0 * 0), then the lanes are summed in the order its shuffles give, which depends on
    the column's group: columns go in fours, then a pair, then a single one."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    depth, n = a.shape[-1], b.shape[-1]
    padded = -(-depth // 8) * 8
    shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a8 = np.zeros(shape + (1, padded), F32)
    b8 = np.zeros(shape + (padded, n), F32)
    a8[..., :depth], b8[..., :depth, :] = np.broadcast_to(a, shape + a.shape[-2:]), np.broadcast_to(b, shape + b.shape[-2:])
    lanes = np.zeros(shape + (8, n), F32)  # [..., lane, column]
    for start in range(0, padded, 8):
        lanes = (lanes + (a8[..., 0, start:start + 8, None] * b8[..., start:start + 8, :]).astype(F32)).astype(F32)
    l = [lanes[..., i, :] for i in range(8)]  # noqa: E741

    def add(x, y):
        return (x + y).astype(F32)

    fours = add(add(add(add(l[0], l[1]), l[2]), l[3]), add(add(add(l[4], l[5]), l[6]), l[7]))
    pair = add(add(add(l[0], l[2]), add(l[4], l[6])), add(add(l[1], l[3]), add(l[5], l[7])))
    single = add(add(add(l[0], l[1]), add(l[2], l[3])), add(add(l[4], l[5]), add(l[6], l[7])))
    column = np.arange(n)
    in_fours = column < n // 4 * 4
    in_pair = ~in_fours & (column < n // 4 * 4 + (n % 4 // 2) * 2)
    sums = np.where(in_fours, fours, np.where(in_pair, pair, single))
    return add(sums, F32(0))[..., None, :]  # beta 0: C is a +0.0 added


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Gemm (MatMul + Add fused by onnxruntime) with the bias as C: C starts as the bias."""
    x = np.asarray(x, F32)
    c = None if bias is None else np.broadcast_to(bias.astype(F32), x.shape[:-1] + (len(bias),)).copy()
    return sgemm(x, np.asarray(w, F32).T, c, prepacked=True)


def matmul_add(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """MatMul, then Add of the bias (what onnxruntime leaves unfused for 3-D inputs)."""
    y = sgemm(x, np.asarray(w, F32).T, prepacked=True)
    return y if bias is None else (y + bias.astype(F32)).astype(F32)


# Both LayerNorm kernels were read from onnxruntime 1.32's x86-64 machine code (found by a
# hardware watchpoint on the op's output under gdb) and then measured element for element
# against onnxruntime on random rows (tests/test_onnx_recover.py).
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


def embed_layer_norm(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """EmbedLayerNormalization's float loop (contrib_ops/cpu/bert/embed_layer_norm.cc) on the
    embedding sum v, all float32 and left to right, no fma: sum the row, mean = sum / n;
    d = v - mean, sum d * d; e = sqrtf(sum / n + eps); out = d / e * gamma + beta."""
    v = np.asarray(v, F32)
    n = v.shape[-1]
    total = np.zeros(v.shape[:-1], F32)
    for k in range(n):
        total = (total + v[..., k]).astype(F32)
    mean = (total / F32(n)).astype(F32)[..., None]
    d = (v - mean).astype(F32)
    total = np.zeros(v.shape[:-1], F32)
    for k in range(n):
        total = (total + (d[..., k] * d[..., k]).astype(F32)).astype(F32)
    e = np.sqrt(((total / F32(n)).astype(F32) + F32(eps)).astype(F32)).astype(F32)[..., None]
    return ((((d / e).astype(F32)) * gamma).astype(F32) + beta).astype(F32)


# MLAS's exp for softmax (mlas/lib/compute.cpp, MlasComputeSumExpVector): range reduction by
# 2^m, then a degree-6 polynomial, every step an fma. Its AVX2 kernel (MlasComputeSumExpF32KernelFma3)
# builds 2^m from m's bits, which gives 0 from m = -127 down (the input clamp -88.376 reaches
# -127); the AVX-512F one (MlasComputeSumExpF32KernelAvx512F) applies it with vscalefps, p * 2^m
# rounded once, a subnormal there. The two agree wherever 2^m is a normal float.
_SUMEXP_LOW = F32(-88.3762626647949)
_SUMEXP_POLY = [F32(float.fromhex(h)) for h in ("0x1.694000p-10", "0x1.125edcp-7", "0x1.555b5ap-5",
                                                "0x1.555450p-3", "0x1.fffff6p-2", "0x1.000000p+0")]
_LOG2E, _LN2_HI, _LN2_LO = F32(1.44269504088896341), F32(-6.93145752e-1), F32(-1.42860677e-6)
_ROUNDING_MAGIC = F32(12582912.0)  # 1.5 * 2^23: adding and subtracting it rounds to an integer
# the softmax sum's accumulator: one vector of the kernel's width
SUM_LANES = {AVX2_FLOATS: 8, AVX512_FLOATS: 16}


def _exp_reduced(x: np.ndarray, low: np.float32) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(q, r, m, biased) of MLAS's exp, x clamped below at `low`: x = m ln 2 + r, m an integer in
    float32 and in biased's low bits, q the polynomial but for its last step (p = q * r + 1)."""
    x = np.maximum(low, x)
    biased = _fma(x, _LOG2E, _ROUNDING_MAGIC)
    m = (biased - _ROUNDING_MAGIC).astype(F32)
    r = _fma(m, _LN2_LO, _fma(m, _LN2_HI, x))
    q = np.full_like(r, _SUMEXP_POLY[0])
    for c in _SUMEXP_POLY[1:]:
        q = _fma(q, r, c)
    return q, r, m, biased


def _exp_parts(x: np.ndarray, low: np.float32 = _SUMEXP_LOW) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p, m, biased): exp(x) = p * 2^m, m an integer in float32 and in biased's low bits (x
    clamped below at `low`)."""
    q, r, m, biased = _exp_reduced(x, low)
    return _fma(q, r, _SUMEXP_POLY[-1]), m, biased


def _sum_exp(x: np.ndarray) -> np.ndarray:
    """The AVX2 kernel's exp: 2^m from the integer in biased's low mantissa bits, moved into the
    exponent field, then p * 2^m."""
    p, _, biased = _exp_parts(x)
    scale = ((biased.view(np.int32) << 23) + np.int32(0x3F800000)).view(F32)
    return (p * scale).astype(F32)


# 2^n stays exact in float64 and p * 2^n finite there up to this |n|, past which the float32
# result is 0 or infinite for every finite p anyway
_SCALE_LIMIT = 300


def _sum_exp_scalef(x: np.ndarray) -> np.ndarray:
    """The AVX-512F kernel's exp: vscalefps(p, m) = p * 2^m, exact in float64, rounded once."""
    p, m, _ = _exp_parts(x)
    n = np.clip(np.nan_to_num(m), -_SCALE_LIMIT, _SCALE_LIMIT).astype(np.int32)  # NaN: p is NaN too
    with np.errstate(over="ignore"):
        return np.ldexp(p.astype(np.float64), n).astype(F32)


SUM_EXP = {AVX2_FLOATS: _sum_exp, AVX512_FLOATS: _sum_exp_scalef}


def _lane_sum(e: np.ndarray, floats: str) -> np.ndarray:
    """One accumulator of the kernel's width over the row, the tail added into its first lanes
    (MLAS loads it masked); AVX-512F first adds the upper eight lanes onto the lower eight
    (vextractf64x4, vaddps); then the eight are added in adjacent pairs (vhaddps twice, the
    two halves' sums last). Measured: bit-exact for every length."""
    n, lanes = e.shape[-1], SUM_LANES[floats]
    acc = np.zeros(e.shape[:-1] + (lanes,), F32)
    for i in range(0, n, lanes):
        block = e[..., i:i + lanes]
        acc[..., :block.shape[-1]] = (acc[..., :block.shape[-1]] + block).astype(F32)
    if lanes == 16:
        acc = (acc[..., 8:] + acc[..., :8]).astype(F32)
    while acc.shape[-1] > 1:
        acc = (acc[..., 0::2] + acc[..., 1::2]).astype(F32)
    return acc[..., 0]


def softmax(x: np.ndarray, floats: str) -> np.ndarray:
    """MLAS softmax with the float kernels `floats` names (porter.reference.ort.cpu):
    e = exp(x - max) (MLAS's exp), sum, then e * (1 / sum)."""
    x = np.asarray(x, F32)
    e = SUM_EXP[floats]((x + (-x.max(axis=-1, keepdims=True))).astype(F32))
    return (e * (F32(1) / _lane_sum(e, floats)).astype(F32)[..., None]).astype(F32)


# MLAS's Exp kernels (ComputeExpF32Kernel: onnxruntime's Exp op on float, and Softmax's function
# body in a float16 graph, porter.reference.ops.softmax_function): the same range reduction and polynomial
# as the softmax's, with a lower clamp of -103.97 (the softmax's is -88.38). The AVX2 kernel
# (MlasComputeExpF32KernelFma3) also clamps above at 88.78 and applies 2^m in two factors, 2^m
# clamped to the normal exponents [-126, 127] and 2^(m - that) folded into the last fma, so that a
# result below 2^-126 is one rounding of p * 2^m; the AVX-512F one (MlasComputeExpF32KernelAvx512F)
# applies it with vscalefps. Read from x86_64/TransKernelFma3.S and amd64/TransKernelAvx512F.asm.
_EXP_LOW, _EXP_HIGH = F32(-103.9720840454), F32(88.7762626647950)
_EXP_MIN_EXPONENT, _EXP_MAX_EXPONENT = np.int32(-126 << 23), np.int32(127 << 23)


def _exp_fma3(x: np.ndarray) -> np.ndarray:
    p, r, _, biased = _exp_reduced(np.minimum(_EXP_HIGH, np.asarray(x, F32)), _EXP_LOW)
    shifted = (biased.view(np.int32).astype(np.int64) << 23).astype(np.uint32).view(np.int32)
    normal = np.minimum(np.maximum(shifted, _EXP_MIN_EXPONENT), _EXP_MAX_EXPONENT)
    overflow = ((shifted - normal) + _EXP_MAX_EXPONENT).view(F32)
    p = _fma(p, (r * overflow).astype(F32), overflow)
    return (p * (normal + _EXP_MAX_EXPONENT).view(F32)).astype(F32)


def _exp_scalef(x: np.ndarray) -> np.ndarray:
    """(+inf gives +inf, measured, where the range reduction's inf - inf would make a NaN.)"""
    p, m, _ = _exp_parts(x, _EXP_LOW)
    n = np.clip(np.nan_to_num(m), -_SCALE_LIMIT, _SCALE_LIMIT).astype(np.int32)
    with np.errstate(over="ignore"):
        return np.where(x == np.inf, F32(np.inf), np.ldexp(p.astype(np.float64), n).astype(F32))


EXP = {AVX2_FLOATS: _exp_fma3, AVX512_FLOATS: _exp_scalef}


def exp(x: np.ndarray, floats: str) -> np.ndarray:
    """onnxruntime's Exp on float32: MLAS's ComputeExpF32Kernel of the `floats` family."""
    with np.errstate(invalid="ignore", over="ignore"):
        return EXP[floats](np.asarray(x, F32))


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


_SQRT1_2 = F32(np.sqrt(0.5))


def gelu_erf(h: np.ndarray, multiply: bool = False) -> np.ndarray:
    """h * (0.5 * (erf(h / sqrt 2) + 1)) in the graph's order (the * 0.5 is exact either way).
    multiply: erf(h * (1 / sqrt 2)) instead, as onnxruntime's Gelu kernel (and a graph that
    spells it with Mul) computes it."""
    h = np.asarray(h, F32)
    e = erf((h * _SQRT1_2 if multiply else h / _SQRT2).astype(F32))
    return (h * ((e + F32(1)).astype(F32) * F32(0.5)).astype(F32)).astype(F32)


# MLAS's tanh (mlas/lib/tanh.cpp and its FMA3 kernel, Eigen's coefficients): the input clamped
# to [-9, 9], odd / even polynomials in x^2 by fma, then p / q.
_TANH_RANGE = F32(9)
_TANH_P = [F32(c) for c in (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                            5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                            4.89352455891786e-03)]
_TANH_Q = [F32(c) for c in (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                            4.89352518554385e-03)]


def tanh(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    v = np.where(x < -_TANH_RANGE, -_TANH_RANGE, np.where(x > _TANH_RANGE, _TANH_RANGE, x)).astype(F32)
    v2 = (v * v).astype(F32)
    p = _fma(v2, _TANH_P[0], _TANH_P[1])
    for c in _TANH_P[2:]:
        p = _fma(p, v2, c)
    p = (p * v).astype(F32)
    q = _fma(v2, _TANH_Q[0], _TANH_Q[1])
    for c in _TANH_Q[2:]:
        q = _fma(q, v2, c)
    with np.errstate(all="ignore"):
        return (p / q).astype(F32)


# Log: onnxruntime's CPU kernel is Eigen's array().log() over the whole tensor, compiled for SSE:
# each packet of four values by Eigen's plog (the exponent split off by frexp, the mantissa moved
# into [sqrt(1/2), sqrt(2)) and one subtracted, a (3, 3) rational in it, then e * ln 2 added; no
# fma: every product and sum rounds), the last size % 4 values by the scalar std::log (glibc's
# logf: porter.reference.litert.floats.log_op; porter.reference.ops puts the two together).
# Measured against onnxruntime 1.32 (tests/test_computed_terms.py): every value bit for bit.
_PLOG_ALPHA = [F32(0.18256296349849254), F32(1.0000000190281063), F32(1.0000000190281136)]
_PLOG_BETA = [F32(0.049616247954120038), F32(0.59923249590823520), F32(1.4999999999999927), F32(1.0)]
_PLOG_SQRT_HALF = F32(0.707106781186547524)
_PLOG_LN2 = F32(0.693147180559945309417)
PLOG_PACKET = 4


@np.errstate(all="ignore")
def eigen_log(x: np.ndarray) -> np.ndarray:
    """Eigen's plog of each value: zero gives -inf, +inf itself, a negative value or a NaN a NaN
    of all ones (0xffffffff)."""
    x = np.asarray(x, F32)
    m, e = np.frexp(x)
    m, e = m.astype(F32), e.astype(F32)
    small = m < _PLOG_SQRT_HALF
    e = (e - np.where(small, F32(1), F32(0))).astype(F32)
    m = ((m - F32(1)).astype(F32) + np.where(small, m, F32(0))).astype(F32)
    p = np.full_like(m, _PLOG_ALPHA[0])
    for c in _PLOG_ALPHA[1:]:
        p = ((p * m).astype(F32) + c).astype(F32)
    q = np.full_like(m, _PLOG_BETA[0])
    for c in _PLOG_BETA[1:]:
        q = ((q * m).astype(F32) + c).astype(F32)
    r = ((m * p).astype(F32) / q).astype(F32)
    r = ((e * _PLOG_LN2).astype(F32) + r).astype(F32)
    r = np.where(x == F32(np.inf), F32(np.inf), r)
    r = np.where((x < 0) | np.isnan(x), np.uint32(0xFFFFFFFF).view(F32), r)
    return np.where(x == 0, F32(-np.inf), r).astype(F32)


# ---- kernels decoders need (read from onnxruntime 1.32's sources and measured against it) -----

# Sin and Cos are Eigen's array .sin() / .cos() (core/providers/cpu/math/element_wise_ops.cc):
# Eigen's psincos_float on SSE packets of four, which onnxruntime's core is built without FMA
# for, so every pmadd is a multiply then an add; the last size % 4 elements take std::sin /
# std::cos (glibc), taken here as the correctly rounded value. Measured bit-exact on 125 k inputs.
_TWO_OVER_PI = F32(0.636619746685028076171875)
_PI_OVER_2_PARTS = [F32(c) for c in (-1.5703125, -0.000483989715576171875, 1.62865035235881805419921875e-07,
                                     5.5644315544167710640977020375430583953857421875e-11)]
_COS_POLY = [F32(c) for c in (2.4372266125283204019069671630859375e-05, -0.00138865201734006404876708984375,
                              0.041666619479656219482421875, -0.5, 1.0)]
_SIN_POLY = [F32(c) for c in (-0.0001959234114083702898469196984621021329076029360294342041015625,
                              0.0083326873655616851693794799871284340042620897293090820312500000,
                              -0.1666666203982298255503735617821803316473960876464843750000000000)]
# beyond these |x| Eigen reduces the argument exactly (Payne-Hanek, _trig_reduce_huge)
_HUGE = {True: F32(25966.0), False: F32(18838.0)}
# 2/pi's bits, eight at a time, as Eigen's trig_reduce_huge reads them
_TWO_OVER_PI_BITS = np.array([
    0x00000028, 0x000028be, 0x0028be60, 0x28be60db, 0xbe60db93, 0x60db9391, 0xdb939105, 0x9391054a,
    0x91054a7f, 0x054a7f09, 0x4a7f09d5, 0x7f09d5f4, 0x09d5f47d, 0xd5f47d4d, 0xf47d4d37, 0x7d4d3770,
    0x4d377036, 0x377036d8, 0x7036d8a5, 0x36d8a566, 0xd8a5664f, 0xa5664f10, 0x664f10e4, 0x4f10e410,
    0x10e41000, 0xe4100000], np.uint64)


def _madd(a, b, c):
    return ((a * b).astype(F32) + c).astype(F32)


def _trig_reduce_huge(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x - q * pi/2, q) for |x| past the fast reduction's range: x * 2/pi in 2.62 fixed point from
    96 bits of 2/pi, rounded to the nearest quadrant q, the rest scaled back in float64."""
    bits = x.astype(F32).view(np.uint32).astype(np.uint64)
    e = (bits >> np.uint64(23)) - np.uint64(118)
    mantissa = ((bits & np.uint64(0x007FFFFF)) | np.uint64(0x00800000)) << (e & np.uint64(7))
    i = (e >> np.uint64(3)).astype(np.int64)
    low32 = np.uint64(0xFFFFFFFF)
    p = mantissa * _TWO_OVER_PI_BITS[i + 7]
    p = mantissa * _TWO_OVER_PI_BITS[i + 3] + (p >> np.uint64(32))
    p = (((mantissa * _TWO_OVER_PI_BITS[i - 1]) & low32) << np.uint64(32)) + p
    q = (p + (np.uint64(1) << np.uint64(61))) >> np.uint64(62)
    p = p - (q << np.uint64(62))
    r = (p.view(np.int64).astype(np.float64) * 3.4061215800865545e-19).astype(F32)
    return r, q.astype(np.int32)


def _psincos(x0: np.ndarray, sine: bool) -> np.ndarray:
    x0 = np.asarray(x0, F32)
    x = np.abs(x0)
    rounded = (x * _TWO_OVER_PI + _ROUNDING_MAGIC).astype(F32)
    quadrant = rounded.view(np.int32).copy()
    y = (rounded - _ROUNDING_MAGIC).astype(F32)
    for part in _PI_OVER_2_PARTS:
        x = _madd(y, part, x)
    huge = np.abs(x0) >= _HUGE[sine]
    if np.any(huge & np.isfinite(x0)):
        at = huge & np.isfinite(x0)
        x[at], quadrant[at] = _trig_reduce_huge(np.abs(x0[at]))
    if sine:
        sign = (x0.view(np.uint32) ^ (quadrant.view(np.uint32) << np.uint32(30))) & np.uint32(0x80000000)
    else:
        sign = ((quadrant + 1).view(np.uint32) << np.uint32(30)) & np.uint32(0x80000000)
    x2 = (x * x).astype(F32)
    cos_part = np.full_like(x, _COS_POLY[0])
    for c in _COS_POLY[1:]:
        cos_part = _madd(cos_part, x2, c)
    sin_part = np.full_like(x, _SIN_POLY[0])
    for c in _SIN_POLY[1:]:
        sin_part = _madd(sin_part, x2, c)
    sin_part = _madd((sin_part * x2).astype(F32), x, x)
    even = (quadrant & 1) == 0
    value = np.where(even, sin_part, cos_part) if sine else np.where(even, cos_part, sin_part)
    return (value.view(np.uint32) ^ sign).view(F32)


def _eigen_trig(x: np.ndarray, sine: bool) -> np.ndarray:
    x = np.asarray(x, F32)
    flat = x.reshape(-1)
    body = flat.size - flat.size % 4
    out = np.empty_like(flat)
    out[:body] = _psincos(flat[:body], sine)
    out[body:] = (np.sin if sine else np.cos)(flat[body:].astype(np.float64)).astype(F32)
    return out.reshape(x.shape)


def sin(x: np.ndarray) -> np.ndarray:
    return _eigen_trig(x, True)


def cos(x: np.ndarray) -> np.ndarray:
    return _eigen_trig(x, False)


# MLAS's logistic (MlasLogisticKernelFma3, the kernel of Sigmoid and QuickGelu on AVX2): the input
# clamped to [-18, 18], odd / even polynomials in x^2 by fma, p / q + 0.5, then max(0, .)
_LOGISTIC_RANGE = F32(18)
_LOGISTIC_P = [F32(c) for c in (4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                                8.51377133304701e-03, 2.48287947061529e-01)]
_LOGISTIC_Q = [F32(c) for c in (6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                                1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01)]


def logistic(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    v = np.minimum(_LOGISTIC_RANGE, np.maximum(-_LOGISTIC_RANGE, x)).astype(F32)
    v2 = (v * v).astype(F32)
    p = _fma(v2, _LOGISTIC_P[0], _LOGISTIC_P[1])
    for c in _LOGISTIC_P[2:]:
        p = _fma(v2, p, c)
    q = _fma(v2, _LOGISTIC_Q[0], _LOGISTIC_Q[1])
    for c in _LOGISTIC_Q[2:]:
        q = _fma(v2, q, c)
    with np.errstate(all="ignore"):
        r = ((v * p).astype(F32) / q).astype(F32)
    return np.maximum(F32(0), (r + F32(0.5)).astype(F32)).astype(F32)


def silu(x: np.ndarray) -> np.ndarray:
    """Sigmoid then Mul, and QuickGelu(alpha = 1) on AVX2 CPUs: x * logistic(x)."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        return (x * logistic(x)).astype(F32)


def quick_gelu(x: np.ndarray, floats: str) -> np.ndarray:
    """QuickGelu(alpha = 1), onnxruntime's fusion of x * sigmoid(x), as MlasComputeSilu runs it:
    on AVX2 CPUs Sigmoid then Mul's arithmetic (silu); on AVX-512F CPUs the same logistic capped
    at 1 (measured on an Intel Xeon with AVX-512 on 1.5 M inputs: identical bits everywhere
    else, and x where the FMA3 logistic reaches 1.0000001, near x = 17.84)."""
    x = np.asarray(x, F32)
    if floats != AVX512_FLOATS:
        return silu(x)
    y = logistic(x)
    with np.errstate(all="ignore"):
        return (x * np.where(y > F32(1), F32(1), y)).astype(F32)


# FastGelu (contrib_ops/cpu/bert/bias_gelu.cc, the tanh GELU onnxruntime fuses): scalar float
# loops around MLAS's tanh, no fma (the contrib ops are built for baseline x86-64)
_FAST_GELU_B = F32(0.7978845608028654)  # sqrt(2 / pi)
_FAST_GELU_C = F32(0.035677408136300125)  # 0.044715 * sqrt(2 / pi)


def fast_gelu(x: np.ndarray) -> np.ndarray:
    """t = x * ((C * x) * x + B); y = (x * 0.5) * (tanh(t) + 1)."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        inner = ((((_FAST_GELU_C * x).astype(F32) * x).astype(F32) + _FAST_GELU_B).astype(F32) * x).astype(F32)
        return ((x * F32(0.5)).astype(F32) * (tanh(inner) + F32(1)).astype(F32)).astype(F32)


def gelu_fused(x: np.ndarray) -> np.ndarray:
    """onnxruntime's Gelu and BiasGelu kernels (after the bias add): e = erf(x * (1 / sqrt 2)),
    y = (x * 0.5) * (e + 1)."""
    x = np.asarray(x, F32)
    with np.errstate(all="ignore"):
        e = erf((x * _SQRT1_2).astype(F32))
        return ((x * F32(0.5)).astype(F32) * (e + F32(1)).astype(F32)).astype(F32)


# SimplifiedLayerNormalization (RMSNorm, which onnxruntime fuses from Pow .. Div, Mul): the
# LayerNormalization kernel's sum of squared deviations taken of x itself (eight fma lanes, the
# same reduction and tail), then 1 / sqrt(sum / n + eps), then (x * that) * gamma. Measured
# bit-exact for every width from 16 (tests/test_decoder_kernels.py); narrower rows take another
# path, not reproduced.
MIN_SIMPLIFIED_WIDTH = 16


def simplified_layer_norm(x: np.ndarray, gamma: np.ndarray, eps: float) -> np.ndarray:
    x = np.asarray(x, F32)
    n = x.shape[-1]
    if n < MIN_SIMPLIFIED_WIDTH:
        raise ValueError(f"SimplifiedLayerNormalization is reproduced for rows of {MIN_SIMPLIFIED_WIDTH} or more "
                         f"values, not {n}")
    inv_std = (F32(1) / np.sqrt(((_squared_deviations(x) / F32(n)).astype(F32) + F32(eps)).astype(F32))).astype(F32)
    return ((x * inv_std[..., None]).astype(F32) * np.asarray(gamma, F32)).astype(F32)
