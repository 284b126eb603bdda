"""A decoder's attention by role: a softmax between Q.K^T and P.V over a KV cache.

Anchored on the block's softmax, everything else is found by what it does:

- the Q.K^T product, its scalar factor and its mask (porter.recover.encoder.attention.scores_before);
- K and V each come out of a Concat of a cache input and the new keys / values whose result
  is a graph output (the cache); before the product they may be repeated across query heads
  (grouped-query attention);
- Q, the new keys and the new values come out of Linear layers reading the block's norm, one
  fused or three; every chain of views, transposes, slices and expands between is run on index
  arrays (porter.recover.probe.index_map) and must move data exactly as splitting the Linear's
  outputs into heads (and K into K^T, and kv head h // (heads / kv_heads) into query head h)
  would; the context must merge back the same way;
- rotary positions are x * cos + rotate(x) * sin with constant tables, rotate being any ops
  that, run on numbered inputs, swap and negate halves (or pairs) of each head;
- the mask is the constant the graph adds or selects with at a binding of the cache length and
  token count; `check_causal` evaluates it at several and requires that it hides key j from
  query i exactly when j > past + i.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph
from porter.ir.decoder import MASK_ADD, MASK_REPLACE, ROTATE_HALF, ROTATE_INTERLEAVED
from porter.ir.encoder import Reference
from porter.recover.encoder import attention as encoder_attention
from porter.recover import probe
from porter.recover.decoder.io import MAIN_BINDING, PROBE_BINDINGS, Bindings

# ops that only move data (a gather's indices are constant by then: a binding folds them)
MOVEMENT = ("view", "permute", "slice", "expand", "tile", "gather")


@dataclass
class Projection:
    """Where one of q / k / v comes from: a Linear's output and the columns it takes."""

    linear: int  # canonical op
    columns: np.ndarray  # [heads, head_dim]: the Linear's output column of each head's value
    ops: set[int] = field(default_factory=set)
    factor: tuple[str, float] | None = None  # a scalar the values are multiplied ("mul") or divided by


@dataclass
class FoundRope:
    style: str
    cos: int  # constant tensors at the main binding
    sin: int
    ops: set[int]
    layout: np.ndarray  # for each element of the rope's input, its flat index in the Linear's output
    width: int  # the Linear's outputs per token
    in_head: np.ndarray  # for each element of the rope's input, its place in its head


@dataclass
class FoundAttention:
    heads: int
    kv_heads: int
    head_dim: int
    scale: float | None
    mask: str
    fill: float
    mask_tensor: int
    hides_when: bool  # the mask tensor's value that hides a key (select), or True (add: == fill)
    q: Projection
    k: Projection
    v: Projection
    o: int  # canonical linear op
    past_key: int  # graph input tensors
    past_value: int
    present_key: int
    present_value: int
    ropes: list[FoundRope]
    ops: set[int]
    keys_broadcast: bool = False  # the product reads one kv head broadcast over the query heads
    values_broadcast: bool = False


def _back(g: Graph, t: int, region: set[int]) -> tuple[int, list[int]]:
    """From t back through data movement inside the region: (the tensor it starts from, the
    ops in data-flow order)."""
    ops = []
    while (op := g.producer(t)) is not None and op.index in region and op.type in MOVEMENT:
        ops.append(op.index)
        t = op.inputs[0]
    return t, ops[::-1]


def _forward(g: Graph, t: int, region: set[int]) -> tuple[int, list[int]]:
    ops = []
    while len(users := g.users(t)) == 1 and users[0].index in region and users[0].type in MOVEMENT \
            and t not in g.outputs.values():
        ops.append(users[0].index)
        t = users[0].outputs[0]
    return t, ops


def _map(g: Graph, ops: list[int], source: int, end: int, where: str) -> np.ndarray:
    if not ops:
        return np.arange(int(np.prod(g.tensor(source).shape)), dtype=np.int64).reshape(g.tensor(source).shape)
    got = probe.index_map(g, ops, source, end)
    if got is None:
        raise PorterError(f"{where}: porter cannot follow the data movement "
                          + "; ".join(probe.describe_op(g, i) for i in ops[:3]))
    return got


def find(g: Graph, bindings: Bindings, region: set[int], normed: int, out: int, where: str) -> FoundAttention:
    softmaxes = [i for i in region if g.ops[i].type == "softmax"]
    if len(softmaxes) != 1:
        raise PorterError(f"{where}: {len(softmaxes)} softmaxes, not one")
    softmax = g.ops[softmaxes[0]]
    scores = encoder_attention.scores_before(g, softmax.inputs[0], set(range(len(g.ops))) - region)
    if scores is None or scores.product not in region:
        raise PorterError(f"{where}: the input of {probe.describe_op(g, softmax.index)} is not Q.K^T "
                          "(with at most a scalar factor and a mask)")
    encoder_attention.refuse_terms(g, scores, where)
    qk = g.ops[scores.product]
    p_t, p_views = _forward(g, softmax.outputs[0], region)
    guard = encoder_attention.nan_guard_after(g, p_t)  # torch's sdpa: where(isnan(p), 0, p)
    if guard is not None:
        p_t, guard_ops = guard
        p_views = p_views + guard_ops
    pv = [u for u in g.users(p_t) if u.type == "matmul" and u.inputs[0] == p_t and u.index in region]
    if len(pv) != 1 or qk.options.get("adj_a") or qk.options.get("adj_b"):
        raise PorterError(f"{where}: the softmax's probabilities are not multiplied by V")
    pv = pv[0]
    q_shape = g.tensor(qk.inputs[0]).shape
    heads, seq, head_dim = int(np.prod(q_shape[:-2])), q_shape[-2], q_shape[-1]
    ops = {softmax.index, qk.index, pv.index} | scores.ops | set(p_views)
    k_side = _cached(g, qk.inputs[1], region, heads, head_dim, transposed=True, where=f"{where}, K")
    v_side = _cached(g, pv.inputs[1], region, heads, head_dim, transposed=False, where=f"{where}, V")
    kv_heads = k_side["kv_heads"]
    if v_side["kv_heads"] != kv_heads:
        raise PorterError(f"{where}: K has {kv_heads} heads and V {v_side['kv_heads']}")
    ropes = []
    q = _projection(g, qk.inputs[0], region, normed, heads, head_dim, ropes, f"{where}, Q")
    k = _projection(g, k_side["new"], region, normed, kv_heads, head_dim, ropes, f"{where}, K")
    v = _projection(g, v_side["new"], region, normed, kv_heads, head_dim, ropes, f"{where}, V")
    if v.factor is not None:
        raise PorterError(f"{where}: V is scaled before P.V; porter's attention does not do that")
    if any(r.style != ropes[0].style for r in ropes) or len(ropes) not in (0, 2) or (ropes and len(
            [p for p in (q, k) if any(r.ops & p.ops for r in ropes)]) != 2):
        raise PorterError(f"{where}: rotary positions must turn Q and K alike, and nothing else")
    o, merge_ops = _output(g, pv.outputs[0], out, region, heads, seq, head_dim, where)
    mask, fill, mask_tensor, hides_when, mask_ops = _mask(g, scores, where)
    ops |= k_side["ops"] | v_side["ops"] | q.ops | k.ops | v.ops | merge_ops | mask_ops | {o}
    for r in ropes:
        ops |= r.ops
    scale = _scale(scores, where)
    if scale is None and qk.options.get("fused"):  # FusedMatMul: MLAS's SGEMM at every row count
        scale = 1.0
    found = FoundAttention(heads, kv_heads, head_dim, scale, mask, fill, mask_tensor, hides_when, q, k, v, o,
                           k_side["past"], v_side["past"], k_side["present"], v_side["present"], ropes, ops,
                           k_side["broadcast"], v_side["broadcast"])
    check_causal(bindings, found, where)
    return found


def _scale(scores, where: str) -> float | None:
    if scores.divisor is not None:
        raise PorterError(f"{where}: the scores are divided by {scores.divisor:g}; onnxruntime multiplies by "
                          "the reciprocal once fused (a graph porter canonicalises as a product)")
    return None if scores.scale is None else float(np.float32(scores.scale))


def _cached(g: Graph, t: int, region: set[int], heads: int, head_dim: int, transposed: bool, where: str) -> dict:
    """K or V as the product reads it: a cache Concat(past, new), a graph output, repeated
    across query heads by data movement the index maps check."""
    present, ops = _back(g, t, region)
    concat = g.producer(present)
    if concat is None or concat.type != "concat" or concat.index not in region or len(concat.inputs) != 2 \
            or present not in g.outputs.values() or g.producer(concat.inputs[0]) is not None:
        raise PorterError(f"{where}: does not come from a Concat of a cache input and the new values that "
                          "is a graph output")
    shape = g.tensor(present).shape
    if len(shape) != 4 or shape[0] != 1 or shape[-1] != head_dim or int(concat.options["axis"]) % 4 != 2 \
            or heads % shape[1]:
        raise PorterError(f"{where}: the cache {g.tensor(present).describe()} is not [1, kv_heads, "
                          f"past + seq, {head_dim}] extended along its third axis")
    kv_heads, keys = shape[1], shape[2]
    positions = np.arange(int(np.prod(shape))).reshape(shape)[0]
    used = positions[np.arange(heads) // (heads // kv_heads)]  # [heads, keys, head_dim]
    expected = used.transpose(0, 2, 1) if transposed else used
    got = _map(g, ops, present, t, where)
    broadcast = got.ndim >= 3 and got.shape[-3] == 1 and heads > 1  # one kv head the product broadcasts
    if broadcast:
        got = np.broadcast_to(got, got.shape[:-3] + (heads,) + got.shape[-2:])
    if got.size != expected.size or not np.array_equal(got.reshape(-1), expected.reshape(-1)):
        raise PorterError(f"{where}: the data movement from the cache {g.tensor(present).describe()} to "
                          f"{g.tensor(t).describe()} is not {'K^T' if transposed else 'V'} of {heads} query "
                          f"heads over {kv_heads} kv heads of {keys} positions")
    return {"kv_heads": kv_heads, "new": concat.inputs[1], "past": concat.inputs[0], "present": present,
            "ops": set(ops) | {concat.index}, "broadcast": broadcast}


def _projection(g: Graph, t: int, region: set[int], normed: int, heads: int, head_dim: int,
                ropes: list, where: str) -> Projection:
    """The Linear a head-split tensor [.., heads, seq, head_dim] comes from, and which of its
    output columns make each head's values (q|k|v blocks, or laid out per head as GPT-NeoX's
    fused query_key_value is): traced back through data movement, rotary positions, and a
    Concat of a rotated and a passed-through part of each head (partial rotary)."""
    traced = _trace(g, t, region, normed, where)
    linear = g.ops[traced.linear]
    width = g.tensor(linear.outputs[0]).shape[-1]
    got = traced.indices.reshape(-1, heads, traced.indices.shape[-2], head_dim)
    seq = got.shape[2]
    token, column = got // width, got % width
    if got.shape[0] != 1 or not np.array_equal(token, np.broadcast_to(np.arange(seq)[None, None, :, None], got.shape)) \
            or not np.all(column == column[:, :, :1, :]) or np.unique(column[0, :, 0]).size != heads * head_dim:
        raise PorterError(f"{where}: the data movement from {g.tensor(linear.outputs[0]).describe()} to "
                          f"{g.tensor(t).describe()} is not a split of each token's outputs into {heads} heads "
                          f"of {head_dim}")
    columns = column[0, :, 0, :]
    in_head = np.full(width, -1, np.int64)
    in_head[columns.reshape(-1)] = np.tile(np.arange(head_dim), heads)
    for rope in traced.ropes:
        ropes.append(FoundRope(rope["style"], rope["cos"], rope["sin"], rope["ops"], rope["layout"], width,
                               in_head[rope["layout"] % width]))
    return Projection(traced.linear, columns, traced.ops, traced.factor)


@dataclass
class _Traced:
    linear: int
    indices: np.ndarray  # for each element of the traced tensor, its flat index in the Linear's output
    ropes: list
    ops: set[int]
    factor: tuple[str, float] | None = None  # a scalar Mul / Div after the Linear and any rotary


def _scalar_factor(g: Graph, op) -> tuple[int, tuple[str, float]] | None:
    """(its other input, (mul | div, the scalar)) for a Mul / Div of a value by a scalar constant
    (OPT's q_proj(x) * scaling): elementwise, so data movement around it does not change it."""
    if op is None or op.type not in ("mul", "div"):
        return None
    x, c = _operand_and_constant(g, op)
    if x is None or (op.type == "div" and x != op.inputs[0]) or np.asarray(g.const(c)).size != 1:
        return None
    return x, (op.type, float(np.asarray(g.const(c), np.float32).reshape(-1)[0]))


def _trace(g: Graph, t: int, region: set[int], normed: int, where: str, rotated: bool = False) -> _Traced:
    source, moves = _back(g, t, region)
    op = g.producer(source)
    rope = _rope(g, source, region, where) if not rotated and op is not None and op.type == "add" else None
    factor = _scalar_factor(g, op) if op is not None and op.index in region else None
    if factor is not None:
        if rotated:
            raise PorterError(f"{where}: {probe.describe_op(g, op.index)} scales the values before the rotary "
                              "positions turn them; porter applies a scalar factor after them")
        inner = _trace(g, factor[0], region, normed, where)
        if inner.factor is not None:
            raise PorterError(f"{where}: {probe.describe_op(g, op.index)} is a second scalar factor on one "
                              "projection; porter applies one")
        found = _Traced(inner.linear, inner.indices, inner.ropes, inner.ops | {op.index}, factor[1])
    elif rope is not None:
        inner = _trace(g, rope["input"], region, normed, where, rotated=True)
        found = _Traced(inner.linear, inner.indices, [{**rope, "layout": inner.indices}], inner.ops | rope["ops"])
    elif op is not None and op.type == "concat" and op.index in region and \
            int(op.options["axis"]) % len(g.tensor(source).shape) == len(g.tensor(source).shape) - 1:
        parts = [_trace(g, i, region, normed, where, rotated) for i in op.inputs]
        if len({p.linear for p in parts}) != 1 or any(p.ropes for p in parts[1:]) or any(p.factor for p in parts):
            raise PorterError(f"{where}: {probe.describe_op(g, op.index)} joins parts of one head that do not come "
                              "from one Linear as a rotated first part and parts passed through")
        found = _Traced(parts[0].linear, np.concatenate([p.indices for p in parts], axis=-1),
                        parts[0].ropes, set().union(*(p.ops for p in parts)) | {op.index})
    elif op is not None and op.type == "linear" and op.index in region and \
            _through_views_to(g, op.inputs[0], region) == normed:
        shape = g.tensor(source).shape
        found = _Traced(op.index, np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape), [], {op.index})
    else:
        made_by = f"{probe.describe_op(g, op.index)}, which makes it," if op is not None else "it"
        raise PorterError(f"{where}: {g.tensor(source).describe()} is not a Linear of the block's norm ({made_by} "
                          "is neither data movement nor rotary positions)")
    moved = _map(g, moves, source, t, where)
    return _Traced(found.linear, found.indices.reshape(-1)[moved], found.ropes, found.ops | set(moves), found.factor)


def _through_views_to(g: Graph, t: int, region: set[int]) -> int:
    while (op := g.producer(t)) is not None and op.type == "view" and op.index in region:
        t = op.inputs[0]
    return t


def _rope(g: Graph, t: int, region: set[int], where: str) -> dict | None:
    """x * cos + rotate(x) * sin ending at tensor t (an add), or None if it is not that."""
    add = g.producer(t)
    terms = [g.producer(i) for i in add.inputs]
    if any(p is None or p.type != "mul" or p.index not in region for p in terms):
        return None
    for plain, turned in (terms, terms[::-1]):
        x, cos = _operand_and_constant(g, plain)
        y, sin = _operand_and_constant(g, turned)
        if x is None or y is None or cos is None or sin is None:
            continue
        rotate_ops = probe.region(g, y, stop={x})
        if not rotate_ops or not set(rotate_ops) <= region or probe.leaves(g, rotate_ops) != {x}:
            continue
        style = _rotation_style(g, rotate_ops, x, y)
        if style is None:
            raise PorterError(f"{where}: {probe.describe_op(g, add.index)} adds x * c + f(x) * s, but f "
                              "does not rotate halves or pairs of each head (x1, x2) -> (-x2, x1)")
        ops = set(rotate_ops) | {plain.index, turned.index, add.index}
        return {"style": style, "cos": cos, "sin": sin, "ops": ops, "input": x, "output": t}
    return None


def _operand_and_constant(g: Graph, mul) -> tuple[int | None, int | None]:
    a, b = mul.inputs
    if g.const(b) is not None and g.const(a) is None:
        return a, b
    if g.const(a) is not None and g.const(b) is None:
        return b, a
    return None, None


def _rotation_style(g: Graph, ops: list[int], x: int, y: int) -> str | None:
    """Run the rotation on x = 1, 2, 3, ... (floats, exact): each output must be plus or minus one
    input of the same head row, as rotate-half or rotate-pairs moves it."""
    shape = g.tensor(x).shape
    numbered = (np.arange(int(np.prod(shape))) + 1).astype(np.float32).reshape(shape)
    try:
        got = probe.run(g, ops, {x: numbered}, Reference.ONNXRUNTIME_CPU, keep={y})[y]
    except Exception:  # noqa: BLE001 - anything but a clean signed permutation is "not a rotation"
        return None
    dim = shape[-1]
    rows = numbered.reshape(-1, dim)
    half = np.concatenate([-rows[:, dim // 2:], rows[:, :dim // 2]], axis=1)
    pairs = np.stack([-rows[:, 1::2], rows[:, 0::2]], axis=-1).reshape(rows.shape)
    got = np.asarray(got, np.float32).reshape(-1, dim) if np.size(got) == rows.size else None
    for style, expected in ((ROTATE_HALF, half), (ROTATE_INTERLEAVED, pairs)):
        if got is not None and dim % 2 == 0 and np.array_equal(got, expected):
            return style
    return None


def _output(g: Graph, ctx: int, out: int, region: set[int], heads: int, seq: int, head_dim: int,
            where: str) -> tuple[int, set[int]]:
    """The context merged back into rows of heads * head_dim, then the output Linear."""
    merged, ops = _forward(g, ctx, region)
    users = [u for u in g.users(merged) if u.index in region]
    if len(users) != 1 or users[0].type != "linear":
        raise PorterError(f"{where}: the context {g.tensor(merged).describe()} does not feed one output Linear")
    expected = np.arange(heads * seq * head_dim).reshape(heads, seq, head_dim).transpose(1, 0, 2)
    got = _map(g, ops, ctx, merged, where)
    if got.size != expected.size or not np.array_equal(got.reshape(-1), expected.reshape(-1)):
        raise PorterError(f"{where}: the data movement after P.V ({g.tensor(merged).describe()}) is not a merge "
                          f"of {heads} heads back into rows of {heads * head_dim}")
    o = users[0]
    if _through_views_to(g, out, region) != o.outputs[0]:
        raise PorterError(f"{where}: the output Linear {probe.describe_op(g, o.index)} is not the block's output")
    return o.index, set(ops) | {g.producer(t).index for t in _views_between(g, o.outputs[0], out)}


def _views_between(g: Graph, start: int, end: int) -> list[int]:
    made = []
    while end != start:
        made.append(end)
        end = g.producer(end).inputs[0]
    return made


def _mask(g: Graph, scores, where: str):
    """(mode, fill, the mask tensor, its hiding value, ops) of the scores' mask."""
    if scores.bias is None and scores.select is None:
        raise PorterError(f"{where}: the scores are not masked; a decoder's attention must hide later tokens")
    if scores.select is not None:
        cond, fill_t, scores_when_true = scores.select
        fill = g.const(fill_t)
        if g.const(cond) is None or fill is None or fill.size != 1:
            raise PorterError(f"{where}: the mask's condition {g.tensor(cond).describe()} is not a constant "
                              "once the lengths are known, or its fill is not one value")
        return MASK_REPLACE, float(np.float32(fill.reshape(-1)[0])), cond, not scores_when_true, set()
    values = g.const(scores.bias)
    if values is None:
        raise PorterError(f"{where}: the mask {g.tensor(scores.bias).describe()} added to the scores is not a "
                          "constant once the lengths are known (it depends on an input)")
    hidden = values[values != 0]
    if hidden.size == 0 or np.unique(hidden).size != 1:
        raise PorterError(f"{where}: the mask added to the scores is not 0 for visible keys and one value for "
                          "hidden ones")
    return MASK_ADD, float(np.float32(hidden[0])), scores.bias, True, set()


def causal(past: int, seq: int) -> np.ndarray:
    """hidden[i, j]: key j is hidden from query i (past + i): j > past + i."""
    return np.arange(past + seq)[None, :] > (np.arange(seq)[:, None] + past)


def check_causal(bindings: Bindings, found: FoundAttention, where: str) -> None:
    """Evaluate the mask at several (past, seq): it must hide exactly the later keys, the same
    way for every head."""
    if not found.fill <= -1e4:
        raise PorterError(f"{where}: hidden keys get {found.fill:g}; a causal mask hides them with a large "
                          "negative number")
    for past, seq in (MAIN_BINDING, *PROBE_BINDINGS):
        value = bindings.constant(found.mask_tensor, past, seq, f"{where}: the mask")
        try:
            shaped = np.broadcast_to(value, (found.heads, seq, past + seq)) if value.ndim <= 3 else \
                np.broadcast_to(value, (1, found.heads, seq, past + seq))[0]
        except ValueError:
            raise PorterError(f"{where}: the mask {list(value.shape)} does not cover {seq} queries and "
                              f"{past + seq} keys") from None
        hidden = (shaped == found.fill) if found.mask == MASK_ADD else (shaped.astype(bool) == found.hides_when)
        if found.mask == MASK_ADD and not np.all(shaped[~hidden] == 0):
            raise PorterError(f"{where}: the mask adds values other than 0 to visible keys")
        expected = causal(past, seq)
        if not np.all(hidden == expected[None]):
            i, j = np.argwhere(hidden != expected[None])[0][1:]
            raise PorterError(f"{where}: the mask {_made_by(bindings, found.mask_tensor)} is not causal: with {past} cached and {seq} new tokens it "
                              f"{'hides' if hidden[:, i, j].any() else 'shows'} key {j} "
                              f"{'from' if hidden[:, i, j].any() else 'to'} query {past + i}")


_PASSING = ("Cast", "Reshape", "Unsqueeze", "Squeeze", "Expand", "Identity", "Transpose")


def _made_by(bindings: Bindings, t: int) -> str:
    """A file tensor with the file op that computes it (past casts and reshapes)."""
    g = bindings.g
    op = g.producer(t)
    while op is not None and op.type in _PASSING and g.producer(op.inputs[0]) is not None:
        op = g.producer(op.inputs[0])
    return f"{g.tensor(t).describe()}" + (f" (computed by op {op.index} {op.type})" if op is not None else "")
