"""The decoder IR: a pre-norm causal LM with a KV cache, as typed blocks.

    x = embed(ids) (+ learned positions)
    per layer:  x = x + attention(norm1(x), cache)      (rotary positions inside, if any)
                x = x + mlp(norm2(x))                   (plain: down(act(up)); gated: down(act(gate) * up))
      or, parallel (GPT-NeoX, GPT-J, Phi):
                x = (attention(norm1(x), cache) + mlp(norm2(x))) + x    (norm2 may be norm1)
    logits = head(final_norm(x))                        (the head tied to the token table, or not;
                                                         the final norm may be none)

Every variant says which arithmetic it is: the norm's kind and onnxruntime kernel, the
activation as onnxruntime's fused kernel or as the graph's own elementwise ops in order, the
bias as Gemm's C or as an Add after the product. Shapes all come from the graph; the weights
live in `DecoderIR.weights` (named numpy arrays, `array_order()`), so the IR's JSON is small.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Linear bias: none; C of the product (Gemm, or MatMul + Add onnxruntime fuses into one:
# C starts as the bias and every product is fma'd into it); or added after the product.
BIAS_NONE, BIAS_GEMM, BIAS_ADD = "none", "gemm", "add"

# Norm kinds and their onnxruntime arithmetic; NO_NORM: the LM head reads the stream as it is
LAYER_NORM, RMS_NORM, NO_NORM = "layer_norm", "rms_norm", "none"
NORM_ORT = "ort"  # LayerNormalization's kernel
NORM_ORT_SKIP = "ort_skip"  # SkipLayerNormalization: the residual sum before it, fused in
RMS_RECIPROCAL = "reciprocal"  # x * (1 / sqrt(mean(x^2) + eps)), op by op
RMS_DIVIDE = "divide"  # x / sqrt(mean(x^2) + eps), op by op
RMS_ORT = "ort_simplified"  # SimplifiedLayerNormalization's kernel (onnxruntime fuses Pow .. Div, Mul)

# Activation kernels: onnxruntime's fused Gelu / BiasGelu, its FastGelu, or the graph's ops
ACT_GELU, ACT_FAST_GELU, ACT_QUICK_GELU, ACT_OPS = "ort_gelu", "ort_fast_gelu", "ort_quick_gelu", "ops"

# Elementwise ops an activation spelled out op by op may use (porter.reference.ops' meaning)
UNARY_OPS = ("erf", "tanh", "sigmoid", "neg", "sqrt", "abs", "relu", "reciprocal")
BINARY_OPS = ("add", "sub", "mul", "div", "pow", "maximum", "minimum")

MASK_REPLACE, MASK_ADD = "replace", "add"  # where(hidden, fill, scores) or scores + (0 | fill)

POSITIONS_LEARNED, POSITIONS_ROTARY, POSITIONS_NONE = "learned", "rotary", "none"
ROTATE_HALF, ROTATE_INTERLEAVED = "half", "interleaved"


@dataclass
class Linear:
    """y = x @ W^T (+ b), W [out, in] float32 (Q8_0 at pack time when the crate asks for it)."""

    name: str
    in_features: int
    out_features: int
    bias: str = BIAS_NONE
    source_op: int = -1  # the file's MatMul / Gemm, for messages and reference models
    # the file's output of each of ours, where recovery reordered them (a fused projection laid
    # out per head becomes q | k | v); None: the file's order
    file_outputs: list | None = None

    def arrays(self) -> list[str]:
        return [f"{self.name}.weight"] + ([f"{self.name}.bias"] if self.bias != BIAS_NONE else [])


@dataclass
class Norm:
    """LayerNorm ((x - mean) / sqrt(var + eps) * gamma + beta) or RMSNorm (x / rms(x) * gamma)."""

    name: str
    kind: str
    form: str
    eps: float
    width: int
    has_gamma: bool = True
    has_beta: bool = True
    # NORM_ORT_SKIP: the last Linear's bias is the fused kernel's bias input, added after the
    # residual sum ((x + x @ W) + b) rather than to the product
    skip_bias: bool = False

    def arrays(self) -> list[str]:
        return ([f"{self.name}.gamma"] if self.has_gamma else []) + ([f"{self.name}.beta"] if self.has_beta else [])


@dataclass
class Instr:
    """One elementwise op of an activation spelled out op by op: `op` on operands that are "x"
    (the activation's input), "t<k>" (instruction k's result) or a float32 constant."""

    op: str
    args: list


@dataclass
class Activation:
    kind: str  # what it computes, decided by evaluation: gelu_erf, gelu_tanh, silu, relu, other
    kernel: str  # ACT_GELU, ACT_FAST_GELU, ACT_QUICK_GELU or ACT_OPS
    program: list[Instr] = field(default_factory=list)  # ACT_OPS: the ops, the last is the result


@dataclass
class Rotary:
    """The first `dims` values of each q and k head, r -> r * cos + rotate(r) * sin, the rest
    passed through (partial rotary: GPT-NeoX's rotary_pct, Phi's partial_rotary_factor); the
    tables [n_ctx, dims] in weights["rope.cos" / "rope.sin"] (computed in onnxruntime's
    arithmetic: the graph's own table ops, folded)."""

    style: str  # ROTATE_HALF: (x1, x2) -> (-x2, x1); ROTATE_INTERLEAVED: pairs (a, b) -> (-b, a)
    dims: int  # rotated values per head, at most head_dim


@dataclass
class Attention:
    norm: Norm
    projections: list[Linear]  # one fused [q; k; v] Linear, or q, k, v
    o: Linear
    heads: int
    kv_heads: int  # query head h reads kv head h // (heads / kv_heads)
    head_dim: int
    scale: float | None  # onnxruntime's FusedMatMul alpha on Q.K^T; None: a plain MatMul
    mask: str  # MASK_REPLACE or MASK_ADD
    fill: float  # what a hidden key's score becomes (replace) or gets added (add)
    rotary: Rotary | None
    past_key: str
    past_value: str
    present_key: str
    present_value: str
    # a scalar the graph multiplies ("mul") or divides ("div") q / the new keys by after their
    # projection and rotary, before Q.K^T (OPT's q_proj(x) * scaling): onnxruntime's Mul / Div
    q_factor: tuple[str, float] | None = None
    k_factor: tuple[str, float] | None = None
    # the products read one kv head broadcast over the query heads (multi-query, as Falcon writes
    # it): onnxruntime then folds every head's rows into one GEMM, so its one-row kernels never apply
    keys_broadcast: bool = False
    values_broadcast: bool = False

    def linears(self) -> list[Linear]:
        return [*self.projections, self.o]

    def splits(self) -> list[tuple[str, int, int]]:
        """(q | k | v, first output, end) of each within its projection's outputs."""
        widths = (self.heads * self.head_dim, self.kv_heads * self.head_dim, self.kv_heads * self.head_dim)
        if len(self.projections) == 3:
            return [(n, 0, w) for n, w in zip("qkv", widths)]
        return [("q", 0, widths[0]), ("k", widths[0], widths[0] + widths[1]),
                ("v", widths[0] + widths[1], sum(widths))]


@dataclass
class MLP:
    norm: Norm
    up: Linear
    down: Linear
    activation: Activation
    gate: Linear | None = None  # gated: down(act(gate(x)) * up(x))

    def linears(self) -> list[Linear]:
        return [lin for lin in (self.gate, self.up, self.down) if lin is not None]


@dataclass
class DecoderLayer:
    attention: Attention
    mlp: MLP
    # parallel residual: the MLP reads the layer's input (through its own norm, or through the
    # attention's: then mlp.norm is attention.norm, with its name) and x + (attention + mlp)
    # closes the layer
    parallel: bool = False


@dataclass
class DecoderIR:
    source: str
    n_ctx: int  # past + seq never exceeds this: the learned table's rows, or --context
    vocab: int
    hidden: int
    positions: str  # POSITIONS_LEARNED (weights["wpe"]), POSITIONS_ROTARY or POSITIONS_NONE
    ids_input: str
    logits_output: str
    layers: list[DecoderLayer]
    final_norm: Norm
    head: Linear  # the LM head; tied: its weight is the token table "wte"
    tied: bool
    weight_format: str = "float32"  # or "q8_0"
    ort_cpu: str | None = None  # the CPU whose onnxruntime arithmetic (porter.reference.ort.cpu)
    # inputs the graph takes that porter computes itself (porter.recover.decoder.io): name ->
    # "positions" (past .. past + seq - 1) or "mask" (ones over past + seq keys)
    fed_inputs: dict = field(default_factory=dict)
    weights: dict = field(default_factory=dict, repr=False)

    # the first layer's shapes, which every layer shares (recovery checks it)
    @property
    def heads(self) -> int:
        return self.layers[0].attention.heads

    @property
    def kv_heads(self) -> int:
        return self.layers[0].attention.kv_heads

    @property
    def head_dim(self) -> int:
        return self.layers[0].attention.head_dim

    @property
    def ffn(self) -> int:
        return self.layers[0].mlp.up.out_features

    def linears(self) -> list:
        """Every Linear whose weight Q8_0 stores as blocks (the tied head is the token table)."""
        blocks = [lin for ly in self.layers for lin in (*ly.attention.linears(), *ly.mlp.linears())]
        return blocks if self.tied else blocks + [self.head]

    def array_order(self) -> list[str]:
        names = ["wte"] + (["wpe"] if self.positions == POSITIONS_LEARNED else [])
        names += ["rope.cos", "rope.sin"] if self.positions == POSITIONS_ROTARY else []
        for ly in self.layers:
            a, m = ly.attention, ly.mlp
            names += a.norm.arrays() + [n for lin in a.linears() for n in lin.arrays()]
            names += [] if m.norm.name == a.norm.name else m.norm.arrays()
            names += [n for lin in m.linears() for n in lin.arrays()]
        names += self.final_norm.arrays()
        names += [] if self.tied else [f"{self.head.name}.weight"]
        return names + ([f"{self.head.name}.bias"] if self.head.bias != BIAS_NONE else [])

    def weight_of(self, linear: Linear) -> str:
        return "wte" if self.tied and linear is self.head else f"{linear.name}.weight"

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("weights")
        d.update(kind="decoder", num_layers=len(self.layers), heads=self.heads, kv_heads=self.kv_heads,
                 head_dim=self.head_dim, ffn=self.ffn,
                 parameters=int(sum(self.weights[n].size for n in self.array_order())))
        return d
