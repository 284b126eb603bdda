"""Proof by evaluation: every recovered block computes what the graph's own ops compute.

A pattern says a block *looks like* a LayerNorm or an attention; this says it *is* one. For each
block step, the canonical ops it claimed are run one by one (porter.reference.ops, in the dtype
each op has) on seeded random inputs, and so is the step (porter.reference.execute); the two must
agree. Under LiteRT, which runs a graph op by op, they must agree bit for bit: the step's kernel is
claimed to be exactly those ops. Under onnxruntime, which fuses ops into kernels of its own (the
step then follows the fused kernel), they must agree to float rounding.

A block that matches but computes something else is refused, naming the file's op at which the
step's output is made.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.encoder import (INPUT_IDS, INPUT_MASK, INPUT_TYPES, Attention, Embed, EncoderProgram, GeluStep,
                               LayerNorm, LinearStep, Reference)
from porter.recover import probe
from porter.recover.canonical import Canonical
from porter.reference import execute
from porter.reference.ops import Unsupported

BLOCKS = (Embed, LinearStep, LayerNorm, Attention, GeluStep)
# onnxruntime's fused kernels against the ops they replace: float rounding apart.
FUSED_TOLERANCE = 1e-4


def prove(program: EncoderProgram, c: Canonical, claimed_by: dict[str, set[int]],
          aliases: dict[str, str], inputs) -> None:
    """Raises PorterError for the first block whose step disagrees with its graph ops."""
    g = c.graph
    rng = np.random.default_rng(20261201)
    for step in program.steps:
        if not isinstance(step, BLOCKS):
            continue
        ops = sorted(claimed_by[step.name])
        if isinstance(step, LinearStep) and len(ops) == 1 and g.ops[ops[0]].type == "linear":
            continue  # the step is that one canonical op, read off its options: nothing to prove
        ids_input, mask_input = inputs.ids, inputs.mask
        feeds = _feeds(g, program, step, ops, inputs, rng)
        outputs = [int(t[1:]) for t in step.outputs]
        try:
            graph_values = probe.run(g, ops, dict(feeds), c.reference, keep=set(outputs))
        except Unsupported as e:
            if c.reference == Reference.ONNXRUNTIME_CPU:
                continue  # a fused kernel's ops porter cannot run one by one
            raise PorterError(f"{step.name} ({_file_ops(c, ops)}): porter cannot evaluate its ops to "
                              f"check it ({e})") from None
        ids = feeds.get(ids_input)
        types = feeds.get(inputs.token_types)
        values = {INPUT_IDS: None if ids is None else ids.reshape(-1), INPUT_MASK: _mask_value(feeds, mask_input, program.seq),
                  INPUT_TYPES: None if types is None else types.reshape(-1)}
        for t, v in feeds.items():
            values[aliases.get(f"t{t}", f"t{t}")] = v
        step_values = execute.run_step(program, step, values)
        for t, ours in zip(outputs, step_values):
            _compare(c, step, ops, t, graph_values[t], ours)


def _feeds(g: Graph, program, step, ops, inputs, rng) -> dict[int, np.ndarray]:
    """Seeded random values for every tensor the block reads: ids in the vocabulary, token types
    in the type table, a mask keeping a prefix, normal floats for activations."""
    feeds = {}
    ids_input = inputs.ids
    for t in probe.leaves(g, ops):
        shape = g.tensor(t).shape
        if t == ids_input:
            feeds[t] = rng.integers(0, program.vocab, shape).astype(g.tensor(t).dtype)
        elif t == inputs.token_types:
            feeds[t] = rng.integers(0, program.type_vocab, shape).astype(g.tensor(t).dtype)
        elif t == inputs.mask:
            mask = (np.arange(program.seq) < max(program.seq // 2, 1)).astype(g.tensor(t).dtype)
            feeds[t] = mask.reshape(shape)
        else:
            feeds[t] = rng.standard_normal(shape).astype(np.float32) * np.float32(2)
    if isinstance(step, Embed) and ids_input not in feeds:
        feeds[ids_input] = rng.integers(0, program.vocab, g.tensor(ids_input).shape)
    return feeds


def _mask_value(feeds: dict, mask_input: int | None, seq: int) -> np.ndarray:
    if mask_input is None or mask_input not in feeds:
        return np.ones(seq, np.float32)
    return np.asarray(feeds[mask_input]).reshape(-1).astype(np.float32)


def _compare(c: Canonical, step, ops, t: int, expected, ours) -> None:
    expected = np.asarray(expected, np.float32).reshape(-1)
    ours = np.asarray(ours, np.float32).reshape(-1)
    if expected.shape != ours.shape:
        raise PorterError(f"{step.name} ({_file_ops(c, ops)}): the step makes {ours.size} values where "
                          f"the graph's ops make {expected.size}")
    if c.reference == Reference.LITERT_BUILTIN:
        same = np.array_equal(expected.view(np.uint32), ours.view(np.uint32)) or np.array_equal(expected, ours)
        tolerance = 0.0
    else:
        tolerance = FUSED_TOLERANCE * max(1.0, float(np.abs(expected).max()))
        same = bool(np.all(np.abs(expected - ours) <= tolerance))
    if not same:
        worst = float(np.abs(expected.astype(np.float64) - ours).max())
        producer = c.graph.producer(t)
        at = c.describe(producer.index) if producer is not None else f"tensor {t}"
        raise PorterError(f"{step.name} matches the graph's ops ({_file_ops(c, ops)}) but computes "
                          f"something else: max |Δ| {worst:.3g} (allowed {tolerance:g}) at {at}")


def _file_ops(c: Canonical, ops) -> str:
    file_ops = c.file_ops(ops)
    if len(file_ops) <= 4:
        return "ops " + ", ".join(str(i) for i in file_ops)
    return f"ops {file_ops[0]}..{file_ops[-1]}"
