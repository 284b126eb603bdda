"""Graph -> DecoderIR: a causal LM with a KV cache, recovered by role and proven by evaluation.

1. Roles (porter.recover.decoder.io): the caches are inputs a Concat extends into outputs, the
   ids the integer input, the logits the other output. The graph is bound to cache lengths and
   token counts and canonicalised at each (porter.recover.canonical): shapes, position rows,
   rotary tables and masks fold into constants.
2. Blocks along the residual stream (porter.recover.decoder.blocks): the embedding, then
   attention and MLP blocks each closed by a residual Add, then the final norm and the LM head;
   norms, attention (heads, grouped kv heads, rotary positions, the causal mask evaluated at
   several bindings) and the MLP's activation are decided by what they compute.
3. onnxruntime's fusions that change arithmetic are decided by their own rules
   (porter.recover.decoder.ort): Gemm or Add for a bias, Gelu / FastGelu, SkipLayerNormalization.
4. Every op of the file is explained: part of a block, folded, an identity, or unused.
5. The IR is run by the numpy executor beside the canonical graph's own ops at a binding and
   must agree block by block (porter.recover.decoder.prove).
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.decoder import (BIAS_ADD, BIAS_NONE, LAYER_NORM, NORM_ORT_SKIP, POSITIONS_LEARNED, POSITIONS_NONE,
                               POSITIONS_ROTARY, Attention, DecoderIR, DecoderLayer, Linear, MLP, Norm,
                               Rotary)
from porter.ir.encoder import ActivationQuant, WeightFormat
from porter.recover import probe
from porter.recover.canonical import ort_shapes
from porter.recover.decoder import ort as decoder_ort
from porter.recover.decoder.blocks import AttentionBlock, Walk, file_op, position_table, walk
from porter.recover.decoder.io import MAIN_BINDING, PROBE_BINDINGS, Bindings, Roles, find_roles, is_decoder_graph
from porter.recover.decoder.prove import prove
from porter.reference.ort import cpu as ort_cpus

__all__ = ["is_decoder_graph", "recover_decoder"]


def recover_decoder(g: Graph, source: str, ort_cpu: str = ort_cpus.AUTO, context: int | None = None) -> DecoderIR:
    """ort_cpu: the CPU whose onnxruntime arithmetic the IR reproduces (a porter.reference.ort.cpu
    target, or auto: this machine's). context: the longest past + seq the module serves; needed
    when the graph does not bound it (rotary or no positions), at most the learned table's rows
    otherwise."""
    if g.format != "onnx":
        raise PorterError(f"{source}: porter compiles decoders from ONNX graphs (onnxruntime's arithmetic)")
    target = ort_cpus.resolve(ort_cpu)
    roles = find_roles(g, source)
    bindings = Bindings(g, roles, target)
    c = bindings.main
    w = walk(c, bindings, roles)
    _check_everything_explained(c, w)
    ir, tensors = _assemble(c, bindings, roles, w, source, context)
    ir.ort_cpu = target.name
    prove(ir, bindings, roles, tensors)
    return ir


def _check_everything_explained(c, w: Walk) -> None:
    left = [op.index for op in c.graph.ops if op.index not in w.ops and op.type != "view"]
    if left:
        raise PorterError(f"{file_op(c, left[0])} is not part of any decoder block porter knows")
    in_steps = {i for op in c.graph.ops for i in c.origin[op.index]}
    unexplained = [i for i in range(len(c.source.ops)) if i not in in_steps and i not in c.explained]
    if unexplained:
        raise PorterError("ops not explained by any block: " + "; ".join(
            probe.describe_op(c.source, i) for i in unexplained[:4]))


class _Arrays:
    """The IR's weights as they are collected, each name once."""

    def __init__(self):
        self.weights: dict[str, np.ndarray] = {}

    def add(self, name: str, value) -> None:
        self.weights[name] = np.ascontiguousarray(np.asarray(value, np.float32))


def _linear(c, arrays: _Arrays, op_index: int, name: str, rows: np.ndarray | None = None) -> Linear:
    """rows: the order the IR takes the Linear's outputs in (each output's own product is the
    same wherever it sits, so reordering them is exact)."""
    op = c.graph.ops[op_index]
    o = op.options
    if o["weights"] != WeightFormat.FLOAT32 or o["activation_quant"] != ActivationQuant.FLOAT:
        raise PorterError(f"{c.describe(op_index)}: a quantised Linear; porter's decoders take float32 "
                          "weights (and quantise them itself with --quant)")
    order = slice(None) if rows is None else rows
    weight = np.asarray(o["weight"], np.float32)[order]
    source_op = next((i for i in c.origin[op_index] if c.source.ops[i].type in ("MatMul", "Gemm")), -1)
    reordered = rows is not None and not np.array_equal(rows, np.arange(len(rows)))
    lin = Linear(name, int(weight.shape[1]), int(weight.shape[0]), decoder_ort.bias_mode(c, op), source_op,
                 [int(r) for r in rows] if reordered else None)
    arrays.add(f"{name}.weight", weight)
    if o.get("bias") is not None:
        arrays.add(f"{name}.bias", np.asarray(o["bias"], np.float32).reshape(-1)[order])
    return lin


def _norm(found, arrays: _Arrays) -> Norm:
    for name, value in found.arrays.items():
        arrays.add(name, value)
    return found.norm


def _assemble(c, bindings: Bindings, roles: Roles, w: Walk, source: str, context: int | None):
    g = c.graph
    names = {t: n for n, t in {**g.inputs, **g.outputs}.items()}
    arrays = _Arrays()
    table = np.asarray(g.const(w.embedding.table), np.float32)
    arrays.add("wte", table)
    vocab, hidden = (int(d) for d in table.shape)
    tensors = {"embedding": w.embedding.out}
    layers = []
    for i in range(0, len(w.blocks), 2):
        att_block, mlp_block = w.blocks[i], w.blocks[i + 1]
        layer = i // 2
        attention = _attention(c, arrays, att_block, layer, names)
        mlp = _mlp(c, arrays, mlp_block, layer)
        parallel = layer in w.attended
        layers.append(DecoderLayer(attention, mlp, parallel))
        tensors[f"layer{layer}.attention"] = w.attended[layer] if parallel else g.ops[w.residuals[i]].outputs[0]
        tensors[f"layer{layer}.mlp"] = g.ops[w.residuals[i + 1]].outputs[0]
    _same_shapes(layers)
    final = _norm(w.final_norm, arrays)
    _skip_fusion(c, final, w, layers[-1].mlp, arrays)
    head = _linear(c, arrays, w.head, "head")
    tied = head.bias == BIAS_NONE and np.array_equal(arrays.weights["head.weight"], table)
    if tied:
        del arrays.weights["head.weight"]
    positions, n_ctx = _positions(c, bindings, w, arrays, layers, source, context)
    tensors.update(final=w.final_norm.out, logits=g.outputs[roles.logits])
    ir = DecoderIR(source=source, n_ctx=n_ctx, vocab=vocab, hidden=hidden, positions=positions,
                   ids_input=roles.ids, logits_output=roles.logits, layers=layers, final_norm=final,
                   head=head, tied=tied, fed_inputs=dict(roles.fed), weights=arrays.weights)
    missing = [n for n in ir.array_order() if n not in ir.weights]
    if missing:
        raise PorterError(f"{source}: internal: arrays {missing} were not collected")
    return ir, tensors


def _attention(c, arrays: _Arrays, block: AttentionBlock, layer: int, names: dict) -> Attention:
    f = block.found
    prefix = f"layer{layer}.attn"
    norm = _norm(block.norm, arrays)
    linears = sorted({f.q.linear, f.k.linear, f.v.linear})
    columns = [p.columns.reshape(-1) for p in (f.q, f.k, f.v)]
    if len(linears) == 1:
        rows = np.concatenate(columns)
        width = c.graph.tensor(c.graph.ops[linears[0]].outputs[0]).shape[-1]
        if sorted(rows.tolist()) != list(range(width)):
            raise PorterError(f"layer {layer} attention: q, k and v do not take each of the fused projection's "
                              f"{width} outputs once")
        projections = [_linear(c, arrays, linears[0], f"{prefix}.qkv", rows)]
    elif len(linears) == 3:
        projections = []
        for n, p, rows in zip("qkv", (f.q, f.k, f.v), columns):
            width = c.graph.tensor(c.graph.ops[p.linear].outputs[0]).shape[-1]
            if sorted(rows.tolist()) != list(range(width)):
                raise PorterError(f"layer {layer} attention: {n} does not take each of its projection's "
                                  f"{width} outputs once")
            projections.append(_linear(c, arrays, p.linear, f"{prefix}.{n}", rows))
    else:
        raise PorterError(f"layer {layer} attention: q, k and v come from two Linears; porter takes one or three")
    o = _linear(c, arrays, f.o, f"{prefix}.o")
    return Attention(norm, projections, o, f.heads, f.kv_heads, f.head_dim, f.scale, f.mask, f.fill,
                     _rotary(f), names[f.past_key], names[f.past_value], names[f.present_key],
                     names[f.present_value], f.q.factor, f.k.factor, f.keys_broadcast, f.values_broadcast)


def _rotary(f) -> Rotary | None:
    """The rotated prefix of each head: the rope's input is that many values of a head."""
    return Rotary(f.ropes[0].style, int(f.ropes[0].layout.shape[-1])) if f.ropes else None


def _mlp(c, arrays: _Arrays, block, layer: int) -> MLP:
    prefix = f"layer{layer}.mlp"
    norm = _norm(block.norm, arrays)
    gate = _linear(c, arrays, block.gate, f"{prefix}.gate") if block.gate is not None else None
    up = _linear(c, arrays, block.up, f"{prefix}.up")
    down = _linear(c, arrays, block.down, f"{prefix}.down")
    return MLP(norm, up, down, block.activation.activation, gate)


def _same_shapes(layers: list[DecoderLayer]) -> None:
    first = layers[0]
    for i, ly in enumerate(layers[1:], 1):
        a, b = first.attention, ly.attention
        if (a.heads, a.kv_heads, a.head_dim, first.mlp.up.out_features) != \
                (b.heads, b.kv_heads, b.head_dim, ly.mlp.up.out_features):
            raise PorterError(f"layer {i} has other head or MLP sizes than layer 0; porter compiles uniform layers")


def _skip_fusion(c, final: Norm, w: Walk, last_mlp: MLP, arrays: _Arrays) -> None:
    """onnxruntime fuses the last residual Add into the final LayerNormalization when the sum is
    read by the norm alone and both operands' shapes are known alike; the last Linear's bias Add
    then becomes the fused kernel's bias (added after the sum)."""
    g = c.graph
    add = g.ops[w.residuals[-1]]
    if final.kind != LAYER_NORM or [u.index for u in g.users(add.outputs[0])] != [g.producer(w.final_norm.out).index]:
        return
    shapes = ort_shapes.value_shapes(c.source.path)
    if not ort_shapes.skip_layer_norm_fuses(c, add, shapes):
        return
    final.form = NORM_ORT_SKIP
    if len(w.blocks) // 2 - 1 in w.attended:
        return  # a parallel layer's residual Add reads the sum of its branches, not the down projection's Add
    down = g.ops[w.blocks[-1].down]
    bias_adds = [c.source.ops[i] for i in c.origin[down.index] if c.source.ops[i].type == "Add"]
    if last_mlp.down.bias == BIAS_ADD and len(bias_adds) == 1 and \
            c.source.const(bias_adds[0].inputs[1]) is not None and c.source.const(bias_adds[0].inputs[1]).ndim == 1:
        final.skip_bias = True


def _positions(c, bindings: Bindings, w: Walk, arrays: _Arrays, layers, source: str, context: int | None):
    rotary = [ly.attention.rotary for ly in layers]
    if w.embedding.positions is not None:
        if any(rotary):
            raise PorterError(f"{source}: learned positions and rotary ones together")
        wpe = position_table(c.graph, bindings, c.source, w.embedding, "the position embedding")
        if context is not None and context > wpe.shape[0]:
            raise PorterError(f"{source}: --context {context} is longer than the {wpe.shape[0]} learned positions")
        n_ctx = context or int(wpe.shape[0])
        arrays.add("wpe", wpe[:n_ctx])
        return POSITIONS_LEARNED, n_ctx
    if context is None:
        raise PorterError(f"{source}: the graph computes its positions for any length; give the context the "
                          "module serves (porter compile --context N)")
    if not any(rotary):
        return POSITIONS_NONE, context
    if not all(rotary):
        raise PorterError(f"{source}: some layers have rotary positions and others none")
    cos, sin = _rope_tables(bindings, w, context)
    arrays.add("rope.cos", cos)
    arrays.add("rope.sin", sin)
    return POSITIONS_ROTARY, context


def _rope_tables(bindings: Bindings, w: Walk, n_ctx: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin [n_ctx, head_dim] for positions 0 .. n_ctx - 1: the graph's own table ops
    folded at (past 0, seq n_ctx) in onnxruntime's arithmetic, checked against every other
    binding's rows past .. past + seq - 1 and against each rotation's layout."""
    g = bindings.main.graph
    ropes = [r for b in w.blocks if isinstance(b, AttentionBlock) for r in b.found.ropes]
    head_dim = ropes[0].layout.shape[-1] if ropes[0].layout.ndim else 0
    tables = []
    for which in ("cos", "sin"):
        tensors = {getattr(r, which) for r in ropes}
        for t in tensors:
            _check_whole_packets(bindings, t, which)
        full = [_table(bindings, t, 0, n_ctx, head_dim, which) for t in sorted(tensors)]
        if any(not np.array_equal(f, full[0]) for f in full):
            raise PorterError(f"the rotary {which} tables differ between layers")
        for t in tensors:
            for past, seq in (MAIN_BINDING, *PROBE_BINDINGS):
                if past + seq <= n_ctx and not np.array_equal(_table(bindings, t, past, seq, head_dim, which),
                                                              full[0][past:past + seq]):
                    raise PorterError(f"the rotary {which} rows for {seq} tokens after {past} are not rows "
                                      f"{past}..{past + seq - 1} of one table ({g.tensor(t).describe()})")
        for r in ropes:
            _check_layout(g, r, getattr(r, which), full[0], which)
        tables.append(full[0])
    return tables[0], tables[1]


# Eigen's array sin / cos, which onnxruntime's Sin and Cos run, take packets of this many values
# and leave the last size % PACKET of a call to std::sin / std::cos (porter.reference.ort.floats).
TRIG_PACKET = 4


def _check_whole_packets(bindings: Bindings, t: int, which: str) -> None:
    """Each Sin / Cos the table is computed by must take whole packets at every token count, or
    a row's last values would round differently in a one-token call than in a prompt: the
    table folded once for the whole context would not be the rows onnxruntime computes then.
    Its size per call is (fixed + tokens * per_token), read at two token counts."""
    g = bindings.g
    seen, todo = set(), [t]
    while todo:
        op = g.producer(todo.pop())
        if op is None or op.index in seen:
            continue
        seen.add(op.index)
        todo += [i for i in op.inputs if i >= 0]
        if op.type not in ("Sin", "Cos"):
            continue
        sizes = {}
        for seq in (1, 4):
            value = bindings.at(0, seq).graph.const(op.outputs[0])
            sizes[seq] = None if value is None else int(np.asarray(value).size)
        if None in sizes.values():
            continue  # not folded at a binding: nothing was computed at compile time
        per_token = (sizes[4] - sizes[1]) // 3
        fixed = sizes[1] - per_token
        if per_token % TRIG_PACKET or fixed % TRIG_PACKET:
            raise PorterError(f"the rotary {which} table is computed by {probe.describe_op(g, op.index)} over "
                              f"{per_token} values a token: onnxruntime's {op.type} takes packets of "
                              f"{TRIG_PACKET} and computes the last size % {TRIG_PACKET} values of each call "
                              "another way, so a row differs between a one-token step and a prompt; porter "
                              "does not reproduce tables that depend on the call")


def _table(bindings: Bindings, t: int, past: int, seq: int, head_dim: int, which: str) -> np.ndarray:
    value = bindings.constant(t, past, seq, f"the rotary {which} table")
    if value.size != seq * head_dim:
        raise PorterError(f"the rotary {which} table {list(value.shape)} is not one row of {head_dim} per token "
                          f"(shared by every head)")
    return np.asarray(value, np.float32).reshape(seq, head_dim)


def _check_layout(g: Graph, rope, t: int, full: np.ndarray, which: str) -> None:
    """The rope turns the first values of each head, in place (partial rotary: a prefix), and at
    the main binding the table, broadcast over the rotation's input, gives each element the row
    of its token and the column of its place in the head."""
    past, seq = MAIN_BINDING
    x_shape = rope.layout.shape
    if not np.array_equal(rope.in_head, np.broadcast_to(np.arange(x_shape[-1]), x_shape)):
        raise PorterError("the rotary positions turn values of a head other than its first "
                          f"{x_shape[-1]}, in place")
    value = np.broadcast_to(np.asarray(g.const(t), np.float32), x_shape)
    token = rope.layout // rope.width
    if not np.array_equal(value, full[past + token, rope.in_head]):
        raise PorterError(f"the rotary {which} table is not applied by token and place in the head")
