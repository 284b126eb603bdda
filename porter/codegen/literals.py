"""Rust literals the generated model.rs is written with: exact f32 bit patterns, and the
four-axis shapes and broadcast strides of the op-by-op steps (encoders' and full-integer ones)."""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError


def f32_literal(value: float) -> str:
    """An exact Rust f32 expression: the float32 bit pattern, so nothing rounds twice."""
    bits = int(np.float32(value).view(np.uint32))
    return f"f32::from_bits({bits:#010x})"


def pad4(shape) -> list[int]:
    shape = list(shape)
    if len(shape) > 4:
        squeezed = [d for d in shape if d != 1]
        if len(squeezed) > 4:
            raise PorterError(f"an elementwise step over a rank-{len(shape)} tensor {shape}")
        shape = squeezed
    return [1] * (4 - len(shape)) + shape


def strides_for(operand_shape, out_shape) -> list[int]:
    """An operand's strides along the output's four axes (0 where it is broadcast). Past four
    axes pad4 keeps the output's axes longer than one; the operand keeps the same axes (its own
    are one wherever the output's are), so both stay aligned."""
    operand = [1] * (len(out_shape) - len(operand_shape)) + list(operand_shape)
    if len(out_shape) > 4:
        operand = [d for d, o in zip(operand, out_shape) if o != 1]
    op4, out4 = pad4(operand), pad4(out_shape)
    natural = [int(np.prod(op4[a + 1:])) for a in range(4)]
    return [0 if op4[a] == 1 and out4[a] != 1 else natural[a] for a in range(4)]
