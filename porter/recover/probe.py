"""Deciding what a piece of graph computes by running it: regions of canonical ops evaluated on
probe inputs (porter.reference.ops gives each op its reference runtime's arithmetic).

Recovery uses this where spellings vary without end: the attention mask path (any function of
the mask input that keeps or drops keys), position ids computed from the ids, head split and
merge layouts, and the final proof that a recovered block computes what the graph's own ops do.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.encoder import Reference
from porter.reference.ops import Unsupported, evaluate


def region(g: Graph, end: int, stop: set[int] | None = None) -> list[int]:
    """Op indices computing tensor `end` from graph inputs, constants and the `stop` tensors,
    in graph order."""
    stop = stop or set()
    seen: set[int] = set()
    todo = [end]
    while todo:
        t = todo.pop()
        op = g.producer(t)
        if t in stop or op is None or op.index in seen:
            continue
        seen.add(op.index)
        todo.extend(i for i in op.inputs if i >= 0 and not g.tensor(i).is_const)
    return sorted(seen)


def leaves(g: Graph, ops: list[int]) -> set[int]:
    """The non-constant tensors a region reads that it does not compute."""
    made = {t for i in ops for t in g.ops[i].outputs}
    return {t for i in ops for t in g.ops[i].inputs
            if t >= 0 and not g.tensor(t).is_const and t not in made}


def run(g: Graph, ops: list[int], feeds: dict[int, np.ndarray], ref: Reference,
        keep: set[int] | None = None) -> dict[int, np.ndarray]:
    """Evaluates `ops` (graph order) from `feeds` and constants; returns every value computed
    (or only those in `keep`). Raises Unsupported for an op with no evaluator."""
    values = dict(feeds)
    for i in ops:
        op = g.ops[i]
        inputs = [values[t] if t in values else g.const(t) for t in op.inputs if t >= 0]
        if any(v is None for v in inputs):
            raise Unsupported(f"op {i} {op.type} reads a tensor the region does not provide")
        values[op.outputs[0]] = evaluate(op.type, op.options, inputs, ref)
    return values if keep is None else {t: values[t] for t in keep}


def index_map(g: Graph, ops: list[int], source: int, end: int) -> np.ndarray | None:
    """Where each element of tensor `end` comes from in `source`, for a chain of data-movement
    ops (views, permutations, slices): the chain evaluated on the flat indices of `source`.
    None when the chain does anything but move data."""
    shape = g.tensor(source).shape
    if any(d < 0 for d in shape):
        return None
    positions = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    try:
        out = run(g, ops, {source: positions}, Reference.LITERT_BUILTIN, keep={end})[end]
    except Unsupported:
        return None
    return out if out.dtype == np.int64 else None


def probe_masks(seq: int) -> list[np.ndarray]:
    """Masks that tell every key position apart: all live, alternating, a live prefix, a
    single live token."""
    positions = np.arange(seq)
    return [np.ones(seq, np.int64), (positions % 2 == 0).astype(np.int64),
            (positions % 3 != 1).astype(np.int64), (positions < max(seq // 3, 1)).astype(np.int64),
            (positions == 0).astype(np.int64)]


def probe_ids(seq: int, vocab: int, pad_id: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Id windows with padding at the end, in the middle, none, and a run of pad ids."""
    windows = []
    for live in (seq, seq - 1, seq // 2, 3):
        ids = rng.integers(0, vocab, seq)
        ids[ids == pad_id] = (pad_id + 1) % vocab
        ids[live:] = pad_id
        windows.append(ids)
    scattered = rng.integers(0, vocab, seq)
    scattered[::3] = pad_id
    windows.append(scattered)
    return windows


def describe_op(g: Graph, i: int) -> str:
    op = g.ops[i]
    ins = ", ".join(g.tensor(t).describe() if t >= 0 else "-" for t in op.inputs)
    return f"op {i} {op.type}({ins})"


def refuse_unevaluable(g: Graph, ops: list[int], where: str) -> PorterError:
    return PorterError(f"{where}: porter cannot evaluate the ops on this path: "
                       + "; ".join(describe_op(g, i) for i in ops[:4]))
