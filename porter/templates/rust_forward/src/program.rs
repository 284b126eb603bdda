//! The encoder as a program: the steps porter recovered, in order, over numbered buffers.
//!
//! model.rs (generated) builds the steps from model.bin; forward.rs runs them. Each buffer is a
//! flat f32 array in one of the model's slots (buffers whose lifetimes do not overlap share a
//! slot); a token buffer holds one row per window position, and a step on it computes only the
//! rows its `Rows` says (see forward::rows_to_compute).

use crate::kernels::litert::attention::AttentionParams;
use crate::kernels::common::gemm::Int8Weights;
pub use crate::kernels::common::exact::{Arithmetic, Comparison};
pub use crate::kernels::common::tensor::{Data, ElementType, Pointwise, TensorKernel, TensorOperand, TensorStep};
use crate::kernels::litert::linear_f32::FloatWeights;
use crate::kernels::litert::norm::LayerNormParams;

/// How many rows of a token buffer a step computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rows {
    /// A pooled buffer: one row.
    One,
    /// The window's live tokens.
    Live,
    /// Every key attention reads: up to the last kept token.
    Keys,
    /// The whole window.
    All,
}

/// An allocation's size, the most its buffers take: `row` values per token row the window
/// computes, `row_all` per row of the whole window (buffers of Rows::All), or `len` values.
#[derive(Clone, Copy, Debug)]
pub struct Buffer {
    pub len: usize,
    pub row: usize,
    pub row_all: usize,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TableKind {
    /// int8 rows, one scale per row
    Int8Rows,
    /// int8 rows, one scale for the table
    Int8Tensor,
    /// uint8 rows, one scale and zero point for the table (DequantizeLinear)
    Uint8Tensor,
    /// float16 rows (their bits), widened exactly to float32
    Float16,
    Float32,
}

/// A table read by ids, in place in model.bin.
pub struct Lookup<'a> {
    pub kind: TableKind,
    /// Float rows, the float16 rows' bits, or the int8 / uint8 rows' bytes, as `kind` says.
    pub table_f32: &'a [f32],
    pub table_f16: &'a [u16],
    pub table_i8: &'a [i8],
    pub table_u8: &'a [u8],
    pub scale: &'a [f32],
    pub zero_point: i32,
    pub width: usize,
}

/// A term added to the word rows, in the graph's order.
pub enum Term<'a> {
    /// Constant rows: one per position (row_stride = width) or one for all (row_stride = 0).
    Rows { values: &'a [f32], row_stride: usize },
    /// A table looked up by RoBERTa's position ids: pad + the running count of real tokens.
    Positions { lookup: Lookup<'a>, pad_id: u32 },
    /// The token-type table, looked up by each token's type id (segment A 0, B 1).
    Types { lookup: Lookup<'a> },
}

pub enum Weights<'a> {
    /// TFLite's hybrid FULLY_CONNECTED: each input row quantised to int8 on its own
    Int8 { weights: Int8Weights<'a>, asymmetric: bool },
    /// The same with int4 weights (-7..7), stored two a byte (kernels/common/int4.rs) and
    /// unpacked to one int8 each per forward pass: LiteRT's 4-bit kernels' output
    Int4 { packed: &'a [u8], scale: &'a [f32], bias: Option<&'a [f32]>, outs: usize, k: usize },
    /// onnxruntime's dynamic quantisation: the whole input tensor to uint8 at once
    OrtDynamic { weights: Int8Weights<'a>, saturating: bool },
    /// LiteRT's float FULLY_CONNECTED
    Float(FloatWeights<'a>),
    /// A float product whose float32 weights the file computes from int8 ones (weight-only
    /// int8: DEQUANTIZE / DequantizeLinear of a constant), stored as those int8 values
    FloatFromInt8 { weights: Int8Weights<'a>, onnxruntime: bool },
    /// The same from int4 weights (weight-only int4: DEQUANTIZE of an int4 constant), stored two a
    /// byte as the Int4 layer's are
    FloatFromInt4 { packed: &'a [u8], scale: &'a [f32], bias: Option<&'a [f32]>, outs: usize, k: usize, onnxruntime: bool },
    /// The same from float16 weights (weight-only float16), stored as their bits
    FloatFromF16 { halves: &'a [u16], bias: Option<&'a [f32]>, outs: usize, k: usize, onnxruntime: bool },
    /// onnxruntime's float Gemm
    FloatOrt(FloatWeights<'a>),
}

pub struct Linear<'a> {
    pub weights: Weights<'a>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gelu {
    /// LiteRT's GELU (Eigen's erfc)
    Litert,
    /// onnxruntime's Gelu kernel: erf(h * (1 / sqrt 2))
    OrtErfMul,
    /// LiteRT's GELU with approximate=True (Eigen's tanh)
    LitertTanh,
    /// onnxruntime's FastGelu kernel (MLAS's tanh)
    OrtFastGelu,
}

/// Elementwise ops, one graph op each.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Elementwise {
    Add,
    Sub,
    Mul,
    Div,
    Maximum,
    Minimum,
    SquaredDifference,
    Neg,
    Abs,
    Sqrt,
    Rsqrt,
    Relu,
    /// LiteRT's EXP (libm's expf, one value at a time)
    ExpLitert,
    /// LiteRT's TANH (Eigen's fast rational)
    TanhLitert,
    /// LiteRT's LOGISTIC (Eigen's functor: packets from the tensor's start, a scalar tail)
    LogisticLitert,
    /// onnxruntime's Erf (MLAS's)
    ErfOrt,
    /// onnxruntime's Tanh (MLAS's)
    TanhOrt,
    /// float32 -> nearest float16 -> float32: where onnxruntime casts a float16 graph's value
    RoundHalf,
}

/// Where an operand's values are: a buffer, or a constant of model.bin.
#[derive(Clone, Copy)]
pub enum Source<'a> {
    Buffer(usize),
    Const(&'a [f32]),
}

/// An operand of an elementwise step: its values and, for each of the output's four axes, the
/// step between consecutive values along it (0 where the operand is broadcast).
#[derive(Clone, Copy)]
pub struct Operand<'a> {
    pub source: Source<'a>,
    pub strides: [usize; 4],
}

/// The order a reduction adds in.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ReduceOrder {
    /// LiteRT's optimized reduce kernels (kernels/reduce.rs)
    Litert,
    /// onnxruntime over the last axis alone: Eigen's packets per row
    EigenRows,
    /// onnxruntime otherwise: one value at a time in index order
    InOrder,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Reduce {
    Sum,
    Mean,
    Max,
    /// The square root of the sum of squares, one by one (onnxruntime's ReduceL2)
    L2,
}

pub enum Step<'a> {
    Embed { out: usize, rows: Rows, word: Lookup<'a>, terms: Vec<Term<'a>> },
    /// `x_rows`: the rows of x to quantise (all its readers' rows), `rows`: the rows to compute,
    /// `tensor_rows`: the input tensor's rows (Eigen picks a float product's order by them).
    Linear { x: usize, out: usize, x_rows: Rows, rows: Rows, tensor_rows: usize, linear: Linear<'a> },
    LayerNorm { x: usize, out: usize, normalised: Option<usize>, rows: Rows, params: LayerNormParams<'a> },
    /// `terms`: the score terms, each [heads, SEQ, SEQ] (kernels::litert::attention::ScoreTerms):
    /// constants, or buffers earlier steps compute. `query_mask`: a query the mask drops drops
    /// every key (the mask is [queries, keys]: DeBERTa's mask[i] * mask[j]).
    Attention { q: usize, k: usize, v: usize, out: usize, rows: Rows, params: AttentionParams, terms: Vec<Source<'a>>,
                query_mask: bool },
    /// x has `row` values per token row (0: `len` values, no token rows).
    Gelu { x: usize, out: usize, rows: Rows, row: usize, len: usize, kind: Gelu },
    /// `shape`: the output's, four axes; `token_axis`: its token axis (4 when it has none).
    Elementwise { op: Elementwise, a: Operand<'a>, b: Option<Operand<'a>>, out: usize, rows: Rows, shape: [usize; 4], token_axis: usize },
    /// Over the axes flagged in `axes` of x (shape `shape`), adding in `order`.
    Reduce { op: Reduce, x: Operand<'a>, out: usize, rows: Rows, shape: [usize; 4], axes: [bool; 4], order: ReduceOrder, token_axis: usize },
    /// LiteRT's L2_NORMALIZATION over runs of `width` values; x has `cols` values per row.
    L2Normalize { x: usize, out: usize, rows: Rows, cols: usize, width: usize },
    /// (start, step, count) per axis of x's `shape`.
    Slice { x: Operand<'a>, out: usize, shape: [usize; 4], ranges: [(usize, usize, usize); 4] },
    /// A full-integer program's step (integer.rs): a program holds these only.
    Integer(crate::integer::IntStep<'a>),
    /// One graph op over typed tensors (kernels/common/tensor.rs), computed over `limits`: the
    /// whole of each output axis (Rows::All) or its first rows of the window.
    Tensor { step: TensorStep<'a>, limits: [Rows; 4] },
}
