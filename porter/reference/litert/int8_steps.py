"""The numpy meaning of porter.ir.integer's steps: each op one of LiteRT's integer kernels
(porter.reference.litert.int8), on the step's operands and with its quantisation parameters.

The crate's kernels (templates/rust_forward/src/kernels/litert/int8/) compute the same values;
`porter verify` holds both to LiteRT's golden. The steps both runtimes compute alike (data
movement, casts, index arithmetic) are porter.reference.typed's.
"""

from __future__ import annotations

import numpy as np

from porter.ir.integer import IntegerOp, IntegerStep
from porter.reference import typed
from porter.reference.litert import int8 as K


def run(step: IntegerStep, weights: dict, ins: list[np.ndarray]) -> np.ndarray:
    """The step's output for its operands' values (each already seen with its operand's shape)."""
    if step.op in typed.KERNELS:
        return typed.run(step, weights, ins)
    ins = [np.asarray(x).astype(typed.NUMPY_DTYPES[d], copy=False) for x, d in zip(ins, step.in_dtypes)]
    out = np.asarray(_KERNELS[step.op](step, weights, ins))
    return out.reshape(step.shape).astype(typed.NUMPY_DTYPES[step.dtype], copy=False)


def _fully_connected(step, w, ins):
    weight = w[f"{step.name}.weight"]
    bias = w[f"{step.name}.bias"] if step.has_bias else None
    mults = [(int(m), int(shift)) for m, shift in w[f"{step.name}.multiplier"]]
    return K.fully_connected(ins[0].reshape(-1, weight.shape[1]), step.quants[0][1], weight, bias, mults,
                             step.out_quant[1])


def _batch_matmul(step, w, ins):
    (as_, az), (bs, bz), (os_, oz) = step.quants[0], step.quants[1], step.out_quant
    a, b = (np.swapaxes(x, -1, -2) if adjoint else x for x, adjoint in zip(ins, step.adjoint))
    return K.batch_matmul(a, az, b, bz, K.batch_matmul_multiplier(as_, bs, os_), oz)


def _binary(kernel):
    return lambda step, w, ins: kernel(ins[0], step.quants[0], ins[1], step.quants[1], step.out_quant)


def _reduce(kernel):
    return lambda step, w, ins: kernel(ins[0], step.quants[0], step.axes, step.out_quant,
                                       step.attrs.get("keep_dims", True))


_KERNELS = {
    IntegerOp.FULLY_CONNECTED: _fully_connected,
    IntegerOp.BATCH_MATMUL: _batch_matmul,
    IntegerOp.ADD: _binary(K.add),
    IntegerOp.SUB: _binary(K.sub),
    IntegerOp.MUL: _binary(K.mul),
    IntegerOp.SQUARED_DIFFERENCE: _binary(K.squared_difference),
    IntegerOp.DIV: _binary(K.divide),
    IntegerOp.MAXIMUM: lambda step, w, ins: K.maximum(*np.broadcast_arrays(ins[0], ins[1])),
    IntegerOp.MEAN: _reduce(K.mean),
    IntegerOp.SUM: _reduce(K.reduce_sum),
    IntegerOp.TABLE: lambda step, w, ins: K.apply_table(ins[0], w[f"{step.name}.table"]),
    IntegerOp.SOFTMAX: lambda step, w, ins: K.softmax_from_table(ins[0], w[f"{step.name}.table"], step.out_quant),
    IntegerOp.QUANTIZE: lambda step, w, ins: K.quantize(ins[0], step.out_quant),
    IntegerOp.REQUANTIZE: lambda step, w, ins: K.requantize(ins[0], step.quants[0], step.out_quant),
    IntegerOp.DEQUANTIZE: lambda step, w, ins: K.dequantize(ins[0], step.quants[0]),
    IntegerOp.OUTPUT: lambda step, w, ins: K.dequantize_output(ins[0], step.quants[0]),
    IntegerOp.ABS: lambda step, w, ins: np.abs(ins[0]),
}

