"""LiteRT's builtin float kernels, emulated bit for bit in numpy.

The ai-edge-litert wheel's builtin kernels (BUILTIN_WITHOUT_DEFAULT_DELEGATES) compute the float
ops of an encoder with Eigen compiled for SSE (4-lane packets, no FMA), a few with plain loops,
and EXP with the host's libm. Each function here names the kernel it follows; all are measured
against the runtime (tests/test_litert_float.py: single-op models on every path, the fixtures'
preserved intermediates op by op, the one-input functions on every f32 bit pattern):

- MEAN over the last axis: Eigen's vectorised sum — two 4-lane accumulators over pairs of
  packets, combined, one more packet if left, a horizontal sum ((a0 + a2) + (a1 + a3)), then
  the scalar tail — divided by the length; other SUM / MEAN / REDUCE_MAX in memory order;
- BATCH_MATMUL: the reference kernel, each output's products added one by one in k order;
- float FULLY_CONNECTED: Eigen's matrix products, whose summation order depends on the shape
  (the GEBP kernel's register blocks, its GEMV, its depth blocking; see fully_connected), then
  the bias;
- SOFTMAX: e = exp((x - max) * beta) with Eigen's polynomial exp, sum as MEAN's, times 1/sum;
- GELU (exact): 0.5 * x * erfc(x * -sqrt(1/2)) with Eigen's rational erfc; GELU
  (approximate): (0.5 * x) * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with TANH's tanh;
- TANH and LOGISTIC: Eigen's fast tanh and its logistic functor; EXP: glibc's expf;
- L2_NORMALIZATION: a plain loop over each row.

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


def eigen_sum(x: np.ndarray, head: int = 0) -> np.ndarray:
    """Sum over the last axis in Eigen's vectorised order (redux_impl, LinearVectorizedTraversal):
    packets from the first 16-byte boundary, `head` values before it (0 when rows start
    aligned), which are added after the packets' reduction, then the values after the packets."""
    x = _f(x)
    n = x.shape[-1]
    head = min(head, n)
    full = (n - head) // PACKET * PACKET
    if full == 0:
        out = x[..., 0].copy()
        for i in range(1, n):
            out = (out + x[..., i]).astype(F32)
        return out
    body = x[..., head:head + full]
    pairs = full // (2 * PACKET) * 2 * PACKET
    acc0 = body[..., 0:PACKET].copy()
    if full > PACKET:
        acc1 = body[..., PACKET:2 * PACKET].copy()
        for i in range(2 * PACKET, pairs, 2 * PACKET):
            acc0 = (acc0 + body[..., i:i + PACKET]).astype(F32)
            acc1 = (acc1 + body[..., i + PACKET:i + 2 * PACKET]).astype(F32)
        acc0 = (acc0 + acc1).astype(F32)
        if full > pairs:
            acc0 = (acc0 + body[..., pairs:pairs + PACKET]).astype(F32)
    out = horizontal_sum(acc0)
    for i in list(range(head)) + list(range(head + full, n)):
        out = (out + x[..., i]).astype(F32)
    return out


def mean_last_axis(x: np.ndarray) -> np.ndarray:
    """MEAN over the last axis, keepdims."""
    return (eigen_sum(x) / F32(x.shape[-1])).astype(F32)[..., None]


def batch_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., m, k] @ b [..., k, n]: LiteRT's reference kernel (the wheel registers no other),
    each output `total = 0; total += a * b` in k order."""
    a, b = _f(a), _f(b)
    acc = np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (a.shape[-2], b.shape[-1]), F32)
    for k in range(a.shape[-1]):
        acc = (acc + (a[..., :, k:k + 1] * b[..., k:k + 1, :]).astype(F32)).astype(F32)
    return acc


# ---- float FULLY_CONNECTED: Eigen's matrix products ----------------------------------------------
#
# FULLY_CONNECTED (fully_connected.cc EvalFloat -> optimized_ops::FullyConnected) calls
# cpu_backend_gemm::Gemm with lhs = the weights [out, k] row-major, rhs = the input [rows, k] read
# as a k x rows column-major matrix. On x86 without TFLITE_WITH_RUY the float GEMM goes to Eigen
# (cpu_backend_gemm_x86.h: "For float, defer to eigen"; the custom NEON GEMV is compiled only with
# ruy), and cpu_backend_gemm_eigen.cc picks the product by shape:
#   rows == 1            dst.col(0) = lhs * rhs.col(0): a GEMV over the weights' rows (and when
#                        out == 1 too, Eigen's inner product, a vectorised sum of the products);
#   out == 1             dst.row(0) = lhs.row(0) * rhs: the same GEMV over the input's rows;
#   otherwise            the GEMM: a coefficient-based product when k + out + rows < 20, else
#                        Eigen's blocked GEBP kernel.
# then dst + bias, clamped to [lowest, max] (the activation range of NONE; std::min/std::max).
# Eigen's GEBP for SSE floats without FMA has register blocks of mr = 8 outputs (two packets) by
# nr = 4 input rows, and each block type adds its products in its own order:
#   outputs below out // 8 * 8 (2 packets), and every output of the input rows that do not fill a
#   4-row panel: one accumulator, k order;
#   the next 4 outputs when out % 8 >= 4 (1 packet x 4 rows): even k into one accumulator, odd k
#   into another, over the first k // 8 * 8, then their sum, then the rest in order;
#   the last out % 4 outputs (Eigen's "swapped" single-row path): four accumulators for k mod 4
#   over the first k // 4 * 4, combined (c0 + c1) + (c2 + c3), then the rest in order.
# Depths beyond Eigen's L1 blocking are split into blocks, each summed as above and added to the
# result in turn. Every accumulator starts at +0 and the result is 0 + sum (Eigen zeroes dst and
# adds alpha * sum). Measured against ai-edge-litert 2.3.0: every shape and path bit-identical
# (tests/test_litert_float.py).

GEBP_OUTPUTS, GEBP_ROWS, GEBP_PEEL = 8, 4, 8  # mr, nr, Eigen's k peeling
# Eigen reads the L1 data cache size from CPUID when it first multiplies, so float products
# deeper than its L1 depth block are summed in blocks that depend on the CPU: 32 KiB (AMD Zen 3
# and 4, Intel up to Cascade Lake) gives blocks of 680, 48 KiB (Intel Ice Lake and later) of
# 1020. The committed goldens were made with 32 KiB; the size is part of a program's reference
# (EncoderProgram.eigen_l1d), measured against LiteRT on both sizes.
EIGEN_L1_BYTES = 32 * 1024
SYSFS_CPU0_CACHES = "/sys/devices/system/cpu/cpu0/cache"


def host_l1d_bytes(caches: str = SYSFS_CPU0_CACHES) -> int:
    """This machine's L1 data cache size (what Eigen's CPUID query finds), from sysfs; the
    reference host's 32 KiB where the kernel does not say."""
    return cache_sizes(caches)["l1d_bytes"] or EIGEN_L1_BYTES


def cache_sizes(caches: str = SYSFS_CPU0_CACHES) -> dict:
    """The first core's L1 data and L2 cache sizes in bytes, from sysfs (None where it does not say)."""
    from pathlib import Path

    sizes = {"l1d_bytes": None, "l2_bytes": None}
    for index in sorted(Path(caches).glob("index*")):
        try:
            level, kind, size = ((index / name).read_text().strip() for name in ("level", "type", "size"))
            value = parse_cache_size(size)
        except (OSError, ValueError):
            continue
        if level == "1" and kind in ("Data", "Unified") and sizes["l1d_bytes"] is None:
            sizes["l1d_bytes"] = value
        elif level == "2" and sizes["l2_bytes"] is None:
            sizes["l2_bytes"] = value
    return sizes


def golden_l1d(manifest: dict) -> int:
    """The L1 data cache size of the CPU a golden was made on, as `porter golden` records it
    (cpu_l1d_bytes), else the reference host's 32 KiB, which blocks every layer that does not
    depend on the size as any other would (porter.check.golden.cpu_choices refuses a golden
    without the size where a layer does)."""
    value = manifest.get("cpu_l1d_bytes", EIGEN_L1_BYTES)
    return value if isinstance(value, int) and value > 0 else EIGEN_L1_BYTES


# The smallest L1 data cache porter expects a LiteRT golden's CPU to have (x86 since Core 2 and
# Zen, Arm's Cortex-A and Neoverse cores): a float layer whose depth fits one block at this size
# is one block on every CPU, so its sums do not depend on the CPU.
SMALLEST_L1D_BYTES = 32 * 1024


def depth_depends_on_l1d(depth: int) -> bool:
    """Whether Eigen could sum a float product this deep in other blocks on another CPU (the
    product's other sizes matter only below 48, where everything is one block)."""
    return gemm_depth_block(depth, depth, depth, SMALLEST_L1D_BYTES) != depth


def blocks_differ(depth: int, outs: int, rows: int, l1d_a: int, l1d_b: int) -> bool:
    """Whether a float product of this shape is summed in other depth blocks under the two sizes."""
    return gemm_depth_block(depth, outs, rows, l1d_a) != gemm_depth_block(depth, outs, rows, l1d_b)


def parse_cache_size(text: str) -> int:
    """"48K", "32768", "1M" -> bytes."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in "KM" else text
    if not digits.isdigit() or int(digits) == 0:
        raise ValueError(f"{text!r} is not a cache size (like 32K, 48K or 49152)")
    return int(digits) * scale
COEFF_BASED_BELOW = 20  # EIGEN_GEMM_TO_COEFFBASED_THRESHOLD
_FLT_MAX = np.finfo(F32).max


def gemm_depth_block(k: int, out: int, rows: int, l1d_bytes: int = EIGEN_L1_BYTES) -> int:
    """Eigen's kc (evaluateProductBlockingSizesHeuristic, one thread): the depth of each block."""
    if max(k, out, rows) < 48:
        return k
    max_kc = max(((l1d_bytes - GEBP_OUTPUTS * GEBP_ROWS * 4) // ((GEBP_OUTPUTS + GEBP_ROWS) * 4))
                 & ~(GEBP_PEEL - 1), 1)
    if k <= max_kc:
        return k
    if k % max_kc == 0:
        return max_kc
    # the last block as large as possible for the same number of blocks
    return max_kc - GEBP_PEEL * ((max_kc - 1 - k % max_kc) // (GEBP_PEEL * (k // max_kc + 1)))


def _add_products(x, w, ks, acc=None):
    """acc (+0 if None) + x[:, k] * w[:, k] for k in ks, one product and one sum at a time."""
    if acc is None:
        acc = np.zeros((x.shape[0], w.shape[0]), F32)
    for k in ks:
        acc = (acc + np.multiply.outer(x[:, k], w[:, k])).astype(F32)
    return acc


def _gebp_block(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """One depth block of Eigen's GEBP: [rows, out], each output in its register block's order."""
    rows, depth = x.shape
    out = w.shape[0]
    y = _add_products(x, w, range(depth))
    two_packets, one_packet = out // 8 * 8, out // 4 * 4
    panels = rows // GEBP_ROWS * GEBP_ROWS
    if panels and one_packet > two_packets:
        xs, ws = x[:panels], w[two_packets:one_packet]
        peeled = depth // GEBP_PEEL * GEBP_PEEL
        even = _add_products(xs, ws, range(0, peeled, 2))
        odd = _add_products(xs, ws, range(1, peeled, 2))
        y[:panels, two_packets:one_packet] = _add_products(xs, ws, range(peeled, depth), (even + odd).astype(F32))
    if panels and out > one_packet:
        xs, ws = x[:panels], w[one_packet:]
        quads = depth // 4 * 4
        c0, c1, c2, c3 = (_add_products(xs, ws, range(j, quads, 4)) for j in range(4))
        combined = ((c0 + c1).astype(F32) + (c2 + c3).astype(F32)).astype(F32)
        y[:panels, one_packet:] = _add_products(xs, ws, range(quads, depth), combined)
    return y


def _gebp(x: np.ndarray, w: np.ndarray, l1d_bytes: int) -> np.ndarray:
    rows, k = x.shape
    kc = gemm_depth_block(k, w.shape[0], rows, l1d_bytes)
    y = np.zeros((rows, w.shape[0]), F32)
    for k0 in range(0, k, kc):
        y = (y + _gebp_block(x[:, k0:k0 + kc], w[:, k0:k0 + kc])).astype(F32)
    return y


def _gemv(m: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Eigen's row-major matrix times vector: each row's products in 4 lanes (k mod 4) over the
    first k // 4 * 4, the lanes reduced (l0 + l2) + (l1 + l3), then the rest in order."""
    k = m.shape[1]
    quads = k // PACKET * PACKET
    lanes = np.zeros((m.shape[0], PACKET), F32)
    for j in range(0, quads, PACKET):
        lanes = (lanes + (m[:, j:j + PACKET] * v[j:j + PACKET]).astype(F32)).astype(F32)
    acc = horizontal_sum(lanes)
    for j in range(quads, k):
        acc = (acc + (m[:, j] * v[j]).astype(F32)).astype(F32)
    return acc


def _inner_product(p: np.ndarray) -> np.ndarray:
    """Eigen's inner product (InnerProduct.h) of the products p [..., k]: four packet
    accumulators over 16 k at a time, the packets left over into the first three, combined
    p0 + (p1 + (p2 + p3)), reduced as one packet, then the k that fill no packet in order."""
    k = p.shape[-1]
    packets = k // PACKET
    if packets == 0:
        return eigen_sum(p)  # one by one from the first product
    acc = [p[..., i * PACKET:(i + 1) * PACKET].copy() for i in range(min(packets, 4))]
    quads = k // (4 * PACKET) * 4 * PACKET
    for j in range(4 * PACKET, quads, PACKET):
        i = j // PACKET % 4
        acc[i] = (acc[i] + p[..., j:j + PACKET]).astype(F32)
    for i, j in enumerate(range(max(quads, 4 * PACKET), packets * PACKET, PACKET)):
        acc[i] = (acc[i] + p[..., j:j + PACKET]).astype(F32)
    while len(acc) > 1:
        last = acc.pop()
        acc[-1] = (acc[-1] + last).astype(F32)
    out = horizontal_sum(acc[0])
    for j in range(packets * PACKET, k):
        out = (out + p[..., j]).astype(F32)
    return out


def eigen_matmul(x: np.ndarray, w: np.ndarray, l1d_bytes: int = EIGEN_L1_BYTES) -> np.ndarray:
    """x [rows, k] @ w [out, k]^T as cpu_backend_gemm_eigen.cc computes it (no bias), with
    Eigen's blocking for an L1 data cache of l1d_bytes."""
    x, w = _f(x), _f(w)
    rows, k = x.shape
    out = w.shape[0]
    if rows == 1 and out == 1:
        y = _inner_product((x * w).astype(F32)).reshape(1, 1)
    elif rows == 1:
        y = _gemv(w, x[0])[None, :]
    elif out == 1:
        y = _gemv(x, w[0])[:, None]
    elif k + out + rows < COEFF_BASED_BELOW:
        return eigen_sum((x[:, None, :] * w[None, :, :]).astype(F32))  # assigned, not added to 0
    else:
        y = _gebp(x, w, l1d_bytes)
    return (F32(0) + y).astype(F32)


def fully_connected(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
                    l1d_bytes: int = EIGEN_L1_BYTES) -> np.ndarray:
    """Float FULLY_CONNECTED, no fused activation: x [rows, k], w [out, k] -> [rows, out]."""
    y = eigen_matmul(x, w, l1d_bytes)
    if bias is not None:
        y = (y + _f(bias)).astype(F32)
    # cwiseMin(max) then cwiseMax(lowest) as std::min / std::max: a NaN stays, infinities clamp
    y = np.where(_FLT_MAX < y, _FLT_MAX, y)
    return np.where(y < -_FLT_MAX, -_FLT_MAX, y).astype(F32)


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


# GELU with approximate=True (reference_ops::Gelu, reference/gelu.h, the float path GeluEval takes):
# one Eigen array expression, 0.5 * x * (1 + (kSqrt2dPi * (x + 0.044715 * x.cube())).tanh()),
# each operation rounded to float in that order (x.cube() is x * (x * x)), the tanh Eigen's
# ptanh_float as TANH computes it. Packets and the scalar tail compute the same function.
# kSqrt2dPi is M_2_SQRTPI * M_SQRT1_2 in double, rounded to float.
_SQRT_2_OVER_PI = F32(1.12837916709551257390 * 0.70710678118654752440)
_GELU_CUBE = F32(0.044715)


@np.errstate(all="ignore")  # x^3 overflows to inf where tanh is 1 anyway; -inf gives NaN as in LiteRT
def gelu_tanh(x: np.ndarray) -> np.ndarray:
    x = _f(x)
    cube = (x * (x * x).astype(F32)).astype(F32)
    inner = (x + (_GELU_CUBE * cube).astype(F32)).astype(F32)
    t = tanh((_SQRT_2_OVER_PI * inner).astype(F32))
    return ((F32(0.5) * x).astype(F32) * (F32(1) + t).astype(F32)).astype(F32)


# ---- TANH and LOGISTIC: Eigen's functors; EXP: libm's expf ---------------------------------------
#
# optimized_ops::Tanh and ::Logistic (activations.cc, the GENERIC_OPT kernels the builtin
# resolver registers) assign Eigen's array().tanh() and scalar_logistic_op<float> over the
# tensor: whole SSE packets from its start (tensors are 64-byte aligned), then the values after
# the last whole packet one at a time. Eigen's pmin(a, b) is `b < a ? b : a` and pmax(a, b)
# `a < b ? b : a`: a NaN in a stays.


def _pmin(a, b):
    return np.where(b < a, b, a)


def _pmax(a, b):
    return np.where(a < b, b, a)


def _polevl(x, coeffs):
    """Eigen's ppolevl: Horner from the highest coefficient, pmadd without FMA."""
    acc = np.full_like(x, coeffs[0])
    for c in coeffs[1:]:
        acc = madd(acc, x, c)
    return acc


_TANH_CLAMP = F32(7.90738964080810547)  # the smallest |x| where the rational is 1 (no FMA)
_TANH_ALPHA = [F32(v) for v in (1.394553628e-8, 2.102733560e-5, 3.520756727e-3, 1.340216100e-1)]
_TANH_BETA = [F32(v) for v in (8.015776984e-7, 3.326951409e-4, 2.597254514e-2, 4.673548340e-1, 1.0)]


@np.errstate(all="ignore")
def tanh(x_in: np.ndarray) -> np.ndarray:
    """TANH: Eigen's ptanh_float (EIGEN_FAST_MATH): x^3 P(x^2) + x over Q(x^2), x clamped to
    [-c, c]; the scalar path is the same function, so every value takes it."""
    x = _pmax(_pmin(_f(x_in), _TANH_CLAMP), -_TANH_CLAMP).astype(F32)
    x2 = (x * x).astype(F32)
    x3 = (x2 * x).astype(F32)
    p = madd(x3, _polevl(x2, _TANH_ALPHA), x)
    return (p / _polevl(x2, _TANH_BETA)).astype(F32)


_LOGISTIC_HI, _LOGISTIC_LO = F32(16.6355324), F32(-104.0)
_LOGISTIC_P2, _LOGISTIC_P3 = F32(0.49999141693115234375), F32(0.16666877269744873046875)
_LOGISTIC_P4, _LOGISTIC_P5 = F32(4.1898667812347412109375e-2), F32(8.33471305668354034423828125e-3)


@np.errstate(all="ignore")
def logistic_packet(x_in: np.ndarray) -> np.ndarray:
    """scalar_logistic_op<float>::packetOp: exp(x / 2) by Cephes' reduction and a degree-5
    polynomial, scaled by pldexp_fast and squared, then e / (1 + e); 0 below -104."""
    x_in = _f(x_in)
    x = (_pmin(x_in, _LOGISTIC_HI) * F32(0.5)).astype(F32)
    m = np.floor(madd(x, _LOG2E, F32(0.5))).astype(F32)
    r = madd(m, _C2, madd(m, _C1, x))
    r2 = (r * r).astype(F32)
    p = madd(r, madd(r2, _LOGISTIC_P5, _LOGISTIC_P3), madd(r2, _LOGISTIC_P4, _LOGISTIC_P2))
    p = madd(r2, p, (r + F32(1)).astype(F32))
    # pldexp_fast: 2^m from the biased exponent clamped to [0, 255], truncated to int (a NaN
    # gives the integer 0x80000000, whose << 23 is 0)
    biased = _pmin(_pmax((m + F32(127)).astype(F32), F32(0)), F32(255))
    exponent = np.where(np.isnan(biased), np.uint32(0), np.nan_to_num(biased).astype(np.uint32) << np.uint32(23))
    half = (p * exponent.view(F32)).astype(F32)
    e = (half * half).astype(F32)
    return np.where(x_in < _LOGISTIC_LO, F32(0), (e / (F32(1) + e)).astype(F32)).astype(F32)


@np.errstate(all="ignore")
def logistic_scalar(x: np.ndarray) -> np.ndarray:
    """scalar_logistic_op<float>::operator(): e = expf(min(x, hi)) from libm, e / (1 + e)."""
    e = exp_op(_pmin(_f(x), _LOGISTIC_HI))
    return (e / (F32(1) + e)).astype(F32)


def logistic(x: np.ndarray) -> np.ndarray:
    """LOGISTIC over a whole tensor: the packet formula on its first size // 4 * 4 values (in
    row-major order), the scalar one on the rest."""
    x = _f(x)
    flat = x.reshape(-1)
    end = flat.size // PACKET * PACKET
    out = np.concatenate([logistic_packet(flat[:end]), logistic_scalar(flat[end:])])
    return out.reshape(x.shape)


# glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, glibc >= 2.28), in double precision:
# x * 32 / ln 2 = k + r, 2^(k/32) from a table with k // 32 added to its exponent bits, times a
# cubic in r, rounded once to float. On a CPU with FMA and AVX2 (this host) glibc's ifunc picks
# __expf_fma, the same source compiled with -mfma, where GCC contracts r = x * 32/ln2 - k and the
# cubic's three multiply-adds into fused ones; without FMA the plain variant rounds each product
# (the two differ on a few inputs: exp(0x4202422f) is one of them).


def _two_sum(a, b):
    """s, e with s = fl(a + b) and a + b = s + e exactly."""
    s = a + b
    back = s - a
    return s, (a - (s - back)) + (b - back)


def _two_product(a, b):
    """p, e with p = fl(a * b) and a * b = p + e exactly (Veltkamp's split; no overflow here)."""
    p = a * b
    split = lambda v: (lambda c: (c - (c - v), v - (c - (c - v))))(np.float64(134217729.0) * v)  # noqa: E731
    (ah, al), (bh, bl) = split(a), split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _fma64(a, b, c):
    """fma(a, b, c) correctly rounded in float64 (Boldo and Melquiond): the exact product's
    low part and the sum's error added rounded to odd, so the last sum rounds once."""
    a, b, c = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (a, b, c)))
    ph, pl = _two_product(a, b)
    sh, sl = _two_sum(c, ph)
    v, e = _two_sum(sl, pl)
    bits = v.view(np.uint64)
    to_odd = (e != 0) & ((bits & np.uint64(1)) == 0)
    nudged = np.where((e > 0) == (v > 0), bits + np.uint64(1), bits - np.uint64(1))
    return sh + np.where(to_odd, nudged, bits).view(np.float64)


_EXPF_TABLE = np.array([
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540], dtype=np.uint64)
_EXPF_N = 32
_EXPF_SHIFT = np.float64(float.fromhex("0x1.8p+52"))
_EXPF_INV_LN2_N = np.float64(float.fromhex("0x1.71547652b82fep+0") * _EXPF_N)
_EXPF_C = [np.float64(float.fromhex(h) / _EXPF_N ** p)
           for h, p in (("0x1.c6af84b912394p-5", 3), ("0x1.ebfce50fac4f3p-3", 2), ("0x1.62e42ff0c52d6p-1", 1))]
_EXPF_OVERFLOW_ABOVE = F32(float.fromhex("0x1.62e42ep6"))  # log(2^128)
_EXPF_ZERO_BELOW = F32(float.fromhex("-0x1.9fe368p6"))  # log(2^-150)
_EXPF_MAY_UNDERFLOW_BELOW = F32(float.fromhex("-0x1.9d1d9ep6"))  # log(2^-149)


@np.errstate(all="ignore")
def exp_op(x: np.ndarray) -> np.ndarray:
    """EXP: reference_ops::Exp, std::exp per value, i.e. the host libm's expf (glibc's
    __expf_fma)."""
    x = _f(x)
    xd = x.astype(np.float64)
    shifted = _EXPF_INV_LN2_N * xd + _EXPF_SHIFT
    k = shifted.view(np.uint64)
    r = _fma64(_EXPF_INV_LN2_N, xd, -(shifted - _EXPF_SHIFT))
    s = (_EXPF_TABLE[(k % np.uint64(_EXPF_N)).astype(np.intp)] + (k << np.uint64(47))).view(np.float64)
    c0, c1, c2 = _EXPF_C
    y = _fma64(_fma64(c0, r, c1), r * r, _fma64(c2, r, 1.0)) * s
    out = y.astype(F32)
    # |x| >= 88 or NaN: glibc's special cases, its __math_*flowf results
    special = np.select([x == -np.inf, ~np.isfinite(x), x > _EXPF_OVERFLOW_ABOVE, x < _EXPF_ZERO_BELOW,
                         x < _EXPF_MAY_UNDERFLOW_BELOW],
                        [F32(0), x + x, F32(np.inf), F32(0), np.float32(1.4e-45)], out)
    large = (x.view(np.uint32) >> 20 & 0x7FF) >= (F32(88.0).view(np.uint32) >> 20)
    return np.where(large, special, out).astype(F32)


# LOG is reference_ops' elementwise std::log, i.e. the host libm's logf: glibc 2.28 and later
# (sysdeps/ieee754/flt-32/e_logf.c). x = 2^k * z with z in [0x3f330000, 2 * that) exactly;
# log(x) = log1p(z / c - 1) + log(c) + k ln 2, where 1/c and log(c) come from a table of 16
# subintervals and log1p(r) is r + a cubic in r, all in double, rounded once to float. As for
# expf, the FMA host runs __logf_fma, where GCC fused r = z * invc - 1, y0 = logc + k * ln2 and
# the three multiply-adds of the polynomial.
_LOGF_INVC_LOGC = np.array([float.fromhex(h) for pair in (
    ("0x1.661ec79f8f3bep+0", "-0x1.57bf7808caadep-2"), ("0x1.571ed4aaf883dp+0", "-0x1.2bef0a7c06ddbp-2"),
    ("0x1.49539f0f010bp+0", "-0x1.01eae7f513a67p-2"), ("0x1.3c995b0b80385p+0", "-0x1.b31d8a68224e9p-3"),
    ("0x1.30d190c8864a5p+0", "-0x1.6574f0ac07758p-3"), ("0x1.25e227b0b8eap+0", "-0x1.1aa2bc79c81p-3"),
    ("0x1.1bb4a4a1a343fp+0", "-0x1.a4e76ce8c0e5ep-4"), ("0x1.12358f08ae5bap+0", "-0x1.1973c5a611cccp-4"),
    ("0x1.0953f419900a7p+0", "-0x1.252f438e10c1ep-5"), ("0x1p+0", "0x0p+0"),
    ("0x1.e608cfd9a47acp-1", "0x1.aa5aa5df25984p-5"), ("0x1.ca4b31f026aap-1", "0x1.c5e53aa362eb4p-4"),
    ("0x1.b2036576afce6p-1", "0x1.526e57720db08p-3"), ("0x1.9c2d163a1aa2dp-1", "0x1.bc2860d22477p-3"),
    ("0x1.886e6037841edp-1", "0x1.1058bc8a07ee1p-2"), ("0x1.767dcf5534862p-1", "0x1.4043057b6ee09p-2"))
    for h in pair]).reshape(16, 2)
_LOGF_LN2 = np.float64(float.fromhex("0x1.62e42fefa39efp-1"))
_LOGF_A = [np.float64(float.fromhex(h)) for h in ("-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2",
                                                  "-0x1.ffffef20a4123p-2")]
_LOGF_OFF = 0x3F330000
_X86_DEFAULT_NAN = np.uint32(0xFFC00000).view(F32)  # what 0 / 0 gives on x86 (glibc's invalid)


@np.errstate(all="ignore")
def log_op(x: np.ndarray) -> np.ndarray:
    """LOG: std::log per value, the host libm's logf (glibc's __logf_fma)."""
    x = _f(x)
    ix = x.view(np.uint32).astype(np.int64)
    subnormal = (ix > 0) & (ix < 0x00800000)
    # a subnormal x is scaled by 2^23 into the normal range, its exponent taken back from k
    ix = np.where(subnormal, (x * F32(2.0 ** 23)).view(np.uint32).astype(np.int64) - (23 << 23), ix)
    tmp = (ix - _LOGF_OFF) & 0xFFFFFFFF
    i = (tmp >> 19) % 16
    k = (tmp.astype(np.uint32).view(np.int32) >> 23).astype(np.float64)
    z = ((ix - (tmp & 0xFF800000)) & 0xFFFFFFFF).astype(np.uint32).view(F32).astype(np.float64)
    invc, logc = _LOGF_INVC_LOGC[i, 0], _LOGF_INVC_LOGC[i, 1]
    r = _fma64(z, invc, -1.0)
    y0 = _fma64(k, _LOGF_LN2, logc)
    r2 = r * r
    a0, a1, a2 = _LOGF_A
    y = _fma64(a0, r2, _fma64(a1, r, a2))
    out = _fma64(y, r2, y0 + r).astype(F32)
    bits = x.view(np.uint32)
    special = np.select([bits == 0x3F800000, (bits & 0x7FFFFFFF) == 0, bits == 0x7F800000, np.isnan(x),
                         bits >= 0x80000000],
                        [F32(0), F32(-np.inf), x, x + x, _X86_DEFAULT_NAN], out)
    return special.astype(F32)


# ---- SUM, MEAN, REDUCE_MAX, L2_NORMALIZATION ---------------------------------------------------
#
# reduce.cc's optimized kernels first normalise the shape (reduce_utils::ResolveAxis: size-one
# dimensions dropped, neighbours both reduced or both kept merged). SUM and REDUCE_MAX then walk
# the input in memory order (optimized_ops::ReduceGeneric): each output starts from its first
# value and takes the others one at a time, in row-major order of the reduced indices. MEAN
# does the same and divides by the count (MeanGeneral), except when the normalised reduction is
# the last of two or more dimensions: then Eigen's colwise().sum() of each row (eigen_sum, the
# row's alignment deciding its head), divided by the row's length.


def _normalised(shape: tuple[int, ...], axes: tuple[int, ...]) -> list[tuple[int, bool]]:
    """reduce_utils::ResolveAxis: (size, reduced) of each normalised dimension."""
    dims: list[tuple[int, bool]] = []
    for a, d in enumerate(shape):
        if d == 1:
            continue
        if dims and dims[-1][1] == (a in axes):
            dims[-1] = (dims[-1][0] * d, a in axes)
        else:
            dims.append((d, a in axes))
    return dims


def _resolve(x, axes) -> tuple[np.ndarray, tuple[int, ...]]:
    x = _f(x)
    return x, tuple(sorted({int(a) % x.ndim for a in np.ravel(axes)}))


def _reduced_last(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """x with the reduced axes moved last and flattened, in row-major order of their indices."""
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    return moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,))


def _keepdims(y: np.ndarray, shape, axes) -> np.ndarray:
    return y.reshape([1 if a in axes else d for a, d in enumerate(shape)])


def _fold(x: np.ndarray, axes: tuple[int, ...], step) -> np.ndarray:
    flat = _reduced_last(x, axes)
    acc = flat[..., 0].copy()
    for i in range(1, flat.shape[-1]):
        acc = step(acc, flat[..., i])
    return _keepdims(acc, x.shape, axes)


def reduce_sum(x: np.ndarray, axes) -> np.ndarray:
    """SUM (keepdims): the first value, then each other in memory order."""
    x, axes = _resolve(x, axes)
    return _fold(x, axes, lambda acc, v: (acc + v).astype(F32))


def reduce_max(x: np.ndarray, axes) -> np.ndarray:
    """REDUCE_MAX (keepdims): MaxOp, `acc > v ? acc : v` (a NaN so far is replaced by the next
    value, a NaN value is taken)."""
    x, axes = _resolve(x, axes)
    return _fold(x, axes, lambda acc, v: np.where(acc > v, acc, v))


def _row_heads(rows: int, n: int, misaligned: int = 0) -> np.ndarray:
    """Values before the first 16-byte boundary of each row of n floats, the tensor starting
    `misaligned` floats past one (0: an activation of LiteRT's arena; a constant is read where the
    model file holds it, mapped at a page boundary)."""
    return (-(misaligned + np.arange(rows) * n)) % PACKET


def reduce_mean(x: np.ndarray, axes, misaligned: int = 0) -> np.ndarray:
    """MEAN (keepdims) of a tensor starting `misaligned` floats past a 16-byte boundary."""
    x, axes = _resolve(x, axes)
    dims = _normalised(x.shape, axes)
    if len(dims) > 1 and [reduced for _, reduced in dims] == [False, True]:
        n = dims[-1][0]
        rows = x.reshape(-1, n)
        heads = _row_heads(rows.shape[0], n, misaligned)
        sums = np.empty(rows.shape[0], F32)
        for head in np.unique(heads):
            sums[heads == head] = eigen_sum(rows[heads == head], int(head))
        return _keepdims((sums / F32(n)).astype(F32), x.shape, axes)
    count = int(np.prod([x.shape[a] for a in axes]))
    return (reduce_sum(x, axes) / F32(count)).astype(F32)


@np.errstate(all="ignore")
def l2_normalization(x: np.ndarray) -> np.ndarray:
    """L2_NORMALIZATION over the last axis (optimized_ops::L2Normalization): the squares summed
    from 0 in order, sqrt, std::max(norm, 1e-6f), then each value divided by it."""
    x = _f(x)
    squares = np.zeros(x.shape[:-1], F32)
    for c in range(x.shape[-1]):
        squares = (squares + (x[..., c] * x[..., c]).astype(F32)).astype(F32)
    norm = np.sqrt(squares).astype(F32)
    norm = np.where(norm < F32(1e-6), F32(1e-6), norm)
    return (x / norm[..., None]).astype(F32)
