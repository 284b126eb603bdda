"""Integer steps: a graph with quantised activations as a program of its runtime's kernels.

Two runtimes' graphs are programs of these steps: a full-integer int8 TFLite graph (LiteRT's
integer kernels) and an onnxruntime QDQ graph (the kernels onnxruntime's CPU provider runs for
it: porter.recover.canonical.ort_qdq decides which, its QLinear kernels between float ones).

A full-integer TFLite file (ai-edge-quantizer's static_wi8_ai8, TFLiteConverter's full-integer
quantisation) computes every layer on int8 activations, each tensor with its own scale and
zero point, and its int8 softmax weighs every key of the window (docs/arithmetic.md), so no
block of the float encoder applies and no row can be skipped. Its program is a straight-line
list of `IntegerStep`s, one kernel of LiteRT's each, over buffers of int8, int32, int64, float32 or
bool values (`Buffer.dtype`): the step holds the file's quantisation parameters of every
operand and of its output, and the arrays it reads (weights, tables, index maps) are arrays of
the program. The numpy semantics of each op are porter.reference.litert.int8_steps (LiteRT's
kernels in porter.reference.litert.int8); the crate's are kernels/litert/int8/.

An onnxruntime QDQ graph (program.reference ONNXRUNTIME_CPU) runs the ORT_* steps below, uint8
or int8 activations each with its scale and zero point, and every op it leaves in float as a
FLOAT step: one op of porter.reference.ops' vocabulary (`kind`, `attrs`) in onnxruntime's float
arithmetic. Their numpy meaning is porter.reference.ort.qdq; the crate's kernels/ort/qdq/.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from porter.ir.encoder import Operand, Step

# (scale, zero point) of a per-tensor quantised tensor, as the file stores them
Quant = tuple[float, int]


class IntegerOp(str, enum.Enum):
    FULLY_CONNECTED = "fully_connected"  # int8 x int8 weights [out, in] (+ int32 bias), ruy's rounding
    BATCH_MATMUL = "batch_matmul"  # int8 [b, m, k] x int8 [b, k, n] (either transposed), gemmlowp's rounding
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    SQUARED_DIFFERENCE = "squared_difference"
    DIV = "div"
    MAXIMUM = "maximum"
    MEAN = "mean"  # over `axes`, fixed point
    SUM = "sum"  # over `axes`, in float32 as LiteRT's kernel is
    TABLE = "table"  # one int8 in, one int8 out: a 256-entry table (RSQRT, SQRT, GELU, LOGISTIC, TANH)
    SOFTMAX = "softmax"  # over the last axis: a float table of exp per distance from the row's maximum
    QUANTIZE = "quantize"  # float32 -> int8 (blocks of 8 and a scalar tail)
    REQUANTIZE = "requantize"  # int8 -> int8 at another scale (blocks of 16 and a scalar tail)
    DEQUANTIZE = "dequantize"  # int8 -> float32, LiteRT's op (blocks of 8 and a scalar tail)
    OUTPUT = "output"  # int8 -> float32 as the golden reports an int8 output: (q - zp) * scale
    LOOKUP = "lookup"  # rows of a constant table by int32 ids (GATHER, EMBEDDING_LOOKUP)
    INDEX = "index"  # out[i] = x[map[i]]: every view (TRANSPOSE, SLICE, STRIDED_SLICE, GATHER_ND)
    CAST = "cast"  # int32 -> float32 / bool, bool -> int32 ...
    LOGICAL_AND = "logical_and"
    SELECT = "select"  # condition ? a : b
    ABS = "abs"  # float32
    # exact work on integers, the same in every runtime (index arithmetic: RoBERTa's positions from
    # the ids, the buffered token types, a wrap of negative indices), int32 or int64, wrapping as
    # the kernels' C++ does; numpy meaning porter.reference.typed
    COMPARE = "compare"  # `kind` in COMPARISONS: bool out, on two operands of one type (any)
    ARITHMETIC = "arithmetic"  # `kind` in ARITHMETICS on int32 / int64, broadcast
    CUMSUM = "cumsum"  # running sums along `axes[0]`; attrs "exclusive", "reverse"
    CONCAT = "concat"  # the operands one after the other along `axes[0]`
    # a constant `<name>.table` read at computed indices (attrs "wraps": a negative index counts
    # from the end, as onnxruntime's gathers take it; else it is refused, as LiteRT refuses it):
    GATHER_ND = "gather_nd"  # index vectors along the operand's last axis into the table's first axes
    GATHER_ELEMENTS = "gather_elements"  # one index per output value, along `axes[0]`
    # onnxruntime's kernels (QDQ graphs)
    ORT_QUANTIZE = "ort_quantize"  # QuantizeLinear: float32 -> uint8 / int8, x / scale rounded half to even
    # DequantizeLinear: uint8 / int8 / int32 -> float32, (q - zp) * scale; of an activation, or of
    # an 8-bit constant (weights and tables are stored so), one scale a tensor or one per index of
    # `axes[0]` (`<name>.scale`, `<name>.zero_point`)
    ORT_DEQUANTIZE = "ort_dequantize"
    # QLinearMatMul, QGemm: an integer GEMM (MLAS's, the u8 x s8 dot saturating as the CPU's does),
    # requantised per output column (or scaled to float32 by a QGemm without an output scale)
    ORT_QGEMM = "ort_qgemm"
    # QLinearAdd (`kind` "add": MLAS's float rescaling, fma order), QLinearMul ("mul": the exact
    # product of the centred values, rescaled in float32)
    ORT_QLINEAR_BINARY = "ort_qlinear_binary"
    ORT_QLINEAR_SOFTMAX = "ort_qlinear_softmax"  # a table of exp per distance from the row's maximum
    FLOAT = "float"  # one float op (`kind`), onnxruntime's float kernel


COMPARISONS = ("equal", "not_equal", "less", "less_equal", "greater", "greater_equal")
ARITHMETICS = ("add", "sub", "mul", "maximum", "minimum")

# the ops of two quantised int8 operands (broadcast against each other)
BINARY = {IntegerOp.ADD, IntegerOp.SUB, IntegerOp.MUL, IntegerOp.SQUARED_DIFFERENCE, IntegerOp.DIV,
          IntegerOp.MAXIMUM}


@dataclass
class IntegerStep(Step):
    """One integer kernel: reads `operands` (buffers or constant arrays, each seen with its shape,
    of the dtypes `in_dtypes`), writes one buffer of `shape` and `dtype`. `quants` are the
    operands' (scale, zero point), None for an unquantised one; `out_quant` the output's.

    Arrays by op: FULLY_CONNECTED `<name>.weight` (int8 [out, in]), `<name>.weight_scale` (one
    per output channel, or one), `<name>.multiplier` (int32 [out, 2]: each channel's fixed-point
    multiplier and shift, x_scale * w_scale / out_scale), `<name>.bias` (int32, if any); DIV
    `<name>.reciprocal` (int32 [256, 2]: gemmlowp's reciprocal of each divisor 1..255); TABLE `<name>.table` (int8 [256],
    index value + 128); SOFTMAX `<name>.table` (float32 [256]); LOOKUP `<name>.table` ([rows,
    width]); INDEX the array `attrs["map"]` names (int32, one source position per output value; one
    array for every view of the same map); GATHER_ND,
    GATHER_ELEMENTS `<name>.table` (the constant they read).

    ORT_QGEMM: operands [a] with `<name>.b` a constant B stored [n, k], or [a, b] both activations;
    `<name>.b_zero_point` (int32 [n]), `<name>.scale` (float32 [n]: onnxruntime's output scale of
    each column, a_scale * b_scale / y_scale), `<name>.bias` (int32 [n], if any); out_quant None
    for a float output. ORT_QLINEAR_SOFTMAX `<name>.table` (float32 [256])."""

    op: IntegerOp
    operands: list[Operand]
    in_dtypes: list[str]
    shape: tuple[int, ...]
    dtype: str
    quants: list[Quant | None]
    out_quant: Quant | None
    # MEAN / SUM: the reduced axes of operand 0 (kept as size one); CUMSUM, CONCAT, GATHER_ELEMENTS: the axis
    axes: tuple[int, ...] = ()
    has_bias: bool = False  # FULLY_CONNECTED
    table_shape: tuple[int, ...] = ()  # LOOKUP: its table's [rows, width]
    adjoint: tuple[bool, bool] = (False, False)  # BATCH_MATMUL: operand a, b transposed (adj_x, adj_y)
    own_arrays: list[str] = field(default_factory=list)
    kind: str = ""  # FLOAT: the op (porter.reference.ops' vocabulary); COMPARE, ARITHMETIC: which one
    attrs: dict = field(default_factory=dict)  # FLOAT: its attributes; CUMSUM, GATHER_*: flags
    integer_dot: str = "exact"  # ORT_QGEMM: the u8 x s8 dot (porter.reference.quant.u8s8_dot)

    def arrays(self) -> list[str]:
        return list(self.own_arrays)

    def table_rows(self, ids: str) -> int | None:
        if self.op == IntegerOp.LOOKUP and self.operands[0].buffer == ids:
            return self.table_shape[0]
        return None
