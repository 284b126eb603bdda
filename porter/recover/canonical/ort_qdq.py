"""What onnxruntime's CPU provider runs for a QDQ graph (quantize_static's QuantFormat.QDQ).

A QDQ file spells every quantised op in float: DequantizeLinear (DQ) on its inputs, the float
op, QuantizeLinear (Q) on its output. onnxruntime does not run that spelling. Its graph
transformers (onnxruntime/core/optimizer/qdq_transformer/, read for 1.32 and measured with
SessionOptions.optimized_model_filepath at ORT_ENABLE_ALL) rewrite it first, in this order:

0. ConstantFolding (level 1): an op whose inputs are all constants becomes a constant, in
   onnxruntime's arithmetic (porter.recover.canonical.ort_ops), except a DequantizeLinear, which
   a session with its QDQ transformers keeps for the node units (a QuantizeLinear of constants
   is folded: measured).
1. EnsureUniqueDQForNodeUnit (level 1): a DQ read by several nodes becomes one DQ per reader.
2. WhereDummyDq: a Where whose one data input is a DQ, the other a scalar float constant, and
   whose output goes to one Q, reads the constant through a DQ it builds for it: int8 0 / 127
   / -128 (uint8 127 / 255 / 0) at a scale of c / (q - zp), which is not always c again.
3. QDQS8ToU8Transformer (level 2, x86: int8 activations are not allowed in its QDQ kernels):
   a Q whose only reader is a DQ, both with the same constant int8 zero point, becomes a uint8
   pair (zero point + 128; the same values, 128 higher).
4. QDQSelectorActionTransformer: each node with DQs on its inputs (and Qs on its outputs) is a
   node unit; the selectors (qdq_selectors.cc) decide by the units' types whether it becomes a
   quantised kernel: `SELECTORS` below, as data. MatMul: QLinearMatMul (with a Q) or
   MatMulIntegerToFloat (without), never with int8 activations; Gemm: QGemm; Add / Mul:
   QLinearAdd / QLinearMul with all three types equal; Softmax, Sigmoid, LeakyRelu, the pools:
   their QLinear ops; data movement between a DQ and a Q of the same parameters runs on the
   quantised values (the DQ and Q are dropped); a DQ -> MatMul on a float activation becomes
   MatMulNBits.
5. QDQFinalCleanupTransformer: a DQ -> Q pair of the same parameters goes.

Everything not fused runs as written: DQ, the float op in onnxruntime's float kernels, Q. Steps 1,
3 and 5 and the dropped data movement change no value (a value requantised at its own scale and
zero point comes back exactly); the fused kernels and the dummy DQ do. `ort_runs` returns the
graph onnxruntime runs, as a Graph of the same tensors (plus the ones the rewrites add) whose ops
are ONNX and com.microsoft op types with onnxruntime's own input order, each op keeping the file
ops it stands for; tests/test_ort_qdq.py holds it to onnxruntime's own optimised model.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, Tensor
from porter.recover.canonical.ort_ops import DQ, MS, Q, evaluate

# ---- the selectors, as data (qdq_selector_action_transformer.cc, qdq_selectors.cc) -----------

# DropQDQNodesRules: data movement whose DQ and Q are dropped when their parameters are equal.
DROP_QDQ = {"Expand", "Flatten", "Gather", "GatherElements", "Reshape", "Slice", "Squeeze", "Tile",
            "Transpose", "Unsqueeze", "Resize", "MaxPool", "ReduceMax", "ReduceMin"}
DROP_NEEDS_POSITIVE_SCALE = {"MaxPool", "ReduceMax", "ReduceMin"}  # the order of values must survive
DROP_DQ = {"ArgMax"}  # DropDQNodesRules: the DQ alone
UNARY = {"AveragePool", "LeakyRelu", "GlobalAveragePool", "Sigmoid", "Softmax"}  # -> com.microsoft QLinear<op>
BINARY = {"Add", "Mul"}  # -> com.microsoft QLinearAdd / QLinearMul
VARIADIC = {"Concat"}  # -> com.microsoft QLinearConcat
# int8 activations are refused by these selectors on x86 (QDQIsInt8Allowed() is false there)
INT8_ACTIVATIONS_REFUSED = {"MatMul", "Conv"}
INTEGER_8 = ("int8", "uint8")


@dataclass
class QdqGraph:
    """The graph onnxruntime runs: `graph` (ops in execution order) and, per op, the file's ops
    it stands for."""

    graph: Graph
    origin: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def describe(self, op: Op) -> str:
        """The file's ops behind one of ours, as errors name them."""
        return "; ".join(f"op {i} {self.source_type(i)}" for i in self.origin[op.index])

    source_types: dict[int, str] = field(default_factory=dict)

    def source_type(self, i: int) -> str:
        return self.source_types.get(i, "?")


class _Rewrite:
    """The graph being rewritten: ops by identity, tensors extendable, readers recomputed."""

    def __init__(self, g: Graph):
        self.g = g
        self.tensors: list[Tensor] = list(g.tensors)
        self.ops: list[Op] = [Op(op.index, op.type, list(op.inputs), list(op.outputs), dict(op.options), op.version)
                              for op in g.ops]
        self.origin: dict[int, tuple[int, ...]] = {id(op): (op.index,) for op in self.ops}
        self.outputs = set(g.outputs.values())

    # -- reading ---------------------------------------------------------------------------------

    def const(self, t: int):
        return None if t < 0 else self.tensors[t].data

    def producer(self, t: int) -> Op | None:
        return next((op for op in self.ops if t in op.outputs), None)

    def readers(self, t: int) -> list[Op]:
        return [op for op in self.ops if t in op.inputs]

    def edges(self, op: Op) -> int:
        """onnxruntime's output edges: one per (reader, input slot) of any output."""
        return sum(r.inputs.count(t) for t in op.outputs if t >= 0 for r in self.readers(t))

    def makes_output(self, op: Op) -> bool:
        return any(t in self.outputs for t in op.outputs)

    def dtype(self, t: int) -> str:
        return self.tensors[t].dtype

    # -- writing ---------------------------------------------------------------------------------

    def add_tensor(self, like: Tensor, suffix: str, dtype: str | None = None, data=None, shape=None) -> int:
        index = len(self.tensors)
        self.tensors.append(Tensor(index, f"{like.name}/{suffix}", tuple(like.shape if shape is None else shape),
                                   dtype or like.dtype, None, data))
        return index

    def add_const(self, name: str, value: np.ndarray) -> int:
        index = len(self.tensors)
        self.tensors.append(Tensor(index, name, tuple(value.shape), str(value.dtype), None, value))
        return index

    def retype(self, t: int, dtype: str) -> None:
        self.tensors[t] = replace(self.tensors[t], dtype=dtype)

    def replace_unit(self, unit: list[Op], fused: Op) -> None:
        """The unit's ops give way to `fused`, which stands for all of their file ops, at the
        place of the first of them."""
        origin = tuple(sorted({i for op in unit for i in self.origin[id(op)]}))
        at = min(i for i, op in enumerate(self.ops) if any(op is u for u in unit))
        keep = [op for op in self.ops if all(op is not u for u in unit)]
        keep.insert(min(at, len(keep)), fused)
        self.ops = _execution_order(keep)
        self.origin[id(fused)] = origin

    def fold(self, op: Op, value: np.ndarray) -> None:
        """`op` gives way to its output as a constant."""
        t = op.outputs[0]
        self.tensors[t] = replace(self.tensors[t], data=np.asarray(value).astype(self.tensors[t].dtype, copy=False))
        self.remove(op)

    def remove(self, op: Op) -> None:
        self.ops = [o for o in self.ops if o is not op]


def _execution_order(ops: list[Op]) -> list[Op]:
    """A stable topological order (a fused op takes its place where its inputs are made)."""
    made = {t: i for i, op in enumerate(ops) for t in op.outputs}
    order, done = [], set()

    def visit(i: int) -> None:
        stack = [(i, False)]
        while stack:
            j, expanded = stack.pop()
            if j in done:
                continue
            if expanded:
                done.add(j)
                order.append(ops[j])
                continue
            stack.append((j, True))
            stack += [(made[t], False) for t in reversed(ops[j].inputs) if t in made and made[t] not in done]

    for i in range(len(ops)):
        visit(i)
    return order


# ---- 0. constant folding --------------------------------------------------------------------------

def _fold_constants(r: _Rewrite, floats: str | None) -> None:
    """Every op of constants only, in order (a folded output is a constant for the ops after
    it), but a DQ, an op of several outputs or one that makes a graph output; an op porter
    cannot evaluate is left to the recovery, which refuses it by name."""
    for op in list(r.ops):
        ins = [t for t in op.inputs if t >= 0]
        if op.type == DQ or len(op.outputs) != 1 or r.makes_output(op) or not ins \
                or any(r.const(t) is None for t in ins):
            continue
        try:
            value = evaluate(op, [r.const(t) for t in op.inputs], floats, r.tensors[op.outputs[0]].shape)
        except PorterError:
            continue
        r.fold(op, value)


# ---- 1. one DQ per reader ------------------------------------------------------------------------

def _unique_dqs(r: _Rewrite) -> None:
    for dq in [op for op in r.ops if op.type == DQ]:
        out = dq.outputs[0]
        slots = [(reader, k) for reader in r.readers(out) for k, t in enumerate(reader.inputs) if t == out]
        for reader, k in slots[1:]:
            copy_out = r.add_tensor(r.tensors[out], f"duplicated{k}")
            copy = Op(dq.index, DQ, list(dq.inputs), [copy_out], dict(dq.options), dq.version)
            r.origin[id(copy)] = r.origin[id(dq)]
            r.ops.insert(next(i for i, op in enumerate(r.ops) if op is dq) + 1, copy)
            reader.inputs[k] = copy_out


# ---- 2. WhereDummyDq -------------------------------------------------------------------------------

def _scalar(value) -> float | None:
    v = np.asarray(value)
    return float(v.reshape(())) if v.ndim == 0 and v.dtype == np.float32 else None


def _where_dummy_dqs(r: _Rewrite) -> None:
    for where in [op for op in r.ops if op.type == "Where"]:
        readers = r.readers(where.outputs[0])
        if len(readers) != 1 or readers[0].type != Q:
            continue
        for dq_at, const_at in ((1, 2), (2, 1)):
            dq = r.producer(where.inputs[dq_at])
            c = _scalar(r.const(where.inputs[const_at]))
            if dq is None or dq.type != DQ or c is None or r.producer(where.inputs[const_at]) is not None:
                continue
            zp_dtype = r.dtype(dq.inputs[2]) if len(dq.inputs) > 2 and dq.inputs[2] >= 0 else None
            if zp_dtype not in INTEGER_8 or r.dtype(dq.inputs[0]) != r.dtype(readers[0].outputs[0]):
                continue
            # the dummy's quantised value and zero point (int8: 0, 127, -128; uint8: 127, 255, 0)
            zp = 0 if zp_dtype == "int8" else 127
            q = zp if c == 0 else (127 if zp_dtype == "int8" else 255) if c > 0 else (-128 if zp_dtype == "int8" else 0)
            scale = np.float32(1) if c == 0 else np.float32(np.float32(c) / np.float32(q - zp))
            inputs = [r.add_const(f"{where.index}_dummy_xq", np.array(q, zp_dtype)),
                      r.add_const(f"{where.index}_dummy_scale", np.array(scale, np.float32)),
                      r.add_const(f"{where.index}_dummy_zp", np.array(zp, zp_dtype))]
            out = r.add_tensor(r.tensors[where.inputs[const_at]], "dummy_dq", "float32")
            dummy = Op(where.index, DQ, inputs, [out], {})
            r.origin[id(dummy)] = r.origin[id(where)]
            r.ops.insert(next(i for i, op in enumerate(r.ops) if op is where), dummy)
            where.inputs[const_at] = out
            break


# ---- 3. int8 Q -> DQ pairs to uint8 -----------------------------------------------------------------

def _zero_point(r: _Rewrite, op: Op):
    """A Q's or DQ's constant scalar zero point, or None."""
    if len(op.inputs) < 3 or op.inputs[2] < 0:
        return None
    zp = r.const(op.inputs[2])
    return None if zp is None or zp.size != 1 else zp


def _s8_to_u8(r: _Rewrite) -> None:
    for q in [op for op in r.ops if op.type == Q]:
        readers = r.readers(q.outputs[0])
        if len(readers) != 1 or r.edges(q) != 1 or r.makes_output(q) or readers[0].type != DQ:
            continue
        dq = readers[0]
        qz, dz = _zero_point(r, q), _zero_point(r, dq)
        if qz is None or dz is None or qz.dtype != np.int8 or dz.dtype != np.int8 or int(qz) != int(dz):
            continue
        u8 = r.add_const(f"{r.tensors[q.inputs[2]].name}/u8", np.array(int(qz.reshape(())) + 128, np.uint8))
        q.inputs[2] = dq.inputs[2] = u8
        r.retype(q.outputs[0], "uint8")


# ---- 4. the selectors ----------------------------------------------------------------------------

def _qdq_pair_equal(r: _Rewrite, q: Op, dq: Op) -> bool:
    """IsQDQPairSupported: scalar constant scales and zero points, equal on both sides."""
    def params(op):
        if len(op.inputs) < 3 or op.inputs[2] < 0:
            return None
        scale, zp = r.const(op.inputs[1]), r.const(op.inputs[2])
        if scale is None or zp is None or scale.size != 1 or zp.size != 1:
            return None
        return np.float32(scale.reshape(())), zp.dtype, int(zp.reshape(()))
    pq, pd = params(q), params(dq)
    return pq is not None and pq == pd


def _positive_scale(r: _Rewrite, q: Op) -> bool:
    scale = r.const(q.inputs[1])
    return scale is not None and scale.size == 1 and float(scale.reshape(())) > 0


@dataclass
class _Unit:
    node: Op
    dqs: list[Op]  # by input position: the DQ feeding it, None where an input is no DQ's
    qs: list[Op]

    @property
    def found_dqs(self) -> list[Op]:
        return [d for d in self.dqs if d is not None]

    def in_type(self, r: _Rewrite, k: int) -> str:
        return r.dtype(self.dqs[k].inputs[0])

    def out_type(self, r: _Rewrite) -> str:
        return r.dtype(self.qs[0].outputs[0])


def _unit(r: _Rewrite, node: Op) -> _Unit:
    dqs = [None if t < 0 else r.producer(t) for t in node.inputs]
    dqs = [p if p is not None and p.type == DQ else None for p in dqs]
    qs = [reader for t in node.outputs if t >= 0 for reader in r.readers(t) if reader.type == Q]
    return _Unit(node, dqs, qs)


def _checks(r: _Rewrite, u: _Unit, dq_inputs: int | None = None, q_optional: bool = False) -> bool:
    """CheckQDQNodes: every (or the first `dq_inputs`) input from a DQ read only here, and every
    output edge to a Q (or none, where allowed); the node makes no graph output."""
    actual = [t for t in u.node.inputs if t >= 0]
    wanted = len(actual) if dq_inputs is None else dq_inputs
    if len(u.found_dqs) != wanted:
        return False
    for dq in u.found_dqs:
        if r.edges(dq) != 1 or r.makes_output(dq):
            return False
    if not u.qs:
        return q_optional
    outputs = [t for t in u.node.outputs if t >= 0]
    return len(outputs) == len(u.qs) == r.edges(u.node) and not r.makes_output(u.node)


def _select_drop(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u, dq_inputs=1) or u.dqs[0] is None or not u.qs:
        return None
    t = u.in_type(r, 0)
    if t != u.out_type(r) or t not in INTEGER_8:
        return None
    if u.node.type in DROP_NEEDS_POSITIVE_SCALE and not _positive_scale(r, u.qs[0]):
        return None
    return "drop" if _qdq_pair_equal(r, u.qs[0], u.dqs[0]) else None


def _select_unary(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u, dq_inputs=1) or u.dqs[0] is None or not u.qs:
        return None
    return "qlinear" if u.in_type(r, 0) == u.out_type(r) and u.in_type(r, 0) in INTEGER_8 else None


def _select_binary(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u) or not u.qs or len(u.found_dqs) != 2:
        return None
    types = {u.in_type(r, 0), u.in_type(r, 1), u.out_type(r)}
    return "qlinear" if len(types) == 1 and types <= set(INTEGER_8) else None


def _select_variadic(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u) or not u.qs:
        return None
    types = {r.dtype(d.inputs[0]) for d in u.found_dqs} | {r.dtype(q.outputs[0]) for q in u.qs}
    return "qlinear" if len(types) == 1 and types <= set(INTEGER_8) else None


def _select_matmul(r: _Rewrite, u: _Unit) -> str | None:
    if len(u.found_dqs) == 1 and u.dqs[1] is not None and not u.qs:
        return _select_matmul_nbits(r, u)
    if len(u.found_dqs) != 2:
        return None
    a, b = u.in_type(r, 0), u.in_type(r, 1)
    if a == "int8" or not {a, b} <= set(INTEGER_8):
        return None
    if u.qs:
        return "qlinear" if _checks(r, u) and a == u.out_type(r) else None
    return "integer_to_float"


def _select_matmul_nbits(r: _Rewrite, u: _Unit) -> str | None:
    """DQMatMulToMatMulNBits: a constant 2-D int 2/4/8-bit weight, per tensor or per output
    column (axis 1), read by a MatMul whose A is a float activation."""
    dq = u.dqs[1]
    w, scale = r.const(dq.inputs[0]), r.const(dq.inputs[1])
    if w is None or scale is None or w.ndim != 2 or r.edges(dq) != 1 or r.makes_output(dq):
        return None
    per_column = scale.ndim == 1 and scale.size == w.shape[1] and int(dq.options.get("axis", 1)) == 1
    return "nbits" if scale.ndim == 0 or per_column or dq.options.get("block_size") else None


def _select_gemm(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u, q_optional=True) or len(u.found_dqs) < 2 or u.dqs[0] is None or u.dqs[1] is None:
        return None
    a, b = u.in_type(r, 0), u.in_type(r, 1)
    if not {a, b} <= set(INTEGER_8) or (a == "int8" and b != "int8"):
        return None
    if u.qs and a != u.out_type(r):
        return None
    if len(u.found_dqs) == 3:
        if float(u.node.options.get("beta", 1.0)) != 1.0 or u.in_type(r, 2) != "int32":
            return None
    return "qlinear"


def _select_conv(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u) or not u.qs or len(u.found_dqs) < 2:
        return None
    a, w = u.in_type(r, 0), u.in_type(r, 1)
    if a != u.out_type(r) or a == "int8" or not {a, w} <= set(INTEGER_8):
        return None
    return "qlinear" if len(u.found_dqs) == 2 or u.in_type(r, 2) == "int32" else None


def _select_where(r: _Rewrite, u: _Unit) -> str | None:
    if not _checks(r, u, dq_inputs=2) or not u.qs or u.dqs[1] is None or u.dqs[2] is None:
        return None
    types = {u.in_type(r, 1), u.in_type(r, 2), u.out_type(r)}
    return "qlinear" if len(types) == 1 and types <= set(INTEGER_8) else None


SELECTORS = {
    **{t: _select_drop for t in DROP_QDQ}, **{t: _select_unary for t in UNARY},
    **{t: _select_binary for t in BINARY}, **{t: _select_variadic for t in VARIADIC},
    "MatMul": _select_matmul, "Gemm": _select_gemm, "Conv": _select_conv, "Where": _select_where,
}


# ---- 4b. the actions: the unit's replacement, in onnxruntime's input order ---------------------------

def _params(dq_or_q: Op) -> list[int]:
    """(scale, zero point) inputs of a DQ or Q (-1 where the zero point is omitted)."""
    return [dq_or_q.inputs[1], dq_or_q.inputs[2] if len(dq_or_q.inputs) > 2 else -1]


def _act(r: _Rewrite, u: _Unit, how: str) -> None:
    node, t = u.node, u.node.type
    dqs, qs = u.dqs, u.qs
    if how == "drop":
        fused = Op(node.index, t, [dqs[0].inputs[0]] + node.inputs[1:], [qs[0].outputs[0]], dict(node.options), node.version)
        r.retype(qs[0].outputs[0], r.dtype(dqs[0].inputs[0]))
        r.replace_unit([dqs[0], node, qs[0]], fused)
        return
    if how == "nbits":
        # its weights and zero points as MatMulNBits stores them: unsigned (int8 ones offset by 128)
        w, scale, zp = dqs[1].inputs[0], *_params(dqs[1])
        unsigned = [t if t < 0 or r.tensors[t].dtype != "int8" else
                    r.add_const(f"{r.tensors[t].name}/unsigned", (r.const(t).astype(np.int16) + 128).astype(np.uint8))
                    for t in (w, zp)]
        fused = Op(node.index, MS + "MatMulNBits", [node.inputs[0], unsigned[0], scale, unsigned[1]], list(node.outputs),
                   {"axis": dqs[1].options.get("axis", 1)})
        r.replace_unit([dqs[1], node], fused)
        return
    found = u.found_dqs
    ins = [x for d in found for x in [d.inputs[0], *_params(d)]]
    if t == "MatMul" and how == "integer_to_float":
        a, b = found
        fused = Op(node.index, MS + "MatMulIntegerToFloat", [a.inputs[0], b.inputs[0], a.inputs[1], b.inputs[1],
                                                            _params(a)[1], _params(b)[1]], list(node.outputs), {})
        r.replace_unit([*found, node], fused)
        return
    out = [x for x in _params(qs[0])] if qs else []
    if t == "MatMul":
        fused = Op(node.index, "QLinearMatMul", ins + out, [qs[0].outputs[0]], {})
    elif t == "Gemm":
        a, b = dqs[0], dqs[1]
        c = dqs[2].inputs[0] if len(dqs) > 2 and dqs[2] is not None else -1
        fused = Op(node.index, MS + "QGemm", [a.inputs[0], *_params(a), b.inputs[0], *_params(b), c, *out],
                   [qs[0].outputs[0] if qs else node.outputs[0]], dict(node.options))
    elif t == "Where":
        fused = Op(node.index, MS + "QLinearWhere", [node.inputs[0]] + ins + out, [qs[0].outputs[0]], {})
    elif t == "Conv":
        fused = Op(node.index, "QLinearConv", ins + out, [qs[0].outputs[0]], dict(node.options))
    elif t == "Softmax":
        fused = Op(node.index, MS + "QLinearSoftmax", ins + out, [qs[0].outputs[0]],
                   {"axis": node.options.get("axis", -1), "opset": node.version})
    else:  # the unary, binary and variadic QLinear ops: inputs with their parameters, then the output's
        fused = Op(node.index, MS + "QLinear" + t, (out + ins) if t in VARIADIC else ins + out,
                   [q.outputs[0] for q in qs], dict(node.options))
    r.replace_unit([*found, node, *qs], fused)


def _select_and_act(r: _Rewrite) -> None:
    changed = True
    while changed:
        changed = False
        for node in list(r.ops):
            select = SELECTORS.get(node.type)
            if select is None or not any(op is node for op in r.ops):
                continue
            u = _unit(r, node)
            how = _clip_refused(r, node) or select(r, u)
            if how:
                _act(r, u, how)
                changed = True


def _clip_refused(r: _Rewrite, node: Op) -> None:
    """A Relu or Clip between a unit and its Q is one onnxruntime may fold into the Q: porter
    does not model that selection."""
    readers = [x for t in node.outputs for x in r.readers(t)]
    if len(readers) == 1 and readers[0].type in ("Relu", "Clip") and any(
            x.type == Q for t in readers[0].outputs for x in r.readers(t)):
        raise PorterError(f"onnxruntime QDQ: op {node.index} {node.type} is followed by a {readers[0].type} "
                          "and a QuantizeLinear, whose redundant-clip selection porter does not model")
    return None


# ---- 5. final cleanup ----------------------------------------------------------------------------

def _cleanup_dq_q(r: _Rewrite) -> None:
    for dq in [op for op in r.ops if op.type == DQ]:
        readers = r.readers(dq.outputs[0])
        if len(readers) != 1 or r.edges(dq) != 1 or readers[0].type != Q:
            continue
        q = readers[0]
        if not _qdq_pair_equal(r, q, dq) or (r.makes_output(q) and r.readers(q.outputs[0])):
            continue
        source, out = dq.inputs[0], q.outputs[0]
        if r.makes_output(q):
            producer = r.producer(source)
            if producer is None:
                continue
            producer.outputs = [out if t == source else t for t in producer.outputs]
        else:
            for reader in r.readers(out):
                reader.inputs = [source if t == out else t for t in reader.inputs]
        r.remove(dq)
        r.remove(q)


# ---- the whole pipeline --------------------------------------------------------------------------

def _refuse_level1_fusions(g: Graph) -> None:
    """quantize_static puts a Q after every MatMul; a MatMul read by an Add directly is one
    onnxruntime's level-1 MatMulAddFusion makes a Gemm of before its QDQ transformers run,
    which porter does not model in a QDQ graph."""
    for op in g.ops:
        readers = [x for x in g.ops if op.outputs[0] in x.inputs] if op.type == "MatMul" else []
        if len(readers) == 1 and readers[0].type == "Add" and op.outputs[0] not in g.outputs.values():
            raise PorterError(f"onnxruntime QDQ: op {op.index} MatMul is read by an Add directly, which onnxruntime "
                              "fuses into a Gemm first (MatMulAddFusion); porter does not model it in a QDQ graph")


def ort_runs(g: Graph, floats: str | None = None) -> QdqGraph:
    """The graph onnxruntime's CPU provider runs for the QDQ graph `g` (see the module's doc);
    `floats`: the float kernels of the CPU target constants are folded with (porter.reference.ort.cpu)."""
    _refuse_level1_fusions(g)
    r = _Rewrite(g)
    _fold_constants(r, floats)
    _unique_dqs(r)
    _where_dummy_dqs(r)
    _s8_to_u8(r)
    _select_and_act(r)
    _cleanup_dq_q(r)
    ops = [Op(i, op.type, op.inputs, op.outputs, op.options, op.version) for i, op in enumerate(r.ops)]
    origin = {i: r.origin[id(op)] for i, op in enumerate(r.ops)}
    graph = Graph(g.format, g.path, r.tensors, ops, dict(g.inputs), dict(g.outputs), dict(g.metadata))
    return QdqGraph(graph, origin, {op.index: op.type for op in g.ops})


def kernels_of_file_ops(g: Graph) -> dict[int, str]:
    """For each op of the QDQ graph `g` that computes (not a Q or DQ), the kernel onnxruntime runs
    it in: the quantised op its node unit is fused into, with its operand types, or the op
    itself in float (`porter inspect` reports it per layer)."""
    q = ort_runs(g)
    kernels: dict[int, str] = {}
    for op in q.graph.ops:
        if op.type in (Q, DQ):
            continue
        name = op.type.removeprefix(MS)
        if op.type in ("QLinearMatMul", MS + "QGemm"):
            a, b = q.graph.tensor(op.inputs[0]).dtype, q.graph.tensor(op.inputs[3]).dtype
            name = f"{name} ({a} x {b})"
        elif not name.startswith("QLinear") and all(q.graph.tensor(t).dtype not in INTEGER_8
                                                    for t in op.inputs if t >= 0):
            name = f"{name} in float32"
        for i in q.origin[op.index]:
            if g.ops[i].type not in (Q, DQ):
                kernels[i] = name
    return kernels
