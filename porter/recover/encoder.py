"""Graph -> EncoderIR: assemble pattern matches into named blocks and check the result.

The walk follows the data flow of a post-LayerNorm BERT encoder:

    embeddings -> LN -> [attention -> add -> LN -> FFN -> add -> LN] x L -> head

Every LayerNorm is found by pattern; each one after the first closes either an attention
sublayer or an FFN sublayer, matched backwards from the LayerNorm's input with the previous
LayerNorm's output pre-bound as the residual. Which of the previous LayerNorm's two outputs
(pre-affine or post-affine) the sublayer's linear layers read decides whether its affine is
folded into them. At the end every op of the graph must belong to exactly one block; any that
does not is reported with its index, type and tensors.

The walk is the same for every format; a Dialect says how the format spells the blocks (its
pattern set), where a weight keeps its output channel, and how the mask path is checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from porter.recover import fold

from porter.reference import ort_cpu as ort_cpus
from porter.reference import quant
from porter.recover.schemes import weight_scheme
from porter.recover import onnx_patterns as OP
from porter.recover import tflite_patterns as TP
from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.encoder import (FLOAT_ACTIVATIONS, LITERT_BUILTIN, MASK_INPUT, ONNXRUNTIME_CPU,
                       ORT_DYNAMIC_UINT8, TFLITE_HYBRID, WHOLE_WINDOW, Attention, EncoderIR,
                       EncoderLayer, Embeddings, LayerNorm, Linear, as_f32)
from porter.recover.engine import Match, Pattern, match, match_all


@dataclass(frozen=True)
class Dialect:
    """How one format spells an encoder: the patterns and the few facts the walk needs."""

    layer_norms: tuple  # (form, pattern) pairs; see FoundLayerNorm for the names they bind
    affine: Pattern  # "* gamma + beta" after a pre-affine tensor bound as "norm"
    embeddings: Pattern
    attention: Pattern
    ffn: Pattern
    head: Pattern
    known_ops: frozenset
    reshape: str  # the format's reshape op (ignored around inputs and the output)
    weight_out_axis: int  # the weight axis that holds output channels
    reference: str  # whose kernels the IR's arithmetic reproduces
    prepare: Callable  # Graph -> (graph to match, ops explained by preparing it)
    mask: Callable  # (Recovery, mask bias tensor) -> (mask mode, mask input, mask value)
    runtime_form: Callable  # (Graph, FoundLayerNorm) -> the form the reference runtime computes


def _as_is(g: Graph):
    return g, set()


def _as_written(g: Graph, ln: "FoundLayerNorm") -> str:
    return ln.form


def _onnxruntime_form(g: Graph, ln: "FoundLayerNorm") -> str:
    """onnxruntime's optimiser first fuses a decomposed LayerNorm into one LayerNormalization,
    then fuses a LayerNormalization whose input is an Add read by nothing else into
    SkipLayerNormalization (SkipLayerNormFusion); each kernel rounds differently."""
    producer = g.producer(ln.x)
    only_reader = all(user.index in ln.ops for user in g.users(ln.x))
    if producer is not None and producer.type == "Add" and only_reader:
        return "onnx_skip"
    return "onnx"


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

    def __init__(self, g: Graph, dialect: Dialect, ort_cpu: ort_cpus.OrtCpu | None):
        self.g = g
        self.d = dialect
        self.ort_cpu = ort_cpu  # onnxruntime graphs: the CPU whose arithmetic they reproduce
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
        found = [self._found_layer_norm(form, m)
                 for form, pattern in self.d.layer_norms for m in match_all(pattern, self.g)]
        return sorted(found, key=lambda ln: self.g.producer(ln.post).index)

    def _found_layer_norm(self, form: str, m: Match) -> FoundLayerNorm:
        """A LayerNorm pattern binds x and either "out" (affine included: gamma, beta) or
        "norm" (the pre-affine tensor; the affine, if any, follows as separate ops)."""
        if "zero" in m.tensors:  # litert-torch's 0 - rstd * mean
            zero = self.g.const(m["zero"]).reshape(-1)[0]
            if zero != 0:
                raise PorterError(f"LayerNorm at {self.g.producer(m['norm']).describe()}: "
                                  f"expected 0 - rstd * mean, found {zero} - rstd * mean")
        if "out" in m.tensors:
            ln = FoundLayerNorm(m["x"], m["out"], m["out"], form, self._eps(m),
                                self._vector(m["gamma"]), self._vector(m["beta"]), set(m.consumed))
        else:
            ln = self._with_affine(FoundLayerNorm(m["x"], m["norm"], m["norm"], form,
                                                  self._eps(m), None, None, set(m.consumed)))
        ln.form = self.d.runtime_form(self.g, ln)
        return ln

    def _with_affine(self, ln: FoundLayerNorm) -> FoundLayerNorm:
        """Attach the `* gamma + beta` that follows the normalised tensor, if the graph has one."""
        for user in self.g.users(ln.pre):
            for t in user.outputs:
                for a in self.g.users(t):
                    am = match(self.d.affine, self.g, a.outputs[0], Match({"norm": ln.pre}))
                    if am is not None:
                        ln.post = am["affine"]
                        ln.gamma, ln.beta = self._vector(am["gamma"]), self._vector(am["beta"])
                        ln.ops |= am.consumed
                        return ln
        return ln

    def _eps(self, m: Match) -> float:
        if "eps" in m.tensors:
            return float(self.g.const(m["eps"]).reshape(-1)[0])
        # ONNX LayerNormalization: an attribute, 1e-5 when absent (the operator's default)
        return float(self.g.ops[m.ops["out"]].options.get("epsilon", 1e-5))

    def _vector(self, t: int) -> np.ndarray:
        return as_f32(self.g.const(t).reshape(-1))

    def linear(self, name: str, m: Match, key: str) -> Linear:
        op = self.g.ops[m.ops[key]]
        w_t = self.g.tensor(m[f"{key}_w"])
        where = f"{name} ({op.describe()})"
        if op.options.get("fused_activation_function", "NONE") != "NONE":
            raise PorterError(f"{where}: fused activation "
                              f"{op.options['fused_activation_function']} is not supported")
        scheme = weight_scheme(self.g, w_t, self.d.weight_out_axis, where)
        if len(w_t.shape) != 2:
            raise PorterError(f"{where}: weight {w_t.describe()} is not 2-D")
        weight = w_t.data if self.d.weight_out_axis == 0 else w_t.data.T  # the IR's [out, in]
        out_f, in_f = weight.shape
        self.weights[f"{name}.weight"] = np.ascontiguousarray(weight)
        if scheme != "float32":
            self.weights[f"{name}.scale"] = as_f32(w_t.quant.scale)
        bias_key = f"{key}_b"
        if bias_key in m.tensors:
            b = self._vector(m[bias_key])
            if b.size != out_f:
                raise PorterError(f"{where}: bias has {b.size} values for {out_f} outputs")
            self.weights[f"{name}.bias"] = b
        activation_quant = self._activation_quant(m, key, w_t, where)
        return Linear(name, in_f, out_f, "float32" if scheme == "float32" else "int8",
                      scheme == "int8_per_channel",
                      bool(op.options.get("asymmetric_quantize_inputs", False)),
                      bias_key in m.tensors, op.index, activation_quant,
                      self.ort_cpu.integer_dot if activation_quant == ORT_DYNAMIC_UINT8
                      else quant.EXACT_DOT)

    def _activation_quant(self, m: Match, key: str, w_t, where: str) -> str:
        if f"{key}_input_quant" not in m.ops:
            return FLOAT_ACTIVATIONS if w_t.dtype == "float32" else TFLITE_HYBRID
        # quantize_dynamic rescales by Mul(x_scale, w_scale): that constant must be the scale
        # the frontend attached to the weight (the one the IR records).
        w_scale = self._vector(m[f"{key}_wscale"])
        if not np.array_equal(np.broadcast_to(w_scale, w_t.quant.scale.shape), w_t.quant.scale):
            raise PorterError(f"{where}: the product is rescaled by {w_scale.size} value(s) that "
                              f"are not the weight's quantisation scale")
        return ORT_DYNAMIC_UINT8

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


def recover_encoder(g: Graph, ort_cpu: str = ort_cpus.AUTO) -> EncoderIR:
    """ort_cpu: for an ONNX graph, the CPU whose onnxruntime arithmetic the IR reproduces (a
    porter.reference.ort_cpu target, or auto: this machine's)."""
    dialect = DIALECTS.get(g.format)
    if dialect is None:
        raise PorterError(f"porter recovers encoders from {sorted(DIALECTS)} graphs, not {g.format}")
    target = _ort_cpu_of(dialect, g.format, ort_cpu)
    g, prepared = dialect.prepare(g)
    r = Recovery(g, dialect, target)
    r.claim("constants", prepared)
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
    mask_mode, mask_input, mask_value = _attention_bias(r, dialect, mask_tensor)
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
        embeddings=embeddings, layers=layers, head=head[0], weights=r.weights,
        reference=dialect.reference, ort_cpu=target.name if target else None)
    _check_shapes(ir)
    _check_one_scheme(ir)
    return ir


def _ort_cpu_of(dialect: Dialect, graph_format: str, choice: str) -> ort_cpus.OrtCpu | None:
    """The onnxruntime target of an ONNX graph; none for LiteRT's kernels, which give the same
    bits on every CPU (so naming one is a mistake)."""
    if dialect.reference == ONNXRUNTIME_CPU:
        return ort_cpus.resolve(choice)
    if choice != ort_cpus.AUTO:
        raise PorterError(f"--ort-cpu {choice}: a {graph_format} graph runs LiteRT's builtin kernels, "
                          f"the same on every CPU; the target is for ONNX graphs (onnxruntime)")
    return None


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


def _no_match(r: "Recovery", what: str, expected: str, end: int, stop: set[int]) -> PorterError:
    """Explain a sublayer that no pattern matched, naming any op a pattern never uses."""
    g = r.g
    unknown = [i for i in _region(g, end, stop) if g.ops[i].type not in r.d.known_ops]
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
    m = match(r.d.embeddings, g, ln.x)
    if m is None:
        raise PorterError(f"the first LayerNorm's input {g.tensor(ln.x).describe()} is not "
                          "word + position (+ token type) embeddings")
    ids_input = _input_name(g, m["ids"], "token ids")
    table = g.tensor(m["table"])
    lookup = g.ops[m.ops["lookup"]]
    vocab, hidden = table.shape
    if table.dtype == "float32":
        kind = "float32"
    elif lookup.type == "DequantizeLinear":
        kind = _dequantized_table(r, m, table)
    elif lookup.type == "EMBEDDING_LOOKUP":
        scheme = weight_scheme(g, table, 0, "word embedding")
        kind = "int8_rows" if scheme == "int8_per_channel" else "int8_tensor"
    else:
        if weight_scheme(g, table, 0, "word embedding") != "int8_per_tensor":
            raise PorterError(f"word embedding {table.describe()}: GATHER + DEQUANTIZE expects "
                              "one scale for the whole table")
        kind = "int8_tensor"
    r.weights["embed.table"] = np.ascontiguousarray(table.data)
    if kind in ("int8_rows", "int8_tensor"):
        r.weights["embed.scale"] = as_f32(table.quant.scale)
    seq = g.tensor(g.inputs[ids_input]).shape[-1]
    # The IR adds the terms in the graph's order: the one the earlier op consumes first.
    terms = sorted((m[k] for k in ("pos", "type") if k in m.tensors),
                   key=lambda t: min(op.index for op in g.users(t) if op.index in m.consumed))
    for i, t in enumerate(terms):
        data = as_f32(g.const(t))
        if data.size != seq * hidden:
            raise PorterError(f"embedding term {g.tensor(t).describe()} is not [seq={seq}, "
                              f"hidden={hidden}]: porter needs a fixed window")
        r.weights[f"embed.bias{i}"] = data.reshape(seq, hidden)
    r.claim("embeddings", m.consumed | _input_reshapes(g, m["ids"]))
    ln_ir = r.layer_norm_ir("embed.ln", ln, False)
    return Embeddings(kind, vocab, hidden, ln_ir, len(terms)), ids_input


def _dequantized_table(r: Recovery, m: Match, table) -> str:
    """Gather(table) -> DequantizeLinear(scale, zero point): one scale and one zero point."""
    scale = r.g.const(m["table_scale"]).reshape(-1)
    zero_point = r.g.const(m["table_zero_point"]).reshape(-1)
    if table.dtype not in ("uint8", "int8") or zero_point.dtype != table.dtype:
        raise PorterError(f"word embedding {table.describe()}: DequantizeLinear expects a uint8 "
                          f"or int8 table with a zero point of the same type, found "
                          f"{table.dtype} with a {zero_point.dtype} zero point")
    if not (np.isfinite(scale[0]) and scale[0] > 0):
        raise PorterError(f"word embedding {table.describe()}: scale {scale[0]} is not positive")
    if table.dtype == "int8" and zero_point[0] != 0:
        raise PorterError(f"word embedding {table.describe()}: int8 table with zero point "
                          f"{zero_point[0]}; porter reads int8 tables with zero point 0")
    r.weights["embed.scale"] = as_f32(scale)
    if table.dtype == "int8":
        return "int8_tensor"
    r.weights["embed.zero_point"] = zero_point.astype(np.int32)
    return "uint8_tensor"


def _input_reshapes(g: Graph, t: int) -> set:
    """Reshape ops between a graph input and its use (matched via maybe_reshaped)."""
    op = g.producer(t)
    return {op.index} if op is not None and op.type in ("RESHAPE", OP.RESHAPE) else set()


def _input_name(g: Graph, t: int, what: str) -> str:
    for name, idx in g.inputs.items():
        if idx == t:
            return name
    raise PorterError(f"{what} come from {g.tensor(t).describe()}, which is not a graph input")


def _attention(r: Recovery, i: int, ln: FoundLayerNorm, prev: FoundLayerNorm):
    g = r.g
    m = match(r.d.attention, g, ln.x, Match({"resid": prev.post}))
    if m is None:
        raise _no_match(r, f"layer {i} attention", "a self-attention sublayer (Q/K/V "
                        "linear layers, head split, Q.K^T, scale, mask, softmax, probs.V, "
                        "merge, output projection, residual add)", ln.x, {prev.pre, prev.post})
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
    divisor = None
    if "scale_divisor" in m.tensors:
        divisor = float(g.const(m["scale_divisor"]).reshape(-1)[0])
        scale = 1.0 / divisor
    beta = float(g.ops[m.ops["probs"]].options.get("beta", 1.0))
    r.claim(name, m.consumed)
    # mask_value is filled in once the mask path has been recovered (see Dialect.mask).
    return Attention(heads, head_dim, scale, "scores", beta, 0.0, q, k, v, o, divisor), m


def _ffn(r: Recovery, i: int, ln: FoundLayerNorm, prev: FoundLayerNorm):
    g = r.g
    m = match(r.d.ffn, g, ln.x, Match({"resid": prev.post}))
    if m is None:
        raise _no_match(r, f"layer {i} feed-forward", "a feed-forward sublayer "
                        "(linear, GELU, linear, residual add)", ln.x,
                        {prev.pre, prev.post})
    name = f"layer{i}"
    ffn_in = r.linear(f"{name}.ffn_in", m, "ffn_in")
    ffn_out = r.linear(f"{name}.ffn_out", m, "ffn_out")
    gelu = _gelu_kind(g, m)
    r.claim(f"{name}.ffn", m.consumed)
    return ffn_in, gelu, ffn_out, m


# erf GELU written out: h * 0.5 * (1 + erf(h / sqrt 2)); the constants must be these (float32).
_GELU_CONSTANTS = {"erf_divisor": np.float32(np.sqrt(2)), "erf_factor": np.float32(np.sqrt(0.5)),
                   "one": np.float32(1), "half": np.float32(0.5)}


def _gelu_kind(g: Graph, m: Match) -> str:
    """"erf" or "tanh": the GELU op's option (TFLite: a bool; ONNX: "none" / "tanh"), or the
    erf formula checked constant by constant. ONNX: "erf_mul" where the erf's input is h times
    1 / sqrt 2 rather than h / sqrt 2: onnxruntime's Gelu kernel (the op itself, or the
    (h * (1 + erf)) * 0.5 spelling, which its optimiser fuses into it) and a Mul spelling."""
    for name, expected in _GELU_CONSTANTS.items():
        if name in m.tensors and g.const(m[name]).reshape(-1)[0] != expected:
            raise PorterError(f"GELU at {g.ops[m.ops['gelu']].describe()}: constant "
                              f"{g.tensor(m[name]).describe()} is "
                              f"{g.const(m[name]).reshape(-1)[0]}, expected {expected}")
    op = g.ops[m.ops["gelu"]]
    if op.options.get("approximate", False) in (True, "tanh"):
        return "tanh"
    if g.format != "onnx":
        return "erf"
    torchscript_order = "half" in m.tensors and m["half"] in op.inputs  # (h * (1 + erf)) * 0.5
    fused_by_onnxruntime = op.type in ("Gelu", "com.microsoft.Gelu") or torchscript_order
    return "erf_mul" if fused_by_onnxruntime or "erf_factor" in m.tensors else "erf"


def _head(r: Recovery, last: FoundLayerNorm):
    g = r.g
    if len(g.outputs) != 1:
        raise PorterError(f"expected one output (the logits), found {sorted(g.outputs)}")
    (output_name, out_t), = g.outputs.items()
    t, trailing = out_t, set()
    while (op := g.producer(t)) is not None and op.type == r.d.reshape:
        trailing.add(op.index)
        t = op.inputs[0]
    m = match(r.d.head, g, t)
    if m is None:
        raise PorterError(f"output '{output_name}' is not computed by a linear head")
    head = r.linear("head", m, "head")
    r.claim("head", m.consumed | trailing)
    return (head, m["feed"]), output_name


def _attention_bias(r: Recovery, dialect, mask_tensor: int | None):
    """(mask mode, mask input name, value added to dropped keys) from what the scores get added.

    No bias, or a constant all-zero one (what an exporter leaves of an all-ones mask traced
    into the graph), means every key is attended: the whole window, padding load-bearing.
    """
    g = r.g
    if mask_tensor is None:
        return WHOLE_WINDOW, None, 0.0
    bias, ops = _constant_bias(g, mask_tensor)
    if bias is not None:
        if np.any(bias != 0):
            raise PorterError(f"attention adds a constant bias {g.tensor(mask_tensor).describe()} "
                              "that drops keys (a causal or fixed mask); only padding masks "
                              "are supported")
        r.claim("mask", ops)
        return WHOLE_WINDOW, None, 0.0
    return dialect.mask(r, mask_tensor)


def _constant_bias(g: Graph, t: int):
    """The value of a bias computed from constants only, with the ops computing it.

    litert-torch leaves an all-ones mask traced into the graph as SELECT_V2(const all-true,
    0, most negative float); a plain constant is the other form.
    """
    if g.const(t) is not None:
        return g.const(t), set()
    op = g.producer(t)
    if op is not None and op.type == "SELECT_V2" and all(g.const(i) is not None for i in op.inputs):
        cond, keep, drop = (g.const(i) for i in op.inputs)
        return np.where(cond, keep, drop), {op.index}
    return None, set()


def _check_same_mask(seen, t, i, g):
    if seen is not None and seen != t:
        raise PorterError(f"layer {i} uses a different attention mask "
                          f"({g.tensor(t).describe()}) than the layers before it")
    return t


def _mask_by_pattern(r: Recovery, mask_bias: int):
    """TFLite: the mask path is one of the two spellings of tflite_patterns.MASK_BIAS."""
    g = r.g
    m = match(TP.MASK_BIAS, g, mask_bias)
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
    _check_mask_values(keep, drop)
    r.claim("mask", m.consumed | _input_reshapes(g, m["mask"]))
    return MASK_INPUT, _input_name(g, m["mask"], "the attention mask"), drop


def _check_mask_values(keep: float, drop: float) -> None:
    if keep != 0.0 or drop > -1e4:
        raise PorterError(f"attention mask adds {keep} to kept and {drop} to dropped keys; "
                          "expected 0 and a large negative number")


def _mask_by_evaluation(r: Recovery, mask_bias: int):
    """ONNX: run the ops between the mask input and the scores' bias on probe masks.

    The two torch.onnx exporters spell the broadcast very differently (GatherND/And/Where, or
    Flatten/Gather/Reshape/Expand/And/Where around shape arithmetic), so instead of a pattern
    per spelling porter checks what the path computes: for every probe mask, the bias must be
    `keep` (0) on every query row for kept keys and one large negative `drop` for padded keys.
    """
    g = r.g
    ops = _region(g, mask_bias, set())
    leaves = {t for i in ops for t in g.ops[i].inputs
              if t >= 0 and not g.tensor(t).is_const and g.producer(t) is None}
    where = f"attention mask {g.tensor(mask_bias).describe()}"
    if len(leaves) != 1:
        raise PorterError(f"{where} is computed from {len(leaves)} graph inputs; expected the "
                          "attention mask alone")
    mask_t = leaves.pop()
    mask_input = _input_name(g, mask_t, "the attention mask")
    unknown = [i for i in ops if g.ops[i].type not in fold.EVALUATORS]
    if unknown:
        raise PorterError(f"{where}: op porter cannot evaluate on the mask path: "
                          + "; ".join(_describe_op(g, i) for i in unknown[:4]))
    seq = g.tensor(mask_t).shape[-1]
    keep_drop = set()
    for probe in _probe_masks(seq):
        feed = probe.reshape(g.tensor(mask_t).shape).astype(g.tensor(mask_t).dtype)
        try:
            bias = fold.run_region(g, ops, {mask_t: feed}, mask_bias)
        except (KeyError, ValueError, TypeError, IndexError) as e:
            raise PorterError(f"{where}: evaluating the mask path failed ({e})") from None
        bias = bias.reshape(-1, bias.shape[-1]) if bias.ndim else bias.reshape(1, 1)
        if bias.shape[-1] != seq or not np.all(bias == bias[:1]):
            raise PorterError(f"{where}: the bias is not one row over the {seq} keys shared by "
                              "every query (a causal or per-query mask is not supported)")
        kept, dropped = bias[0][probe != 0], bias[0][probe == 0]
        keep_drop |= {("keep", float(v)) for v in kept} | {("drop", float(v)) for v in dropped}
    keep = {v for k, v in keep_drop if k == "keep"}
    drop = {v for k, v in keep_drop if k == "drop"}
    if len(keep) != 1 or len(drop) != 1:
        raise PorterError(f"{where}: kept keys get {sorted(keep)} and padded keys {sorted(drop)}; "
                          "expected one value each")
    _check_mask_values(keep.pop(), drop_value := drop.pop())
    r.claim("mask", ops)
    return MASK_INPUT, mask_input, drop_value


def _probe_masks(seq: int) -> list[np.ndarray]:
    """Masks that tell every key position apart: all live, alternating, a live prefix."""
    positions = np.arange(seq)
    return [np.ones(seq, np.int64), (positions % 2 == 0).astype(np.int64),
            (positions % 3 != 1).astype(np.int64), (positions < seq // 3).astype(np.int64)]


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


DIALECTS = {
    "tflite": Dialect(
        layer_norms=(("shift", TP.LAYER_NORM_SHIFT), ("centred", TP.LAYER_NORM_CENTRED),
                     ("keras", TP.LAYER_NORM_KERAS)),
        affine=TP.AFFINE, embeddings=TP.EMBEDDINGS, attention=TP.ATTENTION, ffn=TP.FFN,
        head=TP.HEAD, known_ops=TP.KNOWN_OPS, reshape="RESHAPE", weight_out_axis=0,
        reference=LITERT_BUILTIN, prepare=_as_is, mask=_mask_by_pattern,
        runtime_form=_as_written),
    "onnx": Dialect(
        layer_norms=OP.LAYER_NORMS, affine=OP.AFFINE, embeddings=OP.EMBEDDINGS,
        attention=OP.ATTENTION, ffn=OP.FFN, head=OP.HEAD, known_ops=OP.KNOWN_OPS,
        reshape=OP.RESHAPE, weight_out_axis=OP.WEIGHT_OUT_AXIS, reference=ONNXRUNTIME_CPU,
        prepare=fold.fold_constants, mask=_mask_by_evaluation,
        runtime_form=_onnxruntime_form),
}
