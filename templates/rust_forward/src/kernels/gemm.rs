//! The int8 GEMM of a hybrid Linear: y[r][o] = bias[o] + acc * (w_scale[o] * s[r]), where
//! acc = sum_k a[r][k] * w[o][k] over quantised activations a (i16, q - zp) and int8 weights.
//!
//! Integer sums are exact in any order, so the SIMD kernel blocks and reorders them freely: a
//! register tile of TILE_ROWS activation rows x TILE_OUTS weight rows, 16 k per iteration, each
//! loaded vector reused across the tile, i32x4_dot_i16x8 multiplying and pair-adding in one
//! instruction. The only float step, the dequantisation, keeps the reference's order.

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
    fn scale_of(&self, o: usize) -> f32 {
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
    assert!(a.len() >= rows * w.k && out.len() >= rows * w.outs && w.w.len() == w.outs * w.k);
    if all_zero {
        return w.bias_only(rows, out);
    }
    let mut r0 = 0;
    while r0 + GEMM_TILE_ROWS <= rows {
        row_block::<GEMM_TILE_ROWS>(a, row_scales, r0, w, out);
        r0 += GEMM_TILE_ROWS;
    }
    while r0 < rows {
        row_block::<1>(a, row_scales, r0, w, out);
        r0 += 1;
    }
}

/// All outputs of M activation rows starting at r0.
#[inline(always)]
fn row_block<const M: usize>(a: &[i16], row_scales: &[f32], r0: usize, w: &Int8Weights, out: &mut [f32]) {
    let mut o0 = 0;
    while o0 + GEMM_TILE_OUTS <= w.outs {
        store_tile::<M, GEMM_TILE_OUTS>(a, row_scales, r0, o0, w, out);
        o0 += GEMM_TILE_OUTS;
    }
    while o0 < w.outs {
        store_tile::<M, 1>(a, row_scales, r0, o0, w, out);
        o0 += 1;
    }
}

#[inline(always)]
fn store_tile<const M: usize, const N: usize>(
    a: &[i16],
    row_scales: &[f32],
    r0: usize,
    o0: usize,
    w: &Int8Weights,
    out: &mut [f32],
) {
    let k = w.k;
    // SAFETY: gemm asserted the slice lengths; the tile lies inside rows x outs.
    let acc = unsafe { tile_dots::<M, N>(a.as_ptr().add(r0 * k), w.w.as_ptr().add(o0 * k), k) };
    for r in 0..M {
        for c in 0..N {
            out[(r0 + r) * w.outs + o0 + c] = w.dequantize(acc[r][c], o0 + c, row_scales[r0 + r]);
        }
    }
}

/// Integer dot products of M activation rows with N weight rows (row stride k each).
#[inline(always)]
unsafe fn tile_dots<const M: usize, const N: usize>(a: *const i16, w: *const i8, k: usize) -> [[i32; N]; M] {
    let mut acc = [[i32x4_splat(0); N]; M];
    let full = k / 16 * 16;
    let mut i = 0;
    while i < full {
        let mut a_lo = [i32x4_splat(0); M];
        let mut a_hi = [i32x4_splat(0); M];
        for r in 0..M {
            a_lo[r] = v128_load(a.add(r * k + i) as *const v128);
            a_hi[r] = v128_load(a.add(r * k + i + 8) as *const v128);
        }
        for c in 0..N {
            let w_lo = i16x8_load_extend_i8x8(w.add(c * k + i));
            let w_hi = i16x8_load_extend_i8x8(w.add(c * k + i + 8));
            for r in 0..M {
                let pair = i32x4_add(i32x4_dot_i16x8(a_lo[r], w_lo), i32x4_dot_i16x8(a_hi[r], w_hi));
                acc[r][c] = i32x4_add(acc[r][c], pair);
            }
        }
        i += 16;
    }
    let mut sums = [[0i32; N]; M];
    for r in 0..M {
        for c in 0..N {
            let v = acc[r][c];
            let mut s = i32x4_extract_lane::<0>(v)
                + i32x4_extract_lane::<1>(v)
                + i32x4_extract_lane::<2>(v)
                + i32x4_extract_lane::<3>(v);
            for t in full..k {
                s += *a.add(r * k + t) as i32 * *w.add(c * k + t) as i32;
            }
            sums[r][c] = s;
        }
    }
    sums
}
