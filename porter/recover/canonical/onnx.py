"""ONNX's ops (and the com.microsoft ones porter knows) in the canonical vocabulary: one small
function per op type, `ONNX` the table of them; an op with no translation stays as
`onnx.<Type>` for recovery to refuse by name."""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Op
from porter.ir.encoder import ActivationQuant, IntegerDot, WeightFormat
from porter.recover.canonical import ort_contrib
from porter.recover.canonical.builder import Builder, const_ints, fail
from porter.recover.schemes import weight_scheme


BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "maximum",
                "Min": "minimum", "Equal": "equal", "Greater": "greater",
                "GreaterOrEqual": "greater_equal", "Less": "less", "LessOrEqual": "less_equal",
                "And": "logical_and", "Or": "logical_or"}
UNARY = {"Sqrt": "sqrt", "Abs": "abs", "Neg": "neg", "Exp": "exp", "Tanh": "tanh",
               "Erf": "erf", "Relu": "relu", "Sigmoid": "sigmoid", "Not": "logical_not",
               "IsNaN": "isnan", "Reciprocal": "reciprocal", "Sin": "sin", "Cos": "cos",
               "Log": "log", "Ceil": "ceil", "Floor": "floor", "Sign": "sign"}
_ONNX_REDUCE = {"ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
                "ReduceL2": "reduce_l2"}
# ONNX TensorProto element types
_ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 10: "float16",
               11: "float64"}


def _onnx_reduce(b: Builder, op: Op) -> None:
    axes = op.options.get("axes")
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        axes = const_ints(b, op, op.inputs[1], "the reduction axes")
    if axes is None and op.options.get("noop_with_empty_axes"):
        b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=tuple(b.tensor(op.inputs[0]).shape))
        return
    b.emit(_ONNX_REDUCE[op.type], op.inputs[:1], op.outputs, [op.index],
           axes=None if axes is None else tuple(int(a) for a in axes),
           keepdims=bool(op.options.get("keepdims", 1)))


def _onnx_matmul(b: Builder, op: Op) -> None:
    w = b.const(op.inputs[1])
    if w is not None and b.const(op.inputs[0]) is None and np.asarray(w).ndim == 2:
        _onnx_linear(b, op, op.inputs[0], op.inputs[1], None, transposed=False)
    else:
        b.emit("matmul", op.inputs[:2], op.outputs, [op.index])


def _onnx_linear(b: Builder, op: Op, x: int, w: int, bias, transposed: bool, origin=None) -> None:
    w_t = b.tensor(w)
    scheme = weight_scheme(b.g, w_t, 0 if transposed else 1, op.describe())
    if scheme != WeightFormat.FLOAT32:
        raise fail(b.g, op, f"weight {w_t.describe()} is quantised; an ONNX MatMul takes float weights "
                             "(quantize_dynamic graphs use MatMulInteger)")
    weight = np.asarray(w_t.data, np.float32)
    b.emit("linear", [x], op.outputs, origin or [op.index],
           weight=np.ascontiguousarray(weight if transposed else weight.T), weights=scheme,
           activation_quant=ActivationQuant.FLOAT, scale=None,
           bias=None if bias is None else np.asarray(bias, np.float32).reshape(-1),
           integer_dot=IntegerDot.EXACT, weight_tensor=w)


def _onnx_gemm(b: Builder, op: Op) -> None:
    o = op.options
    if o.get("transA", 0) or float(o.get("alpha", 1.0)) != 1.0 or float(o.get("beta", 1.0)) != 1.0:
        raise fail(b.g, op, "Gemm with transA, alpha or beta other than 1 is not supported")
    if b.const(op.inputs[1]) is None:
        raise fail(b.g, op, "Gemm with a non-constant B is not supported")
    bias = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    _onnx_linear(b, op, op.inputs[0], op.inputs[1], bias, transposed=bool(o.get("transB", 0)))


def _onnx_view(b: Builder, op: Op) -> None:
    b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=None)  # shape inferred below


def _onnx_transpose(b: Builder, op: Op) -> None:
    perm = op.options.get("perm")
    rank = len(b.tensor(op.inputs[0]).shape)
    b.emit("permute", op.inputs[:1], op.outputs, [op.index],
           perm=tuple(int(p) for p in perm) if perm is not None else tuple(reversed(range(rank))))


def _onnx_cast(b: Builder, op: Op) -> None:
    to = _ONNX_TYPES.get(int(op.options.get("to", 0)))
    if to is None:
        raise fail(b.g, op, f"Cast to ONNX type {op.options.get('to')} is not supported")
    b.emit("cast", op.inputs[:1], op.outputs, [op.index], to=to)


def _onnx_slice(b: Builder, op: Op) -> None:
    starts, ends = (const_ints(b, op, t, w) for t, w in zip(op.inputs[1:3], ("starts", "ends")))
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = const_ints(b, op, op.inputs[3], "axes") if len(op.inputs) > 3 and op.inputs[3] >= 0 \
        else list(range(len(starts)))
    steps = const_ints(b, op, op.inputs[4], "steps") if len(op.inputs) > 4 and op.inputs[4] >= 0 \
        else [1] * len(starts)
    big = 1 << 62  # ONNX spells "to the end" as INT64_MAX; numpy wants None
    slices = tuple((a % rank, s, None if abs(e) >= big else e, st)
                   for a, s, e, st in zip(axes, starts, ends, steps))
    b.emit("slice", op.inputs[:1], op.outputs, [op.index], slices=slices)


def _onnx_gather(b: Builder, op: Op) -> None:
    b.emit("gather", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_gather_nd(b: Builder, op: Op) -> None:
    if op.options.get("batch_dims", 0):
        raise fail(b.g, op, "GatherND with batch_dims is not supported")
    b.emit("gather_nd", op.inputs[:2], op.outputs, [op.index])


def _onnx_dequantize(b: Builder, op: Op) -> None:
    scale = b.const(op.inputs[1])
    zp = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else np.zeros(1, np.int32)
    if scale is None or zp is None:
        raise fail(b.g, op, "DequantizeLinear with a non-constant scale or zero point")
    if op.options.get("block_size", 0):
        raise fail(b.g, op, "blocked DequantizeLinear (block_size) is not supported")
    axis = None
    if np.asarray(scale).size != 1:  # per axis: one scale (and zero point) per index of `axis`
        axis = int(op.options.get("axis", 1)) % max(len(b.tensor(op.inputs[0]).shape), 1)
    b.emit("dequantize", op.inputs[:1], op.outputs, [op.index], scale=np.asarray(scale, np.float32).ravel(),
           zero_point=np.asarray(zp).ravel(), axis=axis)


def _onnx_where(b: Builder, op: Op) -> None:
    b.emit("where", op.inputs[:3], op.outputs, [op.index])


def _onnx_concat(b: Builder, op: Op) -> None:
    b.emit("concat", op.inputs, op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_layer_norm(b: Builder, op: Op) -> None:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        raise fail(b.g, op, "LayerNormalization without a bias input is not supported")
    b.emit("layer_norm", op.inputs[:3], op.outputs[:1], [op.index],
           epsilon=float(np.float32(op.options.get("epsilon", 1e-5))), axis=int(op.options.get("axis", -1)))


def _onnx_gelu(b: Builder, op: Op) -> None:
    b.emit("gelu", op.inputs[:1], op.outputs, [op.index], approximate=op.options.get("approximate", "none"))


def _ort_biased_gelu(approximate: str):
    """com.microsoft FastGelu (bias optional) and BiasGelu (bias required: the frontend's rule):
    onnxruntime's kernels add the bias first (input + bias, one float add, the bias repeating
    along the last axis), then run the FastGelu / Gelu arithmetic on the sum, which is the
    canonical Add then the Gelu op."""
    def translate(b: Builder, op: Op) -> None:
        x = op.inputs[0]
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            like = b.tensor(op.outputs[0])
            biased = b.add_tensor(like, f"{like.name}/biased", like.shape, like.dtype)
            b.emit("add", op.inputs[:2], [biased], [op.index])
            x = biased
        b.emit("gelu", [x], op.outputs[:1], [op.index], approximate=approximate)
    return translate


def _onnx_softmax(b: Builder, op: Op) -> None:
    b.emit("softmax", op.inputs[:1], op.outputs, [op.index], axis=int(op.options.get("axis", -1)), beta=1.0,
           ort_floats=b.ort_cpu.floats, body=bool(op.options.get("body", False)))


def _onnx_shape(b: Builder, op: Op) -> None:
    shape = b.tensor(op.inputs[0]).shape
    if any(d < 0 for d in shape):
        raise fail(b.g, op, f"Shape of {b.tensor(op.inputs[0]).describe()}, which has a dynamic dimension")
    # opset 15's start / end pick a range of the dimensions (Python slice semantics, clamped)
    start, end = int(op.options.get("start", 0)), op.options.get("end")
    b.set_const(op.outputs[0], np.array(shape[start:None if end is None else int(end)], np.int64))


def _onnx_constant_of_shape(b: Builder, op: Op) -> None:
    shape = const_ints(b, op, op.inputs[0], "the shape")
    value = op.options.get("value", np.zeros(1, np.float32))
    b.set_const(op.outputs[0], np.full(shape, np.asarray(value).reshape(-1)[0], dtype=np.asarray(value).dtype))


def _onnx_expand(b: Builder, op: Op) -> None:
    b.emit("expand", op.inputs[:1], op.outputs, [op.index],
           shape=tuple(const_ints(b, op, op.inputs[1], "the shape")))


def _onnx_cumsum(b: Builder, op: Op) -> None:
    b.emit("cumsum", op.inputs[:1], op.outputs, [op.index],
           axis=const_ints(b, op, op.inputs[1], "the axis")[0],
           exclusive=bool(op.options.get("exclusive", 0)), reverse=bool(op.options.get("reverse", 0)))


def _onnx_range(b: Builder, op: Op) -> None:
    b.emit("range", op.inputs[:3], op.outputs, [op.index])


def _onnx_pow(b: Builder, op: Op) -> None:
    """onnxruntime's Pow multiplies for the exponents 2 and 3 ((x * x) * x; measured bit for bit
    on 2 M inputs) and calls std::pow otherwise, which porter does not reproduce. The products
    keep `spelled="pow"`: onnxruntime's LayerNormFusion only fuses a variance written with Pow."""
    x, e = op.inputs[:2]
    exponent = b.const(e)
    if b.const(x) is not None or exponent is None or exponent.size != 1 \
            or float(exponent.reshape(-1)[0]) not in (2.0, 3.0):
        b.emit("pow", [x, e], op.outputs, [op.index])
        return
    if float(exponent.reshape(-1)[0]) == 2.0:
        b.emit("mul", [x, x], op.outputs, [op.index], spelled="pow")
        return
    like = b.tensor(op.outputs[0])
    square = b.add_tensor(like, f"{like.name}/square", like.shape, like.dtype)
    b.emit("mul", [x, x], [square], [op.index], spelled="pow")
    b.emit("mul", [square, x], op.outputs, [op.index], spelled="pow")


def _onnx_clip(b: Builder, op: Op) -> None:
    """Clip(x, lo, hi) = min(max(x, lo), hi), each bound optional."""
    lo = op.inputs[1] if len(op.inputs) > 1 and op.inputs[1] >= 0 else -1
    hi = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] >= 0 else -1
    if (lo >= 0 and b.const(lo) is None) or (hi >= 0 and b.const(hi) is None):
        raise fail(b.g, op, "Clip with non-constant bounds is not supported")
    x, out = op.inputs[0], b.tensor(op.outputs[0])
    if lo >= 0 and hi >= 0:
        mid = b.add_tensor(out, f"{out.name}/clipped_below", out.shape, out.dtype)
        b.emit("maximum", [x, lo], [mid], [op.index])
        b.emit("minimum", [mid, hi], op.outputs, [op.index])
    elif lo >= 0:
        b.emit("maximum", [x, lo], op.outputs, [op.index])
    elif hi >= 0:
        b.emit("minimum", [x, hi], op.outputs, [op.index])
    else:
        b.emit("view", [x], op.outputs, [op.index], shape=tuple(b.tensor(x).shape))


def _onnx_gather_elements(b: Builder, op: Op) -> None:
    b.emit("gather_elements", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_arg_max(b: Builder, op: Op) -> None:
    if op.options.get("select_last_index", 0):
        raise fail(b.g, op, "ArgMax with select_last_index is not supported")
    b.emit("argmax", op.inputs[:1], op.outputs, [op.index], axis=int(op.options.get("axis", 0)),
           keepdims=bool(op.options.get("keepdims", 1)))


def _onnx_identity(b: Builder, op: Op) -> None:
    b.emit("view", op.inputs[:1], op.outputs[:1], [op.index], shape=tuple(b.tensor(op.inputs[0]).shape))


def _onnx_split(b: Builder, op: Op) -> None:
    axis = int(op.options.get("axis", 0))
    shape = b.tensor(op.inputs[0]).shape
    rank = len(shape)
    axis %= rank
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        sizes = const_ints(b, op, op.inputs[1], "the split sizes")
    elif op.options.get("split") is not None:
        sizes = [int(s) for s in op.options["split"]]
    else:
        n = len(op.outputs)
        if shape[axis] < 0 or shape[axis] % n:
            raise fail(b.g, op, f"cannot split axis {axis} of {list(shape)} into {n} equal parts")
        sizes = [shape[axis] // n] * n
    start = 0
    for out, size in zip(op.outputs, sizes):
        b.emit("slice", op.inputs[:1], [out], [op.index], slices=((axis, start, start + size, 1),))
        start += size


def _onnx_trilu(b: Builder, op: Op) -> None:
    k = const_ints(b, op, op.inputs[1], "k")[0] if len(op.inputs) > 1 and op.inputs[1] >= 0 else 0
    b.emit("trilu", op.inputs[:1], op.outputs, [op.index], upper=bool(op.options.get("upper", 1)), k=k)


def _onnx_tile(b: Builder, op: Op) -> None:
    b.emit("tile", op.inputs[:1], op.outputs, [op.index],
           repeats=tuple(const_ints(b, op, op.inputs[1], "the repeats")))


def _onnx_dynamic_quantize(b: Builder, op: Op) -> None:
    b.emit("dynamic_quantize", op.inputs[:1], op.outputs, [op.index])


def _onnx_matmul_integer(b: Builder, op: Op) -> None:
    b.emit("matmul_integer", op.inputs, op.outputs, [op.index])


def translate_onnx(b: Builder, op: Op) -> None:
    contrib = op.type.startswith("com.microsoft.")
    kind = op.type.split(".")[-1] if contrib else op.type
    if contrib and kind in ort_contrib.CONTRIB:
        ort_contrib.CONTRIB[kind](b, op)
    elif contrib and kind not in ONNX:
        ort_contrib.refuse(b, op)
    elif kind in BINARY:
        b.emit(BINARY[kind], op.inputs[:2], op.outputs, [op.index])
    elif kind in UNARY:
        b.emit(UNARY[kind], op.inputs[:1], op.outputs, [op.index])
    elif kind in _ONNX_REDUCE:
        _onnx_reduce(b, op)
    elif kind in ONNX:
        ONNX[kind](b, op)
    else:
        b.emit(f"onnx.{op.type}", op.inputs, op.outputs, [op.index], **op.options)


ONNX = {
    "MatMul": _onnx_matmul, "Gemm": _onnx_gemm, "Reshape": _onnx_view, "Squeeze": _onnx_view,
    "Unsqueeze": _onnx_view, "Flatten": _onnx_view, "Transpose": _onnx_transpose,
    "Cast": _onnx_cast, "Slice": _onnx_slice, "Gather": _onnx_gather, "GatherND": _onnx_gather_nd,
    "DequantizeLinear": _onnx_dequantize, "Where": _onnx_where, "Concat": _onnx_concat,
    "LayerNormalization": _onnx_layer_norm, "Gelu": _onnx_gelu, "Softmax": _onnx_softmax,
    "FastGelu": _ort_biased_gelu("tanh"), "BiasGelu": _ort_biased_gelu("none"),
    "Shape": _onnx_shape, "ConstantOfShape": _onnx_constant_of_shape, "Expand": _onnx_expand,
    "CumSum": _onnx_cumsum, "Range": _onnx_range, "Identity": _onnx_identity,
    "Dropout": _onnx_identity, "Split": _onnx_split,
    "DynamicQuantizeLinear": _onnx_dynamic_quantize, "MatMulInteger": _onnx_matmul_integer,
    "Pow": _onnx_pow, "Clip": _onnx_clip, "GatherElements": _onnx_gather_elements, "ArgMax": _onnx_arg_max,
    "Trilu": _onnx_trilu, "Tile": _onnx_tile,
}


