"""The typed steps both runtimes compute alike (porter.ir.integer), in numpy: data movement
(LOOKUP, INDEX, CONCAT, the gathers of a constant at computed indices), CAST, SELECT,
LOGICAL_AND, and exact integer work (COMPARE, ARITHMETIC, CUMSUM) — the index arithmetic a
graph computes from its inputs (RoBERTa's positions from the ids, the buffered token types read
at them, a wrap of negative indices). The exact work (comparisons, wrapping int32 / int64
arithmetic, the float -> integer cast, running sums, index checks) is porter.reference.exact's,
which tensor steps share.

A cast of a float to an integer is exact.float_to_int to int32 (int64 for an int64 result); a
narrower integer result takes the low bits of that int32. Every other cast is C++'s: integers
wrap, bool is != 0, integers to float32 round to nearest even.

The crate's kernels (templates/rust_forward/src/integer.rs, kernels/common/exact.rs) compute the
same values (tests/test_kernels_exhaustive.py holds them to these functions).
"""

from __future__ import annotations

import numpy as np

from porter.ir.integer import IntegerOp, IntegerStep
from porter.reference.exact import arithmetic, compare, cumsum, float_to_int, indices

NUMPY_DTYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64, "float32": np.float32,
                "bool": np.bool_}


def gather_nd(table: np.ndarray, index: np.ndarray, wraps: bool) -> np.ndarray:
    """table[index[..., 0], index[..., 1], ...]: index vectors into the table's first axes."""
    depth = np.shape(index)[-1]
    index = indices(index, np.shape(table)[:depth], wraps)
    return np.asarray(table)[tuple(np.moveaxis(index, -1, 0))]


def gather_elements(table: np.ndarray, index: np.ndarray, axis: int, wraps: bool) -> np.ndarray:
    """out[p] = table[p with its coordinate along `axis` replaced by index[p]] (onnxruntime's
    GatherElements; the index may be smaller than the table along the other axes)."""
    index = indices(index, np.shape(table)[axis], wraps)
    coords = list(np.indices(index.shape))
    coords[axis] = index
    return np.asarray(table)[tuple(coords)]


def lookup(table: np.ndarray, ids: np.ndarray, wraps: bool = False) -> np.ndarray:
    """Rows of a table by id (GATHER, EMBEDDING_LOOKUP, Gather along axis 0)."""
    return np.asarray(table)[indices(ids, np.shape(table)[0], wraps)]


def cast(x: np.ndarray, dtype: str) -> np.ndarray:
    """Both runtimes' casts (the module docstring says which rule each case takes)."""
    x = np.asarray(x)
    to = NUMPY_DTYPES[dtype]
    if dtype == "bool":
        return x != 0
    if x.dtype.kind != "f" or dtype == "float32":
        return x.astype(to)
    return float_to_int(x, np.int64 if dtype == "int64" else np.int32).astype(to)


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
