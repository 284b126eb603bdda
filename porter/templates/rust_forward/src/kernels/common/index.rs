//! Exact integer work both runtimes compute alike (porter.reference.typed): the index arithmetic a
//! graph computes from its inputs (RoBERTa's positions from the ids: comparisons, casts, running
//! sums, sums and products; the buffered token types read at them), on int32 or int64 values held
//! as i64 here. Integer work is exact, so any order gives the same values; int32 and int64 sums and
//! products wrap as the runtimes' C++ does on x86 (`narrow` takes an int32 result's low bits).

#[derive(Clone, Copy, Debug)]
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

#[derive(Clone, Copy, Debug)]
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

/// Running sums along the middle axis of [outer, n, inner] values (exclusive: the sum before each
/// value; reverse: from the end), wrapping.
pub fn cumsum(x: &[i64], outer: usize, n: usize, inner: usize, exclusive: bool, reverse: bool) -> Vec<i64> {
    let mut y = vec![0i64; x.len()];
    for o in 0..outer {
        for i in 0..inner {
            let mut total = 0i64;
            for step in 0..n {
                let j = if reverse { n - 1 - step } else { step };
                let at = (o * n + j) * inner + i;
                if exclusive {
                    y[at] = total;
                    total = total.wrapping_add(x[at]);
                } else {
                    total = total.wrapping_add(x[at]);
                    y[at] = total;
                }
            }
        }
    }
    y
}

/// An index into an axis of `dim` values: a negative one counts from the end where the runtime
/// does so (`wraps`: onnxruntime's gathers), and one outside the axis is refused as both runtimes
/// refuse it (the module traps).
pub fn index_in(i: i64, dim: usize, wraps: bool) -> usize {
    let j = if wraps && i < 0 { i + dim as i64 } else { i };
    assert!(j >= 0 && (j as usize) < dim, "index {i} outside an axis of {dim}");
    j as usize
}

/// The table positions a GatherND reads: index vectors of `dims.len()` values (into the table's
/// first axes, of `dims` extents), each selecting `inner` consecutive values.
pub fn gather_nd_positions(index: &[i64], dims: &[usize], inner: usize, wraps: bool) -> Vec<usize> {
    let mut at = Vec::with_capacity(index.len() / dims.len().max(1) * inner);
    for vector in index.chunks_exact(dims.len()) {
        let row = vector.iter().zip(dims).fold(0usize, |row, (&i, &d)| row * d + index_in(i, d, wraps));
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
        at.push(base + index_in(i, dim, wraps) * table_strides[axis]);
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
