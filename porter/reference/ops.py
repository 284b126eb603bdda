"""The canonical op vocabulary and what each op computes, in the reference runtime's arithmetic.

porter.recover.canonical turns a TFLite or ONNX graph into these ops (lower-case names, one
vocabulary for both formats). This module is their meaning: it folds constants, evaluates mask
and position paths on probe inputs, proves recovered blocks against the graph's own ops, and runs
the elementwise and reduction steps of a program. Each op follows the kernel its runtime uses
(`Reference`): LiteRT's builtin kernels or onnxruntime's CPU kernels, each float op rounded to
float32 as theirs is.

Values are numpy arrays. Integer and boolean ops follow numpy (exact; the comparisons, integer
arithmetic, float -> integer casts and running sums are porter.reference.exact's, which typed
programs share); float ops are spelled out where the reference's rounding differs from numpy's.
"""

from __future__ import annotations

import numpy as np

from porter.ir.encoder import ActivationQuant, IntegerDot, Reference, WeightFormat
from porter.reference.litert import floats as LF
from porter.reference.ort import floats as OF
from porter.reference.ort.float16 import round_half
from porter.reference import exact, quant

F32 = np.float32


class Unsupported(Exception):
    """The op (or this use of it) has no evaluator: callers leave it unfolded or refuse it."""


def _f32(x) -> np.ndarray:
    return np.asarray(x, dtype=F32)


def _float_binary(fn, integers=None):
    """fn rounded to float32 where an operand is a float; on integer (or bool) operands
    `integers`, or fn itself."""
    def apply(attrs, a, b, ref):
        if np.asarray(a).dtype.kind != "f" and np.asarray(b).dtype.kind != "f":
            return (integers or fn)(np.asarray(a), np.asarray(b))
        with np.errstate(all="ignore"):
            return fn(_f32(a), _f32(b)).astype(F32)
    return apply


def _div(a, b):
    if a.dtype.kind == "f" or b.dtype.kind == "f":
        return a / b
    # C's integer division, toward zero, exact for every value: floor division moved up by one
    # where it rounded a negative inexact quotient down
    a, b = a.astype(np.int64), np.where(b == 0, 1, b).astype(np.int64)
    with np.errstate(over="ignore"):
        quotient = a // b
    return np.where((quotient < 0) & (quotient * b != a), quotient + 1, quotient).astype(np.result_type(a, b))


def _squared_difference(a, b):
    d = (a - b).astype(F32)
    return d * d


def _pow(attrs, a, b, ref):
    b = np.asarray(b)
    if b.size == 1 and float(b.reshape(-1)[0]) == 2.0:
        return (_f32(a) * _f32(a)).astype(F32)  # pow(x, 2) is x * x exactly, correctly rounded
    if b.size == 1 and float(b.reshape(-1)[0]) == 0.5:
        return np.sqrt(_f32(a)).astype(F32)
    if b.size == 1 and float(b.reshape(-1)[0]) == 1.0:
        return _f32(a)
    if b.size == 1 and float(b.reshape(-1)[0]) == 3.0 and ref == Reference.ONNXRUNTIME_CPU:
        return ((_f32(a) * _f32(a)).astype(F32) * _f32(a)).astype(F32)  # onnxruntime's Pow: x * x * x
    # Other exponents: libm's powf, correctly rounded in float64 here, which the reference's
    # std::pow agrees with except in rare last-bit cases.
    with np.errstate(all="ignore"):
        return np.power(_f32(a).astype(np.float64), _f32(b).astype(np.float64)).astype(F32)


def _unary_float(fn):
    def apply(attrs, x, ref):
        with np.errstate(all="ignore"):
            return np.asarray(fn(_f32(x), ref), dtype=F32)
    return apply


def _abs(attrs, x, ref):
    if np.asarray(x).dtype.kind in "iu":  # an integer ABS (relative positions) stays integer
        return np.abs(np.asarray(x))
    return _unary_float(lambda v, r: np.abs(v))(attrs, x, ref)


def _neg(attrs, x, ref):
    if np.asarray(x).dtype.kind in "iu":  # an integer NEG stays integer
        return np.negative(np.asarray(x))
    return _unary_float(lambda v, r: -v)(attrs, x, ref)


def _sign(attrs, x, ref):
    """(0 < x) - (x < 0) in x's type: TFLite's SIGN, onnxruntime's Sign (a NaN gives 0 here)."""
    x = np.asarray(x)
    if x.dtype.kind == "f" and ref == Reference.ONNXRUNTIME_CPU and np.isnan(x).any():
        raise Unsupported("Sign of a NaN under onnxruntime")
    return ((x > 0).astype(np.int8) - (x < 0).astype(np.int8)).astype(x.dtype)


def _rsqrt(x, ref):
    return (F32(1) / np.sqrt(x)).astype(F32)  # both runtimes: 1 / sqrt(x), two roundings


def _tanh(x, ref):
    return OF.tanh(x) if ref == Reference.ONNXRUNTIME_CPU else LF.tanh(x)


def _exp(x, ref):
    if ref == Reference.LITERT_BUILTIN:
        return LF.exp_op(x)  # EXP is reference_ops::Exp, libm's expf per value
    raise Unsupported("exp under onnxruntime (its kernel is not emulated yet)")


def _log(x, ref):
    if ref == Reference.LITERT_BUILTIN:
        return LF.log_op(x)  # LOG is reference_ops' std::log per value, libm's logf
    # onnxruntime: Eigen's plog in packets of four over the tensor, libm's logf on the rest
    flat = np.asarray(x, F32).reshape(-1)
    packets = flat.size // OF.PLOG_PACKET * OF.PLOG_PACKET
    return np.concatenate([OF.eigen_log(flat[:packets]), LF.log_op(flat[packets:])]).reshape(np.shape(x))


def _erf(x, ref):
    if ref == Reference.ONNXRUNTIME_CPU:
        return OF.erf(x)
    raise Unsupported("erf under LiteRT")


def _sigmoid(x, ref):
    if ref == Reference.ONNXRUNTIME_CPU:
        return OF.logistic(x)  # MLAS's logistic kernel
    return LF.logistic(x)  # over the whole tensor: its last size % 4 values take the scalar path


def _trig(name: str):
    def apply(x, ref):
        if ref == Reference.ONNXRUNTIME_CPU:
            return getattr(OF, name)(x)  # Eigen's psincos_float, as onnxruntime builds it
        raise Unsupported(f"{name} under LiteRT (its kernel is not emulated yet)")
    return apply


def _gelu(attrs, x, ref):
    """LiteRT's GELU op; onnxruntime's Gelu op, which is its Gelu / FastGelu kernel."""
    approximate = attrs.get("approximate", False) in (True, "tanh")
    if ref == Reference.LITERT_BUILTIN:
        return LF.gelu_tanh(_f32(x)) if approximate else LF.gelu_exact(_f32(x))
    return OF.fast_gelu(_f32(x)) if approximate else OF.gelu_erf(_f32(x), multiply=True)


def _axes(attrs, rank: int) -> tuple[int, ...]:
    axes = attrs.get("axes")
    if axes is None:
        return tuple(range(rank))
    return tuple(sorted(int(a) % rank for a in np.ravel(axes)))


def _reduce(kind: str):
    def apply(attrs, x, ref):
        x = np.asarray(x)
        axes = _axes(attrs, x.ndim)
        keep = bool(attrs.get("keepdims", True))
        if x.dtype.kind != "f" or kind == "prod":
            out = {"sum": np.sum, "mean": np.mean, "max": np.max, "prod": np.prod,
                   "l2": lambda v, axis, keepdims: np.sqrt(np.sum(v * v, axis=axis, keepdims=keepdims))}[kind](
                x, axis=axes, keepdims=keep)
            return out.astype(x.dtype)
        if ref == Reference.LITERT_BUILTIN and kind == "mean" and attrs.get("misaligned"):
            out = LF.reduce_mean(_f32(x), axes, attrs["misaligned"])  # a constant where the file holds it
        elif ref == Reference.LITERT_BUILTIN:  # LiteRT normalises the shape itself
            out = reduce_float(kind, _f32(x), axes, ref)
        else:
            # axes of size one change no sum's order: a reduction over (1, seq, width)'s axes 0
            # and 2 is the last-axis kernel's
            real = tuple(a for a in axes if x.shape[a] != 1) or axes
            out = reduce_float(kind, _f32(x), real, ref)
        return out.reshape([1 if a in axes else d for a, d in enumerate(x.shape)]) if keep \
            else out.reshape([d for a, d in enumerate(x.shape) if a not in axes])
    return apply


LITERT_REDUCE = {"sum": LF.reduce_sum, "mean": LF.reduce_mean, "max": LF.reduce_max}


def reduce_float(kind: str, x: np.ndarray, axes: tuple[int, ...], ref: Reference) -> np.ndarray:
    """A float reduction with keepdims, in the reference's order. LiteRT: its optimized SUM, MEAN
    and REDUCE_MAX (porter.reference.litert.floats). onnxruntime: a sum over the last axis alone follows
    Eigen's SSE packet order (ReduceSum / ReduceMean, measured identical where the rows are
    16-byte aligned); any other sum, and ReduceL2 (the square root of the sum of squares), adds
    the elements one by one in index order."""
    if ref == Reference.LITERT_BUILTIN:
        if kind not in LITERT_REDUCE:
            raise Unsupported(f"reduce_{kind} under LiteRT (TFLite has no such builtin)")
        return LITERT_REDUCE[kind](x, axes)
    if kind == "max":
        return x.max(axis=axes, keepdims=True)
    if kind == "l2":
        return np.sqrt(_sequential_sum((x * x).astype(F32), axes)).astype(F32)
    last_only = axes == (x.ndim - 1,)
    if last_only and x.shape[-1] % 4:
        raise Unsupported(f"a sum over a last axis of {x.shape[-1]} values (not a multiple of 4: "
                          "onnxruntime's rows are then unaligned and its order depends on the address)")
    if last_only:
        total = LF.eigen_sum(x)[..., None]
    else:
        total = _sequential_sum(x, axes)
    if kind == "sum":
        return total.astype(F32)
    count = int(np.prod([x.shape[a] for a in axes]))
    return (total / F32(count)).astype(F32)


def _sequential_sum(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    x = np.asarray(x, F32)
    moved = np.moveaxis(x, axes, range(x.ndim - len(axes), x.ndim))
    flat = moved.reshape(moved.shape[: x.ndim - len(axes)] + (-1,))
    total = flat[..., 0].copy()
    for i in range(1, flat.shape[-1]):
        total = (total + flat[..., i]).astype(F32)
    for a in axes:
        total = np.expand_dims(total, a)
    return total


def _softmax(attrs, x, ref):
    x = _f32(x)
    axis = int(attrs.get("axis", -1)) % x.ndim
    if axis != x.ndim - 1:
        raise Unsupported(f"softmax over axis {axis} of a rank-{x.ndim} tensor")
    if ref == Reference.LITERT_BUILTIN:
        return LF.softmax(x, float(attrs.get("beta", 1.0)))
    if attrs.get("body"):
        return softmax_function(x, attrs["ort_floats"])
    return OF.softmax(x, attrs["ort_floats"])


def softmax_function(x: np.ndarray, floats: str) -> np.ndarray:
    """Softmax over the last axis as ONNX's function body defines it, each op onnxruntime's float32
    kernel: ReduceMax, Sub, Exp (MLAS's ComputeExpF32Kernel of the `floats` family), ReduceSum
    (reduce_float's order), Div. What onnxruntime runs for a Softmax with no float16 kernel
    (porter.recover.canonical.ort_float16)."""
    x = _f32(x)
    e = OF.exp((x - x.max(axis=-1, keepdims=True)).astype(F32), floats)
    return (e / reduce_float("sum", e, (x.ndim - 1,), Reference.ONNXRUNTIME_CPU)).astype(F32)


def _l2_normalization(attrs, x, ref):
    if ref != Reference.LITERT_BUILTIN:
        raise Unsupported("l2_normalization outside LiteRT")
    return LF.l2_normalization(_f32(x))


def _matmul(attrs, a, b, ref):
    a, b = _f32(a), _f32(b)
    if attrs.get("adj_a"):
        a = np.swapaxes(a, -1, -2)
    if attrs.get("adj_b"):
        b = np.swapaxes(b, -1, -2)
    if ref == Reference.LITERT_BUILTIN:
        return LF.batch_matmul(a, b)
    return OF.sgemm(a, b, alpha=float(attrs.get("alpha", 1.0)))


def _ort_matmul(attrs, a, b, ref):
    """onnxruntime's float MatMul of a B it does not prepack (an activation, or a weight computed
    by a DequantizeLinear it does not fold): MLAS's M = 1 kernel or its SGEMM."""
    if ref != Reference.ONNXRUNTIME_CPU:
        raise Unsupported("ort_matmul outside onnxruntime")
    a, b = _f32(a), _f32(b)
    if b.ndim == 2:  # onnxruntime's MatMul folds A's batch axes into its rows: one product
        return OF.matmul(a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + (b.shape[-1],))
    return OF.matmul(a, b)


def _clip(attrs, x, *bounds, ref=None):
    """Clip: the larger of x and lo, then the smaller of that and hi (attrs "lower", "upper":
    which bounds are given, in that order)."""
    bounds = list(bounds)
    lo = bounds.pop(0) if attrs.get("lower") else None
    hi = bounds.pop(0) if attrs.get("upper") else None
    out = _f32(x)
    if lo is not None:
        out = np.where(out < _f32(lo), _f32(lo), out)
    if hi is not None:
        out = np.where(_f32(hi) < out, _f32(hi), out)
    return out.astype(F32)


def linear(attrs, x, ref):
    """x [..., in] @ W^T (+ b) in the arithmetic the canonical linear op records."""
    x = _f32(x)
    w, bias, scale = attrs["weight"], attrs.get("bias"), attrs.get("scale")
    flat = x.reshape(-1, x.shape[-1])
    aq = attrs["activation_quant"]
    if aq == ActivationQuant.FLOAT and attrs["weights"] != WeightFormat.FLOAT32:
        w = quant.weight_only_float(w, scale)  # weight-only int8 / int4: the float32 weights, exactly
    if aq == ActivationQuant.ORT_DYNAMIC_UINT8:
        y = quant.ort_dynamic_linear(flat, w, scale, bias, IntegerDot(attrs["integer_dot"]).value)
    elif attrs["weights"] == WeightFormat.INT4_PER_CHANNEL and aq != ActivationQuant.FLOAT:
        y = quant.int4_fully_connected(flat, w, scale, bias)
    elif aq != ActivationQuant.FLOAT:
        y = quant.hybrid_fully_connected(flat, w, scale, bias, aq == ActivationQuant.HYBRID_ASYMMETRIC)
    elif ref == Reference.ONNXRUNTIME_CPU:
        y = OF.linear(flat, w, bias) if attrs.get("bias_in_gemm", True) else OF.matmul_add(flat, w, bias)
    else:
        y = LF.fully_connected(flat, w, bias, attrs.get("eigen_l1d") or LF.EIGEN_L1_BYTES)
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def _layer_norm(attrs, x, gamma, beta, ref):
    x = _f32(x)
    if ref != Reference.ONNXRUNTIME_CPU:
        raise Unsupported("layer_norm op outside onnxruntime")
    flat = x.reshape(-1, x.shape[-1])
    out = OF.layer_norm(flat, _f32(gamma), _f32(beta), float(attrs.get("epsilon", 1e-5)))
    return out.reshape(x.shape)


def view(attrs, x, ref=None):
    return np.asarray(x).reshape(attrs["shape"])


def _permute(attrs, x, ref):
    return np.transpose(np.asarray(x), attrs["perm"])


def _expand(attrs, x, ref):
    return np.broadcast_to(np.asarray(x), np.broadcast_shapes(np.shape(x), tuple(attrs["shape"]))).copy()


def _gather(attrs, table, indices, ref):
    table, indices = np.asarray(table), np.asarray(indices)
    axis = int(attrs.get("axis", 0))
    if np.any(indices < -table.shape[axis]) or np.any(indices >= table.shape[axis]):
        raise Unsupported("gather index out of range")
    return np.take(table, indices.astype(np.int64), axis=axis)


def _gather_nd(attrs, data, indices, ref):
    data, indices = np.asarray(data), np.asarray(indices).astype(np.int64)
    k = indices.shape[-1]
    picked = data[tuple(indices.reshape(-1, k).T)]
    return picked.reshape(indices.shape[:-1] + data.shape[k:])


def _embedding_lookup(attrs, ids, table, ref):
    """TFLite's EMBEDDING_LOOKUP of an int8 table with one scale per row, dequantised."""
    table = np.asarray(table)
    ids = np.asarray(ids).astype(np.int64)
    rows = table[ids]
    scale = attrs.get("scale")
    if scale is None:
        return rows.astype(F32)
    return (rows.astype(F32) * _f32(scale)[ids][..., None]).astype(F32)


def _dequantize(attrs, x, ref):
    """scale * (q - zero_point), one scale per index of `axis` (None: one for the tensor).

    LiteRT (reference and optimized Dequantize / PerChannelDequantize) forms the product in
    double or float, onnxruntime's DequantizeLinear in float: (q - zp) is an integer of at most
    17 bits and the scale a float32, so the product is exact before its one rounding to float32
    in every case, and this float32 product rounds identically."""
    x = np.asarray(x)
    scale, zero_point = _f32(attrs["scale"]), np.asarray(attrs.get("zero_point", 0))
    axis = attrs.get("axis")
    if axis is not None and scale.size > 1:
        along = [1] * x.ndim
        along[axis] = scale.size
        scale, zero_point = scale.reshape(along), zero_point.reshape(along)
    centred = (x.astype(np.int32) - zero_point.astype(np.int32)).astype(F32)
    return (centred * scale).astype(F32)


_CAST = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "int32": np.int32, "int64": np.int64,
         "bool": np.bool_, "int8": np.int8, "uint8": np.uint8}


def _cast(attrs, x, ref):
    to = attrs["to"]
    if to not in _CAST:
        raise Unsupported(f"cast to {to}")
    x = np.asarray(x)
    if x.dtype.kind == "f" and to in ("int32", "int64"):
        return exact.float_to_int(x, _CAST[to])
    return x.astype(_CAST[to])


def _slice(attrs, x, ref):
    x = np.asarray(x)
    index = [slice(None)] * x.ndim
    for axis, start, stop, step in attrs["slices"]:
        index[axis] = slice(start, stop, step)
    return x[tuple(index)]


def _concat(attrs, *xs, ref):
    return np.concatenate([np.asarray(x) for x in xs], axis=int(attrs["axis"]))


def _cumsum(attrs, x, ref):
    x = np.asarray(x)
    return exact.cumsum(x, int(attrs["axis"]) % x.ndim, bool(attrs.get("exclusive")), bool(attrs.get("reverse")))


def _where(attrs, cond, a, b, ref):
    return np.where(np.asarray(cond).astype(bool), a, b)


def _fill(attrs, ref):
    return np.full(attrs["shape"], attrs["value"], dtype=np.asarray(attrs["value"]).dtype)


def _trilu(attrs, x, ref):
    """The upper (or lower) triangle of the last two axes from diagonal k on; the rest zeros."""
    x = np.asarray(x)
    return np.triu(x, attrs.get("k", 0)) if attrs.get("upper", True) else np.tril(x, attrs.get("k", 0))


def _tile(attrs, x, ref):
    return np.tile(np.asarray(x), attrs["repeats"])


def _range(attrs, start, limit, delta, ref):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    return np.arange(start, limit, delta, dtype=np.result_type(start, limit, delta))


BINARY = {
    # add, sub, mul, maximum and minimum: integers wrap in their promoted type (exact.arithmetic)
    **{kind: _float_binary(fn, lambda a, b, kind=kind: exact.arithmetic(kind, a, b, np.result_type(a, b)))
       for kind, fn in exact.ARITHMETIC.items()},
    "div": _float_binary(_div),
    "squared_difference": _float_binary(_squared_difference),
}
COMPARISONS = {**exact.COMPARE, "logical_and": np.logical_and, "logical_or": np.logical_or}
UNARY = {
    "neg": _neg, "abs": _abs,
    "sqrt": _unary_float(lambda x, ref: np.sqrt(x)), "rsqrt": _unary_float(_rsqrt),
    "tanh": _unary_float(_tanh), "exp": _unary_float(_exp), "log": _unary_float(_log),
    # exact in float32: both runtimes round to an integer and nothing else
    "ceil": _unary_float(lambda x, ref: np.ceil(x)), "floor": _unary_float(lambda x, ref: np.floor(x)),
    "sign": _sign, "erf": _unary_float(_erf),
    "relu": _unary_float(lambda x, ref: np.maximum(x, F32(0))), "sigmoid": _unary_float(_sigmoid),
    "reciprocal": _unary_float(lambda x, ref: F32(1) / x),
    "sin": _unary_float(_trig("sin")), "cos": _unary_float(_trig("cos")),
    # float32 -> float16 -> float32: onnxruntime's two Casts where a float16 graph rounds a value
    "round_half": _unary_float(lambda x, ref: round_half(x)),
}

EVALUATORS = {
    **BINARY,
    **{name: (lambda fn: lambda attrs, a, b, ref: fn(np.asarray(a), np.asarray(b)))(fn)
       for name, fn in COMPARISONS.items()},
    **UNARY,
    "logical_not": lambda attrs, x, ref: np.logical_not(np.asarray(x)),
    "isnan": lambda attrs, x, ref: np.isnan(np.asarray(x)),
    "argmax": lambda attrs, x, ref: np.argmax(np.asarray(x), axis=int(attrs["axis"]),
                                              keepdims=bool(attrs.get("keepdims", True))),
    "gather_elements": lambda attrs, x, i, ref: np.take_along_axis(
        np.asarray(x), np.asarray(i).astype(np.int64), axis=int(attrs.get("axis", 0))),
    "pow": _pow,
    "gelu": _gelu,
    "reduce_sum": _reduce("sum"), "reduce_mean": _reduce("mean"), "reduce_max": _reduce("max"),
    "reduce_prod": _reduce("prod"), "reduce_l2": _reduce("l2"),
    "stack": lambda attrs, *xs, ref: np.stack([np.asarray(x) for x in xs], axis=int(attrs["axis"])),
    "softmax": _softmax,
    "l2_normalization": _l2_normalization,
    "matmul": _matmul, "ort_matmul": _ort_matmul,
    "linear": linear,
    "layer_norm": _layer_norm,
    "view": view, "permute": _permute, "expand": _expand,
    "gather": _gather, "gather_nd": _gather_nd, "embedding_lookup": _embedding_lookup,
    "dequantize": _dequantize, "cast": _cast, "slice": _slice, "concat": _concat,
    "cumsum": _cumsum, "where": _where, "fill": _fill, "range": _range,
    "trilu": _trilu, "tile": _tile,
    "clip": lambda attrs, *xs, ref: _clip(attrs, *xs, ref=ref),
}


def evaluate(kind: str, attrs: dict, inputs: list, ref: Reference) -> np.ndarray:
    """The output of one canonical op (all canonical ops have one output) for numpy inputs."""
    fn = EVALUATORS.get(kind)
    if fn is None:
        raise Unsupported(f"no evaluator for {kind}")
    try:
        if kind in ("concat", "stack", "clip"):
            return np.asarray(fn(attrs, *inputs, ref=ref))
        if kind == "fill":
            return np.asarray(fn(attrs, ref))
        return np.asarray(fn(attrs, *inputs, ref))
    except (ValueError, TypeError, IndexError, KeyError, OverflowError) as e:
        raise Unsupported(f"{kind}: {e}") from None
