"""The embedding sum recognised by role: a lookup by the token ids, plus terms added one by one.

The word lookup is whatever reads a big constant table with the ids (EMBEDDING_LOOKUP, GATHER
then DEQUANTIZE, Gather, Gather of a uint8 table then DequantizeLinear). Each term added to it
is a constant (position and token-type rows that folded, one row per position or one for all),
a token-type lookup (a smaller table indexed by another graph input: that input is the token
types, whatever its name), or a position lookup whose position ids are computed from the ids;
what those compute is decided by evaluating their path on probe windows (RoBERTa / XLM-R:
pad + cumsum(ids != pad)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Tensor
from porter.ir.encoder import INPUT_IDS, INPUT_TYPES, Embed, EmbedTerm, Lookup, Positions, Reference, TableKind, WeightFormat
from porter.recover import probe
from porter.recover.schemes import weight_scheme
from porter.reference.ops import Unsupported

PASS_THROUGH = ("view", "cast")


@dataclass
class Inputs:
    ids: int
    mask: int | None
    token_types: int | None


def root(g: Graph, t: int, through=PASS_THROUGH) -> int:
    while (op := g.producer(t)) is not None and op.type in through:
        t = op.inputs[0]
    return t


def lookups(g: Graph) -> list[tuple[Op, int, int]]:
    """(op, table tensor, index tensor) of every lookup of a constant table."""
    found = []
    for op in g.ops:
        if op.type == "embedding_lookup":
            found.append((op, op.inputs[1], op.inputs[0]))
        elif op.type == "gather" and g.const(op.inputs[0]) is not None and g.const(op.inputs[1]) is None \
                and op.options.get("axis", 0) == 0 and g.const(op.inputs[0]).ndim == 2:
            found.append((op, op.inputs[0], op.inputs[1]))
    return found


def index_source(g: Graph, ref: Reference, index: int, rows: int) -> tuple[int | None, set[int]]:
    """(the graph input whose values a lookup's indices are, the ops between them), or (None,
    set()). The indices may reach the input through views and casts, or through any ops that
    leave every valid id as it is (Keras wraps negative ids: where(ids < 0, ids + rows, ids)),
    which is decided by running them on probe ids."""
    source = root(g, index)
    if source in g.inputs.values():
        return source, _index_ops(g, index)
    path = probe.region(g, index)
    sources = probe.leaves(g, path)
    if len(sources) != 1 or not sources <= set(g.inputs.values()) or rows < 2:
        return None, set()
    source = sources.pop()
    t = g.tensor(source)
    ids = np.random.default_rng(3).integers(0, rows, t.shape).astype(t.dtype)
    try:
        got = probe.run(g, path, {source: ids}, ref, keep={index})[index]
    except Unsupported:
        return None, set()
    if got.size != ids.size or not np.array_equal(got.reshape(-1), ids.reshape(-1)):
        return None, set()
    return source, set(path)


def find_inputs(g: Graph, ref: Reference) -> Inputs:
    """Which graph input is the token ids (it reads the biggest table), which the token types
    (it reads a smaller table whose rows are added to the word rows), which the attention mask
    (the other one)."""
    by_input: dict[int, int] = {}
    for op, table, index in lookups(g):
        source, _ = index_source(g, ref, index, g.tensor(table).shape[0])
        if source is not None:
            by_input[source] = max(by_input.get(source, 0), g.tensor(table).shape[0])
    if not by_input:
        raise PorterError("no graph input is looked up in an embedding table: the graph is not a "
                          "transformer over token ids (or its ids go through ops porter does not follow)")
    ids = max(by_input, key=by_input.get)
    if not np.issubdtype(np.dtype(g.tensor(ids).dtype), np.integer):
        raise PorterError(f"the token ids input {g.tensor(ids).describe()} is not of an integer type")
    types = [t for t in _added_lookup_inputs(g, ref, ids) if t != ids and by_input.get(t, 0) < by_input[ids]]
    if len(types) > 1:
        names = ", ".join(g.tensor(t).describe() for t in types)
        raise PorterError(f"inputs {names} each index a table added to the word embeddings; porter feeds "
                          "one token-type input")
    others = [t for t in g.inputs.values() if t != ids and t not in types]
    if len(others) > 1:
        names = ", ".join(g.tensor(t).describe() for t in others)
        raise PorterError(f"the graph has inputs besides the token ids that porter cannot place: {names} "
                          "(porter feeds token ids, an attention mask and token types)")
    mask = others[0] if others else None
    if mask is not None and math.prod(g.tensor(mask).shape) != math.prod(g.tensor(ids).shape):
        raise PorterError(f"the attention mask input {g.tensor(mask).describe()} does not hold one value per "
                          f"token of the ids input {g.tensor(ids).describe()} (porter runs one window)")
    return Inputs(ids, mask, types[0] if types else None)


def _added_lookup_inputs(g: Graph, ref: Reference, ids: int) -> list[int]:
    """The graph inputs whose lookups are terms of the embedding sum: each tensor added, one by
    one, to the rows the ids read (the role of the token types, whatever the input's name)."""
    words = [x for x in lookups(g) if index_source(g, ref, x[2], g.tensor(x[1]).shape[0])[0] == ids]
    if len(words) != 1:
        return []
    op, _, _ = words[0]
    users = g.users(op.outputs[0])
    t = users[0].outputs[0] if len(users) == 1 and users[0].type == "dequantize" else op.outputs[0]
    found = []
    for _, other, _ in _sum_terms(g, t):
        lookup = _term_lookup(g, other)
        if lookup is not None:
            source, _ = index_source(g, ref, lookup[2], g.tensor(lookup[1]).shape[0])
            if source is not None and source in g.inputs.values():
                found.append(source)
    return found


def _sum_terms(g: Graph, t: int):
    """(add op, the other operand, the views before it) of each Add of the chain that starts at
    t, through views."""
    while True:
        t, view_ops = _through_views(g, t)
        users = g.users(t)
        if len(users) != 1 or users[0].type != "add" or t in g.outputs.values():
            return
        add = users[0]
        yield add, add.inputs[1] if add.inputs[0] == t else add.inputs[0], view_ops
        t = add.outputs[0]


def _term_lookup(g: Graph, t: int):
    """The lookup (op, table, index) whose rows, dequantized or viewed, are tensor t; or None."""
    while (op := g.producer(t)) is not None and op.type == "view":
        t = op.inputs[0]
    producer = g.producer(t)
    rows = producer.inputs[0] if producer is not None and producer.type == "dequantize" else t
    return next((x for x in lookups(g) if x[0].outputs[0] == rows), None)


def stored_table(g: Graph, table: int) -> Tensor:
    """The tensor a table is stored as: a float32 table folded from int8 or int4 rows with one
    scale (or one per row) and zero point 0 is stored as those rows, one int8 per value (int4
    values are int8 values), whose lookup (float(q) * scale of the row) gives the folded values
    exactly; one folded from float16 values (DEQUANTIZE of a float16 constant) as those halves,
    which widen to it exactly; any other table as itself."""
    t = g.tensor(table)
    stored = g.metadata.get("stored_forms", {}).get(table)
    if t.dtype != "float32" or stored is None:
        return t
    if stored.dtype == "float16" and stored.quant is None and stored.data.shape == t.data.shape:
        return stored
    if stored.dtype not in ("int8", "int4") or stored.quant.axis not in (None, 0):
        return t
    return replace(stored, dtype="int8")


def _lookup_kind(g: Graph, op: Op, table: int, where: str) -> tuple[TableKind, Op]:
    """The table kind, and the op whose output is the looked-up float rows."""
    t = stored_table(g, table)
    users = g.users(op.outputs[0])
    dequantized = len(users) == 1 and users[0].type == "dequantize"
    if t.dtype == "float32":
        return TableKind.FLOAT32, op
    if t.dtype == "float16":
        return TableKind.FLOAT16, op
    if op.type == "embedding_lookup" or t.index != table:
        scheme = weight_scheme(g, t, 0, where)
        per_row = scheme in (WeightFormat.INT8_PER_CHANNEL, WeightFormat.INT4_PER_CHANNEL)  # int4: rows * scale too
        return (TableKind.INT8_ROWS if per_row else TableKind.INT8_TENSOR), op
    if not dequantized:
        raise PorterError(f"{where}: {t.dtype} table {t.describe()} is used without dequantizing")
    deq = users[0]
    zero_point = np.asarray(deq.options.get("zero_point", 0)).reshape(-1)
    scale = np.asarray(deq.options["scale"], np.float32).reshape(-1)
    if scale.size != 1 or not (np.isfinite(scale[0]) and scale[0] > 0):
        raise PorterError(f"{where}: table {t.describe()} must have one positive scale, has {scale}")
    if t.dtype == "int8" and np.any(zero_point != 0):
        raise PorterError(f"{where}: int8 table {t.describe()} with zero point {zero_point[0]}")
    if t.dtype not in ("int8", "uint8"):
        raise PorterError(f"{where}: table {t.describe()} has dtype {t.dtype}")
    return (TableKind.INT8_TENSOR if t.dtype == "int8" else TableKind.UINT8_TENSOR), deq


def _table_arrays(g: Graph, name: str, kind: TableKind, table: int, rows_op: Op) -> dict:
    t = stored_table(g, table)
    arrays = {f"{name}.table": np.ascontiguousarray(t.data)}
    if kind == TableKind.INT8_ROWS:
        arrays[f"{name}.scale"] = np.asarray(t.quant.scale, np.float32)
    elif kind == TableKind.INT8_TENSOR:
        scale = t.quant.scale if rows_op.type != "dequantize" else rows_op.options["scale"]
        arrays[f"{name}.scale"] = np.asarray(scale, np.float32).reshape(1)
    elif kind == TableKind.UINT8_TENSOR:
        arrays[f"{name}.scale"] = np.asarray(rows_op.options["scale"], np.float32).reshape(1)
        arrays[f"{name}.zero_point"] = np.asarray(rows_op.options["zero_point"], np.int32).reshape(1)
    return arrays


@dataclass
class FoundEmbed:
    step: Embed
    ops: set[int]
    arrays: dict


def find(g: Graph, ref: Reference, inputs: Inputs, seq: int) -> FoundEmbed:
    candidates = [(op, table, index) for op, table, index in lookups(g)
                  if index_source(g, ref, index, g.tensor(table).shape[0])[0] == inputs.ids]
    if len(candidates) != 1:
        raise PorterError(f"the token ids are looked up in {len(candidates)} tables; porter expects one "
                          "word table")
    op, table, index = candidates[0]
    where = f"word embedding ({op.describe()})"
    kind, rows_op = _lookup_kind(g, op, table, where)
    word = Lookup("embed.word", kind, *g.tensor(table).shape)
    arrays = _table_arrays(g, word.name, kind, table, rows_op)
    ops = {op.index, rows_op.index} | index_source(g, ref, index, word.rows)[1]
    t = rows_op.outputs[0]
    terms: list[EmbedTerm] = []
    for add, other, view_ops in _sum_terms(g, t):
        term = _term(g, ref, inputs, seq, other, len(terms), arrays)
        if term is None:
            break
        terms.append(term[0])
        ops |= set(view_ops) | {add.index} | term[1]
        t = add.outputs[0]
    t, tail = _through_views(g, t)  # the sum's rows, past the views after its last term
    ops |= set(tail)
    reads = [INPUT_IDS] + ([INPUT_TYPES] if any(term.kind == "types" for term in terms) else [])
    step = Embed("embed", reads, [f"t{t}"], [], word, terms)
    return FoundEmbed(step, ops, arrays)


def _index_ops(g: Graph, index: int) -> set[int]:
    ops = set()
    while (op := g.producer(index)) is not None and op.type in PASS_THROUGH:
        ops.add(op.index)
        index = op.inputs[0]
    return ops


def _through_views(g: Graph, t: int) -> tuple[int, list[int]]:
    ops = []
    while len(users := g.users(t)) == 1 and users[0].type == "view" and t not in g.outputs.values():
        ops.append(users[0].index)
        t = users[0].outputs[0]
    return t, ops


def _term(g: Graph, ref, inputs: Inputs, seq: int, t: int, n: int, arrays: dict):
    """(the term, its ops) for the tensor added to the embedding sum, or None if it is not one."""
    value = g.const(t)
    width = arrays["embed.word.table"].shape[1]
    if value is not None:
        rows = np.asarray(value, np.float32)
        if rows.size == seq * width:
            rows = rows.reshape(seq, width)
        elif rows.size == width:
            rows = rows.reshape(width)
        else:
            return None
        arrays[f"embed.term{n}"] = np.ascontiguousarray(rows)
        return EmbedTerm("rows", f"embed.term{n}"), set()
    view_ops = set()
    source = t
    while (op := g.producer(source)) is not None and op.type == "view":
        view_ops.add(op.index)
        source = op.inputs[0]
    found = _term_lookup(g, t)
    if found is None:
        return None
    op, table, index = found
    kind, rows_op = _lookup_kind(g, op, table, f"embedding term ({op.describe()})")
    type_source, type_ops = index_source(g, ref, index, g.tensor(table).shape[0])
    if type_source == inputs.token_types and inputs.token_types is not None:
        name = f"embed.types{n}"
        arrays.update(_table_arrays(g, name, kind, table, rows_op))
        term = EmbedTerm("types", lookup=Lookup(name, kind, *g.tensor(table).shape))
        return term, view_ops | {op.index, rows_op.index} | type_ops
    path = probe.region(g, index)
    if probe.leaves(g, path) != {inputs.ids}:
        return None
    constant = _constant_index(g, ref, inputs.ids, index, path, seq, arrays["embed.word.table"].shape[0])
    if constant is not None:  # e.g. RoBERTa's buffered token types, gathered at the positions
        name = f"embed.term{n}"
        sub = _table_arrays(g, name, kind, table, rows_op)
        arrays[name] = np.stack([_dequantized_row(kind, sub, name, int(i)) for i in constant.reshape(-1)])
        if arrays[name].shape[0] == 1:
            arrays[name] = arrays[name][0]
        return EmbedTerm("rows", name), view_ops | {op.index, rows_op.index} | set(path)
    pad = _position_pad(g, ref, inputs.ids, index, path, seq, g.tensor(table).shape[0])
    name = f"embed.positions{n}"
    arrays.update(_table_arrays(g, name, kind, table, rows_op))
    term = EmbedTerm("positions", lookup=Lookup(name, kind, *g.tensor(table).shape),
                     positions=Positions.FROM_IDS, pad_id=pad)
    return term, view_ops | {op.index, rows_op.index} | set(path)


def _dequantized_row(kind: TableKind, arrays: dict, name: str, row: int) -> np.ndarray:
    table = arrays[f"{name}.table"]
    if kind in (TableKind.FLOAT32, TableKind.FLOAT16):  # float16 widens exactly
        return np.asarray(table[row], np.float32)
    if kind == TableKind.INT8_ROWS:
        return (table[row].astype(np.float32) * arrays[f"{name}.scale"][row]).astype(np.float32)
    zp = arrays[f"{name}.zero_point"][0] if kind == TableKind.UINT8_TENSOR else 0
    return ((table[row].astype(np.int32) - zp).astype(np.float32) * arrays[f"{name}.scale"][0]).astype(np.float32)


def _constant_index(g: Graph, ref, ids: int, index: int, path: list[int], seq: int, vocab: int):
    """The indices a path from the ids computes, when they are the same for every probe window
    (the path does not really depend on the ids), else None."""
    ids_t = g.tensor(ids)
    rng = np.random.default_rng(11)
    seen = None
    for pad in (0, 1):
        for window in probe.probe_ids(seq, vocab, pad, rng):
            feed = window.reshape(ids_t.shape).astype(ids_t.dtype)
            try:
                got = probe.run(g, path, {ids: feed}, ref, keep={index})[index]
            except Unsupported:
                return None
            if seen is None:
                seen = got
            elif not np.array_equal(seen, got):
                return None
    return seen


def _position_pad(g: Graph, ref, ids: int, index: int, path: list[int], seq: int, rows: int) -> int:
    """The pad id p for which the path computes RoBERTa's position ids,
    p + cumsum(ids != p) on real tokens and p on padding, on every probe window."""
    where = f"position ids ({g.tensor(index).describe()})"
    compared = {int(np.ravel(g.const(t))[0]) for i in path for t in g.ops[i].inputs
                if g.const(t) is not None and g.const(t).size == 1 and g.const(t).dtype.kind in "iu"}
    ids_t = g.tensor(ids)
    for pad in sorted(compared | {0, 1}):
        rng = np.random.default_rng(7)
        ok = True
        for window in probe.probe_ids(seq, max(rows, pad + 2), pad, rng):
            feed = window.reshape(ids_t.shape).astype(ids_t.dtype)
            try:
                got = probe.run(g, path, {ids: feed}, ref, keep={index})[index].reshape(-1)
            except Unsupported as e:
                raise PorterError(f"{where}: porter cannot evaluate the path from the ids ({e})") from None
            real = window != pad
            expected = np.where(real, np.cumsum(real) + pad, pad)
            if not np.array_equal(got, expected):
                ok = False
                break
        if ok:
            if pad + seq >= rows:
                raise PorterError(f"{where}: position ids reach {pad + seq}, the table has {rows} rows")
            return pad
    raise PorterError(f"{where}: the position ids are computed from the token ids, but not as "
                      "pad + cumsum(ids != pad) for any pad id porter tried; other position schemes are "
                      "not supported")
