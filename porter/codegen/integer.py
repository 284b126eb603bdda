"""Codegen of a program of typed steps (porter.ir.integer): each IntegerStep as the Rust value
model.rs builds (templates/rust_forward/src/integer.rs), with the parameters of its kernel
computed from the step's scales and zero points by the runtime's own rules (LiteRT's fixed-point
multipliers, porter.reference.litert.int8; onnxruntime's float ratios and tables,
porter.reference.ort.qdq), so the crate and the numpy executor share one definition.

Every buffer has a slot of its own (slots 0, 1, 2: the ids, mask and token types); model.bin's
arrays are read in its order, each into a local the steps refer to.
"""

from __future__ import annotations

import math

import numpy as np

from porter.codegen.literals import f32_literal, pad4, strides_for
from porter.errors import PorterError
from porter.ir.encoder import INPUT_IDS, INPUT_MASK, INPUT_TYPES, EncoderProgram
from porter.ir.integer import IntegerOp, IntegerStep
from porter.reference.litert import int8 as K
from porter.reference.ort import cpu as ort_cpus
from porter.reference.ort import qdq as ort_qdq
from porter.reference.ort.cpu import AVX2_FLOATS, AVX512_FLOATS
from porter.reference.quant import EXACT_DOT

DTYPES = {"int8": "I8", "uint8": "U8", "bool": "Bool", "int32": "I32", "int64": "I64", "float32": "F32"}
READERS = {"int8": "i8s", "uint8": "u8s", "bool": "i8s", "int32": "i32s", "int64": "i64s", "float32": "f32s"}
VALUES = {"i8s": "I8", "u8s": "U8", "i32s": "I32", "i64s": "I64", "f32s": "F32"}
COMPARISONS = {"equal": "Equal", "not_equal": "NotEqual", "less": "Less", "less_equal": "LessEqual",
               "greater": "Greater", "greater_equal": "GreaterEqual"}
ARITHMETIC = {"add": "Add", "sub": "Sub", "mul": "Mul", "maximum": "Maximum", "minimum": "Minimum"}
COMBINE = {IntegerOp.ADD: "Add", IntegerOp.SUB: "Sub", IntegerOp.SQUARED_DIFFERENCE: "SquaredDifference",
           IntegerOp.MUL: "Mul", IntegerOp.DIV: "Div", IntegerOp.MAXIMUM: "Maximum"}


def is_integer_program(program: EncoderProgram) -> bool:
    return any(isinstance(s, IntegerStep) for s in program.steps)


def integer_slots(program: EncoderProgram) -> dict[str, int]:
    slots = {INPUT_IDS: 0, INPUT_MASK: 1, INPUT_TYPES: 2}
    for step in program.steps:
        for name in step.outputs:
            slots.setdefault(name, len(slots))
    return slots


def integer_variables(program: EncoderProgram, manifest: dict) -> dict:
    """The template's variables for a full-integer program: its steps as Rust statements."""
    entries = {e["name"]: e for e in manifest["arrays"]}
    slots = integer_slots(program)
    statements = []
    taken: dict[str, str] = {}  # array -> its local: an array read by several steps is read once
    for step in program.steps:
        if not isinstance(step, IntegerStep):
            raise PorterError(f"{step.name}: a full-integer program holds integer steps only")
        w = _Step(step, program, entries, slots, taken)
        statements.append({"name": step.name, "arrays": w.declarations, "rust": w.rust()})
    return {"integer": True, "integer_steps": statements, "integer_slots": len(slots),
            "integer_output": slots[program.output_buffer]}


def _bool(flag) -> str:
    return str(bool(flag)).lower()


def _around(shape, axis: int) -> tuple[int, int, int]:
    """(the product of the axes before `axis`, its extent, the product of those after)."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])


def _mult(m) -> str:
    return f"Multiplier {{ m: {int(m[0])}, shift: {int(m[1])} }}"


class _Step:
    def __init__(self, step: IntegerStep, program: EncoderProgram, entries: dict, slots: dict, taken: dict):
        self.s, self.p, self.slots = step, program, slots
        self.declarations: list[str] = []
        self.local = taken
        for name in step.arrays() + [o.array for o in step.operands if o.array]:
            if name not in self.local:
                e = entries[name]
                var = "_a" + "".join(ch if ch.isalnum() else "_" for ch in name)
                count = int(np.prod(e["shape"], dtype=np.int64))
                self.declarations.append(f"let {var} = c.{READERS[e['dtype']]}({e['offset']}, {count});")
                self.local[name] = var

    def array(self, key: str) -> str:
        return self.local[f"{self.s.name}.{key}"]

    def values(self, o) -> str:
        if o.buffer is not None:
            return f"Values::Slot({self.slots[o.buffer]})"
        return self.constant(o.array)

    def constant(self, array: str) -> str:
        """A constant of model.bin as the Values the kernels read."""
        return f"Values::{VALUES[READERS[str(self.p.weights[array].dtype)]]}({self.local[array]})"

    def rust(self) -> str:
        s = self.s
        operands = ", ".join(f"IntOperand {{ values: {self.values(o)}, strides: {strides_for(o.shape, s.shape)} }}"
                             for o in s.operands)
        return (f"IntStep {{ kernel: {self.kernel()}, operands: vec![{operands}], out: {self.slots[s.outputs[0]]}, "
                f"dtype: DType::{DTYPES[s.dtype]}, shape: {pad4(s.shape)} }}")

    def kernel(self) -> str:
        s, op = self.s, self.s.op
        if op in ORT_KERNELS:
            return ORT_KERNELS[op](self)
        xq, oq = (s.quants[0] if s.quants else None), s.out_quant
        if op == IntegerOp.FULLY_CONNECTED:
            outs, k = self.p.weights[f"{s.name}.weight"].shape
            bias = f"Some({self.array('bias')})" if s.has_bias else "None"
            return (f"IntKernel::FullyConnected(FullyConnected {{ w: {self.array('weight')}, bias: {bias}, "
                    f"multipliers: {self.array('multiplier')}, outs: {outs}, k: {k}, x_zp: {xq[1]}, out_zp: {oq[1]} }})")
        if op == IntegerOp.BATCH_MATMUL:
            a, b = s.operands
            depth = a.shape[-2] if s.adjoint[0] else a.shape[-1]
            rows, cols = s.shape[-2], s.shape[-1]
            mult = K.batch_matmul_multiplier(xq[0], s.quants[1][0], oq[0])
            return (f"IntKernel::BatchMatmul(BatchMatmul {{ batch: {math.prod(s.shape[:-2])}, rows: {rows}, "
                    f"depth: {depth}, cols: {cols}, adjoint: ({str(s.adjoint[0]).lower()}, {str(s.adjoint[1]).lower()}), "
                    f"a_zp: {xq[1]}, b_zp: {s.quants[1][1]}, multiplier: {_mult(mult)}, out_zp: {oq[1]} }})")
        if op in COMBINE:
            return f"IntKernel::Binary({self.binary()})"
        if op in (IntegerOp.MEAN, IntegerOp.SUM):
            shape = s.operands[0].shape
            if len(shape) > 4:
                raise PorterError(f"{s.name}: a reduction over a rank-{len(shape)} tensor")
            count = math.prod(shape[a] for a in s.axes)
            if op == IntegerOp.MEAN and K.is_mean_4d(shape, s.axes, s.attrs.get("keep_dims", True)):
                m, shift, bias = K.mean_4d_parameters(xq, oq, count)
                reduction = f"Reduction::Mean4d {{ multiplier: {_mult((m, shift))}, bias: {bias}, depth: {shape[3]} }}"
            elif op == IntegerOp.MEAN:
                reduction = (f"Reduction::Mean {{ x_zp: {xq[1]}, count: {count}, "
                             f"multiplier: {_mult(K.mean_multiplier(xq[0], oq[0], count))}, out_zp: {oq[1]} }}")
            else:
                scale, bias = K.sum_scale_bias(xq, oq[0], count)
                reduction = (f"Reduction::Sum {{ scale: {f32_literal(scale)}, bias: {f32_literal(bias)}, "
                             f"out_zp: {oq[1]} }}")
            axes = [a + len(shape) - 4 in s.axes for a in range(4)]
            return (f"IntKernel::Reduce {{ reduction: {reduction}, shape: {[1] * (4 - len(shape)) + list(shape)}, "
                    f"axes: [{', '.join(str(a).lower() for a in axes)}] }}")
        if op == IntegerOp.TABLE:
            return f"IntKernel::Table({self.array('table')})"
        if op == IntegerOp.SOFTMAX:
            return (f"IntKernel::Softmax {{ table: {self.array('table')}, out_scale: {f32_literal(oq[0])}, "
                    f"out_zp: {oq[1]}, row: {s.shape[-1]} }}")
        if op == IntegerOp.QUANTIZE:
            return f"IntKernel::Quantize {{ scale: {f32_literal(oq[0])}, zp: {oq[1]} }}"
        if op == IntegerOp.REQUANTIZE:
            return (f"IntKernel::Requantize {{ x_zp: {xq[1]}, multiplier: "
                    f"{_mult(K.requantize_multiplier(xq[0], oq[0]))}, out_zp: {oq[1]} }}")
        if op in (IntegerOp.DEQUANTIZE, IntegerOp.OUTPUT):
            kind = "Dequantize" if op == IntegerOp.DEQUANTIZE else "Output"
            return f"IntKernel::{kind} {{ scale: {f32_literal(xq[0])}, zp: {xq[1]} }}"
        if op == IntegerOp.LOOKUP:
            rows, width = s.table_shape
            return (f"IntKernel::Lookup {{ table: {self.constant(f'{s.name}.table')}, rows: {rows}, "
                    f"width: {width}, wraps: {_bool(s.attrs.get('wraps'))} }}")
        if op == IntegerOp.INDEX:
            return f"IntKernel::Index({self.local[s.attrs['map']]})"
        if op in TYPED_KERNELS:
            return TYPED_KERNELS[op](self)
        return {IntegerOp.CAST: "IntKernel::Cast", IntegerOp.LOGICAL_AND: "IntKernel::LogicalAnd",
                IntegerOp.SELECT: "IntKernel::Select", IntegerOp.ABS: "IntKernel::Abs"}[op]

    def binary(self) -> str:
        s = self.s
        (xs, xz), (ys, yz), (os_, oz) = s.quants[0], s.quants[1], s.out_quant
        none = _mult((0, 0))
        x_mult = y_mult = none
        shift = 0
        if s.op in (IntegerOp.ADD, IntegerOp.SUB, IntegerOp.SQUARED_DIFFERENCE):
            squared = s.op == IntegerOp.SQUARED_DIFFERENCE
            shift = K.SQUARED_DIFFERENCE_LEFT_SHIFT if squared else K.ADD_LEFT_SHIFT
            mx, my, mo = K.rescale_multipliers(xs, ys, os_, shift, squared)
            x_mult, y_mult = _mult(mx), _mult(my)
        elif s.op == IntegerOp.MUL:
            mo = K.mul_multiplier(xs, ys, os_)
        elif s.op == IntegerOp.DIV:
            mo = K.divide_multiplier(xs, ys, os_)
        else:  # MAXIMUM compares stored values
            mo = (0, 0)
        reciprocals = self.array("reciprocal") if s.op == IntegerOp.DIV else "&[]"
        return (f"Binary {{ combine: Combine::{COMBINE[s.op]}, "
                f"x: Rescale {{ zero_point: {xz}, left_shift: {shift}, multiplier: {x_mult} }}, "
                f"y: Rescale {{ zero_point: {yz}, left_shift: {shift}, multiplier: {y_mult} }}, "
                f"out: {_mult(mo)}, out_zp: {oz}, reciprocals: {reciprocals}, walk: {_walk(s)} }}")


# LiteRT's optimized kernels, whose NEON loops round otherwise than the reference formula
# (porter.reference.litert.int8.add / mul); every other binary op runs its reference loop.
WALKED = {IntegerOp.ADD, IntegerOp.MUL}


def _walk(s: IntegerStep) -> str:
    """How LiteRT walks a binary step's operands (ProcessBroadcastShapes on the file's shapes)."""
    walk = "crate::kernels::litert::int8::elementwise::Walk"
    kind, dims, swapped = K.broadcast_walk(s.operands[0].shape, s.operands[1].shape)
    if s.op not in WALKED or kind == "generic":
        return f"{walk}::Reference"
    if kind == "flat":
        return f"{walk}::Flat"
    return f"{walk}::FiveFold {{ y: [{', '.join(map(str, dims))}], swapped: {str(swapped).lower()} }}"


# ---- the typed steps both runtimes compute alike (exact integer work, data movement) ---------------

def _compare(w: _Step) -> str:
    return f"IntKernel::Compare(Comparison::{COMPARISONS[w.s.kind]})"


def _arithmetic(w: _Step) -> str:
    return f"IntKernel::Arithmetic(Arithmetic::{ARITHMETIC[w.s.kind]})"


def _cumsum(w: _Step) -> str:
    s = w.s
    outer, n, inner = _around(s.shape, s.axes[0])
    return (f"IntKernel::Cumsum {{ outer: {outer}, n: {n}, inner: {inner}, exclusive: {_bool(s.attrs['exclusive'])}, "
            f"reverse: {_bool(s.attrs['reverse'])} }}")


def _concat(w: _Step) -> str:
    s = w.s
    axis = s.axes[0]
    outer, _, inner = _around(s.shape, axis)
    blocks = [o.shape[axis] * inner for o in s.operands]
    return f"IntKernel::Concat {{ outer: {outer}, blocks: vec!{blocks} }}"


def _gather_nd(w: _Step) -> str:
    s = w.s
    table = w.p.weights[f"{s.name}.table"]
    depth = s.operands[0].shape[-1]
    return (f"IntKernel::GatherNd {{ table: {w.constant(f'{s.name}.table')}, dims: vec!{list(table.shape[:depth])}, "
            f"inner: {math.prod(table.shape[depth:])}, wraps: {_bool(s.attrs['wraps'])} }}")


def _gather_elements(w: _Step) -> str:
    s = w.s
    table = w.p.weights[f"{s.name}.table"]
    strides = [math.prod(table.shape[a + 1:]) for a in range(table.ndim)]
    axis = s.axes[0]
    return (f"IntKernel::GatherElements {{ table: {w.constant(f'{s.name}.table')}, shape: vec!{list(s.shape)}, "
            f"table_strides: vec!{strides}, axis: {axis}, dim: {table.shape[axis]}, wraps: {_bool(s.attrs['wraps'])} }}")


TYPED_KERNELS = {IntegerOp.COMPARE: _compare, IntegerOp.ARITHMETIC: _arithmetic, IntegerOp.CUMSUM: _cumsum,
                 IntegerOp.CONCAT: _concat, IntegerOp.GATHER_ND: _gather_nd, IntegerOp.GATHER_ELEMENTS: _gather_elements}


# ---- onnxruntime's kernels (QDQ programs) ----------------------------------------------------------

QDQ = "crate::kernels::ort::qdq"
# porter.reference.ort.cpu's float kernel families -> the crate's ort::float::OrtFloats
ORT_FLOATS = {AVX2_FLOATS: "Avx2", AVX512_FLOATS: "Avx512"}
FLOAT_ELEMENTWISE = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "maximum": "Maximum",
                     "minimum": "Minimum", "neg": "Neg", "abs": "Abs", "sqrt": "Sqrt", "relu": "Relu",
                     "erf": "ErfOrt", "tanh": "TanhOrt"}
PREDICATES = {"logical_and": "And", "logical_or": "Or", "logical_not": "Not", "isnan": "IsNan"}
FLOAT_REDUCES = {"reduce_sum": "Sum", "reduce_mean": "Mean", "reduce_max": "Max", "reduce_l2": "L2"}


def _range(dtype: str) -> tuple[int, int]:
    return {"uint8": (0, 255), "int8": (-128, 127)}[dtype]


def _ort_quantize(w: _Step) -> str:
    (scale, zp), (lo, hi) = w.s.out_quant, _range(w.s.dtype)
    return f"IntKernel::OrtQuantize {{ scale: {f32_literal(scale)}, zp: {zp}, lo: {lo}, hi: {hi} }}"


def _ort_dequantize(w: _Step) -> str:
    s = w.s
    if s.quants[0] is None:  # one scale and zero point per index of an axis
        shape = s.operands[0].shape
        return (f"IntKernel::OrtDequantizeAxis {{ scale: {w.array('scale')}, zp: {w.array('zero_point')}, "
                f"channels: {shape[s.axes[0]]}, inner: {math.prod(shape[s.axes[0] + 1:])} }}")
    scale, zp = s.quants[0]
    return f"IntKernel::OrtDequantize {{ scale: {f32_literal(scale)}, zp: {zp} }}"


def _ort_qgemm(w: _Step) -> str:
    s = w.s
    a = s.operands[0]
    k, n = a.shape[-1], s.shape[-1]
    m = s.shape[-2] if len(s.shape) > 1 else 1
    constant_b = f"{s.name}.b" in s.arrays()
    if constant_b:
        batch = math.prod(a.shape[:-1]) // m
        b = f"Some({w.array('b')})"
    else:
        batch = math.prod(s.shape[:-2])
        if math.prod(s.operands[1].shape[:-2]) != batch or math.prod(a.shape[:-2]) != batch:
            raise PorterError(f"{s.name}: a product of two activations with broadcast batch axes")
        b = "None"
    if s.out_quant is None:
        output = f"{QDQ}::QgemmOutput::Float"
    else:
        lo, hi = _range(s.dtype)
        output = f"{QDQ}::QgemmOutput::Quantized {{ zp: {s.out_quant[1]}, lo: {lo}, hi: {hi} }}"
    bias = f"Some({w.array('bias')})" if s.has_bias else "None"
    return (f"IntKernel::OrtQgemm({QDQ}::Qgemm {{ batch: {batch}, m: {m}, k: {k}, n: {n}, a_zp: {s.quants[0][1]}, "
            f"b_const: {b}, b_zp: {w.array('b_zero_point')}, scale: {w.array('scale')}, bias: {bias}, "
            f"output: {output}, saturating: {str(s.integer_dot != EXACT_DOT).lower()} }})")


def _ort_qlinear_binary(w: _Step) -> str:
    s = w.s
    lo, hi = _range(s.dtype)
    if s.kind == "mul":
        (sa, za), (sb, zb), (sc, zc) = s.quants[0], s.quants[1], s.out_quant
        return (f"IntKernel::OrtQlinearMul({QDQ}::QlinearMul {{ ratio: {f32_literal(ort_qdq.mul_ratio(sa, sb, sc))}, "
                f"a_zp: {za}, b_zp: {zb}, c_zp: {f32_literal(zc)}, lo: {lo}, hi: {hi} }})")
    ra, rb, fixed = ort_qdq.add_parameters(s.quants[0], s.quants[1], s.out_quant)
    a_scalar, b_scalar = (ort_qdq.scalar_per_run(o.shape, s.shape) for o in s.operands)
    return (f"IntKernel::OrtQlinearAdd({QDQ}::QlinearAdd {{ ra: {f32_literal(ra)}, rb: {f32_literal(rb)}, "
            f"fixed: {f32_literal(fixed)}, a_scalar: {str(a_scalar).lower()}, b_scalar: {str(b_scalar).lower()}, "
            f"lo: {lo}, hi: {hi} }})")


def _ort_qlinear_softmax(w: _Step) -> str:
    s = w.s
    return (f"IntKernel::OrtQlinearSoftmax {{ table: {w.array('table')}, "
            f"multiplier: f64::from_bits({np.float64(ort_qdq.softmax_multiplier(s.out_quant[0])).view(np.uint64):#018x}), zp: {s.out_quant[1]}, "
            f"row: {s.shape[-1]} }}")


def _float(w: _Step) -> str:
    return f"IntKernel::Float({_float_op(w.s, w.p)})"


def _float_op(s: IntegerStep, program: EncoderProgram) -> str:
    kind = s.kind
    if kind in FLOAT_ELEMENTWISE:
        return f"FloatOp::Elementwise(crate::program::Elementwise::{FLOAT_ELEMENTWISE[kind]})"
    if kind in PREDICATES:
        return f"FloatOp::Predicate(Predicate::{PREDICATES[kind]})"
    if kind in FLOAT_REDUCES:
        shape = s.operands[0].shape
        if len(shape) > 4:
            raise PorterError(f"{s.name}: a reduction over a rank-{len(shape)} tensor")
        reduced = tuple(sorted({int(a) % len(shape) for a in (s.attrs.get("axes") or range(len(shape)))}))
        real = [a for a in reduced if shape[a] != 1] or list(reduced)
        axes = [a + len(shape) - 4 in reduced for a in range(4)]
        eigen_rows = real == [len(shape) - 1] and kind in ("reduce_sum", "reduce_mean")
        return (f"FloatOp::Reduce {{ op: crate::program::Reduce::{FLOAT_REDUCES[kind]}, shape: {pad4(shape)}, "
                f"axes: [{', '.join(str(a).lower() for a in axes)}], eigen_rows: {str(eigen_rows).lower()} }}")
    if kind == "softmax":
        floats = ORT_FLOATS[ort_cpus.target(program.ort_cpu).floats]
        return f"FloatOp::Softmax {{ floats: crate::kernels::ort::float::OrtFloats::{floats}, row: {s.shape[-1]} }}"
    if kind == "layer_norm":
        return f"FloatOp::LayerNorm {{ width: {s.shape[-1]}, eps: {f32_literal(s.attrs['epsilon'])} }}"
    if kind == "ort_matmul":
        a, b = s.operands
        k, n = a.shape[-1], b.shape[-1]
        b_batched = len(b.shape) > 2 and math.prod(b.shape[:-2]) > 1
        m = a.shape[-2] if b_batched else math.prod(a.shape[:-1])  # a 2-D B takes A's batch as rows
        batch = math.prod(s.shape) // (m * n)
        return f"FloatOp::MatMul {{ batch: {batch}, m: {m}, k: {k}, n: {n}, b_batched: {str(b_batched).lower()} }}"
    if kind == "pow":  # recovery took only onnxruntime's products (exponent 2 or 3)
        return f"FloatOp::Pow {{ cube: {_bool(s.attrs['exponent'] == 3.0)} }}"
    if kind == "clip":
        return f"FloatOp::Clip {{ lower: {str(s.attrs['lower']).lower()}, upper: {str(s.attrs['upper']).lower()} }}"
    raise PorterError(f"{s.name}: no Rust kernel for onnxruntime's float {kind}")


ORT_KERNELS = {IntegerOp.ORT_QUANTIZE: _ort_quantize, IntegerOp.ORT_DEQUANTIZE: _ort_dequantize,
               IntegerOp.ORT_QGEMM: _ort_qgemm, IntegerOp.ORT_QLINEAR_BINARY: _ort_qlinear_binary,
               IntegerOp.ORT_QLINEAR_SOFTMAX: _ort_qlinear_softmax, IntegerOp.FLOAT: _float}
