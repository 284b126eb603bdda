"""The zoo's TensorFlow and Keras routes: one torch BERT member, written again in TF, converted.

Both take the torch member's own state_dict (zoo_torch.build_encoder), so the TFLite file and the
torch/ONNX files of a member are one network:

- `tf-dq8.tflite` (and `tf-f16.tflite`, the same with `target_spec.supported_types = [tf.float16]`): a
  BERT forward in plain TensorFlow ops (a tf.Module): tf.nn.moments LayerNorm, the additive mask
  `(1 - float(mask))[:, None, None, :] * -1e9`, tf.nn.gelu (erf; approximate=True for a tanh
  hidden_act), tf.matmul attention on [1, heads, seq, head_dim]; the heads: token classifier, BERT
  pooler + classifier, bare hidden states, sentence-transformers mean pooling +
  tf.math.l2_normalize, CLS pooling as sentence-transformers spells it (argmax of the mask, then
  gather).
  `TFLiteConverter.from_concrete_functions`, `optimizations=[Optimize.DEFAULT]`,
  `_experimental_use_buffer_offset = True` (as graphs/export_tf.py).
- `keras-dq8.tflite`: the same network from Keras 3 layers (TensorFlow backend): Embedding,
  keras.layers.MultiHeadAttention (EinsumDense projections [hidden, heads, head_dim]),
  LayerNormalization, Dense with activation "gelu" (approximate=False; True for a tanh hidden_act);
  the boolean mask [1, 1, seq] handed to MultiHeadAttention; exported by Keras itself,
  `model.export(path, format="litert", optimizations=[Optimize.DEFAULT])` (which runs the
  TFLite converter; no buffer offsets: every buffer inside the flatbuffer).
Both are checked in float against the torch module (max |Δ| < 1e-4) before conversion.
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import members as zm  # noqa: E402

MASK_NEGATIVE = -1e9


def bert_weights(module) -> tuple[dict[str, np.ndarray], str]:
    """The member's float state_dict as numpy and the BertModel prefix ('bert.' or '')."""
    import zoo_torch as zt

    w = zt.weights_numpy(module.model)
    prefix = "bert." if "bert.embeddings.word_embeddings.weight" in w else ""
    assert prefix + "embeddings.word_embeddings.weight" in w, sorted(w)[:5]
    return w, prefix


def layer_norm_eps(module) -> float:
    return float(module.model.config.layer_norm_eps)


# ---------------------------------------------------------------------------------------------
# Plain TensorFlow


class TFBert(tf.Module):
    def __init__(self, m: zm.Encoder, w: dict, prefix: str, eps: float):
        super().__init__()
        self.m, self.w, self.p, self.eps = m, {k: tf.constant(v) for k, v in w.items()}, prefix, eps
        self.hd = m.hidden // m.heads

    def dense(self, x, name):
        return tf.matmul(x, tf.transpose(self.w[name + ".weight"])) + self.w[name + ".bias"]

    def norm(self, x, name):
        mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
        return (x - mean) * tf.math.rsqrt(var + self.eps) * self.w[name + ".weight"] + self.w[name + ".bias"]

    def heads(self, x):
        """[1, seq, hidden] -> [1, heads, seq, head_dim]"""
        return tf.transpose(tf.reshape(x, [1, self.m.seq, self.m.heads, self.hd]), [0, 2, 1, 3])

    def layer(self, x, bias, i):
        p = f"{self.p}encoder.layer.{i}."
        q, k, v = (self.heads(self.dense(x, p + "attention.self." + n)) for n in ("query", "key", "value"))
        scores = tf.matmul(q, k, transpose_b=True) / np.sqrt(self.hd).astype(np.float32) + bias
        ctx = tf.matmul(tf.nn.softmax(scores, axis=-1), v)
        ctx = tf.reshape(tf.transpose(ctx, [0, 2, 1, 3]), [1, self.m.seq, self.m.hidden])
        x = self.norm(self.dense(ctx, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
        h = tf.nn.gelu(self.dense(x, p + "intermediate.dense"), approximate=tanh_gelu(self.m))
        return self.norm(self.dense(h, p + "output.dense") + x, p + "output.LayerNorm")

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        m, p, w = self.m, self.p, self.w
        x = tf.gather(w[p + "embeddings.word_embeddings.weight"], input_ids)
        types = w[p + "embeddings.token_type_embeddings.weight"]
        x = x + (tf.gather(types, token_type_ids) if token_type_ids is not None else types[0])
        x = x + w[p + "embeddings.position_embeddings.weight"][: m.seq]
        x = self.norm(x, p + "embeddings.LayerNorm")
        bias = (1.0 - tf.cast(attention_mask, tf.float32))[:, None, None, :] * MASK_NEGATIVE
        for i in range(m.layers):
            x = self.layer(x, bias, i)
        if m.head == "tok":
            return self.dense(x, "classifier")
        if m.head == "seq":
            pooled = tf.tanh(self.dense(x[:, 0], p + "pooler.dense"))
            return self.dense(pooled, "classifier")
        if m.head == "bare":
            return x
        if m.head == "st-mean":
            mask = tf.cast(attention_mask, tf.float32)[:, :, None]
            mean = tf.reduce_sum(x * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1e-9)
            return tf.math.l2_normalize(mean, axis=-1, epsilon=1e-24)  # F.normalize: max(|x|, 1e-12)
        if m.head == "st-cls":
            first = tf.argmax(attention_mask, axis=1, output_type=tf.int32)
            return tf.gather(x, first, axis=1, batch_dims=1)
        raise ValueError(m.head)


def tf_function(m: zm.Encoder, model):
    specs = [tf.TensorSpec([1, m.seq], tf.int32, name=r) for r in m.input_roles]

    @tf.function(input_signature=specs)
    def serving(*args):
        return {m.output_name: model(*args)}

    return serving.get_concrete_function()


# ---------------------------------------------------------------------------------------------
# Keras 3


def tanh_gelu(m: zm.Encoder) -> bool:
    """transformers' tanh GELUs (gelu_pytorch_tanh, gelu_new) are TF's and Keras' approximate=True."""
    return m.hidden_act in ("gelu_pytorch_tanh", "gelu_new")


def keras_model(m: zm.Encoder, w: dict, p: str, eps: float):
    import keras
    from keras import layers, ops

    class AddConstant(layers.Layer):
        """x + a fixed table (position rows, the token-type-0 row) held as a non-trainable weight."""

        def __init__(self, value, **kw):
            super().__init__(**kw)
            self.value = np.asarray(value, np.float32)

        def build(self, shape):
            self.table = self.add_weight(shape=self.value.shape, trainable=False, name="table",
                                         initializer=keras.initializers.Constant(self.value))

        def call(self, x):
            return x + self.table

    hd = m.hidden // m.heads
    ids = keras.Input((m.seq,), batch_size=1, dtype="int32", name="input_ids")
    mask_in = keras.Input((m.seq,), batch_size=1, dtype="int32", name="attention_mask")
    inputs = [ids, mask_in]
    word = layers.Embedding(m.vocab, m.hidden, name="word_embeddings")
    x = word(ids)
    word.set_weights([w[p + "embeddings.word_embeddings.weight"]])
    if m.token_type_input:
        tt = keras.Input((m.seq,), batch_size=1, dtype="int32", name="token_type_ids")
        inputs.append(tt)
        types = layers.Embedding(2, m.hidden, name="token_type_embeddings")
        x = x + types(tt)
        types.set_weights([w[p + "embeddings.token_type_embeddings.weight"]])
    else:
        x = AddConstant(w[p + "embeddings.token_type_embeddings.weight"][0], name="token_type_row")(x)
    x = AddConstant(w[p + "embeddings.position_embeddings.weight"][: m.seq], name="positions")(x)

    def norm(x, name):
        ln = layers.LayerNormalization(epsilon=eps, name=name.replace(".", "_"))
        y = ln(x)
        ln.set_weights([w[name + ".weight"], w[name + ".bias"]])
        return y

    def dense(x, name, units, activation=None):
        d = layers.Dense(units, activation=activation, name=name.replace(".", "_"))
        y = d(x)
        d.set_weights([w[name + ".weight"].T, w[name + ".bias"]])
        return y

    x = norm(x, p + "embeddings.LayerNorm")
    attn_mask = ops.expand_dims(ops.cast(mask_in, "bool"), 1)  # [1, 1, seq]: every query sees the live keys
    for i in range(m.layers):
        pre = f"{p}encoder.layer.{i}."
        a = pre + "attention."
        mha = layers.MultiHeadAttention(num_heads=m.heads, key_dim=hd, name=f"mha_{i}")
        y = mha(x, x, x, attention_mask=attn_mask)
        qkv = []
        for n in ("query", "key", "value"):
            qkv += [w[a + f"self.{n}.weight"].T.reshape(m.hidden, m.heads, hd),
                    w[a + f"self.{n}.bias"].reshape(m.heads, hd)]
        mha.set_weights(qkv + [w[a + "output.dense.weight"].T.reshape(m.heads, hd, m.hidden),
                               w[a + "output.dense.bias"]])
        x = norm(layers.Add()([y, x]), a + "output.LayerNorm")
        gelu = (lambda t: keras.activations.gelu(t, approximate=True)) if tanh_gelu(m) else "gelu"
        h = dense(x, pre + "intermediate.dense", m.ffn, activation=gelu)
        x = norm(layers.Add()([dense(h, pre + "output.dense", m.hidden), x]), pre + "output.LayerNorm")
    if m.head == "tok":
        out = dense(x, "classifier", m.labels)
    elif m.head == "seq":
        out = dense(dense(x[:, 0], p + "pooler.dense", m.hidden, activation="tanh"), "classifier", m.labels)
    elif m.head == "bare":
        out = x
    elif m.head == "st-cls":
        out = x[:, 0]
    elif m.head == "st-mean":
        mf = ops.cast(mask_in, "float32")[:, :, None]
        out = ops.sum(x * mf, axis=1) / ops.maximum(ops.sum(mf, axis=1), 1e-9)
        out = layers.UnitNormalization(axis=-1)(out)
    else:
        raise ValueError(m.head)
    model = keras.Model(inputs, {m.output_name: out}, name=m.name.replace("-", "_"))

    def call(*args):
        return model(dict(zip(m.input_roles, args)))[m.output_name]

    return model, call


# ---------------------------------------------------------------------------------------------


def float_check(m: zm.Encoder, module, fn) -> float:
    import make_zoo

    worst = 0.0
    for x in make_zoo.check_inputs(m):
        ref = make_zoo.torch_out(module, x)
        got = fn(**{r: tf.constant(a.astype(np.int32)) for r, a in zip(m.input_roles, x)})
        got = got[m.output_name].numpy()
        d = np.abs(got - ref)[0]
        if m.output_kind == "tokens":
            d = d[x[1][0] == 1]
        worst = max(worst, float(d.max()))
    return worst


def export(m: zm.Encoder, module, out, keras_layers: bool, atomic, float16: bool = False,
           calibration: list | None = None) -> dict:
    """calibration: windows (role -> array) for full-integer quantisation (`tf-si8.tflite`)."""
    from importlib.metadata import version

    assert m.family in ("bert", "minilm"), f"{m.name}: the TF routes write BERT only"
    w, p = bert_weights(module)
    eps = layer_norm_eps(module)
    if keras_layers:
        holder, call = keras_model(m, w, p, eps)
    else:
        holder = TFBert(m, w, p, eps)
        call = holder.forward
    fn = tf_function(m, call)
    delta = float_check(m, module, fn)
    print(f"{out.name}: float {'Keras' if keras_layers else 'TF'} vs torch max |Δ| {delta:.3g}", flush=True)
    assert delta < 1e-4, f"{m.name}: the TF network differs from torch ({delta})"
    t0 = time.perf_counter()
    if keras_layers:
        # Keras' own LiteRT export (model.export(format="litert")): it traces the model on the
        # TensorFlow backend and hands the converter these options.
        atomic(out, lambda path: holder.export(str(path), format="litert", verbose=False,
                                               optimizations=[tf.lite.Optimize.DEFAULT]),
               suffix=".tflite")
    else:
        converter = tf.lite.TFLiteConverter.from_concrete_functions([fn], holder)
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
        if float16:  # float16 weights, DEQUANTIZE to float32 before every float op
            converter.target_spec.supported_types = [tf.float16]
        if calibration is not None:  # full-integer: int8 activations everywhere, an int8 output
            roles = [r for r in ("input_ids", "attention_mask", "token_type_ids") if r in calibration[0]]
            converter.representative_dataset = lambda: ([w[r].astype(np.int32) for r in roles] for w in calibration)
            converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
            converter.inference_output_type = tf.int8
        converter._experimental_use_buffer_offset = True
        data = converter.convert()
        atomic(out, lambda path: path.write_bytes(data))
    seconds = time.perf_counter() - t0
    packages = ("tensorflow-cpu", "keras", "ai-edge-litert", "torch", "transformers")
    return dict(
        exporter=("Keras 3 functional model (TensorFlow backend), keras.Model.export(format='litert')"
                  if keras_layers else
                  "plain TensorFlow ops (tf.Module) + TFLiteConverter.from_concrete_functions"),
        recipe="optimizations=[Optimize.DEFAULT]"
               + (", target_spec.supported_types=[tf.float16]" if float16 else "")
               + (f", representative_dataset ({len(calibration)} seeded windows), supported_ops="
                  "[TFLITE_BUILTINS_INT8], inference_output_type=int8" if calibration is not None else "")
               + ("" if keras_layers else ", _experimental_use_buffer_offset=True"),
        float_vs_torch_max_abs=delta,
        export_seconds=round(seconds, 2),
        versions={k: version(k) for k in packages},
    )
