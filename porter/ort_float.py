"""onnxruntime's CPU float kernels for an encoder, emulated in numpy (close, not bit-exact).

What onnxruntime (CPU provider, ORT_ENABLE_ALL) runs for a torch.onnx BERT export, read from
its optimised graph and its sources:

- residual Add + LayerNormalization become com.microsoft.SkipLayerNormalization (v = input +
  skip, then LayerNorm): see layer_norm for what was measured; all but an ulp of inv_std exact.
- MatMul + Add become Gemm, Q.K^T * scale becomes FusedMatMul(alpha): MLAS SGEMM, FMA chains in
  blocks of k. Emulated as an exact (float64) dot product rounded once, then + bias / * alpha:
  within an ulp or two of MLAS, not bit-exact.
- Softmax: MLAS exp and sum, then * (1 / sum); Erf: MLAS's polynomial. Emulated with correctly
  rounded exp, and Eigen's float erfc (porter.litert_float), within a few ulp.

This is why the ONNX float path is measured against the ort goldens with a tolerance (1e-4)
rather than bit for bit. The dynamically quantised layers are exact given their input
(porter.quant), but an ulp upstream can move a whole tensor's uint8 scale or flip a rounding, so
quantised graphs inherit the float path's small differences, amplified.
"""

from __future__ import annotations

import numpy as np

from porter import litert_float as LF

F32 = np.float32


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a [..., m, k] @ b [..., k, n]: exact dot products rounded once to float32."""
    return (np.asarray(a, np.float64) @ np.asarray(b, np.float64)).astype(F32)


def linear(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None) -> np.ndarray:
    """Gemm with the bias as C: round(x @ w^T), then + bias (MLAS adds the block to C)."""
    y = matmul(x, np.asarray(w).T)
    return y if bias is None else (y + bias.astype(F32)).astype(F32)


def layer_norm(v: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """(Skip)LayerNormalization's float kernel on v = input + skip (already summed).

    Measured against onnxruntime 1.32 through LayerNormalization's Mean and InvStdDev outputs:
    the mean is the exact mean rounded to float32 (every row matched); the output is
    fma((v - mean) * inv_std, gamma, beta) with one rounding for the fma (every element matched
    given onnxruntime's own mean and inv_std). inv_std = 1 / sqrtf(var + eps) in float32 matches
    about 3 rows in 4; the others differ by an ulp (the kernel's exact variance and reciprocal
    steps are not known), which is what keeps the float path from being bit-exact.
    """
    v = np.asarray(v, F32)
    wide = v.astype(np.float64)
    mean64 = wide.mean(axis=-1, keepdims=True)
    mean = mean64.astype(F32)
    var = ((wide - mean64) ** 2).mean(axis=-1, keepdims=True).astype(F32)
    inv_std = (F32(1) / np.sqrt((var + F32(eps)).astype(F32))).astype(F32)
    normalised = ((v - mean).astype(F32) * inv_std).astype(F32)
    # fma: the product and the sum with one rounding (exact in float64 for float32 inputs)
    return (normalised.astype(np.float64) * gamma + beta.astype(np.float64)).astype(F32)


def softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, F32)
    shifted = (x - x.max(axis=-1, keepdims=True)).astype(F32)
    with np.errstate(under="ignore"):
        e = np.exp(shifted.astype(np.float64)).astype(F32)
    total = e.astype(np.float64).sum(axis=-1, keepdims=True).astype(F32)
    return (e * (F32(1) / total).astype(F32)).astype(F32)


def erf(x: np.ndarray) -> np.ndarray:
    return (1.0 - LF.erfc(x).astype(np.float64)).astype(F32)


_SQRT2 = F32(np.sqrt(2))


def gelu_erf(h: np.ndarray) -> np.ndarray:
    """h * (0.5 * (erf(h / sqrt 2) + 1)) in the graph's order (the * 0.5 is exact either way)."""
    h = np.asarray(h, F32)
    e = erf((h / _SQRT2).astype(F32))
    return (h * ((e + F32(1)).astype(F32) * F32(0.5)).astype(F32)).astype(F32)
