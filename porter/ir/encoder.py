"""The encoder IR: a BERT-style network as named blocks with exact semantics.

The IR says *what* is computed and with which arithmetic (quantisation scheme, epsilon, GELU
flavour, softmax beta, mask semantics); the weights themselves live in `EncoderIR.weights`, a
dict of named numpy arrays that the packer writes to model.bin in IR order. Every shape comes
from the graph.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

# How padding behaves, decided from the graph (see porter.recover.mask_semantics):
MASK_INPUT = "mask_input"  # an attention-mask input masks padded keys out; live rows ignore padding
WHOLE_WINDOW = "whole_window"  # every key is attended; padding is load-bearing

# Whose kernels the float arithmetic reproduces (EncoderIR.reference):
LITERT_BUILTIN = "litert_builtin"  # TFLite's builtin kernels (porter.reference.litert)
ONNXRUNTIME_CPU = "onnxruntime_cpu"  # onnxruntime's CPU execution provider (porter.reference.ort)

# How a Linear's activations meet its weights (Linear.activation_quant):
FLOAT_ACTIVATIONS = "float"  # float x float
TFLITE_HYBRID = "tflite_hybrid_per_row"  # int8 per input row, on the fly (see asymmetric_inputs)
ORT_DYNAMIC_UINT8 = "ort_dynamic_uint8"  # DynamicQuantizeLinear: uint8, one scale and zero point
#                                          for the whole input tensor (porter.reference.quant)


@dataclass
class Linear:
    """y = x @ W^T + b, W [out, in]; int8 weights run the arithmetic `activation_quant` names."""

    name: str
    in_features: int
    out_features: int
    weight_dtype: str  # "int8" or "float32"
    per_channel: bool  # int8: one scale per output row, else one per tensor
    asymmetric_inputs: bool  # hybrid FC quantises each activation row with a zero point
    has_bias: bool
    source_op: int  # graph op index, for error messages and intermediate dumps
    activation_quant: str = FLOAT_ACTIVATIONS  # FLOAT_ACTIVATIONS, TFLITE_HYBRID, ORT_DYNAMIC_UINT8
    # ORT_DYNAMIC_UINT8 only: "exact" or "int16_pairs_saturated" (porter.reference.quant.u8s8_dot),
    # the u8 x s8 dot of the IR's ort_cpu
    integer_dot: str = "exact"

    def arrays(self) -> list[str]:
        names = [f"{self.name}.weight"]
        if self.weight_dtype == "int8":
            names.append(f"{self.name}.scale")
        if self.has_bias:
            names.append(f"{self.name}.bias")
        return names


# LayerNorm forms computed by one onnxruntime kernel (see LayerNorm.form)
ONNX_LAYER_NORM_FORMS = ("onnx", "onnx_skip")


@dataclass
class LayerNorm:
    """(x - mean) / sqrt(var + eps), then * gamma + beta.

    affine_folded: the graph feeds the *pre-affine* tensor to the next Linear layers (their
    weights already carry gamma and beta) and the post-affine one to the residual only.
    """

    name: str
    eps: float
    affine_folded: bool
    # The float operation order, as the exporter wrote it:
    #   "shift": r = rsqrt(var + eps); norm = x * r + (0 - r * mean); out = norm * gamma + beta
    #   "centred": norm = (x - mean) * r; out = norm * gamma + beta
    #   "keras": r as above; inv = r * gamma; out = x * inv + (beta - mean * inv)
    #   "onnx": onnxruntime's LayerNormalization kernel (porter.reference.ort.layer_norm)
    #   "onnx_skip": onnxruntime's SkipLayerNormalization kernel, which its optimiser puts in
    #           place of a LayerNorm whose input is a residual Add (porter.reference.ort.skip_layer_norm)
    form: str = "shift"
    ops: list[int] = field(default_factory=list)

    def arrays(self) -> list[str]:
        return [f"{self.name}.gamma", f"{self.name}.beta"]


@dataclass
class Embeddings:
    """Word lookup plus the constant [seq, hidden] terms (position, token type 0).

    The terms are added one by one in the graph's order rather than folded into one bias:
    (w + p) + t and w + (p + t) round differently, and the reference adds them one at a time.
    """

    # "int8_rows" (per-row scale), "int8_tensor" (one scale), "float32", or "uint8_tensor"
    # (one scale and one zero point: row = float(int(q) - zero_point) * scale)
    table_kind: str
    vocab: int
    hidden: int
    ln: LayerNorm
    bias_terms: int = 1

    def arrays(self) -> list[str]:
        names = ["embed.table"]
        if self.table_kind != "float32":
            names.append("embed.scale")
        if self.table_kind == "uint8_tensor":
            names.append("embed.zero_point")
        return names + [f"embed.bias{i}" for i in range(self.bias_terms)] + self.ln.arrays()


@dataclass
class Attention:
    heads: int
    head_dim: int
    scale: float  # multiplies the Q.K^T scores
    scale_on: str  # "scores" (MUL after the first BATCH_MATMUL) or "query" (before it)
    softmax_beta: float
    mask_value: float  # added to the scores of padded keys (MASK_INPUT only)
    q: Linear
    k: Linear
    v: Linear
    o: Linear
    # Set when the graph divides the scores (Div(scores, d)) instead of multiplying them:
    # scores / scale_divisor rounds differently from scores * scale (which is then 1 / d).
    scale_divisor: float | None = None


@dataclass
class EncoderLayer:
    attn: Attention
    attn_ln: LayerNorm
    ffn_in: Linear
    # "erf" (exact), "tanh" (approximate); ONNX: "erf" divides by sqrt 2 before the erf,
    # "erf_mul" multiplies by 1 / sqrt 2 (onnxruntime's Gelu kernel, and graphs that spell it so)
    gelu: str
    ffn_out: Linear
    ffn_ln: LayerNorm


@dataclass
class EncoderIR:
    source: str  # the graph file
    format: str  # tflite / onnx
    seq: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    labels: int
    ids_input: str
    mask_input: str | None
    output: str
    mask: str  # MASK_INPUT or WHOLE_WINDOW
    embeddings: Embeddings
    layers: list[EncoderLayer]
    head: Linear
    weights: dict = field(default_factory=dict, repr=False)  # name -> np.ndarray
    reference: str = LITERT_BUILTIN  # whose float kernels the arithmetic reproduces
    # ONNXRUNTIME_CPU only: the CPU whose onnxruntime arithmetic (porter.reference.ort_cpu)
    ort_cpu: str | None = None

    def linears(self) -> list[Linear]:
        out = []
        for ly in self.layers:
            a = ly.attn
            out += [a.q, a.k, a.v, a.o, ly.ffn_in, ly.ffn_out]
        return out + [self.head]

    def rows_independent(self) -> bool:
        """Whether every Linear treats its input rows independently. onnxruntime's
        DynamicQuantizeLinear does not: one scale for the whole tensor, padding included."""
        return all(lin.activation_quant != ORT_DYNAMIC_UINT8 for lin in self.linears())

    def padding_is_inert(self) -> bool:
        """Whether rows past the last kept token may be left uncomputed without changing a live
        row: the mask hides them from attention, nothing else mixes rows, and a dropped key's
        probability is exactly 0. LiteRT's exp underflows to 0 for the mask value; MLAS's exp
        (onnxruntime) clamps its input at -88.38, where its AVX-512F kernel returns a tiny
        non-zero value instead (vscalefps), which still adds to the softmax sum, and the depth
        of onnxruntime's P.V blocks depends on the number of keys."""
        return self.mask == MASK_INPUT and self.rows_independent() and self.reference == LITERT_BUILTIN

    def array_order(self) -> list[str]:
        """The order arrays are packed in model.bin (and read back by the generated crate)."""
        names = self.embeddings.arrays()
        for ly in self.layers:
            a = ly.attn
            for lin in (a.q, a.k, a.v, a.o):
                names += lin.arrays()
            names += ly.attn_ln.arrays()
            names += ly.ffn_in.arrays() + ly.ffn_out.arrays()
            names += ly.ffn_ln.arrays()
        return names + self.head.arrays()

    def summary(self) -> dict:
        """The architecture without weights: what `porter inspect --ir` prints and ir.json holds."""
        d = asdict(self)
        d.pop("weights")
        d["num_layers"] = len(self.layers)
        d["arrays"] = {n: {"dtype": str(self.weights[n].dtype), "shape": list(self.weights[n].shape)}
                       for n in self.array_order()}
        return d


def as_f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))
