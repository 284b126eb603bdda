"""Canonicalisation: a TFLite or ONNX graph in one small op vocabulary, before any pattern.

Exporters spell the same computation many ways: an extra RESHAPE, a full-range STRIDED_SLICE, a
CAST to the type a tensor already has, position ids computed from constants, a MatMul and an
Add where another writes one FULLY_CONNECTED. Recovery should see none of that. `canonicalise`
returns a graph whose ops are porter.reference.ops' vocabulary (lower-case kinds shared by both
formats) in which

- every op is translated from its format's spelling (`TFLITE` in tflite.py and `ONNX` in onnx.py, one small
  function per op type), Linear layers lifted whole (a FULLY_CONNECTED; a MatMul with a constant
  weight and its bias Add; onnxruntime's DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul
  chain) with their weights already in porter's [out, in] layout;
- everything computable from constants is folded, in the reference runtime's arithmetic;
- identity ops are gone (a view to the same shape, a full-range slice, a cast to the same type,
  a multiplication by one, an addition of zero, an expand to the same shape, Identity, Dropout);
- chains of views (reshape, squeeze, unsqueeze, flatten) are one view.

Removing an identity is exact; nothing here reassociates float arithmetic. Each canonical op
keeps the indices of the file's ops it stands for (`Canonical.origin`), and every file op that
needs no step any more is in `Canonical.explained` with the reason, so errors and the
every-op-explained invariant still name the file's own ops.

The work is split by what it serves: builder.py (what the translations share), tflite.py and
onnx.py (one module per source format), fold.py (folding, identities, fusions, lifting),
views.py (view shapes and merges), float16.py (a float16 ONNX graph as float32 ops and the
roundings onnxruntime makes, placed by porter.frontends.ort_float16); this module is the driver.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op, topological_order
from porter.ir.encoder import Reference
from porter.frontends import ort_float16
from porter.recover.canonical.builder import Builder, Pass
from porter.recover.canonical.float16 import Float16Translation, place_product_roundings
from porter.recover.canonical.fold import GATHERS, gathers_as_slices, settle, simplify
from porter.recover.canonical.onnx import translate_onnx
from porter.recover.canonical.tflite import translate_tflite
from porter.recover.canonical.window import bind as bind_window
from porter.frontends.schemes import assert_scheme_reproduced
from porter.reference.ort import cpu as ort_cpus
from porter.reference.ort.cpu import OrtCpu

__all__ = ["Canonical", "canonicalise", "GATHERS", "gathers_as_slices"]


@dataclass
class Canonical:
    graph: Graph  # ops in the canonical vocabulary, in execution order
    reference: Reference
    ort_cpu: "OrtCpu | None"  # ONNXRUNTIME_CPU: the CPU whose onnxruntime kernels the ops follow
    origin: dict[int, tuple[int, ...]]  # canonical op index -> the file's op indices
    explained: dict[int, str] = field(default_factory=dict)  # file op -> why it needs no step
    source: Graph | None = None  # the file's own graph

    def file_ops(self, canonical_ops) -> list[int]:
        return sorted({i for c in canonical_ops for i in self.origin[c]})

    def describe(self, canonical_op: int) -> str:
        """The file's ops behind a canonical op, as errors name them."""
        g = self.source
        return "; ".join(f"op {i} {g.ops[i].type}" for i in self.origin[canonical_op])


def _topological(ops: list[Op]) -> list[Op]:
    """The ops in an order where every tensor is made before it is read (fusions append their
    op after the ops it replaces), otherwise keeping the given order."""
    return topological_order(sorted(ops, key=lambda o: o.index), lambda op: op.inputs, lambda op: op.outputs)


def _ort_seen_shapes(g: Graph) -> dict:
    """The shapes onnxruntime sees in a dynamic-axes file (its symbolic dimensions unbound)."""
    from porter.recover.canonical.ort_shapes import value_shapes

    return value_shapes(g.path)


def canonicalise(g: Graph, ort_cpu: OrtCpu | None = None, window: int | None = None) -> Canonical:
    """ort_cpu: for an ONNX graph, the CPU whose onnxruntime kernels the canonical ops follow
    (the u8 x s8 dot of its quantised layers, its softmax); None takes this machine's. window:
    the length the inputs' dynamic dimensions are bound to (window.py: batch 1; None: the
    position table's size)."""
    reference = {"tflite": Reference.LITERT_BUILTIN, "onnx": Reference.ONNXRUNTIME_CPU}.get(g.format)
    if reference is None:
        raise PorterError(f"porter recovers TFLite and ONNX graphs, not {g.format}")
    if reference == Reference.ONNXRUNTIME_CPU and ort_cpu is None:
        ort_cpu = ort_cpus.host_target()
    dynamic = any(d < 0 for t in g.inputs.values() for d in g.tensor(t).shape)
    g = bind_window(g, window)
    assert_scheme_reproduced(g)  # a scheme porter does not reproduce is refused by its name, first
    b = Builder(g, ort_cpu if reference == Reference.ONNXRUNTIME_CPU else None)
    half = None
    if ort_float16.computes_in_float16(g):  # onnxruntime's float16 graph: float32 ops and roundings
        half = Float16Translation(b, ort_float16.placement(g, _ort_seen_shapes(g) if dynamic else None))
    translate = translate_tflite if g.format == "tflite" else translate_onnx
    explained: dict[int, str] = {}
    folded = []
    for file_op in g.ops:
        start = len(b.ops)
        op = half.before(file_op) if half else file_op
        translate(b, op)
        if half:
            half.after(file_op, op)
        if len(b.ops) == start:
            explained[op.index] = "folded into a constant"
        folded += [c for c in b.ops[start:] if settle(b, g, c, reference)]
    p = Pass(b, g.outputs, reference)
    p.explained.update(explained)
    for op in folded:
        p.drop(op, "folded into a constant")
    simplify(p, reference)
    if half:
        place_product_roundings(p)
    kept = _topological([op for op in p.ops if op is not None])
    ops, origin = [], {}
    for i, op in enumerate(kept):
        origin[i] = b.origin[op.index]
        ops.append(Op(i, op.type, op.inputs, op.outputs, op.options))
    # stored_forms: the narrower constants folded weights were computed from (fold.py)
    graph = Graph(g.format, g.path, b.tensors, ops, dict(g.inputs), p.outputs,
                  {**g.metadata, "stored_forms": b.stored, "ort_cast_constants": b.cast_constants,
                   "float16_plan": half.plan if half else None})
    return Canonical(graph, reference, b.ort_cpu, origin, p.explained, g)

