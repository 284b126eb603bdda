"""What the ops porter knows need of their tensors and attributes, checked on every graph read.

Recovery, constant folding and the numpy executor index shapes and trust attributes: a rank-0
tensor where an op needs a vector, an axis outside the rank or a perm that is not a permutation
would surface as an IndexError deep inside them, or pass as a meaningless IR. So every op type
that porter's patterns or evaluators use has a Rule, in its format's vocabulary (each reader
keeps its table: tflite.TFLITE_RULES, onnx.ONNX_RULES): how many inputs and outputs it has
(TFLite; ONNX operator schemas say that), the rank of each input it indexes, and the range of
each attribute or constant operand it reads. An input whose rank is needed must have one: an
ONNX value whose shape is neither declared nor inferred is refused. Each failure is one line
naming the op, the tensor or attribute, and the range it needed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from porter.errors import PorterError
from porter.frontends.graph import Graph, Op

Check = Callable[[Op, Graph], "str | None"]
SHOWN_VALUES = 16  # values of a list quoted in a message


@dataclass(frozen=True)
class Rule:
    """What one op type needs. ranks: input position -> (lowest, highest or None) rank."""

    ranks: dict[int, tuple[int, int | None]] = field(default_factory=dict)
    inputs: tuple[int, int] | None = None  # (fewest, most) inputs; None: checked elsewhere
    outputs: int | None = None  # exact number of outputs; None: checked elsewhere
    checks: tuple[Check, ...] = ()

    def problem(self, op: Op, g: Graph) -> str | None:
        return self.count_problem(op) or self.rank_problem(op, g) or next(
            (p for p in (check(op, g) for check in self.checks) if p), None)

    def count_problem(self, op: Op) -> str | None:
        if self.inputs is not None:
            fewest, most = self.inputs
            if not fewest <= len(op.inputs) <= most:
                span = str(fewest) if fewest == most else f"{fewest} to {most}"
                return f"has {len(op.inputs)} inputs; the op takes {span}"
            omitted = [p for p in range(fewest) if op.inputs[p] < 0]
            if omitted:
                return f"input {omitted[0]} is omitted, but the op needs it"
        if self.outputs is not None and len(op.outputs) != self.outputs:
            return f"has {len(op.outputs)} outputs; the op has {self.outputs}"
        return None

    def rank_problem(self, op: Op, g: Graph) -> str | None:
        for position, (lowest, highest) in self.ranks.items():
            if position >= len(op.inputs) or op.inputs[position] < 0:
                continue
            tensor = g.tensor(op.inputs[position])
            rank = rank_of(g, op.inputs[position])
            if rank is None:
                return f"input {position} {tensor.describe()} has no known shape, and the op needs its rank"
            if rank < lowest or (highest is not None and rank > highest):
                wanted = f"{lowest}" if lowest == highest else f"at least {lowest}" if highest is None \
                    else f"{lowest} to {highest}"
                return f"input {position} {tensor.describe()} has rank {rank}; the op needs rank {wanted}"
        return None


def check_op_rules(g: Graph, rules: dict[str, Rule]) -> None:
    """Raises PorterError for the first op that does not meet its type's rule. A rank missing
    because an op of another domain (onnxruntime's contrib ops) computed the value, whose
    shapes ONNX shape inference does not know, is refused at that op."""
    for op in g.ops:
        rule = rules.get(op.type)
        problem = rule.problem(op, g) if rule is not None else None
        if problem:
            cause = _shapeless_producer(g, [op.inputs[p] for p in rule.ranks if p < len(op.inputs)])
            if cause is not None:
                raise PorterError(f"{g.path}: {cause.describe()}: ONNX shape inference does not know this "
                                  f"{cause.type.rsplit('.', 1)[0]} op, so the shapes of what it computes are "
                                  f"unknown ({op.describe()} needs one)")
            raise PorterError(f"{g.path}: {op.describe()}: {problem}")


def _shapeless_producer(g: Graph, tensors: list[int]) -> Op | None:
    """The nearest op of a non-default domain behind tensors whose shape is unknown."""
    todo, seen = [t for t in tensors if t >= 0 and rank_of(g, t) is None], set()
    while todo:
        op = g.producer(todo.pop(0))
        if op is None or op.index in seen:
            continue
        seen.add(op.index)
        if "." in op.type:  # ONNX ops of other domains are named domain.op_type
            return op
        todo += [t for t in op.inputs if t >= 0 and rank_of(g, t) is None]
    return None


def rank_of(g: Graph, t: int) -> int | None:
    """The tensor's rank as the file says it; None where it does not (ONNX values of unknown type)."""
    tensor = g.tensor(t)
    if tensor.data is not None:
        return tensor.data.ndim
    return None if tensor.dtype == "unknown" else len(tensor.shape)


def _rank_for(op: Op, g: Graph, position: int) -> int | None:
    if position >= len(op.inputs) or op.inputs[position] < 0:
        return None
    return rank_of(g, op.inputs[position])


def _constant(op: Op, g: Graph, position: int) -> np.ndarray | None:
    if position >= len(op.inputs) or op.inputs[position] < 0:
        return None
    return g.const(op.inputs[position])


def _axis_problem(what: str, values, low: int, high: int, rank: int) -> str | None:
    """Each axis must lie in [low, high): axes may count from the end."""
    for axis in values:
        if not low <= axis < high:
            allowed = f" ({low} to {high - 1})" if high > low else ""
            return f"{what} {axis} is not an axis of the rank-{rank} input{allowed}"
    return None


def _shown(values: list) -> str:
    """A list for a message: a constant operand may hold millions of values."""
    return str(values) if len(values) <= SHOWN_VALUES else f"[{', '.join(map(str, values[:SHOWN_VALUES]))}, ... ({len(values)} values)]"


def _integers(value) -> list[int] | None:
    """The value as a list of Python ints, or None if it is not integers."""
    array = np.asarray(value)
    if array.dtype.kind not in "iu" or array.ndim > 1:
        return None
    return [int(v) for v in array.reshape(-1)]


# Checks, each made for one attribute or operand -----------------------------------------------


def axis_attribute(name: str, default: int | None = None, of_input: int = 0, past_last: bool = False) -> Check:
    """Attribute `name` is one axis of input `of_input`; with past_last, also the rank itself
    (Flatten's axis says where the second dimension starts)."""
    def check(op: Op, g: Graph) -> str | None:
        value = op.options.get(name, default)
        rank = _rank_for(op, g, of_input)
        if value is None or rank is None:
            return None
        return _axis_problem(f"attribute '{name}'", [value], -rank, rank + past_last, rank)
    return check


def axes_attribute(name: str, of_input: int = 0) -> Check:
    def check(op: Op, g: Graph) -> str | None:
        rank = _rank_for(op, g, of_input)
        if name not in op.options or rank is None:
            return None
        return _axis_problem(f"attribute '{name}' axis", op.options[name], -rank, rank, rank)
    return check


def axes_operand(position: int, of_input: int = 0, inserted: bool = False) -> Check:
    """Constant operand `position` holds distinct axes of input `of_input`; with inserted
    (Unsqueeze), axes of the output, whose rank is the input's plus the number of axes."""
    def check(op: Op, g: Graph) -> str | None:
        data, rank = _constant(op, g, position), _rank_for(op, g, of_input)
        if data is None or rank is None:
            return None
        axes = _integers(data)
        if axes is None:
            return f"input {position} (axes) is {data.dtype}{list(data.shape)}; the op needs a vector of integers"
        limit = rank + len(axes) if inserted else rank
        problem = _axis_problem(f"input {position} axis", axes, -limit, limit, rank)
        if problem is None and len({a % limit for a in axes}) != len(axes):
            problem = f"input {position} (axes) {_shown(axes)} names an axis twice"
        return problem
    return check


def _permutation_problem(what: str, perm, rank: int | None) -> str | None:
    values = _integers(perm)
    if values is None:
        return f"{what} is not a list of integers"
    size = len(values) if rank is None else rank
    if sorted(values) != list(range(size)):
        return f"{what} {_shown(values)} is not a permutation of the {size} axes of the input"
    return None


def permutation_attribute(name: str) -> Check:
    def check(op: Op, g: Graph) -> str | None:
        if name not in op.options:
            return None
        return _permutation_problem(f"attribute '{name}'", op.options[name], _rank_for(op, g, 0))
    return check


def permutation_operand(position: int) -> Check:
    def check(op: Op, g: Graph) -> str | None:
        data = _constant(op, g, position)
        if data is None:
            return None
        return _permutation_problem(f"input {position} (perm)", data, _rank_for(op, g, 0))
    return check


def finite_attribute(name: str, positive: bool = False) -> Check:
    def check(op: Op, g: Graph) -> str | None:
        value = op.options.get(name)
        if value is None:
            return None
        if not math.isfinite(value) or (positive and value <= 0):
            return f"attribute '{name}' is {value}; the op needs a finite{' positive' if positive else ''} number"
        return None
    return check


def one_of(name: str, allowed: tuple) -> Check:
    def check(op: Op, g: Graph) -> str | None:
        if name in op.options and op.options[name] not in allowed:
            return f"attribute '{name}' is {op.options[name]!r}; the op takes one of {list(allowed)}"
        return None
    return check


def reshape_target(position: int, option: str | None = None, zero_copies: bool = False) -> Check:
    """The target shape (constant operand `position`, or when the op has no such operand, option
    `option`): a vector with at most one -1 (inferred) and no other negative entry, holding the
    input's element count where both are known. With zero_copies (ONNX), 0 copies the input's
    dimension unless the allowzero attribute is set."""
    def check(op: Op, g: Graph) -> str | None:
        if position < len(op.inputs) and op.inputs[position] >= 0:
            target = g.const(op.inputs[position])
            if target is None:  # computed while the graph runs
                return None
        elif option and op.options.get(option):
            target = np.asarray(op.options[option], np.int64)
        else:
            return None
        dims = _integers(target)
        if dims is None:
            return f"the target shape {target.dtype}{list(target.shape)} is not a vector of integers"
        if dims.count(-1) > 1 or any(d < -1 for d in dims):
            return f"the target shape {_shown(dims)} has more than one -1 or another negative dimension"
        source = g.tensor(op.inputs[0])
        if rank_of(g, op.inputs[0]) is None or any(d < 0 for d in source.shape):
            return None
        if zero_copies and not op.options.get("allowzero", 0):
            if any(d == 0 and i >= len(source.shape) for i, d in enumerate(dims)):
                return f"the target shape {_shown(dims)} copies a dimension the rank-{len(source.shape)} input does not have"
            dims = [source.shape[i] if d == 0 else d for i, d in enumerate(dims)]
        count, known = math.prod(source.shape), math.prod(d for d in dims if d != -1)
        fits = (known > 0 and count % known == 0) if -1 in dims else count == known
        if not fits:
            return f"the target shape {_shown(dims)} does not hold the {count} elements of {source.describe()}"
        return None
    return check


def bounded_result(position: int, limit: int) -> Check:
    """Expand / ConstantOfShape: the constant shape operand, broadcast with the input's shape
    where there is one, describes at most `limit` elements (constant folding materialises it)."""
    def check(op: Op, g: Graph) -> str | None:
        target = _constant(op, g, position)
        dims = None if target is None else _integers(target)
        if dims is None:
            return None
        if any(d < 0 for d in dims):
            return f"the shape operand {_shown(dims)} has a negative dimension"
        shape = dims
        if position > 0 and rank_of(g, op.inputs[0]) is not None and all(d >= 0 for d in g.tensor(op.inputs[0]).shape):
            try:
                shape = list(np.broadcast_shapes(tuple(g.tensor(op.inputs[0]).shape), tuple(dims)))
            except ValueError:
                return f"the shape operand {_shown(dims)} does not broadcast with {g.tensor(op.inputs[0]).describe()}"
        if math.prod(shape) > limit:
            return f"the result would have shape {_shown(shape)}, more than the {limit} elements porter evaluates"
        return None
    return check
