"""A small declarative pattern engine over the format-neutral Graph.

A pattern describes how a tensor is computed, written like the computation it recognises:

    x = Var("x")
    mean = Op("MEAN", x, Const())
    centred = Op("SUB", x, mean)

`match(pattern, graph, tensor)` walks backwards from `tensor` through its producers and returns
a Match (named tensors, named ops, every op it consumed) or None. Alternatives (`AnyOf`) and
commutative ops backtrack. A name bound twice must bind the same tensor, which is how a pattern
says "the same x feeds both the MEAN and the SUB". Patterns are data: one engine matches them
all, and a rule never indexes operator positions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Iterator

from porter.frontends.graph import Graph, Op as GraphOp

Condition = Callable[[GraphOp, Graph], bool]


class Pattern:
    """Base class: something that can match a tensor."""

    def match(self, g: Graph, t: int, m: "Match") -> Iterator["Match"]:
        raise NotImplementedError


@dataclass(frozen=True)
class Match:
    """Bindings of a successful match; immutable so backtracking is just dropping a copy."""

    tensors: dict = field(default_factory=dict)  # name -> tensor index
    ops: dict = field(default_factory=dict)  # name -> op index
    consumed: frozenset = frozenset()  # every op index the pattern matched

    def bind_tensor(self, name: str | None, t: int) -> "Match | None":
        if name is None:
            return self
        if name in self.tensors:
            return self if self.tensors[name] == t else None
        return Match({**self.tensors, name: t}, self.ops, self.consumed)

    def consume(self, name: str | None, op: GraphOp) -> "Match":
        ops = {**self.ops, name: op.index} if name else self.ops
        return Match(self.tensors, ops, self.consumed | {op.index})

    def __getitem__(self, name: str) -> int:
        return self.tensors[name]


class Var(Pattern):
    """Any tensor (optionally required to satisfy `where(tensor, graph)`), bound to `name`."""

    def __init__(self, name: str | None = None, where: Callable | None = None):
        self.name, self.where = name, where

    def match(self, g, t, m):
        if t < 0 or (self.where is not None and not self.where(g.tensor(t), g)):
            return
        bound = m.bind_tensor(self.name, t)
        if bound is not None:
            yield bound


class Const(Var):
    """A constant tensor (an initializer or a buffer-backed tensor), bound to `name`."""

    def match(self, g, t, m):
        if t >= 0 and g.tensor(t).is_const:
            yield from super().match(g, t, m)


class Op(Pattern):
    """A tensor produced by an op of `op_type` (one name or a tuple of alternatives).

    `inputs` are matched against the op's inputs in order; with commutative=True the two
    inputs of a binary op may come either way round. `where(op, graph)` checks options or
    constants. `name` binds the op's output tensor and the op itself.
    """

    def __init__(self, op_type, *inputs: Pattern, name: str | None = None,
                 where: Condition | None = None, commutative: bool = False,
                 output: int = 0):
        self.types = (op_type,) if isinstance(op_type, str) else tuple(op_type)
        self.inputs, self.name, self.where = inputs, name, where
        self.commutative, self.output = commutative, output

    def match(self, g, t, m):
        op = g.producer(t) if t >= 0 else None
        if op is None or op.type not in self.types or op.outputs[self.output] != t:
            return
        if self.where is not None and not self.where(op, g):
            return
        if self.inputs and len(op.inputs) < len(self.inputs):
            return
        bound = m.bind_tensor(self.name, t)
        if bound is None:
            return
        bound = bound.consume(self.name, op)
        for order in self._input_orders(op):
            yield from _match_all(self.inputs, order, g, bound)

    def _input_orders(self, op: GraphOp):
        first = op.inputs[: len(self.inputs)]
        yield first
        if self.commutative and len(first) == 2:
            yield [first[1], first[0]]


class AnyOf(Pattern):
    """The first alternative that matches (each exporter spells some blocks differently)."""

    def __init__(self, *alternatives: Pattern):
        self.alternatives = alternatives

    def match(self, g, t, m):
        for alt in self.alternatives:
            yield from alt.match(g, t, m)


def wrapped(p: Pattern, wrap: Callable[[Pattern], Pattern], depth: int = 1) -> Pattern:
    """`p` inside 0 to `depth` layers of `wrap`, deepest tried first.

    Exporters put data-movement ops (reshapes, transposes) around steps freely; each dialect
    says what one layer of them looks like.
    """
    alternatives = [p]
    for _ in range(depth):
        alternatives.append(wrap(alternatives[-1]))
    return AnyOf(*reversed(alternatives))


def _match_all(patterns, tensors, g, m) -> Iterator[Match]:
    if not patterns:
        yield m
        return
    for m1 in patterns[0].match(g, tensors[0], m):
        yield from _match_all(patterns[1:], tensors[1:], g, m1)


def match(pattern: Pattern, g: Graph, t: int, seed: Match | None = None) -> Match | None:
    """The first match of `pattern` computing tensor `t`, or None.

    `seed` pre-binds names (e.g. the block's input tensor) so that the pattern only matches
    where it is wired to what the caller already recovered.
    """
    return next(iter(pattern.match(g, t, seed or Match())), None)


def match_all(pattern: Pattern, g: Graph, seed: Match | None = None) -> list[Match]:
    """Every op output in the graph where `pattern` matches, in graph order."""
    found = []
    for op in g.ops:
        for t in op.outputs:
            m = match(pattern, g, t, seed)
            if m is not None:
                found.append(m)
    return found
