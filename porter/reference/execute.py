"""The numpy IR executor: runs an EncoderIR with the reference's arithmetic.

TFLite graphs (ir.reference LITERT_BUILTIN): integer-weight layers use TFLite's builtin hybrid
FULLY_CONNECTED exactly (porter.reference.quant); the float steps use LiteRT's builtin float kernels as
porter.reference.litert emulates them (Eigen's summation order, exp and erfc), in the graph's
operation order. The result is meant to be bit-identical to LiteRT's builtin kernels.

ONNX graphs (ONNXRUNTIME_CPU): quantize_dynamic's layers use onnxruntime's DynamicQuantizeLinear
and integer matmul exactly (porter.reference.quant); the float steps follow onnxruntime's CPU kernels as
porter.reference.ort emulates them (every one bit-exact as measured), those of the CPU the IR's
ort_cpu names (porter.reference.ort_cpu).
Tests measure both against the goldens.

`run(ir, ids, mask, trace=dict)` fills `trace` with every block's output (`embed`, `embed.ln`,
`layer{i}.attn.probs`, `layer{i}.attn_ln`, `layer{i}.ffn_ln`) and every Linear's input and
output (`<linear name>.in` / `.out`), so that a divergence from LiteRT's preserved
intermediates can be located to the first block that differs (porter.check.run.locate).
"""

from __future__ import annotations

import math

import numpy as np

from porter.reference import litert as LF
from porter.reference import ort as OF
from porter.reference import ort_cpu
from porter.reference import quant
from porter.ir.encoder import MASK_INPUT, ONNXRUNTIME_CPU, ORT_DYNAMIC_UINT8, EncoderIR, LayerNorm, Linear

F32 = np.float32
# LayerNorm forms that are one onnxruntime kernel (porter.ir.encoder.LayerNorm.form)
ONNX_LAYER_NORMS = {"onnx": OF.layer_norm, "onnx_skip": OF.skip_layer_norm}


def linear(ir: EncoderIR, lin: Linear, x: np.ndarray, trace: dict) -> np.ndarray:
    w = ir.weights[f"{lin.name}.weight"]
    bias = ir.weights.get(f"{lin.name}.bias")
    if lin.activation_quant == ORT_DYNAMIC_UINT8:
        y = quant.ort_dynamic_linear(x, w, ir.weights[f"{lin.name}.scale"], bias,
                                     lin.integer_dot)
    elif lin.weight_dtype == "int8":
        y = quant.hybrid_fully_connected(x, w, ir.weights[f"{lin.name}.scale"], bias,
                                         lin.asymmetric_inputs)
    elif ir.reference == ONNXRUNTIME_CPU:
        y = OF.linear(x, w, bias)
    else:
        y = LF.fully_connected(x, w, bias)
    trace[f"{lin.name}.in"], trace[f"{lin.name}.out"] = x, y
    return y


def layer_norm(ir: EncoderIR, ln: LayerNorm, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Returns (normalised, affine). With a folded affine the next layers read `normalised`."""
    gamma, beta = ir.weights[f"{ln.name}.gamma"], ir.weights[f"{ln.name}.beta"]
    if ln.form in ONNX_LAYER_NORMS:
        out = ONNX_LAYER_NORMS[ln.form](x, gamma, beta, ln.eps)
        return out, out
    mean = LF.mean_last_axis(x)
    centred = (x - mean).astype(F32)
    var = LF.mean_last_axis((centred * centred).astype(F32))
    rstd = (F32(1) / np.sqrt((var + F32(ln.eps)).astype(F32))).astype(F32)
    if ln.form == "centred":
        normalised = (centred * rstd).astype(F32)
        affine = ((normalised * gamma).astype(F32) + beta).astype(F32)
        return normalised, affine
    if ln.form == "keras":
        inv = (rstd * gamma).astype(F32)
        out = ((x * inv).astype(F32) + (beta - (mean * inv).astype(F32)).astype(F32))
        return out.astype(F32), out.astype(F32)
    shift = (F32(0) - (rstd * mean).astype(F32)).astype(F32)
    normalised = ((x * rstd).astype(F32) + shift).astype(F32)
    affine = ((normalised * gamma).astype(F32) + beta).astype(F32)
    return normalised, affine


def gelu(ir: EncoderIR, x: np.ndarray, kind: str) -> np.ndarray:
    if kind in ("erf", "erf_mul") and ir.reference == ONNXRUNTIME_CPU:
        return OF.gelu_erf(x, multiply=kind == "erf_mul")
    if kind == "tanh":
        x64 = x.astype(np.float64)
        inner = math.sqrt(2 / math.pi) * (x64 + 0.044715 * x64 ** 3)
        return (0.5 * x64 * (1 + np.tanh(inner))).astype(F32)
    return LF.gelu_exact(x)


def embed(ir: EncoderIR, ids: np.ndarray) -> np.ndarray:
    e = ir.embeddings
    table = ir.weights["embed.table"]
    rows = table[ids]
    if e.table_kind == "int8_rows":
        rows = rows.astype(F32) * ir.weights["embed.scale"][ids][:, None]
    elif e.table_kind == "int8_tensor":
        rows = rows.astype(F32) * ir.weights["embed.scale"][0]
    elif e.table_kind == "uint8_tensor":  # DequantizeLinear: float(q - zero_point) * scale
        centred = rows.astype(np.int32) - ir.weights["embed.zero_point"][0]
        rows = centred.astype(F32) * ir.weights["embed.scale"][0]
    x = rows.astype(F32)
    for i in range(e.bias_terms):
        x = (x + ir.weights[f"embed.bias{i}"]).astype(F32)
    return x


def attention(ir: EncoderIR, layer_index: int, x_norm: np.ndarray, mask: np.ndarray | None,
              trace: dict) -> np.ndarray:
    a = ir.layers[layer_index].attn
    seq = x_norm.shape[0]
    q, k, v = (linear(ir, lin, x_norm, trace) for lin in (a.q, a.k, a.v))
    split = lambda t: t.reshape(seq, a.heads, a.head_dim).transpose(1, 0, 2)  # noqa: E731
    qh, kh, vh = split(q), split(k), split(v)
    onnx = ir.reference == ONNXRUNTIME_CPU
    scale = F32(a.scale)
    if a.scale_on == "query":
        qh = (qh * scale).astype(F32)
    if onnx:
        # onnxruntime fuses the scaling into FusedMatMul(alpha), which never takes MLAS's M = 1
        # kernel and applies alpha per SGEMM block
        alpha = scale if a.scale_on == "scores" and a.scale_divisor is None else F32(1)
        scores = OF.sgemm(qh, kh.transpose(0, 2, 1), alpha=alpha)
    else:
        scores = LF.batch_matmul(qh, kh.transpose(0, 2, 1))
    if a.scale_divisor is not None:
        scores = (scores / F32(a.scale_divisor)).astype(F32)
    elif a.scale_on == "scores" and not onnx:
        scores = (scores * scale).astype(F32)
    if ir.mask == MASK_INPUT and mask is not None:
        # The graph adds 0 to kept keys and mask_value to dropped ones.
        scores = np.where(mask[None, None, :] != 0, scores,
                          (scores + F32(a.mask_value)).astype(F32))
    if onnx:
        probs = OF.softmax(scores, ort_cpu.target(ir.ort_cpu).floats)
    else:
        probs = LF.softmax(scores, a.softmax_beta)
    ctx = (OF.matmul if onnx else LF.batch_matmul)(probs, vh)
    ctx = ctx.transpose(1, 0, 2).reshape(seq, a.heads * a.head_dim)
    trace[f"layer{layer_index}.attn.probs"] = probs
    return linear(ir, a.o, ctx, trace)


def run(ir: EncoderIR, ids, mask=None, trace: dict | None = None) -> np.ndarray:
    """Logits [seq, labels] for one window of token ids (padded to ir.seq by the caller)."""
    trace = {} if trace is None else trace
    ids = np.asarray(ids, dtype=np.int64)
    if ids.shape != (ir.seq,):
        raise ValueError(f"expected {ir.seq} token ids, got {ids.shape}")
    if ids.min() < 0 or ids.max() >= ir.vocab:
        raise ValueError(f"token id out of range [0, {ir.vocab})")
    mask = None if mask is None else np.asarray(mask)
    x = embed(ir, ids)
    trace["embed"] = x
    norm, x = layer_norm(ir, ir.embeddings.ln, x)
    feed = norm if ir.embeddings.ln.affine_folded else x
    trace["embed.ln"] = x
    for i, ly in enumerate(ir.layers):
        attn = attention(ir, i, feed, mask, trace)
        norm, x = layer_norm(ir, ly.attn_ln, (attn + x).astype(F32))
        feed = norm if ly.attn_ln.affine_folded else x
        trace[f"layer{i}.attn_ln"] = x
        h = gelu(ir, linear(ir, ly.ffn_in, feed, trace), ly.gelu)
        h = linear(ir, ly.ffn_out, h, trace)
        norm, x = layer_norm(ir, ly.ffn_ln, (h + x).astype(F32))
        feed = norm if ly.ffn_ln.affine_folded else x
        trace[f"layer{i}.ffn_ln"] = x
    return linear(ir, ir.head, feed, trace)
