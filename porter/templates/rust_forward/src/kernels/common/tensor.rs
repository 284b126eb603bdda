//! Tensor steps: one graph op each over typed tensors (porter/ir/tensor.py; their numpy meaning is
//! porter.reference.execute.tensor_step): the products, gathers, permutations, casts, comparisons,
//! selections and integer arithmetic a score term is computed from.
//!
//! Shapes have four axes (leading ones padded with 1). A step computes a box of its output: along
//! each axis the whole of it, or its first `counts[a]` positions (a token axis, in a window whose
//! padding is inert); every buffer keeps the whole tensor's row-major layout, so a box is written
//! where the whole tensor would be. Values live in the f32 slots as 32-bit words: float32 as
//! itself, int32 and bool (0 / 1) as their bits, int64 as two words (low, high). Integer work is
//! exact in i64 and wraps to the output's width (kernels/common/exact.rs: the arithmetic, casts,
//! comparisons, running sums and index checks typed programs compute too); float work is one IEEE
//! operation per value.
//!
//! An index out of its axis's range is an error of the run (the reference runtimes fail the same
//! way): a panic naming the step's kernel, never a read out of place.

use super::exact::{self, compare, Arithmetic, CastTo, Comparison, Number};
use crate::kernels::litert::batch_matmul::row_product;
use crate::kernels::litert::libm::logf;
use crate::kernels::ort::float::{eigen_log, sgemm_columns, stride_k};

/// An element type, as values are stored in a slot or read from model.bin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ElementType {
    F32,
    I32,
    I64,
    Bool,
}

impl ElementType {
    /// 32-bit words per value in a slot.
    pub fn words(self) -> usize {
        if self == ElementType::I64 { 2 } else { 1 }
    }
}

/// Where an operand's values are.
#[derive(Clone, Copy)]
pub enum Data<'a> {
    /// A buffer's slot, holding values of the operand's dtype as words.
    Slot(usize),
    /// The mask buffer: the mask input's 0 / 1 as floats, read as the operand's dtype.
    Mask,
    F32(&'a [f32]),
    /// int32 constants; int64 constants whose values fit are stored so too.
    I32(&'a [i32]),
    /// bool constants, one byte each.
    U8(&'a [u8]),
}

/// A step input: its values, the dtype the graph gives it, and its shape (four axes).
#[derive(Clone, Copy)]
pub struct TensorOperand<'a> {
    pub data: Data<'a>,
    pub dtype: ElementType,
    pub shape: [usize; 4],
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pointwise {
    /// add, sub, mul, maximum, minimum: on integers exact::arithmetic (wrapping), on floats one
    /// IEEE operation (maximum / minimum as std::max / std::min)
    Arithmetic(Arithmetic),
    /// integers: C's division, toward zero
    Div,
    Neg,
    Abs,
    Sign,
    Ceil,
    Floor,
    /// LiteRT's LOG: glibc's logf
    Log,
    /// onnxruntime's Log: Eigen's plog on each packet of four of the whole tensor, glibc's logf on
    /// its last size % 4 values
    LogOrt,
    /// to the output's dtype: float -> int truncates (x86's integer indefinite out of range)
    Cast,
    /// exact::compare, for every element type
    Compare(Comparison),
    And,
    Or,
    Not,
    /// condition ? a : b
    Where,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TensorKernel {
    /// out = a [.., m, k] . b [.., k, n] (b given as [.., n, k] when adj_b): LiteRT's BATCH_MATMUL,
    /// or MLAS's SGEMM with `alpha` (onnxruntime; never its one-row kernel: recovery refuses M = 1).
    MatMul { adj_b: bool, alpha: f32, onnxruntime: bool },
    /// out = the operand's axes permuted by `perm`, broadcast to the output's shape.
    Move { perm: [usize; 4] },
    /// out[i] = data[i with axis `axis` replaced by index[i]] (index broadcast to out).
    GatherElements { axis: usize, negative_wraps: bool },
    /// data seen as [outer, axis_len, inner], indices flat: out [outer, indices, inner].
    Gather { axis_len: usize, inner: usize, indices: usize, negative_wraps: bool },
    /// each index row of `depth` values addresses data's leading axes (`dims`, `strides`), the
    /// rest (`inner` values) copied.
    GatherNd { depth: usize, dims: [usize; 4], strides: [usize; 4], inner: usize, negative_wraps: bool },
    Pointwise(Pointwise),
    /// integers: running sums along `axis`.
    CumSum { axis: usize, exclusive: bool, reverse: bool },
    /// rows of a table [rows, width] at int indices (EMBEDDING_LOOKUP); `scaled`: int8 rows, each
    /// float(q) times its row's scale (the third operand)
    Lookup { rows: usize, width: usize, scaled: bool },
    /// float32(q - zero_point) * scale of 8-bit values
    Dequantize { scale: f32, zero_point: i32 },
}

pub struct TensorStep<'a> {
    pub kernel: TensorKernel,
    pub operands: Vec<TensorOperand<'a>>,
    pub out: usize,
    pub dtype: ElementType,
    pub shape: [usize; 4],
}

/// An operand's values with their storage resolved.
#[derive(Clone, Copy)]
enum Values<'v> {
    F32(&'v [f32]),
    I32(&'v [i32]),
    /// int64 in two words each, and bool words
    Words(&'v [f32], ElementType),
    U8(&'v [u8]),
    /// floats read as integers (the mask)
    FloatsAsInts(&'v [f32]),
}

impl<'v> Values<'v> {
    fn of(o: &TensorOperand<'v>, slots: &'v [Vec<f32>], mask: &'v [f32]) -> Values<'v> {
        match o.data {
            Data::Slot(s) => match o.dtype {
                ElementType::F32 => Values::F32(&slots[s]),
                // SAFETY: i32 and f32 have the same size and alignment; the slot holds int32 bits.
                ElementType::I32 => Values::I32(unsafe { core::slice::from_raw_parts(slots[s].as_ptr() as *const i32, slots[s].len()) }),
                dtype => Values::Words(&slots[s], dtype),
            },
            Data::Mask => if o.dtype == ElementType::F32 { Values::F32(mask) } else { Values::FloatsAsInts(mask) },
            Data::F32(v) => Values::F32(v),
            Data::I32(v) => Values::I32(v),
            Data::U8(v) => Values::U8(v),
        }
    }

    #[inline]
    fn f32(self, i: usize) -> f32 {
        match self {
            Values::F32(v) | Values::FloatsAsInts(v) => v[i],
            _ => self.int(i) as f32,
        }
    }

    #[inline]
    fn int(self, i: usize) -> i64 {
        match self {
            Values::I32(v) => v[i] as i64,
            Values::Words(v, ElementType::I64) => (v[2 * i].to_bits() as u64 | (v[2 * i + 1].to_bits() as u64) << u32::BITS) as i64,
            Values::Words(v, _) => v[i].to_bits() as i64,
            Values::U8(v) => v[i] as i64,
            Values::F32(v) | Values::FloatsAsInts(v) => v[i] as i64,
        }
    }

    #[inline]
    fn truth(self, i: usize) -> bool {
        match self {
            Values::F32(v) => v[i] != 0.0,
            _ => self.int(i) != 0,
        }
    }

    /// The values as one 32-bit word each, where they are stored so (float32, int32, bool
    /// words): gathers and moves copy them as they are.
    fn one_word(self) -> Option<&'v [u32]> {
        match self {
            // SAFETY: u32 has f32's and i32's size and alignment; every bit pattern is a u32.
            Values::F32(v) | Values::Words(v, ElementType::Bool) => Some(unsafe { core::slice::from_raw_parts(v.as_ptr() as *const u32, v.len()) }),
            Values::I32(v) => Some(unsafe { core::slice::from_raw_parts(v.as_ptr() as *const u32, v.len()) }),
            _ => None,
        }
    }

    /// The raw words of value i (a copy keeps them: gathers and moves).
    #[inline]
    fn words(self, i: usize) -> (u32, u32) {
        match self {
            Values::F32(v) => (v[i].to_bits(), 0),
            Values::Words(v, ElementType::I64) => (v[2 * i].to_bits(), v[2 * i + 1].to_bits()),
            Values::Words(v, _) => (v[i].to_bits(), 0),
            Values::I32(v) => (v[i] as u32, (v[i] >> 31) as u32),
            Values::U8(v) => (v[i] as u32, 0),
            Values::FloatsAsInts(v) => { let x = v[i] as i64; (x as u32, (x >> u32::BITS) as u32) }
        }
    }
}

/// The output: values of `dtype` written into a slot's words.
struct Out<'o> {
    words: &'o mut [f32],
    dtype: ElementType,
}

impl Out<'_> {
    #[inline]
    fn f32(&mut self, i: usize, v: f32) {
        self.words[i] = v;
    }

    #[inline]
    fn int(&mut self, i: usize, v: i64) {
        match self.dtype {
            ElementType::I64 => {
                self.words[2 * i] = f32::from_bits(v as u32);
                self.words[2 * i + 1] = f32::from_bits((v >> u32::BITS) as u32);
            }
            ElementType::F32 => self.words[i] = v as f32,
            ElementType::Bool => self.words[i] = f32::from_bits((v != 0) as u32),
            ElementType::I32 => self.words[i] = f32::from_bits(v as i32 as u32),
        }
    }

    #[inline]
    fn copy(&mut self, i: usize, (low, high): (u32, u32)) {
        if self.dtype == ElementType::I64 {
            self.words[2 * i] = f32::from_bits(low);
            self.words[2 * i + 1] = f32::from_bits(high);
        } else {
            self.words[i] = f32::from_bits(low);
        }
    }
}

/// The strides of a row-major tensor of `shape`.
pub fn natural(shape: [usize; 4]) -> [usize; 4] {
    [shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1]
}

/// An operand's strides along the output's axes: its own, 0 where it is broadcast.
fn broadcast(shape: [usize; 4], out: [usize; 4]) -> [usize; 4] {
    let n = natural(shape);
    core::array::from_fn(|a| if shape[a] == 1 && out[a] != 1 { 0 } else { n[a] })
}

/// Every position of the box `counts` in row-major order: its index along each axis.
fn positions(counts: [usize; 4]) -> impl Iterator<Item = [usize; 4]> {
    (0..counts[0]).flat_map(move |i0| {
        (0..counts[1]).flat_map(move |i1| (0..counts[2]).flat_map(move |i2| (0..counts[3]).map(move |i3| [i0, i1, i2, i3])))
    })
}

#[inline]
fn at(index: [usize; 4], strides: [usize; 4]) -> usize {
    index[0] * strides[0] + index[1] * strides[1] + index[2] * strides[2] + index[3] * strides[3]
}

/// Runs the step over the box `counts` of its output (the whole shape, or fewer positions along
/// token axes); `slots` are the other buffers, `mask` the mask buffer's floats.
pub fn run(step: &TensorStep, counts: [usize; 4], slots: &[Vec<f32>], mask: &[f32], out: &mut [f32]) {
    let values: Vec<Values> = step.operands.iter().map(|o| Values::of(o, slots, mask)).collect();
    let mut y = Out { words: out, dtype: step.dtype };
    match step.kernel {
        TensorKernel::MatMul { adj_b, alpha, onnxruntime } => matmul(step, &values, adj_b, alpha, onnxruntime, counts, y.words),
        TensorKernel::Move { perm } => moved(step, values[0], perm, counts, &mut y),
        TensorKernel::GatherElements { axis, negative_wraps } => gather_elements(step, &values, axis, negative_wraps, counts, &mut y),
        TensorKernel::Gather { axis_len, inner, indices, negative_wraps } => {
            let out_strides = natural(step.shape);
            for index in positions(counts) {
                let flat = at(index, out_strides);
                let (o, j, i) = (flat / (indices * inner), flat / inner % indices, flat % inner);
                let row = exact::index_in(values[1].int(j), axis_len, negative_wraps, "gather");
                y.copy(flat, values[0].words((o * axis_len + row) * inner + i));
            }
        }
        TensorKernel::GatherNd { depth, dims, strides, inner, negative_wraps } => {
            let out_strides = natural(step.shape);
            for index in positions(counts) {
                let flat = at(index, out_strides);
                let (p, i) = (flat / inner, flat % inner);
                let base: usize = (0..depth)
                    .map(|c| exact::index_in(values[1].int(p * depth + c), dims[c], negative_wraps, "gather_nd") * strides[c])
                    .sum();
                y.copy(flat, values[0].words(base + i));
            }
        }
        TensorKernel::Lookup { rows, width, scaled } => {
            let out_strides = natural(step.shape);
            for index in positions(counts) {
                let flat = at(index, out_strides);
                let row = exact::index_in(values[1].int(flat / width), rows, false, "lookup");
                let at_row = row * width + flat % width;
                if scaled {
                    y.f32(flat, values[0].int(at_row) as f32 * values[2].f32(row));
                } else {
                    y.copy(flat, values[0].words(at_row));
                }
            }
        }
        TensorKernel::Dequantize { scale, zero_point } => {
            let (x, out_strides) = (broadcast(step.operands[0].shape, step.shape), natural(step.shape));
            for index in positions(counts) {
                y.f32(at(index, out_strides), (values[0].int(at(index, x)) - zero_point as i64) as f32 * scale);
            }
        }
        TensorKernel::Pointwise(op) => pointwise(step, &values, op, counts, &mut y),
        TensorKernel::CumSum { axis, exclusive, reverse } => cumsum(step, values[0], axis, exclusive, reverse, counts, &mut y),
    }
}

/// Calls f with the index along the first three axes of every run of the box along the last.
#[inline(always)]
fn runs(counts: [usize; 4], mut f: impl FnMut(usize, usize, usize)) {
    for i0 in 0..counts[0] {
        for i1 in 0..counts[1] {
            for i2 in 0..counts[2] {
                f(i0, i1, i2);
            }
        }
    }
}

#[inline(always)]
fn base(i0: usize, i1: usize, i2: usize, s: [usize; 4]) -> usize {
    i0 * s[0] + i1 * s[1] + i2 * s[2]
}

/// The output as one 32-bit word each (every dtype but int64).
fn out_words<'y>(y: &'y mut Out) -> Option<&'y mut [u32]> {
    // SAFETY: u32 has f32's size and alignment.
    (y.dtype != ElementType::I64).then(|| unsafe { core::slice::from_raw_parts_mut(y.words.as_mut_ptr() as *mut u32, y.words.len()) })
}

fn moved(step: &TensorStep, x: Values, perm: [usize; 4], counts: [usize; 4], y: &mut Out) {
    // output axis a reads the operand's axis perm[a], or nothing (stride 0) where it broadcasts
    let (shape, own) = (step.operands[0].shape, natural(step.operands[0].shape));
    let strides: [usize; 4] = core::array::from_fn(|a| if shape[perm[a]] == 1 { 0 } else { own[perm[a]] });
    let out_strides = natural(step.shape);
    if let (Some(x), Some(out)) = (x.one_word(), out_words(y)) {
        return runs(counts, |i0, i1, i2| {
            let (from, to) = (base(i0, i1, i2, strides), base(i0, i1, i2, out_strides));
            for j in 0..counts[3] {
                out[to + j] = x[from + j * strides[3]];
            }
        });
    }
    for index in positions(counts) {
        y.copy(at(index, out_strides), x.words(at(index, strides)));
    }
}

fn gather_elements(step: &TensorStep, values: &[Values], axis: usize, negative_wraps: bool, counts: [usize; 4], y: &mut Out) {
    let data = natural(step.operands[0].shape);
    let index_strides = broadcast(step.operands[1].shape, step.shape);
    let len = step.operands[0].shape[axis];
    let out_strides = natural(step.shape);
    if let (Some(x), Values::I32(index), Some(out)) = (values[0].one_word(), values[1], out_words(y)) {
        // the common case: float32 data, constant int32 indices
        return runs(counts, |i0, i1, i2| {
            let (from, to) = (base(i0, i1, i2, index_strides), base(i0, i1, i2, out_strides));
            // the run's offset in data without its coordinate along `axis` (the index gives that)
            let row = base(i0, i1, i2, data) - if axis < 3 { [i0, i1, i2][axis] * data[axis] } else { 0 };
            let along = if axis < 3 { data[3] } else { 0 };
            for j in 0..counts[3] {
                let at_axis = exact::index_in(index[from + j * index_strides[3]] as i64, len, negative_wraps, "gather_elements");
                out[to + j] = x[row + at_axis * data[axis] + j * along];
            }
        });
    }
    for index in positions(counts) {
        let mut source = index;
        source[axis] = exact::index_in(values[1].int(at(index, index_strides)), len, negative_wraps, "gather_elements");
        y.copy(at(index, out_strides), values[0].words(at(source, data)));
    }
}

fn pointwise(step: &TensorStep, values: &[Values], op: Pointwise, counts: [usize; 4], y: &mut Out) {
    let strides: Vec<[usize; 4]> = step.operands.iter().map(|o| broadcast(o.shape, step.shape)).collect();
    let out_strides = natural(step.shape);
    // the inputs' type decides the arithmetic (a float operand makes it float, as in numpy)
    let float = step.operands.iter().take(if op == Pointwise::Where { 0 } else { 2 }).any(|o| o.dtype == ElementType::F32);
    if float && y.dtype == ElementType::F32 && float_pointwise(op, values, &strides, out_strides, counts, y.words) {
        return;
    }
    // the values before the whole tensor's last size % 4 (onnxruntime's Log takes them in packets)
    let packets = step.shape.iter().product::<usize>() / 4 * 4;
    for index in positions(counts) {
        let o = at(index, out_strides);
        let i: [usize; 3] = core::array::from_fn(|n| strides.get(n).map_or(0, |s| at(index, *s)));
        match op {
            Pointwise::Where => {
                let chosen = if values[0].truth(i[0]) { (values[1], i[1]) } else { (values[2], i[2]) };
                match y.dtype {
                    ElementType::F32 => y.f32(o, chosen.0.f32(chosen.1)),
                    _ => y.int(o, chosen.0.int(chosen.1)),
                }
            }
            Pointwise::And | Pointwise::Or => {
                let (a, b) = (values[0].truth(i[0]), values[1].truth(i[1]));
                y.int(o, (if op == Pointwise::And { a && b } else { a || b }) as i64);
            }
            Pointwise::Not => y.int(o, !values[0].truth(i[0]) as i64),
            Pointwise::Cast => cast(values[0], i[0], step.operands[0].dtype, o, y),
            _ if float => float_op(op, values, i, o, packets, y),
            _ => int_op(op, values, i, o, y),
        }
    }
}

/// Float32 arithmetic of float32 operands over the box, a run at a time (the values float_op
/// computes one by one): whether the op is one of these.
fn float_pointwise(op: Pointwise, values: &[Values], strides: &[[usize; 4]], out_strides: [usize; 4], counts: [usize; 4],
                   out: &mut [f32]) -> bool {
    let Values::F32(a) = values[0] else { return false };
    let sa = strides[0];
    let unary = |f: fn(f32) -> f32, out: &mut [f32]| runs(counts, |i0, i1, i2| {
        let (from, to) = (base(i0, i1, i2, sa), base(i0, i1, i2, out_strides));
        for j in 0..counts[3] {
            out[to + j] = f(a[from + j * sa[3]]);
        }
    });
    let one: Option<fn(f32) -> f32> = match op {
        Pointwise::Neg => Some(|x| -x),
        Pointwise::Abs => Some(f32::abs),
        _ => None,
    };
    if let Some(f) = one {
        unary(f, out);
        return true;
    }
    let (Some(&Values::F32(b)), Some(&sb)) = (values.get(1), strides.get(1)) else { return false };
    let binary = |f: fn(f32, f32) -> f32, out: &mut [f32]| runs(counts, |i0, i1, i2| {
        let (from_a, from_b, to) = (base(i0, i1, i2, sa), base(i0, i1, i2, sb), base(i0, i1, i2, out_strides));
        for j in 0..counts[3] {
            out[to + j] = f(a[from_a + j * sa[3]], b[from_b + j * sb[3]]);
        }
    });
    match op {
        Pointwise::Arithmetic(Arithmetic::Add) => binary(|x, y| x + y, out),
        Pointwise::Arithmetic(Arithmetic::Sub) => binary(|x, y| x - y, out),
        Pointwise::Arithmetic(Arithmetic::Mul) => binary(|x, y| x * y, out),
        Pointwise::Div => binary(|x, y| x / y, out),
        _ => return false,
    }
    true
}

fn float_op(op: Pointwise, values: &[Values], i: [usize; 3], o: usize, packets: usize, y: &mut Out) {
    let a = values[0].f32(i[0]);
    let b = || values[1].f32(i[1]);
    match op {
        Pointwise::Compare(how) => y.int(o, compare(how, a, b()) as i64),
        Pointwise::Arithmetic(Arithmetic::Add) => y.f32(o, a + b()),
        Pointwise::Arithmetic(Arithmetic::Sub) => y.f32(o, a - b()),
        Pointwise::Arithmetic(Arithmetic::Mul) => y.f32(o, a * b()),
        Pointwise::Div => y.f32(o, a / b()),
        // std::max / std::min: a unless b is strictly beyond it
        Pointwise::Arithmetic(Arithmetic::Maximum) => y.f32(o, if a < b() { b() } else { a }),
        Pointwise::Arithmetic(Arithmetic::Minimum) => y.f32(o, if b() < a { b() } else { a }),
        Pointwise::Neg => y.f32(o, -a),
        Pointwise::Abs => y.f32(o, a.abs()),
        // (0 < x) - (x < 0): a NaN gives 0
        Pointwise::Sign => y.f32(o, (0.0 < a) as i32 as f32 - (a < 0.0) as i32 as f32),
        Pointwise::Ceil => y.f32(o, a.ceil()),
        Pointwise::Floor => y.f32(o, a.floor()),
        Pointwise::Log => y.f32(o, logf(a)),
        Pointwise::LogOrt => y.f32(o, if o < packets { eigen_log(a) } else { logf(a) }),
        _ => unreachable!("{op:?} is not float arithmetic"),
    }
}

fn int_op(op: Pointwise, values: &[Values], i: [usize; 3], o: usize, y: &mut Out) {
    let a = values[0].int(i[0]);
    let b = || values[1].int(i[1]);
    let v = match op {
        Pointwise::Compare(how) => compare(how, a, b()) as i64,
        Pointwise::Arithmetic(how) => exact::arithmetic(how, a, b()),
        Pointwise::Div => {
            let d = b();
            if d == 0 {
                panic!("div: integer division by zero");
            }
            a.wrapping_div(d)
        }
        Pointwise::Neg => a.wrapping_neg(),
        Pointwise::Abs => a.wrapping_abs(),
        Pointwise::Sign => a.signum(),
        Pointwise::Ceil | Pointwise::Floor => a,
        _ => unreachable!("{op:?} is not integer arithmetic"),
    };
    y.int(o, v);
}

/// A value converted to the output's dtype (exact::cast: float -> int truncates, a NaN or an
/// out-of-range value giving x86's integer indefinite).
fn cast(x: Values, i: usize, from: ElementType, o: usize, y: &mut Out) {
    let v = if from == ElementType::F32 { Number::Float(x.f32(i)) } else { Number::Int(x.int(i)) };
    let to = match y.dtype {
        ElementType::F32 => CastTo::Float,
        ElementType::Bool => CastTo::Bool,
        ElementType::I32 => CastTo::Int32,
        ElementType::I64 => CastTo::Int64,
    };
    match exact::cast(v, to) {
        Number::Float(v) => y.f32(o, v),
        Number::Int(v) => y.int(o, v),
    }
}

/// Running sums of integers along `axis` (exact in any order), within the box (exact::running_sums
/// over each line of it; from the axis's end when `reverse`).
fn cumsum(step: &TensorStep, x: Values, axis: usize, exclusive: bool, reverse: bool, counts: [usize; 4], y: &mut Out) {
    let strides = natural(step.shape);
    let mut lines = counts;
    lines[axis] = 1;
    exact::running_sums(positions(lines).map(|start| at(start, strides)), step.shape[axis], counts[axis], strides[axis],
                        exclusive, reverse, |i| x.int(i), |i, v| y.int(i, v));
}

/// The product over the box: rows of A and columns of B of each batch; each output in the
/// reference's order (LiteRT's k-order chain, or MLAS's SGEMM blocks for the whole product's
/// shape, whatever part of it the box computes).
fn matmul(step: &TensorStep, values: &[Values], adj_b: bool, alpha: f32, onnxruntime: bool, counts: [usize; 4], out: &mut [f32]) {
    let (a_shape, b_shape, shape) = (step.operands[0].shape, step.operands[1].shape, step.shape);
    let (Values::F32(a), Values::F32(b)) = (values[0], values[1]) else {
        panic!("matmul: its operands are float32");
    };
    let (m, k, n) = (shape[2], a_shape[3], shape[3]);
    let a_batch = broadcast(a_shape, [shape[0], shape[1], m, k]);
    let b_batch = broadcast(b_shape, [shape[0], shape[1], b_shape[2], b_shape[3]]);
    let mut b_kn = vec![0.0f32; k * n];
    let block = stride_k(n, k, false);
    for i0 in 0..counts[0] {
        for i1 in 0..counts[1] {
            let b_base = i0 * b_batch[0] + i1 * b_batch[1];
            // B as [k][n] rows: transposed once per batch where the graph gives it as [n][k]
            let (bk, ldb) = if adj_b {
                for c in 0..n {
                    for d in 0..k {
                        b_kn[d * n + c] = b[b_base + c * k + d];
                    }
                }
                (&b_kn[..], n)
            } else {
                (&b[b_base..b_base + k * n], n)
            };
            for r in 0..counts[2] {
                let a_row = &a[i0 * a_batch[0] + i1 * a_batch[1] + r * k..][..k];
                let o = ((i0 * shape[1] + i1) * m + r) * n;
                let row = &mut out[o..o + counts[3]];
                if onnxruntime {
                    sgemm_columns(a_row, bk, ldb, counts[3], block, alpha, row);
                } else {
                    row_product(a_row, bk, ldb, row);
                }
            }
        }
    }
}
