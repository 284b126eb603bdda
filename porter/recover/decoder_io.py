"""A decoder's inputs and outputs by role, and the graph canonicalised at given cache lengths.

Roles come from how the graph uses its inputs, not from their names: a KV cache is a graph input
that a Concat along one axis extends into a graph output (past -> present); the token ids are
the integer input looked up in the largest table; the logits are the one other output.

A decoder's graph has dynamic shapes (past length P, new tokens S); porter's canonicalisation
works on static ones. `Bindings` binds (P, S), canonicalises, and keeps the result per binding:
at each one every shape, position row, rotary table and mask folds into a constant, so what a
spelling computes for those lengths is read off the constant (the causal mask, the positions)
and compared across bindings.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.recover.canonical import Canonical, canonicalise

# The binding recognition reads its blocks from: a cache and several new tokens, lengths that
# differ from each other and from any model dimension porter has seen.
MAIN_BINDING = (3, 5)
# Bindings the mask and the position tables are evaluated at besides the main one: an empty
# cache, one new token, both, and a longer cache.
PROBE_BINDINGS = ((0, 1), (0, 4), (2, 1), (7, 3), (1, 6))


@dataclass(frozen=True)
class Cache:
    past: str  # graph input
    present: str  # graph output: Concat(past, new) along `axis`
    axis: int


@dataclass(frozen=True)
class Roles:
    ids: str
    logits: str
    caches: tuple[Cache, ...]


def _concat_of_input(g: Graph, t: int) -> tuple[str, int] | None:
    """(graph input, axis) when tensor t is a Concat (through Identity ops) whose first
    operand is a graph input."""
    op = g.producer(t)
    while op is not None and op.type == "Identity":
        op = g.producer(op.inputs[0])
    if op is None or op.type not in ("Concat", "CONCATENATION") or not op.inputs:
        return None
    names = {index: name for name, index in g.inputs.items()}
    if op.inputs[0] not in names:
        return None
    rank = len(g.tensor(op.inputs[0]).shape)
    return names[op.inputs[0]], int(op.options.get("axis", 0)) % max(rank, 1)


def is_decoder_graph(g: Graph) -> bool:
    """A graph with a KV cache: some output is an input extended by a Concat."""
    return any(_concat_of_input(g, t) is not None for t in g.outputs.values())


def find_roles(g: Graph, source: str) -> Roles:
    caches = []
    for name, t in g.outputs.items():
        found = _concat_of_input(g, t)
        if found is not None:
            caches.append(Cache(found[0], name, found[1]))
    if not caches:
        raise PorterError(f"{source}: no graph output extends a graph input (a KV cache); not a decoder")
    cache_inputs = {c.past for c in caches}
    others = [n for n in g.inputs if n not in cache_inputs]
    ints = [n for n in others if g.tensor(g.inputs[n]).dtype.startswith(("int", "uint"))]
    if len(ints) != 1 or len(others) != 1:
        raise PorterError(f"{source}: besides its KV cache a decoder takes the token ids alone; this "
                          f"graph also takes {', '.join(sorted(set(others) - set(ints[:1])))}"
                          if len(ints) == 1 else f"{source}: no single integer input holds the token ids "
                          f"(inputs besides the cache: {', '.join(others) or 'none'})")
    outputs = [n for n in g.outputs if n not in {c.present for c in caches}]
    if len(outputs) != 1:
        raise PorterError(f"{source}: a decoder has one output besides its cache (the logits); this "
                          f"one has {', '.join(outputs) or 'none'}")
    return Roles(ints[0], outputs[0], tuple(caches))


def bind(g: Graph, roles: Roles, past: int, seq: int) -> Graph:
    """The graph with its inputs' dynamic dimensions set: batch 1, ids [.., seq], each cache
    `past` long along its concat axis. Inner shapes with dynamic dimensions are left for
    canonicalisation to work out."""
    tensors = list(g.tensors)
    lengths = {roles.ids: seq, **{c.past: past for c in roles.caches}}
    axes = {roles.ids: len(g.tensor(g.inputs[roles.ids]).shape) - 1, **{c.past: c.axis for c in roles.caches}}
    for name, t in g.inputs.items():
        shape = list(tensors[t].shape)
        if shape[axes[name]] >= 0:
            what = "token" if name == roles.ids else "cache"
            raise PorterError(f"input '{name}' ({tensors[t].describe()}) has a fixed {what} length; a "
                              "decoder with a KV cache takes any number of tokens (export it with "
                              "dynamic axes)")
        shape[axes[name]] = lengths[name]
        if any(d < 0 for d in shape[1:]) or (shape and shape[0] < 0 and axes[name] == 0):
            raise PorterError(f"input '{name}' ({tensors[t].describe()}) has a dynamic dimension "
                              "besides the batch and its length")
        tensors[t] = replace(tensors[t], shape=tuple(1 if d < 0 else d for d in shape))
    return Graph(g.format, g.path, tensors, g.ops, dict(g.inputs), dict(g.outputs), g.metadata)


class Bindings:
    """The graph canonicalised at each (past, seq) asked for, once."""

    def __init__(self, g: Graph, roles: Roles):
        self.g, self.roles = g, roles
        self._done: dict[tuple[int, int], Canonical] = {}

    def at(self, past: int, seq: int) -> Canonical:
        key = (past, seq)
        if key not in self._done:
            self._done[key] = canonicalise(bind(self.g, self.roles, past, seq))
        return self._done[key]

    @property
    def main(self) -> Canonical:
        return self.at(*MAIN_BINDING)

    def constant(self, t: int, past: int, seq: int, what: str) -> np.ndarray:
        """File tensor t's value at (past, seq); it must fold there (a mask, a table row)."""
        value = self.at(past, seq).graph.const(t)
        if value is None:
            raise PorterError(f"{what} ({self.g.tensor(t).describe()}) is not a constant once the "
                              f"cache length ({past}) and token count ({seq}) are known")
        return np.asarray(value)
