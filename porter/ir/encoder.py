"""The encoder IR: a program of steps over named buffers, each step with exact semantics.

A recovered encoder is a straight-line program. Its steps are either *blocks* that porter has
fast kernels for (the embedding lookup, Linear layers, LayerNorm, attention, the GELU op) or
*elementwise and reduction steps* that run one graph op each with the reference runtime's own
arithmetic. Blocks are recognised by role and proven against the graph's ops by evaluation
(porter.recover); whatever is not a block but is in the elementwise vocabulary still compiles,
op for op, so a new spelling of a known computation never needs a new pattern to be exact.

Every buffer is a row-major float32 matrix [rows, cols]: a tensor of the graph flattened to
"everything but the last axis" x "the last axis". Token buffers have one row per window
position (rows == seq); pooled buffers have one row. The weights live in
`EncoderProgram.weights`, named numpy arrays packed into model.bin in `array_order()`.
"""

from __future__ import annotations

import enum
from dataclasses import asdict, dataclass, field, fields

import numpy as np


class Reference(str, enum.Enum):
    """Whose kernels the program's float arithmetic reproduces."""

    LITERT_BUILTIN = "litert_builtin"  # TFLite's builtin kernels (porter.reference.litert.floats)
    ONNXRUNTIME_CPU = "onnxruntime_cpu"  # onnxruntime's CPU provider (porter.reference.ort.floats)


class WeightFormat(str, enum.Enum):
    FLOAT32 = "float32"
    INT8_PER_CHANNEL = "int8_per_channel"  # one scale per output row, zero point 0
    INT8_PER_TENSOR = "int8_per_tensor"  # one scale, zero point 0
    FLOAT16 = "float16"  # weight-only float16: widened exactly to float32, float products
    # two a byte in model.bin, zero point 0: -7..7 for the hybrid 4-bit kernels, -8..7 weight-only
    INT4_PER_CHANNEL = "int4_per_channel"

    @property
    def scaled(self) -> bool:
        """Whether the weights come with scales (<name>.scale)."""
        return self in (WeightFormat.INT8_PER_CHANNEL, WeightFormat.INT8_PER_TENSOR, WeightFormat.INT4_PER_CHANNEL)


class ActivationQuant(str, enum.Enum):
    """How a Linear's input meets int8 weights (porter.reference.quant has the arithmetic)."""

    FLOAT = "float"  # float weights: no quantisation
    HYBRID_SYMMETRIC = "tflite_hybrid_symmetric"  # each row to int8 on the fly, no zero point
    HYBRID_ASYMMETRIC = "tflite_hybrid_asymmetric"  # each row to int8 with a zero point
    ORT_DYNAMIC_UINT8 = "ort_dynamic_uint8"  # the whole tensor to uint8 (DynamicQuantizeLinear)


class IntegerDot(str, enum.Enum):
    """The u8 x s8 dot product of onnxruntime's dynamically quantised layers."""

    EXACT = "exact"
    INT16_PAIRS_SATURATED = "int16_pairs_saturated"  # MLAS on AVX2 (vpmaddubsw)


class NormForm(str, enum.Enum):
    """The float operation order of a LayerNorm block (porter.reference.execute.layer_norm)."""

    SHIFT = "shift"  # r = rsqrt(var + eps); x * r + (0 - r * mean)         (litert-torch)
    CENTRED = "centred"  # (x - mean) * r                                   (TensorFlow)
    KERAS = "keras"  # inv = r * gamma; x * inv + (beta - mean * inv)       (tf.nn.batch_normalization)
    ONNX = "onnx"  # onnxruntime's LayerNormalization kernel
    ONNX_SKIP = "onnx_skip"  # its SkipLayerNormalization (a residual Add fused in)
    ORT_EMBED = "ort_embed"  # its EmbedLayerNormalization's loop (the embedding sum normalised)


class TableKind(str, enum.Enum):
    INT8_ROWS = "int8_rows"  # int8 rows, one scale per row (EMBEDDING_LOOKUP)
    INT8_TENSOR = "int8_tensor"  # int8 rows, one scale (GATHER -> DEQUANTIZE)
    UINT8_TENSOR = "uint8_tensor"  # uint8 with one scale and zero point (DequantizeLinear)
    FLOAT16 = "float16"  # a float16 table DEQUANTIZEd to float32: widened exactly on lookup
    FLOAT32 = "float32"


class Gelu(str, enum.Enum):
    """The GELU kernels porter has; a GELU spelled out in other ops runs as elementwise steps."""

    LITERT = "litert"  # LiteRT's GELU op, approximate=False (Eigen's erfc)
    LITERT_TANH = "litert_tanh"  # LiteRT's GELU op, approximate=True
    ORT_ERF_DIV = "ort_erf_div"  # x * 0.5 * (1 + erf(x / sqrt 2)), op by op, MLAS erf
    ORT_ERF_MUL = "ort_erf_mul"  # onnxruntime's Gelu kernel: erf(x * (1 / sqrt 2))
    # onnxruntime's FastGelu kernel (also its Gelu op with approximate="tanh"): MLAS's tanh of
    # x * (C * x * x + B), then (x * 0.5) * (t + 1)
    ORT_FAST_GELU = "ort_fast_gelu"


class MaskMode(str, enum.Enum):
    NONE = "none"  # every key is attended (no mask input, or a constant all-keep bias)
    ADD = "add"  # scores + keep_value / drop_value per key, from the mask input
    REPLACE = "replace"  # dropped keys' scores replaced by drop_value (masked_fill / where)


class KeyRule(str, enum.Enum):
    """Which keys a mask keeps (MaskMode ADD / REPLACE)."""

    NONZERO = "nonzero"  # the keys whose mask value is not 0
    # the first n keys, n the count of 1s in the mask (onnxruntime's Attention reading a 1-D
    # mask_index of key lengths, as EmbedLayerNormalization computes it)
    LEADING_COUNT = "leading_count"


def kept_keys(rule: "KeyRule", mask) -> "np.ndarray":
    """The keys a mask keeps under the rule (booleans, one per key)."""
    import numpy as np

    mask = np.asarray(mask).reshape(-1)
    if rule == KeyRule.LEADING_COUNT:
        return np.arange(mask.size) < np.count_nonzero(mask == 1)
    return mask != 0


class Rows(str, enum.Enum):
    """How many rows of a token buffer a step computes (decided per program, checked by verify).

    LIVE: the window's live tokens; KEYS: up to the last kept key (every key attention reads);
    ALL: the whole window. A pooled (one-row) buffer is always ONE.
    """

    ONE = "one"
    LIVE = "live"
    KEYS = "keys"
    ALL = "all"


class Positions(str, enum.Enum):
    CONSTANT = "constant"  # position rows folded to a constant [seq, hidden] term
    FROM_IDS = "from_ids"  # RoBERTa: pad + cumsum(ids != pad) for real tokens, pad for padding


# ---- the pieces steps are made of -------------------------------------------------------------


@dataclass
class Linear:
    """y = x @ W^T (+ b), W [out, in]; int8 weights run the arithmetic `activation_quant` names."""

    name: str  # prefix of its arrays: <name>.weight, <name>.scale, <name>.bias
    in_features: int
    out_features: int
    weights: WeightFormat
    activation_quant: ActivationQuant
    has_bias: bool
    integer_dot: IntegerDot = IntegerDot.EXACT  # ORT_DYNAMIC_UINT8 only
    source_ops: list[int] = field(default_factory=list)  # the file's op indices

    def arrays(self) -> list[str]:
        names = [f"{self.name}.weight"]
        if self.weights.scaled:
            names.append(f"{self.name}.scale")
        if self.has_bias:
            names.append(f"{self.name}.bias")
        return names


# ---- steps ------------------------------------------------------------------------------------


@dataclass
class Step:
    """One step: reads `inputs` (buffer names), writes `outputs`. `source_ops` are the file's op
    indices it stands for (for error messages and the every-op-explained invariant)."""

    name: str
    inputs: list[str]
    outputs: list[str]
    source_ops: list[int]

    def arrays(self) -> list[str]:
        return []

    def table_rows(self, ids: str) -> int | None:
        """The rows of the table this step indexes by the buffer `ids`, if it indexes one."""
        return None


@dataclass
class Lookup:
    """A table read by ids: `<name>.table` (+ `.scale`, `.zero_point` as its kind needs)."""

    name: str
    kind: TableKind
    rows: int
    width: int

    def arrays(self) -> list[str]:
        names = [f"{self.name}.table"]
        if self.kind not in (TableKind.FLOAT32, TableKind.FLOAT16):
            names.append(f"{self.name}.scale")
        if self.kind == TableKind.UINT8_TENSOR:
            names.append(f"{self.name}.zero_point")
        return names


@dataclass
class EmbedTerm:
    """One term added to the word rows, in the graph's order: constant `rows` ([seq, width], or
    [width] for every position), a `positions` table looked up by position ids computed from
    the token ids (Positions.FROM_IDS: RoBERTa's pad + cumsum(ids != pad), pad for padding), or
    a `types` table looked up by the token-type input (INPUT_TYPES)."""

    kind: str  # "rows" | "positions" | "types"
    array: str | None = None
    lookup: Lookup | None = None
    positions: Positions | None = None
    pad_id: int | None = None

    def arrays(self) -> list[str]:
        return [self.array] if self.array else self.lookup.arrays()


@dataclass
class Embed(Step):
    word: Lookup
    terms: list[EmbedTerm]

    def arrays(self) -> list[str]:
        return self.word.arrays() + [a for t in self.terms for a in t.arrays()]

    def table_rows(self, ids: str) -> int | None:
        if ids == INPUT_TYPES:
            return next((t.lookup.rows for t in self.terms if t.kind == "types"), None)
        return self.word.rows if ids == INPUT_IDS else None


@dataclass
class LinearStep(Step):
    linear: Linear

    def arrays(self) -> list[str]:
        return self.linear.arrays()


@dataclass
class LayerNorm(Step):
    """Normalise each row; outputs [out] or [out, normalised]: with two, the Linear layers that
    follow read the pre-affine `normalised` rows (the exporter folded gamma and beta into their
    weights) and only the residual reads `out`. gamma / beta absent: the graph has no such op."""

    form: NormForm
    eps: float
    width: int
    has_gamma: bool
    has_beta: bool

    def arrays(self) -> list[str]:
        return [f"{self.name}.{p}" for p, has in (("gamma", self.has_gamma), ("beta", self.has_beta)) if has]


@dataclass
class Attention(Step):
    """softmax(scale(q_heads . k_heads^T) + terms + mask) . v_heads, heads merged back: inputs q, k, v
    [rows, heads * head_dim] buffers, output the merged context.

    The scalar factors are applied where the graph applies them (each is exact elementwise work
    on its operand): q_scale to Q before the product, k_scale to K, score_scale to the scores
    after it, or score_divisor dividing them."""

    heads: int
    head_dim: int
    q_scale: float | None
    k_scale: float | None
    score_scale: float | None
    score_divisor: float | None
    mask: MaskMode
    keep_value: float  # MaskMode.ADD: added to kept keys (0 adds nothing)
    drop_value: float  # added to (ADD) or replacing (REPLACE) dropped keys' scores
    softmax_beta: float = 1.0
    key_rule: KeyRule = KeyRule.NONZERO
    # Terms the graph adds to the scaled scores before the mask, in data-flow order, each
    # [heads, seq, seq] float32: a constant array <name>.term<i> (a relative-position bias folded
    # in the reference's arithmetic) or a buffer computed per window by earlier steps (DeBERTa's
    # content-to-position and position-to-content products), also among the step's inputs.
    terms: list[Operand] = field(default_factory=list)
    # The mask is [queries, keys]: a query the mask input drops has every key dropped (DeBERTa's
    # mask[i] * mask[j]), so its scores are all the drop value; otherwise every query keeps the
    # same keys.
    query_mask: bool = False
    # onnxruntime runs the softmax as ONNX's function body, op by op in float32 (a float16
    # graph's Softmax: porter.reference.ops.softmax_function), not MLAS's softmax kernel
    softmax_body: bool = False

    def arrays(self) -> list[str]:
        return [t.array for t in self.terms if t.array]

    @property
    def computed_terms(self) -> list[str]:
        """The buffers of the terms computed per window."""
        return [t.buffer for t in self.terms if t.buffer]


@dataclass
class GeluStep(Step):
    kind: Gelu


class Elementwise(str, enum.Enum):
    """Elementwise ops run one graph op each, broadcasting [rows, cols] against [rows, 1],
    [1, cols] or [1, 1] operands (constants are arrays of the program)."""

    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    SQUARED_DIFFERENCE = "squared_difference"
    NEG = "neg"
    ABS = "abs"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    TANH = "tanh"
    EXP = "exp"
    ERF = "erf"
    RELU = "relu"
    SIGMOID = "sigmoid"
    # float32 -> nearest float16 -> float32: where onnxruntime casts a float16 graph's value
    # (porter.reference.ort.float16.round_half)
    ROUND_HALF = "round_half"


UNARY = {Elementwise.NEG, Elementwise.ABS, Elementwise.SQRT, Elementwise.RSQRT, Elementwise.TANH,
         Elementwise.EXP, Elementwise.ERF, Elementwise.RELU, Elementwise.SIGMOID, Elementwise.ROUND_HALF}


@dataclass
class Operand:
    """A step input: a buffer, or a constant array of the program, seen with `shape` (a view of
    the buffer's flat data); operands broadcast against each other as numpy does."""

    buffer: str | None
    array: str | None
    shape: tuple[int, ...]


@dataclass
class ElementwiseStep(Step):
    op: Elementwise
    operands: list[Operand]
    shape: tuple[int, ...]  # the output's


class Reduce(str, enum.Enum):
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"
    L2 = "l2"  # sqrt of the sum of squares, one by one (onnxruntime's ReduceL2)


@dataclass
class ReduceStep(Step):
    """A reduction over `axes` of the input (seen with `shape`), in the reference kernel's order
    (porter.reference.ops.reduce_float); the output keeps the reduced axes as size one."""

    op: Reduce
    operand: Operand
    axes: tuple[int, ...]


@dataclass
class L2NormalizeStep(Step):
    """LiteRT's L2_NORMALIZATION: each row of the input's last axis (seen with `shape`) divided
    by its norm (porter.reference.litert.floats.l2_normalization); the output has the input's shape."""

    operand: Operand


@dataclass
class SliceStep(Step):
    """A slice of the input (seen with `shape`): (axis, start, stop, step) per sliced axis, e.g.
    the first token for CLS pooling."""

    operand: Operand
    slices: tuple[tuple[int, int, int, int], ...]


# ---- buffers and the program ---------------------------------------------------------------


@dataclass
class Buffer:
    rows: int  # seq (a token buffer) or 1
    cols: int
    tokens: bool  # one row per window position
    extent: Rows = Rows.ALL  # the rows the program computes (porter.recover.rows)
    dtype: str = "float32"  # int8 / int32 / bool buffers: a full-integer program's (porter.ir.integer)


INPUT_IDS = "input.ids"
INPUT_MASK = "input.mask"  # the attention mask as float [seq, 1], for elementwise steps
INPUT_TYPES = "input.types"  # the token type ids (segment A 0, B 1), read by the Embed step


@dataclass
class EncoderProgram:
    source: str
    format: str  # tflite / onnx
    reference: Reference
    seq: int
    vocab: int
    ids_input: str
    mask_input: str | None
    output: str  # the graph's output name
    output_buffer: str
    buffers: dict[str, Buffer]
    steps: list[Step]
    weights: dict = field(default_factory=dict, repr=False)
    # True where rows past the last kept key can be left uncomputed (porter.recover.rows).
    padding_is_inert: bool = False
    # ONNXRUNTIME_CPU only: the CPU whose onnxruntime arithmetic it reproduces (porter.reference.ort.cpu)
    ort_cpu: str | None = None
    # LITERT_BUILTIN only: the L1 data cache size (bytes) whose Eigen blocking its float products
    # follow (porter.reference.litert.floats.gemm_depth_block)
    eigen_l1d: int | None = None
    # the graph's token-type input, where it has one (its values index the Embed step's types term)
    types_input: str | None = None
    # a full-integer program's int8 output: its (scale, zero point); the output buffer holds it
    # dequantised as (q - zero point) * scale (porter.ir.integer)
    output_quant: tuple[float, int] | None = None

    def first_unwritten_read(self) -> tuple[Step, str] | None:
        """The first step that reads a buffer neither the program's inputs nor an earlier step
        provide (every producer of a program must leave none)."""
        written = {INPUT_IDS, INPUT_MASK, INPUT_TYPES}
        for step in self.steps:
            missing = next((name for name in step.inputs if name not in written), None)
            if missing is not None:
                return step, missing
            written.update(step.outputs)
        return None

    @property
    def width(self) -> int:
        """Values per output row: labels for a classifier, hidden size for an embedding."""
        return self.buffers[self.output_buffer].cols

    @property
    def output_tokens(self) -> bool:
        """One output row per token (token classification), or one for the window (pooled)."""
        return self.buffers[self.output_buffer].tokens

    @property
    def type_vocab(self) -> int:
        """Rows of the token-type table (valid type ids are below it); 1 without a types input."""
        return next((rows for s in self.steps for rows in [s.table_rows(INPUT_TYPES)] if rows), 1)

    @property
    def mask(self) -> MaskMode:
        modes = {s.mask for s in self.steps if isinstance(s, Attention)}
        return MaskMode.ADD if MaskMode.ADD in modes else MaskMode.REPLACE if modes - {MaskMode.NONE} else MaskMode.NONE

    def linears(self) -> list[Linear]:
        return [s.linear for s in self.steps if isinstance(s, LinearStep)]

    def attentions(self) -> list[Attention]:
        return [s for s in self.steps if isinstance(s, Attention)]

    def int4_arrays(self) -> set[str]:
        """The arrays model.bin stores as packed int4 (porter.codegen.pack.pack_int4)."""
        return {f"{lin.name}.weight" for lin in self.linears() if lin.weights == WeightFormat.INT4_PER_CHANNEL}

    def array_order(self) -> list[str]:
        """The order arrays are packed in model.bin (and read back by the generated crate)."""
        names: list[str] = []
        for step in self.steps:
            names += [a for a in step.arrays() if a not in names]
            operands = getattr(step, "operands", None) or ([step.operand] if hasattr(step, "operand") else [])
            for operand in operands:
                if operand.array and operand.array not in names:
                    names.append(operand.array)
        return names

    def summary(self) -> dict:
        """The architecture without weights: what `porter inspect --ir --json` prints and ir.json
        holds (the fields other tools read: kind, source, format, seq, vocab, labels, ...)."""
        attentions = self.attentions()
        return {
            "kind": "encoder",
            "source": self.source, "format": self.format, "reference": self.reference.value,
            "ort_cpu": self.ort_cpu, "eigen_l1d": self.eigen_l1d,
            "seq": self.seq, "vocab": self.vocab,
            "labels": self.width, "width": self.width,
            "output_rows": "tokens" if self.output_tokens else "one",
            "ids_input": self.ids_input, "mask_input": self.mask_input, "types_input": self.types_input,
            "type_vocab": self.type_vocab, "output": self.output,
            "mask": self.mask.value, "padding_is_inert": self.padding_is_inert,
            "output_quant": list(self.output_quant) if self.output_quant else None,
            "layers": len(attentions),
            "heads": attentions[0].heads if attentions else 0,
            "steps": [_step_summary(s) for s in self.steps],
            "buffers": {n: _plain(asdict(b)) for n, b in self.buffers.items()},
            "arrays": {n: {"dtype": str(self.weights[n].dtype), "shape": list(self.weights[n].shape)}
                       for n in self.array_order()},
        }


def _step_summary(step: Step) -> dict:
    d = {"step": type(step).__name__}
    for f in fields(step):
        d[f.name] = _plain(getattr(step, f.name))
    return d


def _plain(value):
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    return value


def as_f32(a) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(a, dtype=np.float32))
