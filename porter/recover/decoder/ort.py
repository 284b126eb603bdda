"""Which of onnxruntime's graph fusions fire on a decoder, and so which kernels run.

onnxruntime (ORT_ENABLE_ALL, the goldens' level) rewrites spellings it recognises into fused
kernels whose float arithmetic differs from the ops they replace; where a fusion does not fire
the ops run one by one. Reproducing onnxruntime bit for bit therefore means deciding, per block,
whether its fusion fires, by the fusion's own conditions (read from onnxruntime 1.32's
optimizer sources, core/optimizer/*_fusion.cc): these are spelling rules by nature, and they are
written below as patterns over canonical ops that read like the subgraphs they name.

- GeluFusion, FastGeluFusion, QuickGeluFusion (the activations, shared with the encoder):
  porter.recover.canonical.ort_activations. QuickGelu's kernel on AVX-512F CPUs caps the
  logistic at 1 where Sigmoid's does not (porter.reference.ort.floats.quick_gelu). Its alpha
  form, x * sigmoid(x * alpha), computes what the ops do on every CPU, so it needs no rule.
- MatMulAddFusion: MatMul of a rank-2 input + Add -> Gemm (the bias becomes C).
- SkipLayerNormFusion: Add -> LayerNormalization, the sum read by nothing else, both operands
  of rank 3 with equal static or equally named symbolic dimensions -> SkipLayerNormalization
  (porter.recover.canonical.ort_shapes, which the encoder shares).
"""

from __future__ import annotations

from porter.ir.decoder import BIAS_ADD, BIAS_GEMM, BIAS_NONE
from porter.recover.canonical import Canonical


def bias_mode(c: Canonical, linear_op) -> str:
    """How onnxruntime adds a canonical linear's bias: Gemm's C (a Gemm in the file, or a MatMul
    of a rank-2 input that MatMulAddFusion turns into one), or an Add after the product."""
    if linear_op.options.get("bias") is None:
        return BIAS_NONE
    file_ops = [c.source.ops[i] for i in c.origin[linear_op.index]]
    if any(op.type == "Gemm" for op in file_ops):
        return BIAS_GEMM
    matmuls = [op for op in file_ops if op.type == "MatMul"]
    if matmuls and len(c.source.tensor(matmuls[0].inputs[0]).shape) == 2:
        return BIAS_GEMM
    return BIAS_ADD
