"""The decoder IR: a pre-LayerNorm GPT with a KV cache as named blocks.

Like the encoder IR it says what is computed and with which arithmetic; the weights live in
`DecoderIR.weights` (named numpy arrays in `array_order()`), and every shape comes from the graph.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class Linear:
    """y = x @ W^T + b, W [out, in] float32 (Q8_0 at pack time when the crate asks for it)."""

    name: str
    in_features: int
    out_features: int
    source_op: int  # the graph's MatMul, for error messages and onnxruntime reference models

    def arrays(self) -> list[str]:
        return [f"{self.name}.weight", f"{self.name}.bias"]


@dataclass
class LayerNorm:
    """onnxruntime's LayerNormalization: (x - mean) / sqrt(var + eps) * gamma + beta."""

    name: str
    eps: float
    ops: list[int] = field(default_factory=list)

    def arrays(self) -> list[str]:
        return [f"{self.name}.gamma", f"{self.name}.beta"]

@dataclass
class DecoderLayer:
    ln1: LayerNorm
    qkv: Linear  # fused [3 * hidden, hidden]: rows q, then k, then v
    o: Linear
    ln2: LayerNorm
    fc: Linear
    fc_out: Linear
    past_key: str
    past_value: str
    present_key: str
    present_value: str


@dataclass
class DecoderIR:
    source: str
    n_ctx: int  # learned positions: past + seq never exceeds this
    vocab: int
    hidden: int
    heads: int
    head_dim: int
    ffn: int
    scale: float  # multiplies Q.K^T
    ids_input: str
    logits_output: str
    layers: list[DecoderLayer]
    final_ln: LayerNorm
    weight_format: str = "float32"  # or "q8_0"
    ort_cpu: str | None = None  # the CPU whose onnxruntime arithmetic (porter.reference.ort_cpu)
    weights: dict = field(default_factory=dict, repr=False)

    def linears(self) -> list[Linear]:
        return [lin for ly in self.layers for lin in (ly.qkv, ly.o, ly.fc, ly.fc_out)]

    def array_order(self) -> list[str]:
        names = ["wte", "wpe"]
        for ly in self.layers:
            names += ly.ln1.arrays() + [f"{ly.qkv.name}.weight", f"{ly.qkv.name}.bias"]
            names += [f"{ly.o.name}.weight", f"{ly.o.name}.bias"] + ly.ln2.arrays()
            names += [f"{ly.fc.name}.weight", f"{ly.fc.name}.bias", f"{ly.fc_out.name}.weight",
                      f"{ly.fc_out.name}.bias"]
        return names + self.final_ln.arrays()

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("weights")
        d["kind"] = "decoder"
        d["num_layers"] = len(self.layers)
        d["parameters"] = int(sum(self.weights[n].size for n in self.array_order()))
        return d
