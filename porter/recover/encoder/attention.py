"""Self-attention recognised by role: a softmax between two products of activations.

Every softmax over keys whose input comes from Q . K^T and whose output multiplies V is an
attention block, however the exporter spelled the head split, the scaling and the mask:

- the head split and merge are whatever data-movement ops lie between the Q / K / V buffers and
  the products; they are run on index arrays and must move data exactly as splitting [seq,
  heads * head_dim] into heads (and K^T) would (`porter.recover.probe.index_map`);
- scalar factors on Q, on K, on the scores (or a divisor) are taken where the graph applies them;
- the mask is *any* function of the mask input added to the scores (or selecting between the
  scores and a fill value): it is evaluated on probe masks and must keep or drop each key the
  same way for every query and head (`porter.recover.probe.probe_masks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.encoder import Attention, KeyRule, MaskMode, Operand, Reference, kept_keys
from porter.recover import probe
from porter.reference.ops import Unsupported

LAYOUT = ("view", "permute")


@dataclass
class Chain:
    """A path from a buffer through data movement and scalar factors to a product's operand."""

    source: int  # the buffer (its flat layout is [seq, heads * head_dim])
    layout: list[int]  # layout op indices, in data-flow order
    scalars: list[tuple[str, float]]  # ("mul" | "div", value), in data-flow order
    ops: set[int] = field(default_factory=set)  # the ops only the chain reads: the block's
    shared: set[int] = field(default_factory=set)  # the chain's ops other ops read too: steps of their own


def _scalar_operand(g: Graph, op) -> tuple[int, float] | None:
    """(the non-constant operand, the scalar) of a mul / div by a one-value constant."""
    if len(op.inputs) != 2:
        return None
    a, b = op.inputs
    for x, c, first in ((a, b, True), (b, a, False)):
        value = g.const(c)
        if value is not None and value.size == 1 and g.const(x) is None:
            if op.type == "div" and not first:
                return None  # c / x is not a scaling of x
            return x, float(np.asarray(value, np.float32).reshape(-1)[0])
    return None


def _chain_back(g: Graph, t: int, claimed: set[int]) -> Chain:
    """Back from a product's operand through data movement and scalar factors to the buffer. The
    block takes the ops only the chain reads; from the first tensor another op reads too (the
    heads DeBERTa's relative terms multiply as well), the ops stay the graph's, run as steps."""
    layout, scalars, ops, shared = [], [], set(), set()
    exclusive = True
    while (op := g.producer(t)) is not None and op.index not in claimed:
        exclusive = exclusive and len(g.users(t)) == 1
        if op.type in LAYOUT:
            layout.append(op.index)
            t = op.inputs[0]
        elif op.type in ("mul", "div") and (s := _scalar_operand(g, op)) is not None:
            scalars.append((op.type, s[1]))
            t = s[0]
        else:
            break
        (ops if exclusive else shared).add(op.index)
    return Chain(t, list(reversed(layout)), list(reversed(scalars)), ops, shared)


def _head_split(seq: int, heads: int, head_dim: int, transposed: bool) -> np.ndarray:
    split = np.arange(seq * heads * head_dim).reshape(seq, heads, head_dim).transpose(1, 0, 2)
    return split.transpose(0, 2, 1) if transposed else split


def _moves_like(g: Graph, chain: Chain, end: int, expected: np.ndarray) -> bool:
    """Whether the chain's data movement takes the source's elements where `expected` says (its
    scalar factors move nothing: the map is followed through them)."""
    last = g.ops[chain.layout[-1]].outputs[0] if chain.layout else chain.source
    got = probe.index_map(g, chain.layout, chain.source, last)
    if got is not None and tuple(got.shape) != tuple(g.tensor(end).shape):
        got = got.reshape(g.tensor(end).shape) if got.size == expected.size else None
    return got is not None and got.size == expected.size and np.array_equal(got.reshape(-1), expected.reshape(-1))


def _chain_forward(g: Graph, t: int, claimed: set[int]) -> tuple[int, list[int]]:
    """From a product's output through single-reader data movement to the merged tensor."""
    ops = []
    while len(users := g.users(t)) == 1 and users[0].type in LAYOUT and users[0].index not in claimed \
            and t not in g.outputs.values():
        ops.append(users[0].index)
        t = users[0].outputs[0]
    return t, ops


# a mask drops a key with a value at most this (its exp underflows against any live score)
DROP_BELOW = -1e4


@dataclass
class Scores:
    """What happens between Q . K^T and the softmax."""

    product: int  # the matmul op
    scale: float | None = None
    divisor: float | None = None
    bias: int | None = None  # tensor added to the scores
    select: tuple[int, int, bool] | None = None  # (condition tensor, fill tensor, scores when true)
    # tensors added to the scaled scores besides the mask (a relative-position bias, ALiBi ...)
    terms: list[int] = field(default_factory=list)
    ops: set[int] = field(default_factory=set)


def _scores_side(g: Graph, operands: list[int], claimed: set[int]) -> tuple[int, int] | None:
    """(scores operand, bias operand) of the add: the scores come from the Q.K^T product."""
    for x, other in ((operands[0], operands[1]), (operands[1], operands[0])):
        if _leads_to_product(g, x, claimed):
            return x, other
    return None


def _leads_to_product(g: Graph, t: int, claimed: set[int]) -> bool:
    while (op := g.producer(t)) is not None and op.index not in claimed:
        if op.type == "matmul":
            return True
        if op.type == "view":
            t = op.inputs[0]
        elif op.type in ("mul", "div") and (s := _scalar_operand(g, op)) is not None:
            t = s[0]
        elif op.type == "add" and len(op.inputs) == 2:  # another term added to the scores
            return any(_leads_to_product(g, x, claimed) for x in op.inputs)
        else:
            return False
    return False


@dataclass
class FoundAttention:
    step: Attention
    ops: set[int]
    mask_tensor: int | None  # the bias / condition tensor the mask path computes
    arrays: dict = field(default_factory=dict)  # the score terms, term0, term1, ... [heads, seq, seq]
    shared: set[int] = field(default_factory=set)  # ops between the step's inputs and its own, run as steps too


def find(g: Graph, ref: Reference, seq: int, mask_input: int | None, claimed: set[int]) -> list[FoundAttention]:
    """Every attention block of the graph, in graph order."""
    found = []
    for op in g.ops:
        if op.type != "softmax" or op.index in claimed:
            continue
        block = _attention_at(g, ref, seq, mask_input, op, claimed)
        if block is not None:
            found.append(block)
            claimed |= block.ops
    return found


def _attention_at(g: Graph, ref, seq, mask_input, softmax, claimed) -> FoundAttention | None:
    where = f"attention at {softmax.describe()}"
    scores = _parse_scores(g, softmax.inputs[0], claimed)
    if scores is None:
        return None
    qk = g.ops[scores.product]
    # probabilities -> P . V
    p_t = softmax.outputs[0]
    view_ops = []
    while len(users := g.users(p_t)) == 1 and users[0].type == "view":
        view_ops.append(users[0].index)
        p_t = users[0].outputs[0]
    guard = _nan_guard(g, p_t)
    if guard is not None:
        p_t, guard_ops = guard
        view_ops += guard_ops
    pv_users = [u for u in g.users(p_t) if u.type == "matmul" and u.inputs[0] == p_t]
    if len(pv_users) != 1 or qk.options.get("adj_a") or pv_users[0].options.get("adj_a") \
            or pv_users[0].options.get("adj_b"):
        return None
    pv = pv_users[0]
    q, k, v = (_chain_back(g, t, claimed) for t in (qk.inputs[0], qk.inputs[1], pv.inputs[1]))
    a_shape = g.tensor(qk.inputs[0]).shape
    head_dim = a_shape[-1]
    hidden = int(np.prod(g.tensor(q.source).shape)) // seq if seq else 0
    if head_dim <= 0 or hidden % head_dim or int(np.prod(a_shape)) != seq * hidden:
        return None
    heads = hidden // head_dim
    k_transposed = not qk.options.get("adj_b")
    checks = ((q, qk.inputs[0], _head_split(seq, heads, head_dim, False)),
              (k, qk.inputs[1], _head_split(seq, heads, head_dim, k_transposed)),
              (v, pv.inputs[1], _head_split(seq, heads, head_dim, False)))
    for chain, end, expected in checks:
        if not _moves_like(g, chain, end, expected):
            raise PorterError(f"{where}: the data movement from {g.tensor(chain.source).describe()} "
                              f"to {g.tensor(end).describe()} is not a split into {heads} heads of "
                              f"{head_dim}")
    merged, merge_ops = _chain_forward(g, pv.outputs[0], claimed)
    context_positions = np.arange(seq * hidden).reshape(heads, seq, head_dim)
    expected_merge = context_positions.transpose(1, 0, 2).reshape(-1)
    got = probe.index_map(g, merge_ops, pv.outputs[0], merged)
    if got is None or not np.array_equal(got.reshape(-1), expected_merge):
        raise PorterError(f"{where}: the data movement after P.V ({g.tensor(merged).describe()}) is not "
                          f"a merge of {heads} heads back into rows of {hidden}")
    bias = g.const(scores.bias) if scores.bias is not None else None
    if bias is not None and np.any(bias != 0) and not np.any(bias <= DROP_BELOW):
        # a constant that drops no key is a score term, the last one added
        scores.terms.insert(0, scores.bias)
        scores.bias = None
    terms, arrays = _terms(g, scores, (heads, seq, seq), where)
    mask, keep, drop, mask_ops, mask_tensor, key_rule, query_mask = _mask(g, ref, seq, mask_input, scores, where)
    q_scale = _one_scalar(q.scalars, where, "Q")
    k_scale = _one_scalar(k.scalars, where, "K")
    if v.scalars:
        raise PorterError(f"{where}: V is scaled before P.V; porter's attention does not do that")
    step = Attention("attention", [f"t{q.source}", f"t{k.source}", f"t{v.source}"] + [t.buffer for t in terms if t.buffer],
                     [f"t{merged}"], [], heads, head_dim, q_scale, k_scale, scores.scale,
                     scores.divisor, mask, keep, drop, float(softmax.options.get("beta", 1.0)), key_rule,
                     terms=terms, query_mask=query_mask, softmax_body=bool(softmax.options.get("body", False)))
    ops = ({softmax.index, qk.index, pv.index} | scores.ops | q.ops | k.ops | v.ops | set(view_ops)
           | set(merge_ops) | mask_ops)
    return FoundAttention(step, ops, mask_tensor, arrays, q.shared | k.shared | v.shared)


def _nan_guard(g: Graph, p: int) -> tuple[int, list[int]] | None:
    """where(isnan(p), 0, p) after the softmax (torch's sdpa): an identity here, since every
    window porter runs keeps its first key, so no row of probabilities is all NaN."""
    users = g.users(p)
    isnan = [u for u in users if u.type == "isnan"]
    where = [u for u in users if u.type == "where"]
    if len(users) != 2 or len(isnan) != 1 or len(where) != 1:
        return None
    cond, fill, value = where[0].inputs
    if cond != isnan[0].outputs[0] or value != p or g.const(fill) is None or np.any(g.const(fill) != 0):
        return None
    return where[0].outputs[0], [isnan[0].index, where[0].index]


def _one_scalar(scalars: list[tuple[str, float]], where: str, operand: str) -> float | None:
    if not scalars:
        return None
    if len(scalars) > 1 or scalars[0][0] != "mul":
        raise PorterError(f"{where}: {operand} is scaled by {scalars}; porter's attention takes one "
                          "multiplication per operand")
    return scalars[0][1]


def _parse_scores(g: Graph, t: int, claimed: set[int]) -> Scores | None:
    """Walk back from the softmax input: views, at most one mask (an add or a where), any other
    terms added, at most one scalar factor, then the Q.K^T product. In data-flow order the factor
    must come before the mask and the terms (else it would scale them too)."""
    s = Scores(-1)
    accepts = {"mask", "term", "factor"}  # what may still come, walking back
    while (op := g.producer(t)) is not None and op.index not in claimed:
        if op.type == "matmul":
            s.product = op.index
            return s
        s.ops.add(op.index)
        scalar = _scalar_operand(g, op) if op.type in ("mul", "div") else None
        if op.type == "view":
            t = op.inputs[0]
        elif scalar is not None and "factor" in accepts:
            s.scale, s.divisor = (scalar[1], None) if op.type == "mul" else (None, scalar[1])
            t, accepts = scalar[0], set()
        elif op.type == "add" and "mask" in accepts and (side := _scores_side(g, op.inputs, claimed)):
            (t, s.bias), accepts = side, {"term", "factor"}
        elif op.type == "add" and "term" in accepts and (side := _scores_side(g, op.inputs, claimed)):
            t = side[0]
            s.terms.append(side[1])
        elif op.type == "where" and "mask" in accepts:
            cond, a, b = op.inputs
            if _leads_to_product(g, a, claimed) and g.const(b) is not None:
                t, s.select = a, (cond, b, True)
            elif _leads_to_product(g, b, claimed) and g.const(a) is not None:
                t, s.select = b, (cond, a, False)
            else:
                return None
            accepts = {"term", "factor"}
        else:
            return None
    return None


def _terms(g: Graph, scores: Scores, shape: tuple[int, int, int], where: str) -> tuple[list[Operand], dict]:
    """The terms added to the scores besides the mask, in data-flow order, as [heads, seq, seq]
    operands, and the constant ones' arrays (term0, term1, ...). A term that depends on no input
    (a relative-position bias: buckets of j - i, a learned value per head) was folded to a constant
    by canonicalisation, in the reference's arithmetic; broadcasting it to every head and query
    moves no value. A term computed from the inputs (DeBERTa's content-to-position and
    position-to-content products) is a buffer the graph's own ops compute, as steps, per window."""
    terms, arrays = [], {}
    for term in reversed(scores.terms):  # walked back from the softmax
        if g.const(term) is None:
            terms.append(_computed_term(g, term, shape, where))
            continue
        value = np.asarray(g.const(term), np.float32)
        while value.ndim > 3 and value.shape[0] == 1:  # a batch axis of one
            value = value[0]
        try:
            arrays[f"term{len(arrays)}"] = np.ascontiguousarray(np.broadcast_to(value, shape))
        except ValueError:
            raise PorterError(f"{where}: the score term {g.tensor(term).describe()} does not broadcast to "
                              f"{list(shape)} (heads, queries, keys)") from None
        terms.append(Operand(None, f"term{len(arrays) - 1}", shape))
    return terms, arrays


def _computed_term(g: Graph, term: int, shape: tuple[int, int, int], where: str) -> Operand:
    """A term the graph computes from its inputs: a float32 tensor of one value per head, query
    and key (leading axes of one aside), read by the attention step as its buffer."""
    t = g.tensor(term)
    dims = list(t.shape)
    while len(dims) > 3 and dims[0] == 1:
        dims = dims[1:]
    if tuple(dims) != shape or t.dtype != "float32":
        raise PorterError(f"{where}: {t.describe()} is added to the scores besides the mask "
                          f"({_term_origin(g, term)}); porter's attention adds a term computed per window "
                          f"as one float32 value per head, query and key {list(shape)}")
    return Operand(f"t{term}", None, tuple(t.shape))


def _term_origin(g: Graph, term: int) -> str:
    """What a score term depends on, for a refusal."""
    ops = probe.region(g, term)
    if g.const(term) is not None or not probe.leaves(g, ops):
        unfolded = next((probe.describe_op(g, i) for i in ops), None)
        return "a function of positions only: a relative-position bias" + \
            (f", which porter could not fold at {unfolded}" if unfolded else "")
    return "computed from " + ", ".join(g.tensor(x).describe() for x in sorted(probe.leaves(g, ops)))


def refuse_terms(g: Graph, scores: Scores, where: str) -> None:
    """Scores with terms added besides the mask are refused naming the term and what it depends
    on (the decoder's attention is a product, one factor and a mask)."""
    if scores.terms:
        term = scores.terms[0]
        raise PorterError(f"{where}: {g.tensor(term).describe()} is added to the scores besides the mask "
                          f"({_term_origin(g, term)}); porter's attention takes Q.K^T, one scalar factor "
                          "and a mask, and does not reproduce additive score terms yet")


def _mask(g: Graph, ref, seq, mask_input, scores: Scores, where: str):
    """(mode, keep value, drop value, the mask path's ops, the tensor it computes, which keys it
    keeps: those the mask keeps, or onnxruntime's leading count of 1s, and whether a query the
    mask drops drops every key)."""
    if scores.bias is None and scores.select is None:
        return MaskMode.NONE, 0.0, 0.0, set(), None, KeyRule.NONZERO, False
    tensor = scores.bias if scores.bias is not None else scores.select[0]
    const = g.const(tensor)
    if const is not None:
        if scores.bias is not None and np.all(const == 0):
            return MaskMode.NONE, 0.0, 0.0, set(), tensor, KeyRule.NONZERO, False
        raise PorterError(f"{where}: the scores get a constant {'bias' if scores.bias is not None else 'selection'} "
                          f"{g.tensor(tensor).describe()} that drops keys (a causal or fixed mask); an "
                          "encoder's mask must come from its mask input")
    ops = probe.region(g, tensor)
    sources = probe.leaves(g, ops)
    if mask_input is None or sources != {mask_input}:
        names = ", ".join(g.tensor(t).describe() for t in sorted(sources))
        raise PorterError(f"{where}: the attention mask {g.tensor(tensor).describe()} is computed from "
                          f"{names or 'nothing'}, not from the mask input alone")
    probes = [(m, _mask_planes(g, ref, ops, mask_input, tensor, m, seq, where)) for m in probe.probe_masks(seq)]
    # per query: every query keeps the same keys, or (DeBERTa's mask[i] * mask[j]) the queries the
    # mask input drops drop every key
    query_mask = any(not np.all(planes == planes[:, :1]) for _, planes in probes)
    values = {rule: (set(), set()) for rule in KeyRule}  # rule -> (kept keys' values, dropped ones')
    for m, planes in probes:
        live = planes[:, m != 0] if query_mask else planes
        if not live.size or not np.all(live == live[:, :1][:1]):
            raise PorterError(f"{where}: the mask {g.tensor(tensor).describe()} is not one row over the "
                              f"{seq} keys shared by every query and head, nor that row for the queries "
                              "the mask keeps and no key for the others (a causal mask is not supported "
                              "in an encoder)")
        row = live.reshape(-1, seq)[0]
        dead = planes[:, m == 0].reshape(-1) if query_mask else np.zeros(0, planes.dtype)
        if scores.select is not None:
            keep = row.astype(bool) == scores.select[2]
            if not np.array_equal(keep, m != 0) or np.any(dead.astype(bool) == scores.select[2]):
                raise PorterError(f"{where}: the mask selects other keys than the mask input keeps")
            continue
        for rule, (keep_values, drop_values) in values.items():
            kept = kept_keys(rule, m)
            keep_values |= {float(v) for v in row[kept]}
            drop_values |= {float(v) for v in row[~kept]} | {float(v) for v in dead}
    # the rule under which every probe keeps its keys with one value and drops them with another
    rule = next((r for r, (k, d) in values.items() if len(k) == 1 and len(d) <= 1), KeyRule.NONZERO)
    if query_mask and rule != KeyRule.NONZERO:
        raise PorterError(f"{where}: a mask per query that keeps the first count(mask == 1) keys is not supported")
    keep_values, drop_values = values[rule]
    if scores.select is not None:
        fill = float(np.asarray(g.const(scores.select[1]), np.float32).reshape(-1)[0])
        _check_drop(fill, where)
        return MaskMode.REPLACE, 0.0, fill, set(ops), tensor, KeyRule.NONZERO, query_mask
    if len(keep_values) != 1 or len(drop_values) > 1:
        raise PorterError(f"{where}: kept keys get {sorted(keep_values)} and padded keys "
                          f"{sorted(drop_values)}; expected one value each")
    drop = drop_values.pop() if drop_values else float("-inf")
    _check_drop(drop, where)
    return MaskMode.ADD, keep_values.pop(), drop, set(ops), tensor, rule, query_mask


def _mask_planes(g: Graph, ref, ops, mask_input: int, tensor: int, m: np.ndarray, seq: int, where: str) -> np.ndarray:
    """The mask path's value on probe mask m as [planes, queries, keys]: queries is 1 when the
    mask has no query axis, else the window's."""
    mask_t = g.tensor(mask_input)
    feed = m.reshape(mask_t.shape).astype(mask_t.dtype)
    try:
        value = np.asarray(probe.run(g, ops, {mask_input: feed}, ref, keep={tensor})[tensor])
    except Unsupported as e:
        raise PorterError(f"{where}: porter cannot evaluate the mask path ({e})") from None
    if value.ndim == 0 or value.shape[-1] != seq:
        raise PorterError(f"{where}: the mask {g.tensor(tensor).describe()} is not one value per key of the "
                          f"{seq}-token window")
    queries = seq if value.ndim >= 2 and value.shape[-2] == seq else 1
    return value.reshape(-1, queries, seq)


def _check_drop(drop: float, where: str) -> None:
    if not drop <= DROP_BELOW:
        raise PorterError(f"{where}: padded keys get {drop:g}; a mask must drop them with a large "
                          "negative number")


def scores_before(g: Graph, t: int, claimed: set[int]) -> Scores | None:
    """What lies between a Q.K^T product and the softmax reading tensor t (one scalar factor,
    one mask), or None: the encoder's walk, for the decoder's attention (porter.recover.decoder.attention)."""
    return _parse_scores(g, t, claimed)


def nan_guard_after(g: Graph, p: int) -> tuple[int, list[int]] | None:
    """(the guarded probabilities, its ops) when torch's sdpa NaN guard follows tensor p (see
    _nan_guard), else None: for the decoder's attention (porter.recover.decoder.attention)."""
    return _nan_guard(g, p)
