"""Which of onnxruntime's graph fusions fire on a decoder, and so which kernels run.

onnxruntime (ORT_ENABLE_ALL, the goldens' level) rewrites spellings it recognises into fused
kernels whose float arithmetic differs from the ops they replace; where a fusion does not fire
the ops run one by one. Reproducing onnxruntime bit for bit therefore means deciding, per block,
whether its fusion fires, by the fusion's own conditions (read from onnxruntime 1.32's
optimizer sources, core/optimizer/*_fusion.cc): these are spelling rules by nature, and they are
written below as patterns over canonical ops that read like the subgraphs they name.

- GeluFusion: (x * 0.5) * (erf(x / sqrt 2) + 1), or (x * (erf(x / sqrt 2) + 1)) * 0.5 -> Gelu.
- FastGeluFusion: 0.5x (1 + tanh(0.7978845834732056 (x + 0.044715 x^3))) in two spellings -> FastGelu.
- MatMulAddFusion: MatMul of a rank-2 input + Add -> Gemm (the bias becomes C).
- SkipLayerNormFusion: Add -> LayerNormalization, the sum read by nothing else, both operands
  of rank 3 with equal static or equally named symbolic dimensions -> SkipLayerNormalization
  (porter.recover.canonical.ort_shapes, which the encoder shares).
- QuickGeluFusion: x * sigmoid(x) -> QuickGelu (alpha 1), whose kernel on AVX-512F CPUs caps the
  logistic at 1 where Sigmoid's does not (porter.reference.ort.floats.quick_gelu). Its alpha form,
  x * sigmoid(x * alpha), computes what the ops do on every CPU, so it needs no rule.
"""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Graph
from porter.ir.decoder import BIAS_ADD, BIAS_GEMM, BIAS_NONE
from porter.recover.canonical import Canonical
from porter.recover.engine import Const, Match, Op, Var, match



def _value(expected: float, exact: float | None = None):
    """A one-value constant equal to `expected` as float32 (onnxruntime's IsInitializerWithExpectedValue)."""
    values = {np.float32(expected)} | ({np.float32(exact)} if exact is not None else set())

    def close(t, g) -> bool:
        if t.data.size != 1 or t.data.dtype.kind != "f":
            return False
        v = np.float32(t.data.reshape(-1)[0])
        return any(abs(float(v) - float(e)) <= 1e-7 * max(1.0, abs(float(e))) for e in values)
    return Const(where=close)


def _spelled_pow(op, g) -> bool:
    """An op canonicalisation made of the file's Pow (porter.recover.canonical _onnx_pow)."""
    return op.options.get("spelled") == "pow"


def _erf_part(x):
    return Op("add", Op("erf", Op("div", x, _value(np.sqrt(2), 1.4142099618911743), name="div"), name="erf"),
              _value(1.0), commutative=True, name="add")


def _gelu_patterns():
    x = Var("x")
    first = Op("mul", Op("mul", x, _value(0.5), commutative=True, name="half_x"), _erf_part(x),
               commutative=True, name="out")
    second = Op("mul", Op("mul", x, _erf_part(x), commutative=True, name="x_erf"), _value(0.5),
                commutative=True, name="out")
    return first, second


def _fast_gelu_patterns():
    x = Var("x")
    # formula 1: x * (0.7978845834732056 * (1 + 0.044715 * x * x)) ...: (x * 0.044715) * x + 1
    inner_1 = Op("mul", Op("add", Op("mul", Op("mul", x, _value(0.044715), commutative=True), x, commutative=True),
                           _value(1.0), commutative=True),
                 Op("mul", x, _value(0.7978845834732056), commutative=True), commutative=True)
    # formula 2: (x + 0.044715 * x^3) * 0.7978845834732056, x^3 a Pow (canonicalised as (x * x) * x)
    cube = Op("mul", Op("mul", x, x, where=_spelled_pow), x, commutative=True, where=_spelled_pow)
    inner_2 = Op("mul", Op("add", Op("mul", cube, _value(0.044715), commutative=True), x,
                           commutative=True), _value(0.7978845834732056), commutative=True)
    return tuple(Op("mul", Op("add", Op("tanh", inner), _value(1.0), commutative=True),
                    Op("mul", x, _value(0.5), commutative=True), commutative=True, name="out")
                 for inner in (inner_1, inner_2))


def _quick_gelu_patterns():
    x = Var("x")
    return (Op("mul", x, Op("sigmoid", x), commutative=True, name="out"),)


GELU = _gelu_patterns()
FAST_GELU = _fast_gelu_patterns()
QUICK_GELU = _quick_gelu_patterns()


def _single_readers(g: Graph, m: Match, out: int) -> bool:
    """Every op a fusion removes, but its output, is read by one op and is no graph output."""
    outputs = set(g.outputs.values())
    return all(len(g.users(t)) == 1 and t not in outputs
               for i in m.consumed for t in g.ops[i].outputs if t != out)


def fused_activation(g: Graph, x: int, out: int, ops: set[int]) -> str | None:
    """"gelu" / "fast_gelu" / "quick_gelu" when onnxruntime fuses exactly the activation ops `ops`
    (input x, output out) into its Gelu / FastGelu / QuickGelu kernel, else None."""
    for kind, patterns in (("gelu", GELU), ("fast_gelu", FAST_GELU), ("quick_gelu", QUICK_GELU)):
        for pattern in patterns:
            m = match(pattern, g, out, Match({"x": x}))
            if m is None or set(m.consumed) != ops or not _single_readers(g, m, out):
                continue
            if kind == "gelu" and "x_erf" in m.ops and _first_mul_parent(g, m.ops["x_erf"]):
                continue  # GeluFusion takes the first Mul parent for pattern 1 and then fails
            return kind
    return None


def _first_mul_parent(g: Graph, op_index: int) -> bool:
    """Whether some input of the op is made by a Mul (GeluFusion's FirstParentByType)."""
    return any((p := g.producer(t)) is not None and p.type == "mul" for t in g.ops[op_index].inputs)


def bias_mode(c: Canonical, linear_op) -> str:
    """How onnxruntime adds a canonical linear's bias: Gemm's C (a Gemm in the file, or a MatMul
    of a rank-2 input that MatMulAddFusion turns into one), or an Add after the product."""
    if linear_op.options.get("bias") is None:
        return BIAS_NONE
    file_ops = [c.source.ops[i] for i in c.origin[linear_op.index]]
    if any(op.type == "Gemm" for op in file_ops):
        return BIAS_GEMM
    matmuls = [op for op in file_ops if op.type == "MatMul"]
    if matmuls and len(c.source.tensor(matmuls[0].inputs[0]).shape) == 2:
        return BIAS_GEMM
    return BIAS_ADD
