"""The numpy decoder executor: a DecoderIR run step by step with a KV cache, in onnxruntime's
float arithmetic (porter.reference.ort.floats) on the CPU the IR's ort_cpu names, the reference for the
generated decoder crate.

Every variant of the IR runs the kernel onnxruntime runs for it: Gemm (the bias as C) or
MatMul then Add, LayerNormalization or its fused SkipLayerNormalization, RMSNorm's ops one by
one, the fused Gelu / FastGelu kernels or an activation's own ops, FusedMatMul's alpha, the
causal mask as the graph applies it (replacing scores or adding to them), softmax and P.V.

With int8_dot the Linear layers and the LM head take Q8_0 x Q8_0 integer dot products instead
(porter.reference.q8_0.q8_0_int8_linear, the `q8_0_int8` crates' arithmetic).

`Session.step(ids)` feeds the next tokens (a prompt, then one token at a time), appends their
keys and values to the cache, and returns their logits [len(ids), vocab], like one call of the
exported graph with past_* = the cache so far.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.ir.decoder import (ACT_FAST_GELU, ACT_GELU, ACT_QUICK_GELU, BIAS_GEMM, BIAS_NONE, LAYER_NORM, MASK_ADD, NO_NORM,
                               NORM_ORT_SKIP, POSITIONS_LEARNED, RMS_ORT, RMS_RECIPROCAL,
                               ROTATE_HALF, Activation, Attention, DecoderIR, Instr, Linear, MLP, Norm)
from porter.ir.encoder import Reference
from porter.reference.ort import floats as OF
from porter.reference.ort import cpu as ort_cpu
from porter.reference.ops import evaluate, reduce_float
from porter.reference.q8_0 import dequantize_q8_0, q8_0_int8_linear, quantize_q8_0

F32 = np.float32


def run_program(program: list[Instr], x: np.ndarray) -> np.ndarray:
    """An activation's own ops, elementwise, in onnxruntime's arithmetic."""
    values = {"x": np.asarray(x, F32)}
    for k, instr in enumerate(program):
        args = [values[a] if isinstance(a, str) else F32(a) for a in instr.args]
        values[f"t{k}"] = evaluate(instr.op, {}, args, Reference.ONNXRUNTIME_CPU)
    return values[f"t{len(program) - 1}"]


def activate(act: Activation, x: np.ndarray, floats: str) -> np.ndarray:
    """floats: the MLAS float kernels of the IR's CPU (porter.reference.ort.cpu)."""
    if act.kernel == ACT_GELU:
        return OF.gelu_fused(x)
    if act.kernel == ACT_FAST_GELU:
        return OF.fast_gelu(x)
    if act.kernel == ACT_QUICK_GELU:
        return OF.quick_gelu(x, floats)
    return run_program(act.program, x)


def rotate(x: np.ndarray, style: str) -> np.ndarray:
    """(x1, x2) -> (-x2, x1) over halves of the last axis, or over its pairs."""
    if style == ROTATE_HALF:
        half = x.shape[-1] // 2
        return np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return np.stack([-x[..., 1::2], x[..., 0::2]], axis=-1).reshape(x.shape)


def causal(past: int, seq: int) -> np.ndarray:
    """hidden[i, j]: key j is after query past + i."""
    return np.arange(past + seq)[None, :] > (np.arange(seq)[:, None] + past)


class Session:
    def __init__(self, ir: DecoderIR, int8_dot: bool = False):
        self.ir = ir
        self.int8_dot = int8_dot
        self.floats = ort_cpu.target(ir.ort_cpu).floats  # MLAS's float kernels on the IR's CPU
        self._q8_0: dict[str, tuple] = {}
        self.keys = [np.zeros((ly.attention.kv_heads, 0, ly.attention.head_dim), F32) for ly in ir.layers]
        self.values = [k.copy() for k in self.keys]

    @property
    def past(self) -> int:
        return self.keys[0].shape[1]

    # ---- products -----------------------------------------------------------------------------

    def _quantized(self, weight: str) -> tuple[np.ndarray, np.ndarray]:
        if weight not in self._q8_0:
            self._q8_0[weight] = quantize_q8_0(self.ir.weights[weight])
        return self._q8_0[weight]

    def linear(self, lin: Linear, x: np.ndarray, with_bias: bool = True) -> np.ndarray:
        w = self.ir.weights
        weight = self.ir.weight_of(lin)
        bias = w[f"{lin.name}.bias"] if lin.bias != BIAS_NONE and with_bias else None
        if self.int8_dot:
            return q8_0_int8_linear(x, *self._quantized(weight), bias)
        if bias is not None and lin.bias == BIAS_GEMM:
            return OF.linear(x, w[weight], bias)
        return OF.matmul_add(x, w[weight], bias)

    # ---- blocks -------------------------------------------------------------------------------

    def norm(self, norm: Norm, x: np.ndarray) -> np.ndarray:
        w = self.ir.weights
        if norm.kind == NO_NORM:
            return x
        if norm.kind == LAYER_NORM:
            return OF.layer_norm(x, w[f"{norm.name}.gamma"], w[f"{norm.name}.beta"], norm.eps)
        if norm.form == RMS_ORT:
            return OF.simplified_layer_norm(x, w[f"{norm.name}.gamma"], norm.eps)
        mean_square = reduce_float("mean", (x * x).astype(F32), (x.ndim - 1,), Reference.ONNXRUNTIME_CPU)
        std = np.sqrt((mean_square + F32(norm.eps)).astype(F32)).astype(F32)
        y = (x * (F32(1) / std).astype(F32)) if norm.form == RMS_RECIPROCAL else (x / std)
        y = y.astype(F32)
        return (y * w[f"{norm.name}.gamma"]).astype(F32) if norm.has_gamma else y

    def attention(self, index: int, att: Attention, a: np.ndarray, past: int) -> np.ndarray:
        seq, hd = a.shape[0], att.head_dim
        outputs = [self.linear(lin, a) for lin in att.projections]
        parts = {}
        for name, start, end in att.splits():
            source = outputs[0] if len(outputs) == 1 else outputs["qkv".index(name)]
            heads = (end - start) // hd
            parts[name] = source[:, start:end].reshape(seq, heads, hd).transpose(1, 0, 2)
        q, k, v = parts["q"], parts["k"], parts["v"]
        if att.rotary is not None:
            q, k = (self._rotary(att, t, past) for t in (q, k))
        q, k = scaled(q, att.q_factor), scaled(k, att.k_factor)
        self.keys[index] = np.concatenate([self.keys[index], k], axis=1)
        self.values[index] = np.concatenate([self.values[index], v], axis=1)
        repeat = np.arange(att.heads) // (att.heads // att.kv_heads)
        keys, values = self.keys[index][repeat], self.values[index][repeat]
        scores = product(q, keys.transpose(0, 2, 1), att.scale, att.keys_broadcast)
        hidden = causal(past, seq)[None]
        if att.mask == MASK_ADD:
            scores = (scores + np.where(hidden, F32(att.fill), F32(0))).astype(F32)
        else:
            scores = np.where(hidden, F32(att.fill), scores)
        context = product(OF.softmax(scores, self.floats), values, None, att.values_broadcast)
        return self.linear(att.o, context.transpose(1, 0, 2).reshape(seq, att.heads * hd))

    def _rotary(self, att: Attention, x: np.ndarray, past: int) -> np.ndarray:
        """The first rotary.dims values of each head turned, the rest as they are."""
        w, rows, dims = self.ir.weights, slice(past, past + x.shape[1]), att.rotary.dims
        r = x[..., :dims]
        turned = (rotate(r, att.rotary.style) * w["rope.sin"][rows]).astype(F32)
        r = ((r * w["rope.cos"][rows]).astype(F32) + turned).astype(F32)
        return np.concatenate([r, x[..., dims:]], axis=-1)

    def mlp(self, mlp: MLP, n: np.ndarray, with_bias: bool = True) -> np.ndarray:
        hidden = activate(mlp.activation, self.linear(mlp.gate or mlp.up, n), self.floats)
        if mlp.gate is not None:
            hidden = (hidden * self.linear(mlp.up, n)).astype(F32)
        return self.linear(mlp.down, hidden, with_bias)

    # ---- a step -------------------------------------------------------------------------------

    def embed(self, ids: np.ndarray, past: int) -> np.ndarray:
        w = self.ir.weights
        table = dequantize_q8_0(*self._quantized("wte")) if self.int8_dot else w["wte"]
        x = table[ids].astype(F32)
        if self.ir.positions == POSITIONS_LEARNED:
            x = (x + w["wpe"][past + np.arange(len(ids))]).astype(F32)
        return x

    def step(self, ids, trace: dict | None = None) -> np.ndarray:
        ir = self.ir
        ids, past = np.asarray(ids, np.int64), self.past
        if past + len(ids) > ir.n_ctx:
            raise PorterError(f"context full: {past} + {len(ids)} tokens > {ir.n_ctx}")
        trace = {} if trace is None else trace
        x = trace["embedding"] = self.embed(ids, past)
        fused = ir.final_norm.form == NORM_ORT_SKIP
        for i, ly in enumerate(ir.layers):
            last = i + 1 == len(ir.layers)
            attended = self.attention(i, ly.attention, self.norm(ly.attention.norm, x), past)
            if ly.parallel:  # y, the sum of both branches, closes the layer as the MLP's output would
                trace[f"layer{i}.attention"] = attended
                y = (attended + self.mlp(ly.mlp, self.norm(ly.mlp.norm, x))).astype(F32)
            else:
                x = trace[f"layer{i}.attention"] = (x + attended).astype(F32)
                y = self.mlp(ly.mlp, self.norm(ly.mlp.norm, x), with_bias=not (last and ir.final_norm.skip_bias))
            if last and fused:
                normed = self._skip_norm(x, y, ly.mlp)
                trace[f"layer{i}.mlp"] = self._skip_sum(x, y, ly.mlp)
            x = (x + y).astype(F32)
            trace.setdefault(f"layer{i}.mlp", x)
        if not fused:
            normed = self.norm(ir.final_norm, x)
        trace["final"] = normed
        logits = trace["logits"] = self.linear(ir.head, normed)
        return logits

    def _skip_sum(self, x: np.ndarray, y: np.ndarray, mlp: MLP) -> np.ndarray:
        """SkipLayerNormalization's input + skip (+ bias, the last Linear's, added after)."""
        v = (x + y).astype(F32)
        if self.ir.final_norm.skip_bias:
            v = (v + self.ir.weights[f"{mlp.down.name}.bias"]).astype(F32)
        return v

    def _skip_norm(self, x: np.ndarray, y: np.ndarray, mlp: MLP) -> np.ndarray:
        ln, w = self.ir.final_norm, self.ir.weights
        return OF.skip_layer_norm(self._skip_sum(x, y, mlp), w[f"{ln.name}.gamma"], w[f"{ln.name}.beta"], ln.eps)


def greedy(ir: DecoderIR, prompt, steps: int, int8_dot: bool = False) -> tuple[list[int], np.ndarray, np.ndarray]:
    """(generated ids, prompt logits [T, vocab], step logits [steps, vocab]): row k of the step
    logits chose generated token k (row 0 is the prompt's last row)."""
    session = Session(ir, int8_dot)
    prompt_logits = session.step(prompt)
    rows, ids = [prompt_logits[-1]], []
    for k in range(steps):
        ids.append(int(np.argmax(rows[-1])))
        if k + 1 < steps:
            rows.append(session.step([ids[-1]])[0])
    return ids, prompt_logits, np.stack(rows)


def scaled(x: np.ndarray, factor: tuple[str, float] | None) -> np.ndarray:
    """x times or over a scalar, one float32 rounding per value (onnxruntime's Mul / Div)."""
    if factor is None:
        return x
    kind, value = factor
    return ((x * F32(value)) if kind == "mul" else (x / F32(value))).astype(F32)


def product(a: np.ndarray, b: np.ndarray, alpha: float | None, broadcast: bool) -> np.ndarray:
    """a [heads, rows, k] @ b [heads, k, n] as onnxruntime multiplies activations: a MatMul
    (alpha None) or FusedMatMul with B transposed, each head its own GEMM, whose one-row
    shortcuts MLAS takes (MatMul's M = 1 kernel; FusedMatMul's transposed-B one at alpha exactly
    1); when b is one head broadcast, every head's rows are one GEMM's and no shortcut applies."""
    one_row = a.shape[-2] == 1 and not (broadcast and a.shape[0] > 1)
    if alpha is None:
        return OF.matmul(a, b) if one_row else OF.sgemm(a, b)
    if one_row and np.float32(alpha) == np.float32(1.0):
        return OF.fused_m1(a, b)
    return OF.sgemm(a, b, alpha=alpha)
