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
- QuantizeLinear / DequantizeLinear of an activation, QLinearMatMul and QGemm, QLinearAdd and
  QLinearSoftmax are their kernels (porter.reference.ort.qdq), with the scales and zero points
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
from porter.ir.encoder import EncoderProgram, Reference
from porter.ir.integer import ARITHMETICS, COMPARISONS as COMPARISON_KINDS, IntegerOp
from porter.recover.canonical import onnx as onnx_ops
from porter.recover.canonical.ort_qdq import DQ, MS, Q, QdqGraph, ort_runs
from porter.recover.canonical.window import bind, dynamic_dims
from porter.recover.integer import TypedRecovery, input_roles
from porter.reference import ops
from porter.reference.litert.floats import log_op
from porter.reference.ort import qdq as K
from porter.reference.ort.cpu import OrtCpu

ALIASES = {"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
VIEWS = {"Transpose", "Expand", "Slice", "Tile", "Gather", "GatherND"}
LOOKUPS = {"Gather": (0, 1)}  # op -> (table input, ids input)
REDUCTIONS = {"ReduceSum": "reduce_sum", "ReduceMean": "reduce_mean", "ReduceMax": "reduce_max",
              "ReduceL2": "reduce_l2"}
ONNX_TYPES = {1: "float32", 2: "uint8", 3: "int8", 6: "int32", 7: "int64", 9: "bool"}
QUANTISED = {"uint8", "int8"}
INTEGERS = {"int32", "int64"}
COMPARISONS = {t: kind for t, kind in onnx_ops.BINARY.items() if kind in COMPARISON_KINDS}
ARITHMETIC = {t: kind for t, kind in onnx_ops.BINARY.items() if kind in ARITHMETICS}
# onnxruntime's Pow multiplies for these exponents (element_wise_ops.cc: `Y == 2`, `Y == 3` when
# the exponent is one value) and calls std::pow for every other
POW_BY_PRODUCTS = (2.0, 3.0)


def recover_qdq(g: Graph, ort_cpu: OrtCpu, window: int | None = None) -> EncoderProgram:
    if dynamic_dims(g):
        name, axis, dim = dynamic_dims(g)[0]
        raise PorterError(f"input '{name}' has the dynamic dimension '{dim}' (axis {axis}); porter compiles "
                          "onnxruntime QDQ graphs with fixed shapes")
    g = bind(g, window)
    if len(g.outputs) != 1:
        raise PorterError(f"porter compiles models with one output; this one has {sorted(g.outputs)}")
    q = ort_runs(g)
    r = _Recovery(q, ort_cpu)
    for op in q.graph.ops:
        r.op(op)
    return r.program(Reference.ONNXRUNTIME_CPU, ort_cpu=ort_cpu.name)


def evaluate(op: Op, values: list, floats: str, out_shape: tuple) -> np.ndarray:
    """One op of the graph onnxruntime runs, on numpy values, in its arithmetic (the folding of
    constants, and the index maps of views run on positions)."""
    if op.type in ALIASES:
        return np.reshape(values[0], out_shape)
    if op.type == DQ:
        zp = values[2] if len(values) > 2 and values[2] is not None else np.zeros(1, np.int32)
        return K.dequantize_linear(values[0], values[1], zp, _axis(op, np.ndim(values[0])))
    if op.type == Q:
        zp = np.asarray(values[2]) if len(values) > 2 and values[2] is not None else np.zeros((), np.uint8)
        if np.size(values[1]) != 1:
            raise PorterError(f"op {op.index} QuantizeLinear: per-axis quantisation of a constant is not supported")
        return K.quantize_linear(values[0], float(np.ravel(values[1])[0]), int(np.ravel(zp)[0]), str(zp.dtype))
    kind, attrs, used = float_op(op, values, floats)
    try:
        return ops.evaluate(kind, attrs, [values[i] for i in used], Reference.ONNXRUNTIME_CPU)
    except ops.Unsupported as e:
        raise PorterError(f"op {op.index} {op.type}: {e}") from None


def _axis(op: Op, rank: int) -> int:
    return int(op.options.get("axis", 1)) % max(rank, 1)


def float_op(op: Op, values: list, floats: str | None = None) -> tuple[str, dict, list[int]]:
    """An ONNX op as one op of porter.reference.ops: (kind, attributes, the inputs it reads).
    `values`: the constant inputs (None for an activation)."""
    t, o = op.type, op.options
    if t in onnx_ops.BINARY:
        return onnx_ops.BINARY[t], {}, [0, 1]
    if t in onnx_ops.UNARY:
        return onnx_ops.UNARY[t], {}, [0]
    if t in REDUCTIONS:
        axes = o.get("axes")
        if len(op.inputs) > 1 and op.inputs[1] >= 0:
            if values[1] is None:
                raise PorterError(f"op {op.index} {t}: the reduction axes are not a constant")
            axes = [int(a) for a in np.ravel(values[1])]
        return REDUCTIONS[t], {"axes": axes, "keepdims": bool(o.get("keepdims", 1))}, [0]
    if t == "Softmax":
        return "softmax", {"axis": int(o.get("axis", -1)), "ort_floats": floats}, [0]
    if t == "LayerNormalization":
        if int(o.get("axis", -1)) != -1 or len(op.inputs) < 3 or op.inputs[2] < 0:
            raise PorterError(f"op {op.index} LayerNormalization: porter runs it over the last axis with a bias")
        return "layer_norm", {"epsilon": float(np.float32(o.get("epsilon", 1e-5)))}, [0, 1, 2]
    if t == "MatMul":
        return "ort_matmul", {}, [0, 1]
    if t == "Pow":
        return "pow", {"exponent": _pow_exponent(op, values)}, [0, 1]
    if t == "Clip":
        given = [i < len(op.inputs) and op.inputs[i] >= 0 for i in (1, 2)]
        return "clip", {"lower": given[0], "upper": given[1]}, [0] + [i for i, g in zip((1, 2), given) if g]
    if t == "Where":
        return "where", {}, [0, 1, 2]
    if t == "Cast":
        return "cast", {"to": ONNX_TYPES.get(int(o.get("to", 0)), "?")}, [0]
    if t == "Transpose":
        return "permute", {"perm": tuple(int(p) for p in o["perm"])}, [0]
    if t == "Expand":
        return "expand", {"shape": tuple(int(v) for v in np.ravel(values[1]))}, [0]
    if t == "Gather":
        return "gather", {"axis": int(o.get("axis", 0))}, [0, 1]
    if t == "GatherND":
        return "gather_nd", {}, [0, 1]
    if t == "Tile":
        return "tile", {"repeats": tuple(int(v) for v in np.ravel(values[1]))}, [0]
    if t == "Slice":
        rank = np.ndim(values[0]) if values[0] is not None else None
        starts, ends = (np.ravel(values[i]).astype(np.int64) for i in (1, 2))
        axes = np.ravel(values[3]) if len(values) > 3 and values[3] is not None else np.arange(len(starts))
        steps = np.ravel(values[4]) if len(values) > 4 and values[4] is not None else np.ones(len(starts), np.int64)
        big = 1 << 62
        return "slice", {"slices": tuple((int(a) % rank, int(s), None if abs(int(e)) >= big else int(e), int(st))
                                         for a, s, e, st in zip(axes, starts, ends, steps))}, [0]
    raise PorterError(f"op {op.index} {t}: onnxruntime runs it in float in this QDQ graph, and porter has no "
                      "kernel for it")


def _pow_exponent(op: Op, values: list) -> float:
    """The exponent of a Pow onnxruntime computes by products; anything else is refused by name."""
    exponent = values[1] if len(values) > 1 else None
    if exponent is None or np.size(exponent) != 1 or float(np.ravel(exponent)[0]) not in POW_BY_PRODUCTS:
        form = ("a computed exponent" if exponent is None else f"an exponent tensor of shape {list(np.shape(exponent))}"
                if np.size(exponent) != 1 else f"exponent {np.ravel(exponent)[0]}")
        raise PorterError(f"op {op.index} Pow: {form}: onnxruntime computes it with std::pow (libm's powf), which "
                          "porter does not reproduce; it reproduces Pow by a constant 2 or 3, which onnxruntime "
                          "computes as x * x and (x * x) * x")
    return float(np.ravel(exponent)[0])


class _Recovery(TypedRecovery):
    DTYPES = {"uint8", "int8", "int32", "int64", "float32", "bool"}

    def __init__(self, q: QdqGraph, ort_cpu: OrtCpu):
        g = q.graph
        self.q, self.ort_cpu = q, ort_cpu
        consts = {t.index: t.data for t in g.tensors if t.data is not None}
        for op in g.ops:  # fold everything computable from constants first: the tables then are constants
            ins = [t for t in op.inputs if t >= 0]
            if ins and all(t in consts for t in ins):
                consts[op.outputs[0]] = np.asarray(evaluate(op, self._values(op, consts), ort_cpu.floats,
                                                            g.tensor(op.outputs[0]).shape))
        super().__init__(g, consts, input_roles(g, consts, ALIASES | {"Cast"}, LOOKUPS))

    @staticmethod
    def _values(op: Op, consts: dict) -> list:
        return [consts.get(t) if t >= 0 else None for t in op.inputs]

    def quant(self, op: Op, t: int):
        return None  # a QDQ graph's scales are its ops' inputs, given to each step

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
        elif t == MS + "QLinearAdd":
            a, sa, za, b, sb, zb, sc, zc = op.inputs
            self.emit(op, IntegerOp.ORT_QLINEAR_BINARY, [a, b], quants=[self.quant_of(op, sa, za), self.quant_of(op, sb, zb)],
                      out_quant=self.quant_of(op, sc, zc), kind="add", source_ops=source_ops)
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
        kind, attrs, used = float_op(op, values, self.ort_cpu.floats)
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
