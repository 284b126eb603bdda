"""Exact element work, one definition for every step that computes it: typed programs' index
arithmetic (porter.reference.typed: RoBERTa's positions from the ids, a wrap of negative indices)
and the canonical ops tensor steps and folding evaluate (porter.reference.ops): comparisons,
int32 / int64 arithmetic, the float -> integer cast, running sums and index checks, in numpy.

Integer work is exact, so any order gives the same values. int32 and int64 sums and products
wrap (two's complement), as LiteRT's and onnxruntime's C++ kernels do on every target they run on
(signed overflow is undefined in C++; x86's add and imul wrap). A float cast to an integer
truncates toward zero, and a NaN or a value outside the type gives its minimum, x86's integer
indefinite (cvttss2si), as both runtimes' static_cast does.

The crate's kernels/common/exact.rs computes the same values (tests/test_kernels_exhaustive.py
holds it to these functions).
"""

from __future__ import annotations

import numpy as np

COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
           "greater": np.greater, "greater_equal": np.greater_equal}
# std::max / std::min as both runtimes call them: a unless b is strictly beyond it (for integers,
# numpy's maximum and minimum)
ARITHMETIC = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
              "maximum": lambda a, b: np.where(a < b, b, a), "minimum": lambda a, b: np.where(b < a, b, a)}


def compare(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return COMPARE[kind](np.asarray(a), np.asarray(b))


def arithmetic(kind: str, a: np.ndarray, b: np.ndarray, dtype) -> np.ndarray:
    """Integer arithmetic in `dtype` (a name or a numpy type), wrapping (numpy's array arithmetic
    wraps)."""
    t = np.dtype(dtype)
    with np.errstate(over="ignore"):
        return np.asarray(ARITHMETIC[kind](np.asarray(a).astype(t), np.asarray(b).astype(t))).astype(t)


def float_to_int(x: np.ndarray, to) -> np.ndarray:
    """Both runtimes' static_cast of floats to int32 or int64 (`to`): truncation toward zero; a NaN
    or out-of-range value gives x86's integer indefinite (the type's minimum), as cvttss2si does
    (log(0) = -inf cast to int in a relative-position bucket is one)."""
    x = np.asarray(x)
    to = np.dtype(to).type
    info = np.iinfo(to)
    inside = np.isfinite(x) & (x > info.min - 1.0) & (x < info.max + 1.0)
    with np.errstate(invalid="ignore"):
        return np.where(inside, np.trunc(np.where(inside, x, 0)).astype(to), to(info.min))


def cumsum(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """Running sums along `axis` in x's type (wrapping): each value's own included unless
    `exclusive`, from the end when `reverse` (TFLite's CUMSUM, onnxruntime's CumSum)."""
    x = np.asarray(x)
    if reverse:
        x = np.flip(x, axis)
    with np.errstate(over="ignore"):
        total = np.cumsum(x, axis=axis, dtype=x.dtype)
        if exclusive:
            total = (total - x).astype(x.dtype)
    return np.flip(total, axis) if reverse else total


def indices(index: np.ndarray, dims, wraps: bool) -> np.ndarray:
    """Indices along axes of sizes `dims` (broadcast against the index's last axes) as int64, a
    negative one counted from the end where the runtime does so (`wraps`: onnxruntime's gathers).
    One outside its axis is refused as both runtimes refuse it: ValueError naming the first (as
    given) and its axis's size."""
    index = np.asarray(index).astype(np.int64)
    dims = np.asarray(dims, np.int64)
    wrapped = np.where(index < 0, index + dims, index) if wraps else index
    bad = (wrapped < 0) | (wrapped >= dims)
    if np.any(bad):
        first = tuple(np.argwhere(bad)[0])
        raise ValueError(f"index {int(index[first])} out of range for an axis of "
                         f"{int(np.broadcast_to(dims, bad.shape)[first])}")
    return wrapped
