"""TensorFlow TFLiteConverter fixtures: `<name>.tf-dq8.tflite` for MINILM, TINY and SMALL.

The second real hybrid-int8 convention porter must read (see /work/shared/notes/real-models.md,
"TensorFlow"): TFLiteConverter with `optimizations=[Optimize.DEFAULT]` gives FULLY_CONNECTED with
int8 per-channel weights and `asymmetric_quantize_inputs=True`, the word embedding as an int8
per-tensor GATHER -> DEQUANTIZE, and with `_experimental_use_buffer_offset` external buffers
(4-byte aligned, not always 16). TF leaves weights under 1024 elements in float, so TINY's
head (3 x 128) is a float FULLY_CONNECTED among int8 ones: a mix porter must read too.

The network is the torch one (graphs/torch_model.py), weight for weight: the torch module is built,
its state_dict is read as numpy, and the same BERT token classifier is written again with plain
TensorFlow ops in a tf.Module. transformers 5 has no TensorFlow models, so TFBertForTokenClassification
is not an option here; hand-written ops also keep the graph free of Keras-specific lowering.
The TF model is checked against the torch module in float before it is converted.

Run with the export environment (graphs/requirements.txt):

    python graphs/export_tf.py [--force] [--only NETWORK_NAME ...]

Existing fixtures are kept unless --force: TF writes the external buffers in a different order
on every run (same graph, same bytes per buffer), so a remade file has a new sha256 and its
goldens (golden/make_litert_goldens.py) must be remade with it.
"""

import argparse
import collections
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import fixture_info  # noqa: E402
import spec  # noqa: E402
import torch_model  # noqa: E402

FLAVOUR = "tf-dq8.tflite"
NETWORKS = [spec.MINILM, spec.TINY, spec.SMALL]
# HF BertModel's additive mask value for a padding key: (1 - mask) * finfo(float32).min.
MASK_NEGATIVE = float(np.finfo(np.float32).min)


# ---------------------------------------------------------------------------------------------
# Weights: the torch module's own state_dict, so TF and torch export the same numbers.


def torch_weights(model: torch.nn.Module) -> dict[str, np.ndarray]:
    return {name: t.detach().cpu().numpy().astype(np.float32) for name, t in model.state_dict().items()}


class Dense(tf.Module):
    """y = x @ W^T + b with torch's [out, in] weight; the converter turns it into FULLY_CONNECTED."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str):
        super().__init__()
        self.kernel = tf.constant(w[f"{prefix}.weight"].T)  # [in, out]
        self.bias = tf.constant(w[f"{prefix}.bias"])

    def __call__(self, x):
        return tf.matmul(x, self.kernel) + self.bias


class LayerNorm(tf.Module):
    """Spelled as TF's own LayerNorm lowers:
    MEAN SQUARED_DIFFERENCE MEAN ADD RSQRT SUB MUL MUL ADD."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str, eps: float):
        super().__init__()
        self.gamma = tf.constant(w[f"{prefix}.weight"])
        self.beta = tf.constant(w[f"{prefix}.bias"])
        self.eps = eps

    def __call__(self, x):
        mean = tf.reduce_mean(x, axis=-1, keepdims=True)
        var = tf.reduce_mean(tf.math.squared_difference(x, mean), axis=-1, keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self.eps) * self.gamma + self.beta


class EncoderLayer(tf.Module):
    """One post-LN BERT layer on hidden states [seq, hidden]."""

    def __init__(self, w: dict[str, np.ndarray], prefix: str, net: spec.Network, eps: float):
        super().__init__()
        self.heads = net.heads
        self.head_dim = net.hidden // net.heads
        self.query = Dense(w, f"{prefix}.attention.self.query")
        self.key = Dense(w, f"{prefix}.attention.self.key")
        self.value = Dense(w, f"{prefix}.attention.self.value")
        self.attn_out = Dense(w, f"{prefix}.attention.output.dense")
        self.attn_norm = LayerNorm(w, f"{prefix}.attention.output.LayerNorm", eps)
        self.ffn_in = Dense(w, f"{prefix}.intermediate.dense")
        self.ffn_out = Dense(w, f"{prefix}.output.dense")
        self.ffn_norm = LayerNorm(w, f"{prefix}.output.LayerNorm", eps)

    def split_heads(self, x):
        """[seq, hidden] -> [heads, seq, head_dim]"""
        return tf.transpose(tf.reshape(x, [-1, self.heads, self.head_dim]), [1, 0, 2])

    def attention(self, x, mask_bias):
        q, k, v = (self.split_heads(d(x)) for d in (self.query, self.key, self.value))
        # HF eager attention: (q k^T) * 1/sqrt(d) + mask, softmax, @ v.
        scores = tf.matmul(q, k, transpose_b=True) * (1.0 / np.sqrt(self.head_dim)) + mask_bias
        context = tf.matmul(tf.nn.softmax(scores, axis=-1), v)  # [heads, seq, head_dim]
        return tf.reshape(tf.transpose(context, [1, 0, 2]), [-1, self.heads * self.head_dim])

    def __call__(self, x, mask_bias):
        x = self.attn_norm(self.attn_out(self.attention(x, mask_bias)) + x)
        return self.ffn_norm(self.ffn_out(tf.nn.gelu(self.ffn_in(x), approximate=False)) + x)


class TokenClassifier(tf.Module):
    """forward(input_ids [1, seq] int32, attention_mask [1, seq] int32) -> logits [1, seq, labels]."""

    def __init__(self, w: dict[str, np.ndarray], net: spec.Network, eps: float):
        super().__init__()
        self.net = net
        self.word_embeddings = tf.constant(w["bert.embeddings.word_embeddings.weight"])
        # Token type is always 0 and the window is fixed, so both are constant rows.
        self.token_type_row = tf.constant(w["bert.embeddings.token_type_embeddings.weight"][0])
        self.positions = tf.constant(w["bert.embeddings.position_embeddings.weight"][: net.seq])
        self.embed_norm = LayerNorm(w, "bert.embeddings.LayerNorm", eps)
        self.layers = [
            EncoderLayer(w, f"bert.encoder.layer.{i}", net, eps) for i in range(net.layers)
        ]
        self.classifier = Dense(w, "classifier")

    def forward(self, input_ids, attention_mask):
        ids = tf.reshape(input_ids, [self.net.seq])
        # Same summation order as HF BertEmbeddings: word + token type, then + position.
        x = tf.gather(self.word_embeddings, ids) + self.token_type_row + self.positions
        x = self.embed_norm(x)
        mask = tf.cast(tf.reshape(attention_mask, [1, 1, self.net.seq]), tf.float32)
        mask_bias = (1.0 - mask) * MASK_NEGATIVE  # broadcast over [heads, query, key]
        for layer in self.layers:
            x = layer(x, mask_bias)
        return tf.reshape(self.classifier(x), [1, self.net.seq, self.net.labels])

    def signature(self) -> tf.types.experimental.ConcreteFunction:
        spec_ = [
            tf.TensorSpec([1, self.net.seq], tf.int32, name="input_ids"),
            tf.TensorSpec([1, self.net.seq], tf.int32, name="attention_mask"),
        ]

        @tf.function(input_signature=spec_)
        def serving(input_ids, attention_mask):
            return {"logits": self.forward(input_ids, attention_mask)}

        return serving.get_concrete_function()


# ---------------------------------------------------------------------------------------------
# Inputs for the checks: the torch sample (10 live tokens) and a long window with a padded tail.


def check_inputs(net: spec.Network) -> list[tuple[np.ndarray, np.ndarray]]:
    ids, mask = (t.numpy().astype(np.int32) for t in torch_model.sample_inputs(net))
    rng = np.random.default_rng(7)
    live = net.seq * 3 // 4
    long_ids = np.full((1, net.seq), spec.PAD_ID, np.int32)
    long_ids[0, :live] = rng.integers(999, net.vocab, size=live)
    long_ids[0, 0], long_ids[0, live - 1] = spec.CLS_ID, spec.SEP_ID
    long_mask = np.zeros((1, net.seq), np.int32)
    long_mask[0, :live] = 1
    return [(ids, mask), (long_ids, long_mask)]


def max_abs_delta(run_a, run_b, inputs, live_only: bool = False) -> float:
    """Largest logit difference; live_only skips padding positions, whose hidden states are
    meaningless and carry the largest quantisation error."""

    def delta(ids, mask):
        d = np.abs(run_a(ids, mask) - run_b(ids, mask))[0]
        return float(np.max(d[mask[0] == 1] if live_only else d))

    return max(delta(*x) for x in inputs)


def torch_runner(model):
    def run(ids, mask):
        with torch.no_grad():
            return model(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()

    return run


def tf_runner(fn):
    def run(ids, mask):
        return fn(input_ids=tf.constant(ids), attention_mask=tf.constant(mask))["logits"].numpy()

    return run


def litert_runner(path: Path):
    from ai_edge_litert.interpreter import Interpreter

    runner = Interpreter(model_path=str(path), num_threads=1).get_signature_runner()
    return lambda ids, mask: runner(input_ids=ids, attention_mask=mask)["logits"]


def signature_io(path: Path) -> dict:
    """The signature as LiteRT sees it, in the sidecar format of the other exporters."""
    from ai_edge_litert.interpreter import Interpreter

    interpreter = Interpreter(model_path=str(path))
    key = next(iter(interpreter.get_signature_list()))
    runner = interpreter.get_signature_runner(key)

    def shapes(details):
        return {k: [v["dtype"].__name__, [int(d) for d in v["shape"]]] for k, v in details.items()}

    return {
        "signature": key,
        "inputs": shapes(runner.get_input_details()),
        "outputs": shapes(runner.get_output_details()),
    }


# ---------------------------------------------------------------------------------------------
# Conversion and what the converter emitted.


def convert(fn, module: tf.Module) -> bytes:
    # With the module as trackable_obj the converter keeps the named signature (input_ids,
    # attention_mask -> logits) that LiteRT's signature runner needs.
    converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], module)
    converter.optimizations = [tf.lite.Optimize.DEFAULT]  # dynamic-range int8 weights
    converter._experimental_use_buffer_offset = True  # large buffers after the flatbuffer
    return converter.convert()


def write_fixture(path: Path, data: bytes) -> None:
    """Temp file + size check + rename, so a reader never sees a half-written fixture."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
    tmp = Path(tmp)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        fixture_info.check_size(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def tflite_facts(path: Path) -> dict:
    """What marks TF's convention: FULLY_CONNECTED options, the GATHER table type, external buffers."""
    import tflite

    model = tflite.Model.GetRootAsModel(path.read_bytes(), 0)
    graph = model.Subgraphs(0)
    fully_connected, gather_tables = collections.Counter(), collections.Counter()
    for i in range(graph.OperatorsLength()):
        op = graph.Operators(i)
        code = model.OperatorCodes(op.OpcodeIndex())
        name = enum_name(tflite.BuiltinOperator, max(code.BuiltinCode(), code.DeprecatedBuiltinCode()))
        if name == "FULLY_CONNECTED":
            fully_connected[fc_description(op, graph, code.Version())] += 1
        elif name == "GATHER":
            gather_tables[enum_name(tflite.TensorType, graph.Tensors(op.Inputs(0)).Type())] += 1
    buffers = [model.Buffers(i) for i in range(model.BuffersLength())]
    # An external buffer has offset > 1 (offset 1 is the converter's placeholder for "none").
    external = [b for b in buffers if b.Offset() > 1]
    return {
        "fully_connected": dict(fully_connected),
        "gather_table_types": dict(gather_tables),
        "buffers": len(buffers),
        "external_buffers": len(external),
        "external_bytes": sum(b.Size() for b in external),
        "external_16_byte_aligned": sum(b.Offset() % 16 == 0 for b in external),
        "external_4_byte_aligned": sum(b.Offset() % 4 == 0 for b in external),
    }


def fc_description(op, graph, version: int) -> str:
    import tflite

    options = tflite.FullyConnectedOptions()
    table = op.BuiltinOptions()
    options.Init(table.Bytes, table.Pos)
    weight = graph.Tensors(op.Inputs(1))
    quant = weight.Quantization()
    scales = 0 if quant is None else quant.ScaleLength()
    return (
        f"v{version} weights {enum_name(tflite.TensorType, weight.Type())} ({scales} scales) "
        f"asymmetric_quantize_inputs={bool(options.AsymmetricQuantizeInputs())} "
        f"keep_num_dims={bool(options.KeepNumDims())}"
    )


def enum_name(enum, value: int) -> str:
    return next(k for k, v in vars(enum).items() if v == value and not k.startswith("_"))


# ---------------------------------------------------------------------------------------------


def versions() -> dict:
    from importlib.metadata import version

    return {p: version(p) for p in ("tensorflow-cpu", "torch", "transformers", "ai-edge-litert")}


def export(net: spec.Network, package_versions: dict) -> dict:
    model = torch_model.build(net)
    eps = model.bert.config.layer_norm_eps
    tf_model = TokenClassifier(torch_weights(model), net, eps)
    fn = tf_model.signature()
    inputs = check_inputs(net)
    float_delta = max_abs_delta(torch_runner(model), tf_runner(fn), inputs)
    print(f"{net.name}: float TF vs torch max |dlogit| = {float_delta:.3g} (LayerNorm eps {eps})",
          flush=True)
    assert float_delta < 1e-3, f"{net.name}: TF float model differs from torch"

    start = time.perf_counter()
    data = convert(fn, tf_model)
    seconds = time.perf_counter() - start
    path = net.path(FLAVOUR)
    write_fixture(path, data)

    litert, float_tf = litert_runner(path), tf_runner(fn)
    return fixture_info.write_sidecar(
        path,
        exporter="tensorflow TFLiteConverter.from_concrete_functions (hand-written tf.Module)",
        recipe="optimizations=[Optimize.DEFAULT], _experimental_use_buffer_offset=True",
        command="python graphs/export_tf.py",
        versions=package_versions,
        export_seconds=round(seconds, 2),
        io=signature_io(path),
        checks={
            "inputs": "torch_model.sample_inputs and a 3/4-live random window",
            "float_tf_vs_torch_max_abs": float_delta,
            "litert_xnnpack_vs_float_tf_max_abs": max_abs_delta(litert, float_tf, inputs),
            "litert_xnnpack_vs_float_tf_max_abs_live_tokens": max_abs_delta(
                litert, float_tf, inputs, live_only=True
            ),
        },
        tflite=tflite_facts(path),
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--force", action="store_true", help="remake fixtures that exist")
    parser.add_argument("--only", nargs="*", help="network names")
    args = parser.parse_args()
    package_versions = versions()
    for net in NETWORKS:
        if args.only and net.name not in args.only:
            continue
        if net.path(FLAVOUR).exists() and not args.force:
            print(f"{net.path(FLAVOUR).name}: present (--force remakes it)")
            continue
        info = export(net, package_versions)
        shown = ("file", "size_bytes", "export_seconds", "ops", "checks", "tflite")
        print(json.dumps({k: info[k] for k in shown}, indent=1))


if __name__ == "__main__":
    main()
