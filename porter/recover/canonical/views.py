"""Views: a view op's target shape from its file op's inputs and attributes (reshape, squeeze,
unsqueeze, expand_dims, flatten), and chains of views merged into one view."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op
from porter.recover.canonical.builder import Builder, Pass, const_ints


def view_target(b: Builder, g: Graph, op: Op) -> None:
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


def _untranslated_before(b: Builder, t: int) -> Op | None:
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


def _tflite_view_shape(b: Builder, op: Op, in_shape: list[int], out_shape: list[int]) -> list[int]:
    if op.type == "EXPAND_DIMS":
        axis = const_ints(b, op, op.inputs[1], "the axis")[0] % (len(in_shape) + 1)
        return in_shape[:axis] + [1] + in_shape[axis:]
    if op.type == "SQUEEZE":
        dims = op.options.get("squeeze_dims") or [i for i, d in enumerate(in_shape) if d == 1]
        drop = {d % len(in_shape) for d in dims}
        return [d for i, d in enumerate(in_shape) if i not in drop]
    target = list(out_shape)
    if len(op.inputs) > 1 and op.inputs[1] >= 0 and b.const(op.inputs[1]) is not None:
        target = const_ints(b, op, op.inputs[1], "the new shape")
    known = int(np.prod([d for d in target if d >= 0]))
    if -1 not in target and known == int(np.prod(in_shape)):
        return target
    if target.count(-1) != 1 or known == 0 or int(np.prod(in_shape)) % known:
        raise PorterError(f"{op.describe()}: cannot work out its output shape {out_shape} from an "
                          f"input of {in_shape}")
    target[target.index(-1)] = int(np.prod(in_shape)) // known
    return target


def _onnx_view_shape(b: Builder, op: Op, in_shape: list[int]) -> list[int]:
    if op.type == "Reshape":
        target = const_ints(b, op, op.inputs[1], "the target shape")
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
        axes = const_ints(b, op, op.inputs[1], "the axes")
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


def merge_views(p: Pass) -> None:
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


