"""A decoder's blocks found along its residual stream, each by what it does.

From the token embedding forward: the stream's one residual Add (an Add of the stream and a
value computed from it) closes a block, and the block is every op between the stream and the
Add's other operand (`probe.region`). A block holding a softmax is attention
(porter.recover.decoder.attention), any other an MLP; each starts with a norm that reads the
stream (porter.recover.decoder.norm). When the stream has no residual Add left, what computes
the logits from it is the final norm and the LM head. A parallel layer (GPT-NeoX, GPT-J, Phi)
is a residual Add of the stream and a sum of two branches that both read it, one attention,
one MLP, each through its own norm or through one they share. Every op of a block must be
explained by its recogniser; the first one left over is named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.recover import probe
from porter.recover.encoder import embeddings
from porter.recover.decoder import attention as decoder_attention, mlp as decoder_mlp, norm as decoder_norm
from porter.recover.canonical import Canonical
from porter.ir.encoder import Reference
from porter.recover.decoder.io import MAIN_BINDING, PROBE_BINDINGS, Bindings, Roles
from porter.recover.decoder.mlp import through_views


@dataclass
class Embedding:
    table: int  # constant tensor [vocab, hidden]
    positions: int | None  # the constant position rows added at the main binding
    ops: set[int]
    out: int


@dataclass
class MLPBlock:
    norm: decoder_norm.FoundNorm
    up: int  # canonical linear ops
    gate: int | None
    down: int
    activation: decoder_mlp.FoundActivation
    ops: set[int]


@dataclass
class AttentionBlock:
    norm: decoder_norm.FoundNorm
    found: decoder_attention.FoundAttention


@dataclass
class Walk:
    embedding: Embedding
    blocks: list  # AttentionBlock, MLPBlock alternating
    # each block's residual Add (canonical op); a parallel layer's attention: the Add of the
    # two branches
    residuals: list[int]
    attended: dict[int, int]  # parallel layer -> its attention branch's output tensor
    final_norm: decoder_norm.FoundNorm
    head: int  # canonical linear op
    ops: set[int] = field(default_factory=set)


def embedding(g: Graph, ids: int) -> Embedding:
    found = [(op, table) for op, table, index in embeddings.lookups(g)
             if embeddings.root(g, index) == ids]
    if len(found) != 1:
        raise PorterError(f"the token ids are looked up in {len(found)} tables; a decoder has one token table")
    op, table = found[0]
    if g.tensor(table).dtype != "float32":
        raise PorterError(f"{probe.describe_op(g, op.index)}: the token table {g.tensor(table).describe()} is "
                          "not float32 (porter's decoders take float weights and quantise them itself)")
    ops = {op.index} | embeddings.index_source(g, Reference.ONNXRUNTIME_CPU, op.inputs[1], g.tensor(table).shape[0])[1]
    rows, views = _forward_views(g, op.outputs[0])
    ops |= views
    users = g.users(rows)
    positions = None
    if len(users) == 1 and users[0].type == "add":
        other = [t for t in users[0].inputs if t != rows]
        if len(other) == 1 and g.const(other[0]) is not None:
            positions, rows = other[0], users[0].outputs[0]
            ops.add(users[0].index)
    return Embedding(table, positions, ops, rows)


def _forward_views(g: Graph, t: int) -> tuple[int, set[int]]:
    ops = set()
    while len(users := g.users(t)) == 1 and users[0].type == "view" and t not in g.outputs.values():
        ops.add(users[0].index)
        t = users[0].outputs[0]
    return t, ops


def _residual_add(g: Graph, stream: int):
    """The Add of the stream and a value computed from it, or None past the last block."""
    found = []
    for op in g.users(stream):
        if op.type != "add" or len(op.inputs) != 2:
            continue
        other = op.inputs[1] if op.inputs[0] == stream else op.inputs[0]
        if g.const(other) is None and stream in probe.leaves(g, probe.region(g, other, stop={stream})):
            found.append((op, other))
    if len(found) > 1:
        raise PorterError(f"the residual stream {g.tensor(stream).describe()} is added to "
                          f"{len(found)} values; porter compiles one block at a time (pre-norm)")
    return found[0] if found else None


def file_op(c: Canonical, i: int) -> str:
    """A canonical op as errors name it: the file's ops it stands for."""
    return f"{c.describe(i)} (canonical {c.graph.ops[i].type})"


def _known_ops(c: Canonical, region: set[int], where: str) -> None:
    """Ops canonicalisation has no translation for (kept as format.OpType) are refused by name
    before any recogniser reads the block."""
    unknown = sorted(i for i in region if "." in c.graph.ops[i].type)
    if unknown:
        raise PorterError(f"{where}: {file_op(c, unknown[0])} is not an op porter knows")


def walk(c: Canonical, bindings: Bindings, roles: Roles) -> Walk:
    g = c.graph
    emb = embedding(g, g.inputs[roles.ids])
    claimed = set(emb.ops)
    stream, blocks, residuals, attended = emb.out, [], [], {}
    while (found := _residual_add(g, stream := _through_reshapes(g, stream))) is not None:
        add, value = found
        layer = len(blocks) // 2
        branches = _branches(g, stream, value)
        if branches is not None:
            sum_op, attention_value, mlp_value = branches
            att_region = set(probe.region(g, attention_value, stop={stream}))
            mlp_region = set(probe.region(g, mlp_value, stop={stream}))
            att, _ = _block(c, bindings, stream, att_region, attention_value, sum_op, layer, True, claimed)
            shared = att_region & mlp_region
            if shared and shared != att.norm.ops:
                raise PorterError(f"layer {layer}: its attention and MLP branches share ops other than a norm")
            norm = att.norm if shared else None
            mlp_block, _ = _block(c, bindings, stream, mlp_region, mlp_value, sum_op, layer, False, claimed, norm)
            blocks += [att, mlp_block]
            residuals += [sum_op, add.index]
            attended[layer] = attention_value
            claimed |= att_region | mlp_region | {sum_op, add.index}
        else:
            region = set(probe.region(g, value, stop={stream}))
            is_attention = len(blocks) % 2 == 0
            block, _ = _block(c, bindings, stream, region, value, add.index, layer, is_attention, claimed)
            blocks.append(block)
            residuals.append(add.index)
            claimed |= region | {add.index}
        stream = add.outputs[0]
    if not blocks or len(blocks) % 2:
        raise PorterError("porter compiles decoders of whole layers (attention then MLP); "
                          f"this graph has {len(blocks)} blocks")
    final_norm, head, final_ops = _final(c, stream, g.outputs[roles.logits], claimed)
    claimed |= final_ops
    return Walk(emb, blocks, residuals, attended, final_norm, head, claimed)


def _through_reshapes(g: Graph, stream: int) -> int:
    """The stream past reshapes that are its only reader (OPT flattens it to [tokens, hidden]
    between its attention and MLP residuals): a reshape keeps every value in place."""
    while len(users := g.users(stream)) == 1 and users[0].type == "view" and stream not in g.outputs.values() \
            and _keeps_order(g, users[0]):
        stream = users[0].outputs[0]
    return stream


def _keeps_order(g: Graph, op) -> bool:
    """A view whose index map is the identity (a reshape, not a transpose)."""
    got = probe.index_map(g, [op.index], op.inputs[0], op.outputs[0])
    return got is not None and np.array_equal(got.reshape(-1), np.arange(got.size))


def _branches(g: Graph, stream: int, value: int):
    """(the Add, its attention operand, its MLP operand) when the value added to the stream is
    the sum of two branches that each read the stream, one holding a softmax; else None."""
    add = g.producer(value)
    if add is None or add.type != "add" or len(add.inputs) != 2 or any(g.const(t) is not None for t in add.inputs):
        return None
    regions = [probe.region(g, t, stop={stream}) for t in add.inputs]
    if not all(stream in probe.leaves(g, r) for r in regions):
        return None
    softmax = [any(g.ops[i].type == "softmax" for i in r) for r in regions]
    if softmax.count(True) != 1:
        return None
    first = softmax.index(True)
    return add.index, add.inputs[first], add.inputs[1 - first]


def _block(c: Canonical, bindings: Bindings, stream: int, region: set[int], value: int, closing: int,
           layer: int, attention: bool, claimed: set[int], norm=None):
    """The attention or MLP block computing `value` from the stream (norm: the one it shares
    with the layer's attention)."""
    g = c.graph
    where = f"layer {layer} {'attention' if attention else 'MLP'}"
    if region & claimed:
        raise PorterError(f"{where}: shares ops with an earlier block")
    _known_ops(c, region, where)
    is_attention = any(g.ops[i].type == "softmax" for i in region)
    if is_attention != attention:
        raise PorterError(f"{where}: the block closed by {file_op(c, closing)} is "
                          f"{'attention' if is_attention else 'an MLP'}; porter compiles layers of "
                          "attention then MLP")
    if norm is None:
        norm = decoder_norm.find(g, stream, region, f"layer{layer}.{'attn' if attention else 'mlp'}.norm", where)
    if attention:
        att = decoder_attention.find(g, bindings, region, norm.out, value, where)
        block, ops = AttentionBlock(norm, att), att.ops | norm.ops
    else:
        block = mlp(g, region, norm, value, where)
        ops = block.ops | norm.ops
    _explained(c, region, ops, where)
    return block, ops


def mlp(g: Graph, region: set[int], norm: decoder_norm.FoundNorm, out: int, where: str) -> MLPBlock:
    down_out, down_views = through_views(g, out)
    down = g.producer(down_out)
    if down is None or down.type != "linear" or down.index not in region:
        raise PorterError(f"{where}: the block's output {g.tensor(out).describe()} is not made by a Linear")
    hidden, hidden_views = through_views(g, down.inputs[0])
    linears = {op.index: op for op in (g.ops[i] for i in region) if op.type == "linear"
               and through_views(g, op.inputs[0])[0] == norm.out}
    outputs = {op.outputs[0]: i for i, op in linears.items()}
    ops = {down.index} | down_views | hidden_views | set(linears)
    product = g.producer(hidden)
    gated = product is not None and product.type == "mul" and len(linears) == 2 and \
        all(g.const(t) is None for t in product.inputs)
    if gated:
        sides = [through_views(g, t) for t in product.inputs]
        direct = [k for k, (t, _) in enumerate(sides) if t in outputs]
        if len(direct) != 1:
            raise PorterError(f"{where}: {probe.describe_op(g, product.index)} is not act(gate) * up")
        up = outputs[sides[direct[0]][0]]
        ops |= sides[direct[0]][1] | {product.index}
        act_out = product.inputs[1 - direct[0]]
    elif len(linears) == 1:
        up, act_out = next(iter(linears)), hidden
    else:
        raise PorterError(f"{where}: {len(linears)} Linears read the norm; an MLP has one (plain) or two (gated)")
    gate = next((i for i in linears if i != up), None)
    act_in = g.ops[gate if gated else up].outputs[0]
    act = decoder_mlp.activation(g, act_in, act_out, where)
    return MLPBlock(norm, up, gate, down.index, act, ops | act.ops)


def _final(c: Canonical, stream: int, logits: int, claimed: set[int]):
    g = c.graph
    region = set(probe.region(g, logits, stop={stream}))
    where = "the final norm and LM head"
    if region & claimed:
        raise PorterError(f"{where}: the logits are not computed from the last block's output")
    _known_ops(c, region, where)
    reads_stream = (head_in := g.producer(through_views(g, logits)[0])) is not None and \
        head_in.type == "linear" and through_views(g, head_in.inputs[0])[0] == stream
    norm = decoder_norm.no_norm(stream, "final_norm", g.tensor(stream).shape[-1]) if reads_stream else \
        decoder_norm.find(g, stream, region, "final_norm", where)
    head_out, views = through_views(g, logits)
    head = g.producer(head_out)
    if head is None or head.type != "linear" or through_views(g, head.inputs[0])[0] != norm.out:
        raise PorterError(f"{where}: the logits are not a Linear of the final norm")
    ops = norm.ops | views | {head.index} | through_views(g, head.inputs[0])[1]
    _explained(c, region, ops, where)
    return norm, head.index, region


def _explained(c: Canonical, region: set[int], ops: set[int], where: str) -> None:
    """Every op of the block is part of what its recogniser found (views are free)."""
    left = sorted(i for i in region - ops if c.graph.ops[i].type != "view")
    if left:
        raise PorterError(f"{where}: {file_op(c, left[0])} is not part of any block porter knows"
                          + (f" (and {len(left) - 1} more ops)" if len(left) > 1 else ""))


def position_table(g: Graph, bindings: Bindings, source: Graph, emb: Embedding, where: str) -> np.ndarray:
    """The learned position table whose rows offset + past .. offset + past + seq - 1 the
    embedding adds at every binding (OPT's table starts its positions at row 2): its rows from
    the offset on, a float constant of the file, [rows, hidden]."""
    hidden = g.tensor(emb.table).shape[1]
    seen = {(p, s): bindings.constant(emb.positions, p, s, where).reshape(s, hidden)
            for p, s in (MAIN_BINDING, *PROBE_BINDINGS)}
    first = seen[(0, 1)][0]
    for t in source.tensors:
        data = t.data
        if data is None or data.ndim != 2 or data.shape[1] != hidden or data.dtype != np.float32:
            continue
        for offset in np.flatnonzero((data == first).all(axis=1)):
            table = data[offset:]
            if all(p + s <= table.shape[0] and np.array_equal(rows, table[p:p + s]) for (p, s), rows in seen.items()):
                return np.ascontiguousarray(table)
    raise PorterError(f"{where}: the rows added to the token embedding are not rows past .. past + seq - 1 "
                      "of a learned position table (from any first row)")
