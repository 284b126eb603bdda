"""The numpy decoder executor: a DecoderIR run step by step with a KV cache, in onnxruntime's
float arithmetic (porter.reference.ort) on the CPU the IR's ort_cpu names, the reference for the
generated decoder crate.

With int8_dot the Linear layers and the LM head take Q8_0 x Q8_0 integer dot products instead
(porter.reference.q8_0.q8_0_int8_linear, the `q8_0_int8` crates' arithmetic).

`Session.step(ids)` feeds the next tokens (a prompt, then one token at a time), appends their
keys and values to the cache, and returns their logits [len(ids), vocab], like one call of the
exported graph with past_* = the cache so far.
"""

from __future__ import annotations

import numpy as np

from porter.reference import ort as OF
from porter.reference import ort_cpu
from porter.ir.decoder import DecoderIR
from porter.reference.q8_0 import dequantize_q8_0, q8_0_int8_linear, quantize_q8_0
from porter.errors import PorterError

F32 = np.float32


class Session:
    def __init__(self, ir: DecoderIR, int8_dot: bool = False):
        self.ir = ir
        self.int8_dot = int8_dot
        self.floats = ort_cpu.target(ir.ort_cpu).floats  # MLAS's float kernels on the IR's CPU
        self._q8_0: dict[str, tuple] = {}
        shape = (ir.heads, 0, ir.head_dim)
        self.keys = [np.zeros(shape, F32) for _ in ir.layers]
        self.values = [np.zeros(shape, F32) for _ in ir.layers]

    @property
    def past(self) -> int:
        return self.keys[0].shape[1]

    def _linear(self, name: str, x: np.ndarray) -> np.ndarray:
        return self._product(f"{name}.weight", x, self.ir.weights[f"{name}.bias"])

    def _product(self, weight: str, x: np.ndarray, bias) -> np.ndarray:
        if not self.int8_dot:
            return OF.matmul_add(x, self.ir.weights[weight], bias)
        return q8_0_int8_linear(x, *self._quantized(weight), bias)

    def _quantized(self, weight: str) -> tuple[np.ndarray, np.ndarray]:
        if weight not in self._q8_0:
            self._q8_0[weight] = quantize_q8_0(self.ir.weights[weight])
        return self._q8_0[weight]

    def _layer_norm(self, ln, x: np.ndarray) -> np.ndarray:
        w = self.ir.weights
        return OF.layer_norm(x, w[f"{ln.name}.gamma"], w[f"{ln.name}.beta"], ln.eps)

    def _attention(self, index: int, a: np.ndarray, past: int) -> np.ndarray:
        ir, seq = self.ir, a.shape[0]
        qkv = self._linear(ir.layers[index].qkv.name, a)
        heads = lambda t: t.reshape(seq, ir.heads, ir.head_dim).transpose(1, 0, 2)  # noqa: E731
        q, k, v = (heads(part) for part in np.split(qkv, 3, axis=-1))
        self.keys[index] = np.concatenate([self.keys[index], k], axis=1)
        self.values[index] = np.concatenate([self.values[index], v], axis=1)
        scores = OF.sgemm(q, self.keys[index].transpose(0, 2, 1), alpha=ir.scale)  # FusedMatMul
        hidden = np.arange(past + seq)[None, :] > (np.arange(seq)[:, None] + past)
        scores = np.where(hidden[None], F32(-np.inf), scores)
        context = OF.matmul(OF.softmax(scores, self.floats), self.values[index])
        return context.transpose(1, 0, 2).reshape(seq, ir.hidden)

    def step(self, ids) -> np.ndarray:
        ir = self.ir
        ids, past = np.asarray(ids, np.int64), self.past
        if past + len(ids) > ir.n_ctx:
            raise PorterError(f"context full: {past} + {len(ids)} tokens > {ir.n_ctx}")
        w = ir.weights
        table = dequantize_q8_0(*self._quantized("wte")) if self.int8_dot else w["wte"]
        x = (table[ids] + w["wpe"][past + np.arange(len(ids))]).astype(F32)
        for i, ly in enumerate(ir.layers):
            attn = self._linear(ly.o.name, self._attention(i, self._layer_norm(ly.ln1, x), past))
            x = (x + attn).astype(F32)
            h = OF.gelu_erf(self._linear(ly.fc.name, self._layer_norm(ly.ln2, x)))
            if i + 1 < len(ir.layers):
                x = (x + self._linear(ly.fc_out.name, h)).astype(F32)
        return self._product("wte", self._final_layer_norm(x, ir.layers[-1].fc_out.name, h), None)

    def _final_layer_norm(self, x: np.ndarray, fc_out: str, h: np.ndarray) -> np.ndarray:
        """The last residual sum is read by the final LayerNorm alone, so onnxruntime fuses the
        two: SkipLayerNormalization(x, h @ W, bias) adds (x + h @ W) + bias, then normalises."""
        w = self.ir.weights
        v = ((x + self._product(f"{fc_out}.weight", h, None)).astype(F32) + w[f"{fc_out}.bias"]).astype(F32)
        ln = self.ir.final_ln
        return OF.skip_layer_norm(v, w[f"{ln.name}.gamma"], w[f"{ln.name}.beta"], ln.eps)


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
