"""Canonicalisation: a TFLite or ONNX graph in one small op vocabulary, before any pattern.

Exporters spell the same computation many ways: an extra RESHAPE, a full-range STRIDED_SLICE, a
CAST to the type a tensor already has, position ids computed from constants, a MatMul and an
Add where another writes one FULLY_CONNECTED. Recovery should see none of that. `canonicalise`
returns a graph whose ops are porter.reference.ops' vocabulary (lower-case kinds shared by both
formats) in which

- every op is translated from its format's spelling (`TFLITE` and `ONNX` below, one small
  function per op type), Linear layers lifted whole (a FULLY_CONNECTED; a MatMul with a constant
  weight and its bias Add; onnxruntime's DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul
  chain) with their weights already in porter's [out, in] layout;
- everything computable from constants is folded, in the reference runtime's arithmetic;
- identity ops are gone (a view to the same shape, a full-range slice, a cast to the same type,
  a multiplication by one, an addition of zero, an expand to the same shape, Identity, Dropout);
- chains of views (reshape, squeeze, unsqueeze, flatten) are one view.

Removing an identity is exact; nothing here reassociates float arithmetic. Each canonical op
keeps the indices of the file's ops it stands for (`Canonical.origin`), and every file op that
needs no step any more is in `Canonical.explained` with the reason, so errors and the
every-op-explained invariant still name the file's own ops.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Tensor
from porter.ir.encoder import ActivationQuant, IntegerDot, Reference, WeightFormat
from porter.recover.schemes import weight_scheme
from porter.reference import ort_cpu as ort_cpus
from porter.reference.ops import Unsupported, evaluate
from porter.reference.ort_cpu import OrtCpu

# Tensors larger than this are not folded by evaluation (a folded op is usually a shape, a
# position row or a mask constant; a real weight is never computed).
FOLD_LIMIT = 1 << 24


@dataclass
class Canonical:
    graph: Graph  # ops in the canonical vocabulary, in execution order
    reference: Reference
    ort_cpu: "OrtCpu | None"  # ONNXRUNTIME_CPU: the CPU whose onnxruntime kernels the ops follow
    origin: dict[int, tuple[int, ...]]  # canonical op index -> the file's op indices
    explained: dict[int, str] = field(default_factory=dict)  # file op -> why it needs no step
    source: Graph | None = None  # the file's own graph

    def file_ops(self, canonical_ops) -> list[int]:
        return sorted({i for c in canonical_ops for i in self.origin[c]})

    def describe(self, canonical_op: int) -> str:
        """The file's ops behind a canonical op, as errors name them."""
        g = self.source
        return "; ".join(f"op {i} {g.ops[i].type}" for i in self.origin[canonical_op])


class _Builder:
    """Collects canonical ops; tensors are the file's, plus any a translation adds."""

    def __init__(self, g: Graph, ort_cpu: "OrtCpu | None"):
        self.g = g
        self.ort_cpu = ort_cpu
        self.tensors: list[Tensor] = list(g.tensors)
        self.ops: list[Op] = []
        self.origin: list[tuple[int, ...]] = []

    def emit(self, kind: str, inputs: list[int], outputs: list[int], origin, **attrs) -> Op:
        op = Op(len(self.ops), kind, list(inputs), list(outputs), attrs)
        self.ops.append(op)
        self.origin.append(tuple(origin))
        return op

    def tensor(self, t: int) -> Tensor:
        return self.tensors[t]

    def const(self, t: int):
        return None if t < 0 else self.tensors[t].data

    def add_tensor(self, like: Tensor, name: str, shape, dtype: str, data=None) -> int:
        index = len(self.tensors)
        self.tensors.append(Tensor(index, name, tuple(shape), dtype, None, data))
        return index

    def set_const(self, t: int, value: np.ndarray) -> None:
        old = self.tensors[t]
        self.tensors[t] = replace(old, data=value, shape=tuple(value.shape), dtype=str(value.dtype))


def _fail(g: Graph, op: Op, message: str) -> PorterError:
    return PorterError(f"{op.describe()}: {message}")


def _const_ints(b: _Builder, op: Op, t: int, what: str) -> list[int]:
    value = b.const(t)
    if value is None:
        raise _fail(b.g, op, f"{what} is not a constant (porter compiles static shapes)")
    return [int(v) for v in np.ravel(value)]


# ---- TFLite ------------------------------------------------------------------------------------

_TFLITE_BINARY = {"ADD": "add", "SUB": "sub", "MUL": "mul", "DIV": "div", "MAXIMUM": "maximum",
                  "MINIMUM": "minimum", "SQUARED_DIFFERENCE": "squared_difference", "POW": "pow",
                  "EQUAL": "equal", "NOT_EQUAL": "not_equal", "GREATER": "greater",
                  "GREATER_EQUAL": "greater_equal", "LESS": "less", "LESS_EQUAL": "less_equal",
                  "LOGICAL_AND": "logical_and", "LOGICAL_OR": "logical_or", "FLOOR_DIV": "div"}
_TFLITE_UNARY = {"RSQRT": "rsqrt", "SQRT": "sqrt", "ABS": "abs", "NEG": "neg", "EXP": "exp",
                 "TANH": "tanh", "LOGISTIC": "sigmoid", "RELU": "relu", "LOGICAL_NOT": "logical_not"}
_TFLITE_REDUCE = {"MEAN": "reduce_mean", "SUM": "reduce_sum", "REDUCE_MAX": "reduce_max",
                  "REDUCE_PROD": "reduce_prod"}
_FUSED = {"NONE": None, "RELU": "relu"}


def _tflite_fused(b: _Builder, op: Op, out_kind: str, inputs, attrs=None) -> None:
    """An op with TFLite's fused activation: the op, then the activation as its own op."""
    fused = op.options.get("fused_activation_function", "NONE")
    if fused not in _FUSED:
        raise _fail(b.g, op, f"fused activation {fused} is not supported")
    if _FUSED[fused] is None:
        b.emit(out_kind, inputs, op.outputs, [op.index], **(attrs or {}))
        return
    out = b.tensor(op.outputs[0])
    mid = b.add_tensor(out, f"{out.name}/pre_activation", out.shape, out.dtype)
    b.emit(out_kind, inputs, [mid], [op.index], **(attrs or {}))
    b.emit(_FUSED[fused], [mid], op.outputs, [op.index])


def _tflite_fully_connected(b: _Builder, op: Op) -> None:
    w_t = b.tensor(op.inputs[1])
    if len(w_t.shape) != 2:
        raise _fail(b.g, op, f"weight {w_t.describe()} is not 2-D")
    scheme = weight_scheme(b.g, w_t, 0, op.describe())
    bias = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    if len(op.inputs) > 2 and op.inputs[2] >= 0 and bias is None:
        raise _fail(b.g, op, "its bias is not a constant")
    if scheme == WeightFormat.FLOAT32:
        aq = ActivationQuant.FLOAT
    elif op.options.get("asymmetric_quantize_inputs", False):
        aq = ActivationQuant.HYBRID_ASYMMETRIC
    else:
        aq = ActivationQuant.HYBRID_SYMMETRIC
    attrs = dict(weight=np.ascontiguousarray(w_t.data), weights=scheme, activation_quant=aq,
                 scale=None if scheme == WeightFormat.FLOAT32 else np.asarray(w_t.quant.scale, np.float32),
                 bias=None if bias is None else np.asarray(bias, np.float32).reshape(-1),
                 integer_dot=IntegerDot.EXACT, weight_tensor=w_t.index)
    _tflite_fused(b, op, "linear", [op.inputs[0]], attrs)


def _tflite_batch_matmul(b: _Builder, op: Op) -> None:
    attrs = {"adj_a": bool(op.options.get("adj_x")), "adj_b": bool(op.options.get("adj_y"))}
    if b.const(op.inputs[1]) is not None and b.const(op.inputs[0]) is None:
        raise _fail(b.g, op, "a BATCH_MATMUL with a constant operand (a dense layer written as a "
                             "batch matmul) is not supported")
    b.emit("matmul", op.inputs[:2], op.outputs, [op.index], **attrs)


def _tflite_view(b: _Builder, op: Op) -> None:
    """RESHAPE / SQUEEZE / EXPAND_DIMS: the output's shape, its dynamic dimension (a batch the
    exporter left open) worked out from the input's size once the inputs are static."""
    b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=None)


def _tflite_transpose(b: _Builder, op: Op) -> None:
    perm = _const_ints(b, op, op.inputs[1], "the permutation")
    b.emit("permute", op.inputs[:1], op.outputs, [op.index], perm=tuple(perm))


def _tflite_reduce(b: _Builder, op: Op) -> None:
    axes = _const_ints(b, op, op.inputs[1], "the reduction axes")
    b.emit(_TFLITE_REDUCE[op.type], op.inputs[:1], op.outputs, [op.index], axes=tuple(axes),
           keepdims=bool(op.options.get("keep_dims", False)))


def _tflite_embedding_lookup(b: _Builder, op: Op) -> None:
    table = b.tensor(op.inputs[1])
    scale = None
    if table.dtype == "int8":
        scheme = weight_scheme(b.g, table, 0, f"word embedding ({op.describe()})")
        scale = np.broadcast_to(np.asarray(table.quant.scale, np.float32), (table.shape[0],)).copy() \
            if scheme != WeightFormat.FLOAT32 else None
    b.emit("embedding_lookup", [op.inputs[0], op.inputs[1]], op.outputs, [op.index], scale=scale)


def _tflite_gather(b: _Builder, op: Op) -> None:
    if op.options.get("batch_dims", 0):
        raise _fail(b.g, op, "GATHER with batch_dims is not supported")
    b.emit("gather", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _tflite_dequantize(b: _Builder, op: Op) -> None:
    t = b.tensor(op.inputs[0])
    producer = b.g.producer(op.inputs[0])
    source = b.tensor(producer.inputs[0]) if producer is not None and producer.type == "GATHER" else t
    q = source.quant if source.quant is not None else t.quant
    if q is None:
        raise _fail(b.g, op, f"{t.describe()} has no quantisation parameters to dequantize with")
    b.emit("dequantize", op.inputs[:1], op.outputs, [op.index], scale=np.asarray(q.scale, np.float32),
           zero_point=np.asarray(q.zero_point))


def _tflite_cast(b: _Builder, op: Op) -> None:
    b.emit("cast", op.inputs[:1], op.outputs, [op.index], to=b.tensor(op.outputs[0]).dtype)


def _tflite_strided_slice(b: _Builder, op: Op) -> None:
    """STRIDED_SLICE as a slice, then (for shrink-axis bits: x[:, 0]) a view dropping those axes."""
    x = b.tensor(op.inputs[0])
    begin, end, strides = (_const_ints(b, op, t, what) for t, what in
                           zip(op.inputs[1:4], ("begin", "end", "strides")))
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask") or o.get("offset"):
        raise _fail(b.g, op, "STRIDED_SLICE with ellipsis, new-axis or offset masks is not supported")
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


def _tflite_slice(b: _Builder, op: Op) -> None:
    begin = _const_ints(b, op, op.inputs[1], "begin")
    size = _const_ints(b, op, op.inputs[2], "size")
    shape = b.tensor(op.inputs[0]).shape
    slices = tuple((a, s, None if n == -1 else s + n, 1) for a, (s, n) in enumerate(zip(begin, size)))
    del shape
    b.emit("slice", op.inputs[:1], op.outputs, [op.index], slices=slices)


def _tflite_select(b: _Builder, op: Op) -> None:
    b.emit("where", op.inputs[:3], op.outputs, [op.index])


def _tflite_concat(b: _Builder, op: Op) -> None:
    _tflite_fused(b, op, "concat", op.inputs, {"axis": int(op.options.get("axis", 0))})


def _tflite_cumsum(b: _Builder, op: Op) -> None:
    axis = _const_ints(b, op, op.inputs[1], "the axis")[0]
    b.emit("cumsum", op.inputs[:1], op.outputs, [op.index], axis=axis,
           exclusive=bool(op.options.get("exclusive")), reverse=bool(op.options.get("reverse")))


def _tflite_gelu(b: _Builder, op: Op) -> None:
    b.emit("gelu", op.inputs[:1], op.outputs, [op.index], approximate=bool(op.options.get("approximate")))


def _tflite_softmax(b: _Builder, op: Op) -> None:
    b.emit("softmax", op.inputs[:1], op.outputs, [op.index], axis=-1, beta=float(op.options.get("beta", 1.0)))


def _tflite_broadcast_to(b: _Builder, op: Op) -> None:
    b.emit("expand", op.inputs[:1], op.outputs, [op.index],
           shape=tuple(_const_ints(b, op, op.inputs[1], "the shape")))


def _tflite_gather_nd(b: _Builder, op: Op) -> None:
    b.emit("gather_nd", op.inputs[:2], op.outputs, [op.index])


def _tflite_shape(b: _Builder, op: Op) -> None:
    shape = b.tensor(op.inputs[0]).shape
    if any(d < 0 for d in shape):
        raise _fail(b.g, op, f"SHAPE of {b.tensor(op.inputs[0]).describe()}, which has a dynamic dimension")
    b.set_const(op.outputs[0], np.array(shape, np.int32 if op.options.get("out_type", 2) == 2 else np.int64))


def _tflite_fill(b: _Builder, op: Op) -> None:
    value = b.const(op.inputs[1])
    if value is None:
        raise _fail(b.g, op, "FILL with a non-constant value is not supported")
    b.emit("fill", [], op.outputs, [op.index], shape=tuple(_const_ints(b, op, op.inputs[0], "the shape")),
           value=np.asarray(value).reshape(-1)[0])


def _tflite_arg_max(b: _Builder, op: Op) -> None:
    axis = _const_ints(b, op, op.inputs[1], "the axis")[0]
    b.emit("argmax", op.inputs[:1], op.outputs, [op.index], axis=axis, keepdims=False)


def _tflite_pack(b: _Builder, op: Op) -> None:
    b.emit("stack", op.inputs, op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _tflite_l2_normalization(b: _Builder, op: Op) -> None:
    _tflite_fused(b, op, "l2_normalization", op.inputs[:1])


def _translate_tflite(b: _Builder, op: Op) -> None:
    if op.type in _TFLITE_BINARY:
        kind = _TFLITE_BINARY[op.type]
        if "fused_activation_function" in op.options:
            _tflite_fused(b, op, kind, op.inputs[:2])
        else:
            b.emit(kind, op.inputs[:2], op.outputs, [op.index])
    elif op.type in _TFLITE_UNARY:
        b.emit(_TFLITE_UNARY[op.type], op.inputs[:1], op.outputs, [op.index])
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


# ---- ONNX --------------------------------------------------------------------------------------

_ONNX_BINARY = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Max": "maximum",
                "Min": "minimum", "Equal": "equal", "Greater": "greater",
                "GreaterOrEqual": "greater_equal", "Less": "less", "LessOrEqual": "less_equal",
                "And": "logical_and", "Or": "logical_or"}
_ONNX_UNARY = {"Sqrt": "sqrt", "Abs": "abs", "Neg": "neg", "Exp": "exp", "Tanh": "tanh",
               "Erf": "erf", "Relu": "relu", "Sigmoid": "sigmoid", "Not": "logical_not",
               "IsNaN": "isnan", "Reciprocal": "reciprocal", "Sin": "sin", "Cos": "cos"}
_ONNX_REDUCE = {"ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max",
                "ReduceL2": "reduce_l2"}
# ONNX TensorProto element types
_ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool", 11: "float64"}


def _onnx_reduce(b: _Builder, op: Op) -> None:
    axes = op.options.get("axes")
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        axes = _const_ints(b, op, op.inputs[1], "the reduction axes")
    if axes is None and op.options.get("noop_with_empty_axes"):
        b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=tuple(b.tensor(op.inputs[0]).shape))
        return
    b.emit(_ONNX_REDUCE[op.type], op.inputs[:1], op.outputs, [op.index],
           axes=None if axes is None else tuple(int(a) for a in axes),
           keepdims=bool(op.options.get("keepdims", 1)))


def _onnx_matmul(b: _Builder, op: Op) -> None:
    w = b.const(op.inputs[1])
    if w is not None and b.const(op.inputs[0]) is None and np.asarray(w).ndim == 2:
        _onnx_linear(b, op, op.inputs[0], op.inputs[1], None, transposed=False)
    else:
        b.emit("matmul", op.inputs[:2], op.outputs, [op.index])


def _onnx_linear(b: _Builder, op: Op, x: int, w: int, bias, transposed: bool, origin=None) -> None:
    w_t = b.tensor(w)
    scheme = weight_scheme(b.g, w_t, 0 if transposed else 1, op.describe())
    if scheme != WeightFormat.FLOAT32:
        raise _fail(b.g, op, f"weight {w_t.describe()} is quantised; an ONNX MatMul takes float weights "
                             "(quantize_dynamic graphs use MatMulInteger)")
    weight = np.asarray(w_t.data, np.float32)
    b.emit("linear", [x], op.outputs, origin or [op.index],
           weight=np.ascontiguousarray(weight if transposed else weight.T), weights=scheme,
           activation_quant=ActivationQuant.FLOAT, scale=None,
           bias=None if bias is None else np.asarray(bias, np.float32).reshape(-1),
           integer_dot=IntegerDot.EXACT, weight_tensor=w)


def _onnx_gemm(b: _Builder, op: Op) -> None:
    o = op.options
    if o.get("transA", 0) or float(o.get("alpha", 1.0)) != 1.0 or float(o.get("beta", 1.0)) != 1.0:
        raise _fail(b.g, op, "Gemm with transA, alpha or beta other than 1 is not supported")
    if b.const(op.inputs[1]) is None:
        raise _fail(b.g, op, "Gemm with a non-constant B is not supported")
    bias = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
    _onnx_linear(b, op, op.inputs[0], op.inputs[1], bias, transposed=bool(o.get("transB", 0)))


def _onnx_view(b: _Builder, op: Op) -> None:
    b.emit("view", op.inputs[:1], op.outputs, [op.index], shape=None)  # shape inferred below


def _onnx_transpose(b: _Builder, op: Op) -> None:
    perm = op.options.get("perm")
    rank = len(b.tensor(op.inputs[0]).shape)
    b.emit("permute", op.inputs[:1], op.outputs, [op.index],
           perm=tuple(int(p) for p in perm) if perm is not None else tuple(reversed(range(rank))))


def _onnx_cast(b: _Builder, op: Op) -> None:
    to = _ONNX_TYPES.get(int(op.options.get("to", 0)))
    if to is None:
        raise _fail(b.g, op, f"Cast to ONNX type {op.options.get('to')} is not supported")
    b.emit("cast", op.inputs[:1], op.outputs, [op.index], to=to)


def _onnx_slice(b: _Builder, op: Op) -> None:
    starts, ends = (_const_ints(b, op, t, w) for t, w in zip(op.inputs[1:3], ("starts", "ends")))
    rank = len(b.tensor(op.inputs[0]).shape)
    axes = _const_ints(b, op, op.inputs[3], "axes") if len(op.inputs) > 3 and op.inputs[3] >= 0 \
        else list(range(len(starts)))
    steps = _const_ints(b, op, op.inputs[4], "steps") if len(op.inputs) > 4 and op.inputs[4] >= 0 \
        else [1] * len(starts)
    big = 1 << 62  # ONNX spells "to the end" as INT64_MAX; numpy wants None
    slices = tuple((a % rank, s, None if abs(e) >= big else e, st)
                   for a, s, e, st in zip(axes, starts, ends, steps))
    b.emit("slice", op.inputs[:1], op.outputs, [op.index], slices=slices)


def _onnx_gather(b: _Builder, op: Op) -> None:
    b.emit("gather", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_gather_nd(b: _Builder, op: Op) -> None:
    if op.options.get("batch_dims", 0):
        raise _fail(b.g, op, "GatherND with batch_dims is not supported")
    b.emit("gather_nd", op.inputs[:2], op.outputs, [op.index])


def _onnx_dequantize(b: _Builder, op: Op) -> None:
    scale = b.const(op.inputs[1])
    zp = b.const(op.inputs[2]) if len(op.inputs) > 2 and op.inputs[2] >= 0 else np.zeros(1, np.int32)
    if scale is None or zp is None:
        raise _fail(b.g, op, "DequantizeLinear with a non-constant scale or zero point")
    if np.asarray(scale).size != 1:
        raise _fail(b.g, op, "DequantizeLinear with more than one scale is not supported")
    b.emit("dequantize", op.inputs[:1], op.outputs, [op.index], scale=np.asarray(scale, np.float32),
           zero_point=np.asarray(zp))


def _onnx_where(b: _Builder, op: Op) -> None:
    b.emit("where", op.inputs[:3], op.outputs, [op.index])


def _onnx_concat(b: _Builder, op: Op) -> None:
    b.emit("concat", op.inputs, op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_layer_norm(b: _Builder, op: Op) -> None:
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        raise _fail(b.g, op, "LayerNormalization without a bias input is not supported")
    b.emit("layer_norm", op.inputs[:3], op.outputs[:1], [op.index],
           epsilon=float(np.float32(op.options.get("epsilon", 1e-5))), axis=int(op.options.get("axis", -1)))


def _onnx_gelu(b: _Builder, op: Op) -> None:
    b.emit("gelu", op.inputs[:1], op.outputs, [op.index], approximate=op.options.get("approximate", "none"))


def _onnx_softmax(b: _Builder, op: Op) -> None:
    b.emit("softmax", op.inputs[:1], op.outputs, [op.index], axis=int(op.options.get("axis", -1)), beta=1.0,
           ort_floats=b.ort_cpu.floats)


def _onnx_shape(b: _Builder, op: Op) -> None:
    shape = b.tensor(op.inputs[0]).shape
    if any(d < 0 for d in shape):
        raise _fail(b.g, op, f"Shape of {b.tensor(op.inputs[0]).describe()}, which has a dynamic dimension")
    # opset 15's start / end pick a range of the dimensions (Python slice semantics, clamped)
    start, end = int(op.options.get("start", 0)), op.options.get("end")
    b.set_const(op.outputs[0], np.array(shape[start:None if end is None else int(end)], np.int64))


def _onnx_constant_of_shape(b: _Builder, op: Op) -> None:
    shape = _const_ints(b, op, op.inputs[0], "the shape")
    value = op.options.get("value", np.zeros(1, np.float32))
    b.set_const(op.outputs[0], np.full(shape, np.asarray(value).reshape(-1)[0], dtype=np.asarray(value).dtype))


def _onnx_expand(b: _Builder, op: Op) -> None:
    b.emit("expand", op.inputs[:1], op.outputs, [op.index],
           shape=tuple(_const_ints(b, op, op.inputs[1], "the shape")))


def _onnx_cumsum(b: _Builder, op: Op) -> None:
    b.emit("cumsum", op.inputs[:1], op.outputs, [op.index],
           axis=_const_ints(b, op, op.inputs[1], "the axis")[0],
           exclusive=bool(op.options.get("exclusive", 0)), reverse=bool(op.options.get("reverse", 0)))


def _onnx_range(b: _Builder, op: Op) -> None:
    b.emit("range", op.inputs[:3], op.outputs, [op.index])


def _onnx_pow(b: _Builder, op: Op) -> None:
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


def _onnx_clip(b: _Builder, op: Op) -> None:
    """Clip(x, lo, hi) = min(max(x, lo), hi), each bound optional."""
    lo = op.inputs[1] if len(op.inputs) > 1 and op.inputs[1] >= 0 else -1
    hi = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] >= 0 else -1
    if (lo >= 0 and b.const(lo) is None) or (hi >= 0 and b.const(hi) is None):
        raise _fail(b.g, op, "Clip with non-constant bounds is not supported")
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


def _onnx_gather_elements(b: _Builder, op: Op) -> None:
    b.emit("gather_elements", op.inputs[:2], op.outputs, [op.index], axis=int(op.options.get("axis", 0)))


def _onnx_arg_max(b: _Builder, op: Op) -> None:
    if op.options.get("select_last_index", 0):
        raise _fail(b.g, op, "ArgMax with select_last_index is not supported")
    b.emit("argmax", op.inputs[:1], op.outputs, [op.index], axis=int(op.options.get("axis", 0)),
           keepdims=bool(op.options.get("keepdims", 1)))


def _onnx_identity(b: _Builder, op: Op) -> None:
    b.emit("view", op.inputs[:1], op.outputs[:1], [op.index], shape=tuple(b.tensor(op.inputs[0]).shape))


def _onnx_split(b: _Builder, op: Op) -> None:
    axis = int(op.options.get("axis", 0))
    shape = b.tensor(op.inputs[0]).shape
    rank = len(shape)
    axis %= rank
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        sizes = _const_ints(b, op, op.inputs[1], "the split sizes")
    elif op.options.get("split") is not None:
        sizes = [int(s) for s in op.options["split"]]
    else:
        n = len(op.outputs)
        if shape[axis] < 0 or shape[axis] % n:
            raise _fail(b.g, op, f"cannot split axis {axis} of {list(shape)} into {n} equal parts")
        sizes = [shape[axis] // n] * n
    start = 0
    for out, size in zip(op.outputs, sizes):
        b.emit("slice", op.inputs[:1], [out], [op.index], slices=((axis, start, start + size, 1),))
        start += size


def _onnx_trilu(b: _Builder, op: Op) -> None:
    k = _const_ints(b, op, op.inputs[1], "k")[0] if len(op.inputs) > 1 and op.inputs[1] >= 0 else 0
    b.emit("trilu", op.inputs[:1], op.outputs, [op.index], upper=bool(op.options.get("upper", 1)), k=k)


def _onnx_tile(b: _Builder, op: Op) -> None:
    b.emit("tile", op.inputs[:1], op.outputs, [op.index],
           repeats=tuple(_const_ints(b, op, op.inputs[1], "the repeats")))


def _onnx_dynamic_quantize(b: _Builder, op: Op) -> None:
    b.emit("dynamic_quantize", op.inputs[:1], op.outputs, [op.index])


def _onnx_matmul_integer(b: _Builder, op: Op) -> None:
    b.emit("matmul_integer", op.inputs, op.outputs, [op.index])


def _translate_onnx(b: _Builder, op: Op) -> None:
    kind = op.type.split(".")[-1] if op.type.startswith("com.microsoft.") else op.type
    if kind in _ONNX_BINARY:
        b.emit(_ONNX_BINARY[kind], op.inputs[:2], op.outputs, [op.index])
    elif kind in _ONNX_UNARY:
        b.emit(_ONNX_UNARY[kind], op.inputs[:1], op.outputs, [op.index])
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
    "Shape": _onnx_shape, "ConstantOfShape": _onnx_constant_of_shape, "Expand": _onnx_expand,
    "CumSum": _onnx_cumsum, "Range": _onnx_range, "Identity": _onnx_identity,
    "Dropout": _onnx_identity, "Split": _onnx_split,
    "DynamicQuantizeLinear": _onnx_dynamic_quantize, "MatMulInteger": _onnx_matmul_integer,
    "Pow": _onnx_pow, "Clip": _onnx_clip, "GatherElements": _onnx_gather_elements, "ArgMax": _onnx_arg_max,
    "Trilu": _onnx_trilu, "Tile": _onnx_tile,
}


# ---- passes over the canonical ops -------------------------------------------------------------


class _Pass:
    """The canonical ops being simplified: producers and consumers kept up to date."""

    def __init__(self, b: _Builder, outputs: dict[str, int], reference: Reference):
        self.b = b
        self.ops: list[Op | None] = list(b.ops)
        self.outputs = dict(outputs)
        self.reference = reference
        self.explained: dict[int, str] = {}

    def producer(self, t: int) -> Op | None:
        for op in self.ops:
            if op is not None and t in op.outputs:
                return op
        return None

    def users(self, t: int) -> list[Op]:
        return [op for op in self.ops if op is not None and t in op.inputs]

    def drop(self, op: Op, reason: str) -> None:
        for i in self.b.origin[op.index]:
            self.explained.setdefault(i, reason)
        self.ops[op.index] = None

    def bypass(self, op: Op, reason: str) -> None:
        """Remove an op whose output equals its first input; readers read the input instead."""
        out, source = op.outputs[0], op.inputs[0]
        for user in self.users(out):
            user.inputs = [source if t == out else t for t in user.inputs]
        for name, t in self.outputs.items():
            if t == out:
                self.outputs[name] = source
        self.drop(op, reason)


_SHAPE_KEEPING = set(_TFLITE_BINARY.values()) | set(_TFLITE_UNARY.values()) | set(_ONNX_BINARY.values()) \
    | set(_ONNX_UNARY.values()) | {"gelu", "cast", "softmax", "where", "l2_normalization"}


def _infer_shape(b: _Builder, op: Op) -> None:
    """Checks a static output shape against the one the op computes from its inputs (a file can
    declare any shape: recovery must not trust one its op does not produce), and fills in shapes
    the format left dynamic (views got theirs from their targets already), evaluating the op on
    zeros where no shape rule knows it."""
    out = b.tensor(op.outputs[0]) if len(op.outputs) == 1 else None
    if out is None or any(d < 0 for t in op.inputs if t >= 0 for d in b.tensor(t).shape):
        return
    shape = _computed_shape(b, op)
    if shape is not None and all(d >= 0 for d in out.shape):
        if tuple(out.shape) != shape:
            raise PorterError(f"{_file_op(b, op).describe()}: its output {out.describe()} is declared "
                              f"{list(out.shape)}, but the op computes {list(shape)} from its inputs")
        return
    if op.type == "view" or all(d >= 0 for d in out.shape):
        return
    if shape is None:
        values = [b.const(t) if b.const(t) is not None else
                  np.zeros(tuple(b.tensor(t).shape), b.tensor(t).dtype) for t in op.inputs if t >= 0]
        if any(v.size > FOLD_LIMIT for v in values):
            return
        try:
            shape = tuple(evaluate(op.type, op.options, values, b_reference(b)).shape)
        except Unsupported:
            return
    b.tensors[out.index] = replace(out, shape=shape)


def _computed_shape(b: _Builder, op: Op) -> tuple[int, ...] | None:
    """The output shape of the ops whose shape follows from their inputs' by a rule; None for the
    others. Inputs that do not fit the op (operands that do not broadcast, a view that changes
    the number of values, a product over unequal depths) are refused naming the op."""
    shapes = [tuple(b.tensor(t).shape) for t in op.inputs if t >= 0]
    where = _file_op(b, op).describe()
    if op.type in _SHAPE_KEEPING:  # elementwise: the broadcast of the operands' shapes
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            raise PorterError(f"{where}: operand shapes {[list(s) for s in shapes]} do not broadcast") from None
    if op.type == "linear":
        weight = op.options["weight"].shape
        if not shapes[0] or shapes[0][-1] != weight[-1]:
            raise PorterError(f"{where}: input shape {list(shapes[0])} does not end in the weights' "
                              f"depth {weight[-1]}")
        shape = shapes[0][:-1] + (weight[0],)
        declared = tuple(b.tensor(op.outputs[0]).shape)
        # FULLY_CONNECTED without keep_num_dims flattens the leading dimensions into one
        flattened = len(declared) == 2 and declared == (int(np.prod(shape[:-1])), weight[0])
        return declared if flattened else shape
    if op.type == "view":
        target = tuple(op.options.get("shape") or ())
        if op.options.get("shape") is not None and int(np.prod(target)) != int(np.prod(shapes[0])):
            raise PorterError(f"{where}: a view of {list(shapes[0])} as {list(target)} changes the "
                              "number of values")
        return None
    if op.type == "permute":
        perm = tuple(op.options["perm"])
        if sorted(perm) != list(range(len(shapes[0]))):
            raise PorterError(f"{where}: perm {list(perm)} is not a permutation of a rank-{len(shapes[0])} input")
        return tuple(shapes[0][i] for i in perm)
    return None


def _file_op(b: _Builder, op: Op):
    """The file's op a canonical op came from, for messages (the op itself if it has none)."""
    return b.g.ops[b.origin[op.index][0]] if b.origin[op.index] else op


def b_reference(b: _Builder) -> Reference:
    return Reference.LITERT_BUILTIN if b.g.format == "tflite" else Reference.ONNXRUNTIME_CPU


def _view_target(b: _Builder, g: Graph, op: Op) -> None:
    """A view's output shape from the op's inputs and attributes (the file may leave it dynamic)."""
    file_op = g.ops[b.origin[op.index][0]]
    in_shape = list(b.tensor(op.inputs[0]).shape)
    out_shape = list(b.tensor(op.outputs[0]).shape)
    if all(d >= 0 for d in out_shape + in_shape) and int(np.prod(out_shape)) == int(np.prod(in_shape)):
        op.options["shape"] = tuple(out_shape)
        return
    if any(d < 0 for d in in_shape):
        unknown = _untranslated_before(b, op.inputs[0])
        if unknown is not None:  # the shape is unknown because an op before has no meaning to porter
            raise PorterError(f"{g.ops[b.origin[unknown.index][0]].describe()}: porter does not know this op")
        raise PorterError(f"{file_op.describe()}: input {b.tensor(op.inputs[0]).describe()} has a "
                          "dynamic shape")
    if g.format == "tflite":
        op.options["shape"] = tuple(_tflite_view_shape(b, file_op, in_shape, out_shape))
    else:
        op.options["shape"] = tuple(_onnx_view_shape(b, file_op, in_shape))
    t = b.tensor(op.outputs[0])
    b.tensors[t.index] = replace(t, shape=op.options["shape"])


def _untranslated_before(b: _Builder, t: int) -> Op | None:
    """The nearest op computing tensor t (through its inputs) that has no canonical translation."""
    made = {out: op for op in b.ops for out in op.outputs}
    todo, seen = [t], set()
    while todo:
        op = made.get(todo.pop())
        if op is None or op.index in seen:
            continue
        seen.add(op.index)
        if "." in op.type:
            return op
        todo.extend(i for i in op.inputs if i >= 0)
    return None


def _tflite_view_shape(b: _Builder, op: Op, in_shape: list[int], out_shape: list[int]) -> list[int]:
    if op.type == "EXPAND_DIMS":
        axis = _const_ints(b, op, op.inputs[1], "the axis")[0] % (len(in_shape) + 1)
        return in_shape[:axis] + [1] + in_shape[axis:]
    if op.type == "SQUEEZE":
        dims = op.options.get("squeeze_dims") or [i for i, d in enumerate(in_shape) if d == 1]
        drop = {d % len(in_shape) for d in dims}
        return [d for i, d in enumerate(in_shape) if i not in drop]
    target = list(out_shape)
    if len(op.inputs) > 1 and op.inputs[1] >= 0 and b.const(op.inputs[1]) is not None:
        target = _const_ints(b, op, op.inputs[1], "the new shape")
    known = int(np.prod([d for d in target if d >= 0]))
    if -1 not in target and known == int(np.prod(in_shape)):
        return target
    if target.count(-1) != 1 or known == 0 or int(np.prod(in_shape)) % known:
        raise PorterError(f"{op.describe()}: cannot work out its output shape {out_shape} from an "
                          f"input of {in_shape}")
    target[target.index(-1)] = int(np.prod(in_shape)) // known
    return target


def _onnx_view_shape(b: _Builder, op: Op, in_shape: list[int]) -> list[int]:
    if op.type == "Reshape":
        target = _const_ints(b, op, op.inputs[1], "the target shape")
        if not op.options.get("allowzero", 0):
            target = [in_shape[i] if d == 0 else d for i, d in enumerate(target)]
        if target.count(-1) == 1:
            known = int(np.prod([d for d in target if d != -1]))
            target[target.index(-1)] = int(np.prod(in_shape)) // max(known, 1)
        return target
    if op.type == "Flatten":
        axis = int(op.options.get("axis", 1)) % (len(in_shape) + 1)
        return [int(np.prod(in_shape[:axis])), int(np.prod(in_shape[axis:]))]
    axes = op.options.get("axes")
    if len(op.inputs) > 1 and op.inputs[1] >= 0:
        axes = _const_ints(b, op, op.inputs[1], "the axes")
    if op.type == "Squeeze":
        drop = {a % len(in_shape) for a in axes} if axes is not None else \
            {i for i, d in enumerate(in_shape) if d == 1}
        return [d for i, d in enumerate(in_shape) if i not in drop]
    if op.type == "Unsqueeze":
        rank = len(in_shape) + len(axes)
        out = list(in_shape)
        for a in sorted(a % rank for a in axes):
            out.insert(a, 1)
        return out
    return in_shape  # Identity / Dropout


def _settle(b: _Builder, g: Graph, op: Op, reference: Reference) -> bool:
    """Gives a new canonical op static shapes and folds it if its inputs are all constant, so
    that the ops translated after it see constants (a Reshape's target, an Expand's shape).
    Returns whether it folded."""
    if op.type == "view" and op.options.get("shape") is None:
        _view_target(b, g, op)
    if op.type == "view":
        out = b.tensor(op.outputs[0])
        if tuple(out.shape) != tuple(op.options["shape"]):
            b.tensors[out.index] = replace(out, shape=tuple(op.options["shape"]))
    _infer_shape(b, op)
    if len(op.outputs) != 1 or not all(t < 0 or b.const(t) is not None for t in op.inputs):
        return False
    values = [b.const(t) for t in op.inputs if t >= 0]
    if any(v.size > FOLD_LIMIT for v in values):
        return False
    try:
        value = evaluate(op.type, op.options, values, reference)
    except Unsupported:
        return False
    out = b.tensor(op.outputs[0])
    if out.shape and all(d >= 0 for d in out.shape) and tuple(value.shape) != tuple(out.shape) \
            and value.size == int(np.prod(out.shape)):
        value = value.reshape(out.shape)
    b.set_const(op.outputs[0], np.asarray(value))
    return True


# op -> (the value that leaves its other operand unchanged, whether it may be the first operand).
# Adding +0 is not listed: -0 + +0 is +0, so only -0 would be an exact identity.
_NEUTRAL = {"mul": (1.0, True), "div": (1.0, False), "sub": (0.0, False)}


def _is_identity(p: _Pass, op: Op) -> str | None:
    """Why `op` computes exactly its (non-constant) input, or None."""
    b = p.b
    if not op.inputs or op.inputs[0] < 0 or len(op.outputs) != 1:
        return None
    out = b.tensor(op.outputs[0])
    x = b.tensor(op.inputs[0])
    if op.type in ("view", "expand", "slice") and tuple(x.shape) == tuple(out.shape):
        return f"{op.type} to the same shape"
    if op.type == "permute" and tuple(op.options["perm"]) == tuple(range(len(x.shape))):
        return "identity permutation"
    if op.type == "concat" and len(op.inputs) == 1:
        return "concat of one tensor"
    if op.type == "cast" and op.options["to"] == x.dtype:
        return "cast to the type it has"
    if op.type in _NEUTRAL and len(op.inputs) == 2:
        neutral, either_side = _NEUTRAL[op.type]
        for x_pos in ((0, 1) if either_side else (0,)):
            x_t, c = op.inputs[x_pos], b.const(op.inputs[1 - x_pos])
            if c is None or b.const(x_t) is not None or c.dtype.kind != "f" or not np.all(c == neutral):
                continue
            if tuple(b.tensor(x_t).shape) == tuple(out.shape) and b.tensor(x_t).dtype == out.dtype:
                op.inputs = [x_t, op.inputs[1 - x_pos]]
                return f"{op.type} by {neutral:g}"
    return None


def _remove_identities(p: _Pass) -> None:
    for op in p.ops:
        if op is None:
            continue
        reason = _is_identity(p, op)
        if reason is not None:
            p.bypass(op, f"identity: {reason}")


_BROADCASTING = (set(_TFLITE_BINARY.values()) | set(_ONNX_BINARY.values()) | {"where"})


def _implicit_broadcasts(p: _Pass) -> None:
    """An expand read only by ops that broadcast their operands anyway is implicit: each reader,
    given the unexpanded input, computes the same values at the same shape."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "expand" or op.outputs[0] in p.outputs.values():
            continue
        out, source = op.outputs[0], op.inputs[0]
        users = p.users(out)
        if not users or not all(_broadcast_keeps_shape(b, u, out, source) for u in users):
            continue
        for user in users:
            user.inputs = [source if t == out else t for t in user.inputs]
        p.drop(op, "implicit in the broadcasting op that reads it")


def _broadcast_keeps_shape(b: _Builder, user: Op, expanded: int, source: int) -> bool:
    if user.type not in _BROADCASTING:
        return False
    shapes = [b.tensor(source if t == expanded else t).shape for t in user.inputs]
    try:
        shape = np.broadcast_shapes(*[tuple(s) for s in shapes])
    except ValueError:
        return False
    return tuple(shape) == tuple(b.tensor(user.outputs[0]).shape)


def _ort_matmul_scale_fusion(p: _Pass) -> None:
    """onnxruntime's MatMulScaleFusion, so the canonical graph computes what onnxruntime does:
    a product of activations whose operands were scaled by constant scalars (through
    transposes, which its transpose optimiser moves out of the way), or whose only reader scales
    it, becomes one product multiplied by alpha, the float32 product of the scales (a divisor d
    counting as 1.0f / d), operands first. MLAS then rounds alpha * dot once, where the graph as
    written rounds each scaling."""
    if p.reference != Reference.ONNXRUNTIME_CPU:
        return
    b = p.b
    for op in list(p.ops):
        if op is None or op.type != "matmul" or any(b.const(t) is not None for t in op.inputs):
            continue
        scales = [s for s in (_leading_scale(p, t) for t in op.inputs) if s is not None]
        trailing = _trailing_scale(p, op)
        if not scales and trailing is None:
            continue
        alpha = np.float32(1.0)
        origin: list[int] = list(b.origin[op.index])
        for scale_op, reader, x, value in scales:
            alpha = np.float32(alpha * value)
            reader.inputs = [x if t == scale_op.outputs[0] else t for t in reader.inputs]
            origin += b.origin[scale_op.index]
            p.ops[scale_op.index] = None
        out = op.outputs[0]
        if trailing is not None:
            scale_op, value = trailing
            alpha = np.float32(alpha * value)
            out = scale_op.outputs[0]
            origin += b.origin[scale_op.index]
            p.ops[scale_op.index] = None
        like = b.tensor(op.outputs[0])
        unscaled = b.add_tensor(like, f"{like.name}/unscaled", like.shape, like.dtype)
        alpha_t = b.add_tensor(like, f"{like.name}/alpha", (), "float32", np.asarray(alpha, np.float32))
        op.outputs = [unscaled]
        fused = b.emit("mul", [unscaled, alpha_t], [out], sorted(set(origin)))
        p.ops.append(fused)


def _ort_div_mul_fusion(p: _Pass) -> None:
    """onnxruntime's DivMulFusion, so the canonical graph computes what onnxruntime does:
    x * (1 / y), the division read by that product alone, is x / y (one rounding, not two)."""
    if p.reference != Reference.ONNXRUNTIME_CPU:
        return
    b = p.b
    for op in list(p.ops):
        if op is None or op.type != "div" or len(op.inputs) != 2 or op.outputs[0] in p.outputs.values():
            continue
        one = b.const(op.inputs[0])
        users = p.users(op.outputs[0])
        if one is None or one.size != 1 or float(one.reshape(-1)[0]) != 1.0 or len(users) != 1 \
                or users[0].type != "mul" or b.const(op.inputs[1]) is not None:
            continue
        mul = users[0]
        other = mul.inputs[1] if mul.inputs[0] == op.outputs[0] else mul.inputs[0]
        mul.type, mul.inputs = "div", [other, op.inputs[1]]
        b.origin[mul.index] = b.origin[op.index] + b.origin[mul.index]
        p.ops[op.index] = None


def _scale_of(p: _Pass, op: Op | None, x_rank_from: int | None = None) -> tuple[int, np.float32] | None:
    """(scaled operand, scale as onnxruntime takes it) of a mul / div by a one-value float
    constant whose rank does not broadcast the other operand."""
    if op is None or op.type not in ("mul", "div") or len(op.inputs) != 2:
        return None
    b = p.b
    for pos in ((0, 1) if op.type == "mul" else (0,)):
        x, c = op.inputs[pos], op.inputs[1 - pos]
        value = b.const(c)
        if value is None or b.const(x) is not None or value.size != 1 or value.dtype.kind != "f" \
                or value.ndim > len(b.tensor(x).shape) or not b.tensor(x).shape:
            continue
        scale = np.float32(value.reshape(-1)[0])
        return x, (np.float32(np.float32(1.0) / scale) if op.type == "div" else scale)
    return None


def _leading_scale(p: _Pass, t: int):
    """(scale op, the op reading its output, its unscaled input, scale) behind a product operand."""
    reader = None
    while (op := p.producer(t)) is not None and op.type == "permute" and len(p.users(t)) == 1:
        reader, t = op, op.inputs[0]
    op = p.producer(t)
    found = _scale_of(p, op)
    if found is None or len(p.users(t)) != 1 or t in p.outputs.values():
        return None
    return op, reader if reader is not None else p.users(t)[0], found[0], found[1]


def _trailing_scale(p: _Pass, product: Op):
    users = p.users(product.outputs[0])
    if len(users) != 1 or product.outputs[0] in p.outputs.values():
        return None
    found = _scale_of(p, users[0])
    if found is None or found[0] != product.outputs[0]:
        return None
    return users[0], found[1]


def _merge_views(p: _Pass) -> None:
    """view(view(x)) -> view(x); a permutation that only moves size-1 axes is a view."""
    b = p.b
    for op in p.ops:
        if op is None:
            continue
        if op.type == "permute":
            shape = b.tensor(op.inputs[0]).shape
            moved = [a for a in op.options["perm"] if shape[a] != 1]
            if moved == sorted(moved):
                op.type = "view"
                op.options = {"shape": tuple(b.tensor(op.outputs[0]).shape)}
        if op.type != "view":
            continue
        source = p.producer(op.inputs[0])
        if source is not None and source.type == "view" and len(p.users(source.outputs[0])) == 1 \
                and source.outputs[0] not in p.outputs.values():
            op.inputs = [source.inputs[0]]
            b.origin[op.index] = b.origin[source.index] + b.origin[op.index]
            p.ops[source.index] = None


def _lift_linear_bias(p: _Pass) -> None:
    """linear without bias -> add of a vector constant: one linear with a bias (what TFLite's
    FULLY_CONNECTED computes either way: b + y, and what onnxruntime fuses MatMul + Add into).
    The add may come after a view that splits the outputs into heads (Keras' EinsumDense adds
    a [heads, head_dim] bias there): the same additions, one per output."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "add":
            continue
        for x_pos in (0, 1):
            bias = b.const(op.inputs[1 - x_pos])
            view = p.producer(op.inputs[x_pos])
            lin = p.producer(view.inputs[0]) if view is not None and view.type == "view" else view
            if lin is None or lin.type != "linear" or lin.options.get("bias") is not None or bias is None:
                continue
            out_features = lin.options["weight"].shape[0]
            if bias.size != out_features or bias.dtype != np.float32 or len(p.users(lin.outputs[0])) != 1 \
                    or lin.outputs[0] in p.outputs.values():
                continue
            if view is not lin:
                split = b.tensor(view.outputs[0]).shape
                trailing = [d for d in bias.shape if d != 1]
                if len(p.users(view.outputs[0])) != 1 or list(split[len(split) - len(trailing):]) != trailing \
                        or int(np.prod(split[len(split) - len(trailing):])) != out_features:
                    continue
            elif bias.shape[-1] != out_features:
                continue
            lin.options["bias"] = np.asarray(bias, np.float32).reshape(-1)
            b.origin[lin.index] = b.origin[lin.index] + b.origin[op.index]
            if view is lin:
                lin.outputs = list(op.outputs)
            else:  # the linear makes the biased outputs (a tensor of its own), the view shows them
                old = b.tensor(lin.outputs[0])
                biased = b.add_tensor(old, f"{old.name}/biased", old.shape, old.dtype)
                lin.outputs = [biased]
                view.inputs = [biased]
                view.outputs = list(op.outputs)
            p.ops[op.index] = None
            break


def _lift_dynamic_quantize(p: _Pass) -> None:
    """onnxruntime's quantize_dynamic chain, DynamicQuantizeLinear(x) -> MatMulInteger(q, W, zp_x)
    -> Cast(float) -> Mul(x_scale * w_scale), becomes one linear with ORT_DYNAMIC_UINT8 inputs
    (the weight's scale must be the one its Mul applies)."""
    b = p.b
    for op in p.ops:
        if op is None or op.type != "matmul_integer":
            continue
        quantize = p.producer(op.inputs[0])
        w_t = b.tensor(op.inputs[1])
        if quantize is None or quantize.type != "dynamic_quantize" or w_t.data is None:
            continue
        if len(op.inputs) > 2 and op.inputs[2] != quantize.outputs[2]:
            continue
        cast_ops = p.users(op.outputs[0])
        if len(cast_ops) != 1 or cast_ops[0].type != "cast" or cast_ops[0].options["to"] != "float32":
            continue
        cast = cast_ops[0]
        muls = p.users(cast.outputs[0])
        if len(muls) != 1 or muls[0].type != "mul":
            continue
        mul = muls[0]
        scale_t = mul.inputs[1] if mul.inputs[0] == cast.outputs[0] else mul.inputs[0]
        scale_op = p.producer(scale_t)
        if scale_op is None or scale_op.type != "mul" or quantize.outputs[1] not in scale_op.inputs:
            continue
        w_scale = b.const(scale_op.inputs[1] if scale_op.inputs[0] == quantize.outputs[1] else scale_op.inputs[0])
        where = p.b.g.ops[b.origin[op.index][0]].describe()
        scheme = weight_scheme(b.g, w_t, 1, where)
        if w_scale is None or not np.array_equal(np.broadcast_to(np.asarray(w_scale, np.float32),
                                                                 w_t.quant.scale.shape), w_t.quant.scale):
            raise PorterError(f"{where}: the product is rescaled by values that are not the weight's "
                              "quantisation scale")
        w_zp = b.const(op.inputs[3]) if len(op.inputs) > 3 and op.inputs[3] >= 0 else None
        if w_zp is not None and np.any(w_zp != 0):
            raise PorterError(f"{where}: weights with a non-zero zero point are not supported")
        lin = b.emit("linear", [quantize.inputs[0]], mul.outputs,
                     b.origin[op.index] + b.origin[cast.index] + b.origin[mul.index],
                     weight=np.ascontiguousarray(np.asarray(w_t.data).T), weights=scheme,
                     activation_quant=ActivationQuant.ORT_DYNAMIC_UINT8,
                     scale=np.asarray(w_t.quant.scale, np.float32), bias=None,
                     integer_dot=IntegerDot(b.ort_cpu.integer_dot), weight_tensor=w_t.index)
        p.ops.append(lin)
        for dead in (op, cast, mul):
            p.ops[dead.index] = None
        # The scale product and the quantisation itself stay until nothing reads them.
        p.explained.setdefault(b.origin[scale_op.index][0], "the weight scale of a dynamically quantised Linear")
    for op in p.ops:
        if op is not None and op.type in ("dynamic_quantize", "mul") and op.type == "dynamic_quantize" \
                and not any(p.users(t) for t in op.outputs):
            p.drop(op, "the input quantisation of dynamically quantised Linears")
    for op in p.ops:
        if op is not None and op.type == "mul" and not p.users(op.outputs[0]) \
                and op.outputs[0] not in p.outputs.values():
            p.drop(op, "the weight scale of a dynamically quantised Linear")


GATHERS = ("gather", "gather_nd", "gather_elements")


def gathers_as_slices(b: "_Builder | None", g: Graph, ops: list, reference: Reference) -> None:
    """A gather of an activation at constant indices only moves data; where it picks a
    contiguous range along one axis (x[:, 0] spelled as Gather, GatherND or GatherElements: CLS
    pooling) it is that slice, then a view to the gather's shape. Decided by running the gather on
    the positions of its input."""
    for i, op in enumerate(ops):
        if op is None or op.type not in GATHERS:
            continue
        data, index = op.inputs[0], op.inputs[1]
        if g.const(data) is not None or g.const(index) is None:
            continue
        shape = tuple(g.tensor(data).shape)
        # a gather from, or into, so big a tensor stays a gather (its positions would not fit)
        if max(int(np.prod(shape)), _gathered_size(op, shape, np.shape(g.const(index)))) > FOLD_LIMIT:
            continue
        positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
        try:
            picked = evaluate(op.type, op.options, [positions, g.const(index)], reference)
        except Unsupported:
            continue
        found = _as_one_slice(shape, picked)
        if found is None:
            continue
        axis, start, stop = found
        out = g.tensor(op.outputs[0])
        kept = list(shape)
        kept[axis] = stop - start
        slice_op = Op(op.index, "slice", [data], op.outputs, {"slices": ((axis, start, stop, 1),)})
        if tuple(kept) != tuple(out.shape):
            if b is None:
                continue
            mid = b.add_tensor(out, f"{out.name}/sliced", kept, out.dtype)
            slice_op.outputs = [mid]
            ops.append(b.emit("view", [mid], op.outputs, b.origin[op.index], shape=tuple(out.shape)))
        ops[i] = slice_op


def _gathered_size(op: Op, shape: tuple, index_shape: tuple) -> int:
    """How many values the gather op picks from a tensor of `shape` at indices of `index_shape`."""
    if op.type == "gather_elements":
        return int(np.prod(index_shape))
    if op.type == "gather_nd":
        depth = index_shape[-1] if index_shape else 0
        return int(np.prod(index_shape[:-1])) * int(np.prod(shape[depth:]))
    axis = int(op.options.get("axis", 0)) % max(len(shape), 1)
    return int(np.prod(index_shape)) * int(np.prod(shape)) // max(shape[axis], 1) if shape else 0


def _as_one_slice(shape: tuple, picked: np.ndarray) -> tuple[int, int, int] | None:
    """(axis, start, stop) when `picked` (positions of a tensor of `shape`) is that slice of it."""
    flat = picked.reshape(-1)
    if flat.size == 0:
        return None
    index = np.stack(np.unravel_index(flat, shape))
    for axis in range(len(shape)):
        start, stop = int(index[axis].min()), int(index[axis].max()) + 1
        kept = [slice(None)] * len(shape)
        kept[axis] = slice(start, stop)
        expected = np.arange(int(np.prod(shape))).reshape(shape)[tuple(kept)].reshape(-1)
        if expected.size == flat.size and np.array_equal(expected, flat):
            return axis, start, stop
    return None


class _PassGraph:
    """The little of a Graph that gathers_as_slices reads, over the builder's tensors."""

    def __init__(self, p: _Pass):
        self.b = p.b

    def const(self, t: int):
        return self.b.const(t)

    def tensor(self, t: int) -> Tensor:
        return self.b.tensor(t)


def _dead_code(p: _Pass) -> None:
    """Ops nothing reads (after folding and fusion) are explained by being unused."""
    changed = True
    while changed:
        changed = False
        live_outputs = set(p.outputs.values())
        for op in reversed(p.ops):
            if op is None:
                continue
            if not any(t in live_outputs or p.users(t) for t in op.outputs):
                p.drop(op, "its result is never used")
                changed = True


def _static_inputs(b: _Builder, g: Graph) -> None:
    """porter runs one window at a time: an input's dynamic leading (batch) dimension is 1. Any
    other dynamic dimension has no value porter could choose."""
    for name, t in g.inputs.items():
        shape = list(b.tensor(t).shape)
        if shape and shape[0] < 0:
            shape[0] = 1
        if any(d < 0 for d in shape):
            raise PorterError(f"input '{name}' ({b.tensor(t).describe()}) has a dynamic dimension "
                              "besides the batch; porter compiles a fixed window (export with a "
                              "static sequence length)")
        b.tensors[t] = replace(b.tensor(t), shape=tuple(shape))


def _topological(ops: list[Op]) -> list[Op]:
    """The ops in an order where every tensor is made before it is read (fusions append their
    op after the ops it replaces), otherwise keeping the given order."""
    made = {t: op.index for op in ops for t in op.outputs}
    done: set[int] = set()
    order = []
    by_index = {op.index: op for op in ops}

    def visit(op: Op) -> None:
        stack = [(op, False)]
        while stack:
            current, expanded = stack.pop()
            if current.index in done:
                continue
            if expanded:
                done.add(current.index)
                order.append(current)
                continue
            stack.append((current, True))
            for t in reversed(current.inputs):
                if t in made and made[t] not in done:
                    stack.append((by_index[made[t]], False))

    for op in sorted(ops, key=lambda o: o.index):
        visit(op)
    return order


def canonicalise(g: Graph, ort_cpu: OrtCpu | None = None) -> Canonical:
    """ort_cpu: for an ONNX graph, the CPU whose onnxruntime kernels the canonical ops follow
    (the u8 x s8 dot of its quantised layers, its softmax); None takes this machine's."""
    reference = {"tflite": Reference.LITERT_BUILTIN, "onnx": Reference.ONNXRUNTIME_CPU}.get(g.format)
    if reference is None:
        raise PorterError(f"porter recovers TFLite and ONNX graphs, not {g.format}")
    if reference == Reference.ONNXRUNTIME_CPU and ort_cpu is None:
        ort_cpu = ort_cpus.host_target()
    b = _Builder(g, ort_cpu if reference == Reference.ONNXRUNTIME_CPU else None)
    _static_inputs(b, g)
    translate = _translate_tflite if g.format == "tflite" else _translate_onnx
    explained: dict[int, str] = {}
    folded = []
    for op in g.ops:
        start = len(b.ops)
        translate(b, op)
        if len(b.ops) == start:
            explained[op.index] = "folded into a constant"
        folded += [c for c in b.ops[start:] if _settle(b, g, c, reference)]
    p = _Pass(b, g.outputs, reference)
    p.explained.update(explained)
    for op in folded:
        p.drop(op, "folded into a constant")
    _remove_identities(p)
    _merge_views(p)
    _remove_identities(p)
    _implicit_broadcasts(p)
    _ort_matmul_scale_fusion(p)
    _ort_div_mul_fusion(p)
    _lift_dynamic_quantize(p)
    _lift_linear_bias(p)
    gathers_as_slices(b, _PassGraph(p), p.ops, reference)
    _dead_code(p)
    kept = _topological([op for op in p.ops if op is not None])
    ops, origin = [], {}
    for i, op in enumerate(kept):
        origin[i] = b.origin[op.index]
        ops.append(Op(i, op.type, op.inputs, op.outputs, op.options))
    graph = Graph(g.format, g.path, b.tensors, ops, dict(g.inputs), p.outputs, g.metadata)
    return Canonical(graph, reference, b.ort_cpu, origin, p.explained, g)
