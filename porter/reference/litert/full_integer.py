"""A full-integer TFLite graph run op by op with LiteRT's integer kernels (int8.py).

This is the reference the kernels are measured with: every op of the file in the file's order,
on the file's own tensors and quantisation parameters, so that each op's output can be compared
with LiteRT's (tests/test_int8_full.py preserves every intermediate tensor of LiteRT's run).
An op type or tensor type it has no kernel for is refused naming the op.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op
from porter.reference import exact, typed
from porter.reference.litert import int8 as K


def _q(g: Graph, t: int) -> tuple[float, int]:
    """A per-tensor quantised tensor's (scale, zero point)."""
    q = g.tensor(t).quant
    if q is None or q.scale.size != 1:
        raise PorterError(f"tensor {t} {g.tensor(t).name!r}: a per-tensor quantised int8 activation was expected")
    return float(q.scale.ravel()[0]), int(q.zero_point.ravel()[0])


def _fully_connected(g, op, ins):
    x, w, bias = ins[0], ins[1], ins[2] if len(ins) > 2 else None
    wq = g.tensor(op.inputs[1]).quant
    xs, xz = _q(g, op.inputs[0])
    out_scale, out_zp = _q(g, op.outputs[0])
    mults = K.fully_connected_multipliers(xs, wq.scale, out_scale)
    if len(mults) == 1:  # per-tensor weights: one multiplier for every output channel
        mults = mults * w.shape[0]
    return K.fully_connected(x.reshape(-1, w.shape[1]), xz, w, bias, mults, out_zp)


def _batch_matmul(g, op, ins):
    a, b = ins
    if op.options.get("adj_x"):
        a = np.swapaxes(a, -1, -2)
    if op.options.get("adj_y"):
        b = np.swapaxes(b, -1, -2)
    (as_, az), (bs, bz), (os_, oz) = _q(g, op.inputs[0]), _q(g, op.inputs[1]), _q(g, op.outputs[0])
    return K.batch_matmul(a, az, b, bz, K.batch_matmul_multiplier(as_, bs, os_), oz)


def _binary(kernel):
    def run(g, op, ins):
        return kernel(ins[0], _q(g, op.inputs[0]), ins[1], _q(g, op.inputs[1]), _q(g, op.outputs[0]))
    return run


def _or_integer(kernel, kind: str):
    """A quantised int8 kernel; on int32 / int64 operands (index arithmetic) the plain integer one."""
    def run(g, op, ins):
        if np.asarray(ins[0]).dtype in (np.int32, np.int64):
            return exact.arithmetic(kind, ins[0], ins[1], np.asarray(ins[0]).dtype)
        return kernel(g, op, ins)
    return run


def _cumsum(g, op, ins):
    x = np.asarray(ins[0])
    return exact.cumsum(x, int(np.ravel(ins[1])[0]) % x.ndim, bool(op.options.get("exclusive")),
                        bool(op.options.get("reverse")))


def _mean(g, op, ins):
    x, axes = ins
    axes = tuple(sorted({int(a) % x.ndim for a in np.ravel(axes)}))
    return K.mean(x, _q(g, op.inputs[0]), axes, _q(g, op.outputs[0]), bool(op.options.get("keep_dims")))


def _sum(g, op, ins):
    x, axes = ins
    axes = tuple(sorted({int(a) % x.ndim for a in np.ravel(axes)}))
    return K.reduce_sum(x, _q(g, op.inputs[0]), axes, _q(g, op.outputs[0]), bool(op.options.get("keep_dims")))


def _gelu(g, op, ins):
    fn = K.gelu_tanh if op.options.get("approximate") else K.gelu_exact
    return K.apply_table(ins[0], K.lookup_table(_q(g, op.inputs[0]), _q(g, op.outputs[0]), fn))


def _quantize(g, op, ins):
    if ins[0].dtype == np.float32:
        return K.quantize(ins[0], _q(g, op.outputs[0]))
    return K.requantize(ins[0], _q(g, op.inputs[0]), _q(g, op.outputs[0]))


def _select(g, op, ins):
    return np.where(ins[0], ins[1], ins[2])


def _float_only(op, ins, fn):
    if ins[0].dtype != np.float32:
        raise PorterError(f"op {op.index} {op.type}: its {ins[0].dtype} kernel is not in porter's full-integer reference")
    return fn(ins[0])


def _gather(g, op, ins):
    if op.options.get("batch_dims", 0):
        raise PorterError(f"op {op.index} GATHER: batch_dims {op.options['batch_dims']} is not in porter's "
                          "full-integer reference")
    return _rows(ins[0], ins[1], int(op.options.get("axis", 0)))


def _rows(table: np.ndarray, ids, axis: int = 0) -> np.ndarray:
    """Rows of a table by index, each index checked against it (LiteRT refuses one outside)."""
    return np.take(table, exact.indices(ids, table.shape[axis], False), axis=axis)


def _strided_slice(g, op, ins):
    x, begin, end, strides = ins[0], *(np.asarray(a, np.int64).ravel() for a in ins[1:4])
    o = op.options
    if o.get("ellipsis_mask") or o.get("new_axis_mask") or o.get("offset"):
        raise PorterError(f"op {op.index} STRIDED_SLICE: ellipsis, new-axis and offset slices are not in "
                          "porter's full-integer reference")
    index = []
    for axis in range(x.ndim):
        start = None if o.get("begin_mask", 0) >> axis & 1 else int(begin[axis])
        stop = None if o.get("end_mask", 0) >> axis & 1 else int(end[axis])
        if o.get("shrink_axis_mask", 0) >> axis & 1:
            index.append(int(begin[axis]))
        else:
            index.append(slice(start, stop, int(strides[axis])))
    return x[tuple(index)]


def _slice(g, op, ins):
    x, begin, size = ins[0], *(np.asarray(a, np.int64).ravel() for a in ins[1:3])
    return x[tuple(slice(int(b), None if n < 0 else int(b + n)) for b, n in zip(begin, size))]


def _gather_nd(g, op, ins):
    return typed.gather_nd(ins[0], ins[1], wraps=False)


KERNELS = {
    "FULLY_CONNECTED": _fully_connected,
    "BATCH_MATMUL": _batch_matmul,
    "ADD": _or_integer(_binary(K.add), "add"),
    "SUB": _or_integer(_binary(K.sub), "sub"),
    "MUL": _or_integer(_binary(K.mul), "mul"),
    "SQUARED_DIFFERENCE": _binary(K.squared_difference),
    "MEAN": _mean,
    "SUM": _sum,
    "DIV": _binary(K.divide),
    "MAXIMUM": _or_integer(lambda g, op, ins: K.maximum(ins[0], ins[1]), "maximum"),
    "MINIMUM": lambda g, op, ins: exact.arithmetic("minimum", ins[0], ins[1], np.asarray(ins[0]).dtype),
    "SQRT": lambda g, op, ins: K.apply_table(ins[0], K.sqrt_table(_q(g, op.inputs[0]), _q(g, op.outputs[0]))),
    "ABS": lambda g, op, ins: _float_only(op, ins, np.abs),
    "RSQRT": lambda g, op, ins: K.apply_table(ins[0], K.rsqrt_table(_q(g, op.inputs[0]), _q(g, op.outputs[0]))),
    "GELU": _gelu,
    "LOGISTIC": lambda g, op, ins: K.apply_table(ins[0], K.lookup_table(_q(g, op.inputs[0]), _q(g, op.outputs[0]),
                                                                         K.logistic)),
    "TANH": lambda g, op, ins: K.apply_table(ins[0], K.lookup_table(
        _q(g, op.inputs[0]), _q(g, op.outputs[0]), K.libm("tanhf"))),
    "SOFTMAX": lambda g, op, ins: K.softmax(ins[0], _q(g, op.inputs[0])[0], float(op.options.get("beta", 1.0)),
                                            _q(g, op.outputs[0])),
    "QUANTIZE": _quantize,
    "DEQUANTIZE": lambda g, op, ins: K.dequantize(ins[0], _q(g, op.inputs[0])),
    "EMBEDDING_LOOKUP": lambda g, op, ins: _rows(ins[1], ins[0]),
    "RESHAPE": lambda g, op, ins: ins[0].reshape(g.tensor(op.outputs[0]).shape),
    "TRANSPOSE": lambda g, op, ins: np.transpose(ins[0], np.asarray(ins[1], np.int64)),
    "CAST": lambda g, op, ins: typed.cast(ins[0], g.tensor(op.outputs[0]).dtype),
    "GATHER_ND": _gather_nd,
    "GATHER": _gather,
    "STRIDED_SLICE": _strided_slice,
    "SLICE": _slice,
    "LOGICAL_AND": lambda g, op, ins: np.logical_and(ins[0], ins[1]),
    "SELECT_V2": _select,
    "SELECT": _select,
    "CUMSUM": _cumsum,
    "CONCATENATION": lambda g, op, ins: np.concatenate(ins, axis=int(op.options.get("axis", 0))),
    **{kind.upper(): (lambda kind: lambda g, op, ins: exact.compare(kind, ins[0], ins[1]))(kind)
       for kind in exact.COMPARE},
}


def run_op(g: Graph, op: Op, ins: list) -> np.ndarray:
    kernel = KERNELS.get(op.type)
    if kernel is None:
        raise PorterError(f"op {op.index} {op.type}: no integer kernel for it in porter's full-integer reference")
    try:
        out = np.asarray(kernel(g, op, ins))
    except ValueError as e:  # a value the kernel refuses, as LiteRT does (an int8 DIV by zero)
        raise PorterError(f"op {op.index} {op.type}: {e}") from None
    return out.reshape(g.tensor(op.outputs[0]).shape).astype(g.tensor(op.outputs[0]).dtype, copy=False)


def run(g: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every op of the graph in order on `feeds` (signature input name -> array); returns the
    signature outputs as LiteRT returns them (an int8 output stays int8)."""
    values: dict[int, np.ndarray] = {t.index: t.data for t in g.tensors if t.data is not None}
    for name, t in g.inputs.items():
        values[t] = np.asarray(feeds[name]).reshape(g.tensor(t).shape)
    for op in g.ops:
        ins = [values[t] if t >= 0 else None for t in op.inputs]
        values[op.outputs[0]] = run_op(g, op, ins)
    return {name: values[t] for name, t in g.outputs.items()}
