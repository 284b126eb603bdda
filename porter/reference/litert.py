"""LiteRT's builtin float kernels, emulated bit for bit in numpy.

The ai-edge-litert wheel's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) compute the float
ops of an encoder with Eigen compiled for SSE (4-lane packets, no FMA), and a few with plain
loops. Measured against LiteRT's preserved intermediates, op by op, on the committed fixtures
(tests/test_litert_float.py keeps that check):

- MEAN over the last axis: Eigen's vectorised sum — two 4-lane accumulators over pairs of
  packets, combined, one more packet if left, a horizontal sum ((a0 + a2) + (a1 + a3)), then
  the scalar tail — divided by the length;
- BATCH_MATMUL and float FULLY_CONNECTED: for each output, products added one by one in k
  order (no FMA); FULLY_CONNECTED then adds its bias;
- SOFTMAX: e = exp((x - max) * beta) with Eigen's polynomial exp, sum as MEAN's, times 1/sum;
- GELU (exact): 0.5 * x * erfc(x * -sqrt(1/2)) with Eigen's rational erfc.

Without FMA, Eigen's pmadd(a, b, c) is a product rounded to float, then a sum rounded to float;
every helper here does the same. The Rust templates implement these same sequences.
"""

from __future__ import annotations

import numpy as np

F32 = np.float32
PACKET = 4  # SSE: four float lanes


def _f(x):
    return np.asarray(x, dtype=F32)


def madd(a, b, c):
    """Eigen's pmadd without FMA: round(round(a * b) + c)."""
    return (_f(a) * _f(b)).astype(F32) + _f(c)


def horizontal_sum(p: np.ndarray) -> np.ndarray:
    """Eigen's predux on a 4-lane packet: (p0 + p2) + (p1 + p3)."""
    t0 = (p[..., 0] + p[..., 2]).astype(F32)
    t1 = (p[..., 1] + p[..., 3]).astype(F32)
    return (t0 + t1).astype(F32)


def eigen_sum(x: np.ndarray) -> np.ndarray:
    """Sum over the last axis in Eigen's vectorised order (rows start 16-byte aligned)."""
    x = _f(x)
    n = x.shape[-1]
    full = n // PACKET * PACKET
    if full == 0:
        out = x[..., 0].copy()
        for i in range(1, n):
            out = (out + x[..., i]).astype(F32)
        return out
    pairs = n // (2 * PACKET) * 2 * PACKET
    acc0 = x[..., 0:PACKET].copy()
    if full > PACKET:
        acc1 = x[..., PACKET:2 * PACKET].copy()
        for i in range(2 * PACKET, pairs, 2 * PACKET):
            acc0 = (acc0 + x[..., i:i + PACKET]).astype(F32)
            acc1 = (acc1 + x[..., i + PACKET:i + 2 * PACKET]).astype(F32)
        acc0 = (acc0 + acc1).astype(F32)
        if full > pairs:
            acc0 = (acc0 + x[..., pairs:pairs + PACKET]).astype(F32)
    out = horizontal_sum(acc0)
    for i in range(full, n):
        out = (out + x[..., i]).astype(F32)
    return out


def mean_last_axis(x: np.ndarray) -> np.ndarray:
    """MEAN over the last axis, keepdims."""
    return (eigen_sum(x) / F32(x.shape[-1])).astype(F32)[..., None]


def batch_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., m, k] @ b [..., k, n], each output summed in k order, product then add."""
    a, b = _f(a), _f(b)
    acc = (a[..., :, 0:1] * b[..., 0:1, :]).astype(F32)
    for k in range(1, a.shape[-1]):
        acc = (acc + (a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(F32)).astype(F32)
    return acc


def fully_connected(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Float FULLY_CONNECTED: x [rows, k] @ w [out, k]^T in k order, then + bias."""
    y = batch_matmul(x, np.ascontiguousarray(_f(w).T))
    return y if bias is None else (y + _f(bias)).astype(F32)


# Eigen's pexp_float (Cephes-style range reduction, degree-6 polynomial).
_EXP_HI, _EXP_LO = F32(88.723), F32(-104.0)
_LOG2E = F32(1.44269504088896341)
_C1, _C2 = F32(-0.693359375), F32(2.12194440e-4)
_P2, _P3 = F32(0.49999988079071044921875), F32(0.16666518151760101318359375)
_P4, _P5 = F32(4.166965186595916748046875e-2), F32(8.36894474923610687255859375e-3)
_P6 = F32(1.37449637986719608306884765625e-3)


@np.errstate(all="ignore")  # masked scores near -FLT_MAX overflow on the way to exp() = 0
def exp(x_in: np.ndarray) -> np.ndarray:
    x_in = _f(x_in)
    x = np.minimum(x_in, _EXP_HI)
    m = np.floor(madd(x, _LOG2E, F32(0.5)))
    r = madd(m, _C1, x)
    r = madd(m, _C2, r)
    r2 = (r * r).astype(F32)
    p_even = madd(r2, _P6, _P4)
    p_odd = madd(r2, _P5, _P3)
    p_even = madd(r2, p_even, _P2)
    p_low = (r + F32(1)).astype(F32)
    y = madd(r, p_odd, p_even)
    y = madd(r2, y, p_low)
    out = np.maximum(np.ldexp(y, np.nan_to_num(m).astype(np.int32)).astype(F32), x_in)
    return np.where(x_in < _EXP_LO, F32(0), out).astype(F32)


def softmax(x: np.ndarray, beta: float) -> np.ndarray:
    x = _f(x)
    shifted = ((x - x.max(axis=-1, keepdims=True)).astype(F32) * F32(beta)).astype(F32)
    e = exp(shifted)
    inv = (F32(1) / eigen_sum(e)).astype(F32)
    return (e * inv[..., None]).astype(F32)


# Eigen's generic_fast_erfc<float>: odd polynomial for |x| <= 1, rational times exp beyond.
_ERFC_ALPHA = [F32(v) for v in (5.61802298761904239654541015625e-04,
                                -4.91381669417023658752441406250e-03,
                                2.67075151205062866210937500000e-02,
                                -1.12800106406211853027343750000e-01,
                                3.76122951507568359375000000000e-01,
                                -1.12837910652160644531250000000e+00)]
_ERFC_GAMMA = [F32(v) for v in (1.0208116471767425537109375e-01, 4.2920666933059692382812500e-01,
                                3.2379078865051269531250000e-01, 5.3971976041793823242187500e-02)]
_ERFC_DELTA = [F32(v) for v in (1.7251677811145782470703125e-02, 3.9137163758277893066406250e-01,
                                1.0000000000000000000000000e+00, 6.2173241376876831054687500e-01,
                                9.5662862062454223632812500e-02)]


def _horner(x, coeffs):
    acc = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        acc = madd(acc, x, c)
    return acc


@np.errstate(all="ignore")  # the |x| > 1 branch is computed for every lane, then selected
def erfc(x_in: np.ndarray) -> np.ndarray:
    x = np.clip(_f(x_in), F32(-11), F32(11))
    x2 = (x * x).astype(F32)
    small = madd(x, _horner(x2, _ERFC_ALPHA), F32(1))
    # The low part of x*x, exactly (Eigen's twoprod_low is error-free).
    x2_lo = (x.astype(np.float64) * x.astype(np.float64) - x2.astype(np.float64)).astype(F32)
    exp_hi = exp(-x2)
    z = (exp_hi - (exp_hi * x2_lo).astype(F32)).astype(F32)
    q2 = (F32(1) / x2).astype(F32)
    num = _horner(q2, _ERFC_GAMMA)
    den = (x * _horner(q2, _ERFC_DELTA)).astype(F32)
    r = (num / den).astype(F32)
    two = np.where(x < 0, F32(2), F32(0)).astype(F32)
    large = madd(z, r, two)
    return np.where(x2 > F32(1), large, small).astype(F32)


_NEG_SQRT_HALF = F32(-0.70710678118654752440)


def gelu_exact(x: np.ndarray) -> np.ndarray:
    x = _f(x)
    return ((F32(0.5) * x).astype(F32) * erfc((x * _NEG_SQRT_HALF).astype(F32))).astype(F32)
