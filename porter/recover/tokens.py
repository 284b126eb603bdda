"""Which axis of each tensor runs over the window's tokens, followed through the data flow.

Shapes alone cannot say it (a [1, 64] tensor is a pooled 64-wide vector in one model and a row
of 64 tokens in another), so the token axis starts at the token-id and mask inputs and is carried
through every op: elementwise ops broadcast it, reductions and slices over it remove it, views
and permutations move it. A tensor is *token-major* when its token axis is its first axis of size
above one: its flat data is then one row per token, which is what lets porter compute only some
rows. An op that reads a token axis in any other way *mixes* rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.frontends.graph import Graph

ELEMENTWISE = {"add", "sub", "mul", "div", "maximum", "minimum", "squared_difference", "pow",
               "neg", "abs", "sqrt", "rsqrt", "tanh", "exp", "erf", "relu", "sigmoid", "gelu",
               "cast", "equal", "not_equal", "greater", "greater_equal", "less", "less_equal",
               "logical_and", "logical_or", "logical_not", "where", "dequantize", "round_half"}


@dataclass
class TokenAxes:
    seq: int
    axis: dict[int, int] = field(default_factory=dict)  # tensor -> its token axis
    mixing: set[int] = field(default_factory=set)  # ops that mix token rows

    def of(self, t: int) -> int | None:
        return self.axis.get(t)

    def token_major(self, g: Graph, t: int) -> bool:
        a = self.axis.get(t)
        if a is None:
            return False
        return all(d == 1 for d in g.tensor(t).shape[:a])


def view_axis(in_shape, out_shape, axis: int) -> int | None:
    """The axis of `out_shape` that axis `axis` of `in_shape` (the same values, another shape)
    is: the one of the same size after the same number of values, or None."""
    before = int(np.prod(in_shape[:axis]))
    acc = 1
    for a, d in enumerate(out_shape):
        if acc == before and d == in_shape[axis]:
            return a
        acc *= d
    return None


def _broadcast_axis(g: Graph, op, axes: TokenAxes) -> int | None:
    out_rank = len(g.tensor(op.outputs[0]).shape)
    found = set()
    for t in op.inputs:
        if t < 0 or axes.of(t) is None:
            continue
        found.add(axes.of(t) + out_rank - len(g.tensor(t).shape))
    return found.pop() if len(found) == 1 else None


def token_axes(g: Graph, seq: int, sources: dict[int, int], skip: set[int]) -> TokenAxes:
    """The token axis of every tensor reachable from `sources` (tensor -> its token axis); the
    ops in `skip` belong to blocks whose outputs are among the sources."""
    axes = TokenAxes(seq, dict(sources))
    for op in g.ops:
        if op.index in skip:
            continue
        carried = [t for t in op.inputs if t >= 0 and axes.of(t) is not None]
        if not carried or not op.outputs:
            continue
        out = op.outputs[0]
        x = carried[0]
        kind = op.type
        if kind in ELEMENTWISE:
            a = _broadcast_axis(g, op, axes)
            if a is None:
                axes.mixing.add(op.index)
            else:
                axes.axis[out] = a
        elif kind in ("linear", "softmax", "layer_norm") and axes.of(x) != len(g.tensor(x).shape) - 1:
            # rows in, rows out; a FULLY_CONNECTED may drop the leading axes of size one
            a = view_axis(g.tensor(x).shape[:-1], g.tensor(out).shape[:-1], axes.of(x))
            if a is None:
                axes.mixing.add(op.index)
            else:
                axes.axis[out] = a
        elif kind in ("reduce_mean", "reduce_sum", "reduce_max"):
            rank = len(g.tensor(x).shape)
            reduced = {a % rank for a in (op.options.get("axes") or range(rank))}
            a = axes.of(x)
            if a in reduced:
                axes.mixing.add(op.index)
            else:
                axes.axis[out] = a if op.options.get("keepdims", True) else a - sum(r < a for r in reduced)
        elif kind in ("view", "expand"):
            a = view_axis(g.tensor(x).shape, g.tensor(out).shape, axes.of(x)) if kind == "view" \
                else axes.of(x) + len(g.tensor(out).shape) - len(g.tensor(x).shape)
            if a is None:
                axes.mixing.add(op.index)
            else:
                axes.axis[out] = a
        elif kind == "permute":
            axes.axis[out] = list(op.options["perm"]).index(axes.of(x))
        elif kind in ("gather", "embedding_lookup") and x == op.inputs[-1 if kind == "gather" else 0]:
            # a lookup by token ids: the ids' axes come first in the output
            axes.axis[out] = axes.of(x)
        elif kind == "slice":
            a = axes.of(x)
            if any(axis == a for axis, *_ in op.options["slices"]):
                axes.mixing.add(op.index)
            else:
                axes.axis[out] = a
        else:
            axes.mixing.add(op.index)
    return axes
