"""LayerNorm blocks: the spellings porter has a fused kernel for, as patterns over canonical ops.

A LayerNorm is the mean and variance of each row over the last axis, a reciprocal square root
of (variance + eps), and the exporter's way of combining them with x; then optionally * gamma
and / or + beta. Each combination order is its own float arithmetic (`NormForm`); the patterns
below read like the computation. A spelling none of them matches still compiles: its ops run one
by one as elementwise steps, exactly (porter.recover.encoder), only without the fused kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from porter.frontends.graph import Graph
from porter.ir.encoder import LayerNorm, NormForm, Reference
from porter.recover.engine import AnyOf, Const, Match, Op, Var, match, wrapped


def _last_axis(op, g: Graph) -> bool:
    """A reduction over the last axis alone (axes of size one do not count)."""
    shape = g.tensor(op.inputs[0]).shape
    rank = len(shape)
    axes = op.options.get("axes")
    axes = range(rank) if axes is None else axes
    real = {a % rank for a in axes if shape[a % rank] != 1}
    return real == {rank - 1}


def _viewed(p):
    return wrapped(p, lambda q: Op("view", q))


def _scalar(name: str):
    return Const(name, where=lambda t, g: t.data.size == 1)


def _row(name: str):
    """A constant with one value per column: [width], [1, width], [1, 1, width]."""
    return Const(name, where=lambda t, g: t.data.ndim >= 1 and t.data.size == t.data.shape[-1] > 1)


def _moments():
    x = Var("x")
    mean = Op("reduce_mean", x, name="mean", where=_last_axis)
    squares = AnyOf(Op("squared_difference", x, _viewed(mean), commutative=True),
                    Op("mul", Op("sub", x, _viewed(mean), name="d1"), Op("sub", x, _viewed(mean), name="d1")))
    var = Op("reduce_mean", squares, where=_last_axis)
    rstd = Op("rsqrt", Op("add", var, _scalar("eps"), commutative=True), name="rstd")
    return x, mean, rstd


def _shift():
    """litert-torch: x * r + (0 - r * mean)."""
    x, mean, rstd = _moments()
    shift = Op("sub", _scalar("zero"), Op("mul", rstd, mean, commutative=True))
    return Op("add", Op("mul", x, _viewed(rstd), commutative=True), _viewed(shift), commutative=True,
              name="norm")


def _centred():
    """TensorFlow: (x - mean) * r."""
    x, mean, rstd = _moments()
    return Op("mul", Op("sub", x, _viewed(mean)), _viewed(rstd), commutative=True, name="norm")


def _keras():
    """tf.nn.batch_normalization (Keras): inv = r * gamma; x * inv + (beta - mean * inv)."""
    x, mean, rstd = _moments()
    inv = Op("mul", _viewed(rstd), _row("gamma"), commutative=True, name="inv")
    shift = Op("sub", _row("beta"), Op("mul", _viewed(mean), inv, commutative=True))
    return Op("add", Op("mul", x, inv, commutative=True), shift, commutative=True, name="out")


def _onnx_decomposed():
    """What onnxruntime's LayerNormFusion turns into one LayerNormalization: (x - mean) / sqrt(
    mean((x - mean) ^ 2) + eps) * gamma + beta, the square written with Pow."""
    x = Var("x")
    mean = Op("reduce_mean", x, name="mean", where=_last_axis)
    d = Op("sub", x, _viewed(mean), name="d")
    square = Op("mul", d, d, where=lambda op, g: op.options.get("spelled") == "pow")
    std = Op("sqrt", Op("add", Op("reduce_mean", square, where=_last_axis), _scalar("eps"), commutative=True))
    norm = Op("div", d, _viewed(std))
    return Op("add", Op("mul", norm, _row("gamma"), commutative=True), _row("beta"), commutative=True, name="out")


FORMS = ((NormForm.SHIFT, _shift()), (NormForm.CENTRED, _centred()), (NormForm.KERAS, _keras()))
ONNX_OP = Op("layer_norm", Var("x"), _row("gamma"), _row("beta"), name="out",
             where=lambda op, g: int(op.options.get("axis", -1)) % len(g.tensor(op.inputs[0]).shape)
             == len(g.tensor(op.inputs[0]).shape) - 1)
ONNX_FORMS = ((NormForm.ONNX, ONNX_OP), (NormForm.ONNX, _onnx_decomposed()))
GAMMA = Op("mul", Var("norm"), _row("gamma"), commutative=True, name="scaled")
BETA = Op("add", Var("norm"), _row("beta"), commutative=True, name="shifted")


@dataclass
class FoundNorm:
    step: LayerNorm
    ops: set[int]
    gamma: np.ndarray | None
    beta: np.ndarray | None


def find(g: Graph, ref: Reference, claimed: set[int], skip_fuses=None) -> list[FoundNorm]:
    """skip_fuses(add op) -> whether onnxruntime's SkipLayerNormFusion takes that residual Add
    by its conditions on the shapes it sees (None: always, as with a fixed window)."""
    found = []
    patterns = ONNX_FORMS if ref == Reference.ONNXRUNTIME_CPU else FORMS
    for op in g.ops:
        if op.index in claimed:
            continue
        for form, pattern in patterns:
            m = match(pattern, g, op.outputs[0])
            if m is None or m.consumed & claimed:
                continue
            norm = _found(g, ref, form, m, skip_fuses)
            if norm is not None:
                found.append(norm)
                claimed |= norm.ops
                break
    return found


def _found(g: Graph, ref: Reference, form: NormForm, m: Match, skip_fuses=None) -> FoundNorm | None:
    x = m["x"]
    width = g.tensor(x).shape[-1]
    ops = set(m.consumed)
    gamma = beta = None
    if "gamma" in m.tensors:
        gamma = np.asarray(g.const(m["gamma"]), np.float32).reshape(-1)
        beta = np.asarray(g.const(m["beta"]), np.float32).reshape(-1)
    if "eps" in m.tensors:
        eps = float(np.asarray(g.const(m["eps"]), np.float32).reshape(-1)[0])
    else:
        eps = float(g.ops[m.ops["out"]].options.get("epsilon", 1e-5))
    if "zero" in m.tensors and float(np.ravel(g.const(m["zero"]))[0]) != 0.0:
        return None
    if "norm" in m.tensors:  # the affine, if any, follows as its own ops
        normalised = m["norm"]
        out, gamma, beta, affine_ops = _affine(g, normalised)
        ops |= affine_ops
        outputs = [f"t{out}", f"t{normalised}"] if out != normalised else [f"t{out}"]
    else:
        outputs = [f"t{m['out']}"]
    # the file's own SkipLayerNormalization (porter.recover.canonical.ort_contrib)
    ort_skip = "out" in m.ops and g.ops[m.ops["out"]].options.get("ort_skip", False)
    if "out" in m.ops and g.ops[m.ops["out"]].options.get("ort_embed", False):
        form = NormForm.ORT_EMBED  # the file's own EmbedLayerNormalization
    elif ref == Reference.ONNXRUNTIME_CPU and (ort_skip or _is_skip(g, x, ops)
                                              and (skip_fuses is None or skip_fuses(g.producer(x)))):
        form = NormForm.ONNX_SKIP
    step = LayerNorm("layer_norm", [f"t{x}"], outputs, [], form, eps, width,
                     gamma is not None, beta is not None)
    return FoundNorm(step, ops, gamma, beta)


def _affine(g: Graph, normalised: int):
    """The optional * gamma and + beta after a normalised tensor: (output, gamma, beta, ops)."""
    out, gamma, beta, ops = normalised, None, None, set()
    for user in g.users(out):
        m = match(GAMMA, g, user.outputs[0], Match({"norm": out}))
        if m is not None:
            gamma, out, ops = np.asarray(g.const(m["gamma"]), np.float32).reshape(-1), m["scaled"], ops | m.consumed
            break
    for user in g.users(out):
        m = match(BETA, g, user.outputs[0], Match({"norm": out}))
        if m is not None:
            beta, out, ops = np.asarray(g.const(m["beta"]), np.float32).reshape(-1), m["shifted"], ops | m.consumed
            break
    return out, gamma, beta, ops


def _is_skip(g: Graph, x: int, ops: set[int]) -> bool:
    """onnxruntime fuses a LayerNormalization whose input is an Add read by nothing else into
    SkipLayerNormalization (SkipLayerNormFusion), whose kernel rounds differently."""
    producer = g.producer(x)
    return producer is not None and producer.type == "add" and all(u.index in ops for u in g.users(x))
