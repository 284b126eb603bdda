"""Proof by evaluation for decoders: the IR computes what the graph's own ops compute.

At two bindings (a cache of some length and several new tokens; an empty cache) the canonical
graph is run op by op on seeded random ids and cache contents (porter.reference.ops, each op in
onnxruntime's arithmetic), and so is the numpy executor on the same inputs. Block by block
(the embedding, each layer's attention and MLP output, the final norm, the logits, each
present cache) the two must agree to float rounding: onnxruntime fuses ops into kernels of its
own, which the executor follows and the op-by-op run does not. The first block that differs is
refused, naming the file's ops that made it.
"""

from __future__ import annotations

import numpy as np

from porter.errors import PorterError
from porter.ir.decoder import DecoderIR
from porter.ir.encoder import Reference
from porter.recover import probe
from porter.recover.decoder.io import MAIN_BINDING, Bindings, Roles
from porter.reference.execute_decoder import Session
from porter.reference.ops import Unsupported

# onnxruntime's fused kernels against the ops they replace: float rounding apart
TOLERANCE = 1e-4
PROOF_BINDINGS = (MAIN_BINDING, (0, 4))


def prove(ir: DecoderIR, bindings: Bindings, roles: Roles, tensors: dict) -> None:
    """tensors: trace name (porter.reference.execute_decoder.Session.step) -> canonical tensor
    at the main binding; tensor indices are the file's, so they hold at every binding."""
    rng = np.random.default_rng(20261201)
    for past, seq in PROOF_BINDINGS:
        c = bindings.at(past, seq)
        g = c.graph
        feeds = _feeds(g, ir, roles, past, seq, rng)
        presents = {g.outputs[n]: (i, kind) for i, ly in enumerate(ir.layers)
                    for kind, n in (("keys", ly.attention.present_key), ("values", ly.attention.present_value))}
        keep = set(tensors.values()) | set(presents)
        try:
            graph_values = probe.run(g, [op.index for op in g.ops], feeds, Reference.ONNXRUNTIME_CPU, keep=keep)
        except Unsupported as e:
            raise PorterError(f"porter cannot evaluate the graph's ops to check the decoder ({e})") from None
        session = Session(ir)
        for i, ly in enumerate(ir.layers):
            session.keys[i] = np.asarray(feeds[g.inputs[ly.attention.past_key]][0])
            session.values[i] = np.asarray(feeds[g.inputs[ly.attention.past_value]][0])
        trace: dict = {}
        session.step(feeds[g.inputs[roles.ids]].reshape(-1), trace)
        for name, t in tensors.items():
            _compare(c, name, t, graph_values[t], trace[name], past, seq)
        for t, (i, kind) in presents.items():
            _compare(c, f"layer {i}'s cached {kind}", t, graph_values[t], getattr(session, kind)[i], past, seq)


def _feeds(g, ir: DecoderIR, roles: Roles, past: int, seq: int, rng) -> dict:
    ids = g.inputs[roles.ids]
    feeds = {ids: rng.integers(0, ir.vocab, g.tensor(ids).shape).astype(g.tensor(ids).dtype)}
    for ly in ir.layers:
        for name in (ly.attention.past_key, ly.attention.past_value):
            t = g.inputs[name]
            feeds[t] = rng.standard_normal(g.tensor(t).shape).astype(np.float32)
    return feeds


def _compare(c, name: str, t: int, expected, ours, past: int, seq: int) -> None:
    expected = np.asarray(expected, np.float32).reshape(-1)
    ours = np.asarray(ours, np.float32).reshape(-1)
    where = f"{name} ({past} cached, {seq} new tokens)"
    if expected.shape != ours.shape:
        raise PorterError(f"{where}: the IR makes {ours.size} values where the graph's ops make {expected.size}")
    tolerance = TOLERANCE * max(1.0, float(np.abs(expected).max()))
    worst = float(np.abs(expected.astype(np.float64) - ours).max()) if expected.size else 0.0
    if not worst <= tolerance:
        producer = c.graph.producer(t)
        at = c.describe(producer.index) if producer is not None else f"tensor {t}"
        raise PorterError(f"{where} matches the graph's ops but computes something else: max |Δ| {worst:.3g} "
                          f"(allowed {tolerance:.3g}) at {at}")
