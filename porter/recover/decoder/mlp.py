"""A decoder's MLP by role: linears out of the norm, an elementwise activation, maybe a gate.

    plain:  down(act(up(n)))            gated:  down(act(gate(n)) * up(n))

The down projection makes the block's output; what lies between it and the linears that read
the norm is an elementwise activation, taken as the graph's own ops in their order (a small
program porter runs exactly, whatever the spelling), or, where onnxruntime fuses those ops into
its Gelu or FastGelu kernel (porter.recover.canonical.ort_activations), that kernel. What the activation
computes (GELU with erf or tanh, SiLU, ReLU) is decided by evaluating the program, not by its
ops' names.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import erf, sqrt

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.decoder import ACT_FAST_GELU, ACT_GELU, ACT_OPS, ACT_QUICK_GELU, BINARY_OPS, UNARY_OPS, Activation, Instr
from porter.recover import probe
from porter.recover.canonical.ort_activations import fused_activation
from porter.reference.execute_decoder import run_program
from porter.reference.ops import Unsupported

_KERNELS = {"gelu": ACT_GELU, "fast_gelu": ACT_FAST_GELU, "quick_gelu": ACT_QUICK_GELU}
# what an activation is, as functions of float64 x; the first within ROLE_TOLERANCE names it
_ERF = np.vectorize(erf)
KINDS = {
    "gelu_erf": lambda x: 0.5 * x * (1 + _ERF(x / sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0),
}
ROLE_TOLERANCE = 1e-4


@dataclass
class FoundActivation:
    activation: Activation
    ops: set[int]


def through_views(g: Graph, t: int) -> tuple[int, set[int]]:
    """The tensor a chain of views shows (views keep the element order: an alias)."""
    ops = set()
    while (op := g.producer(t)) is not None and op.type == "view":
        ops.add(op.index)
        t = op.inputs[0]
    return t, ops


def activation(g: Graph, x: int, out: int, where: str) -> FoundActivation:
    """The elementwise ops computing `out` from `x` alone (and scalar constants)."""
    ops = probe.region(g, out, stop={x})
    if probe.leaves(g, ops) - {x}:
        raise PorterError(f"{where}: the activation reads more than the linear before it")
    gelu = [g.ops[i] for i in ops if g.ops[i].type == "gelu"]
    if len(gelu) == 1 and all(g.ops[i].type == "view" for i in ops if i != gelu[0].index):
        return _gelu_op(gelu[0], set(ops))
    alias = {x: "x"}
    program: list[Instr] = []
    for i in ops:
        op = g.ops[i]
        if op.type == "view":
            alias[op.outputs[0]] = alias[op.inputs[0]]
            continue
        arity = 1 if op.type in UNARY_OPS else 2 if op.type in BINARY_OPS else 0
        if arity == 0 or len(op.inputs) != arity:
            raise PorterError(f"{where}: {probe.describe_op(g, i)} is not an elementwise op porter runs "
                              "inside an activation")
        program.append(Instr(op.type, [_operand(g, t, alias, where, i) for t in op.inputs]))
        alias[op.outputs[0]] = f"t{len(program) - 1}"
    if not program:
        raise PorterError(f"{where}: no activation between the two linears")
    kind = _kind(program, where)
    inputs = [t for t, a in alias.items() if a == "x"]  # x and views of it
    fused = next(filter(None, (fused_activation(g, t, out, {i for i in ops if g.ops[i].type != "view"})
                               for t in inputs)), None)
    kernel = _KERNELS.get(fused, ACT_OPS)
    return FoundActivation(Activation(kind, kernel, program if kernel == ACT_OPS else []), set(ops))


def _gelu_op(op, ops: set[int]) -> FoundActivation:
    """The ONNX Gelu op: onnxruntime's kernel is its fused Gelu (approximate none) or FastGelu's
    arithmetic (tanh), both measured (tests/test_decoder_kernels.py)."""
    tanh = op.options.get("approximate") in ("tanh", True)
    return FoundActivation(Activation("gelu_tanh" if tanh else "gelu_erf", ACT_FAST_GELU if tanh else ACT_GELU), ops)


def _operand(g: Graph, t: int, alias: dict, where: str, op_index: int):
    if t in alias:
        return alias[t]
    value = g.const(t)
    if value is None or value.size != 1 or value.dtype.kind != "f":
        raise PorterError(f"{where}: {probe.describe_op(g, op_index)} reads {g.tensor(t).describe()}, "
                          "not the activation's input or a float scalar")
    return float(np.float32(value.reshape(-1)[0]))


def _kind(program: list[Instr], where: str) -> str:
    grid = np.linspace(-8, 8, 1601).astype(np.float32)
    try:
        got = run_program(program, grid).astype(np.float64)
    except Unsupported as e:
        raise PorterError(f"{where}: porter cannot evaluate the activation ({e})") from None
    for kind, fn in KINDS.items():
        expected = fn(grid.astype(np.float64))
        if np.all(np.abs(got - expected) <= ROLE_TOLERANCE * np.maximum(1.0, np.abs(expected))):
            return kind
    return "elementwise"
