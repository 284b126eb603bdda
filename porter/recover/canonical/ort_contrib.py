"""onnxruntime's contrib ops (domain com.microsoft) that its transformers optimizer writes, in
canonical ops that compute what onnxruntime's CPU kernels compute (contrib_ops/cpu/bert).

- SkipLayerNormalization(input, skip, gamma, beta [, bias]): the kernel adds input + skip, then
  the bias (the order porter.recover.encoder.skip_bias measured), and normalises the sum with
  its own float32 Welford kernel (porter.reference.ort.floats.skip_layer_norm): an `add` (two
  with a bias) and a `layer_norm` marked `ort_skip`, which the norm recogniser takes as that
  kernel whatever reads the sum. The sum is the optional fourth output
  (input_skip_bias_sum); the mean and inverse deviation outputs are refused when read.
- EmbedLayerNormalization(ids, segment ids, word, position, segment, gamma, beta [, mask]
  [, position ids]): the three rows gathered and added left to right, then the kernel's own
  LayerNorm loop (`layer_norm` marked `ort_embed`: NormForm.ORT_EMBED); its mask_index output is
  the count of the mask's 1s.
- Attention: three Linears (the per-head GEMMs with the bias as C), the head split, Q . K^T
  times alpha, the mask added, MLAS's softmax, P . V, the merge (`attention` below), which the
  attention recogniser takes by role like any other spelling.
- FastGelu, BiasGelu, Gelu: porter.recover.canonical.onnx (the bias added first, then the kernel).

Every other com.microsoft op, and a form of these porter does not reproduce (a read mean output,
unidirectional or past inputs, a 3-D mask), is refused in one line naming the op and the input
or attribute.
"""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Op
from porter.ir.encoder import ActivationQuant, IntegerDot, WeightFormat
from porter.recover.canonical.builder import Builder, fail

# onnxruntime's default epsilon of SkipLayerNormalization (kDefaultSkipLayerNormEpsilon)
SKIP_LAYER_NORM_EPSILON = 1e-12


def _given(op: Op, position: int) -> bool:
    return len(op.inputs) > position and op.inputs[position] >= 0


def skip_layer_norm(b: Builder, op: Op) -> None:
    if not _given(op, 3):
        raise fail(b.g, op, "SkipLayerNormalization without beta (input 3) is not reproduced")
    for position, what in ((1, "mean"), (2, "inv_std_var")):
        if len(op.outputs) > position and op.outputs[position] >= 0 and b.g.users(op.outputs[position]):
            raise fail(b.g, op, f"SkipLayerNormalization's output {position} ({what}) is read; porter "
                                "reproduces its normalised output and its sum (output 3)")
    gamma, beta = b.const(op.inputs[2]), b.const(op.inputs[3])
    if gamma is None or beta is None:
        raise fail(b.g, op, "SkipLayerNormalization with a non-constant gamma or beta is not reproduced")
    out = b.tensor(op.outputs[0])
    kept_sum = len(op.outputs) > 3 and op.outputs[3] >= 0
    final = op.outputs[3] if kept_sum else b.add_tensor(out, f"{out.name}/skip_sum", out.shape, out.dtype)
    summed = final
    if _given(op, 4):
        summed = b.add_tensor(out, f"{out.name}/input_skip", out.shape, out.dtype)
    b.emit("add", op.inputs[:2], [summed], [op.index])
    if _given(op, 4):
        b.emit("add", [summed, op.inputs[4]], [final], [op.index])
    epsilon = float(np.float32(op.options.get("epsilon", SKIP_LAYER_NORM_EPSILON)))
    b.emit("layer_norm", [final, op.inputs[2], op.inputs[3]], op.outputs[:1], [op.index],
           epsilon=epsilon, axis=-1, ort_skip=True)


def _like(b: Builder, t: int, name: str, shape, dtype: str = "float32", data=None) -> int:
    return b.add_tensor(b.tensor(t), f"{b.tensor(t).name}/{name}", shape, dtype, data)


def embed_layer_norm(b: Builder, op: Op) -> None:
    """word[ids] + position[position_ids, or 0 .. S-1] (+ segment[segment_ids]), added left to
    right as the kernel does, then its LayerNorm loop; mask_index, where read, is the count of
    the mask's 1s; the embedding sum is the optional third output."""
    for position, what in ((2, "word"), (3, "position"), (5, "gamma"), (6, "beta")):
        if not _given(op, position) or b.const(op.inputs[position]) is None:
            raise fail(b.g, op, f"EmbedLayerNormalization needs a constant {what} input ({position})")
    ids = op.inputs[0]
    tables = [b.const(op.inputs[p]) for p in (2, 3)] + ([b.const(op.inputs[4])] if _given(op, 4) else [])
    if len(b.tensor(ids).shape) != 2 or any(t is None or t.ndim != 2 or t.shape[1] != tables[0].shape[1] for t in tables):
        raise fail(b.g, op, f"EmbedLayerNormalization's ids {b.tensor(ids).describe()} and tables are not "
                            "[batch, seq] and [rows, hidden] of one width")
    batch, seq = b.tensor(ids).shape
    out = op.outputs[0]
    hidden = b.tensor(op.inputs[2]).shape[1]
    rows = lambda name: _like(b, out, name, (batch, seq, hidden))  # noqa: E731
    words = rows("words")
    b.emit("gather", [op.inputs[2], ids], [words], [op.index], axis=0)
    if _given(op, 8):
        positions = op.inputs[8]
    else:
        positions = _like(b, out, "positions", (batch, seq), "int64", np.arange(seq, dtype=np.int64)[None])
    position_rows = rows("position_rows")
    b.emit("gather", [op.inputs[3], positions], [position_rows], [op.index], axis=0)
    kept_sum = len(op.outputs) > 2 and op.outputs[2] >= 0
    segments = _given(op, 1) and _given(op, 4)
    summed = op.outputs[2] if kept_sum and not segments else rows("word_position")
    b.emit("add", [words, position_rows], [summed], [op.index])
    if segments:
        segment_rows = rows("segment_rows")
        b.emit("gather", [op.inputs[4], op.inputs[1]], [segment_rows], [op.index], axis=0)
        total = op.outputs[2] if kept_sum else rows("embedding_sum")
        b.emit("add", [summed, segment_rows], [total], [op.index])
        summed = total
    epsilon = float(np.float32(op.options.get("epsilon", SKIP_LAYER_NORM_EPSILON)))
    b.emit("layer_norm", [summed, op.inputs[5], op.inputs[6]], [out], [op.index],
           epsilon=epsilon, axis=-1, ort_embed=True)
    if len(op.outputs) > 1 and op.outputs[1] >= 0 and b.g.users(op.outputs[1]):
        if not _given(op, 7):
            raise fail(b.g, op, "EmbedLayerNormalization's mask_index is read but it has no mask input")
        mask = op.inputs[7]
        ones = _like(b, mask, "one", (), "int32", np.asarray(1, np.int32))
        is_one = _like(b, mask, "is_one", b.tensor(mask).shape, "bool")
        b.emit("equal", [mask, ones], [is_one], [op.index])
        counted = _like(b, mask, "counted", b.tensor(mask).shape, "int32")
        b.emit("cast", [is_one], [counted], [op.index], to="int32")
        b.emit("reduce_sum", [counted], [op.outputs[1]], [op.index], axes=(1,), keepdims=False)


def attention(b: Builder, op: Op) -> None:
    """Attention(input, weights [D, 3D], bias [3D], mask_index): per head Q, K, V = x . W + bias
    (MLAS GEMMs with the bias as C, prepacked: three Linears with the bias in the Gemm), scores
    = alpha * Q . K^T with the mask as C (alpha = scale, or 1 / sqrtf(head_size)), MLAS's softmax,
    P . V, heads merged. Kept keys get exactly alpha * dot; a dropped key gets the mask filter
    value added (onnxruntime fuses it into the GEMM, which changes its last bits, never its
    exp, which underflows either way). The mask forms: none, the raw 2-D [batch, keys] mask (a
    key is kept where mask > 0), or 1-D key lengths [batch] (a key is kept before that position;
    EmbedLayerNormalization's mask_index counts the mask's 1s, so the first that many keys are
    kept however the mask is spelled: porter's attention records that rule, KeyRule.LEADING_COUNT)."""
    o = op.options
    for name in ("unidirectional", "do_rotary", "past_present_share_buffer"):
        if o.get(name, 0):
            raise fail(b.g, op, f"Attention with {name}={o[name]} is not reproduced")
    for position, what in ((4, "past"), (5, "attention_bias"), (6, "past_sequence_length")):
        if _given(op, position):
            raise fail(b.g, op, f"Attention with a {what} input ({position}) is not reproduced")
    weights, bias = b.const(op.inputs[1]), b.const(op.inputs[2]) if _given(op, 2) else None
    if weights is None or weights.ndim != 2 or bias is None:
        raise fail(b.g, op, "Attention with non-constant weights or bias is not reproduced")
    heads = int(o.get("num_heads", 0))
    sizes = [int(v) for v in o.get("qkv_hidden_sizes", [])] or [weights.shape[1] // 3] * 3
    if len(set(sizes)) != 1 or sum(sizes) != weights.shape[1] or heads <= 0 or sizes[0] % heads:
        raise fail(b.g, op, f"Attention with qkv_hidden_sizes={sizes} and num_heads={heads} is not reproduced "
                            "(porter's attention takes equal Q, K and V widths split into heads)")
    x, out = op.inputs[0], op.outputs[0]
    if len(b.tensor(x).shape) != 3 or weights.shape[0] != b.tensor(x).shape[-1] or bias.shape != (weights.shape[1],):
        raise fail(b.g, op, f"Attention's input {b.tensor(x).describe()}, weights {list(weights.shape)} and bias "
                            f"{list(bias.shape)} are not [batch, seq, D], [D, 3H] and [3H]")
    batch, seq, _ = b.tensor(x).shape
    hidden, head_dim = sizes[0], sizes[0] // heads
    rows = (batch, seq, hidden)
    split = (batch, seq, heads, head_dim)
    parts = []
    for i, role in enumerate("qkv"):
        cols = slice(i * hidden, (i + 1) * hidden)
        proj = _like(b, out, role, rows)
        b.emit("linear", [x], [proj], [op.index], weight=np.ascontiguousarray(weights[:, cols].T, np.float32),
               weights=WeightFormat.FLOAT32, activation_quant=ActivationQuant.FLOAT, scale=None,
               bias=np.asarray(bias[cols], np.float32), integer_dot=IntegerDot.EXACT, weight_tensor=op.inputs[1])
        heads_view = _like(b, out, f"{role}_split", split)
        b.emit("view", [proj], [heads_view], [op.index], shape=split)
        perm = (0, 2, 3, 1) if role == "k" else (0, 2, 1, 3)
        moved = _like(b, out, f"{role}_heads", tuple(split[p] for p in perm))
        b.emit("permute", [heads_view], [moved], [op.index], perm=perm)
        parts.append(moved)
    q, k_t, v = parts
    scores_shape = (batch, heads, seq, seq)
    dots = _like(b, out, "dots", scores_shape)
    b.emit("matmul", [q, k_t], [dots], [op.index])
    scale = float(o.get("scale", 0.0)) or float(np.float32(1) / np.sqrt(np.float32(head_dim)))
    alpha = _like(b, out, "alpha", (), "float32", np.asarray(scale, np.float32))
    scores = _like(b, out, "scores", scores_shape)
    b.emit("mul", [dots, alpha], [scores], [op.index])
    if _given(op, 3):
        scores = _masked(b, op, scores, scores_shape)
    probs = _like(b, out, "probs", scores_shape)
    b.emit("softmax", [scores], [probs], [op.index], axis=-1, beta=1.0, ort_floats=b.ort_cpu.floats)
    context = _like(b, out, "context", (batch, heads, seq, head_dim))
    b.emit("matmul", [probs, v], [context], [op.index])
    merged = _like(b, out, "merged", split)
    b.emit("permute", [context], [merged], [op.index], perm=(0, 2, 1, 3))
    b.emit("view", [merged], [out], [op.index], shape=rows)


def _masked(b: Builder, op: Op, scores: int, shape) -> int:
    """scores + (0 for a kept key, mask_filter_value for a dropped one), the mask's forms as
    onnxruntime's PrepareMask reads them."""
    mask = op.inputs[3]
    dims = b.tensor(mask).shape
    batch, seq = shape[0], shape[-1]
    if len(dims) == 2 and tuple(dims) == (batch, seq):
        zero = _like(b, mask, "zero", (), b.tensor(mask).dtype, np.zeros((), b.tensor(mask).dtype))
        kept = _like(b, mask, "kept", dims, "bool")
        b.emit("greater", [mask, zero], [kept], [op.index])  # a raw mask keeps a key where it is > 0
    elif len(dims) == 1 and dims[0] == batch:
        # key lengths (right padding): a key is kept before its window's end position
        positions = _like(b, mask, "positions", (1, seq), "int32", np.arange(seq, dtype=np.int32)[None])
        ends = _like(b, mask, "ends", (batch, 1), b.tensor(mask).dtype)
        b.emit("view", [mask], [ends], [op.index], shape=(batch, 1))
        kept = _like(b, mask, "kept", (batch, seq), "bool")
        b.emit("less", [positions, ends], [kept], [op.index])
        dims = (batch, seq)
    else:
        raise fail(b.g, op, f"Attention's mask_index {b.tensor(mask).describe()} is of a form porter does not "
                            "reproduce (it takes a raw 2-D [batch, keys] mask or 1-D key lengths [batch])")
    filter_value = np.float32(op.options.get("mask_filter_value", -10000.0))
    keep_value = _like(b, mask, "keep_value", (), "float32", np.zeros((), np.float32))
    drop_value = _like(b, mask, "drop_value", (), "float32", np.asarray(filter_value))
    row = _like(b, mask, "mask_row", dims, "float32")
    b.emit("where", [kept, keep_value, drop_value], [row], [op.index])
    keys = (dims[0], 1, 1, dims[1])
    broadcast = _like(b, mask, "mask_keys", keys, "float32")
    b.emit("view", [row], [broadcast], [op.index], shape=keys)
    masked = _like(b, scores, "masked", shape)
    b.emit("add", [scores, broadcast], [masked], [op.index])
    return masked


def refuse(b: Builder, op: Op) -> None:
    kind = op.type.split(".")[-1]
    why = "porter does not know this onnxruntime contrib op"
    attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(op.options.items()) if not isinstance(v, np.ndarray))
    raise fail(b.g, op, f"onnxruntime's com.microsoft {kind}{f' ({attrs})' if attrs else ''} is not "
                        f"reproduced: {why}")


CONTRIB = {"SkipLayerNormalization": skip_layer_norm, "EmbedLayerNormalization": embed_layer_norm,
           "Attention": attention}
