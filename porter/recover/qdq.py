"""onnxruntime QDQ graphs -> a program of typed steps (porter.ir.integer), op by op.

porter.recover.canonical.ort_qdq decides what onnxruntime's CPU provider runs for a QDQ graph:
which node units its selectors fuse into quantised kernels and which ops stay float between a
DequantizeLinear and a QuantizeLinear. This module makes each of those ops one step, in order,
over typed buffers (uint8 / int8 activations, int32, float32, bool), as recover.integer does for
LiteRT's full-integer graphs (whose TypedRecovery it shares):

- an op of constants only is folded in onnxruntime's arithmetic (the weights' DequantizeLinear);
- Reshape / Squeeze / Unsqueeze / Flatten / Identity are aliases; Transpose, Expand, Slice, Tile
  and Gather / GatherND by constant indices are index maps (INDEX), decided by running the op on
  its input's positions; a Gather of a constant table by computed ids is a LOOKUP, a GatherND /
  GatherElements of a constant at computed indices a GATHER_ND / GATHER_ELEMENTS, a Concat a
  CONCAT;
- comparisons, Cast, Where, and int32 / int64 Add / Sub / Mul / Max / Min and CumSum (index
  arithmetic: RoBERTa's positions from the ids) are exact typed steps (porter.reference.typed);
- Pow by a constant 2 or 3 is onnxruntime's product (x * x, (x * x) * x); any other exponent it
  computes with std::pow (libm's powf), which porter does not reproduce: refused, named;
- QuantizeLinear / DequantizeLinear of an activation, QLinearMatMul and QGemm, QLinearAdd,
  QLinearMul and QLinearSoftmax are their kernels (porter.reference.ort.qdq), with the scales and zero points
  of their own inputs; any other quantised kernel onnxruntime would run is refused, named;
- every other op is a FLOAT step: one op of porter.reference.ops' vocabulary in onnxruntime's
  float kernels (its float MatMul of a B it does not prepack, LayerNormalization, Softmax, Erf,
  Tanh, the reductions, elementwise arithmetic), refused where it has none.

Every window is computed whole: a quantised softmax's masked keys do not vanish (a masked score
quantises to the bottom of its range, whose exp is not 0), so padding is not inert.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op
from porter.ir.encoder import EncoderProgram, Operand, Reference
from porter.ir.integer import ARITHMETICS, COMPARISONS as COMPARISON_KINDS, IntegerOp
from porter.recover.canonical import onnx as onnx_ops
from porter.recover.canonical.ort_ops import ALIASES, evaluate, float_op
from porter.recover.canonical.ort_qdq import DQ, MS, Q, QdqGraph, ort_runs
from porter.recover.canonical.window import bind, dynamic_dims
from porter.recover.integer import TypedRecovery, input_roles
from porter.reference.litert.floats import log_op
from porter.reference.ort import qdq as K
from porter.reference.ort.cpu import OrtCpu

VIEWS = {"Transpose", "Expand", "Slice", "Tile", "Gather", "GatherND"}
LOOKUPS = {"Gather": (0, 1)}  # op -> (table input, ids input)
QUANTISED = {"uint8", "int8"}
INTEGERS = {"int32", "int64"}
QLINEAR_BINARY = {MS + "QLinearAdd": "add", MS + "QLinearMul": "mul"}
COMPARISONS = {t: kind for t, kind in onnx_ops.BINARY.items() if kind in COMPARISON_KINDS}
ARITHMETIC = {t: kind for t, kind in onnx_ops.BINARY.items() if kind in ARITHMETICS}


def recover_qdq(g: Graph, ort_cpu: OrtCpu, window: int | None = None) -> EncoderProgram:
    if dynamic_dims(g):
        name, axis, dim = dynamic_dims(g)[0]
        raise PorterError(f"input '{name}' has the dynamic dimension '{dim}' (axis {axis}); porter compiles "
                          "onnxruntime QDQ graphs with fixed shapes")
    g = bind(g, window)
    if len(g.outputs) != 1:
        raise PorterError(f"porter compiles models with one output; this one has {sorted(g.outputs)}")
    q = ort_runs(g, ort_cpu.floats)
    r = _Recovery(q, ort_cpu)
    for op in q.graph.ops:
        r.op(op)
    return r.program(Reference.ONNXRUNTIME_CPU, ort_cpu=ort_cpu.name)


class _Recovery(TypedRecovery):
    DTYPES = {"uint8", "int8", "int32", "int64", "float32", "bool"}

    def __init__(self, q: QdqGraph, ort_cpu: OrtCpu):
        g = q.graph
        self.q, self.ort_cpu = q, ort_cpu
        consts = {t.index: t.data for t in g.tensors if t.data is not None}
        # a DequantizeLinear of 8-bit constants (weights, tables): what it reads, per output tensor
        self.dequantized: dict[int, Op] = {}
        for op in g.ops:  # fold everything computable from constants first: the tables then are constants
            ins = [t for t in op.inputs if t >= 0]
            if ins and all(t in consts for t in ins):
                consts[op.outputs[0]] = np.asarray(evaluate(op, self._values(op, consts), ort_cpu.floats,
                                                            g.tensor(op.outputs[0]).shape))
                if op.type == DQ and g.tensor(op.inputs[0]).dtype in QUANTISED:
                    self.dequantized[op.outputs[0]] = op
        super().__init__(g, consts, input_roles(g, consts, ALIASES | {"Cast"}, LOOKUPS))

    @staticmethod
    def _values(op: Op, consts: dict) -> list:
        return [consts.get(t) if t >= 0 else None for t in op.inputs]

    def quant(self, op: Op, t: int):
        return None  # a QDQ graph's scales are its ops' inputs, given to each step

    # ---- weights computed from 8-bit constants -------------------------------------------------
    # onnxruntime never folds a DequantizeLinear: it dequantises the weights of every float op
    # (and the embedding tables) when it runs. The program does the same, in the same arithmetic:
    # model.bin keeps the 8-bit values and their scales, a quarter of float32.

    def operand(self, t: int) -> Operand:
        if t in self.dequantized and t not in self.source:
            self.dequantize_constant(self.dequantized[t], t)
        return super().operand(t)

    def dequantize_constant(self, dq: Op, t: int, into: Operand | None = None) -> None:
        """An ORT_DEQUANTIZE step of the 8-bit constant `dq` reads (or of `into`, the same values
        gathered), writing tensor t's buffer: one scale and zero point, or one per index of its
        axis (stored as arrays)."""
        values = self._values(dq, self.consts)
        scale = np.asarray(values[1], np.float32).reshape(-1)
        zp = np.asarray(values[2] if len(values) > 2 and values[2] is not None else 0, np.int32).reshape(-1)
        source = dq.inputs[0] if into is None else into
        name = f"dq{t}"
        if scale.size == 1:
            self.emit(dq, IntegerOp.ORT_DEQUANTIZE, [source], quants=[(float(scale[0]), int(zp[0]))], out_quant=None,
                      name=name, source_ops=list(self.q.origin[dq.index]), writes=t)
        else:  # the scales' axis, counted from the end: the same in the gathered rows
            rank, out_rank = len(self.g.tensor(dq.inputs[0]).shape), len(self.g.tensor(t).shape)
            axis = int(dq.options.get("axis", 1)) % rank + out_rank - rank
            self.emit(dq, IntegerOp.ORT_DEQUANTIZE, [source],
                      {"scale": scale, "zero_point": np.broadcast_to(zp, scale.shape).astype(np.int32)},
                      quants=[None], out_quant=None, axes=(axis,), name=name, source_ops=list(self.q.origin[dq.index]),
                      writes=t)

    def lookup(self, op: Op, table_input: int, ids_input: int, wraps: bool = False) -> None:
        """A table computed from 8-bit constants is looked up in its stored values and the rows
        dequantised (the same values: DequantizeLinear is elementwise), unless its scales run along
        the rows, which the looked-up rows would need gathered too."""
        table, out = op.inputs[table_input], op.outputs[0]
        dq = self.dequantized.get(table)
        per_row = dq is not None and np.size(self.consts[dq.inputs[1]]) > 1 and int(dq.options.get("axis", 1)) % 2 == 0
        if dq is None or per_row or len(self.g.tensor(table).shape) != 2:  # (a rank-2 table's axis 0: its rows)
            super().lookup(op, table_input, ids_input, wraps)
            return
        stored = self.consts[dq.inputs[0]]
        rows = f"t{out}.stored"
        self.emit(op, IntegerOp.LOOKUP, [op.inputs[ids_input]], {"table": stored}, table_shape=stored.shape,
                  attrs={"wraps": wraps}, out_buffer=rows, dtype=str(stored.dtype), out_quant=None)
        self.dequantize_constant(dq, out, Operand(rows, None, tuple(self.g.tensor(out).shape)))

    def run_view(self, op: Op, ins: list) -> np.ndarray:
        return evaluate(op, ins, self.ort_cpu.floats, self.g.tensor(op.outputs[0]).shape)

    def scalar(self, op: Op, t: int, what: str) -> float | int:
        value = self.consts.get(t) if t >= 0 else None
        if value is None or np.size(value) != 1:
            raise PorterError(f"{self.name(op)}: {what} is not a constant scalar; porter's kernels take one scale "
                              "and zero point per activation")
        return np.ravel(value)[0]

    def quant_of(self, op: Op, scale: int, zero_point: int) -> tuple[float, int]:
        s = float(np.float32(self.scalar(op, scale, "the scale")))
        if not np.isfinite(s) or s <= 0:
            raise PorterError(f"{self.name(op)}: scale {s}, which porter's kernels cannot represent")
        return s, int(self.scalar(op, zero_point, "the zero point")) if zero_point >= 0 else 0

    def name(self, op: Op) -> str:
        return f"{self.q.describe(op)} (onnxruntime runs it as {op.type.removeprefix(MS)})"

    # ---- ops -----------------------------------------------------------------------------------

    def op(self, op: Op) -> None:
        ins = [t for t in op.inputs if t >= 0]
        if ins and all(t in self.consts for t in ins):
            return  # folded
        t = op.type
        source_ops = list(self.q.origin[op.index])
        if t in ALIASES:
            self.source[op.outputs[0]] = self.source[op.inputs[0]]
        elif t in LOOKUPS and op.inputs[0] in self.consts and op.inputs[1] not in self.consts:
            self.lookup(op, *LOOKUPS[t], wraps=True)
        elif t in VIEWS and all(x in self.consts for x in ins[1:]):
            self.view(op)
        elif t in ("GatherND", "GatherElements") and op.inputs[0] in self.consts:
            self.computed_gather(op, source_ops)
        elif t == DQ:
            if np.size(self.consts.get(op.inputs[1], 0)) != 1:
                raise PorterError(f"{self.name(op)}: an activation dequantised per axis; porter's kernels take one "
                                  "scale per activation")
            self.emit(op, IntegerOp.ORT_DEQUANTIZE, op.inputs[:1], quants=[self.quant_of(op, *op.inputs[1:3])],
                      out_quant=None, source_ops=source_ops)
        elif t == Q:
            self.emit(op, IntegerOp.ORT_QUANTIZE, op.inputs[:1], quants=[None],
                      out_quant=self.quant_of(op, *op.inputs[1:3]), source_ops=source_ops)
        elif t in ("QLinearMatMul", MS + "QGemm"):
            self.qgemm(op, source_ops)
        elif t in QLINEAR_BINARY:
            a, sa, za, b, sb, zb, sc, zc = op.inputs
            self.emit(op, IntegerOp.ORT_QLINEAR_BINARY, [a, b], quants=[self.quant_of(op, sa, za), self.quant_of(op, sb, zb)],
                      out_quant=self.quant_of(op, sc, zc), kind=QLINEAR_BINARY[t], source_ops=source_ops)
        elif t == MS + "QLinearSoftmax":
            self.qlinear_softmax(op, source_ops)
        elif t.startswith(MS) or t.startswith("QLinear"):
            raise PorterError(f"onnxruntime QDQ: {self.name(op)}: porter has no kernel for "
                              f"{t.removeprefix(MS)} (onnxruntime fuses this node unit into it)")
        elif t == "Cast":
            self.emit(op, IntegerOp.CAST, op.inputs[:1], source_ops=source_ops)
        elif t == "Where":
            self.emit(op, IntegerOp.SELECT, op.inputs[:3], source_ops=source_ops)
        elif t in COMPARISONS:
            self.compare(op, COMPARISONS[t], source_ops)
        elif t in ARITHMETIC and self.dtype(op.inputs[0]) in INTEGERS:
            self.integer_arithmetic(op, ARITHMETIC[t], source_ops)
        elif t == "CumSum":
            o = op.options
            self.cumsum(op, op.inputs[1], bool(o.get("exclusive", 0)), bool(o.get("reverse", 0)), source_ops)
        elif t == "Concat":
            self.concat(op, int(op.options.get("axis", 0)), source_ops)
        else:
            self.float_step(op, source_ops)

    def computed_gather(self, op: Op, source_ops: list[int]) -> None:
        """A GatherND / GatherElements of a constant at computed indices (a negative index counts
        from the end, as onnxruntime takes it)."""
        if op.type == "GatherND":
            if int(op.options.get("batch_dims", 0)):
                raise PorterError(f"{self.name(op)}: GatherND with batch_dims {op.options['batch_dims']} is not "
                                  "supported")
            self.gather(op, IntegerOp.GATHER_ND, op.inputs[0], op.inputs[1], True, source_ops)
        else:
            rank = len(self.g.tensor(op.inputs[0]).shape)
            self.gather(op, IntegerOp.GATHER_ELEMENTS, op.inputs[0], op.inputs[1], True, source_ops,
                        axis=int(op.options.get("axis", 0)) % rank)

    def float_step(self, op: Op, source_ops: list[int]) -> None:
        values = self._values(op, self.consts)
        kind, attrs, used = float_op(op, values, self.ort_cpu.floats,
                                     [self.g.tensor(t).shape if t >= 0 else None for t in op.inputs])
        inputs = [op.inputs[i] for i in used if i < len(op.inputs) and op.inputs[i] >= 0]
        for t in inputs:
            if t not in self.consts and self.dtype(t) in QUANTISED | INTEGERS:
                raise PorterError(f"{self.name(op)}: reads {self.g.tensor(t).dtype} values; porter runs "
                                  f"{op.type} as onnxruntime's float kernel, on float32 (or bool) values only")
        self.emit(op, IntegerOp.FLOAT, inputs, kind=kind, attrs=attrs, source_ops=source_ops)

    def qgemm(self, op: Op, source_ops: list[int]) -> None:
        gemm = op.type != "QLinearMatMul"
        if gemm:
            a, sa, za, b, sb, zb, c, *rest = op.inputs + [-1] * (9 - len(op.inputs))
            sy, zy = rest[:2]
            o = op.options
            if o.get("transA", 0) or float(o.get("alpha", 1.0)) != 1.0:
                raise PorterError(f"{self.name(op)}: QGemm with transA or alpha other than 1 is not supported")
        else:
            a, sa, za, b, sb, zb, sy, zy = op.inputs
            c = -1
        a_quant = self.quant_of(op, sa, za)
        n = self.g.tensor(op.outputs[0]).shape[-1]
        b_scales = np.broadcast_to(np.asarray(self.consts.get(sb), np.float32).reshape(-1), (n,))
        b_zps = np.broadcast_to(np.asarray(self.consts.get(zb, 0), np.int32).reshape(-1), (n,))
        out_quant = self.quant_of(op, sy, zy) if sy >= 0 else None
        arrays = {"b_zero_point": np.ascontiguousarray(b_zps),
                  "scale": K.output_scales(a_quant[0], b_scales, None if out_quant is None else out_quant[0])}
        operands = [a]
        if b in self.consts:
            weight = np.asarray(self.consts[b])
            if weight.ndim != 2:
                raise PorterError(f"{self.name(op)}: a constant B of rank {weight.ndim}")
            # stored [n, k], each output column's k values together (the GEMM's weight rows)
            arrays["b"] = np.ascontiguousarray(weight if gemm and op.options.get("transB", 0) else weight.T)
        else:
            if gemm or b_scales.size != 1 and len(set(b_scales)) > 1:
                raise PorterError(f"{self.name(op)}: a computed B with one scale per column")
            operands.append(b)
        if c >= 0:
            arrays["bias"] = np.ascontiguousarray(np.broadcast_to(np.asarray(self.consts[c], np.int32).reshape(-1), (n,)))
        b_signed = self.g.tensor(b).dtype == "int8"
        saturating = self.dtype(a) == "uint8" and b_signed
        self.emit(op, IntegerOp.ORT_QGEMM, operands, arrays, quants=[a_quant] + [None] * (len(operands) - 1),
                  out_quant=out_quant, has_bias=c >= 0, source_ops=source_ops,
                  integer_dot=self.ort_cpu.integer_dot if saturating else "exact")

    def qlinear_softmax(self, op: Op, source_ops: list[int]) -> None:
        x, sx, zx, sy, zy = op.inputs
        shape = self.g.tensor(x).shape
        if self.dtype(x) != "uint8" or int(op.options.get("axis", -1)) % len(shape) != len(shape) - 1 \
                or int(op.options.get("opset", 13)) < 13:
            raise PorterError(f"{self.name(op)}: porter's QLinearSoftmax takes uint8 rows of the last axis (opset 13)")
        x_quant = self.quant_of(op, sx, zx)
        table = K.softmax_table(x_quant[0], shape[-1], log_op)
        self.emit(op, IntegerOp.ORT_QLINEAR_SOFTMAX, [x], {"table": table}, quants=[x_quant],
                  out_quant=self.quant_of(op, sy, zy), source_ops=source_ops)
