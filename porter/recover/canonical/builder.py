"""The builder the format translations share, and the pass state the simplifications share.

A translation (tflite.py, onnx.py) emits canonical ops through a Builder; the passes over them
(fold.py, views.py) work on a Pass, which keeps producers and consumers up to date and records
why each dropped file op needs no step."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Tensor
from porter.ir.encoder import Reference
from porter.reference.ort.cpu import OrtCpu

# An op of constants whose output is larger than every constant it reads (an Expand, a Tile, a
# Range) folds up to this many values; one whose output is no larger (a weight dequantised or
# cast to float32, a slice, a transpose) folds whatever its size: the file already holds that
# much data, and weights computed from constants are constants.
FOLD_LIMIT = 1 << 24


def worth_folding(out: Tensor, values: list[np.ndarray]) -> bool:
    """Whether an op of these constants, writing `out`, folds (FOLD_LIMIT says why some do not)."""
    largest = max((v.size for v in values), default=0)
    if any(d < 0 for d in out.shape):
        return largest <= FOLD_LIMIT
    return int(np.prod(out.shape)) <= max(FOLD_LIMIT, largest)


class Builder:
    """Collects canonical ops; tensors are the file's, plus any a translation adds."""

    def __init__(self, g: Graph, ort_cpu: "OrtCpu | None"):
        self.g = g
        self.ort_cpu = ort_cpu
        self.tensors: list[Tensor] = list(g.tensors)
        self.ops: list[Op] = []
        self.origin: list[tuple[int, ...]] = []
        # A folded float32 constant -> the narrower constant it was computed from exactly (int8 or
        # int4 with its quantisation, or float16), which model.bin may store instead.
        self.stored: dict[int, Tensor] = {}
        # float16 constants onnxruntime's fusions do not see as constants (a shared Cast node
        # reaches their readers: porter.recover.canonical.ort_float16)
        self.cast_constants: set[int] = set()

    def emit(self, kind: str, inputs: list[int], outputs: list[int], origin, **attrs) -> Op:
        op = Op(len(self.ops), kind, list(inputs), list(outputs), attrs)
        self.ops.append(op)
        self.origin.append(tuple(origin))
        return op

    def tensor(self, t: int) -> Tensor:
        return self.tensors[t]

    def const(self, t: int):
        return None if t < 0 else self.tensors[t].data

    def add_tensor(self, like: Tensor, name: str, shape, dtype: str, data=None) -> int:
        index = len(self.tensors)
        self.tensors.append(Tensor(index, name, tuple(shape), dtype, None, data))
        return index

    def set_const(self, t: int, value: np.ndarray) -> None:
        old = self.tensors[t]
        self.tensors[t] = replace(old, data=value, shape=tuple(value.shape), dtype=str(value.dtype))


def fail(g: Graph, op: Op, message: str) -> PorterError:
    return PorterError(f"{op.describe()}: {message}")


def const_ints(b: Builder, op: Op, t: int, what: str) -> list[int]:
    value = b.const(t)
    if value is None:
        raise fail(b.g, op, f"{what} is not a constant (porter compiles static shapes)")
    return [int(v) for v in np.ravel(value)]


def file_op(b: Builder, op: Op):
    """The file's op a canonical op came from, for messages (the op itself if it has none)."""
    return b.g.ops[b.origin[op.index][0]] if b.origin[op.index] else op


def reference_of(b: Builder) -> Reference:
    return Reference.LITERT_BUILTIN if b.g.format == "tflite" else Reference.ONNXRUNTIME_CPU


class Pass:
    """The canonical ops being simplified: producers and consumers kept up to date."""

    def __init__(self, b: Builder, outputs: dict[str, int], reference: Reference):
        self.b = b
        self.ops: list[Op | None] = list(b.ops)
        self.outputs = dict(outputs)
        self.reference = reference
        self.explained: dict[int, str] = {}

    def producer(self, t: int) -> Op | None:
        for op in self.ops:
            if op is not None and t in op.outputs:
                return op
        return None

    def users(self, t: int) -> list[Op]:
        return [op for op in self.ops if op is not None and t in op.inputs]

    def drop(self, op: Op, reason: str) -> None:
        for i in self.b.origin[op.index]:
            self.explained.setdefault(i, reason)
        self.ops[op.index] = None

    def bypass(self, op: Op, reason: str) -> None:
        """Remove an op whose output equals its first input; readers read the input instead."""
        out, source = op.outputs[0], op.inputs[0]
        for user in self.users(out):
            user.inputs = [source if t == out else t for t in user.inputs]
        for name, t in self.outputs.items():
            if t == out:
                self.outputs[name] = source
        self.drop(op, reason)


