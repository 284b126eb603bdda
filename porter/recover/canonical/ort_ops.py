"""onnxruntime's ops of a QDQ graph on numpy values, in its arithmetic: what the rewrite's
constant folding (porter.recover.canonical.ort_qdq: onnxruntime's ConstantFolding) and the
recovery (porter.recover.qdq: folded constants, index maps of views run on positions, FLOAT
steps) evaluate. A float op is one op of porter.reference.ops' vocabulary (`float_op`); Pow by
a constant 2 or 3 is onnxruntime's product (element_wise_ops.cc: x * x, (x * x) * x when the
exponent is one value), any other exponent is std::pow (libm's powf), which porter does not
reproduce and refuses, naming it.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Op
from porter.ir.encoder import Reference
from porter.recover.canonical import onnx as onnx_ops
from porter.reference import ops
from porter.reference.ort import qdq as K

Q, DQ = "QuantizeLinear", "DequantizeLinear"
MS = "com.microsoft."
ALIASES = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
REDUCTIONS = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
              "ReduceL2": "reduce_l2"}
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool"}
POW_BY_PRODUCTS = (2.0, 3.0)


def evaluate(op: Op, values: list, floats: str, out_shape: tuple) -> np.ndarray:
    """One op of the graph onnxruntime runs, on numpy values, in its arithmetic (the folding of
    constants, and the index maps of views run on positions)."""
    if op.type in ALIASES:
        return np.reshape(values[0], out_shape)
    if op.type == DQ:
        zp = values[2] if len(values) > 2 and values[2] is not None else np.zeros(1, np.int32)
        return K.dequantize_linear(values[0], values[1], zp, _axis(op, np.ndim(values[0])))
    if op.type == Q:
        zp = np.asarray(values[2]) if len(values) > 2 and values[2] is not None else np.zeros((), np.uint8)
        if np.size(values[1]) != 1:
            raise PorterError(f"op {op.index} QuantizeLinear: per-axis quantisation of a constant is not supported")
        return K.quantize_linear(values[0], float(np.ravel(values[1])[0]), int(np.ravel(zp)[0]), str(zp.dtype))
    kind, attrs, used = float_op(op, values, floats, [np.shape(v) if v is not None else None for v in values])
    try:
        return ops.evaluate(kind, attrs, [values[i] for i in used], Reference.ONNXRUNTIME_CPU)
    except ops.Unsupported as e:
        raise PorterError(f"op {op.index} {op.type}: {e}") from None


def _axis(op: Op, rank: int) -> int:
    return int(op.options.get("axis", 1)) % max(rank, 1)


def float_op(op: Op, values: list, floats: str | None = None, shapes: list | None = None) -> tuple[str, dict, list[int]]:
    """An ONNX op as one op of porter.reference.ops: (kind, attributes, the inputs it reads).
    `values`: the constant inputs (None for an activation); `shapes`: every input's."""
    t, o = op.type, op.options
    if t in onnx_ops.BINARY:
        return onnx_ops.BINARY[t], {}, [0, 1]
    if t in onnx_ops.UNARY:
        return onnx_ops.UNARY[t], {}, [0]
    if t in REDUCTIONS:
        axes = o.get("axes")
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            if values[1] is None:
                raise PorterError(f"op {op.index} {t}: the reduction axes are not a constant")
            axes = [int(a) for a in np.ravel(values[1])]
        return REDUCTIONS[t], {"axes": axes, "keepdims": bool(o.get("keepdims", 1))}, [0]
    if t == "Softmax":
        return "softmax", {"axis": int(o.get("axis", -1)), "ort_floats": floats}, [0]
    if t == "LayerNormalization":
        if int(o.get("axis", -1)) != -1 or len(op.inputs) < 3 or op.inputs[2] < 0:
            raise PorterError(f"op {op.index} LayerNormalization: porter runs it over the last axis with a bias")
        return "layer_norm", {"epsilon": float(np.float32(o.get("epsilon", 1e-5)))}, [0, 1, 2]
    if t == "MatMul":
        return "ort_matmul", {}, [0, 1]
    if t == "Pow":
        return "pow", {"exponent": _pow_exponent(op, values, shapes)}, [0, 1]
    if t == "Clip":
        given = [i < len(op.inputs) and op.inputs[i] >= 0 for i in (1, 2)]
        return "clip", {"lower": given[0], "upper": given[1]}, [0] + [i for i, g in zip((1, 2), given) if g]
    if t == "Where":
        return "where", {}, [0, 1, 2]
    if t == "Cast":
        return "cast", {"to": ONNX_TYPES.get(int(o.get("to", 0)), "?")}, [0]
    if t == "Transpose":
        return "permute", {"perm": tuple(int(p) for p in o["perm"])}, [0]
    if t == "Expand":
        return "expand", {"shape": tuple(int(v) for v in np.ravel(values[1]))}, [0]
    if t == "Gather":
        return "gather", {"axis": int(o.get("axis", 0))}, [0, 1]
    if t == "GatherND":
        return "gather_nd", {}, [0, 1]
    if t == "GatherElements":
        return "gather_elements", {"axis": int(o.get("axis", 0))}, [0, 1]
    if t == "Concat":
        return "concat", {"axis": int(o["axis"])}, list(range(len(op.inputs)))
    if t == "CumSum" and values[1] is not None:
        return "cumsum", {"axis": int(np.ravel(values[1])[0]), "exclusive": bool(o.get("exclusive", 0)),
                          "reverse": bool(o.get("reverse", 0))}, [0]
    if t == "Tile":
        return "tile", {"repeats": tuple(int(v) for v in np.ravel(values[1]))}, [0]
    if t == "Slice":
        rank = np.ndim(values[0]) if values[0] is not None else None
        starts, ends = (np.ravel(values[i]).astype(np.int64) for i in (1, 2))
        axes = np.ravel(values[3]) if len(values) > 3 and values[3] is not None else np.arange(len(starts))
        steps = np.ravel(values[4]) if len(values) > 4 and values[4] is not None else np.ones(len(starts), np.int64)
        big = 1 << 62
        return "slice", {"slices": tuple((int(a) % rank, int(s), None if abs(int(e)) >= big else int(e), int(st))
                                         for a, s, e, st in zip(axes, starts, ends, steps))}, [0]
    raise PorterError(f"op {op.index} {t}: onnxruntime runs it in float in this QDQ graph, and porter has no "
                      "kernel for it")


def _pow_exponent(op: Op, values: list, shapes: list | None) -> float:
    """The exponent of a Pow onnxruntime computes by products: one value, 2 or 3, that its
    broadcaster hands the kernel as the scalar of a span of bases (`scalar_operands`); anything
    else is std::pow, refused by name."""
    exponent = values[1] if len(values) > 1 else None
    base_shape = tuple(shapes[0]) if shapes and shapes[0] is not None else None
    if exponent is None:
        form = "a computed exponent"
    elif np.size(exponent) != 1:
        form = f"an exponent tensor of shape {list(np.shape(exponent))}"
    elif float(np.ravel(exponent)[0]) not in POW_BY_PRODUCTS:
        form = f"exponent {np.ravel(exponent)[0]}"
    elif base_shape is not None and scalar_operands(base_shape, np.shape(exponent))[0]:
        form = (f"a base of shape {list(base_shape)} its broadcaster takes one value at a time, by exponent "
                f"{np.ravel(exponent)[0]}")
    else:
        return float(np.ravel(exponent)[0])
    raise PorterError(f"op {op.index} Pow: {form}: onnxruntime computes it with std::pow (libm's powf), which "
                      "porter does not reproduce; it reproduces Pow by a constant 2 or 3, which onnxruntime "
                      "computes as x * x and (x * x) * x")


def scalar_operands(shape0: tuple, shape1: tuple) -> tuple[bool, bool]:
    """Whether onnxruntime's Broadcaster (element_wise_ops.h) hands a binary kernel input 0, and
    input 1, as one value per span (IsInput0Scalar / IsInput1Scalar: the input does not advance
    along the span's axis). The span's axis is the last one when either shape is a scalar ([]),
    else the innermost axis of the shared trailing ones where either is more than 1 (or the
    outermost shared one); the kernel's scalar-input-0 path is taken first."""
    if not shape0 or not shape1:
        last = (shape1 or shape0 or (1,))[-1]
        return (not shape0) or last <= 1, (not shape1) or last <= 1
    for k in range(1, min(len(shape0), len(shape1)) + 1):
        a, b = shape0[-k], shape1[-k]
        if max(a, b) > 1 or k == min(len(shape0), len(shape1)):
            return a <= 1, b <= 1
    raise AssertionError("unreachable")
