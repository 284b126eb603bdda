"""onnxruntime's CPU provider on a float16 graph: the two conversions it adds, and its one float16
kernel that computes (porter/frontends/ort_float16.py says which ops have float16 kernels, and
porter/recover/canonical/ort_float16.py where onnxruntime places its casts).

On x86 onnxruntime runs every arithmetic op of a float16 graph with its float32 kernel between
Casts; a value is rounded to float16 only where it enters an op that runs in float16 (data
movement, LayerNormalization), and widened back exactly where a float32 op reads it. Measured on
onnxruntime 1.32 (tests/test_ort_float16.py):

- its Cast from float32 to float16 rounds to nearest, ties to even, with float16's subnormals,
  and to infinity from 65520 up (numpy's conversion of every non-NaN value); a NaN comes out quiet
  with its sign and the top nine bits of its payload (MLAS's AVX2 kernel, vcvtps2ph, on each
  block of eight; the last size % 8 values of a tensor take a scalar path that drops the payload:
  NaN payloads are the one thing porter's rounding does not follow by position);
- its Cast from float16 to float32 is exact, and makes a NaN quiet (sets bit 22);
- its float16 LayerNormalization widens its input, runs the float32 LayerNormalization kernel
  (porter.reference.ort.floats.layer_norm) and rounds the output to float16.
"""

from __future__ import annotations

import numpy as np

from porter.reference.ort import floats as OF

F32 = np.float32
_QUIET = np.uint32(0x00400000)
_NAN = np.uint32(0x7FC00000)
_KEPT_PAYLOAD = np.uint32(0x007FE000)  # the payload bits a float16 NaN keeps, in float32's place


def widen(h: np.ndarray) -> np.ndarray:
    """float16 values as onnxruntime's Cast widens them to float32 (NaNs made quiet)."""
    out = np.asarray(h, np.float16).astype(F32)
    nan = np.isnan(out)
    if nan.any():
        out = out.copy()
        out[nan] = (out[nan].view(np.uint32) | _QUIET).view(F32)
    return out


def round_half(x: np.ndarray) -> np.ndarray:
    """float32 -> float16 -> float32 as onnxruntime's two Casts compute it: the value rounded to
    the nearest float16 (ties to even), as a float32; a NaN quiet, its sign and top payload bits kept."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", invalid="ignore"):
        out = widen(x.astype(np.float16))
    nan = np.isnan(x)
    if nan.any():
        bits = x[nan].view(np.uint32)
        out[nan] = ((bits & np.uint32(0x80000000)) | _NAN | (bits & _KEPT_PAYLOAD)).view(F32)
    return out


def layer_norm_half(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    """onnxruntime's float16 LayerNormalization on float16 values (given widened): the float32
    kernel, its output rounded to float16."""
    return round_half(OF.layer_norm(x, gamma, beta, eps))
