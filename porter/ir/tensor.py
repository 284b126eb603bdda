"""Tensor steps: one graph op each over typed tensors of any shape, for what the encoder's blocks
do not cover and its elementwise steps cannot express: the products, gathers, permutations, casts,
comparisons and selections a score term is computed from (DeBERTa's content-to-position and
position-to-content products gathered at bucketed relative positions, a T5 bias looked up by
buckets computed from the inputs, an ALiBi slope times a distance).

A tensor step reads `operands` (buffers or constant arrays, each seen with its shape) and writes
one buffer of `shape` and `dtype` (float32, int32, int64, bool, or the uint8 / int8 rows of a quantised
table, which are only moved until dequantised). Its numpy meaning is the
canonical op's (porter.reference.ops.evaluate, in the reference runtime's arithmetic); the crate's
is kernels/common/tensor.rs. `limits` says which output axes run over the window's tokens and
how many of their positions the step computes (porter.recover.rows): an axis of Rows.ALL is
computed whole, one of Rows.LIVE or Rows.KEYS up to the window's live or last kept token.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from porter.ir.encoder import Operand, Rows, Step


class TensorOp(str, enum.Enum):
    MATMUL = "matmul"  # a [.., m, k] @ b [.., k, n] (adj_a / adj_b transpose them), alpha
    GATHER = "gather"  # numpy's take along `axis`, indices of any rank
    GATHER_ELEMENTS = "gather_elements"  # take_along_axis
    GATHER_ND = "gather_nd"  # the index's last axis addresses data's leading axes
    MOVE = "move"  # out = the operand read through a permutation (`perm`) and broadcast to `shape`
    CAST = "cast"  # to `dtype`: float -> int truncates (x86's integer indefinite out of range)
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"  # integers: C's division (toward zero)
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    NEG = "neg"
    ABS = "abs"
    SIGN = "sign"
    CEIL = "ceil"
    FLOOR = "floor"
    LOG = "log"  # LiteRT: glibc's logf
    EQUAL = "equal"
    NOT_EQUAL = "not_equal"
    LESS = "less"
    LESS_EQUAL = "less_equal"
    GREATER = "greater"
    GREATER_EQUAL = "greater_equal"
    LOGICAL_AND = "logical_and"
    LOGICAL_OR = "logical_or"
    LOGICAL_NOT = "logical_not"
    WHERE = "where"  # condition ? a : b
    CUMSUM = "cumsum"  # along `axis`, `exclusive`, `reverse`
    LOOKUP = "embedding_lookup"  # rows of a table [rows, width] by indices; an int8 table times its row's scale
    DEQUANTIZE = "dequantize"  # float32((q - zero_point) * scale), one scale


GATHERS = {TensorOp.GATHER, TensorOp.GATHER_ELEMENTS, TensorOp.GATHER_ND}
COMPARISONS = {TensorOp.EQUAL, TensorOp.NOT_EQUAL, TensorOp.LESS, TensorOp.LESS_EQUAL, TensorOp.GREATER,
               TensorOp.GREATER_EQUAL}
LOGICAL = {TensorOp.LOGICAL_AND, TensorOp.LOGICAL_OR, TensorOp.LOGICAL_NOT}
ARITHMETIC = {TensorOp.ADD, TensorOp.SUB, TensorOp.MUL, TensorOp.DIV, TensorOp.MAXIMUM, TensorOp.MINIMUM}
UNARY = {TensorOp.NEG, TensorOp.ABS, TensorOp.SIGN, TensorOp.CEIL, TensorOp.FLOOR, TensorOp.LOG, TensorOp.CAST,
         TensorOp.LOGICAL_NOT, TensorOp.MOVE, TensorOp.DEQUANTIZE}
DTYPES = ("float32", "int32", "int64", "bool", "uint8", "int8")
# 8-bit values (a quantised table's rows) are only moved, gathered, looked up or dequantised
NARROW = ("uint8", "int8")
MOVES_NARROW = GATHERS | {TensorOp.MOVE, TensorOp.LOOKUP, TensorOp.DEQUANTIZE}


@dataclass
class TensorStep(Step):
    op: TensorOp
    operands: list[Operand]
    shape: tuple[int, ...]  # the output's
    dtype: str  # the output's: one of DTYPES
    attrs: dict = field(default_factory=dict)  # adj_a, adj_b, alpha, axis, perm, exclusive, reverse
    # per output axis: Rows.ALL (computed whole) or the token rows computed along it
    limits: tuple[Rows, ...] = ()

    def attributes(self) -> dict:
        """The canonical op's attributes (porter.reference.ops.evaluate reads them)."""
        return {**self.attrs, "to": self.dtype} if self.op == TensorOp.CAST else dict(self.attrs)
