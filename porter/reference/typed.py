"""The typed steps both runtimes compute alike (porter.ir.integer), in numpy: data movement
(LOOKUP, INDEX, CONCAT, the gathers of a constant at computed indices), CAST, SELECT,
LOGICAL_AND, and exact integer work (COMPARE, ARITHMETIC, CUMSUM) — the index arithmetic a
graph computes from its inputs (RoBERTa's positions from the ids, the buffered token types read
at them, a wrap of negative indices).

Integer work is exact, so any order gives the same values. int32 and int64 sums and products
wrap (two's complement), as LiteRT's and onnxruntime's C++ kernels do on every target they run on
(signed overflow is undefined in C++; x86's add and imul wrap). A cast of a float to an integer
truncates toward zero, and a NaN or a value outside int32 (int64 for an int64 result) gives the
type's minimum, x86's integer indefinite (cvttss2si), as both runtimes' static_cast does; a
narrower integer result takes the low bits of that int32. Every other cast is C++'s: integers
wrap, bool is != 0, integers to float32 round to nearest even.

The crate's kernels (templates/rust_forward/src/integer.rs, kernels/common/index.rs) compute the
same values (tests/test_typed_steps.py holds them to these functions).
"""

from __future__ import annotations

import numpy as np

from porter.ir.integer import IntegerOp, IntegerStep

NUMPY_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64, "float32": np.float32,
                "bool": np.bool_}

COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
           "greater": np.greater, "greater_equal": np.greater_equal}
ARITHMETIC = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def compare(kind: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return COMPARE[kind](np.asarray(a), np.asarray(b))


def arithmetic(kind: str, a: np.ndarray, b: np.ndarray, dtype: str) -> np.ndarray:
    """int32 / int64 arithmetic in `dtype`, wrapping (numpy's array arithmetic wraps)."""
    t = NUMPY_DTYPES[dtype]
    with np.errstate(over="ignore"):
        return ARITHMETIC[kind](np.asarray(a).astype(t), np.asarray(b).astype(t)).astype(t)


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


def _indices(index: np.ndarray, dims, wraps: bool) -> np.ndarray:
    """Indices along axes of sizes `dims` (broadcast against the index's last axes), a negative
    one counted from the end where the runtime does so; one outside is refused, as both
    runtimes refuse it."""
    index = np.asarray(index, np.int64)
    dims = np.asarray(dims, np.int64)
    if wraps:
        index = np.where(index < 0, index + dims, index)
    if index.size and (np.any(index < 0) or np.any(index >= dims)):
        raise ValueError(f"an index outside the table's dimensions {dims.tolist()}")
    return index


def gather_nd(table: np.ndarray, index: np.ndarray, wraps: bool) -> np.ndarray:
    """table[index[..., 0], index[..., 1], ...]: index vectors into the table's first axes."""
    depth = np.shape(index)[-1]
    index = _indices(index, np.shape(table)[:depth], wraps)
    return np.asarray(table)[tuple(np.moveaxis(index, -1, 0))]


def gather_elements(table: np.ndarray, index: np.ndarray, axis: int, wraps: bool) -> np.ndarray:
    """out[p] = table[p with its coordinate along `axis` replaced by index[p]] (onnxruntime's
    GatherElements; the index may be smaller than the table along the other axes)."""
    index = _indices(index, np.shape(table)[axis], wraps)
    coords = list(np.indices(index.shape))
    coords[axis] = index
    return np.asarray(table)[tuple(coords)]


def lookup(table: np.ndarray, ids: np.ndarray, wraps: bool = False) -> np.ndarray:
    """Rows of a table by id (GATHER, EMBEDDING_LOOKUP, Gather along axis 0)."""
    return np.asarray(table)[_indices(ids, np.shape(table)[0], wraps)]


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """Both runtimes' casts (the module docstring says which rule each case takes)."""
    x = np.asarray(x)
    to = NUMPY_DTYPES[dtype]
    if dtype == "bool":
        return x != 0
    if x.dtype.kind != "f" or dtype == "float32":
        return x.astype(to)
    wide = np.int64 if dtype == "int64" else np.int32
    info = np.iinfo(wide)
    inside = np.isfinite(x) & (x > info.min - 1.0) & (x < float(info.max) + 1.0)
    with np.errstate(invalid="ignore"):
        truncated = np.where(inside, np.trunc(np.where(inside, x, 0)).astype(wide), wide(info.min))
    return truncated.astype(to)


def _concat(step, w, ins):
    return np.concatenate([x.astype(NUMPY_DTYPES[step.dtype], copy=False) for x in ins], axis=step.axes[0])


KERNELS = {
    IntegerOp.LOOKUP: lambda step, w, ins: lookup(w[f"{step.name}.table"], ins[0], step.attrs.get("wraps", False)),
    IntegerOp.INDEX: lambda step, w, ins: ins[0].reshape(-1)[w[step.attrs["map"]]],
    IntegerOp.CAST: lambda step, w, ins: cast(ins[0], step.dtype),
    IntegerOp.LOGICAL_AND: lambda step, w, ins: np.logical_and(ins[0], ins[1]),
    IntegerOp.SELECT: lambda step, w, ins: np.where(ins[0].astype(bool), ins[1], ins[2]),
    IntegerOp.COMPARE: lambda step, w, ins: compare(step.kind, ins[0], ins[1]),
    IntegerOp.ARITHMETIC: lambda step, w, ins: arithmetic(step.kind, ins[0], ins[1], step.dtype),
    IntegerOp.CUMSUM: lambda step, w, ins: cumsum(ins[0], step.axes[0], step.attrs["exclusive"],
                                                  step.attrs["reverse"]),
    IntegerOp.CONCAT: _concat,
    IntegerOp.GATHER_ND: lambda step, w, ins: gather_nd(w[f"{step.name}.table"], ins[0], step.attrs["wraps"]),
    IntegerOp.GATHER_ELEMENTS: lambda step, w, ins: gather_elements(w[f"{step.name}.table"], ins[0], step.axes[0],
                                                                    step.attrs["wraps"]),
}


def run(step: IntegerStep, weights: dict, ins: list[np.ndarray]) -> np.ndarray:
    """The output of one of these steps for its operands' values (each seen with its shape)."""
    ins = [np.asarray(x).astype(NUMPY_DTYPES[d], copy=False) for x, d in zip(ins, step.in_dtypes)]
    out = np.asarray(KERNELS[step.op](step, weights, ins))
    return out.reshape(step.shape).astype(NUMPY_DTYPES[step.dtype], copy=False)
