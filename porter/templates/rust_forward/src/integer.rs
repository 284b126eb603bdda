//! A program of typed steps (porter.ir.integer): LiteRT's integer kernels (a full-integer TFLite
//! graph) or onnxruntime's (a QDQ graph: its quantised kernels, kernels/ort/qdq.rs, between
//! float ones), one step at a time over typed buffers, every window whole (a quantised softmax
//! weighs every key, padding included, so no row can be left out). Slots 0, 1 and 2 hold the
//! window's ids, mask and token types.

use crate::kernels::litert::int8::dot::{batch_matmul, dot, fully_connected, BatchMatmul, FullyConnected};
use crate::kernels::litert::int8::elementwise::{self as ew, binary, reduced, Binary, Path, Reduction, Walk};
use crate::kernels::litert::int8::fixed_point::Multiplier;
use crate::kernels::common::generic;
use crate::kernels::common::exact::{self, CastTo, Number};
pub use crate::kernels::common::exact::{Arithmetic, Comparison};
use crate::kernels::ort::float::{layer_norm_row, m1_columns, pow_by_products, sgemm_columns, softmax, stride_k, OrtFloats};
use crate::kernels::ort::qdq::{self, Qgemm, QlinearAdd, QlinearMul};
use crate::program::{Elementwise, Reduce};
use crate::model::*;
use crate::profile::{Phase, Profile};
use crate::program::Step;

pub const IDS_SLOT: usize = 0;
pub const MASK_SLOT: usize = 1;
pub const TYPES_SLOT: usize = 2;

/// A buffer's element type (bool values are int8 0 / 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum DType {
    I8,
    U8,
    Bool,
    I32,
    I64,
    F32,
}

/// Where an operand's values are: a buffer's slot, or a constant of model.bin.
#[derive(Clone, Copy)]
pub enum Values<'a> {
    Slot(usize),
    I8(&'a [i8]),
    U8(&'a [u8]),
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
}

/// An operand and, along each of the output's four axes, its step (0 where it is broadcast).
#[derive(Clone, Copy)]
pub struct IntOperand<'a> {
    pub values: Values<'a>,
    pub strides: [usize; 4],
}

pub enum IntKernel<'a> {
    FullyConnected(FullyConnected<'a>),
    BatchMatmul(BatchMatmul),
    /// two operands broadcast against each other
    Binary(Binary<'a>),
    /// over the flagged axes of operand 0's `shape`
    Reduce { reduction: Reduction, shape: [usize; 4], axes: [bool; 4] },
    Table(&'a [i8]),
    Softmax { table: &'a [f32], out_scale: f32, out_zp: i32, row: usize },
    Quantize { scale: f32, zp: i32 },
    Requantize { x_zp: i32, multiplier: Multiplier, out_zp: i32 },
    Dequantize { scale: f32, zp: i32 },
    Output { scale: f32, zp: i32 },
    /// rows of a constant table (I8, U8 or F32) by integer ids (`wraps`: a negative id counts from the end)
    Lookup { table: Values<'a>, rows: usize, width: usize, wraps: bool },
    /// out[i] = x[index[i]]
    Index(&'a [i32]),
    Cast,
    LogicalAnd,
    /// condition ? a : b, broadcast
    Select,
    Abs,
    /// two operands of one type compared, broadcast: a bool per output value
    Compare(Comparison),
    /// int32 / int64 arithmetic, broadcast, wrapping
    Arithmetic(Arithmetic),
    /// running sums along the middle axis of [outer, n, inner]
    Cumsum { outer: usize, n: usize, inner: usize, exclusive: bool, reverse: bool },
    /// the operands one after the other: `blocks[i]` values of operand i in turn, `outer` times
    Concat { outer: usize, blocks: Vec<usize> },
    /// a constant at integer index vectors (operand 0's last axis) into its first axes (`dims`),
    /// each selecting `inner` values
    GatherNd { table: Values<'a>, dims: Vec<usize>, inner: usize, wraps: bool },
    /// a constant at one integer index per output value (operand 0, of `shape`) along `axis`
    GatherElements { table: Values<'a>, shape: Vec<usize>, table_strides: Vec<usize>, axis: usize, dim: usize, wraps: bool },
    /// onnxruntime's QuantizeLinear: f32 -> the step's dtype (U8 or I8), whose range is lo..=hi
    OrtQuantize { scale: f32, zp: i32, lo: i32, hi: i32 },
    /// onnxruntime's DequantizeLinear: U8 / I8 / I32 -> f32
    OrtDequantize { scale: f32, zp: i32 },
    /// the same with one scale and zero point per index of an axis of `channels` (value i's is
    /// (i / inner) % channels): an 8-bit weight's, dequantised as onnxruntime does when it runs
    OrtDequantizeAxis { scale: &'a [f32], zp: &'a [i32], channels: usize, inner: usize },
    /// QLinearMatMul / QGemm: operand 0 is A, operand 1 an activation B (if not constant)
    OrtQgemm(Qgemm<'a>),
    /// QLinearAdd, its operands broadcast
    OrtQlinearAdd(QlinearAdd),
    /// QLinearMul, its operands broadcast
    OrtQlinearMul(QlinearMul),
    /// QLinearSoftmax over rows of `row` uint8 values
    OrtQlinearSoftmax { table: &'a [f32], multiplier: f64, zp: i32, row: usize },
    /// one op onnxruntime runs in float
    Float(FloatOp),
}

/// onnxruntime's float ops in a QDQ program (FLOAT steps).
pub enum FloatOp {
    /// generic::elementwise over the step's shape: one operand, or two broadcast
    Elementwise(Elementwise),
    /// over the flagged axes of operand 0's `shape`; `eigen_rows`: a last-axis sum in Eigen's order
    Reduce { op: Reduce, shape: [usize; 4], axes: [bool; 4], eigen_rows: bool },
    /// MLAS's softmax over rows of `row` values
    Softmax { floats: OrtFloats, row: usize },
    /// LayerNormalization over rows of `width` (operands x, gamma, beta)
    LayerNorm { width: usize, eps: f32 },
    /// MatMul of a [batch, m, k] and b [batch (or one, b_batched false), k, n], B not prepacked
    MatMul { batch: usize, m: usize, k: usize, n: usize, b_batched: bool },
    /// the larger of x and the lower bound, then the smaller of that and the upper (operands x,
    /// then the bounds given)
    Clip { lower: bool, upper: bool },
    /// a logical op of two operands (broadcast), or of one (Not, IsNaN): bool out
    Predicate(Predicate),
    /// Pow by a constant 2 or 3 (`cube`), as onnxruntime's kernel multiplies
    Pow { cube: bool },
}

#[derive(Clone, Copy)]
pub enum Predicate {
    And,
    Or,
    Not,
    IsNan,
}

pub struct IntStep<'a> {
    pub kernel: IntKernel<'a>,
    pub operands: Vec<IntOperand<'a>>,
    pub out: usize,
    pub dtype: DType,
    /// the output's shape, four axes
    pub shape: [usize; 4],
}

pub enum Tensor {
    I8(Vec<i8>),
    U8(Vec<u8>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    F32(Vec<f32>),
}

struct State<'a> {
    slots: Vec<Tensor>,
    _model: core::marker::PhantomData<&'a ()>,
}

/// The accessor of one element type: an operand's values, from its slot or model.bin.
macro_rules! typed_values {
    ($name:ident, $t:ty, $variant:ident, $what:literal) => {
        fn $name<'s>(&'s self, v: &'s Values<'a>) -> &'s [$t] {
            match v {
                Values::Slot(s) => match &self.slots[*s] {
                    Tensor::$variant(x) => x,
                    _ => panic!("slot {s}: not {}", $what),
                },
                Values::$variant(x) => x,
                _ => panic!("{} operand was expected", $what),
            }
        }
    };
}

impl<'a> State<'a> {
    typed_values!(i8s, i8, I8, "int8");
    typed_values!(u8s, u8, U8, "uint8");
    typed_values!(f32s, f32, F32, "float32");
    typed_values!(i32s, i32, I32, "int32");

    /// Value i of an operand of any type, widened (exact for every 8- and 32-bit value).
    fn wide(&self, v: &Values<'a>, i: usize) -> f64 {
        self.number(v, i).wide()
    }

    /// Value i of an operand of any type, exactly.
    fn number(&self, v: &Values<'a>, i: usize) -> Number {
        match v {
            Values::Slot(s) => match &self.slots[*s] {
                Tensor::I8(x) => Number::Int(x[i] as i64),
                Tensor::U8(x) => Number::Int(x[i] as i64),
                Tensor::I32(x) => Number::Int(x[i] as i64),
                Tensor::I64(x) => Number::Int(x[i]),
                Tensor::F32(x) => Number::Float(x[i]),
            },
            Values::I8(x) => Number::Int(x[i] as i64),
            Values::U8(x) => Number::Int(x[i] as i64),
            Values::I32(x) => Number::Int(x[i] as i64),
            Values::I64(x) => Number::Int(x[i]),
            Values::F32(x) => Number::Float(x[i]),
        }
    }

    /// Value i of an integer (or bool) operand of any width.
    fn int(&self, v: &Values<'a>, i: usize) -> i64 {
        match self.number(v, i) {
            Number::Int(x) => x,
            Number::Float(_) => panic!("an integer operand was expected"),
        }
    }

    /// Every value of an integer operand, `len` of them.
    fn ints(&self, v: &Values<'a>, len: usize) -> Vec<i64> {
        (0..len).map(|i| self.int(v, i)).collect()
    }

    /// The values of `from` (of the step's type) at the positions `at`: data movement, exact.
    fn gather(&self, from: &Values<'a>, dtype: DType, at: impl Iterator<Item = usize>) -> Tensor {
        match dtype {
            DType::F32 => { let x = self.f32s(from); Tensor::F32(at.map(|i| x[i]).collect()) }
            DType::U8 => { let x = self.u8s(from); Tensor::U8(at.map(|i| x[i]).collect()) }
            DType::I8 => { let x = self.i8s(from); Tensor::I8(at.map(|i| x[i]).collect()) }
            _ => from_ints(dtype, at.map(|i| self.int(from, i))),
        }
    }
}

/// Every output index of a four-axis shape with each operand's offset there.
fn for_each_broadcast(shape: [usize; 4], operands: &[IntOperand], mut f: impl FnMut(usize, &[usize; 3])) {
    let mut i = 0;
    let mut at = [0usize; 3];
    for a in 0..shape[0] {
        for b in 0..shape[1] {
            for c in 0..shape[2] {
                for d in 0..shape[3] {
                    for (o, operand) in operands.iter().enumerate() {
                        let s = operand.strides;
                        at[o] = a * s[0] + b * s[1] + c * s[2] + d * s[3];
                    }
                    f(i, &at);
                    i += 1;
                }
            }
        }
    }
}

/// Integer results in their type (exact::narrow: the low bits; bool != 0); a float32 result is the
/// integer rounded to nearest even, as C++'s conversion.
fn from_ints(dtype: DType, values: impl Iterator<Item = i64>) -> Tensor {
    match dtype {
        DType::Bool => Tensor::I8(values.map(|v| exact::narrow(v, 1, false) as i8).collect()),
        DType::I8 => Tensor::I8(values.map(|v| exact::narrow(v, 8, true) as i8).collect()),
        DType::U8 => Tensor::U8(values.map(|v| exact::narrow(v, 8, false) as u8).collect()),
        DType::I32 => Tensor::I32(values.map(|v| exact::narrow(v, i32::BITS, true) as i32).collect()),
        DType::I64 => Tensor::I64(values.collect()),
        DType::F32 => Tensor::F32(values.map(|v| v as f32).collect()),
    }
}

/// One value cast to `dtype` as both runtimes cast (exact::cast; porter.reference.typed.cast).
fn cast(v: Number, dtype: DType) -> Number {
    exact::cast(v, match dtype {
        DType::F32 => CastTo::Float,
        DType::Bool => CastTo::Bool,
        DType::I64 => CastTo::Int64,
        DType::I8 | DType::U8 | DType::I32 => CastTo::Int32,
    })
}

/// Values of any type in the step's type (each already cast to it).
fn from_numbers(dtype: DType, values: impl Iterator<Item = Number>) -> Tensor {
    match dtype {
        DType::F32 => Tensor::F32(values.map(|v| match v { Number::Float(x) => x, Number::Int(x) => x as f32 }).collect()),
        _ => from_ints(dtype, values.map(|v| match v { Number::Int(x) => x, Number::Float(_) => panic!("a float for an integer") })),
    }
}

fn run(step: &IntStep, s: &State) -> (Tensor, Phase) {
    let len: usize = step.shape.iter().product();
    let x = step.operands.first().map(|o| &o.values);
    let mut y8 = vec![0i8; if matches!(step.dtype, DType::I8 | DType::Bool) { len } else { 0 }];
    let phase = match &step.kernel {
        IntKernel::FullyConnected(p) => {
            fully_connected(p, s.i8s(x.unwrap()), &mut y8, dot);
            Phase::Matmul
        }
        IntKernel::BatchMatmul(p) => {
            batch_matmul(p, s.i8s(x.unwrap()), s.i8s(&step.operands[1].values), &mut y8, dot);
            Phase::Matmul
        }
        IntKernel::Binary(p) => {
            let (a, b) = (s.i8s(&step.operands[0].values), s.i8s(&step.operands[1].values));
            if let Walk::Reference = p.walk {
                for_each_broadcast(step.shape, &step.operands, |i, at| y8[i] = binary(p, Path::Scalar, a[at[0]], b[at[1]]));
            } else {  // LiteRT's optimized ADD / MUL: each element by its loop
                ew::for_each_walked(p.walk, p.combine, len, |i, ix, iy, path| y8[i] = binary(p, path, a[ix], b[iy]));
            }
            Phase::Other
        }
        IntKernel::Reduce { reduction, shape, axes } => {
            let mut totals = vec![0i64; len];
            let out_strides = {
                let kept: Vec<usize> = (0..4).map(|a| if axes[a] { 1 } else { shape[a] }).collect();
                [kept[1] * kept[2] * kept[3], kept[2] * kept[3], kept[3], 1]
            };
            let values = s.i8s(x.unwrap());
            let mut i = 0;
            for a in 0..shape[0] {
                for b in 0..shape[1] {
                    for c in 0..shape[2] {
                        for d in 0..shape[3] {
                            let at = [a, b, c, d];
                            let o: usize = (0..4).map(|k| if axes[k] { 0 } else { at[k] * out_strides[k] }).sum();
                            totals[o] += values[i] as i64;
                            i += 1;
                        }
                    }
                }
            }
            for (at, (o, &t)) in y8.iter_mut().zip(&totals).enumerate() {
                *o = reduced(reduction, at, t);
            }
            Phase::Other
        }
        IntKernel::Table(table) => {
            for (o, &v) in y8.iter_mut().zip(s.i8s(x.unwrap())) {
                *o = ew::table(table, v);
            }
            Phase::Other
        }
        IntKernel::Softmax { table, out_scale, out_zp, row } => {
            ew::softmax(table, *out_scale, *out_zp, s.i8s(x.unwrap()), *row, &mut y8, &mut Vec::with_capacity(*row));
            Phase::Attention
        }
        IntKernel::Quantize { scale, zp } => {
            ew::quantize(s.f32s(x.unwrap()), *scale, *zp, &mut y8);
            Phase::Other
        }
        IntKernel::Requantize { x_zp, multiplier, out_zp } => {
            ew::requantize(s.i8s(x.unwrap()), *x_zp, *multiplier, *out_zp, &mut y8);
            Phase::Other
        }
        IntKernel::Dequantize { scale, zp } | IntKernel::Output { scale, zp } => {
            let mut y = vec![0.0f32; len];
            if matches!(step.kernel, IntKernel::Dequantize { .. }) {
                ew::dequantize(s.i8s(x.unwrap()), *scale, *zp, &mut y);
            } else {
                ew::dequantize_output(s.i8s(x.unwrap()), *scale, *zp, &mut y);
            }
            return (Tensor::F32(y), Phase::Other);
        }
        IntKernel::Lookup { table, rows, width, wraps } => {
            let ids = s.ints(x.unwrap(), len / width);
            let at = ids.iter().flat_map(|&id| { let row = exact::index_in(id, *rows, *wraps, "lookup") * width; row..row + width });
            return (s.gather(table, step.dtype, at), Phase::Other);
        }
        IntKernel::Index(index) => return (s.gather(x.unwrap(), step.dtype, index.iter().map(|&i| i as usize)), Phase::Other),
        IntKernel::OrtQuantize { scale, zp, lo, hi } => {
            let q = s.f32s(x.unwrap()).iter().map(|&v| qdq::quantize(v, *scale, *zp, *lo, *hi));
            return (integers(step.dtype, q), Phase::Other);
        }
        IntKernel::OrtDequantize { scale, zp } => {
            return (Tensor::F32(s.quantised(x.unwrap(), len, |_, q| qdq::dequantize(q, *scale, *zp))), Phase::Other);
        }
        IntKernel::OrtDequantizeAxis { scale, zp, channels, inner } => {
            let y = s.quantised(x.unwrap(), len, |i, q| {
                let c = i / inner % channels;
                qdq::dequantize(q, scale[c], zp[c])
            });
            return (Tensor::F32(y), Phase::Other);
        }
        IntKernel::OrtQgemm(p) => {
            let a = s.narrow(x.unwrap());
            let b = step.operands.get(1).map_or(Vec::new(), |o| s.narrow(&o.values));
            let mut y = vec![0.0f32; len];
            qdq::qgemm(p, &a, &b, &mut y);
            return (match p.output {
                qdq::QgemmOutput::Float => Tensor::F32(y),
                _ => integers(step.dtype, y.into_iter().map(|v| v as i32)),
            }, Phase::Matmul);
        }
        IntKernel::OrtQlinearAdd(p) => return (qlinear_binary(step, s, |a, b| qdq::qlinear_add(p, a, b)), Phase::Other),
        IntKernel::OrtQlinearMul(p) => return (qlinear_binary(step, s, |a, b| qdq::qlinear_mul(p, a, b)), Phase::Other),
        IntKernel::OrtQlinearSoftmax { table, multiplier, zp, row } => {
            let x = s.u8s(x.unwrap());
            let mut y = vec![0u8; len];
            for (xr, yr) in x.chunks_exact(*row).zip(y.chunks_exact_mut(*row)) {
                qdq::qlinear_softmax_row(table, *multiplier, *zp, xr, yr);
            }
            return (Tensor::U8(y), Phase::Attention);
        }
        IntKernel::Float(op) => return float_op(op, step, s),
        IntKernel::Cast => {
            return (from_numbers(step.dtype, (0..len).map(|i| cast(s.number(x.unwrap(), i), step.dtype))), Phase::Other)
        }
        IntKernel::Abs => return (Tensor::F32(s.f32s(x.unwrap()).iter().map(|v| v.abs()).collect()), Phase::Other),
        IntKernel::LogicalAnd => {
            let (a, b) = (&step.operands[0].values, &step.operands[1].values);
            for_each_broadcast(step.shape, &step.operands, |i, at| y8[i] = (s.int(a, at[0]) != 0 && s.int(b, at[1]) != 0) as i8);
            Phase::Other
        }
        IntKernel::Select => {
            let (c, a, b) = (&step.operands[0].values, &step.operands[1].values, &step.operands[2].values);
            let mut picked = Vec::with_capacity(len);
            for_each_broadcast(step.shape, &step.operands, |_, at| {
                picked.push(if s.int(c, at[0]) != 0 { s.number(a, at[1]) } else { s.number(b, at[2]) })
            });
            return (from_numbers(step.dtype, picked.into_iter()), Phase::Other);
        }
        IntKernel::Compare(how) => {
            let (a, b) = (&step.operands[0].values, &step.operands[1].values);
            for_each_broadcast(step.shape, &step.operands, |i, at| {
                y8[i] = match (s.number(a, at[0]), s.number(b, at[1])) {
                    (Number::Int(p), Number::Int(q)) => exact::compare(*how, p, q),
                    (p, q) => exact::compare(*how, p.wide(), q.wide()),
                } as i8
            });
            Phase::Other
        }
        IntKernel::Arithmetic(how) => {
            let (a, b) = (&step.operands[0].values, &step.operands[1].values);
            let mut y = Vec::with_capacity(len);
            for_each_broadcast(step.shape, &step.operands, |_, at| y.push(exact::arithmetic(*how, s.int(a, at[0]), s.int(b, at[1]))));
            return (from_ints(step.dtype, y.into_iter()), Phase::Other);
        }
        IntKernel::Cumsum { outer, n, inner, exclusive, reverse } => {
            let y = exact::cumsum(&s.ints(x.unwrap(), len), *outer, *n, *inner, *exclusive, *reverse);
            return (from_ints(step.dtype, y.into_iter()), Phase::Other);
        }
        IntKernel::Concat { outer, blocks } => {
            let mut parts: Vec<Tensor> = Vec::with_capacity(blocks.len());
            for (operand, &block) in step.operands.iter().zip(blocks) {
                let at = (0..*outer).flat_map(|o| o * block..(o + 1) * block);
                parts.push(s.gather(&operand.values, step.dtype, at));
            }
            return (interleave(parts, *outer, blocks), Phase::Other);
        }
        IntKernel::GatherNd { table, dims, inner, wraps } => {
            let index = s.ints(x.unwrap(), len / inner * dims.len());
            return (s.gather(table, step.dtype, exact::gather_nd_positions(&index, dims, *inner, *wraps).into_iter()), Phase::Other);
        }
        IntKernel::GatherElements { table, shape, table_strides, axis, dim, wraps } => {
            let at = exact::gather_elements_positions(&s.ints(x.unwrap(), len), shape, table_strides, *axis, *dim, *wraps);
            return (s.gather(table, step.dtype, at.into_iter()), Phase::Other);
        }
    };
    (Tensor::I8(y8), phase)
}

/// Concat's output: `outer` rounds of each part's next block (`blocks[i]` values of part i).
fn interleave(parts: Vec<Tensor>, outer: usize, blocks: &[usize]) -> Tensor {
    macro_rules! join {
        ($variant:ident) => {{
            let mut out = Vec::with_capacity(outer * blocks.iter().sum::<usize>());
            for o in 0..outer {
                for (part, &block) in parts.iter().zip(blocks) {
                    let Tensor::$variant(v) = part else { unreachable!("the parts of a concat share a type") };
                    out.extend_from_slice(&v[o * block..(o + 1) * block]);
                }
            }
            Tensor::$variant(out)
        }};
    }
    match parts.first() {
        Some(Tensor::I8(_)) => join!(I8),
        Some(Tensor::U8(_)) => join!(U8),
        Some(Tensor::I32(_)) => join!(I32),
        Some(Tensor::I64(_)) => join!(I64),
        _ => join!(F32),
    }
}

/// A QLinear binary kernel on the step's two quantised operands, broadcast.
fn qlinear_binary(step: &IntStep, s: &State, f: impl Fn(i32, i32) -> i32) -> Tensor {
    let (a, b) = (&step.operands[0].values, &step.operands[1].values);
    let mut q = vec![0i32; step.shape.iter().product()];
    for_each_broadcast(step.shape, &step.operands, |i, at| q[i] = f(s.int(a, at[0]) as i32, s.int(b, at[1]) as i32));
    integers(step.dtype, q.into_iter())
}

/// Quantised values (int8 or uint8, as `dtype` says) from i32s already in range.
fn integers(dtype: DType, values: impl Iterator<Item = i32>) -> Tensor {
    match dtype {
        DType::U8 => Tensor::U8(values.map(|v| v as u8).collect()),
        _ => Tensor::I8(values.map(|v| v as i8).collect()),
    }
}

impl<'a> State<'a> {
    /// A quantised operand's values as i16 (the integer GEMM's input).
    fn narrow(&self, v: &Values<'a>) -> Vec<i16> {
        match v {
            Values::Slot(s) => match &self.slots[*s] {
                Tensor::U8(x) => x.iter().map(|&q| q as i16).collect(),
                Tensor::I8(x) => x.iter().map(|&q| q as i16).collect(),
                _ => panic!("slot {s}: not quantised values"),
            },
            Values::U8(x) => x.iter().map(|&q| q as i16).collect(),
            Values::I8(x) => x.iter().map(|&q| q as i16).collect(),
            _ => panic!("quantised values were expected"),
        }
    }

    /// f(i, value i) over `len` values of an 8-bit or int32 operand (each type's own loop: the
    /// weights of a float op are dequantised this way every forward pass).
    fn quantised(&self, v: &Values<'a>, len: usize, f: impl Fn(usize, i32) -> f32) -> Vec<f32> {
        let slot = match v { Values::Slot(s) => Some(&self.slots[*s]), _ => None };
        let each = |x: &[i8]| x[..len].iter().enumerate().map(|(i, &q)| f(i, q as i32)).collect();
        let each_u8 = |x: &[u8]| x[..len].iter().enumerate().map(|(i, &q)| f(i, q as i32)).collect();
        match (v, slot) {
            (Values::I8(x), _) => each(x),
            (_, Some(Tensor::I8(x))) => each(x),
            (Values::U8(x), _) => each_u8(x),
            (_, Some(Tensor::U8(x))) => each_u8(x),
            _ => (0..len).map(|i| f(i, self.int(v, i) as i32)).collect(),
        }
    }

    /// An f32 operand as a slice (a slot's, or model.bin's).
    fn floats<'s>(&'s self, o: &'s IntOperand<'a>) -> &'s [f32] {
        self.f32s(&o.values)
    }
}

/// One float op of a QDQ program, in onnxruntime's float kernels.
fn float_op(op: &FloatOp, step: &IntStep, s: &State) -> (Tensor, Phase) {
    let len: usize = step.shape.iter().product();
    let ops = &step.operands;
    let mut y = vec![0.0f32; len];
    match op {
        FloatOp::Elementwise(e) => {
            let a = s.floats(&ops[0]);
            let b = ops.get(1).map(|o| (s.floats(o), o.strides));
            generic::elementwise(*e, a, ops[0].strides, b, step.shape, len, &mut y);
        }
        FloatOp::Reduce { op, shape, axes, eigen_rows } => {
            let kept: [usize; 4] = core::array::from_fn(|a| if axes[a] { 1 } else { shape[a] });
            generic::reduce(*op, s.floats(&ops[0]), *shape, *axes, *eigen_rows, kept, &mut y);
        }
        FloatOp::Softmax { floats, row } => {
            y.copy_from_slice(&s.floats(&ops[0])[..len]);
            y.chunks_exact_mut(*row).for_each(|r| softmax(r, *floats));
        }
        FloatOp::LayerNorm { width, eps } => {
            let (x, gamma, beta) = (s.floats(&ops[0]), s.floats(&ops[1]), s.floats(&ops[2]));
            for (xr, yr) in x[..len].chunks_exact(*width).zip(y.chunks_exact_mut(*width)) {
                layer_norm_row(xr, gamma, beta, *eps, yr);
            }
        }
        FloatOp::MatMul { batch, m, k, n, b_batched } => {
            let (a, b) = (s.floats(&ops[0]), s.floats(&ops[1]));
            for bi in 0..*batch {
                let bm = &b[if *b_batched { bi * k * n } else { 0 }..];
                for r in 0..*m {
                    let (row, out) = (&a[(bi * m + r) * k..(bi * m + r + 1) * k], &mut y[(bi * m + r) * n..(bi * m + r + 1) * n]);
                    if *m == 1 {
                        m1_columns(row, bm, *n, *n, out);
                    } else {
                        sgemm_columns(row, bm, *n, *n, stride_k(*n, *k, false), 1.0, out);
                    }
                }
            }
            return (Tensor::F32(y), Phase::Matmul);
        }
        FloatOp::Clip { lower, upper } => {
            let x = s.floats(&ops[0]);
            let mut next = 1;
            let mut bound = |given: bool| given.then(|| { next += 1; s.floats(&ops[next - 1])[0] });
            let (lo, hi) = (bound(*lower), bound(*upper));
            for (o, &v) in y.iter_mut().zip(x) {
                let v = lo.map_or(v, |lo| if v < lo { lo } else { v });
                *o = hi.map_or(v, |hi| if hi < v { hi } else { v });
            }
        }
        FloatOp::Pow { cube } => {
            for (o, &v) in y.iter_mut().zip(s.floats(&ops[0])) {
                *o = pow_by_products(v, *cube);
            }
        }
        FloatOp::Predicate(p) => {
            let a = &ops[0].values;
            let mut flags = vec![0i8; len];
            for_each_broadcast(step.shape, ops, |i, at| {
                let x = s.wide(a, at[0]);
                let b = || s.wide(&ops[1].values, at[1]);
                flags[i] = match p {
                    Predicate::And => x != 0.0 && b() != 0.0,
                    Predicate::Or => x != 0.0 || b() != 0.0,
                    Predicate::Not => x == 0.0,
                    Predicate::IsNan => x.is_nan(),
                } as i8;
            });
            return (Tensor::I8(flags), Phase::Other);
        }
    }
    (Tensor::F32(y), Phase::Other)
}

/// One window, whole: the output rows ([live, WIDTH] for a token output, [1, WIDTH] pooled) and
/// the rows computed (SEQ).
pub fn forward(model: &Model, ids: &[u32], types: &[u32], mask: &[i32], live: usize, profile: &mut Profile) -> (Vec<f32>, usize) {
    let mut s = State { slots: (0..INTEGER_SLOTS).map(|_| Tensor::I8(Vec::new())).collect(), _model: Default::default() };
    s.slots[IDS_SLOT] = Tensor::I32(ids.iter().map(|&v| v as i32).collect());
    s.slots[MASK_SLOT] = Tensor::I32(mask.to_vec());
    s.slots[TYPES_SLOT] = Tensor::I32(types.iter().map(|&v| v as i32).collect());
    for step in &model.steps {
        let Step::Integer(step) = step else { unreachable!("a full-integer program has integer steps only") };
        let (out, phase) = run(step, &s);
        s.slots[step.out] = out;
        profile.lap(phase);
    }
    let Tensor::F32(mut out) = std::mem::replace(&mut s.slots[INTEGER_OUTPUT], Tensor::I8(Vec::new())) else {
        panic!("the output is float32")
    };
    out.truncate(if OUTPUT_TOKENS { live } else { 1 } * WIDTH);
    (out, SEQ)
}
