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


# Inputs porter computes itself for every call, by what their names say (the proof then holds
# the IR to the graph fed that way): position ids past .. past + seq - 1, an attention mask of
# ones over the past + seq keys (generation has no padding).
FED_POSITIONS, FED_MASK = "positions", "mask"
_FED_NAMES = (("position", FED_POSITIONS), ("mask", FED_MASK))


@dataclass(frozen=True)
class Roles:
    ids: str
    logits: str
    caches: tuple[Cache, ...]
    fed: tuple[tuple[str, str], ...] = ()  # (input, FED_POSITIONS | FED_MASK)


def fed_kind(name: str) -> str | None:
    """FED_POSITIONS or FED_MASK for an input porter feeds itself, by its name, else None."""
    return next((kind for word, kind in _FED_NAMES if word in name.lower()), None)


def _looked_up_in(g: Graph) -> dict[str, int]:
    """Graph input -> rows of the largest constant 2-D table a Gather reads with it."""
    names = {index: name for name, index in g.inputs.items()}
    rows: dict[str, int] = {}
    for op in g.ops:
        if op.type != "Gather" or g.const(op.inputs[0]) is None or g.const(op.inputs[0]).ndim != 2:
            continue
        t = op.inputs[1]
        while (p := g.producer(t)) is not None and p.type in ("Cast", "Reshape", "Unsqueeze", "Squeeze", "Identity"):
            t = p.inputs[0]
        if t in names:
            rows[names[t]] = max(rows.get(names[t], 0), int(g.const(op.inputs[0]).shape[0]))
    return rows


def _identity(op) -> bool:
    """Ops that pass their one input through: Identity, a Concat of one tensor."""
    return op is not None and (op.type == "Identity" or (op.type in _CONCATS and len(op.inputs) == 1))


_CONCATS = ("Concat", "CONCATENATION")


def _concat_of_input(g: Graph, t: int) -> tuple[str, int] | None:
    """(graph input, axis) when tensor t is a Concat (through identities) whose first operand
    is a graph input (through identities)."""
    op = g.producer(t)
    while _identity(op):
        op = g.producer(op.inputs[0])
    if op is None or op.type not in _CONCATS or len(op.inputs) < 2:
        return None
    first = op.inputs[0]
    while _identity(g.producer(first)):
        first = g.producer(first).inputs[0]
    names = {index: name for name, index in g.inputs.items()}
    if first not in names:
        return None
    rank = len(g.tensor(first).shape)
    return names[first], int(op.options.get("axis", 0)) % max(rank, 1)


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
    tables = {n: rows for n, rows in _looked_up_in(g).items() if n in others}
    if not tables:
        raise PorterError(f"{source}: no input besides the cache is looked up in an embedding table "
                          f"(inputs: {', '.join(others) or 'none'})")
    ids = max(tables, key=tables.get)  # the token table is the largest one an input reads
    fed = []
    for name in others:
        kind = fed_kind(name)
        if name != ids and kind is None:
            raise PorterError(f"{source}: input '{name}' is neither the token ids, a cache, position ids nor "
                              "an attention mask; porter feeds those alone")
        if name != ids:
            fed.append((name, kind))
    outputs = [n for n in g.outputs if n not in {c.present for c in caches}]
    if len(outputs) != 1:
        raise PorterError(f"{source}: a decoder has one output besides its cache (the logits); this "
                          f"one has {', '.join(outputs) or 'none'}")
    return Roles(ids, outputs[0], tuple(caches), tuple(fed))


def bind(g: Graph, roles: Roles, past: int, seq: int) -> Graph:
    """The graph with its inputs' dynamic dimensions set: batch 1, ids [.., seq], each cache
    `past` long along its concat axis. Inner shapes with dynamic dimensions are left for
    canonicalisation to work out."""
    tensors = list(g.tensors)
    lengths = {roles.ids: seq, **{c.past: past for c in roles.caches}}
    axes = {roles.ids: len(g.tensor(g.inputs[roles.ids]).shape) - 1, **{c.past: c.axis for c in roles.caches}}
    inputs = dict(g.inputs)
    for name, kind in roles.fed:
        t = inputs.pop(name)
        value = _fed_value(tensors[t], kind, past, seq)
        tensors[t] = replace(tensors[t], data=value, shape=tuple(value.shape))
    for name, t in inputs.items():
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
    return Graph(g.format, g.path, tensors, g.ops, inputs, dict(g.outputs), g.metadata)


def fed_value(kind: str, past: int, seq: int) -> np.ndarray:
    """What porter feeds an input of that kind: [1, seq] positions or a [1, past + seq] mask."""
    if kind == FED_POSITIONS:
        return np.arange(past, past + seq, dtype=np.int64)[None]
    return np.ones((1, past + seq), np.int64)


def _fed_value(t, kind: str, past: int, seq: int) -> np.ndarray:
    value = fed_value(kind, past, seq)
    if len(t.shape) != 2 or any(d >= 0 and d != v for d, v in zip(t.shape, value.shape)):
        raise PorterError(f"input '{t.name}' ({t.describe()}) is not [batch, {'seq' if kind == FED_POSITIONS else 'past + seq'}] "
                          f"{'position ids' if kind == FED_POSITIONS else 'attention mask'}")
    return value.astype(t.dtype)


class Bindings:
    """The graph canonicalised at each (past, seq) asked for, once, for onnxruntime's kernels on
    the CPU `ort_cpu` (porter.reference.ort.cpu)."""

    def __init__(self, g: Graph, roles: Roles, ort_cpu=None):
        self.g, self.roles, self.ort_cpu = g, roles, ort_cpu
        self._done: dict[tuple[int, int], Canonical] = {}

    def at(self, past: int, seq: int) -> Canonical:
        key = (past, seq)
        if key not in self._done:
            self._done[key] = canonicalise(bind(self.g, self.roles, past, seq), self.ort_cpu)
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
