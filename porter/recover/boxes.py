"""Which part of each tensor step's inputs its output's computed part reads.

A tensor step (porter.ir.tensor) computes a box of its output: along each axis, the whole axis
(Rows.ALL) or the first rows of the window along an axis of the window's tokens (Rows.LIVE,
Rows.KEYS). Live-row execution (porter.recover.rows) walks the program backwards and needs, for
each step, the box of every input that box reads: elementwise ops read the same positions
(broadcast axes aside), a permutation the permuted box, a product its rows of A and its columns
of B over the whole depth, a gather the gathered positions' leading axes, a cumulative sum the
prefix it adds. Whatever no rule here follows reads its inputs whole, which is always exact.
"""

from __future__ import annotations

from porter.ir.encoder import Rows
from porter.ir.tensor import ARITHMETIC, COMPARISONS, LOGICAL, UNARY, TensorOp, TensorStep

Box = tuple[Rows, ...]
ORDER = [Rows.ONE, Rows.LIVE, Rows.KEYS, Rows.ALL]
POINTWISE = (ARITHMETIC | COMPARISONS | LOGICAL | UNARY | {TensorOp.WHERE}) - {TensorOp.MOVE}


def whole(shape) -> Box:
    return tuple(Rows.ALL for _ in shape)


def box_union(a: Box | None, b: Box) -> Box:
    return b if a is None else tuple(max(x, y, key=ORDER.index) for x, y in zip(a, b))


def _aligned(box: Box, out_shape, in_shape) -> Box:
    """An operand broadcast against the output (numpy aligns trailing axes): the output's box on
    its own axes, the whole of any axis it broadcasts (one value)."""
    offset = len(out_shape) - len(in_shape)
    return tuple(Rows.ALL if in_shape[a] != out_shape[a + offset] else box[a + offset] for a in range(len(in_shape)))


def operand_boxes(step: TensorStep, box: Box) -> list[Box]:
    """The box of each operand (in its own shape) that the step's output `box` reads."""
    shapes = [tuple(o.shape) for o in step.operands]
    out, op = tuple(step.shape), step.op
    if op in POINTWISE:
        return [_aligned(box, out, s) for s in shapes]
    if op == TensorOp.MOVE:  # out = the operand's axes permuted, then broadcast (trailing axes aligned)
        perm, x = step.attrs["perm"], shapes[0]
        offset = len(out) - len(x)
        moved = [Rows.ALL] * len(x)
        for i, a in enumerate(perm):
            moved[a] = box[i + offset] if x[a] == out[i + offset] else Rows.ALL
        return [tuple(moved)]
    if op == TensorOp.MATMUL:
        a, b = shapes
        rows, cols = box[-2], box[-1]
        batch = box[:-2]
        a_box = _aligned(batch + (rows, Rows.ALL), out[:-2] + (out[-2], a[-1]), a)
        b_cols = (cols, Rows.ALL) if step.attrs.get("adj_b") else (Rows.ALL, cols)
        b_out = out[:-2] + ((out[-1], b[-1]) if step.attrs.get("adj_b") else (b[-2], out[-1]))
        return [a_box, _aligned(batch + b_cols, b_out, b)]
    if op == TensorOp.GATHER_ELEMENTS:
        axis = step.attrs["axis"]
        data = tuple(Rows.ALL if a == axis or shapes[0][a] != out[a] else box[a] for a in range(len(out)))
        return [data, _aligned(box, out, shapes[1])]
    if op == TensorOp.GATHER:
        axis, index_rank = step.attrs["axis"], len(shapes[1])
        data = tuple(box[a] if a < axis else Rows.ALL if a == axis else box[a + index_rank - 1]
                     for a in range(len(shapes[0])))
        return [data, box[axis:axis + index_rank]]
    if op == TensorOp.GATHER_ND:
        return [whole(shapes[0]), box[:len(shapes[1]) - 1] + (Rows.ALL,)]
    if op == TensorOp.LOOKUP:  # rows of a whole table at the box's indices (and their scales)
        return [whole(shapes[0]), box[:-1]] + [whole(s) for s in shapes[2:]]
    if op == TensorOp.CUMSUM and not step.attrs.get("reverse"):
        return [box]  # a prefix along the axis adds only the values before it
    return [whole(s) for s in shapes]
