//! The int8 GEMM of a hybrid Linear: y[r][o] = bias[o] + acc * (w_scale[o] * s[r]), where
//! acc = sum_k a[r][k] * w[o][k] over quantised activations a (i16, q - zp) and int8 weights.
//!
//! Integer sums are exact in any order, so the SIMD kernel blocks and reorders them freely: a
//! register tile of TILE_ROWS activation rows x TILE_OUTS weight rows, 16 k per iteration, each
//! loaded vector reused across the tile, i32x4_dot_i16x8 multiplying and pair-adding in one
//! instruction. The only float step, the dequantisation, keeps the reference's order.
//! onnxruntime's u8 x s8 dot (ort_quant.rs) runs through the same tiles, its int16 pair
//! saturation included, with its own dequantisation.

use core::arch::wasm32::*;

use crate::tuning::{GEMM_TILE_OUTS, GEMM_TILE_ROWS};

/// The weights of one int8 Linear, read in place from model.bin.
#[derive(Clone, Copy)]
pub struct Int8Weights<'a> {
    pub w: &'a [i8], // [outs, k]
    /// One scale per output row, or a single per-tensor scale.
    pub scale: &'a [f32],
    pub bias: Option<&'a [f32]>,
    pub outs: usize,
    pub k: usize,
}

impl Int8Weights<'_> {
    #[inline(always)]
    pub fn scale_of(&self, o: usize) -> f32 {
        if self.scale.len() == 1 {
            self.scale[0]
        } else {
            self.scale[o]
        }
    }

    #[inline(always)]
    fn bias_of(&self, o: usize) -> f32 {
        self.bias.map_or(0.0, |b| b[o])
    }

    /// The reference's float order: the two scales first, then acc times that, then the bias.
    #[inline(always)]
    fn dequantize(&self, acc: i32, o: usize, row_scale: f32) -> f32 {
        self.bias_of(o) + acc as f32 * (self.scale_of(o) * row_scale)
    }

    /// TFLite's shortcut for an all-zero input: every output is the bias.
    fn bias_only(&self, rows: usize, out: &mut [f32]) {
        for r in 0..rows {
            for o in 0..self.outs {
                out[r * self.outs + o] = self.bias_of(o);
            }
        }
    }
}

/// Scalar reference: one dot product per (row, output).
pub fn gemm_scalar(a: &[i16], row_scales: &[f32], rows: usize, all_zero: bool, w: &Int8Weights, out: &mut [f32]) {
    if all_zero {
        return w.bias_only(rows, out);
    }
    let k = w.k;
    for r in 0..rows {
        for o in 0..w.outs {
            let mut acc = 0i32;
            for i in 0..k {
                acc += a[r * k + i] as i32 * w.w[o * k + i] as i32;
            }
            out[r * w.outs + o] = w.dequantize(acc, o, row_scales[r]);
        }
    }
}

/// Register-tiled SIMD GEMM over the first `rows` rows of `a`.
pub fn gemm(a: &[i16], row_scales: &[f32], rows: usize, all_zero: bool, w: &Int8Weights, out: &mut [f32]) {
    if all_zero {
        return w.bias_only(rows, out);
    }
    integer_gemm::<false>(a, rows, w, out, |acc, r, o| w.dequantize(acc, o, row_scales[r]));
}

/// out[r][o] = finish(sum_k a[r][k] * w[o][k], r, o) for the first `rows` rows of `a`, in
/// register tiles. With PAIRS_SATURATE the products are first added in adjacent pairs
/// (k = 2i, 2i + 1) clamped to int16, as onnxruntime's AVX2 u8 x s8 kernel (vpmaddubsw) does;
/// that path needs |a * w| < 2^15 (uint8 activations), so each product is exact in an i16 lane.
#[inline(always)]
pub fn integer_gemm<const PAIRS_SATURATE: bool>(
    a: &[i16],
    rows: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Fn(i32, usize, usize) -> f32 + Copy,
) {
    assert!(a.len() >= rows * w.k && out.len() >= rows * w.outs && w.w.len() == w.outs * w.k);
    let mut r0 = 0;
    while r0 + GEMM_TILE_ROWS <= rows {
        row_block::<GEMM_TILE_ROWS, PAIRS_SATURATE>(a, r0, w, out, finish);
        r0 += GEMM_TILE_ROWS;
    }
    while r0 < rows {
        row_block::<1, PAIRS_SATURATE>(a, r0, w, out, finish);
        r0 += 1;
    }
}

/// All outputs of M activation rows starting at r0.
#[inline(always)]
fn row_block<const M: usize, const S: bool>(
    a: &[i16],
    r0: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Fn(i32, usize, usize) -> f32 + Copy,
) {
    let mut o0 = 0;
    while o0 + GEMM_TILE_OUTS <= w.outs {
        store_tile::<M, GEMM_TILE_OUTS, S>(a, r0, o0, w, out, finish);
        o0 += GEMM_TILE_OUTS;
    }
    while o0 < w.outs {
        store_tile::<M, 1, S>(a, r0, o0, w, out, finish);
        o0 += 1;
    }
}

#[inline(always)]
fn store_tile<const M: usize, const N: usize, const S: bool>(
    a: &[i16],
    r0: usize,
    o0: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Fn(i32, usize, usize) -> f32,
) {
    let k = w.k;
    // SAFETY: integer_gemm asserted the slice lengths; the tile lies inside rows x outs.
    let acc = unsafe { tile_dots::<M, N, S>(a.as_ptr().add(r0 * k), w.w.as_ptr().add(o0 * k), k) };
    for r in 0..M {
        for c in 0..N {
            out[(r0 + r) * w.outs + o0 + c] = finish(acc[r][c], r0 + r, o0 + c);
        }
    }
}

/// Integer dot products of M activation rows with N weight rows (row stride k each).
#[inline(always)]
unsafe fn tile_dots<const M: usize, const N: usize, const S: bool>(a: *const i16, w: *const i8, k: usize) -> [[i32; N]; M] {
    let mut acc = [[i32x4_splat(0); N]; M];
    let full = k / 16 * 16;
    let mut i = 0;
    while i < full {
        let mut a_lo = [i32x4_splat(0); M];
        let mut a_hi = [i32x4_splat(0); M];
        for r in 0..M {
            // `+ 8` as its own step stays a constant the load's offset can carry (no i32.add)
            let row = a.add(r * k + i);
            a_lo[r] = v128_load(row as *const v128);
            a_hi[r] = v128_load(row.add(8) as *const v128);
        }
        if S {
            saturating_step(&a_lo, &a_hi, w.add(i), k, &mut acc);
        } else {
            exact_step(&a_lo, &a_hi, w.add(i), k, &mut acc);
        }
        i += 16;
    }
    let mut sums = [[0i32; N]; M];
    for r in 0..M {
        for c in 0..N {
            let v = acc[r][c];
            sums[r][c] = i32x4_extract_lane::<0>(v)
                + i32x4_extract_lane::<1>(v)
                + i32x4_extract_lane::<2>(v)
                + i32x4_extract_lane::<3>(v)
                + tail_dot::<S>(a.add(r * k), w.add(c * k), full, k);
        }
    }
    sums
}

/// acc[r][c] += the products of 16 k: a_lo/a_hi hold row r's, w + c * k column c's.
#[inline(always)]
unsafe fn exact_step<const M: usize, const N: usize>(a_lo: &[v128; M], a_hi: &[v128; M], w: *const i8, k: usize, acc: &mut [[v128; N]; M]) {
    for c in 0..N {
        let column = w.add(c * k);
        let w_lo = i16x8_load_extend_i8x8(column);
        let w_hi = i16x8_load_extend_i8x8(column.add(8));
        for r in 0..M {
            let sixteen = i32x4_add(i32x4_dot_i16x8(a_lo[r], w_lo), i32x4_dot_i16x8(a_hi[r], w_hi));
            acc[r][c] = i32x4_add(acc[r][c], sixteen);
        }
    }
}

/// The same with each pair (k = 2i, 2i + 1) saturated to int16 first: even and odd values are
/// split into their own vectors, so one i16x8.add_sat_s forms eight saturated pair sums
/// (vpmaddubsw's arithmetic), each product exact in an i16 lane (|a * w| <= 255 * 128).
#[inline(always)]
unsafe fn saturating_step<const M: usize, const N: usize>(a_lo: &[v128; M], a_hi: &[v128; M], w: *const i8, k: usize, acc: &mut [[v128; N]; M]) {
    let ones = i16x8_splat(1);
    let a_even = core::array::from_fn::<v128, M, _>(|r| i8x16_shuffle::<0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29>(a_lo[r], a_hi[r]));
    let a_odd = core::array::from_fn::<v128, M, _>(|r| i8x16_shuffle::<2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31>(a_lo[r], a_hi[r]));
    for c in 0..N {
        // i16 lane j of the sixteen weights holds w[2j] in its low byte and w[2j + 1] in its high one
        let w16 = v128_load(w.add(c * k) as *const v128);
        let (w_even, w_odd) = (i16x8_shr(i16x8_shl(w16, 8), 8), i16x8_shr(w16, 8));
        for r in 0..M {
            let pairs = i16x8_add_sat(i16x8_mul(a_even[r], w_even), i16x8_mul(a_odd[r], w_odd));
            acc[r][c] = i32x4_add(acc[r][c], i32x4_dot_i16x8(pairs, ones));
        }
    }
}

/// sum over t in from..k of a[t] * w[t], pairs (from is even) saturated to int16 when S.
#[inline(always)]
unsafe fn tail_dot<const S: bool>(a: *const i16, w: *const i8, from: usize, k: usize) -> i32 {
    // SAFETY: the caller's rows hold k values each.
    let (a, w) = unsafe { (core::slice::from_raw_parts(a.add(from), k - from), core::slice::from_raw_parts(w.add(from), k - from)) };
    pair_dot_scalar(a, w, S)
}

/// sum over k of a[k] * w[k], one pair (k = 2i, 2i + 1) at a time, each pair clamped to int16
/// when `saturate` (onnxruntime's vpmaddubsw): the scalar reference of the tiles' dots.
pub fn pair_dot_scalar(a: &[i16], w: &[i8], saturate: bool) -> i32 {
    let mut sum = 0i32;
    for (ap, wp) in a.chunks(2).zip(w.chunks(2)) {
        let pair: i32 = ap.iter().zip(wp).map(|(&x, &y)| x as i32 * y as i32).sum();
        sum += if saturate { pair.clamp(i16::MIN as i32, i16::MAX as i32) } else { pair };
    }
    sum
}
