"""Which ops onnxruntime's CPU provider runs in float16 on x86, and where it rounds a float16
graph's values to float16, decided by its own transformers' rules (onnxruntime 1.32).

Measured on onnxruntime 1.32 (tests/test_ort_float16.py builds a one-op float16 model of each op
and reads the graph onnxruntime optimises it into, `SessionOptions.optimized_model_filepath`):
only data movement (FLOAT16_MOVES), ops whose result is exact in either precision (FLOAT16_PICKS)
and LayerNormalization (FLOAT16_COMPUTES: the float32 kernel between an exact widening and a
rounding to float16) have float16 CPU kernels; every other op runs its float32 kernel between
Casts. Which value is rounded where then follows from the order of the session's graph
transformations (its verbose log: inference_session.cc's TransformGraph; the sources:
core/optimizer/insert_cast_transformer.cc, matmul_add_fusion.cc, fuse_initializers_transformer.cc),
each step modelled on a small copy of the graph (`_Sim`):

1. level 1 on the float16 graph, before any op has a kernel: MatMulAddFusion (matmul_add_fusion.cc)
   makes Gemm of a MatMul and its bias Add, reshaping a rank-3 input to 2-D around it, except where
   it keeps an attention pattern for AttentionFusion (the three projections of a LayerNorm whose
   fourth reader is the residual Add, and the Add of that residual's other operand) or the input
   is an attention context (Reshape <- Transpose <- MatMul <- Softmax); identities and constants
   go (EliminateIdentity, EliminateDropout, ConstantFolding, ConstantSharing of scalars);
2. partitioning gives an op the CPU provider where it has a kernel for its types, so only
   float16-kernel ops (and those on other types) are placed; a Softmax, which has none, is replaced
   by its ONNX function body (ReduceMax, Sub, Exp, ReduceSum, Div), unplaced;
3. level 2 then fuses the MatMul + Add pairs left (no attention pattern kept now, the Softmax is
   gone), and its reshapes stay unplaced as their MatMul is;
4. InsertCastTransformer (insert_cast_transformer.cc): first ForceSingleNodeCPUFloat16ToFloat32
   unplaces a float16-kernel op whose float16 inputs all come from, and outputs all go to, ops
   that need casts; then every unplaced op with a float16 input gets a Cast to float32 on each
   (one per value, shared by its readers) and one back to float16 on each float16 output; then
   RemoveDuplicateCastTransformer drops a float32 -> float16 -> float32 pair where the first Cast
   is one it inserted (its name tells) or loses nothing, so consecutive float32 work is not
   rounded; FuseInitializersTransformer makes each inserted Cast of a float16 initializer with one
   reader a float32 initializer, and leaves a shared one a node;
5. level 2 runs again on the float32 ops (SkipLayerNormalization, MatMulScaleFusion, ...):
   those are porter's own models of them (porter.recover), which see the roundings as ops and
   the constants behind shared Casts as computed values (`Float16Plan.cast_constants`).

What canonicalisation takes from it (`Float16Plan`): which inputs of the file's ops read a value
rounded to float16 (a float32 result that entered a float16 op on its way), which ops' outputs
are rounded (float16 LayerNormalization, a Cast to float16 that stays, a float16 graph output),
and which Softmax ops run as their function body (porter.reference.ops.softmax_function).

porter.recover.canonical.float16 writes the graph that way; `porter inspect` reports it per layer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, topological_order

FLOAT16_MOVES = frozenset({"Reshape", "Transpose", "Concat", "Unsqueeze", "Squeeze", "Expand", "Slice",
                           "Gather", "GatherElements", "GatherND", "Split", "Identity", "Flatten", "Shape"})
# exact in either precision: one of the inputs (Relu is replaced by its function body, Max(x, 0)),
# or a value every float16 input gives exactly
FLOAT16_PICKS = frozenset({"Max", "Min", "Clip", "Relu", "Sign", "IsNaN"})
FLOAT16_COMPUTES = frozenset({"LayerNormalization"})
FLOAT16_KERNELS = FLOAT16_MOVES | FLOAT16_PICKS | FLOAT16_COMPUTES

HALF = "float16"
# Ops onnxruntime's level-1 rules remove (EliminateIdentity, EliminateDropout).
ELIMINATED = {"Identity", "Dropout"}
# A formal input of these is variadic: InsertCastTransformer's isolation test looks only at the
# first value each formal input has.
VARIADIC = {"Concat", "Max", "Min", "Sum", "Mean"}


@dataclass
class Float16Plan:
    # file op -> its input positions that read a value rounded to float16
    rounded_reads: dict[int, set[int]] = field(default_factory=dict)
    # file ops whose outputs onnxruntime rounds to float16 (its float16 kernel, a Cast it keeps, a
    # float16 graph output)
    rounded_outputs: set[int] = field(default_factory=set)
    # file op -> its input positions that read a Cast-to-float16's float32 input instead of its
    # output (onnxruntime dropped the cast for them)
    uncast_reads: dict[int, set[int]] = field(default_factory=dict)
    # file Softmax ops run as their ONNX function body in float32
    softmax_bodies: set[int] = field(default_factory=set)
    # file ops run by a float16 kernel (for reports)
    half_ops: set[int] = field(default_factory=set)
    # float16 constants that reach float32 ops through a Cast node onnxruntime keeps (one Cast
    # shared by several readers): its fusions do not take them as constants
    cast_constants: set[int] = field(default_factory=set)


def computes_in_float16(g: Graph) -> bool:
    """Whether an ONNX graph has an op (other than a Cast) that reads or writes a float16 value."""
    return g.format == "onnx" and any(
        op.type != "Cast" and any(t >= 0 and g.tensor(t).dtype == HALF and g.tensor(t).data is None
                                  for t in [*op.inputs, *op.outputs]) for op in g.ops)


def placement(g: Graph, shapes: dict | None = None) -> Float16Plan:
    """onnxruntime's cast placement for graph g (ONNX, float16). `shapes`: value name -> dims as
    onnxruntime sees them where they differ from g's (a dynamic-axes file: its symbolic dims);
    None takes g's own."""
    _refuse_unmodelled(g)
    sim = _Sim(g, shapes)
    sim.eliminate_identities()
    sim.fold_constants()
    sim.share_scalar_constants()
    sim.fuse_matmul_add(keep_attention=True)
    sim.partition()
    sim.fuse_matmul_add(keep_attention=False)
    sim.force_isolated_to_float32()
    sim.insert_casts()
    sim.remove_duplicate_casts()
    return sim.plan()


def _refuse_unmodelled(g: Graph) -> None:
    """float16 spellings whose level-1 fusions porter does not model (they would make a float16
    kernel of float16 ops): a LayerNorm written out (LayerNormFusionL1) and the Gelu op of opset
    20 (whose function body onnxruntime inlines in float16 terms)."""
    for op in g.ops:
        half = any(t >= 0 and g.tensor(t).dtype == HALF for t in [*op.inputs, *op.outputs])
        if not half:
            continue
        if op.type == "Gelu":
            raise PorterError(f"float16 ONNX compute: not reproduced (op {op.index} Gelu in float16: onnxruntime "
                              "inlines its function body, which porter does not model)")
        if op.type == "ReduceMean" and any(u.type == "Sub" for u in g.users(op.outputs[0])):
            raise PorterError(f"float16 ONNX compute: not reproduced (op {op.index} ReduceMean of a LayerNorm written "
                              "out in float16 ops, which onnxruntime's LayerNormFusionL1 makes a float16 "
                              "LayerNormalization; porter reproduces the LayerNormalization op)")


@dataclass
class _Node:
    index: int
    type: str
    inputs: list[str]  # value names; "" for an absent input
    outputs: list[str]
    origin: int | None  # the file op this node computes (None: a reshape onnxruntime adds)
    slots: list  # per input: the file (op, input position) it reads for, or None
    options: dict = field(default_factory=dict)
    placed: bool = False  # given the CPU provider (a kernel for its types)
    inserted: bool = False  # a Cast InsertCastTransformer added


class _Sim:
    """The graph as onnxruntime's transformers see it: values by name, nodes in creation order."""

    def __init__(self, g: Graph, shapes: dict | None):
        self.g = g
        self.dtype: dict[str, str] = {}
        self.shape: dict[str, tuple | None] = {}  # None: unknown to onnxruntime
        self.constant: dict[str, np.ndarray] = {}
        self.graph_inputs = {f"t{t}" for t in g.inputs.values()}
        self.graph_outputs = {f"t{t}" for t in g.outputs.values()}
        self.file_tensor: dict[str, int] = {}
        for t in g.tensors:
            name = f"t{t.index}"
            self.dtype[name] = t.dtype
            self.file_tensor[name] = t.index
            # a constant's shape is its data's; a value's is what onnxruntime sees (a dynamic-axes
            # file's symbolic dims, or nothing where its inference tells nothing)
            seen = t.shape if t.data is not None or shapes is None else shapes.get(t.name)
            self.shape[name] = None if seen is None else tuple(seen)
            if t.data is not None:
                self.constant[name] = t.data
        self.nodes: list[_Node | None] = []
        for op in g.ops:
            self._add(op.type, [f"t{i}" if i >= 0 else "" for i in op.inputs], [f"t{o}" for o in op.outputs],
                      op.index, [(op.index, i) for i in range(len(op.inputs))], dict(op.options))
        self.softmax_bodies: set[int] = set()
        self.shared_constants: dict[str, str] = {}  # a constant -> the one ConstantSharing kept

    # ---- the graph -------------------------------------------------------------------------

    def _add(self, type_, inputs, outputs, origin, slots, options=None, placed=False, inserted=False) -> _Node:
        node = _Node(len(self.nodes), type_, list(inputs), list(outputs), origin, list(slots),
                     options or {}, placed, inserted)
        self.nodes.append(node)
        return node

    def live(self) -> list[_Node]:
        return [n for n in self.nodes if n is not None]

    def producer(self, value: str) -> _Node | None:
        return next((n for n in self.live() if value in n.outputs), None)

    def readers(self, value: str) -> list[tuple[_Node, int]]:
        return [(n, i) for n in self.live() for i, v in enumerate(n.inputs) if v == value]

    def _new_value(self, like: str, dtype: str, shape=None) -> str:
        name = f"{like}/{len(self.dtype)}"
        self.dtype[name] = dtype
        self.shape[name] = self.shape.get(like) if shape is None else tuple(shape)
        return name

    def _remove(self, node: _Node) -> None:
        self.nodes[node.index] = None

    def _static(self, value: str) -> bool:
        """Whether onnxruntime knows every dimension of a value."""
        shape = self.shape.get(value)
        return shape is not None and all(isinstance(d, int) and d > 0 for d in shape)

    def _is_half(self, value: str) -> bool:
        return bool(value) and self.dtype.get(value) == HALF

    def _has_half(self, node: _Node) -> bool:
        return any(self._is_half(v) for v in [*node.inputs, *node.outputs])

    def _topological(self) -> list[_Node]:
        return topological_order(self.live(), lambda n: n.inputs, lambda n: n.outputs)

    # ---- level 1 ---------------------------------------------------------------------------

    def eliminate_identities(self) -> None:
        for node in self.live():
            if node.type not in ELIMINATED or node.outputs[0] in self.graph_outputs:
                continue
            source, out = node.inputs[0], node.outputs[0]
            for reader, i in self.readers(out):
                reader.inputs[i] = source
            self._remove(node)

    def fold_constants(self) -> None:
        """ConstantFolding: an op of constants with a kernel for its types (a float16 op only where
        it has a float16 kernel) becomes an initializer; Shape of a fully known shape too."""
        for node in self._topological():
            if node.type == "Shape" and self._static(node.inputs[0]):
                self._fold(node)
                continue
            if not node.inputs or not all(not v or v in self.constant for v in node.inputs):
                continue
            if self._has_half(node) and node.type not in FLOAT16_KERNELS | {"Cast"}:
                continue
            self._fold(node)

    def _fold(self, node: _Node) -> None:
        if any(out in self.graph_outputs for out in node.outputs):
            return
        for out in node.outputs:
            self.constant[out] = None  # its value is canonicalisation's to compute
        self._remove(node)

    def share_scalar_constants(self) -> None:
        """ConstantSharing: one-value float16 initializers of equal bits become one, which every
        reader of any of them then reads."""
        kept: dict[tuple, str] = {}
        for value in sorted(self.constant, key=lambda v: self.file_tensor.get(v, -1)):
            data = self.constant[value]
            if self.dtype.get(value) != HALF or data is None or np.asarray(data).size != 1 \
                    or value in self.graph_inputs:
                continue
            key = (np.asarray(data).shape, np.asarray(data, np.float16).view(np.uint16).item())
            self.shared_constants[value] = kept.setdefault(key, value)
        for node in self.live():
            node.inputs = [self.shared_constants.get(v, v) for v in node.inputs]

    def fuse_matmul_add(self, keep_attention: bool) -> None:
        """MatMulAddFusion: MatMul + Add of a bias -> (Reshape ->) Gemm (-> Reshape)."""
        kept_lns, kept_adds = set(), set()
        for node in self._topological():
            if self.nodes[node.index] is None or node.type != "MatMul":
                continue
            readers = self.readers(node.outputs[0])
            if len(readers) != 1 or node.outputs[0] in self.graph_outputs:
                continue
            add, position = readers[0]
            if add.type != "Add" or add.placed != node.placed:
                continue
            a, b = node.inputs[:2]
            if self.dtype.get(a) != self.dtype.get(add.inputs[0]) or self.dtype.get(a) not in (HALF, "float32"):
                continue
            b_shape, a_shape = self.shape.get(b) or (), self.shape.get(a) or ()
            if len(b_shape) != 2 or not a_shape:
                continue
            reshape = len(a_shape) != 2
            if reshape:
                if self._attention_context(node):
                    continue
                if keep_attention and self._attention_pattern(node, add, kept_lns, kept_adds):
                    continue
                if not self._static(a) or not self._static(b):
                    continue
            bias = add.inputs[1 - position]
            n_out = b_shape[1]
            bias_shape = self.shape.get(bias) or ()
            if tuple(bias_shape) != (n_out,) and (reshape or len(bias_shape) != 2):
                continue
            self._gemm(node, add, position, reshape)

    def _attention_context(self, matmul: _Node) -> bool:
        chain = ["Reshape", "Transpose", "MatMul", "Softmax"]
        node = self.producer(matmul.inputs[0])
        for i, kind in enumerate(chain):
            if node is None or node.type != kind:
                return False
            if i < len(chain) - 1:
                node = self.producer(node.inputs[0])
        return True

    def _attention_pattern(self, matmul: _Node, add: _Node, kept_lns: set, kept_adds: set) -> bool:
        ln = self.producer(matmul.inputs[0])
        if (ln is not None and ln.index in kept_lns) or add.index in kept_adds:
            return True
        if ln is None or ln.type != "LayerNormalization":
            return False
        readers = [n for n, _ in self.readers(ln.outputs[0])]
        kinds = [n.type for n in readers]
        if kinds.count("Add") != 1 or kinds.count("MatMul") != 3 \
                or kinds.count("Shape") != len(readers) - 4:
            return False
        residual = next(n for n in readers if n.type == "Add")
        other = residual.inputs[1] if residual.inputs[0] == ln.outputs[0] else residual.inputs[0]
        attention_add = self.producer(other)
        if attention_add is None or attention_add.type != "Add":
            return False
        kept_lns.add(ln.index)
        kept_adds.add(attention_add.index)
        return True

    def _gemm(self, matmul: _Node, add: _Node, position: int, reshape: bool) -> None:
        a, b = matmul.inputs[:2]
        bias = add.inputs[1 - position]
        out = add.outputs[0]
        gemm_in, gemm_out = a, out
        if reshape:  # MatMulAddFusion's reshapes take the MatMul's provider (none before partitioning)
            gemm_in = self._new_value(a, self.dtype[a])
            gemm_out = self._new_value(out, self.dtype[out])
            self._add("Reshape", [a], [gemm_in], None, [(matmul.origin, 0)], placed=matmul.placed)
            self._add("Reshape", [gemm_out], [out], None, [None], placed=matmul.placed)
        slots = [None if reshape else (matmul.origin, 0), (matmul.origin, 1), (add.origin, 1 - position)]
        self._add("Gemm", [gemm_in, b, bias], [gemm_out], matmul.origin, slots, placed=matmul.placed)
        self._remove(matmul)
        self._remove(add)

    # ---- partitioning ----------------------------------------------------------------------

    def partition(self) -> None:
        for node in list(self.live()):
            if not self._has_half(node) or node.type in FLOAT16_KERNELS | {"Cast", "Shape"}:
                node.placed = True
            elif node.type == "Softmax":
                self._inline_softmax(node)

    def _inline_softmax(self, node: _Node) -> None:
        x, out = node.inputs[0], node.outputs[0]
        axis = node.options.get("axis", -1)
        names = [self._new_value(out, HALF) for _ in range(4)]
        shape = self.shape.get(x)
        reduced = None if shape is None else tuple(1 if i == len(shape) - 1 else d for i, d in enumerate(shape))
        self.shape[names[0]] = self.shape[names[3]] = reduced
        top, centred, exps, total = names
        origin = node.origin
        self._add("ReduceMax", [x], [top], origin, [(origin, 0)], {"axis": axis})
        self._add("Sub", [x, top], [centred], origin, [(origin, 0), None])
        self._add("Exp", [centred], [exps], origin, [None])
        self._add("ReduceSum", [exps], [total], origin, [None], {"axis": axis})
        self._add("Div", [exps, total], [out], origin, [None, None])
        self._remove(node)
        self.softmax_bodies.add(origin)

    # ---- InsertCastTransformer -------------------------------------------------------------

    def _needs_cast(self, node: _Node) -> bool:
        """NodeNeedsInputCastToFp32: unplaced, with a float16 input."""
        return not node.placed and any(self._is_half(v) for v in node.inputs)

    def _half_slots(self, node: _Node) -> set[int]:
        """The input positions the isolation test looks at: float16 values, the first one of a
        variadic input only."""
        positions = range(1) if node.type in VARIADIC else range(len(node.inputs))
        return {i for i in positions if self._is_half(node.inputs[i])}

    def force_isolated_to_float32(self) -> None:
        """ForceSingleNodeCPUFloat16ToFloat32, node by node in graph order."""
        for node in self.live():
            if not node.placed or not self._has_half(node):
                continue
            half_in = self._half_slots(node)
            edges = [(i, self.producer(node.inputs[i])) for i in range(len(node.inputs)) if node.inputs[i]]
            edges = [(i, p) for i, p in edges if p is not None]
            if not edges or any(o in self.graph_outputs for o in node.outputs) or not half_in:
                continue
            if any(i in half_in and not self._needs_cast(p) for i, p in edges):
                continue
            half_out = [o for o in node.outputs if self._is_half(o)]
            if not half_out or any(not self._needs_cast(r) for o in half_out for r, _ in self.readers(o)):
                continue
            node.placed = False

    def insert_casts(self) -> None:
        widened: dict[str, str] = {}
        for node in self._topological():
            if node.placed or not any(self._is_half(v) for v in node.inputs):
                continue
            for i, v in enumerate(node.inputs):
                if not self._is_half(v):
                    continue
                if v not in widened:
                    widened[v] = self._new_value(v, "float32")
                    self._add("Cast", [v], [widened[v]], None, [None], {"to": "float32"}, placed=True, inserted=True)
                node.inputs[i] = widened[v]
            for j, out in enumerate(node.outputs):
                if self._is_half(out):
                    computed = self._new_value(out, "float32")
                    node.outputs[j] = computed
                    self._add("Cast", [computed], [out], None, [None], {"to": HALF}, placed=True, inserted=True)
            node.placed = True
        self.widened = widened

    def _unsafe(self, src: str, dst: str, node: _Node) -> bool:
        """RemoveDuplicateCastTransformer's UnsafeCast: whether a cast from src to dst can lose
        information (a narrowing float cast does not count where InsertCastTransformer added it)."""
        kinds = {"bool": ("bool", 1), "int8": ("int", 8), "int16": ("int", 16), "int32": ("int", 32),
                 "int64": ("int", 64), "uint8": ("uint", 8), "uint16": ("uint", 16), "uint32": ("uint", 32),
                 "uint64": ("uint", 64), "float16": ("float", 16), "bfloat16": ("float", 16),
                 "float32": ("float", 32), "float64": ("float", 64)}
        if src not in kinds or dst not in kinds:
            return True
        (src_kind, src_bits), (dst_kind, dst_bits) = kinds[src], kinds[dst]
        if src_kind not in ("bool", "uint") and dst_kind == "uint":
            return True
        if src_kind == "float" and dst_kind != "float":
            return True
        if src_kind == "uint" and dst_kind == "int" or src_kind in ("int", "uint") and dst_kind == "float":
            return dst_bits <= src_bits
        if {src, dst} == {"float16", "bfloat16"}:
            return True
        return src_bits > dst_bits and not node.inserted

    def remove_duplicate_casts(self) -> None:
        for node in list(self.nodes):
            if node is None or self.nodes[node.index] is None or node.type != "Cast":
                continue
            src, dst = self.dtype.get(node.inputs[0]), self.dtype.get(node.outputs[0])
            lossy = self._unsafe(src, dst, node)
            readers = self.readers(node.outputs[0])
            removed, kept = [], []
            inconsistent = False
            for reader, _ in readers:
                if reader.type != "Cast":
                    continue
                src1, dst1 = self.dtype.get(reader.inputs[0]), self.dtype.get(reader.outputs[0])
                if lossy and self._unsafe(dst1, src1, reader):
                    inconsistent = True
                    break
                if reader.outputs[0] not in self.graph_outputs and src == dst1 and src1 == dst:
                    removed.append(reader)
                else:
                    kept.append(reader)
            if inconsistent:
                continue
            for cast in removed:
                for later, i in self.readers(cast.outputs[0]):
                    later.inputs[i] = node.inputs[0]
                self._remove(cast)
            if readers and len(removed) + len(kept) == len(readers) and node.outputs[0] not in self.graph_outputs:
                for cast in kept:
                    cast.inputs[0] = node.inputs[0]
                self._remove(node)

    # ---- what canonicalisation takes -------------------------------------------------------

    def _source(self, value: str) -> tuple[_Node | None, bool]:
        """The computation a value reaching a reader comes from (a node of the file's op; None for a
        graph input or a constant), through the casts and reshapes onnxruntime added, and whether
        one of those casts narrowed it to float16 on the way."""
        narrowed = False
        while value:
            node = self.producer(value)
            if node is None or node.origin is not None:
                return node, narrowed
            narrowed |= node.type == "Cast" and self._is_half(node.outputs[0]) and not self._is_half(node.inputs[0])
            value = node.inputs[0]
        return None, narrowed

    def _rounded(self, value: str) -> bool:
        """Whether a value reaching a reader was computed in float32 and rounded to float16 on its way."""
        node, narrowed = self._source(value)
        return narrowed and node is not None and not self._runs_half(node)

    def _runs_half(self, node: _Node) -> bool:
        """A node that computes on float16 values (its outputs are float16 where it ran)."""
        return node.placed and any(self._is_half(o) for o in node.outputs) and node.type != "Cast"

    def _skips_cast(self, value: str, slot: tuple[int, int]) -> bool:
        """Whether a reader of a file's Cast to float16 reads that Cast's float32 input instead:
        RemoveDuplicateCastTransformer drops the Cast it inserted after it for float32 readers, and
        takes its own Cast away from them (it sees no loss in a narrowing it made itself)."""
        t = self.g.ops[slot[0]].inputs[slot[1]]
        cast = self.g.producer(t)
        if cast is None or cast.type != "Cast" or self.g.tensor(t).dtype != HALF \
                or self.g.tensor(cast.inputs[0]).dtype != "float32":
            return False
        node, _ = self._source(value)
        return node is None or node.origin != cast.index

    def plan(self) -> Float16Plan:
        plan = Float16Plan(softmax_bodies=set(self.softmax_bodies))
        for node in self.live():
            if node.origin is not None and not node.inserted and self._runs_half(node):
                plan.half_ops.add(node.origin)
                if node.type in FLOAT16_COMPUTES:
                    plan.rounded_outputs.add(node.origin)
            if node.type == "Cast" and not node.inserted and node.origin is not None \
                    and self.dtype.get(node.outputs[0]) == HALF and self.dtype.get(node.inputs[0]) != HALF:
                plan.rounded_outputs.add(node.origin)
            for position, value in enumerate(node.inputs):
                slot = node.slots[position] if position < len(node.slots) else None
                if slot is None:
                    continue
                if self._rounded(value):
                    plan.rounded_reads.setdefault(slot[0], set()).add(slot[1])
                if self._skips_cast(value, slot):
                    plan.uncast_reads.setdefault(slot[0], set()).add(slot[1])
        # a float16 graph output (torch's .half() export) is the float16 value onnxruntime returns
        for t in self.g.outputs.values():
            producer = self.g.producer(t)
            if producer is not None and self.g.tensor(t).dtype == HALF and self._rounded(f"t{t}"):
                plan.rounded_outputs.add(producer.index)
        plan.cast_constants = self._cast_constants()
        return plan

    def _cast_constants(self) -> set[int]:
        """float16 constants that float32 ops read through one shared inserted Cast (two or more
        reads: FuseInitializersTransformer keeps such a Cast a node), with every constant
        ConstantSharing merged into them."""
        shared = {value for value, cast in self.widened.items()
                  if value in self.constant and len(self.readers(cast)) > 1}
        return {self.file_tensor[v] for v in self.constant
                if v in self.file_tensor and self.shared_constants.get(v, v) in shared}
