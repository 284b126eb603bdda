"""Single-op TFLite models, built directly as flatbuffers, to probe one LiteRT builtin kernel.

`single_op_model(op, inputs, outputs, options)` returns the model bytes: one subgraph, one
operator; each input is either a runtime input (shape only) or a constant (a numpy array stored
in a buffer). `run_builtin(model, feeds)` runs it with LiteRT's builtin kernels on one thread
(BUILTIN_WITHOUT_DEFAULT_DELEGATES), the reference porter reproduces.

    python graphs/probes/single_op.py   # a smoke run: FULLY_CONNECTED 3 x 8 on one row
"""

from __future__ import annotations

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as S

_TYPES = {np.dtype(np.float32): S.TensorType.FLOAT32, np.dtype(np.int32): S.TensorType.INT32,
          np.dtype(np.int64): S.TensorType.INT64}


class Const:
    def __init__(self, value):
        self.value = np.ascontiguousarray(value)


class Input:
    def __init__(self, shape, dtype=np.float32):
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)


def _tensor(name, shape, dtype, buffer):
    t = S.TensorT()
    t.name, t.shape, t.type, t.buffer = name, list(shape), _TYPES[np.dtype(dtype)], buffer
    return t


def single_op_model(op: int, inputs, output_shapes, options=None, options_type=S.BuiltinOptions.NONE,
                    version=1) -> bytes:
    """inputs: Input or Const (None leaves an optional input out); outputs are float32."""
    model = S.ModelT()
    model.version = 3
    empty = S.BufferT()
    model.buffers = [empty]
    sub = S.SubGraphT()
    sub.tensors, sub.inputs, op_inputs = [], [], []
    for i, spec in enumerate(inputs):
        if spec is None:
            op_inputs.append(-1)
            continue
        if isinstance(spec, Const):
            b = S.BufferT()
            b.data = list(spec.value.tobytes())
            model.buffers.append(b)
            sub.tensors.append(_tensor(f"c{i}", spec.value.shape, spec.value.dtype, len(model.buffers) - 1))
        else:
            sub.tensors.append(_tensor(f"in{i}", spec.shape, spec.dtype, 0))
            sub.inputs.append(len(sub.tensors) - 1)
        op_inputs.append(len(sub.tensors) - 1)
    sub.outputs = []
    for j, shape in enumerate(output_shapes):
        sub.tensors.append(_tensor(f"out{j}", shape, np.float32, 0))
        sub.outputs.append(len(sub.tensors) - 1)
    code = S.OperatorCodeT()
    code.builtinCode, code.deprecatedBuiltinCode, code.version = op, min(op, 127), version
    model.operatorCodes = [code]
    o = S.OperatorT()
    o.opcodeIndex, o.inputs, o.outputs = 0, op_inputs, list(sub.outputs)
    o.builtinOptionsType, o.builtinOptions = options_type, options
    sub.operators = [o]
    model.subgraphs = [sub]
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    return bytes(builder.Output())


def interpreter(model: bytes):
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    interp = Interpreter(model_content=model, num_threads=1,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    interp.allocate_tensors()
    return interp


def run_builtin(model_or_interp, feeds) -> list[np.ndarray]:
    interp = interpreter(model_or_interp) if isinstance(model_or_interp, bytes) else model_or_interp
    for detail, value in zip(interp.get_input_details(), feeds):
        interp.set_tensor(detail["index"], np.asarray(value, dtype=detail["dtype"]))
    interp.invoke()
    return [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]


def fully_connected_model(rows, out, k, bias: bool, const_weights=None, const_bias=None) -> bytes:
    opts = S.FullyConnectedOptionsT()
    opts.keepNumDims = False
    w = Const(const_weights) if const_weights is not None else Input((out, k))
    b = (Const(const_bias) if const_bias is not None else Input((out,))) if bias else None
    return single_op_model(S.BuiltinOperator.FULLY_CONNECTED, [Input((rows, k)), w, b], [(rows, out)],
                           opts, S.BuiltinOptions.FullyConnectedOptions)


if __name__ == "__main__":
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((1, 8), np.float32), rng.standard_normal((3, 8), np.float32), np.ones(3, np.float32)
    print(run_builtin(fully_connected_model(1, 3, 8, True), [x, w, b])[0], x @ w.T + b)
