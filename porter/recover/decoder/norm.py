"""A decoder's norms by what they compute: LayerNorm (the ONNX op) or RMSNorm (its ops).

The ops that read the residual stream at the start of a block are matched against the
spellings porter has arithmetic for (the LayerNormalization op; mean(x^2), + eps, sqrt, then
x * reciprocal or x / it, * gamma), and what they match is then evaluated on random rows and
compared with the norm's definition, so a spelling that matches but computes something else
is refused. The form fixes the arithmetic: onnxruntime runs RMSNorm's ops one by one, except
Pow / ReduceMean / Add / Sqrt / Div(x, .) / Mul by a vector, which its SimplifiedLayerNormFusion
turns into the SimplifiedLayerNormalization kernel (after DivMulFusion has made x * (1 / s)
into x / s: porter.recover.canonical).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.decoder import LAYER_NORM, NO_NORM, NORM_ORT, RMS_DIVIDE, RMS_NORM, RMS_ORT, RMS_RECIPROCAL, Norm
from porter.ir.encoder import Reference
from porter.recover import probe
from porter.recover.encoder import norms
from porter.recover.engine import AnyOf, Const, Match, Op, Var, match
from porter.reference.ort import floats as OF

# a norm matches its definition to this relative error (its own float32 rounding)
ROLE_TOLERANCE = 1e-4


def _reduces_last_axis(op, g: Graph) -> bool:
    shape = g.tensor(op.inputs[0]).shape
    axes = op.options.get("axes")
    axes = range(len(shape)) if axes is None else axes
    return {a % len(shape) for a in axes if shape[a % len(shape)] != 1} == {len(shape) - 1}


def _scalar(name: str, value: float | None = None):
    return Const(name, where=lambda t, g: t.data.size == 1 and (value is None or float(t.data.reshape(-1)[0]) == value))


def _row(name: str):
    return Const(name, where=lambda t, g: t.data.ndim >= 1 and t.data.size == t.data.shape[-1] > 1)


def _rms_pattern(with_gamma: bool):
    """mean(x^2) -> + eps -> sqrt -> x * (1 / .) or x / . -> * gamma (x^2 as Pow: canonicalisation
    writes it x * x, and says it was spelled "pow")."""
    x = Var("x")
    square = AnyOf(Op("pow", x, _scalar("two", 2.0), name="square"), Op("mul", x, x, name="square"))
    mean = Op("reduce_mean", square, name="mean", where=_reduces_last_axis)
    std = Op("sqrt", Op("add", mean, _scalar("eps"), commutative=True, name="add_eps"), name="std")
    # 1 / std as Reciprocal or as Div(1, .) (torch's rsqrt through TorchScript): the same quotient
    reciprocal = AnyOf(Op("reciprocal", std, name="reciprocal"), Op("div", _scalar("one", 1.0), std, name="reciprocal"))
    normed = AnyOf(Op("mul", x, reciprocal, commutative=True, name="normed"), Op("div", x, std, name="normed"))
    return Op("mul", normed, _row("gamma"), commutative=True, name="out") if with_gamma else normed


RMS_PATTERNS = (_rms_pattern(True), _rms_pattern(False))


@dataclass
class FoundNorm:
    norm: Norm
    ops: set[int]
    arrays: dict
    out: int  # the normalised tensor


def no_norm(x: int, name: str, width: int) -> FoundNorm:
    """Where the LM head reads the stream itself: a norm that passes it through."""
    return FoundNorm(Norm(name, NO_NORM, NO_NORM, 0.0, int(width), False, False), set(), {}, x)


def find(g: Graph, x: int, candidates: set[int], name: str, where: str) -> FoundNorm:
    """The norm that reads tensor x among the canonical ops `candidates`."""
    for op in sorted((g.ops[i] for i in candidates), key=lambda o: -o.index):
        found = _layer_norm(g, op, x, name) if op.type == "layer_norm" else \
            _rms_norm(g, op, x, name) if op.type in ("mul", "div") else None
        if found is not None and found.ops <= candidates:
            _check_role(g, found, x, where)
            return found
    readers = ", ".join(probe.describe_op(g, u.index) for u in g.users(x) if u.index in candidates)
    raise PorterError(f"{where}: no LayerNorm or RMSNorm reads the residual stream (its readers: {readers})")


def _layer_norm(g: Graph, op, x: int, name: str) -> FoundNorm | None:
    m = match(norms.ONNX_OP, g, op.outputs[0], Match({"x": x}))
    if m is None:
        return None
    arrays = {f"{name}.gamma": _vector(g, m["gamma"]), f"{name}.beta": _vector(g, m["beta"])}
    norm = Norm(name, LAYER_NORM, NORM_ORT, float(np.float32(op.options.get("epsilon", 1e-5))),
                int(g.tensor(x).shape[-1]))
    return FoundNorm(norm, set(m.consumed), arrays, op.outputs[0])


def _rms_norm(g: Graph, op, x: int, name: str) -> FoundNorm | None:
    for pattern in RMS_PATTERNS:
        m = match(pattern, g, op.outputs[0], Match({"x": x}))
        if m is None:
            continue
        form = RMS_RECIPROCAL if "reciprocal" in m.ops else RMS_DIVIDE
        square = g.ops[m.ops["square"]]
        if form == RMS_DIVIDE and "pow" in (square.type, square.options.get("spelled")) and "gamma" in m.tensors:
            form = RMS_ORT  # onnxruntime's SimplifiedLayerNormFusion takes exactly this spelling
            if g.tensor(x).shape[-1] < OF.MIN_SIMPLIFIED_WIDTH:
                raise PorterError(f"{probe.describe_op(g, op.index)}: onnxruntime runs SimplifiedLayerNormalization "
                                  f"on rows of {g.tensor(x).shape[-1]} values with a kernel porter does not "
                                  f"reproduce (it does from {OF.MIN_SIMPLIFIED_WIDTH})")
        eps = float(np.asarray(g.const(m["eps"]), np.float32).reshape(-1)[0])
        arrays = {f"{name}.gamma": _vector(g, m["gamma"])} if "gamma" in m.tensors else {}
        norm = Norm(name, RMS_NORM, form, eps, int(g.tensor(x).shape[-1]), has_gamma="gamma" in m.tensors,
                    has_beta=False)
        return FoundNorm(norm, set(m.consumed), arrays, op.outputs[0])
    return None


def _vector(g: Graph, t: int) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(g.const(t), np.float32).reshape(-1))


def reference(norm: Norm, arrays: dict, x: np.ndarray) -> np.ndarray:
    """The norm's definition in float64."""
    x = np.asarray(x, np.float64)
    if norm.kind == LAYER_NORM:
        d = x - x.mean(axis=-1, keepdims=True)
        y = d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + norm.eps)
    else:
        y = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + norm.eps)
    if norm.has_gamma:
        y = y * arrays[f"{norm.name}.gamma"]
    return y + arrays[f"{norm.name}.beta"] if norm.has_beta else y


def _check_role(g: Graph, found: FoundNorm, x: int, where: str) -> None:
    rng = np.random.default_rng(31)
    shape = g.tensor(x).shape
    value = (rng.standard_normal(shape) * 3 + rng.standard_normal(shape[-1:])).astype(np.float32)
    got = probe.run(g, sorted(found.ops), {x: value}, Reference.ONNXRUNTIME_CPU, keep={found.out})[found.out]
    expected = reference(found.norm, found.arrays, value)
    worst = float(np.max(np.abs(got - expected) / np.maximum(1.0, np.abs(expected))))
    if worst > ROLE_TOLERANCE:
        raise PorterError(f"{where}: the ops at {probe.describe_op(g, g.producer(found.out).index)} match a "
                          f"{found.norm.kind} but compute something else (relative error {worst:.3g})")
