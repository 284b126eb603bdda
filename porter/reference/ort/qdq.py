"""onnxruntime's kernels for QDQ graphs, in numpy: the quantised ops its QDQ transformers fuse
(porter.recover.canonical.ort_qdq) and QuantizeLinear / DequantizeLinear, as its CPU provider
runs them on x86 (onnxruntime 1.32, read in its sources and measured op by op against it on
both CPU targets: tests/test_ort_qdq.py).

- QuantizeLinear (MlasQuantizeLinear): x / scale in float32, clamped to the type's range less
  the zero point, converted with the CPU's round half to even, plus the zero point.
- DequantizeLinear: float32(q - zero point) * scale, one rounding (per tensor or per axis).
- QLinearMatMul and QGemm (MlasGemm, then MlasRequantizeOutput): the int32 sum of (a - za)(b -
  zb), its u8 x s8 products paired and saturated to int16 where the CPU's kernel saturates
  (porter.reference.quant.u8s8_dot), plus QGemm's int32 bias; then float32(acc) * the column's
  output scale (a_scale * b_scale / y_scale, formed in float32 in that order), rounded half to
  even, clamped, plus y's zero point. A QGemm without an output scale gives float32(acc) *
  (a_scale * b_scale).
- QLinearAdd (MlasQLinearAddKernelAvx2, on every x86 target with AVX2): ratios a_scale / c_scale
  and b_scale / c_scale, a fixed part zc - fma(ra, za, rb * zb) (the compiler contracts it),
  then fma(a, ra, fma(b, rb, fixed)) per value, rounded half to even and saturated; a scalar
  operand folds into the fixed part with a plain multiply and add.
- QLinearMul (MlasQLinearMul: its SSE2 kernel on every x86 target, read in qlmul.cpp and
  measured): the product of the centred values (exact, as int32), converted to float32, times
  a_scale * b_scale / c_scale (float32, in that order), plus c's zero point as a float32; then
  _mm_cvtps_epi32 (half to even; a NaN or a value beyond int32 gives int32's minimum) and the
  saturating packs.
- QLinearSoftmax (QlinearSoftmaxCPU<uint8_t>, read in 1.32's machine code: scalar, the same on
  every CPU; the MLAS softmax kernels in its source tree are not what the release runs): a
  256-entry float32 table exp((i - 255 + shift) * x_scale) in double, shift = max(0,
  logf(FLT_MAX / n) - 5) / x_scale for a row of n; each row's values read from it at 255 - max
  + x and summed in float32 in order; each output nearbyint(value * floorf(1 / y_scale) / sum)
  in double, plus zp, saturated. The output scale is used only through that floor.
"""

from __future__ import annotations

import math

import numpy as np

from porter.ir.integer import IntegerOp
from porter.reference import quant, typed
from porter.reference.ort import floats

F32 = np.float32
LIMITS = {"uint8": (0, 255), "int8": (-128, 127)}


def _rint_clamped(v: np.ndarray, zero_point: int, dtype: str) -> np.ndarray:
    """MLAS's conversion: float32 values clamped to the type's range less the zero point with
    SSE's max and min (a NaN takes the lower bound), rounded half to even, plus the zero point."""
    lo, hi = LIMITS[dtype]
    low, high = F32(lo - zero_point), F32(hi - zero_point)
    v = np.asarray(v, F32)
    v = np.where(v > low, v, low)
    v = np.where(v < high, v, high)
    return (np.rint(v).astype(np.int64) + zero_point).astype(dtype)


def quantize_linear(x: np.ndarray, scale: float, zero_point: int, dtype: str) -> np.ndarray:
    with np.errstate(all="ignore"):
        scaled = (np.asarray(x, F32) / F32(scale)).astype(F32)
    return _rint_clamped(scaled, zero_point, dtype)


def dequantize_linear(q: np.ndarray, scale, zero_point, axis: int | None = None) -> np.ndarray:
    q = np.asarray(q)
    scale, zero_point = np.asarray(scale, F32), np.asarray(zero_point, np.int64)
    if axis is not None and scale.size > 1:
        along = [1] * q.ndim
        along[axis] = scale.size
        scale, zero_point = scale.reshape(along), zero_point.reshape(along)
    centred = (q.astype(np.int64) - zero_point).astype(F32)
    return (centred * scale).astype(F32)


def output_scales(a_scale: float, b_scales, y_scale: float | None) -> np.ndarray:
    """Each output column's multiplier as QLinearMatMul / QGemm form it in float32: a_scale *
    b_scale, then divided by y_scale (a QGemm with a float output: no division)."""
    product = (F32(a_scale) * np.asarray(b_scales, F32).reshape(-1)).astype(F32)
    return product if y_scale is None else (product / F32(y_scale)).astype(F32)


def integer_gemm(a: np.ndarray, a_zero_point: int, b: np.ndarray, b_zero_points, integer_dot: str) -> np.ndarray:
    """sum_k (a[.., m, k] - za)(b[.., k, n] - zb[n]) in int64, MLAS's: the products of the raw
    values (saturated in int16 pairs for u8 x s8 where `integer_dot` says so), less the zero
    points' terms, which are exact."""
    a, b = np.asarray(a), np.asarray(b)
    za = np.int64(a_zero_point)
    zb = np.broadcast_to(np.asarray(b_zero_points, np.int64).reshape(-1), (b.shape[-1],))
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    if a.dtype == np.uint8 and b.dtype == np.int8 and integer_dot != quant.EXACT_DOT:
        if b.ndim == 2:
            rows = a.reshape(-1, a.shape[-1])
            raw = quant.u8s8_dot(rows, b.T, integer_dot).reshape(a.shape[:-1] + (b.shape[-1],))
        else:  # an activation B, packed on the fly in the same pairs: one product per batch
            batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
            a3 = np.broadcast_to(a, batch + a.shape[-2:]).reshape(-1, *a.shape[-2:])
            b3 = np.broadcast_to(b, batch + b.shape[-2:]).reshape(-1, *b.shape[-2:])
            raw = np.stack([quant.u8s8_dot(x, y.T, integer_dot) for x, y in zip(a3, b3)])
            raw = raw.reshape(batch + (a.shape[-2], b.shape[-1]))
    else:
        raw = np.matmul(a64, b64)
    depth = a.shape[-1]
    return (raw - za * b64.sum(axis=-2, keepdims=True) - a64.sum(axis=-1, keepdims=True) * zb
            + depth * za * zb)


def requantize_output(acc: np.ndarray, scales: np.ndarray, zero_point: int, dtype: str) -> np.ndarray:
    """MlasRequantizeOutput: float32(acc) * the column's scale, rounded, clamped, plus zp."""
    with np.errstate(all="ignore"):
        scaled = (acc.astype(np.int32).astype(F32) * np.asarray(scales, F32)).astype(F32)
    return _rint_clamped(scaled, zero_point, dtype)


def qgemm(a, a_quant, b, b_zero_points, scales, out_quant, out_dtype: str, bias=None,
          integer_dot: str = quant.EXACT_DOT) -> np.ndarray:
    """QLinearMatMul / QGemm on quantised a [.., m, k] and b [.., k, n]: `scales` from
    output_scales, out_quant (scale, zp) or None for QGemm's float output."""
    acc = integer_gemm(a, a_quant[1], b, b_zero_points, integer_dot)
    if bias is not None:
        acc = acc + np.asarray(bias, np.int64)
    if out_quant is None:
        return (acc.astype(np.int32).astype(F32) * np.asarray(scales, F32)).astype(F32)
    return requantize_output(acc, scales, out_quant[1], out_dtype)


def _fma(a, b, c) -> np.ndarray:
    """fmaf, correctly rounded (porter.reference.ort.floats.fma), of scalars or arrays."""
    a, b, c = np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, F32)) for v in (a, b, c)))
    return floats.fma(a, b, c.copy())


def add_parameters(a_quant, b_quant, out_quant) -> tuple[np.float32, np.float32, np.float32]:
    """QLinearAdd's (ra, rb, fixed): the scale ratios and zc - fma(ra, za, rb * zb)."""
    (sa, za), (sb, zb), (sc, zc) = a_quant, b_quant, out_quant
    ra, rb = F32(F32(sa) / F32(sc)), F32(F32(sb) / F32(sc))
    return ra, rb, F32(F32(zc) - _fma(ra, F32(za), F32(rb * F32(zb)))[0])


def qlinear_add(a: np.ndarray, a_quant, b: np.ndarray, b_quant, out_quant, dtype: str) -> np.ndarray:
    """QLinearAdd: a and b broadcast against each other; an operand that is one value per
    contiguous run of the other (its last axis broadcast) takes the scalar path."""
    ra, rb, fixed = add_parameters(a_quant, b_quant, out_quant)
    a, b = np.asarray(a), np.asarray(b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    a_scalar = scalar_per_run(a.shape, shape)
    b_scalar = scalar_per_run(b.shape, shape)
    af, bf = (np.broadcast_to(x, shape).astype(np.int32).astype(F32) for x in (a, b))
    if a_scalar:  # the fixed part takes a * ra, rounded, then one fma per value of b
        r = _fma(bf, rb, (fixed + (af * ra).astype(F32)).astype(F32))
    elif b_scalar:
        r = _fma(af, ra, (fixed + (bf * rb).astype(F32)).astype(F32))
    else:
        r = _fma(af, ra, _fma(bf, rb, fixed))
    lo, hi = LIMITS[dtype]
    return np.clip(np.rint(r), lo, hi).astype(dtype)


def mul_ratio(a_scale: float, b_scale: float, c_scale: float) -> np.float32:
    """QLinearMul's multiplier: a_scale * b_scale / c_scale in float32, in that order."""
    return F32(F32(F32(a_scale) * F32(b_scale)) / F32(c_scale))


def qlinear_mul(a: np.ndarray, a_quant, b: np.ndarray, b_quant, out_quant, dtype: str) -> np.ndarray:
    """QLinearMul on a and b broadcast against each other (a scalar operand takes the same
    arithmetic: the product is exact and the ratio's factors commute)."""
    (sa, za), (sb, zb), (sc, zc) = a_quant, b_quant, out_quant
    centred_a, centred_b = np.broadcast_arrays(np.asarray(a, np.int64) - za, np.asarray(b, np.int64) - zb)
    with np.errstate(all="ignore"):
        v = ((centred_a * centred_b).astype(F32) * mul_ratio(sa, sb, sc)).astype(F32) + F32(zc)
        r = np.rint(v.astype(F32))
        converted = np.where(np.isfinite(r) & (r >= -2.0 ** 31) & (r < 2.0 ** 31), r, -2.0 ** 31)
    lo, hi = LIMITS[dtype]
    return np.clip(converted, lo, hi).astype(dtype)


def scalar_per_run(shape: tuple, out: tuple) -> bool:
    """Whether an operand is a single value for each contiguous run onnxruntime's broadcaster
    hands the kernel (its last axis broadcast against the output's)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    return math.prod(shape) == 1 or (shape[-1] == 1 and out[-1] != 1)


def softmax_table(x_scale: float, row: int, logf) -> np.ndarray:
    """QLinearSoftmax's table for uint8 inputs (QlinearBuildLookupTableUint32, read in
    onnxruntime 1.32's machine code): shift = max(0, logf(FLT_MAX / row) - 5) / x_scale, the
    logarithm libm's logf of the float32 quotient (`logf`: porter's model of glibc's, whose
    results the table depends on), the rest in double; each exp (libm's exp in double, as
    math.exp is) rounded to float32."""
    quotient = F32(np.finfo(F32).max) / F32(row)
    shift = max(0.0, float(np.asarray(logf(np.array([quotient], F32)))[0]) - 5.0) / float(F32(x_scale))
    return np.array([math.exp((i - 255 + shift) * float(F32(x_scale))) for i in range(256)], F32)


def softmax_multiplier(y_scale: float) -> float:
    """QLinearSoftmax's output multiplier, a double: floorf(1 / y_scale) in float32 (onnxruntime
    1.32's machine code; when that is not finite, floor(1 / y_scale) in double)."""
    with np.errstate(all="ignore"):
        m = float(F32(math.floor(F32(1) / F32(y_scale)))) if np.isfinite(F32(1) / F32(y_scale)) else math.inf
    return m if math.isfinite(m) else math.floor(1.0 / float(F32(y_scale)))


def qlinear_softmax(x: np.ndarray, table: np.ndarray, y_scale: float, y_zero_point: int) -> np.ndarray:
    """QLinearSoftmax of uint8 rows (its last axis) with their table, as onnxruntime 1.32's CPU
    kernel (QlinearSoftmaxCPU<uint8_t>, read in its machine code: scalar, no MLAS) computes it:
    the table shifted so the row's maximum reads its last entry, the row's entries summed in
    float32 in order, then each output nearbyint(double(entry) * multiplier / double(sum)) (the
    product and quotient in double, rounded half to even) plus the zero point, saturated to
    0..255."""
    x = np.asarray(x, np.uint8)
    width = x.shape[-1]
    rows = x.reshape(-1, width).astype(np.int64)
    values = np.asarray(table, F32)[255 - rows.max(axis=1, keepdims=True) + rows]
    total = np.zeros(rows.shape[0], F32)
    for i in range(width):
        total = (total + values[:, i]).astype(F32)
    with np.errstate(all="ignore"):
        v = np.rint(values.astype(np.float64) * softmax_multiplier(y_scale) / total[:, None].astype(np.float64))
    return np.clip(v + y_zero_point, 0, 255).astype(np.uint8).reshape(x.shape)


# ---- the numpy meaning of porter.ir.integer's onnxruntime steps -------------------------------------

def run(step, weights: dict, ins: list[np.ndarray], float_op) -> np.ndarray:
    """The output of one onnxruntime step (porter.ir.integer.IntegerStep) for its operands'
    values; `float_op(kind, attrs, inputs)` computes a FLOAT step's op (porter.reference.ops).
    The steps both runtimes compute alike are porter.reference.typed's."""
    if step.op in typed.KERNELS:
        return typed.run(step, weights, ins)
    ins = [np.asarray(x).astype(typed.NUMPY_DTYPES[d], copy=False) for x, d in zip(ins, step.in_dtypes)]
    w = lambda key: weights[f"{step.name}.{key}"]  # noqa: E731
    op = step.op
    if op == IntegerOp.ORT_QUANTIZE:
        out = quantize_linear(ins[0], *step.out_quant, step.dtype)
    elif op == IntegerOp.ORT_DEQUANTIZE:  # one scale and zero point, or one per index of an axis
        out = dequantize_linear(ins[0], *step.quants[0]) if step.quants[0] is not None \
            else dequantize_linear(ins[0], w("scale"), w("zero_point"), step.axes[0])
    elif op == IntegerOp.ORT_QGEMM:
        b = ins[1] if len(ins) > 1 else w("b").T  # a constant B is stored [n, k]
        bias = w("bias") if step.has_bias else None
        out = qgemm(ins[0], step.quants[0], b, w("b_zero_point"), w("scale"), step.out_quant, step.dtype, bias,
                    step.integer_dot)
    elif op == IntegerOp.ORT_QLINEAR_BINARY:
        binary = {"add": qlinear_add, "mul": qlinear_mul}[step.kind]
        out = binary(ins[0], step.quants[0], ins[1], step.quants[1], step.out_quant, step.dtype)
    elif op == IntegerOp.ORT_QLINEAR_SOFTMAX:
        out = qlinear_softmax(ins[0], w("table"), *step.out_quant)
    elif op == IntegerOp.FLOAT:
        out = float_op(step.kind, step.attrs, ins)
    else:
        raise ValueError(f"{step.name}: {op.value} is not an onnxruntime step")
    return np.asarray(out).reshape(step.shape).astype(typed.NUMPY_DTYPES[step.dtype], copy=False)

