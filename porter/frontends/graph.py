"""The format-neutral graph every frontend produces and every later stage reads.

A Graph is a flat list of tensors and a topologically ordered list of ops, with producer and
consumer maps. Frontends (TFLite, ONNX) fill it; they keep their own op vocabulary (op types
are the format's names, e.g. "FULLY_CONNECTED" or "MatMul"), so patterns say which spelling
they recognise. Constant data is decoded once, checked against the file by the frontend.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable, Hashable

import numpy as np

# No transformer op needs more than 6 dimensions; numpy holds at most 32 (64 in numpy 2), so a
# file claiming more must be refused before any array is shaped from it.
MAX_RANK = 16
# porter compiles to wasm32: no tensor of more than 4 GiB can exist in the module, and refusing
# one here keeps every later stage from allocating for a shape that could never run.
MAX_TENSOR_BYTES = 1 << 32
CYCLE_SHOWN = 8  # nodes of a cycle named in its message


def shape_problem(shape, itemsize: int) -> str | None:
    """Why a declared shape (-1: dynamic) cannot be a tensor porter compiles, or None."""
    if len(shape) > MAX_RANK:
        return f"has rank {len(shape)}; porter reads tensors of rank up to {MAX_RANK}"
    if any(d < -1 for d in shape):
        return f"has a negative dimension in shape {list(shape)}"
    if math.prod(d for d in shape if d > 0) * itemsize > MAX_TENSOR_BYTES:
        return f"has shape {list(shape)}, more than the 4 GiB a wasm32 module can hold"
    return None


@dataclass(frozen=True)
class Quantization:
    """Affine quantisation of a tensor: real = scale * (q - zero_point).

    axis is None for per-tensor quantisation (one scale), else the dimension that carries one
    scale per index (per-channel).
    """

    scale: np.ndarray  # float32, 1 or shape[axis] values
    zero_point: np.ndarray  # int64, same length as scale
    axis: int | None

    @property
    def per_channel(self) -> bool:
        return self.axis is not None


@dataclass(frozen=True)
class Storage:
    """Where a constant's bytes live in the source file (for inspection and error messages)."""

    kind: str  # "inline" (inside the flatbuffer/protobuf), "external" (past it / other file)
    offset: int  # byte offset in the file (inline: where the data vector starts; -1: unknown)
    size: int  # bytes
    buffer: int | None = None  # TFLite buffer index
    file: str | None = None  # ONNX external data file; None: the model file itself


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]  # -1 marks a dynamic dimension
    dtype: str  # numpy dtype name: float32, int8, uint8, int32, int64, bool, ...
    quant: Quantization | None = None
    data: np.ndarray | None = None  # constant value, shaped; None for activations
    storage: Storage | None = None

    @property
    def is_const(self) -> bool:
        return self.data is not None

    def describe(self) -> str:
        return f"tensor {self.index} '{self.name}' {self.dtype}{list(self.shape)}"


@dataclass
class Op:
    index: int
    type: str  # the format's op name: FULLY_CONNECTED, BATCH_MATMUL, MatMul, LayerNormalization...
    inputs: list[int]  # tensor indices; -1 for an omitted optional input
    outputs: list[int]
    options: dict = field(default_factory=dict)  # attributes that change arithmetic
    version: int = 1  # TFLite opcode version, ONNX opset of the op's domain

    def describe(self) -> str:
        return f"op {self.index} {self.type}(in={self.inputs}, out={self.outputs})"


@dataclass
class Graph:
    format: str  # "tflite" or "onnx"
    path: str
    tensors: list[Tensor]
    ops: list[Op]
    inputs: dict[str, int]  # signature input name -> tensor index
    outputs: dict[str, int]  # signature output name -> tensor index
    metadata: dict = field(default_factory=dict)

    @cached_property
    def producers(self) -> dict[int, Op]:
        return {t: op for op in self.ops for t in op.outputs}

    @cached_property
    def consumers(self) -> dict[int, list[Op]]:
        users: dict[int, list[Op]] = {}
        for op in self.ops:
            for t in op.inputs:
                if t >= 0:
                    users.setdefault(t, []).append(op)
        return users

    def producer(self, t: int) -> Op | None:
        return self.producers.get(t)

    def users(self, t: int) -> list[Op]:
        return self.consumers.get(t, [])

    def tensor(self, t: int) -> Tensor:
        return self.tensors[t]

    def const(self, t: int) -> np.ndarray | None:
        return self.tensors[t].data if t >= 0 else None

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for op in self.ops:
            hist[op.type] = hist.get(op.type, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


def topological_order(items: list, inputs_of: Callable, outputs_of: Callable) -> list:
    """Items (ops, nodes: anything with an `index`) in an order where every value is made before it
    is read, otherwise keeping the given order: depth first from each item in turn, iteratively."""
    made = {v: item for item in items for v in outputs_of(item)}
    done: set[int] = set()
    order = []
    for first in items:
        stack = [(first, False)]
        while stack:
            current, expanded = stack.pop()
            if current.index in done:
                continue
            if expanded:
                done.add(current.index)
                order.append(current)
                continue
            stack.append((current, True))
            for v in reversed(inputs_of(current)):
                if v in made and made[v].index not in done:
                    stack.append((made[v], False))
    return order


def dataflow_problem(reads: list[list[Hashable]], writes: list[list[Hashable]],
                     node: Callable[[int], str], value: Callable[[Hashable], str]) -> str | None:
    """What is wrong with the order of nodes that read and write values, or None.

    Both formats list their nodes in execution order (ONNX requires a topological order, LiteRT
    runs the operator list as it stands), so that order is checked rather than recomputed: every
    value has at most one writer, and every node comes after the writers of what it reads. When a
    node reads what it or a later node writes, the message names the cycle behind it if there is
    one (no order could run it), else the two nodes. `node(k)` and `value(v)` name them.
    """
    writer: dict[Hashable, int] = {}
    for k, outputs in enumerate(writes):
        for v in outputs:
            if v in writer:
                return f"{value(v)} is written by both {node(writer[v])} and {node(k)}"
            writer[v] = k
    for k, inputs in enumerate(reads):
        for v in inputs:
            j = writer.get(v)
            if j is None or j < k:
                continue
            loop = _cycle(reads, writer)
            if loop is None:
                return f"{node(k)} reads {value(v)} before {node(j)} writes it (not in execution order)"
            if len(loop) == 1:
                return f"{node(loop[0])} reads its own output: the graph has a cycle"
            shown = loop + loop[:1] if len(loop) <= CYCLE_SHOWN else loop[:CYCLE_SHOWN - 1] + ["..."] + loop[-1:] + loop[:1]
            return (f"the graph has a cycle of {len(loop)} nodes: "
                    + " -> ".join(i if i == "..." else node(i) for i in shown) + " (each feeds the next)")
    return None


def _cycle(reads: list[list[Hashable]], writer: dict[Hashable, int]) -> list[int] | None:
    """The nodes of one cycle in data-flow order, or None; iterative depth-first search over
    'reads from', so that a long chain cannot exhaust Python's stack."""
    NEW, ON_PATH, DONE = 0, 1, 2
    state = [NEW] * len(reads)
    for start in range(len(reads)):
        if state[start] != NEW:
            continue
        state[start] = ON_PATH
        path, pending = [start], [iter(reads[start])]
        while path:
            for v in pending[-1]:
                j = writer.get(v)
                if j is None or state[j] == DONE:
                    continue
                if state[j] == ON_PATH:
                    # path runs consumer -> producer; the cycle is its tail from j, reversed.
                    return path[path.index(j):][::-1]
                state[j] = ON_PATH
                path.append(j)
                pending.append(iter(reads[j]))
                break
            else:
                state[path.pop()] = DONE
                pending.pop()
    return None
