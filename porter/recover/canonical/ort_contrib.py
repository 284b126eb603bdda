"""onnxruntime's contrib ops (domain com.microsoft) that its transformers optimizer writes, in
canonical ops that compute what onnxruntime's CPU kernels compute (contrib_ops/cpu/bert).

- SkipLayerNormalization(input, skip, gamma, beta [, bias]): the kernel adds input + skip, then
  the bias (the order porter.recover.encoder.skip_bias measured), and normalises the sum with
  its own float32 Welford kernel (porter.reference.ort.floats.skip_layer_norm): an `add` (two
  with a bias) and a `layer_norm` marked `ort_skip`, which the norm recogniser takes as that
  kernel whatever reads the sum. The sum is the optional fourth output
  (input_skip_bias_sum); the mean and inverse deviation outputs are refused when read.
- FastGelu, BiasGelu, Gelu: porter.recover.canonical.onnx (the bias added first, then the kernel).

Every other com.microsoft op, and a form of these porter does not reproduce, is refused in one
line naming the op and the input or attribute: Attention and EmbedLayerNormalization (fused
QKV with a mask index, the embedding sum with its own LayerNorm loop) are among them.
"""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Op
from porter.recover.canonical.builder import Builder, fail

# onnxruntime's default epsilon of SkipLayerNormalization (kDefaultSkipLayerNormEpsilon)
SKIP_LAYER_NORM_EPSILON = 1e-12
# what a refused contrib op lacks, by op type
NOT_REPRODUCED = {
    "Attention": "its fused QKV projection, mask_index forms and score GEMM (alpha, the mask as C) are "
                 "not translated yet",
    "EmbedLayerNormalization": "its embedding sum and LayerNorm loop (a sequential float32 sum, "
                               "(x - mean) / sqrt(var + eps) * gamma + beta) and its mask_index are not "
                               "translated yet",
}


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


def refuse(b: Builder, op: Op) -> None:
    kind = op.type.split(".")[-1]
    why = NOT_REPRODUCED.get(kind, "porter does not know this onnxruntime contrib op")
    attrs = ", ".join(f"{k}={v!r}" for k, v in sorted(op.options.items()) if not isinstance(v, np.ndarray))
    raise fail(b.g, op, f"onnxruntime's com.microsoft {kind}{f' ({attrs})' if attrs else ''} is not "
                        f"reproduced: {why}")


CONTRIB = {"SkipLayerNormalization": skip_layer_norm}
