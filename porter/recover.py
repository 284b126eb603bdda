"""Graph -> EncoderIR: assemble pattern matches into named blocks and check the result.

The walk follows the data flow of a post-LayerNorm BERT encoder:

    embeddings -> LN -> [attention -> add -> LN -> FFN -> add -> LN] x L -> head

Every LayerNorm is found by pattern; each one after the first closes either an attention
sublayer or an FFN sublayer, matched backwards from the LayerNorm's input with the previous
LayerNorm's output pre-bound as the residual. Which of the previous LayerNorm's two outputs
(pre-affine or post-affine) the sublayer's FULLY_CONNECTEDs read decides whether its affine is
folded into them. At the end every op of the graph must belong to exactly one block; any that
does not is reported with its index, type and tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter import quant
from porter import tflite_patterns as P
from porter.errors import PorterError
from porter.graph import Graph
from porter.ir import (MASK_INPUT, WHOLE_WINDOW, Attention, EncoderIR, EncoderLayer,
                       Embeddings, LayerNorm, Linear, as_f32)
from porter.patterns import Match, match, match_all


@dataclass
class FoundLayerNorm:
    x: int  # input tensor
    pre: int  # normalised tensor before the affine (== post when there is none)
    post: int  # tensor after the affine
    form: str  # "shift" (litert-torch) or "keras" (TensorFlow)
    eps: float
    gamma: np.ndarray | None
    beta: np.ndarray | None
    ops: set = field(default_factory=set)


class Recovery:
    """Collects blocks while walking the graph; owns the op-accounting invariant."""

    def __init__(self, g: Graph):
        self.g = g
        self.owner: dict[int, str] = {}  # op index -> block that explained it
        self.weights: dict[str, np.ndarray] = {}

    def claim(self, block: str, ops) -> None:
        for i in ops:
            if i in self.owner and self.owner[i] != block:
                op = self.g.ops[i]
                raise PorterError(f"{op.describe()} matched by both {self.owner[i]} and {block}")
            self.owner[i] = block

    def unexplained(self) -> list[int]:
        return [op.index for op in self.g.ops if op.index not in self.owner]

    # ---- blocks ----------------------------------------------------------------------------

    def layer_norms(self) -> list[FoundLayerNorm]:
        found = []
        for m in match_all(P.LAYER_NORM_SHIFT, self.g):
            found.append(self._shift_layer_norm(m))
        for m in match_all(P.LAYER_NORM_CENTRED, self.g):
            found.append(self._with_affine(FoundLayerNorm(
                m["x"], m["norm"], m["norm"], "centred", self._eps(m), None, None,
                set(m.consumed))))
        for m in match_all(P.LAYER_NORM_KERAS, self.g):
            found.append(FoundLayerNorm(m["x"], m["out"], m["out"], "keras", self._eps(m),
                                        self._vector(m["gamma"]), self._vector(m["beta"]),
                                        set(m.consumed)))
        return sorted(found, key=lambda ln: self.g.producer(ln.post).index)

    def _shift_layer_norm(self, m: Match) -> FoundLayerNorm:
        zero = self.g.const(m["zero"]).reshape(-1)[0]
        if zero != 0:
            raise PorterError(f"LayerNorm at {self.g.producer(m['norm']).describe()}: "
                              f"expected 0 - rstd * mean, found {zero} - rstd * mean")
        return self._with_affine(FoundLayerNorm(m["x"], m["norm"], m["norm"], "shift",
                                                self._eps(m), None, None, set(m.consumed)))

    def _with_affine(self, ln: FoundLayerNorm) -> FoundLayerNorm:
        """Attach the `* gamma + beta` that follows the normalised tensor, if the graph has one."""
        for user in self.g.users(ln.pre):
            for t in user.outputs:
                for a in self.g.users(t):
                    am = match(P.AFFINE, self.g, a.outputs[0], Match({"norm": ln.pre}))
                    if am is not None:
                        ln.post = am["affine"]
                        ln.gamma, ln.beta = self._vector(am["gamma"]), self._vector(am["beta"])
                        ln.ops |= am.consumed
                        return ln
        return ln

    def _eps(self, m: Match) -> float:
        return float(self.g.const(m["eps"]).reshape(-1)[0])

    def _vector(self, t: int) -> np.ndarray:
        return as_f32(self.g.const(t).reshape(-1))

    def linear(self, name: str, m: Match, key: str, asym_required=None) -> Linear:
        op = self.g.ops[m.ops[key]]
        w_t = self.g.tensor(m[f"{key}_w"])
        where = f"{name} ({op.describe()})"
        if op.options.get("fused_activation_function", "NONE") != "NONE":
            raise PorterError(f"{where}: fused activation "
                              f"{op.options['fused_activation_function']} is not supported")
        scheme = quant.weight_scheme(self.g, w_t, 0, where)
        if len(w_t.shape) != 2:
            raise PorterError(f"{where}: weight {w_t.describe()} is not 2-D")
        out_f, in_f = w_t.shape
        self.weights[f"{name}.weight"] = np.ascontiguousarray(w_t.data)
        if scheme != "float32":
            self.weights[f"{name}.scale"] = as_f32(w_t.quant.scale)
        bias_key = f"{key}_b"
        if bias_key in m.tensors:
            b = self._vector(m[bias_key])
            if b.size != out_f:
                raise PorterError(f"{where}: bias has {b.size} values for {out_f} outputs")
            self.weights[f"{name}.bias"] = b
        return Linear(name, in_f, out_f, "float32" if scheme == "float32" else "int8",
                      scheme == "int8_per_channel",
                      bool(op.options.get("asymmetric_quantize_inputs", False)),
                      bias_key in m.tensors, op.index)

    def layer_norm_ir(self, name: str, ln: FoundLayerNorm, folded: bool) -> LayerNorm:
        hidden = self.g.tensor(ln.x).shape[-1]
        gamma = ln.gamma if ln.gamma is not None else np.ones(hidden, np.float32)
        beta = ln.beta if ln.beta is not None else np.zeros(hidden, np.float32)
        if gamma.size != hidden or beta.size != hidden:
            raise PorterError(f"{name}: gamma/beta have {gamma.size}/{beta.size} values for "
                              f"hidden size {hidden}")
        self.weights[f"{name}.gamma"], self.weights[f"{name}.beta"] = gamma, beta
        self.claim(name, ln.ops)
        return LayerNorm(name, ln.eps, folded, ln.form, sorted(ln.ops))


def _feed_of(ln: FoundLayerNorm, feed: int, what: str, g: Graph) -> bool:
    """Whether the sublayer reads the pre-affine tensor (affine folded into its weights)."""
    if feed == ln.post:
        return False
    if feed == ln.pre:
        return True
    raise PorterError(f"{what} reads {g.tensor(feed).describe()}, which is neither output of "
                      f"the LayerNorm before it")


def recover_encoder(g: Graph) -> EncoderIR:
    r = Recovery(g)
    lns = r.layer_norms()
    if not lns:
        raise PorterError("no LayerNorm found: the graph is not a BERT-style encoder "
                          "(or uses a LayerNorm spelling porter does not know)")
    embeddings, ids_input = _embeddings(r, lns[0])
    if (len(lns) - 1) % 2:
        raise PorterError(f"found {len(lns)} LayerNorms; a post-LN encoder has 1 + 2 per layer "
                          "(a LayerNorm is missing or spelled in a way porter does not know)")
    mask_tensor = None
    layers = []
    prev = lns[0]
    prev_ir = embeddings.ln
    for i in range(len(lns) // 2):
        attn_ln, ffn_ln = lns[1 + 2 * i], lns[2 + 2 * i]
        attn, am = _attention(r, i, attn_ln, prev)
        prev_ir.affine_folded = _feed_of(prev, am["feed"], f"layer {i} attention", g)
        if "mask_bias" in am.tensors:
            mask_tensor = _check_same_mask(mask_tensor, am["mask_bias"], i, g)
        attn_ln_ir = r.layer_norm_ir(f"layer{i}.attn_ln", attn_ln, False)
        ffn_in, gelu, ffn_out, fm = _ffn(r, i, ffn_ln, attn_ln)
        attn_ln_ir.affine_folded = _feed_of(attn_ln, fm["feed"], f"layer {i} FFN", g)
        ffn_ln_ir = r.layer_norm_ir(f"layer{i}.ffn_ln", ffn_ln, False)
        layers.append(EncoderLayer(attn, attn_ln_ir, ffn_in, gelu, ffn_out, ffn_ln_ir))
        prev, prev_ir = ffn_ln, ffn_ln_ir
    head, output_name = _head(r, prev)
    prev_ir.affine_folded = _feed_of(prev, head[1], "classifier head", g)
    mask_mode, mask_input, mask_value = _mask(r, mask_tensor)
    for ly in layers:
        ly.attn.mask_value = mask_value
    leftover = r.unexplained()
    if leftover:
        raise PorterError("ops not explained by any encoder block: " + "; ".join(
            _describe_op(g, i) for i in leftover[:8]) + (" ..." if len(leftover) > 8 else ""))
    first = layers[0].attn if layers else None
    seq = g.tensor(g.inputs[ids_input]).shape[-1]
    ir = EncoderIR(
        source=g.path, format=g.format, seq=seq, hidden=embeddings.hidden,
        heads=first.heads if first else 0,
        ffn=layers[0].ffn_in.out_features if layers else 0,
        vocab=embeddings.vocab, labels=head[0].out_features,
        ids_input=ids_input, mask_input=mask_input, output=output_name, mask=mask_mode,
        embeddings=embeddings, layers=layers, head=head[0], weights=r.weights)
    _check_shapes(ir)
    _check_one_scheme(ir)
    return ir


def _region(g: Graph, end: int, stop: set[int]) -> list[int]:
    """Ops computing tensor `end` from the `stop` tensors (a sublayer's body), in graph order."""
    seen, todo = set(), [end]
    while todo:
        t = todo.pop()
        op = g.producer(t)
        if t in stop or op is None or op.index in seen:
            continue
        seen.add(op.index)
        todo.extend(i for i in op.inputs if i >= 0 and not g.tensor(i).is_const)
    return sorted(seen)


def _no_match(g: Graph, what: str, expected: str, end: int, stop: set[int]) -> PorterError:
    """Explain a sublayer that no pattern matched, naming any op a pattern never uses."""
    unknown = [i for i in _region(g, end, stop) if g.ops[i].type not in P.KNOWN_OPS]
    if unknown:
        return PorterError(f"{what}: unsupported op inside the block: "
                           + "; ".join(_describe_op(g, i) for i in unknown[:4]))
    return PorterError(f"{what}: {g.tensor(end).describe()} is not {expected}")


def _describe_op(g: Graph, i: int) -> str:
    op = g.ops[i]
    ins = ", ".join(g.tensor(t).describe() if t >= 0 else "-" for t in op.inputs)
    return f"op {i} {op.type}({ins})"


def _embeddings(r: Recovery, ln: FoundLayerNorm) -> tuple[Embeddings, str]:
    g = r.g
    m = match(P.EMBEDDINGS, g, ln.x)
    if m is None:
        raise PorterError(f"the first LayerNorm's input {g.tensor(ln.x).describe()} is not "
                          "word + position (+ token type) embeddings")
    ids_input = _input_name(g, m["ids"], "token ids")
    table = g.tensor(m["table"])
    lookup = g.ops[m.ops["lookup"]]
    vocab, hidden = table.shape
    if table.dtype == "float32":
        kind = "float32"
    elif lookup.type == "EMBEDDING_LOOKUP":
        scheme = quant.weight_scheme(g, table, 0, "word embedding")
        kind = "int8_rows" if scheme == "int8_per_channel" else "int8_tensor"
    else:
        if quant.weight_scheme(g, table, 0, "word embedding") != "int8_per_tensor":
            raise PorterError(f"word embedding {table.describe()}: GATHER + DEQUANTIZE expects "
                              "one scale for the whole table")
        kind = "int8_tensor"
    r.weights["embed.table"] = np.ascontiguousarray(table.data)
    if kind != "float32":
        r.weights["embed.scale"] = as_f32(table.quant.scale)
    seq = g.tensor(g.inputs[ids_input]).shape[-1]
    terms = [m[k] for k in ("pos", "type") if k in m.tensors]
    for i, t in enumerate(terms):
        data = as_f32(g.const(t))
        if data.size != seq * hidden:
            raise PorterError(f"embedding term {g.tensor(t).describe()} is not [seq={seq}, "
                              f"hidden={hidden}]: porter needs a fixed window")
        r.weights[f"embed.bias{i}"] = data.reshape(seq, hidden)
    r.claim("embeddings", m.consumed | _input_reshapes(g, m["ids"]))
    ln_ir = r.layer_norm_ir("embed.ln", ln, False)
    return Embeddings(kind, vocab, hidden, ln_ir, len(terms)), ids_input


def _input_reshapes(g: Graph, t: int) -> set:
    """Reshape ops between a graph input and its use (matched via maybe_reshaped)."""
    op = g.producer(t)
    return {op.index} if op is not None and op.type == "RESHAPE" else set()


def _input_name(g: Graph, t: int, what: str) -> str:
    for name, idx in g.inputs.items():
        if idx == t:
            return name
    raise PorterError(f"{what} come from {g.tensor(t).describe()}, which is not a graph input")


def _attention(r: Recovery, i: int, ln: FoundLayerNorm, prev: FoundLayerNorm):
    g = r.g
    m = match(P.ATTENTION, g, ln.x, Match({"resid": prev.post}))
    if m is None:
        raise _no_match(g, f"layer {i} attention", "a self-attention sublayer (Q/K/V "
                        "FULLY_CONNECTED, head split, BATCH_MATMUL, SOFTMAX, BATCH_MATMUL, "
                        "merge, output projection, residual ADD)", ln.x, {prev.pre, prev.post})
    name = f"layer{i}.attn"
    q, k, v, o = (r.linear(f"{name}.{x}", m, x) for x in ("q", "k", "v", "o"))
    scores = g.ops[m.ops["scores"]]
    q_heads = g.tensor(scores.inputs[0]).shape
    k_heads = g.tensor(scores.inputs[1]).shape
    heads, head_dim = q_heads[-3], q_heads[-1]
    if scores.options.get("adj_x"):
        raise PorterError(f"{scores.describe()}: adj_x on the query operand is not supported")
    k_dims = (k_heads[-1], k_heads[-2]) if scores.options.get("adj_y") else k_heads[-2:]
    if heads * head_dim != q.out_features or k_dims[0] != head_dim:
        raise PorterError(f"{scores.describe()}: query {list(q_heads)} / key {list(k_heads)} "
                          f"do not split {q.out_features} features into heads")
    scale = float(g.const(m["scale"]).reshape(-1)[0]) if "scale" in m.tensors else 1.0
    beta = float(g.ops[m.ops["probs"]].options.get("beta", 1.0))
    r.claim(name, m.consumed)
    # mask_value is filled in once the mask path has been recovered (see _mask).
    return Attention(heads, head_dim, scale, "scores", beta, 0.0, q, k, v, o), m


def _ffn(r: Recovery, i: int, ln: FoundLayerNorm, prev: FoundLayerNorm):
    g = r.g
    m = match(P.FFN, g, ln.x, Match({"resid": prev.post}))
    if m is None:
        raise _no_match(g, f"layer {i} feed-forward", "a feed-forward sublayer "
                        "(FULLY_CONNECTED, GELU, FULLY_CONNECTED, residual ADD)", ln.x,
                        {prev.pre, prev.post})
    name = f"layer{i}"
    ffn_in = r.linear(f"{name}.ffn_in", m, "ffn_in")
    ffn_out = r.linear(f"{name}.ffn_out", m, "ffn_out")
    gelu_op = g.ops[m.ops["gelu"]]
    gelu = "tanh" if gelu_op.options.get("approximate") else "erf"
    r.claim(f"{name}.ffn", m.consumed)
    return ffn_in, gelu, ffn_out, m


def _head(r: Recovery, last: FoundLayerNorm):
    g = r.g
    if len(g.outputs) != 1:
        raise PorterError(f"expected one output (the logits), found {sorted(g.outputs)}")
    (output_name, out_t), = g.outputs.items()
    t, trailing = out_t, set()
    while (op := g.producer(t)) is not None and op.type == "RESHAPE":
        trailing.add(op.index)
        t = op.inputs[0]
    m = match(P.HEAD, g, t)
    if m is None:
        raise PorterError(f"output '{output_name}' is not computed by a FULLY_CONNECTED head")
    head = r.linear("head", m, "head")
    r.claim("head", m.consumed | trailing)
    return (head, m["feed"]), output_name


def _check_same_mask(seen, t, i, g):
    if seen is not None and seen != t:
        raise PorterError(f"layer {i} uses a different attention mask "
                          f"({g.tensor(t).describe()}) than the layers before it")
    return t


def _mask(r: Recovery, mask_bias: int | None):
    """MASK_INPUT when a mask input removes padded keys; WHOLE_WINDOW when nothing masks."""
    g = r.g
    if mask_bias is None:
        return WHOLE_WINDOW, None, 0.0
    m = match(P.MASK_BIAS, g, mask_bias)
    if m is None:
        raise PorterError(f"attention mask {g.tensor(mask_bias).describe()} is not computed "
                          "from a mask input in a way porter knows")
    if "keep_all" in m.tensors:  # litert-torch: SELECT_V2(mask, keep_value, drop_value)
        keep = float(g.const(m["keep_value"]).reshape(-1)[0])
        drop = float(g.const(m["drop_value"]).reshape(-1)[0])
        if not np.all(g.const(m["keep_all"])):
            raise PorterError("attention mask is combined with a constant that drops keys "
                              "(a causal or fixed mask); only padding masks are supported")
        index = g.const(m["key_index"]).reshape(-1, 2)
        if not (np.all(index[:, 0] == 0) and np.array_equal(index[:, 1], np.arange(len(index)))):
            raise PorterError("attention mask gathers mask entries in an unexpected order")
    else:  # TensorFlow: (1 - mask) * drop_value
        if float(g.const(m["one"]).reshape(-1)[0]) != 1.0:
            raise PorterError("attention mask is not computed as (1 - mask) * constant")
        keep, drop = 0.0, float(g.const(m["drop_value"]).reshape(-1)[0])
    if keep != 0.0 or drop > -1e4:
        raise PorterError(f"attention mask adds {keep} to kept and {drop} to dropped keys; "
                          "expected 0 and a large negative number")
    r.claim("mask", m.consumed | _input_reshapes(g, m["mask"]))
    return MASK_INPUT, _input_name(g, m["mask"], "the attention mask"), drop


def _check_one_scheme(ir: EncoderIR) -> None:
    """Every Linear inside the layers must share one weight scheme.

    A float FULLY_CONNECTED among int8 ones means the quantiser skipped a layer it should not
    have (or the graph was edited); TensorFlow's converter legitimately leaves a small head
    float (it keeps weights under 1024 elements), so the head is exempt.
    """
    body = [lin for lin in ir.linears() if lin is not ir.head]
    if not body:
        return
    first = body[0]
    for lin in body[1:]:
        if (lin.weight_dtype, lin.per_channel) != (first.weight_dtype, first.per_channel):
            raise PorterError(
                f"{lin.name} (op {lin.source_op}) has {_scheme(lin)} weights where the encoder's "
                f"other layers have {_scheme(first)} weights (first: {first.name})")


def _scheme(lin: Linear) -> str:
    if lin.weight_dtype == "float32":
        return "float32"
    return "int8 per-channel" if lin.per_channel else "int8 per-tensor"


def _check_shapes(ir: EncoderIR) -> None:
    h = ir.hidden
    for i, ly in enumerate(ir.layers):
        a = ly.attn
        expect = {"q": (h, h), "k": (h, h), "v": (h, h), "o": (h, h),
                  "ffn_in": (h, ir.ffn), "ffn_out": (ir.ffn, h)}
        got = {"q": a.q, "k": a.k, "v": a.v, "o": a.o, "ffn_in": ly.ffn_in, "ffn_out": ly.ffn_out}
        for key, (fin, fout) in expect.items():
            lin = got[key]
            if (lin.in_features, lin.out_features) != (fin, fout):
                raise PorterError(f"layer {i} {key}: [{lin.out_features} x {lin.in_features}] "
                                  f"weights, expected [{fout} x {fin}]")
        if a.heads != ir.heads:
            raise PorterError(f"layer {i} has {a.heads} heads, layer 0 has {ir.heads}")
    if ir.head.in_features != h:
        raise PorterError(f"head reads {ir.head.in_features} features, hidden size is {h}")
