"""The format-neutral graph every frontend produces and every later stage reads.

A Graph is a flat list of tensors and a topologically ordered list of ops, with producer and
consumer maps. Frontends (TFLite, ONNX) fill it; they keep their own op vocabulary (op types
are the format's names, e.g. "FULLY_CONNECTED" or "MatMul"), so patterns say which spelling
they recognise. Constant data is decoded once, checked against the file by the frontend.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np


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
