"""GPT-style decoders from ONNX: patterns and recovery into the decoder IR (porter.ir.decoder).

What torch.onnx (dynamo, opset 18) writes for a pre-LayerNorm GPT with an explicit KV cache
(examples/tinystories): token + learned position embeddings (positions past .. past+seq-1 from
the cache length), then per block

    h   = x + proj(attention(split_heads(qkv(ln1(x))), past))     qkv: one fused MatMul + Split
    out = h + fc_out(gelu_erf(fc(ln2(h))))

where attention concatenates the cached keys/values (Concat(past_key_i, k) is the graph output
present_key_i), scales Q.K^T by a constant, hides key j from query i when j > past + i
(Where(Greater(...), -inf, scores)) and softmaxes; then a final LayerNorm and the LM head tied
to the token table (MatMul(h, Transpose(wte))). Recovery walks back from the logits block by
block, matching each piece as a declared pattern, and names the op where a graph departs.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.decoder import DecoderIR, DecoderLayer, LayerNorm, Linear
from porter.ir.encoder import as_f32
from porter.reference import ort_cpu as ort_cpus
from porter.recover.onnx_patterns import LAYER_NORM_OP, gelu_erf, last_axis, layout, linear
from porter.recover.engine import AnyOf, Const, Op, Var, match
from porter.recover.tflite_patterns import scalar_const

# ---- patterns ---------------------------------------------------------------------------------

HEAD_TIED = Op("MatMul", Var("final"), AnyOf(Op("Transpose", Const("table")), Const("table_t")), name="logits")

EMBEDDINGS = Op("Add", Op("Gather", Const("wte"), Var("ids")), Op("Gather", Const("wpe"), Var("positions")),
                commutative=True, name="embedded")

FFN = Op("Add", Var("resid"), linear("fc_out", gelu_erf(linear("fc", Var("feed")))), commutative=True,
         name="ffn_sum")


def _split(index: int):
    return Op("Split", linear("qkv", Var("feed")), output=index) if index == 0 else \
        Op("Split", Var("qkv_out"), output=index)


def _unsqueezed(p, axis: int):
    return Op("Unsqueeze", p, Const(where=lambda t, g: t.data is not None and t.data.ravel().tolist() == [axis]))


def _arange(end):
    return Op("Range", scalar_const("zero"), end, scalar_const("one"))


# key j (a row [1, past + seq]) is hidden from query i (a column [seq, 1]) when j > i + past.
CAUSAL = Op("Greater", _unsqueezed(_arange(Op("Add", Var("past_len"), Var("seq_len"), commutative=True)), 0),
            Op("Add", _unsqueezed(_arange(Var("seq_len")), 1), Var("past_len"), commutative=True), name="causal")


def _attention():
    q = layout(_split(0))
    present_k = Op("Concat", Var("past_key"), layout(_split(1)), name="present_key")
    present_v = Op("Concat", Var("past_value"), layout(_split(2)), name="present_value")
    scores = Op("MatMul", q, Op("Transpose", present_k), name="scores")
    scaled = Op("Mul", scores, scalar_const("scale"), commutative=True)
    masked = Op("Where", CAUSAL, scalar_const("fill"), scaled, name="masked")
    probs = Op("Softmax", masked, name="probs", where=last_axis)
    context = Op("MatMul", probs, present_v, name="context")
    return Op("Add", Var("resid"), linear("o", layout(context)), commutative=True, name="attn_sum")


ATTENTION = _attention()

# ---- recovery -----------------------------------------------------------------------------------


def _require(found, what: str, g: Graph, t: int):
    if found is None:
        producer = g.producer(t)
        at = producer.describe() if producer is not None else g.tensor(t).describe()
        raise PorterError(f"decoder: expected {what} computing {at}")
    return found


def _layer_norm(g: Graph, t: int, name: str) -> tuple[LayerNorm, int, dict]:
    m = _require(match(LAYER_NORM_OP, g, t), "a LayerNormalization", g, t)
    op = g.ops[m.ops["out"]]
    ln = LayerNorm(name=name, eps=float(np.float32(op.options.get("epsilon", 1e-5))), ops=sorted(m.consumed))
    arrays = {f"{name}.gamma": as_f32(g.const(m["gamma"])), f"{name}.beta": as_f32(g.const(m["beta"]))}
    return ln, m["x"], arrays


def _linear(g: Graph, m, key: str, name: str) -> tuple[Linear, dict]:
    w = np.asarray(g.const(m[f"{key}_w"]))  # MatMul(x, W[in, out])
    if w.dtype != np.float32 or w.ndim != 2:
        raise PorterError(f"decoder: {name} weight {g.tensor(m[f'{key}_w']).describe()} is not a float32 matrix")
    b = g.const(m[f"{key}_b"]) if f"{key}_b" in m.tensors else np.zeros(w.shape[1], np.float32)
    lin = Linear(name, int(w.shape[0]), int(w.shape[1]), m.ops.get(key, -1))
    return lin, {f"{name}.weight": as_f32(w.T), f"{name}.bias": as_f32(b)}


def _graph_name(g: Graph, t: int) -> str:
    return g.tensor(t).name


def _check_causal(g: Graph, m) -> None:
    """CAUSAL matched j > i + past; the ranges must start at 0 in steps of 1 and the fill must be
    -inf (or as good as)."""
    for name in ("zero", "one"):
        value = float(np.ravel(g.const(m[name]))[0])
        if value != {"zero": 0.0, "one": 1.0}[name]:
            raise PorterError(f"decoder: the causal mask's Range has {name} {value:g} at "
                              f"{g.ops[m.ops['causal']].describe()}")
    fill = float(np.ravel(g.const(m["fill"]))[0])
    if not fill <= -1e30:
        raise PorterError(f"decoder: the attention mask fills {fill:g}, not -inf, at "
                          f"{g.ops[m.ops['masked']].describe()}")


def _block(g: Graph, x: int, index: int) -> tuple[DecoderLayer, int, dict, float]:
    """The block whose output is tensor x: returns it, its input, its arrays and its scale."""
    ffn = _require(match(FFN, g, x), f"block {index}'s MLP (x + fc_out(gelu(fc(ln2(x)))))", g, x)
    ln2, ln2_in, arrays = _layer_norm(g, ffn["feed"], f"layer{index}.ln2")
    if ln2_in != ffn["resid"]:
        raise PorterError(f"decoder: block {index}'s ln2 does not read the residual stream (not pre-LN)")
    fc, a1 = _linear(g, ffn, "fc", f"layer{index}.fc")
    fc_out, a2 = _linear(g, ffn, "fc_out", f"layer{index}.fc_out")
    h = ffn["resid"]
    attn = _require(match(ATTENTION, g, h), f"block {index}'s attention with a KV cache", g, h)
    _check_causal(g, attn)
    ln1, ln1_in, a3 = _layer_norm(g, attn["feed"], f"layer{index}.ln1")
    if ln1_in != attn["resid"]:
        raise PorterError(f"decoder: block {index}'s ln1 does not read the residual stream (not pre-LN)")
    qkv, a4 = _linear(g, attn, "qkv", f"layer{index}.qkv")
    o, a5 = _linear(g, attn, "o", f"layer{index}.o")
    layer = DecoderLayer(ln1, qkv, o, ln2, fc, fc_out,
                         *(_graph_name(g, attn[n]) for n in ("past_key", "past_value", "present_key", "present_value")))
    scale = float(np.ravel(g.const(attn["scale"]))[0])
    return layer, attn["resid"], {**arrays, **a1, **a2, **a3, **a4, **a5}, scale


def is_decoder_graph(g: Graph) -> bool:
    """A graph with a KV cache: past_key_* inputs (the decoders porter compiles)."""
    return any(name.startswith("past_key") for name in g.inputs)


def recover_decoder(g: Graph, source: str, ort_cpu: str = ort_cpus.AUTO) -> DecoderIR:
    """ort_cpu: the CPU whose onnxruntime arithmetic the IR reproduces (a
    porter.reference.ort_cpu target, or auto: this machine's)."""
    target = ort_cpus.resolve(ort_cpu)
    if "logits" not in g.outputs or "input_ids" not in g.inputs:
        raise PorterError(f"{source}: a decoder graph has an input_ids input and a logits output")
    head = _require(match(HEAD_TIED, g, g.outputs["logits"]), "the tied LM head MatMul(h, wte^T)", g,
                    g.outputs["logits"])
    final_ln, x, weights = _layer_norm(g, head["final"], "final_ln")
    layers, scales = [], set()
    while (embedded := match(EMBEDDINGS, g, x)) is None:
        layer, x, arrays, scale = _block(g, x, len(layers))
        layers.append(layer)
        weights.update(arrays)
        scales.add(scale)
        if len(layers) > 1000:
            raise PorterError(f"{source}: no embeddings found below the blocks")
    layers.reverse()
    _renumber(layers, weights)
    wte, wpe = as_f32(g.const(embedded["wte"])), as_f32(g.const(embedded["wpe"]))
    head_table = (g.const(head["table"]) if "table" in head.tensors else np.asarray(g.const(head["table_t"])).T)
    if not np.array_equal(np.asarray(head_table, np.float32), wte):
        raise PorterError(f"{source}: the LM head is not tied to the token embedding table")
    if len(scales) != 1:
        raise PorterError(f"{source}: the blocks scale their attention scores differently ({sorted(scales)})")
    hidden = wte.shape[1]
    qkv = layers[0].qkv
    if qkv.out_features != 3 * hidden:
        raise PorterError(f"{source}: fused QKV has {qkv.out_features} outputs, expected 3 x {hidden}")
    heads, head_dim = _heads(g, layers[0])
    weights.update({"wte": wte, "wpe": wpe})
    ir = DecoderIR(source=source, n_ctx=int(wpe.shape[0]), vocab=int(wte.shape[0]), hidden=int(hidden),
                   heads=heads, head_dim=head_dim, ffn=layers[0].fc.out_features, scale=scales.pop(),
                   ids_input="input_ids", logits_output="logits", layers=layers, final_ln=final_ln,
                   weights=weights, ort_cpu=target.name)
    return ir


def _renumber(layers: list[DecoderLayer], weights: dict) -> None:
    """Blocks were found last first; name them 0.. in graph order."""
    count = len(layers)
    renamed = {}
    for new, layer in enumerate(layers):
        old = count - 1 - new
        for part in (layer.ln1, layer.qkv, layer.o, layer.ln2, layer.fc, layer.fc_out):
            part.name = part.name.replace(f"layer{old}.", f"layer{new}.", 1)
        for name, array in weights.items():
            if name.startswith(f"layer{old}."):
                renamed[name.replace(f"layer{old}.", f"layer{new}.", 1)] = array
    for name in [n for n in weights if n.startswith("layer")]:
        del weights[name]
    weights.update(renamed)


def _heads(g: Graph, layer: DecoderLayer) -> tuple[int, int]:
    """Heads and head size from the cache input's shape [1, heads, past, head_dim]."""
    shape = g.tensor(g.inputs[layer.past_key]).shape
    if len(shape) != 4 or not isinstance(shape[1], int) or not isinstance(shape[3], int):
        raise PorterError(f"decoder: cache input {layer.past_key} has shape {shape}, expected "
                          f"[1, heads, past, head_dim]")
    return int(shape[1]), int(shape[3])


