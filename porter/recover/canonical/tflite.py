"""TFLite's ops in the canonical vocabulary (porter.reference.ops): one small function per op
type, `TFLITE` the table of them; an op with no translation stays as `tflite.<TYPE>` for recovery
to refuse by name."""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Op
from porter.ir.encoder import ActivationQuant, IntegerDot, WeightFormat
from porter.recover.canonical.builder import Builder, const_ints, fail
from porter.recover.schemes import weight_scheme


BINARY = {"ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "MAXIMUM": "maximum",
                  "MINIMUM": "minimum", "SQUARED_DIFFERENCE": "squared_difference", "POW": "pow",
                  "EQUAL": "equal", "NOT_EQUAL": "not_equal", "GREATER": "greater",
                  "GREATER_EQUAL": "greater_equal", "LESS": "less", "LESS_EQUAL": "less_equal",
                  "LOGICAL_AND": "logical_and", "LOGICAL_OR": "logical_or", "FLOOR_DIV": "div"}
UNARY = {"RSQRT": "rsqrt", "SQRT": "sqrt", "ABS": "abs", "NEG": "neg", "EXP": "exp",
                 "TANH": "tanh", "LOG": "log", "CEIL": "ceil", "FLOOR": "floor", "SIGN": "sign", "LOGISTIC": "sigmoid", "RELU": "relu", "LOGICAL_NOT": "logical_not"}
_TFLITE_REDUCE = {"MEAN": "reduce_mean", "SUM": "reduce_sum", "REDUCE_MAX": "reduce_max",
                  "REDUCE_PROD": "reduce_prod"}
_FUSED = {"NONE": None, "RELU": "relu"}


def _tflite_fused(b: Builder, op: Op, out_kind: str, inputs, attrs=None) -> None:
    """An op with TFLite's fused activation: the op, then the activation as its own op."""
    fused = op.options.get("fused_activation_function", "NONE")
    if fused not in _FUSED:
        raise fail(b.g, op, f"fused activation {fused} is not supported")
    if _FUSED[fused] is None:
        b.emit(out_kind, inputs, op.outputs, [op.index], **(attrs or {}))
        return
    out = b.tensor(op.outputs[0])
    mid = b.add_tensor(out, f"{out.name}/pre_activation", out.shape, out.dtype)
    b.emit(out_kind, inputs, [mid], [op.index], **(attrs or {}))
    b.emit(_FUSED[fused], [mid], op.outputs, [op.index])


def _tflite_fully_connected(b: Builder, op: Op) -> None:
    w_t = b.tensor(op.inputs[1])
    if len(w_t.shape) != 2:
        raise fail(b.g, op, f"weight {w_t.describe()} is not 2-D")
    scheme = weight_scheme(b.g, w_t, 0, op.describe())
    bias = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and bias is None:
        raise fail(b.g, op, "its bias is not a constant")
    if scheme == WeightFormat.FLOAT32:
        aq = ActivationQuant.FLOAT
    elif scheme == WeightFormat.INT4_PER_CHANNEL and op.options.get("asymmetric_quantize_inputs", False):
        raise fail(b.g, op, "int4 weights with asymmetric input quantisation are not reproduced")
    elif op.options.get("asymmetric_quantize_inputs", False):
        aq = ActivationQuant.HYBRID_ASYMMETRIC
    else:
        aq = ActivationQuant.HYBRID_SYMMETRIC
    attrs = dict(weight=np.ascontiguousarray(w_t.data), weights=scheme, activation_quant=aq,
                 scale=None if scheme == WeightFormat.FLOAT32 else np.asarray(w_t.quant.scale, np.float32),
                 bias=None if bias is None else np.asarray(bias, np.float32).reshape(-1),
                 integer_dot=IntegerDot.EXACT, weight_tensor=w_t.index)
    _tflite_fused(b, op, "linear", [op.inputs[0]], attrs)


def _tflite_batch_matmul(b: Builder, op: Op) -> None:
    # a constant operand (DeBERTa's projected relative embeddings) stays a product, as ONNX's MatMul
    # does: attention names it where it feeds the scores, the encoder where nothing takes it
    attrs = {"adj_a": bool(op.options.get("adj_x")), "adj_b": bool(op.options.get("adj_y"))}
    b.emit("matmul", op.inputs[:2], op.outputs, [op.index], **attrs)


def _tflite_view(b: Builder, op: Op) -> None:
    """RESHAPE / SQUEEZE / EXPAND_DIMS: the output's shape, its dynamic dimension (a batch the
    exporter left open) worked out from the input's size once the inputs are static."""
    b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=None)


def _tflite_transpose(b: Builder, op: Op) -> None:
    perm = const_ints(b, op, op.inputs[1], "the permutation")
    b.emit("permute", op.inputs[:1], op.outputs, [op.index], perm=tuple(perm))


def _tflite_reduce(b: Builder, op: Op) -> None:
    axes = const_ints(b, op, op.inputs[1], "the reduction axes")
    b.emit(_TFLITE_REDUCE[op.type], op.inputs[:1], op.outputs, [op.index], axes=tuple(axes),
           keepdims=bool(op.options.get("keep_dims", False)))


def _tflite_embedding_lookup(b: Builder, op: Op) -> None:
    table = b.tensor(op.inputs[1])
    scale = None
    if table.dtype in ("int8", "int4"):
        scheme = weight_scheme(b.g, table, 0, f"word embedding ({op.describe()})")
        scale = np.broadcast_to(np.asarray(table.quant.scale, np.float32), (table.shape[0],)).copy() \
            if scheme != WeightFormat.FLOAT32 else None
    b.emit("embedding_lookup", [op.inputs[0], op.inputs[1]], op.outputs, [op.index], scale=scale)


def _tflite_gather(b: Builder, op: Op) -> None:
    if op.options.get("batch_dims", 0):
        raise fail(b.g, op, "GATHER with batch_dims is not supported")
    b.emit("gather", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _tflite_dequantize(b: Builder, op: Op) -> None:
    """DEQUANTIZE: float16 -> float32 is LiteRT's exact half-to-float widening (a cast); an
    integer tensor is scale * (q - zero_point) with its own quantisation (one scale, or one per
    index of its quantized_dimension), or that of the table a GATHER read it from (TensorFlow's
    int8 embedding tables). An int4 one is the same on its values: LiteRT unpacks it to one int8
    per value first (UnpackPackedIntToInt8, as the reader did) and runs the int8 kernel. Of a
    constant, either folds into a float32 constant (settle)."""
    t = b.tensor(op.inputs[0])
    if t.dtype == "float16":
        b.emit("cast", op.inputs[:1], op.outputs, [op.index], to="float32")
        return
    if t.dtype not in ("int4", "int8", "uint8", "int16"):
        raise fail(b.g, op, f"DEQUANTIZE of {t.describe()}: LiteRT dequantizes float16, int4, int8, uint8 "
                            f"and int16 tensors, not {t.dtype}")
    producer = b.g.producer(op.inputs[0])
    source = b.tensor(producer.inputs[0]) if producer is not None and producer.type == "GATHER" else t
    q = source.quant if source.quant is not None else t.quant
    if q is None:
        raise fail(b.g, op, f"{t.dtype} tensor {t.describe()} has no quantisation parameters to dequantize with")
    b.emit("dequantize", op.inputs[:1], op.outputs, [op.index], scale=np.asarray(q.scale, np.float32),
           zero_point=np.asarray(q.zero_point), axis=q.axis if q is t.quant else None)


def _tflite_cast(b: Builder, op: Op) -> None:
    b.emit("cast", op.inputs[:1], op.outputs, [op.index], to=b.tensor(op.outputs[0]).dtype)


def _tflite_strided_slice(b: Builder, op: Op) -> None:
    """STRIDED_SLICE as a slice, then (for shrink-axis bits: x[:, 0]) a view dropping those axes."""
    x = b.tensor(op.inputs[0])
    begin, end, strides = (const_ints(b, op, t, what) for t, what in
                           zip(op.inputs[1:4], ("begin", "end", "strides")))
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask") or o.get("offset"):
        raise fail(b.g, op, "STRIDED_SLICE with ellipsis, new-axis or offset masks is not supported")
    shrink = o.get("shrink_axis_mask", 0)
    slices, kept_shape = [], []
    for axis, (start, stop, step) in enumerate(zip(begin, end, strides)):
        if (shrink >> axis) & 1:
            start = start % x.shape[axis] if x.shape[axis] > 0 else start
            slices.append((axis, start, start + 1, 1))
            kept_shape.append(1)
            continue
        start = None if (o.get("begin_mask", 0) >> axis) & 1 else start
        stop = None if (o.get("end_mask", 0) >> axis) & 1 else stop
        slices.append((axis, start, stop, step))
        kept_shape.append(len(range(*slice(start, stop, step).indices(x.shape[axis]))) if x.shape[axis] >= 0 else -1)
    if not shrink:
        b.emit("slice", op.inputs[:1], op.outputs, [op.index], slices=tuple(slices))
        return
    out = b.tensor(op.outputs[0])
    mid = b.add_tensor(out, f"{out.name}/unshrunk", kept_shape, out.dtype)
    b.emit("slice", op.inputs[:1], [mid], [op.index], slices=tuple(slices))
    b.emit("view", [mid], op.outputs, [op.index],
           shape=tuple(d for axis, d in enumerate(kept_shape) if not (shrink >> axis) & 1))


def _tflite_slice(b: Builder, op: Op) -> None:
    begin = const_ints(b, op, op.inputs[1], "begin")
    size = const_ints(b, op, op.inputs[2], "size")
    shape = b.tensor(op.inputs[0]).shape
    slices = tuple((a, s, None if n == -1 else s + n, 1) for a, (s, n) in enumerate(zip(begin, size)))
    del shape
    b.emit("slice", op.inputs[:1], op.outputs, [op.index], slices=slices)


def _tflite_select(b: Builder, op: Op) -> None:
    b.emit("where", op.inputs[:3], op.outputs, [op.index])


def _tflite_concat(b: Builder, op: Op) -> None:
    _tflite_fused(b, op, "concat", op.inputs, {"axis": int(op.options.get("axis", 0))})


def _tflite_cumsum(b: Builder, op: Op) -> None:
    axis = const_ints(b, op, op.inputs[1], "the axis")[0]
    b.emit("cumsum", op.inputs[:1], op.outputs, [op.index], axis=axis,
           exclusive=bool(op.options.get("exclusive")), reverse=bool(op.options.get("reverse")))


def _tflite_gelu(b: Builder, op: Op) -> None:
    b.emit("gelu", op.inputs[:1], op.outputs, [op.index], approximate=bool(op.options.get("approximate")))


def _tflite_softmax(b: Builder, op: Op) -> None:
    b.emit("softmax", op.inputs[:1], op.outputs, [op.index], axis=-1, beta=float(op.options.get("beta", 1.0)))


def _tflite_broadcast_to(b: Builder, op: Op) -> None:
    b.emit("expand", op.inputs[:1], op.outputs, [op.index],
           shape=tuple(const_ints(b, op, op.inputs[1], "the shape")))


def _tflite_gather_nd(b: Builder, op: Op) -> None:
    b.emit("gather_nd", op.inputs[:2], op.outputs, [op.index])


def _tflite_shape(b: Builder, op: Op) -> None:
    shape = b.tensor(op.inputs[0]).shape
    if any(d < 0 for d in shape):
        raise fail(b.g, op, f"SHAPE of {b.tensor(op.inputs[0]).describe()}, which has a dynamic dimension")
    b.set_const(op.outputs[0], np.array(shape, np.int32 if op.options.get("out_type", 2) == 2 else np.int64))


def _tflite_fill(b: Builder, op: Op) -> None:
    value = b.const(op.inputs[1])
    if value is None:
        raise fail(b.g, op, "FILL with a non-constant value is not supported")
    b.emit("fill", [], op.outputs, [op.index], shape=tuple(const_ints(b, op, op.inputs[0], "the shape")),
           value=np.asarray(value).reshape(-1)[0])


def _tflite_arg_max(b: Builder, op: Op) -> None:
    axis = const_ints(b, op, op.inputs[1], "the axis")[0]
    b.emit("argmax", op.inputs[:1], op.outputs, [op.index], axis=axis, keepdims=False)


def _tflite_pack(b: Builder, op: Op) -> None:
    b.emit("stack", op.inputs, op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _tflite_l2_normalization(b: Builder, op: Op) -> None:
    _tflite_fused(b, op, "l2_normalization", op.inputs[:1])


def translate_tflite(b: Builder, op: Op) -> None:
    if op.type in BINARY:
        kind = BINARY[op.type]
        if "fused_activation_function" in op.options:
            _tflite_fused(b, op, kind, op.inputs[:2])
        else:
            b.emit(kind, op.inputs[:2], op.outputs, [op.index])
    elif op.type in UNARY:
        b.emit(UNARY[op.type], op.inputs[:1], op.outputs, [op.index])
    elif op.type in _TFLITE_REDUCE:
        _tflite_reduce(b, op)
    elif op.type in TFLITE:
        TFLITE[op.type](b, op)
    else:
        b.emit(f"tflite.{op.type}", op.inputs, op.outputs, [op.index], **op.options)


TFLITE = {
    "FULLY_CONNECTED": _tflite_fully_connected, "BATCH_MATMUL": _tflite_batch_matmul,
    "RESHAPE": _tflite_view, "SQUEEZE": _tflite_view, "EXPAND_DIMS": _tflite_view,
    "TRANSPOSE": _tflite_transpose, "EMBEDDING_LOOKUP": _tflite_embedding_lookup,
    "GATHER": _tflite_gather, "GATHER_ND": _tflite_gather_nd, "DEQUANTIZE": _tflite_dequantize,
    "CAST": _tflite_cast, "STRIDED_SLICE": _tflite_strided_slice, "SLICE": _tflite_slice,
    "SELECT": _tflite_select, "SELECT_V2": _tflite_select, "CONCATENATION": _tflite_concat,
    "CUMSUM": _tflite_cumsum, "GELU": _tflite_gelu, "SOFTMAX": _tflite_softmax,
    "BROADCAST_TO": _tflite_broadcast_to, "SHAPE": _tflite_shape, "FILL": _tflite_fill,
    "PACK": _tflite_pack, "ARG_MAX": _tflite_arg_max, "L2_NORMALIZATION": _tflite_l2_normalization,
}


