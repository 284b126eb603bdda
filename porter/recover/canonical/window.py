"""Binding a graph's symbolic dimensions to the window porter compiles (issue 30.1).

Exporters with dynamic axes (torch.onnx's `dynamic_axes` / `dynamic_shapes`, TFLite signatures
with -1 in shape_signature) leave the batch and sequence dimensions of the inputs symbolic, and
every shape computed from them unknown or symbolic too. porter runs one window of a fixed length
at a time, so it binds them: an input's leading dynamic dimension (the batch) is 1, every other
dynamic dimension is the window. The window is the caller's (`porter compile --window N`, or the
golden's window), else the size of the graph's position table, else refused naming the
dimension.

Once the inputs are bound, every shape an op computes is forgotten (its rank kept) and worked
out again by canonicalisation, op by op from the inputs (porter.recover.canonical.fold.settle):
nothing relies on the shapes the file declares in its value_info, which an exporter writes for
the symbolic dimensions or not at all.
"""

from __future__ import annotations

from dataclasses import replace

from porter.errors import PorterError
from porter.frontends.graph import Graph

# Ops that read only their input's shape, never its values: a table read at indices computed
# through these alone is read at positions (0, 1, ..., or a constant buffer sliced to the length).
_SHAPE_ONLY = {"Shape", "SHAPE", "Size"}
_LOOKUPS = {"Gather", "GATHER", "EMBEDDING_LOOKUP"}
# onnxruntime's fused embeddings: without a position ids input it reads rows 0 .. S-1 of input 3
_EMBED_LAYER_NORM = "com.microsoft.EmbedLayerNormalization"


def dynamic_dims(g: Graph) -> list[tuple[str, int, str]]:
    """(input, axis, dimension name) of every dynamic input dimension besides a leading batch."""
    names = g.metadata.get("dim_params", {}) if g.metadata else {}
    found = []
    for name, t in g.inputs.items():
        shape = g.tensor(t).shape
        for axis, d in enumerate(shape):
            if d < 0 and axis > 0:
                given = (names.get(name) or [None] * len(shape))[axis]
                found.append((name, axis, given or f"dimension {axis}"))
    return found


def position_table_rows(g: Graph) -> int | None:
    """The rows of the position table: the largest constant table a lookup reads at indices that
    depend on the inputs' shapes only (never their values). None if no lookup does."""
    producers = {out: op for op in g.ops for out in op.outputs}
    rows = []
    for op in g.ops:
        if op.type == _EMBED_LAYER_NORM and len(op.inputs) > 3 and g.const(op.inputs[3]) is not None \
                and (len(op.inputs) < 9 or op.inputs[8] < 0):
            rows.append(g.tensor(op.inputs[3]).shape[0])  # it reads its positions 0 .. S-1
        if op.type not in _LOOKUPS or len(op.inputs) < 2:
            continue
        table, index = (op.inputs[1], op.inputs[0]) if op.type == "EMBEDDING_LOOKUP" else op.inputs[:2]
        if table < 0 or g.const(table) is None or len(g.tensor(table).shape) != 2:
            continue
        if g.const(index) is None and _reads_inputs_shape_only(g, index, producers):
            rows.append(g.tensor(table).shape[0])
    return max(rows) if rows else None


def _reads_inputs_shape_only(g: Graph, t: int, producers) -> bool:
    """Whether tensor t is computed from constants and the inputs' shapes, and from some input's."""
    todo, seen, via_shape = [t], set(), False
    while todo:
        t = todo.pop()
        if t < 0 or t in seen or g.const(t) is not None:
            continue
        seen.add(t)
        op = producers.get(t)
        if op is None:
            return False  # a graph input's values
        if op.type in _SHAPE_ONLY:
            via_shape = True
            continue
        todo.extend(op.inputs)
    return via_shape


def bind(g: Graph, window: int | None) -> Graph:
    """The graph with its inputs' dynamic dimensions bound (batch 1, the rest `window`, or the
    position table's rows) and, if any was dynamic, every computed shape left for
    canonicalisation to infer. A graph without dynamic dimensions is returned as it is, unless
    `window` differs from its fixed length."""
    dims = dynamic_dims(g)
    batch_only = any(g.tensor(t).shape and g.tensor(t).shape[0] < 0 for t in g.inputs.values())
    if not dims:
        _check_fixed_window(g, window)
        if not batch_only:
            return g
    elif window is None:
        window = position_table_rows(g)
        if window is None:
            name, axis, dim = dims[0]
            raise PorterError(f"input '{name}' has the dynamic dimension '{dim}' (axis {axis}) and the graph "
                              "reads no position table whose size would bound it: give the window with "
                              "--window N (or a golden, whose window is used)")
    if window is not None and window < 1:
        raise PorterError(f"--window {window}: a window holds at least one token")
    tensors = list(g.tensors)
    for t in g.inputs.values():
        shape = tensors[t].shape
        bound = tuple((1 if axis == 0 else window) if d < 0 else d for axis, d in enumerate(shape))
        tensors[t] = replace(tensors[t], shape=bound)
    if g.format == "onnx":
        computed = {out for op in g.ops for out in op.outputs}
        for t in computed:
            if tensors[t].data is None:
                tensors[t] = replace(tensors[t], shape=tuple(-1 for _ in tensors[t].shape))
    return Graph(g.format, g.path, tensors, g.ops, dict(g.inputs), dict(g.outputs), g.metadata)


def _check_fixed_window(g: Graph, window: int | None) -> None:
    """A graph exported for a fixed window runs that window only."""
    if window is None:
        return
    for name, t in g.inputs.items():
        shape = g.tensor(t).shape
        if len(shape) >= 2 and shape[-1] != window:
            raise PorterError(f"a window of {window} tokens was asked for (--window or the golden's), but "
                              f"input '{name}' ({g.tensor(t).describe()}) has a fixed window of {shape[-1]} "
                              "tokens (its graph was exported without dynamic axes)")
