"""Q8_0, ggml's block format, as porter stores decoder weights, and its integer dot product.

Q8_0 (`quantize_q8_0`): every Linear weight and the tied table in blocks of 32 consecutive
values along the input dimension, one float32 scale d = max|w| / 127 per block, values
q = round-half-away(w / d) in [-127, 127] (0 where d = 0); the weight the arithmetic sees is
float32(q * d). float32 scales (not ggml's float16) keep the dequantised weight exactly what
onnxruntime is given when verifying.

Q8_0 with int8 dot products (`q8_0_int8_linear`, `--quant q8_0_int8`): each input row of a
Linear is quantised to Q8_0 in the same way and every block's dot product is taken in
integers, as ggml's Q8_0 x Q8_0 kernels do; faster, but no longer what onnxruntime computes
on the dequantised weights, so it is verified against this module's arithmetic and only
reported against onnxruntime.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.ir.decoder import DecoderIR
from porter.ir.encoder import as_f32

Q8_0_BLOCK = 32


def quantize_q8_0(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """[rows, k] float32 -> (int8 [rows, k], float32 scales [rows, k / 32])."""
    w = as_f32(w)
    rows, k = w.shape
    if k % Q8_0_BLOCK:
        raise PorterError(f"Q8_0 needs rows of a multiple of {Q8_0_BLOCK} values; this weight has {k}")
    blocks = w.reshape(rows, k // Q8_0_BLOCK, Q8_0_BLOCK)
    scale = (np.abs(blocks).max(axis=-1) / np.float32(127)).astype(np.float32)
    safe = np.where(scale == 0, np.float32(1), scale)
    ratio = (blocks / safe[..., None]).astype(np.float32)
    q = np.where(scale[..., None] == 0, 0, np.trunc(ratio + np.copysign(np.float32(0.5), ratio)))
    return np.clip(q, -127, 127).astype(np.int8).reshape(rows, k), scale


def dequantize_q8_0(q: np.ndarray, scale: np.ndarray) -> np.ndarray:
    rows, k = q.shape
    blocks = q.reshape(rows, k // Q8_0_BLOCK, Q8_0_BLOCK).astype(np.float32) * scale[..., None]
    return blocks.astype(np.float32).reshape(rows, k)


# Block sums are kept as four partial sums: lane l of a block adds the products of the
# element pairs (8g + 2l, 8g + 2l + 1) for g = 0..3, as the wasm kernel's i32x4.dot_i16x8_s
# leaves them, and each lane accumulates over the blocks on its own.
_DOT_LANES, _DOT_GROUPS = 4, Q8_0_BLOCK // 8


def q8_0_int8_linear(x: np.ndarray, q: np.ndarray, scale: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """x [rows, k] against Q8_0 weights (q [outs, k], scale [outs, k / 32]): x is quantised to
    Q8_0 per row; for each block b the integer lane sums s_l are exact, and in float32
    acc_l += float(s_l) * (d_w[b] * d_x[b]), block after block; y = (acc_0 + acc_1) +
    (acc_2 + acc_3), then + bias."""
    qx, dx = quantize_q8_0(x)
    rows, k = qx.shape
    blocks = k // Q8_0_BLOCK
    split = (_DOT_GROUPS, _DOT_LANES, 2)
    lanes = np.einsum("rbgle,obgle->robl", qx.reshape(rows, blocks, *split).astype(np.int32),
                      q.reshape(q.shape[0], blocks, *split).astype(np.int32))
    block_scale = (scale[None] * dx[:, None]).astype(np.float32)  # [rows, outs, blocks]
    acc = np.zeros(lanes.shape[:2] + (_DOT_LANES,), np.float32)
    for b in range(blocks):
        acc = (acc + (lanes[:, :, b].astype(np.float32) * block_scale[:, :, b, None])).astype(np.float32)
    y = ((acc[..., 0] + acc[..., 1]).astype(np.float32) + (acc[..., 2] + acc[..., 3])).astype(np.float32)
    return y if bias is None else (y + bias).astype(np.float32)


def quantized_arrays(ir: DecoderIR) -> set[str]:
    """The arrays Q8_0 stores as blocks: every Linear weight and the token table (also the head
    when it is tied)."""
    return {"wte"} | {ir.weight_of(lin) for lin in ir.linears()}


def with_q8_0_weights(ir: DecoderIR) -> DecoderIR:
    """The IR whose quantised arrays are replaced by their Q8_0 round trip (what the crate
    computes with), for the executor and for making onnxruntime goldens."""
    weights = dict(ir.weights)
    for name in quantized_arrays(ir):
        weights[name] = dequantize_q8_0(*quantize_q8_0(weights[name]))
    return DecoderIR(**{**{f: getattr(ir, f) for f in ir.__dataclass_fields__}, "weights": weights,
                        "weight_format": "q8_0"})
