"""LiteRT's int8 ADD, SUB, MUL, SQUARED_DIFFERENCE and DIV as its x86 build runs them, against
LiteRT itself on single-op models (porter.reference.litert.int8).

LiteRT's x86 build compiles its optimized kernels with NEON through NEON_2_SSE: ADD and MUL run
NEON loops on whole blocks of a run and the reference formula on the rest, and which run an
element belongs to follows ProcessBroadcastShapes' walk of the two shapes. The loops round
differently (ADD's combined shift, AddScalarBroadcast's floor shift, int16 narrowing), so:

- every one of the 65,536 int8 pairs goes through each loop of each op (an elementwise run of
  65,536, a broadcast outer product either way round, a generic broadcast that only the
  reference loop walks), under quantisations found to separate the loops (ties of the
  roundings, results far outside int8) and seeded ones; and through every walk (tails, a
  broadcast leading axis, a true scalar, a rank-5 five-fold pattern, a 6-D generic broadcast);
- MUL's and DIV's multipliers are float32 products, DIV's rounding shift past 31 (and negative,
  for a multiplier far above one) is x86's;
- MEAN over axes 1 and 2 of a 4-D tensor with keep_dims is LiteRT's Mean4D (its own bias and
  multiplier, blocks of 16 channels);
- one mutation of each loop's arithmetic must fail (the first by default, the rest -m slow).
"""

from __future__ import annotations

import numpy as np
import pytest

from porter.reference.litert import int8 as K
from test_int8_full import GOLDENS, S, T, _feeds, _litert, _model_of, run_litert, single_op

EVERY = np.arange(-128, 128, dtype=np.int8)
X, Y = np.meshgrid(EVERY, EVERY, indexing="ij")

# op -> (options, options type, porter's kernel)
OPS = {
    "ADD": (S.AddOptionsT, S.BuiltinOptions.AddOptions, K.add),
    "SUB": (S.SubOptionsT, S.BuiltinOptions.SubOptions, K.sub),
    "MUL": (S.MulOptionsT, S.BuiltinOptions.MulOptions, K.mul),
    "SQUARED_DIFFERENCE": (S.SquaredDifferenceOptionsT, S.BuiltinOptions.SquaredDifferenceOptions,
                           K.squared_difference),
    "DIV": (S.DivOptionsT, S.BuiltinOptions.DivOptions, K.divide),
}

# Each operand pair takes every int8 pair through one loop: (x, y) arrays.
EXHAUSTIVE = {
    "flat": (X.ravel(), Y.ravel()),  # one elementwise run, whole blocks
    "outer": (EVERY.reshape(256, 1), EVERY.reshape(1, 256)),  # y4 == 1: x the broadcast value
    "outer switched": (EVERY.reshape(1, 256), EVERY.reshape(256, 1)),  # the second input broadcasts innermost
    "generic": (np.repeat(EVERY.reshape(256, 1, 1), 2, 2), EVERY.reshape(1, 256, 1)),  # no five-fold pattern
}
# Every walk, with tails: seeded values.
WALKS = {
    "flat tail": ((4103,), (4103,)),
    "rows tail": ((6, 29), (1, 29)),
    "rows tail unswitched": ((1, 29), (6, 29)),
    "outer tails": ((37, 1), (1, 45)),
    "row value": ((3, 45), (3, 1)),
    "layer norm": ((1, 64, 64), (1, 64, 1)),
    "leading axis": ((3, 4, 20), (4, 20)),
    "scalar": ((), (50,)),
    "scalar second": ((2, 3, 37), (1,)),
    "five-fold rank 5": ((2, 5, 3, 1, 7), (2, 1, 3, 4, 7)),
    "generic 6-D": ((2, 1, 3, 1, 5, 1), (1, 4, 1, 6, 1, 7)),
}

# Quantisations on which the loops disagree on many pairs (a search in numpy over scales that are
# short binary fractions): AddElementwiseInt8's one rounding against the reference's two,
# AddScalarBroadcast's floor, MUL's and ADD's int16 wrapping of results far outside int8, MUL's
# float32 multiplier against a double one, DIV's rounding shift past 31 and below 0.
TIES = [((0.3125, 50), (0.875, -36), (0.25, 14)), ((0.0546875, -127), (0.001953125, 65), (0.0625, -117)),
        ((0.078125, 74), (3.75, 87), (0.0009765625, 79)), ((0.5, -72), (0.0625, 127), (0.00146484375, -84)),
        ((0.009765625, 81), (0.25, -105), (0.005859375, -55)),
        ((0.01975412108004093, 43), (0.02366747334599495, 46), (0.016851525753736496, -78)),
        ((1.0, 3), (1e-4, 0), (1e-4, 5))]


def seeded(n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [tuple((float(np.float32(np.exp(rng.uniform(np.log(1e-3), np.log(0.3))))), int(rng.integers(-128, 128)))
                  for _ in range(3)) for _ in range(n)]


QUANTS = TIES + seeded(3, 290)


def divisible(y: np.ndarray, zero_point: int) -> np.ndarray:
    """A divisor without its zero point (LiteRT refuses to divide by it)."""
    return np.where(y == zero_point, np.int8(zero_point + 1 if zero_point < 127 else zero_point - 1), y).astype(np.int8)


def litert_matches(op: str, quants, x: np.ndarray, y: np.ndarray) -> bool:
    options, options_type, kernel = OPS[op]
    qx, qy, qo = quants
    if op == "DIV":
        y = divisible(y, qy[1])
    out_shape = np.broadcast_shapes(x.shape, y.shape)
    model = single_op(getattr(S.BuiltinOperator, op), [T(x.shape, np.int8, *qx), T(y.shape, np.int8, *qy)],
                      T(out_shape, np.int8, *qo), options(), options_type)
    return np.array_equal(kernel(x, qx, y, qy, qo), run_litert(model, [x, y]))


def litert_runs(op: str, quants) -> bool:
    """Whether LiteRT's Prepare takes the quantisation: SQUARED_DIFFERENCE's output multiplier
    must be below one (QuantizeMultiplierSmallerThanOneExp aborts the process otherwise)."""
    (xs, _), (ys, _), (os_, _) = quants
    return op != "SQUARED_DIFFERENCE" or (2 * max(xs, ys)) ** 2 / ((1 << 14) * os_) < 1


def every_check_passes(op: str) -> bool:
    """Every pair through every loop, and every walk, under every quantisation LiteRT takes."""
    rng = np.random.default_rng(291)
    for quants in filter(lambda q: litert_runs(op, q), QUANTS):
        for x, y in EXHAUSTIVE.values():
            if not litert_matches(op, quants, x, y):
                return False
        for x_shape, y_shape in WALKS.values():
            x, y = (rng.integers(-128, 128, s).astype(np.int8) for s in (x_shape, y_shape))
            if not litert_matches(op, quants, x, y):
                return False
    return True


@pytest.mark.parametrize("op", list(OPS))
def test_every_pair_and_walk_matches_litert(op):
    assert every_check_passes(op)


def test_the_loops_disagree_where_the_checks_look():
    """The tie quantisations separate the loops: without them the checks could not fail."""
    x, y = X.ravel(), Y.ravel()
    for path in (K.VECTOR, K.BROADCAST_VECTOR):
        assert any((K.add_by_path(x, qx, y, qy, qo, path) != K.add_by_path(x, qx, y, qy, qo, K.SCALAR)).any()
                   for qx, qy, qo in TIES[:3])
    assert any((K.mul_by_path(x, qx, y, qy, qo, K.VECTOR) != K.mul_by_path(x, qx, y, qy, qo, K.SCALAR)).any()
               for qx, qy, qo in TIES)


def test_walks_as_process_broadcast_shapes():
    """The walk and each element's loop are functions of the two shapes alone."""
    assert K.broadcast_walk((1, 64, 64), (1, 64, 1)) == ("five_fold", (1, 1, 64, 64, 1), True)
    assert K.broadcast_walk((64,), (1, 64)) == ("flat", (), False)
    assert K.broadcast_walk((2, 5, 3, 1, 7), (2, 1, 3, 4, 7)) == ("five_fold", (2, 5, 3, 4, 7), False)
    assert K.broadcast_walk((2, 1, 3, 1, 5, 1), (1, 4, 1, 6, 1, 7))[0] == "generic"
    paths = K.binary_paths((6, 29), (1, 29), *K.ADD_BLOCKS)
    assert (paths[:, :16] == K.VECTOR).all() and (paths[:, 16:] == K.SCALAR).all()
    paths = K.binary_paths((37, 1), (1, 45), *K.ADD_BLOCKS)
    assert (paths[:, :40] == K.BROADCAST_VECTOR).all() and (paths[:, 40:] == K.SCALAR).all()
    paths = K.binary_paths((37, 1), (1, 45), *K.MUL_BLOCKS)
    assert (paths[:, :32] == K.BROADCAST_VECTOR).all() and (paths[:, 32:] == K.SCALAR).all()


def mean_4d_matches_litert() -> bool:
    """MEAN over axes 1 and 2 of [batch, h, w, depth] with keep_dims (LiteRT's Mean4D): depths in
    whole blocks of 16 channels and with a tail, seeded quantisations and values."""
    rng = np.random.default_rng(292)
    for depth in (16, 21, 48, 7):
        for x_q, _, out_q in seeded(4, 293 + depth):
            shape = (2, int(rng.integers(1, 9)), int(rng.integers(1, 9)), depth)
            options = S.ReducerOptionsT()
            options.keepDims = True
            model = single_op(S.BuiltinOperator.MEAN, [T(shape, np.int8, *x_q), T((2,), np.int32, value=np.int32([1, 2]))],
                              T((2, 1, 1, depth), np.int8, *out_q), options, S.BuiltinOptions.ReducerOptions)
            x = rng.integers(-128, 128, shape).astype(np.int8)
            if not np.array_equal(K.mean(x, x_q, (1, 2), out_q, True), run_litert(model, [x])):
                return False
    return True


def test_mean_over_height_and_width_is_mean_4d():
    assert K.is_mean_4d((2, 5, 5, 16), (2, 1), True) and not K.is_mean_4d((2, 5, 5, 16), (1, 2), False)
    assert mean_4d_matches_litert()


@pytest.mark.parametrize("golden", GOLDENS, ids=lambda g: g.split("/")[-1].split(".builtin")[0])
def test_every_elementwise_op_matches_litert_on_every_golden_window(golden):
    """Each ADD / SUB / MUL / SQUARED_DIFFERENCE / DIV of a zoo file on LiteRT's own inputs to it,
    on every window of its golden (the windows whose ties the models were found wrong on)."""
    from porter.frontends import load_graph
    from porter.reference.litert import full_integer as FI

    path = _model_of(golden)
    g = load_graph(path)
    it = _litert(path, preserve=True)
    runner = it.get_signature_runner(next(iter(it.get_signature_list())))
    z = np.load(golden)
    ops = [op for op in g.ops if op.type in OPS and g.tensor(op.outputs[0]).dtype == "int8"]
    assert ops
    for w in range(z["ids"].shape[0]):
        runner(**_feeds(golden, z, w))
        for op in ops:
            ins = [it.get_tensor(t) for t in op.inputs]
            assert np.array_equal(FI.run_op(g, op, ins), it.get_tensor(op.outputs[0])), (w, op.index, op.type)


def _double_mul_multiplier(x_scale, y_scale, out_scale):
    return K.quantize_multiplier(float(np.float32(x_scale)) * float(np.float32(y_scale)) / float(np.float32(out_scale)))


def _double_divide_multiplier(x_scale, y_scale, out_scale):
    return K.quantize_multiplier(float(np.float32(x_scale)) / (float(np.float32(y_scale)) * float(np.float32(out_scale))))


def _plain_rounding_shifts(x, exponents):
    x, e = np.asarray(x, np.int64), np.asarray(exponents, np.int64)
    mask = (np.int64(1) << e) - 1
    return (x >> e) + ((x & mask) > (mask >> 1) + (x < 0))


_add_vector, _mul_scalar = K._add_vector, K._mul_scalar

# Each replaces one loop's arithmetic with a plausible other reading of the source.
MUTATIONS = {  # name -> (op whose checks must catch it, attribute of int8.py, replacement)
    "add elementwise loop as the reference formula": (
        "ADD", "_add_vector", lambda x, xq, y, yq, oq, broadcast: _add_vector(x, xq, y, yq, oq, True)
        if broadcast else K._add_scalar(x, xq, y, yq, oq)),
    "add scalar-broadcast loop with the elementwise loop's shift": (
        "ADD", "_add_vector", lambda x, xq, y, yq, oq, broadcast: _add_vector(x, xq, y, yq, oq, False)),
    "add scalar-broadcast block of 16": ("ADD", "ADD_BLOCKS", (16, 16)),
    "int16 narrowing saturates": ("ADD", "_wrap16", lambda v: np.clip(v, -(1 << 15), (1 << 15) - 1)),
    "mul loops as the reference formula": ("MUL", "_mul_vector", lambda prod, m, zp: _mul_scalar(prod, m, zp)),
    "mul multiplier in double": ("MUL", "mul_multiplier", _double_mul_multiplier),
    "div multiplier in double": ("DIV", "divide_multiplier", _double_divide_multiplier),
    "div shift past 31 as a plain shift": ("DIV", "_rounding_divide_by_pots", _plain_rounding_shifts),
    "mean over height and width as the reference mean": ("MEAN", "is_mean_4d", lambda *args: False),
    "mean 4d without a tail": ("MEAN", "MEAN_4D_BLOCK", 1),
}


@pytest.mark.parametrize("name", [n if i == 0 else pytest.param(n, marks=pytest.mark.slow)
                                  for i, n in enumerate(MUTATIONS)])
def test_mutated_kernel_fails_a_check(monkeypatch, name):
    op, attr, replacement = MUTATIONS[name]
    monkeypatch.setattr(K, attr, replacement)
    assert not (mean_4d_matches_litert() if op == "MEAN" else every_check_passes(op))
