//! The int8 products of FULLY_CONNECTED and BATCH_MATMUL: sum_k (a[k] - a_zp) * (b[k] - b_zp)
//! in int32, exact in any order. The simd128 kernel sign-extends eight values to i16, takes
//! the zero points off (the offsets, -255..255, fit i16) and multiplies and pair-adds them with
//! i32x4.dot_i16x8_s; `dot_scalar` is its reference.

use core::arch::wasm32::*;

use super::fixed_point::{multiply_double_rounding, multiply_ruy, saturate, Multiplier};

/// The dot product of two int8 runs of equal length, each less its zero point.
pub fn dot(a: &[i8], a_zp: i32, b: &[i8], b_zp: i32) -> i32 {
    assert_eq!(a.len(), b.len());
    let n = a.len() / 8 * 8;
    let (za, zb) = (i16x8_splat(a_zp as i16), i16x8_splat(b_zp as i16));
    let mut acc = i32x4_splat(0);
    for k in (0..n).step_by(8) {
        // SAFETY: k + 8 <= n <= len of both slices; v128_load64_zero reads 8 bytes.
        let (va, vb) = unsafe {
            (v128_load64_zero(a.as_ptr().add(k) as *const u64), v128_load64_zero(b.as_ptr().add(k) as *const u64))
        };
        let wa = i16x8_sub(i16x8_extend_low_i8x16(va), za);
        let wb = i16x8_sub(i16x8_extend_low_i8x16(vb), zb);
        acc = i32x4_add(acc, i32x4_dot_i16x8(wa, wb));
    }
    let mut total = i32x4_extract_lane::<0>(acc) + i32x4_extract_lane::<1>(acc)
        + i32x4_extract_lane::<2>(acc) + i32x4_extract_lane::<3>(acc);
    for k in n..a.len() {
        total += (a[k] as i32 - a_zp) * (b[k] as i32 - b_zp);
    }
    total
}

/// The scalar reference of `dot`.
pub fn dot_scalar(a: &[i8], a_zp: i32, b: &[i8], b_zp: i32) -> i32 {
    a.iter().zip(b).map(|(&x, &y)| (x as i32 - a_zp) * (y as i32 - b_zp)).sum()
}

/// FULLY_CONNECTED's parameters: weights [outs, k] (zero point 0), an int32 bias per output,
/// one multiplier per output channel (ruy's rounding).
pub struct FullyConnected<'a> {
    pub w: &'a [i8],
    pub bias: Option<&'a [i32]>,
    pub multipliers: &'a [i32], // [outs, 2]: m, shift
    pub outs: usize,
    pub k: usize,
    pub x_zp: i32,
    pub out_zp: i32,
}

/// x [rows, k] -> y [rows, outs]; `dot` is the product kernel (dot or dot_scalar).
pub fn fully_connected(p: &FullyConnected, x: &[i8], y: &mut [i8], dot: fn(&[i8], i32, &[i8], i32) -> i32) {
    let rows = x.len() / p.k;
    for r in 0..rows {
        let row = &x[r * p.k..(r + 1) * p.k];
        for o in 0..p.outs {
            let acc = dot(row, p.x_zp, &p.w[o * p.k..(o + 1) * p.k], 0) as i64 + p.bias.map_or(0, |b| b[o]) as i64;
            let mult = Multiplier { m: p.multipliers[2 * o], shift: p.multipliers[2 * o + 1] };
            y[r * p.outs + o] = saturate(multiply_ruy(acc, mult) as i64 + p.out_zp as i64);
        }
    }
}

/// BATCH_MATMUL's parameters: `batch` products of [rows, depth] x [depth, cols], a and b each
/// stored transposed where `adjoint` says (a as [depth, rows], b as [cols, depth]).
pub struct BatchMatmul {
    pub batch: usize,
    pub rows: usize,
    pub depth: usize,
    pub cols: usize,
    pub adjoint: (bool, bool),
    pub a_zp: i32,
    pub b_zp: i32,
    pub multiplier: Multiplier,
    pub out_zp: i32,
}

fn transposed(x: &[i8], rows: usize, cols: usize) -> Vec<i8> {
    (0..cols * rows).map(|i| x[(i % rows) * cols + i / rows]).collect()
}

pub fn batch_matmul(p: &BatchMatmul, a: &[i8], b: &[i8], y: &mut [i8], dot: fn(&[i8], i32, &[i8], i32) -> i32) {
    let (m, k, n) = (p.rows, p.depth, p.cols);
    for i in 0..p.batch {
        let a = &a[i * m * k..(i + 1) * m * k];
        let b = &b[i * k * n..(i + 1) * k * n];
        // the dot runs along k: a's rows and b's columns contiguous
        let a_rows = if p.adjoint.0 { transposed(a, k, m) } else { a.to_vec() };
        let b_cols = if p.adjoint.1 { b.to_vec() } else { transposed(b, k, n) };
        for r in 0..m {
            for c in 0..n {
                let acc = dot(&a_rows[r * k..(r + 1) * k], p.a_zp, &b_cols[c * k..(c + 1) * k], p.b_zp);
                y[i * m * n + r * n + c] = saturate(multiply_double_rounding(acc as i64, p.multiplier) as i64 + p.out_zp as i64);
            }
        }
    }
}
