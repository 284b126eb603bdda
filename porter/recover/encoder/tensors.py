"""Tensor steps: the graph's own ops, one step each, over typed tensors of any shape.

What a score term is computed from (porter.ir.tensor): products of activations with constants or
with each other, gathers at constant or computed indices, permutations and broadcasts, casts,
comparisons, selections, cumulative sums and integer arithmetic. Each canonical op becomes one
step with the canonical op's meaning in the reference runtime's arithmetic; an op with no such
step is left to the caller's refusal. Float elementwise arithmetic over float32 tensors stays an
elementwise step (porter.ir.encoder.ElementwiseStep).
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Tensor
from porter.ir.encoder import Reference
from porter.ir.tensor import DTYPES, MOVES_NARROW, NARROW, TensorOp, TensorStep

# canonical op -> tensor op, for ops no other step runs
OPS = {op.value: op for op in TensorOp if op != TensorOp.MOVE}  # embedding_lookup: LOOKUP
MOVES = ("permute", "expand")
# float32 arithmetic of these runs as an elementwise step
FLOAT_ELEMENTWISE = {"add", "sub", "mul", "div", "maximum", "minimum", "neg", "abs"}


def tensor_step(g: Graph, op: Op, operand, where: str, ref: Reference, downstream: bool = False) -> TensorStep | None:
    """The tensor step computing canonical op `op` (`where` names it), or None when no tensor step
    does (`operand` makes a step input of a tensor). Float32 arithmetic is an elementwise step
    unless it reads what a tensor step computes (`downstream`): then it is computed as a tensor
    step, where it is read. A use of an op whose reference kernel porter does not reproduce is
    refused naming it."""
    if op.type in FLOAT_ELEMENTWISE and not downstream \
            and all(g.tensor(t).dtype == "float32" for t in [*op.inputs, *op.outputs]):
        return None
    kind = TensorOp.MOVE if op.type in MOVES else OPS.get(op.type)
    out = g.tensor(op.outputs[0])
    dtypes = tuple(g.tensor(t).dtype for t in op.inputs)
    if kind is None or out.dtype not in DTYPES or any(d not in DTYPES for d in dtypes):
        return None
    if kind not in MOVES_NARROW and any(d in NARROW for d in (*dtypes, out.dtype)):
        return None  # 8-bit arithmetic (its wrapping) has no tensor step
    attrs = _attributes(g, op, kind)
    if attrs is None:
        return None
    _refuse_unreproduced(g, op, kind, dtypes, where, ref)
    inputs = list(op.inputs)
    if kind == TensorOp.LOOKUP:  # EMBEDDING_LOOKUP(ids, table): the table first, an int8 one's row scales last
        inputs = [op.inputs[1], op.inputs[0]]
        if op.options.get("scale") is not None:
            inputs.append(_constant(g, op.inputs[1], np.asarray(op.options["scale"], np.float32).reshape(-1)))
        dtypes = tuple(g.tensor(t).dtype for t in inputs)
    if kind == TensorOp.GATHER_ND and (last := _gather_nd_as_elements(g, op)) is not None:
        kind, attrs = TensorOp.GATHER_ELEMENTS, {"axis": len(out.shape) - 1}
        inputs[1], dtypes = _constant(g, op.inputs[1], last), (dtypes[0], str(last.dtype))
    if kind == TensorOp.GATHER_ELEMENTS and g.const(inputs[1]) is not None:
        inputs[1] = _constant(g, inputs[1], _compact(np.asarray(g.const(inputs[1]))))
    operands = [operand(t) for t in inputs]
    return TensorStep(op.type, [o.buffer for o in operands if o.buffer], [f"t{op.outputs[0]}"], [], kind, operands,
                      tuple(out.shape), out.dtype, {**attrs, "in_dtypes": dtypes})


def _attributes(g: Graph, op: Op, kind: TensorOp) -> dict | None:
    rank = len(g.tensor(op.outputs[0]).shape)
    if kind == TensorOp.MATMUL:
        if op.options.get("adj_a"):
            return None  # no reference kernel reads A transposed
        return {"adj_b": bool(op.options.get("adj_b")), "alpha": float(op.options.get("alpha", 1.0))}
    if kind == TensorOp.MOVE:  # a permutation, or an expand: the operand's own axes, broadcast
        return {"perm": tuple(op.options["perm"]) if op.type == "permute"
                else tuple(range(len(g.tensor(op.inputs[0]).shape)))}
    if kind in (TensorOp.GATHER, TensorOp.GATHER_ELEMENTS):
        data_rank = len(g.tensor(op.inputs[0]).shape)
        return {"axis": int(op.options.get("axis", 0)) % max(data_rank, 1)}
    if kind == TensorOp.CUMSUM:
        return {"axis": int(op.options["axis"]) % rank, "exclusive": bool(op.options.get("exclusive")),
                "reverse": bool(op.options.get("reverse"))}
    if kind == TensorOp.DEQUANTIZE:
        scale, zero_point = (np.asarray(op.options[k]).reshape(-1) for k in ("scale", "zero_point"))
        if scale.size != 1 or zero_point.size != 1:
            return None  # per channel: no tensor step
        return {"scale": float(np.float32(scale[0])), "zero_point": int(zero_point[0])}
    return {}


def _refuse_unreproduced(g: Graph, op: Op, kind: TensorOp, dtypes: tuple, where: str, ref: Reference) -> None:
    """The uses of these ops whose reference kernel porter does not reproduce."""
    reason = None
    if kind == TensorOp.SIGN and ref == Reference.ONNXRUNTIME_CPU and dtypes[0] == "float32":
        reason = "onnxruntime's Sign of a float (Eigen's, whose NaN is not measured) is not emulated yet"
    elif kind == TensorOp.CUMSUM and dtypes[0] == "float32":
        reason = "a running sum of floats (its order per runtime) is not reproduced; integer sums are"
    elif kind == TensorOp.MATMUL and ref == Reference.ONNXRUNTIME_CPU and _gemm_rows(g, op) == 1:
        reason = "a product of one row takes MLAS's M = 1 kernel, which porter runs only in attention"
    elif kind == TensorOp.MATMUL and any(d != "float32" for d in dtypes):
        reason = "a product of other values than float32"
    if reason:
        raise PorterError(f"{where}: {reason}")


def _gemm_rows(g: Graph, op: Op) -> int:
    """The rows of onnxruntime's GEMM for a MatMul: A's batch is folded into its rows when B has none."""
    a, b = (g.tensor(t).shape for t in op.inputs)
    rows = int(np.prod(a[:-1])) if all(d == 1 for d in b[:-2]) else a[-2]
    return rows


def _gather_nd_as_elements(g: Graph, op: Op) -> np.ndarray | None:
    """A GatherND / GATHER_ND at constant indices whose leading components are each position's own
    (out[i, j, .., k] = data[i, j, .., index[i, j, .., k]]: litert-torch's spelling of
    torch.gather) gathers along data's last axis: that last component, one per output value."""
    data_shape, index = tuple(g.tensor(op.inputs[0]).shape), g.const(op.inputs[1])
    rank = len(data_shape)
    if index is None or rank < 2 or index.shape != data_shape[:-1] + (index.shape[-2], rank):
        return None
    positions = np.indices(index.shape[:-1])
    if not all(np.array_equal(index[..., a], positions[a]) for a in range(rank - 1)):
        return None
    return np.ascontiguousarray(index[..., -1])


def _compact(index: np.ndarray) -> np.ndarray:
    """A constant index stored once along every axis it does not vary on (read broadcast): DeBERTa's
    bucketed relative positions are the same for every head."""
    for axis in range(index.ndim):
        if index.shape[axis] > 1 and np.all(index == index.take([0], axis=axis)):
            index = index.take([0], axis=axis)
    return np.ascontiguousarray(index)


def _constant(g: Graph, like: int, value: np.ndarray) -> int:
    """A new constant tensor of the graph holding `value` (another form of constant `like`)."""
    t = g.tensor(like)
    index = len(g.tensors)
    g.tensors.append(Tensor(index, f"{t.name}/{len(g.tensors)}", tuple(value.shape), str(value.dtype), None, value))
    return index


def stored(value: np.ndarray, where: str) -> np.ndarray:
    """A constant operand as model.bin holds it: float32, int32 (int64 values that fit and 8-bit
    ones: the step reads them back as their dtype), or bool as one byte each."""
    value = np.asarray(value)
    if value.dtype == np.bool_:
        return value.astype(np.uint8)
    if value.dtype.kind in "iu":
        if value.size and (value.min() < np.iinfo(np.int32).min or value.max() > np.iinfo(np.int32).max):
            raise PorterError(f"{where}: an integer constant beyond int32 ({value.min()}..{value.max()})")
        return value.astype(np.int32)
    return np.asarray(value, np.float32)
