"""onnxruntime's activation fusions, by their own rules, on canonical ops.

onnxruntime (ORT_ENABLE_ALL, the goldens' level) rewrites activation spellings it recognises
into fused kernels whose float arithmetic differs from the ops they replace. Which spellings
fire is decided by the fusions' own conditions (onnxruntime 1.32's core/optimizer/*_fusion.cc),
written here as patterns over canonical ops that read like the subgraphs they name; the encoder
(porter.recover.encoder) and the decoder (porter.recover.decoder.ort) both ask them.

- GeluFusion: (x * 0.5) * (erf(x / sqrt 2) + 1), or (x * (erf(x / sqrt 2) + 1)) * 0.5 -> Gelu.
- FastGeluFusion: 0.5x (1 + tanh(0.7978845834732056 (x + 0.044715 x^3))) in two spellings
  (x^3 as x * x * x products or as a Pow) -> FastGelu. Its last step must be (x * 0.5) times
  (tanh + 1): torch's F.gelu(approximate="tanh") as onnxscript writes it, x * (0.5 * (tanh + 1)),
  is not fused and runs op by op.
- QuickGeluFusion: x * sigmoid(x) -> QuickGelu (alpha 1).
"""

from __future__ import annotations

import numpy as np

from porter.frontends.graph import Graph
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


def fast_gelu_at(g: Graph, out: int) -> Match | None:
    """The FastGeluFusion match whose output is tensor `out` (its input is m["x"]), or None."""
    for pattern in FAST_GELU:
        m = match(pattern, g, out)
        if m is not None and _single_readers(g, m, out):
            return m
    return None
