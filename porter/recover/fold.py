"""Numpy semantics of the ONNX ops that shuffle constants and masks, for two uses in recovery.

1. Constant folding: exporters compute position ids, token-type rows, mask broadcasts and
   reshape targets with small op chains over constants (the TorchScript exporter even computes
   shapes with Shape/ConstantOfShape/Concat). Evaluating every op whose inputs are all known
   turns those chains into constants, so that the encoder patterns only see the real network.
2. The attention mask path: whatever ops an exporter uses between the attention_mask input and
   the bias added to the scores, recovery runs that path on probe masks and checks that it adds
   0 to kept keys and one large negative number to padded ones (porter.recover).

Only data-movement, comparison and elementwise ops on small tensors are here; anything else is
left to the patterns (and reported if nothing explains it).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from porter.frontends.graph import Graph, Op

# ONNX TensorProto element types the mask and shape chains cast to.
_CAST_TYPES = {1: np.float32, 6: np.int32, 7: np.int64, 9: np.bool_, 11: np.float64}


def _cast(op, x):
    return x.astype(_CAST_TYPES[op.options["to"]])


def _gather(op, data, indices):
    return np.take(data, indices, axis=op.options.get("axis", 0))


def _gather_nd(op, data, indices):
    if op.options.get("batch_dims", 0):
        raise KeyError("GatherND batch_dims")
    k = indices.shape[-1]
    flat = indices.reshape(-1, k)
    picked = data[tuple(flat.T)]
    return picked.reshape(indices.shape[:-1] + data.shape[k:])


def _reshape(op, x, shape):
    shape = [int(d) for d in shape]
    if not op.options.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _flatten(op, x):
    axis = op.options.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)


def _axes(op, axes):
    return [int(a) for a in (axes if axes is not None else op.options.get("axes", []))]


def _unsqueeze(op, x, axes=None):
    out = x
    for a in sorted(a % (x.ndim + len(_axes(op, axes))) for a in _axes(op, axes)):
        out = np.expand_dims(out, a)
    return out


def _squeeze(op, x, axes=None):
    return np.squeeze(x, axis=tuple(_axes(op, axes)) or None)


def _constant_of_shape(op, shape):
    value = op.options.get("value", np.zeros(1, np.float32))
    return np.full([int(d) for d in shape], value.reshape(-1)[0], dtype=value.dtype)


def _expand(op, x, shape):
    return x * np.ones([int(d) for d in shape], dtype=x.dtype)


def _slice(op, x, starts, ends, axes=None, steps=None):
    axes = range(len(starts)) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a)] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _dequantize(op, x, scale, zero_point=None):
    # onnxruntime: float(int32(x) - int32(zero_point)) * scale, one rounding.
    zp = 0 if zero_point is None else zero_point.astype(np.int32)
    return ((x.astype(np.int32) - zp).astype(np.float32) * scale.astype(np.float32)).astype(np.float32)


EVALUATORS = {
    "Cast": _cast,
    "Gather": _gather,
    "GatherND": _gather_nd,
    "Reshape": _reshape,
    "Flatten": _flatten,
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Expand": _expand,
    "Slice": _slice,
    "ConstantOfShape": _constant_of_shape,
    "Concat": lambda op, *xs: np.concatenate(xs, axis=op.options.get("axis", 0)),
    "Transpose": lambda op, x: np.transpose(x, op.options.get("perm")),
    "Identity": lambda op, x: x,
    "And": lambda op, a, b: np.logical_and(a, b),
    "Or": lambda op, a, b: np.logical_or(a, b),
    "Not": lambda op, a: np.logical_not(a),
    "Equal": lambda op, a, b: np.equal(a, b),
    "Greater": lambda op, a, b: np.greater(a, b),
    "GreaterOrEqual": lambda op, a, b: np.greater_equal(a, b),
    "Less": lambda op, a, b: np.less(a, b),
    "LessOrEqual": lambda op, a, b: np.less_equal(a, b),
    "Where": lambda op, c, a, b: np.where(c, a, b),
    "Add": lambda op, a, b: a + b,
    "Sub": lambda op, a, b: a - b,
    "Mul": lambda op, a, b: a * b,
    # integer Div truncates towards zero, as C does
    "Div": lambda op, a, b: a / b if a.dtype.kind == "f" else np.trunc(a / b).astype(a.dtype),
    "DequantizeLinear": _dequantize,
}


def evaluate(op: Op, values: list) -> list[np.ndarray]:
    """The op's outputs for numpy input values (None for an omitted optional input)."""
    while values and values[-1] is None:
        values = values[:-1]
    out = EVALUATORS[op.type](op, *values)
    return [np.asarray(out)]


def _static_shape(g: Graph, t: int) -> np.ndarray | None:
    shape = g.tensor(t).shape
    return np.array(shape, np.int64) if all(d >= 0 for d in shape) else None


def fold_constants(g: Graph) -> tuple[Graph, set[int]]:
    """A copy of `g` in which every op computable from constants has constant outputs.

    Ops stay in the graph (their indices are how errors and the IR name them); the returned set
    says which ones were folded, so that recovery accounts for them. Shape of a tensor whose
    shape is static folds too. Ops whose semantics porter does not evaluate are left alone.
    """
    tensors = list(g.tensors)
    folded: set[int] = set()
    for op in g.ops:
        if len(op.outputs) != 1 or (op.type not in EVALUATORS and op.type != "Shape"):
            continue
        if op.type == "Shape":
            value = _static_shape(g, op.inputs[0])
        elif all(t < 0 or tensors[t].data is not None for t in op.inputs):
            try:
                value = evaluate(op, [tensors[t].data if t >= 0 else None for t in op.inputs])[0]
            except (KeyError, ValueError, TypeError, IndexError):
                value = None  # an attribute or shape porter does not evaluate: leave it
        else:
            value = None
        if value is None:
            continue
        out = tensors[op.outputs[0]]
        tensors[out.index] = replace(out, data=value, shape=value.shape, dtype=str(value.dtype))
        folded.add(op.index)
    return Graph(g.format, g.path, tensors, g.ops, g.inputs, g.outputs, g.metadata), folded


def run_region(g: Graph, ops: list[int], feeds: dict[int, np.ndarray], want: int) -> np.ndarray:
    """Evaluates the ops `ops` (graph order) from `feeds` and constants; returns tensor `want`."""
    values = dict(feeds)
    for i in ops:
        op = g.ops[i]
        inputs = [values[t] if t in values else g.const(t) for t in op.inputs]
        values[op.outputs[0]] = evaluate(op, inputs)[0]
    return values[want]
