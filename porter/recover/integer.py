"""Graphs with quantised activations -> a program of typed steps (porter.ir.integer): full-integer
TFLite graphs here, onnxruntime QDQ graphs in porter.recover.qdq, both on TypedRecovery.

A full-integer graph's layers compute on int8 activations with the file's scale and zero point
per tensor, so recovery does not look for float blocks: every op becomes the integer kernel
LiteRT runs for it, in the file's order, decided from the op's own tensors:

- an op of constants only is folded (run by porter's reference, porter.reference.litert.full_integer);
- a RESHAPE / SQUEEZE / EXPAND_DIMS, and any view whose index map is the identity, is an alias
  (the next op sees the same buffer with its own shape);
- every other view (TRANSPOSE, SLICE, STRIDED_SLICE, GATHER_ND or GATHER by constant indices) is
  an INDEX step whose map is decided by running the op on the positions of its input;
- a GATHER / EMBEDDING_LOOKUP of a constant table by computed ids is a LOOKUP, a GATHER_ND of a
  constant at computed index vectors a GATHER_ND;
- int32 / int64 work (index arithmetic: NOT_EQUAL, CAST, CUMSUM, ADD, MUL, LESS, SELECT,
  CONCATENATION, as ai-edge-quantizer's RoBERTa computes its positions from the ids) is exact,
  the same in every runtime (porter.reference.typed);
- every other op is the kernel of its type (an op or dtype without one is refused naming the op
  and tensor), each quantised operand with its per-tensor scale and zero point (anything else is
  refused naming the tensor).

The inputs are told apart by role: the ids index the largest table, the token types another
table, and the one input that indexes none is the mask. An int8 output is dequantised as the
golden reports it, its scale and zero point recorded in the program.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op
from porter.ir.encoder import (INPUT_IDS, INPUT_MASK, INPUT_TYPES, Buffer, EncoderProgram, Operand, Reference,
                               Rows)
from porter.ir.integer import COMPARISONS as COMPARISON_KINDS, IntegerOp, IntegerStep
from porter.recover.canonical.window import bind, dynamic_dims
from porter.reference.litert import full_integer, int8 as K
from porter.reference.litert.floats import EIGEN_L1_BYTES

ALIASES = {"RESHAPE", "SQUEEZE", "EXPAND_DIMS"}
VIEWS = {"TRANSPOSE", "SLICE", "STRIDED_SLICE", "GATHER_ND", "GATHER"}
LOOKUPS = {"GATHER": (0, 1), "EMBEDDING_LOOKUP": (1, 0)}  # op -> (table input, ids input)
QUANTISED_BINARY = {"ADD": IntegerOp.ADD, "SUB": IntegerOp.SUB, "MUL": IntegerOp.MUL,
                    "SQUARED_DIFFERENCE": IntegerOp.SQUARED_DIFFERENCE, "DIV": IntegerOp.DIV,
                    "MAXIMUM": IntegerOp.MAXIMUM}
TABLES = {"RSQRT": lambda xq, oq, op: K.rsqrt_table(xq, oq),
          "SQRT": lambda xq, oq, op: K.sqrt_table(xq, oq),
          "GELU": lambda xq, oq, op: K.lookup_table(xq, oq, K.gelu_tanh if op.options.get("approximate")
                                                    else K.gelu_exact),
          "LOGISTIC": lambda xq, oq, op: K.lookup_table(xq, oq, K.logistic),
          "TANH": lambda xq, oq, op: K.lookup_table(xq, oq, K.libm("tanhf"))}
REDUCTIONS = {"MEAN": IntegerOp.MEAN, "SUM": IntegerOp.SUM}
FLAGS = {"CAST": IntegerOp.CAST, "LOGICAL_AND": IntegerOp.LOGICAL_AND, "SELECT_V2": IntegerOp.SELECT,
         "SELECT": IntegerOp.SELECT, "ABS": IntegerOp.ABS}
COMPARISONS = {kind.upper(): kind for kind in COMPARISON_KINDS}
INTEGER_ARITHMETIC = {"ADD": "add", "SUB": "sub", "MUL": "mul", "MAXIMUM": "maximum", "MINIMUM": "minimum"}
INTEGERS = {"int32", "int64"}


def recover_integer(g: Graph, window: int | None = None) -> EncoderProgram:
    if dynamic_dims(g):
        name, axis, dim = dynamic_dims(g)[0]
        raise PorterError(f"input '{name}' has the dynamic dimension '{dim}' (axis {axis}); porter compiles "
                          "full-integer graphs with fixed shapes")
    g = bind(g, window)  # checks a --window against the graph's own
    if len(g.outputs) != 1:
        raise PorterError(f"porter compiles models with one output; this one has {sorted(g.outputs)}")
    consts = {t.index: t.data for t in g.tensors if t.data is not None}
    r = _LiteRT(g, consts, input_roles(g, consts, ALIASES | {"CAST"}, LOOKUPS))
    for op in g.ops:
        r.op(op)
    return r.program(Reference.LITERT_BUILTIN, eigen_l1d=EIGEN_L1_BYTES)


class TypedRecovery:
    """A graph's ops as typed steps, in the file's order: what both runtimes' recoveries share
    (operands, steps, views as index maps, lookups, the program). A subclass decides each op's
    kernel (`op`), how views and folds are computed (`run_view`), and quantisation (`quant`)."""

    DTYPES = {"int8", "int32", "int64", "float32", "bool"}

    def __init__(self, g: Graph, consts: dict[int, np.ndarray], roles: tuple[dict[int, str], int]):
        self.g = g
        self.consts = consts
        self.roles, self.vocab = roles
        self.source: dict[int, str] = {t: role for t, role in self.roles.items()}  # tensor -> buffer
        self.steps: list[IntegerStep] = []
        self.buffers: dict[str, Buffer] = {}
        self.weights: dict[str, np.ndarray] = {}
        self.index_maps: dict[bytes, str] = {}  # INDEX maps by content -> their array

    # ---- operands ----------------------------------------------------------------------------

    def operand(self, t: int) -> Operand:
        shape = tuple(self.g.tensor(t).shape)
        if t in self.source:
            return Operand(self.source[t], None, shape)
        name = f"c{t}"
        value = self.consts[t]
        self.weights[name] = value.astype(np.int8) if value.dtype == np.bool_ else value
        return Operand(None, name, shape)

    def emit(self, op: Op, step_op: IntegerOp, inputs: list, arrays: dict | None = None, **extra) -> None:
        """One step for `op`: `inputs` are tensors of the graph (or operands made already, buffers
        of the program); extra `writes` is the tensor its output stands for (the op's output by
        default), `name`, `out_buffer` and `dtype` name the step and its output buffer and type (by
        default op<index> and that tensor's), the rest are IntegerStep's."""
        out = extra.pop("writes", op.outputs[0])
        tensor = self.g.tensor(out)
        for t in [*(t for t in inputs if isinstance(t, int)), out]:
            if self.dtype(t) not in self.DTYPES:
                raise PorterError(f"op {op.index} {op.type}: tensor {t} {self.g.tensor(t).name!r} is "
                                  f"{self.g.tensor(t).dtype}, which porter's integer kernels do not take")
        name = extra.pop("name", f"op{op.index}")
        out_buffer, dtype = extra.pop("out_buffer", f"t{out}"), extra.pop("dtype", self.dtype(out))
        for key, value in (arrays or {}).items():
            self.weights[f"{name}.{key}"] = value
        operands = [self.operand(t) if isinstance(t, int) else t for t in inputs]
        quants = extra.pop("quants", None) or [self.quant(op, t) if isinstance(t, int) else None for t in inputs]
        out_quant = extra.pop("out_quant") if "out_quant" in extra else self.quant(op, out)
        step = IntegerStep(
            name=name, inputs=[o.buffer for o in operands if o.buffer], outputs=[out_buffer],
            source_ops=list(extra.pop("source_ops", [op.index])), op=step_op, operands=operands,
            in_dtypes=[self.dtype(t) if isinstance(t, int) else self.buffers[t.buffer].dtype for t in inputs],
            shape=extra.pop("shape", tuple(tensor.shape)), dtype=dtype, quants=quants, out_quant=out_quant,
            own_arrays=extra.pop("own_arrays", [f"{name}.{k}" for k in (arrays or {})]), **extra)
        self.steps.append(step)
        self.buffers[out_buffer] = Buffer(1, int(np.prod(tensor.shape)), False, Rows.ALL, dtype)
        self.source[out] = out_buffer

    def dtype(self, t: int) -> str:
        """The type of a tensor's values in the program."""
        return self.g.tensor(t).dtype

    def lookup(self, op: Op, table_input: int, ids_input: int, wraps: bool = False) -> None:
        """Rows of a constant table by computed ids; `wraps`: a negative id counts from the end
        (onnxruntime's Gather), else it is refused (LiteRT's)."""
        if op.options.get("axis", 0) or op.options.get("batch_dims", 0):
            raise PorterError(f"op {op.index} {op.type}: a lookup along axis {op.options.get('axis')} (batch_dims "
                              f"{op.options.get('batch_dims', 0)}) has no integer kernel in porter")
        table = self.consts[op.inputs[table_input]]
        table = table.reshape(table.shape[0], -1)
        self.emit(op, IntegerOp.LOOKUP, [op.inputs[ids_input]], {"table": table}, table_shape=table.shape,
                  attrs={"wraps": wraps})

    def view(self, op: Op) -> None:
        x = op.inputs[0]
        shape = self.g.tensor(x).shape
        positions = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
        ins = [positions] + [self.consts[t] if t >= 0 else None for t in op.inputs[1:]]
        index = np.asarray(self.run_view(op, ins), np.int32).reshape(-1)
        if index.size == positions.size and (index == positions.reshape(-1)).all():
            self.source[op.outputs[0]] = self.source[x]  # the identity: an alias
            return
        # one array for every view of the same map (each layer's head split and merge)
        name = self.index_maps.setdefault(index.tobytes(), f"index{len(self.index_maps)}")
        self.weights[name] = index
        self.emit(op, IntegerOp.INDEX, [x], attrs={"map": name}, own_arrays=[name])

    # ---- exact integer work and data movement (porter.reference.typed) ------------------------

    def integer_arithmetic(self, op: Op, kind: str, source_ops: list[int]) -> None:
        inputs = op.inputs[:2]
        if {self.dtype(t) for t in [*inputs, op.outputs[0]]} - INTEGERS:
            raise PorterError(f"op {op.index} {op.type}: {kind} of {[self.g.tensor(t).dtype for t in inputs]}; "
                              "porter's integer arithmetic takes int32 or int64 values of one type")
        self.emit(op, IntegerOp.ARITHMETIC, inputs, kind=kind, source_ops=source_ops)

    def compare(self, op: Op, kind: str, source_ops: list[int]) -> None:
        """A comparison of plain values (int32, int64, float32, bool); one of quantised values
        would compare them rescaled, which porter does not reproduce."""
        for t in op.inputs[:2]:
            if self.dtype(t) in ("int8", "uint8"):
                raise PorterError(f"op {op.index} {op.type}: compares quantised tensor {t} {self.g.tensor(t).name!r}; "
                                  "porter compares int32, int64, float32 or bool values")
        self.emit(op, IntegerOp.COMPARE, op.inputs[:2], kind=kind, source_ops=source_ops)

    def cumsum(self, op: Op, axis_input: int, exclusive: bool, reverse: bool, source_ops: list[int]) -> None:
        x = op.inputs[0]
        if self.dtype(x) not in INTEGERS or axis_input not in self.consts:
            raise PorterError(f"op {op.index} {op.type}: a running sum of {self.g.tensor(x).dtype} values along "
                              f"{'a computed' if axis_input not in self.consts else 'an'} axis; porter's kernel sums "
                              "int32 or int64 values along a constant axis")
        axis = int(np.ravel(self.consts[axis_input])[0]) % len(self.g.tensor(x).shape)
        self.emit(op, IntegerOp.CUMSUM, [x], axes=(axis,), attrs={"exclusive": exclusive, "reverse": reverse},
                  source_ops=source_ops)

    def concat(self, op: Op, axis: int, source_ops: list[int]) -> None:
        """Data movement, exact for any type whose values the output keeps as they are: refused
        where a quantised operand has other parameters than the output (a requantisation)."""
        ins = [t for t in op.inputs if t >= 0]
        out_quant = self.quant(op, op.outputs[0])
        for t in ins:
            if self.dtype(t) != self.dtype(op.outputs[0]) or self.quant(op, t) != out_quant:
                raise PorterError(f"op {op.index} {op.type}: tensor {t} {self.g.tensor(t).name!r} is "
                                  f"{self.g.tensor(t).dtype} at other quantisation parameters than the output; "
                                  "porter joins values of one type and quantisation, not requantised")
        rank = len(self.g.tensor(op.outputs[0]).shape)
        self.emit(op, IntegerOp.CONCAT, ins, axes=(axis % rank,), source_ops=source_ops)

    def gather(self, op: Op, kind: IntegerOp, table: int, index: int, wraps: bool, source_ops: list[int],
               axis: int = 0) -> None:
        """A constant read at computed indices (GATHER_ND: index vectors; GATHER_ELEMENTS: one
        index per output value along `axis`)."""
        if self.dtype(index) not in INTEGERS:
            raise PorterError(f"op {op.index} {op.type}: indices of type {self.g.tensor(index).dtype}")
        self.emit(op, kind, [index], {"table": np.asarray(self.consts[table])}, axes=(axis,),
                  attrs={"wraps": wraps}, quants=[None], source_ops=source_ops)

    # ---- the program -------------------------------------------------------------------------

    def program(self, reference: Reference, **facts) -> EncoderProgram:
        g = self.g
        (output_name, out_t), = g.outputs.items()
        if out_t not in self.source:
            raise PorterError(f"output {output_name!r}: computed from constants alone")
        tensor = g.tensor(out_t)
        seq = g.tensor(next(t for t, role in self.roles.items() if role == INPUT_IDS)).shape[-1]
        output_quant = None
        if tensor.dtype in ("int8", "uint8"):
            output_quant = self.quant(self.g.producer(out_t), out_t)
            self.steps.append(IntegerStep(
                name="output", inputs=[self.source[out_t]], outputs=["output"], source_ops=[],
                op=IntegerOp.OUTPUT, operands=[self.operand(out_t)], in_dtypes=[tensor.dtype], shape=tuple(tensor.shape),
                dtype="float32", quants=[output_quant], out_quant=None))
            output_buffer = "output"
        elif tensor.dtype == "float32":
            output_buffer = self.source[out_t]
        else:
            raise PorterError(f"output {output_name!r}: tensor {out_t} is {tensor.dtype}; porter reports "
                              "float32 or int8 outputs")
        size = int(np.prod(tensor.shape))
        dims = list(tensor.shape)
        while len(dims) > 1 and dims[0] == 1:
            dims = dims[1:]
        tokens = len(dims) >= 2 and dims[0] == seq
        self.buffers[output_buffer] = Buffer(seq if tokens else 1, size // seq if tokens else size, tokens,
                                             Rows.ALL, "float32")
        self.buffers[INPUT_MASK] = Buffer(seq, 1, True)
        names = {role: name for name, t in g.inputs.items() for r, role in [(t, self.roles.get(t))] if role}
        return EncoderProgram(
            source=g.path, format=g.format, reference=reference, seq=seq, vocab=self.vocab,
            ids_input=names[INPUT_IDS], mask_input=names.get(INPUT_MASK), output=output_name,
            output_buffer=output_buffer, buffers=self.buffers, steps=self.steps, weights=self.weights,
            padding_is_inert=False, types_input=names.get(INPUT_TYPES), output_quant=output_quant, **facts)


class _LiteRT(TypedRecovery):
    """LiteRT's integer kernels, op by op."""

    def run_view(self, op: Op, ins: list) -> np.ndarray:
        return full_integer.KERNELS[op.type](self.g, op, ins)

    def quant(self, op: Op, t: int):
        """A quantised tensor's (scale, zero point); None for an unquantised one."""
        tensor = self.g.tensor(t)
        q = tensor.quant
        if tensor.dtype != "int8":
            return None
        if q is None or q.scale.size != 1:
            raise PorterError(f"op {op.index} {op.type}: tensor {t} {tensor.name!r} has "
                              f"{'no' if q is None else 'per-channel'} quantisation; porter's integer kernels "
                              "take one scale and zero point per activation")
        scale = float(q.scale.ravel()[0])
        if not np.isfinite(scale) or scale <= 0:
            raise PorterError(f"op {op.index} {op.type}: tensor {t} {tensor.name!r} has scale {scale}, "
                              "which porter's integer kernels cannot represent")
        return float(np.float32(scale)), int(q.zero_point.ravel()[0])

    # ---- ops ---------------------------------------------------------------------------------

    def op(self, op: Op) -> None:
        g, ins = self.g, [t for t in op.inputs if t >= 0]
        if all(t in self.consts for t in ins):  # computable from constants: folded
            self.consts[op.outputs[0]] = np.asarray(full_integer.run_op(g, op, [self.consts[t] for t in ins]))
            return
        activation = op.options.get("fused_activation_function", "NONE")
        if activation not in ("NONE", None):
            raise PorterError(f"op {op.index} {op.type}: fused activation {activation} has no integer kernel "
                              "in porter")
        if op.type in ALIASES:
            self.source[op.outputs[0]] = self.source[op.inputs[0]]
        elif op.type in LOOKUPS and op.inputs[LOOKUPS[op.type][0]] in self.consts \
                and op.inputs[LOOKUPS[op.type][1]] not in self.consts:
            self.lookup(op, *LOOKUPS[op.type])
        elif op.type in VIEWS and all(t in self.consts for t in ins[1:]):
            self.view(op)
        elif op.type in INTEGER_ARITHMETIC and self.dtype(op.inputs[0]) in INTEGERS:
            self.integer_arithmetic(op, INTEGER_ARITHMETIC[op.type], [op.index])
        elif op.type in COMPARISONS:
            self.compare(op, COMPARISONS[op.type], [op.index])
        elif op.type == "CUMSUM":
            self.cumsum(op, op.inputs[1], bool(op.options.get("exclusive")), bool(op.options.get("reverse")),
                        [op.index])
        elif op.type == "CONCATENATION":
            self.concat(op, int(op.options.get("axis", 0)), [op.index])
        elif op.type == "GATHER_ND" and op.inputs[0] in self.consts:  # LiteRT refuses a negative index
            self.gather(op, IntegerOp.GATHER_ND, op.inputs[0], op.inputs[1], False, [op.index])
        elif op.type == "FULLY_CONNECTED":
            self.fully_connected(op)
        elif op.type == "BATCH_MATMUL":
            self.batch_matmul(op)
        elif op.type == "DIV":
            # gemmlowp's reciprocal of every divisor |y - zy| an int8 operand can have
            reciprocals = np.array([K.reciprocal(b) if b else (0, 0) for b in range(256)], np.int32)
            self.emit(op, IntegerOp.DIV, op.inputs[:2], {"reciprocal": reciprocals})
        elif op.type in QUANTISED_BINARY:
            self.emit(op, QUANTISED_BINARY[op.type], op.inputs[:2])
        elif op.type in REDUCTIONS:
            self.reduction(op)
        elif op.type in TABLES:
            xq, oq = self.quant(op, op.inputs[0]), self.quant(op, op.outputs[0])
            self.require_int8(op, op.inputs[0])
            self.emit(op, IntegerOp.TABLE, op.inputs[:1], {"table": TABLES[op.type](xq, oq, op)})
        elif op.type == "SOFTMAX":
            self.require_int8(op, op.inputs[0])
            table = K.softmax_table(self.quant(op, op.inputs[0])[0], float(op.options.get("beta", 1.0)))
            self.emit(op, IntegerOp.SOFTMAX, op.inputs[:1], {"table": table})
        elif op.type == "QUANTIZE":
            kind = IntegerOp.REQUANTIZE if g.tensor(op.inputs[0]).dtype == "int8" else IntegerOp.QUANTIZE
            self.emit(op, kind, op.inputs[:1])
        elif op.type == "DEQUANTIZE":
            self.require_int8(op, op.inputs[0])
            self.emit(op, IntegerOp.DEQUANTIZE, op.inputs[:1])
        elif op.type in FLAGS and (op.type != "ABS" or g.tensor(op.inputs[0]).dtype == "float32"):
            self.emit(op, FLAGS[op.type], ins)
        else:
            t = op.inputs[0]
            raise PorterError(f"op {op.index} {op.type}: no integer kernel for it in porter (its input tensor {t} "
                              f"{g.tensor(t).name!r} is {g.tensor(t).dtype})")

    def require_int8(self, op: Op, t: int) -> None:
        if self.g.tensor(t).dtype != "int8":
            raise PorterError(f"op {op.index} {op.type}: tensor {t} {self.g.tensor(t).name!r} is "
                              f"{self.g.tensor(t).dtype}; porter's integer kernel for it takes int8")

    def fully_connected(self, op: Op) -> None:
        g = self.g
        w = op.inputs[1]
        if w not in self.consts or g.tensor(w).dtype != "int8" or g.tensor(w).quant is None:
            raise PorterError(f"op {op.index} FULLY_CONNECTED: weight tensor {w} {g.tensor(w).name!r} is not a "
                              "constant int8 tensor; porter's integer kernel takes int8 weights")
        wq = g.tensor(w).quant
        if np.any(wq.zero_point != 0) or (wq.scale.size > 1 and wq.axis not in (0, None)):
            raise PorterError(f"op {op.index} FULLY_CONNECTED: weight tensor {w} {g.tensor(w).name!r} has a "
                              "zero point or a channel axis other than 0, which porter's integer kernel does not take")
        self.require_int8(op, op.inputs[0])
        scales = np.asarray(wq.scale, np.float32).ravel()
        multipliers = K.fully_connected_multipliers(self.quant(op, op.inputs[0])[0], scales,
                                                    self.quant(op, op.outputs[0])[0])
        if len(multipliers) == 1:  # per-tensor weights: one multiplier for every output channel
            multipliers = multipliers * self.consts[w].shape[0]
        arrays = {"weight": self.consts[w], "weight_scale": scales,
                  "multiplier": np.asarray(multipliers, np.int32).reshape(-1, 2)}
        bias = op.inputs[2] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
        if bias is not None:
            if bias not in self.consts or g.tensor(bias).dtype != "int32":
                raise PorterError(f"op {op.index} FULLY_CONNECTED: bias tensor {bias} {g.tensor(bias).name!r} "
                                  "is not a constant int32 tensor")
            arrays["bias"] = self.consts[bias]
        self.emit(op, IntegerOp.FULLY_CONNECTED, [op.inputs[0]], arrays, has_bias=bias is not None)

    def batch_matmul(self, op: Op) -> None:
        g = self.g
        a, b = op.inputs[:2]
        for t in (a, b):
            self.require_int8(op, t)
        sa, sb = g.tensor(a).shape, g.tensor(b).shape
        if len(sa) != len(sb) or sa[:-2] != sb[:-2] or len(sa) < 2:
            raise PorterError(f"op {op.index} BATCH_MATMUL: {list(sa)} x {list(sb)}: porter's integer kernel "
                              "takes equal batch axes (no broadcasting)")
        adjoint = (bool(op.options.get("adj_x")), bool(op.options.get("adj_y")))
        self.emit(op, IntegerOp.BATCH_MATMUL, [a, b], adjoint=adjoint)

    def reduction(self, op: Op) -> None:
        x = op.inputs[0]
        self.require_int8(op, x)
        shape = self.g.tensor(x).shape
        axes = tuple(sorted({int(a) % len(shape) for a in np.ravel(self.consts[op.inputs[1]])}))
        kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
        self.emit(op, REDUCTIONS[op.type], [x], axes=axes, shape=kept,
                  attrs={"keep_dims": bool(op.options.get("keep_dims"))})  # LiteRT's kernel depends on it


def input_roles(g: Graph, consts: dict, passes: set[str], lookups: dict[str, tuple[int, int]]
                ) -> tuple[dict[int, str], int]:
    """Graph input tensor -> INPUT_IDS / INPUT_TYPES / INPUT_MASK, and the ids' table rows: each
    input followed through the ops that pass it on (`passes`: aliases, casts) to the constant
    tables it indexes (`lookups`: op -> (table input, ids input); consts: the constants, folded
    ones included)."""
    rows: dict[int, int] = {}
    for t in g.inputs.values():
        frontier, seen = [t], set()
        while frontier:
            v = frontier.pop()
            seen.add(v)
            for user in g.users(v):
                if user.type in passes and user.inputs[0] == v:
                    frontier += [o for o in user.outputs if o not in seen]
                elif user.type in lookups:
                    table, ids = lookups[user.type]
                    if user.inputs[ids] == v and user.inputs[table] in consts:
                        rows[t] = max(rows.get(t, 0), np.shape(consts[user.inputs[table]])[0])
    if not rows:
        raise PorterError("no input indexes a table: porter finds a full-integer encoder's token ids by the "
                          "embedding table they index")
    by_rows = sorted(rows, key=lambda t: -rows[t])
    roles = {by_rows[0]: INPUT_IDS}
    if len(by_rows) > 2:
        raise PorterError(f"inputs {[g.tensor(t).name for t in by_rows]} all index tables; porter takes token ids "
                          "and at most one token-type input")
    if len(by_rows) == 2:
        roles[by_rows[1]] = INPUT_TYPES
    rest = [t for t in g.inputs.values() if t not in roles]
    if len(rest) > 1:
        raise PorterError(f"inputs {[g.tensor(t).name for t in rest]} index no table; porter takes one mask input")
    if rest:
        roles[rest[0]] = INPUT_MASK
    return roles, rows[by_rows[0]]
