//! Per-row int8 quantisation of activations, as TFLite's hybrid FULLY_CONNECTED does it on the
//! fly (porter/reference/quant.py). Symmetric: s = max|x| / 127, q = round(x * (127 / max|x|)) clamped to
//! [-127, 127]. Asymmetric: s = (max(0, x) - min(0, x)) / 255, a nudged zero point zp,
//! q = round(x * (1 / s)) + zp clamped to [-128, 127]. round() is half away from zero; a row of
//! zeros gives q = 0, s = 1, zp = 0.
//!
//! The kernels store q - zp as i16 (in [-255, 255]): the GEMM then needs no zero-point
//! correction, and sum((q - zp) * w) is exactly the reference's sum(q * w) - zp * sum(w).
//!
//! NaN: both versions skip a NaN when looking for the range (a comparison with NaN is false)
//! and quantise a NaN to 0 before the zero point is added.

use core::arch::wasm32::*;

use super::mathfn::small_integer_x4;

/// One quantised row's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RowParams {
    pub scale: f32,
    pub zero_point: i32,
}

const FLAT_ROW: RowParams = RowParams { scale: 1.0, zero_point: 0 };

// ---- shared scalar pieces ---------------------------------------------------------------------

/// C's roundf: trunc(v) plus one step away from zero when the dropped fraction is >= 1/2.
/// v - trunc(v) is exact in f32 (it only drops integer bits), so the comparison is never fooled.
pub fn round_half_away(v: f32) -> f32 {
    let t = v.trunc();
    if (v - t).abs() >= 0.5 {
        t + 1.0f32.copysign(v)
    } else {
        t
    }
}

/// Clamp to [lo, hi] and convert; NaN fails both comparisons and converts to 0.
fn clamp_to_int(v: f32, lo: f32, hi: f32) -> i32 {
    if v > hi {
        hi as i32
    } else if v < lo {
        lo as i32
    } else {
        v as i32
    }
}

fn symmetric_range_scalar(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    for &v in x {
        let a = v.abs();
        if a > amax {
            amax = a;
        }
    }
    amax
}

fn asymmetric_range_scalar(x: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = (0.0f32, 0.0f32);
    for &v in x {
        if v < lo {
            lo = v;
        }
        if v > hi {
            hi = v;
        }
    }
    (lo, hi)
}

/// Scale and nudged zero point from the row's range (TFLite's asymmetric scheme, in f32).
fn asymmetric_params(rmin: f32, rmax: f32) -> RowParams {
    let scale = (rmax - rmin) / 255.0;
    let zp_from_min = -128.0 - rmin / scale;
    let zp_from_max = 127.0 - rmax / scale;
    let err_min = 128.0 + (rmin / scale).abs();
    let err_max = 127.0 + (rmax / scale).abs();
    let zp_real = if err_min < err_max { zp_from_min } else { zp_from_max };
    let zero_point = if zp_real <= -128.0 {
        -128
    } else if zp_real >= 127.0 {
        127
    } else {
        round_half_away(zp_real) as i32
    };
    RowParams { scale, zero_point }
}

// ---- scalar references ----------------------------------------------------------------------

pub fn quantize_row_symmetric_scalar(x: &[f32], q: &mut [i16]) -> RowParams {
    let amax = symmetric_range_scalar(x);
    if amax == 0.0 {
        q.fill(0);
        return FLAT_ROW;
    }
    let inv = 127.0 / amax;
    for (out, &v) in q.iter_mut().zip(x) {
        *out = clamp_to_int(round_half_away(v * inv), -127.0, 127.0) as i16;
    }
    RowParams { scale: amax / 127.0, zero_point: 0 }
}

pub fn quantize_row_asymmetric_scalar(x: &[f32], q: &mut [i16]) -> RowParams {
    let (rmin, rmax) = asymmetric_range_scalar(x);
    if rmin == rmax {
        q.fill(0);
        return FLAT_ROW;
    }
    let params = asymmetric_params(rmin, rmax);
    let inv = 1.0 / params.scale;
    let zp = params.zero_point;
    for (out, &v) in q.iter_mut().zip(x) {
        // round(x / s) + zp, clamped: the sum of two small integers is exact in f32.
        let shifted = round_half_away(v * inv) + zp as f32;
        *out = (clamp_to_int(shifted, -128.0, 127.0) - zp) as i16;
    }
    params
}

// ---- f32x4 versions ----------------------------------------------------------------------------

/// round_half_away on four lanes: trunc, then add copysign(1, v) where |v - trunc| >= 0.5.
/// (f32x4_nearest would round halves to even, which the reference does not.)
#[inline(always)]
fn round_half_away_x4(v: v128) -> v128 {
    let t = f32x4_trunc(v);
    let away = f32x4_ge(f32x4_abs(f32x4_sub(v, t)), f32x4_splat(0.5));
    let one_with_sign = v128_or(f32x4_splat(1.0), v128_and(v, u32x4_splat(0x8000_0000)));
    f32x4_add(t, v128_and(away, one_with_sign))
}

/// Clamp and convert four lanes of integer-valued floats. pmin(a, b) is `b < a ? b : a`: with the
/// value in `a` a NaN survives both clamps, and is then made 0, as the scalar version's `as`
/// does. Clamped, every other lane is an integer in [lo, hi], which small_integer_x4 converts in
/// two instructions (i32x4.trunc_sat_f32x4_s takes seven, for ranges these never have).
#[inline(always)]
fn clamp_to_int_x4(v: v128, lo: f32, hi: f32) -> v128 {
    let clamped = f32x4_pmax(f32x4_pmin(v, f32x4_splat(hi)), f32x4_splat(lo));
    small_integer_x4(v128_and(clamped, f32x4_eq(clamped, clamped)))
}

/// Horizontal maximum of four non-negative-or-NaN-free lanes (exact in any order).
#[inline(always)]
fn lanes_max(v: v128) -> f32 {
    let a = f32x4_extract_lane::<0>(v).max(f32x4_extract_lane::<1>(v));
    let b = f32x4_extract_lane::<2>(v).max(f32x4_extract_lane::<3>(v));
    a.max(b)
}

#[inline(always)]
fn lanes_min(v: v128) -> f32 {
    let a = f32x4_extract_lane::<0>(v).min(f32x4_extract_lane::<1>(v));
    let b = f32x4_extract_lane::<2>(v).min(f32x4_extract_lane::<3>(v));
    a.min(b)
}

/// Independent running extremes a range pass keeps: one would make each vector wait for the
/// previous one's pmax. A maximum (or minimum) of numbers is the same in any order, and a NaN
/// never enters one (below), so they combine into the scalar pass's result.
const RANGE_CHAINS: usize = 4;

fn symmetric_range(x: &[f32]) -> f32 {
    let full = x.len() / 4 * 4;
    let p = x.as_ptr();
    let mut acc = [f32x4_splat(0.0); RANGE_CHAINS];
    let mut i = 0;
    // SAFETY: loads below `full` <= len.
    unsafe {
        // pmax(acc, v) is `acc < v ? v : acc`: a NaN in v is skipped, like the scalar `>`.
        let take = |acc: &mut v128, i: usize| *acc = f32x4_pmax(*acc, f32x4_abs(v128_load(p.add(i) as *const v128)));
        while i + 4 * RANGE_CHAINS <= full {
            for (c, acc) in acc.iter_mut().enumerate() {
                take(acc, i + 4 * c);
            }
            i += 4 * RANGE_CHAINS;
        }
        while i < full {
            take(&mut acc[0], i);
            i += 4;
        }
    }
    let amax = acc.iter().map(|&a| lanes_max(a)).fold(0.0, f32::max);
    symmetric_range_scalar(&x[full..]).max(amax)
}

fn asymmetric_range(x: &[f32]) -> (f32, f32) {
    let full = x.len() / 4 * 4;
    let p = x.as_ptr();
    let (mut lo, mut hi) = ([f32x4_splat(0.0); RANGE_CHAINS], [f32x4_splat(0.0); RANGE_CHAINS]);
    let mut i = 0;
    // SAFETY: loads below `full` <= len.
    unsafe {
        let take = |lo: &mut v128, hi: &mut v128, i: usize| {
            let v = v128_load(p.add(i) as *const v128);
            *lo = f32x4_pmin(*lo, v);
            *hi = f32x4_pmax(*hi, v);
        };
        while i + 4 * RANGE_CHAINS <= full {
            for c in 0..RANGE_CHAINS {
                take(&mut lo[c], &mut hi[c], i + 4 * c);
            }
            i += 4 * RANGE_CHAINS;
        }
        while i < full {
            take(&mut lo[0], &mut hi[0], i);
            i += 4;
        }
    }
    let (tail_lo, tail_hi) = asymmetric_range_scalar(&x[full..]);
    let lo = lo.iter().map(|&v| lanes_min(v)).fold(tail_lo, f32::min);
    let hi = hi.iter().map(|&v| lanes_max(v)).fold(tail_hi, f32::max);
    (lo, hi)
}

/// Quantise 8 lanes (two vectors) and store them as i16: out = clamp(round(v * inv) + zp) - zp.
#[inline(always)]
unsafe fn quantize8(src: *const f32, dst: *mut i16, inv: v128, zp: i32, lo: f32, hi: f32) {
    let zp_f = f32x4_splat(zp as f32);
    let zp_i = i32x4_splat(zp);
    let mut halves = [i32x4_splat(0); 2];
    for (h, half) in halves.iter_mut().enumerate() {
        let v = f32x4_mul(v128_load(src.add(4 * h) as *const v128), inv);
        let shifted = f32x4_add(round_half_away_x4(v), zp_f);
        *half = i32x4_sub(clamp_to_int_x4(shifted, lo, hi), zp_i);
    }
    v128_store(dst as *mut v128, i16x8_narrow_i32x4(halves[0], halves[1]));
}

fn quantize_values(x: &[f32], q: &mut [i16], inv: f32, zp: i32, lo: f32, hi: f32) {
    let full = x.len() / 8 * 8;
    let (src, dst) = (x.as_ptr(), q.as_mut_ptr());
    let inv_x4 = f32x4_splat(inv);
    let mut i = 0;
    // SAFETY: reads and writes 8 lanes below `full` <= len of both slices.
    unsafe {
        while i + 16 <= full {
            quantize8(src.add(i), dst.add(i), inv_x4, zp, lo, hi);
            quantize8(src.add(i + 8), dst.add(i + 8), inv_x4, zp, lo, hi);
            i += 16;
        }
        while i < full {
            quantize8(src.add(i), dst.add(i), inv_x4, zp, lo, hi);
            i += 8;
        }
    }
    for (out, &v) in q[full..].iter_mut().zip(&x[full..]) {
        let shifted = round_half_away(v * inv) + zp as f32;
        *out = (clamp_to_int(shifted, lo, hi) - zp) as i16;
    }
}

pub fn quantize_row_symmetric(x: &[f32], q: &mut [i16]) -> RowParams {
    assert_eq!(x.len(), q.len());
    let amax = symmetric_range(x);
    if amax == 0.0 {
        q.fill(0);
        return FLAT_ROW;
    }
    quantize_values(x, q, 127.0 / amax, 0, -127.0, 127.0);
    RowParams { scale: amax / 127.0, zero_point: 0 }
}

pub fn quantize_row_asymmetric(x: &[f32], q: &mut [i16]) -> RowParams {
    assert_eq!(x.len(), q.len());
    let (rmin, rmax) = asymmetric_range(x);
    if rmin == rmax {
        q.fill(0);
        return FLAT_ROW;
    }
    let params = asymmetric_params(rmin, rmax);
    quantize_values(x, q, 1.0 / params.scale, params.zero_point, -128.0, 127.0);
    params
}

/// The rows a hybrid Linear multiplies: q - zp per value, one scale per row.
pub struct QuantizedRows {
    pub values: Vec<i16>,
    pub scales: Vec<f32>,
    pub rows: usize,
    pub cols: usize,
    /// TFLite returns the bias alone when its whole input is zero.
    pub all_zero: bool,
}

impl QuantizedRows {
    pub fn new(max_rows: usize, max_cols: usize) -> Self {
        QuantizedRows { values: vec![0; max_rows * max_cols], scales: vec![0.0; max_rows], rows: 0, cols: 0, all_zero: true }
    }

    /// Quantise the first `rows` rows of x (row length `cols`).
    pub fn quantize(&mut self, x: &[f32], rows: usize, cols: usize, asymmetric: bool) {
        assert!(x.len() >= rows * cols && self.values.len() >= rows * cols && self.scales.len() >= rows);
        self.rows = rows;
        self.cols = cols;
        self.all_zero = x[..rows * cols].iter().all(|&v| v == 0.0);
        for r in 0..rows {
            let row = &x[r * cols..(r + 1) * cols];
            let out = &mut self.values[r * cols..(r + 1) * cols];
            let params = if asymmetric { quantize_row_asymmetric(row, out) } else { quantize_row_symmetric(row, out) };
            self.scales[r] = params.scale;
        }
    }
}
