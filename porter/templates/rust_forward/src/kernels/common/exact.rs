//! Exact element work, one definition for both kinds of step that compute it: typed programs'
//! index arithmetic (RoBERTa's positions from the ids; the buffered token types read at them) and
//! tensor steps (the integer arithmetic, casts and running sums of a score term). Comparisons,
//! int32 / int64 arithmetic, casts, running sums and index checks, on integers held as i64 and
//! floats compared widened (porter.reference.exact is their numpy meaning). Integer work is exact,
//! so any order gives the same values; int32 and int64 sums and products wrap as the runtimes' C++
//! does on x86 (`narrow` takes an int32 result's low bits).

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Comparison {
    Equal,
    NotEqual,
    Less,
    LessEqual,
    Greater,
    GreaterEqual,
}

/// One comparison of two values of one type (integers as i64, floats widened to f64: exact).
pub fn compare<T: PartialOrd>(how: Comparison, a: T, b: T) -> bool {
    match how {
        Comparison::Equal => a == b,
        Comparison::NotEqual => a != b,
        Comparison::Less => a < b,
        Comparison::LessEqual => a <= b,
        Comparison::Greater => a > b,
        Comparison::GreaterEqual => a >= b,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arithmetic {
    Add,
    Sub,
    Mul,
    Maximum,
    Minimum,
}

/// int64 arithmetic, wrapping; an int32 result is its low 32 bits (`narrow`), which is the wrapped
/// int32 result.
pub fn arithmetic(how: Arithmetic, a: i64, b: i64) -> i64 {
    match how {
        Arithmetic::Add => a.wrapping_add(b),
        Arithmetic::Sub => a.wrapping_sub(b),
        Arithmetic::Mul => a.wrapping_mul(b),
        Arithmetic::Maximum => a.max(b),
        Arithmetic::Minimum => a.min(b),
    }
}

/// An integer result in its type (`bits` 64, 32, 8 signed or not, 1: bool): its low bits, as
/// C++'s conversions take them (bool: != 0).
pub fn narrow(v: i64, bits: u32, signed: bool) -> i64 {
    const I64_BITS: u32 = i64::BITS;
    const I32_BITS: u32 = i32::BITS;
    match (bits, signed) {
        (I64_BITS, _) => v,
        (I32_BITS, _) => v as i32 as i64,
        (8, true) => v as i8 as i64,
        (8, false) => v as u8 as i64,
        _ => (v != 0) as i64,
    }
}

/// One value of any element type, exactly (integers of every width as i64).
#[derive(Clone, Copy, Debug)]
pub enum Number {
    Int(i64),
    Float(f32),
}

impl Number {
    /// The value widened to f64 (exact for every integer a comparison meets, and every float32).
    pub fn wide(self) -> f64 {
        match self {
            Number::Int(x) => x as f64,
            Number::Float(x) => x as f64,
        }
    }
}

/// The type a cast converts to, as far as the conversion depends on it (a narrower integer type
/// takes the low bits of the int32 result: `narrow`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CastTo {
    Float,
    Bool,
    Int32,
    Int64,
}

/// One value cast as both runtimes' static_cast does: a float to an integer by `float_to_int`, to
/// bool != 0; an integer to float32 rounded to nearest even; an integer to an integer kept (its
/// type's `narrow` takes its low bits).
pub fn cast(v: Number, to: CastTo) -> Number {
    match (v, to) {
        (Number::Float(x), CastTo::Float) => Number::Float(x),
        (Number::Float(x), CastTo::Bool) => Number::Int((x != 0.0) as i64),
        (Number::Float(x), _) => Number::Int(float_to_int(x, to == CastTo::Int64)),
        (Number::Int(x), CastTo::Float) => Number::Float(x as f32),
        (Number::Int(x), _) => Number::Int(x),
    }
}

/// A float cast to an integer as x86's cvttss2si does (both runtimes' static_cast): truncated
/// toward zero; a NaN or a value outside int32 (int64 when `wide`) gives that type's minimum.
pub fn float_to_int(v: f32, wide: bool) -> i64 {
    let (lo, hi) = if wide { (i64::MIN as f64, -(i64::MIN as f64)) } else { (i32::MIN as f64, -(i32::MIN as f64)) };
    let v = v as f64;
    if v.is_nan() || v <= lo - 1.0 || v >= hi {
        if wide { i64::MIN } else { i32::MIN as i64 }
    } else {
        v.trunc() as i64
    }
}

/// Running sums along one axis, wrapping: for each line along it (`lines`: each line's first
/// position, `stride`: the axis's step, `n`: its extent), the first `len` values summed (exclusive:
/// the sum before each value; reverse: from the end of the axis), each read and written where
/// `read` and `write` keep them.
pub fn running_sums(lines: impl Iterator<Item = usize>, n: usize, len: usize, stride: usize, exclusive: bool, reverse: bool,
                    read: impl Fn(usize) -> i64, mut write: impl FnMut(usize, i64)) {
    for first in lines {
        let mut total = 0i64;
        for step in 0..len {
            let at = first + (if reverse { n - 1 - step } else { step }) * stride;
            let v = read(at);
            if exclusive {
                write(at, total);
                total = total.wrapping_add(v);
            } else {
                total = total.wrapping_add(v);
                write(at, total);
            }
        }
    }
}

/// Running sums along the middle axis of [outer, n, inner] values (`running_sums`).
pub fn cumsum(x: &[i64], outer: usize, n: usize, inner: usize, exclusive: bool, reverse: bool) -> Vec<i64> {
    let mut y = vec![0i64; x.len()];
    let lines = (0..outer).flat_map(|o| (0..inner).map(move |i| o * n * inner + i));
    running_sums(lines, n, n, inner, exclusive, reverse, |at| x[at], |at, v| y[at] = v);
    y
}

/// An index as a position along an axis of `dim` values: a negative one counts from the end where
/// the runtime does so (`wraps`: onnxruntime's gathers), and one outside the axis stops the run as
/// both runtimes refuse it (a panic naming the `kernel`: the module traps, nothing is read out of
/// place).
#[inline]
pub fn index_in(i: i64, dim: usize, wraps: bool, kernel: &str) -> usize {
    let j = if wraps && i < 0 { i + dim as i64 } else { i };
    if j < 0 || j >= dim as i64 {
        panic!("{kernel}: index {i} out of range for an axis of {dim}");
    }
    j as usize
}

/// The table positions a GatherND reads: index vectors of `dims.len()` values (into the table's
/// first axes, of `dims` extents), each selecting `inner` consecutive values.
pub fn gather_nd_positions(index: &[i64], dims: &[usize], inner: usize, wraps: bool) -> Vec<usize> {
    let mut at = Vec::with_capacity(index.len() / dims.len().max(1) * inner);
    for vector in index.chunks_exact(dims.len()) {
        let row = vector.iter().zip(dims).fold(0usize, |row, (&i, &d)| row * d + index_in(i, d, wraps, "gather_nd"));
        at.extend(row * inner..(row + 1) * inner);
    }
    at
}

/// The table positions a GatherElements reads: output value p (of `shape`, the index's) reads the
/// table at p's coordinates with the one along `axis` replaced by index[p] (`table_strides`: the
/// table's, `dim`: its extent along `axis`).
pub fn gather_elements_positions(index: &[i64], shape: &[usize], table_strides: &[usize], axis: usize, dim: usize,
                                 wraps: bool) -> Vec<usize> {
    let mut coords = vec![0usize; shape.len()];
    let mut at = Vec::with_capacity(index.len());
    for &i in index {
        let base: usize = (0..shape.len()).filter(|&a| a != axis).map(|a| coords[a] * table_strides[a]).sum();
        at.push(base + index_in(i, dim, wraps, "gather_elements") * table_strides[axis]);
        for a in (0..shape.len()).rev() {  // the next output position, last axis fastest
            coords[a] += 1;
            if coords[a] < shape[a] {
                break;
            }
            coords[a] = 0;
        }
    }
    at
}
