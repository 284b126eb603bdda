//! A decoder Linear: y = x . W^T + b with float32 or Q8_0 weights, as onnxruntime's Gemm
//! computes it on the (dequantised) float weights: each dot product exact enough in f64 and
//! rounded once to f32, then + bias (porter/ort_float.py `linear`).
//!
//! Q8_0 rows are dequantised block by block, float32(q * d) exactly as porter.decoder defines
//! the weights onnxruntime is verified with, into one row of scratch, then used for every input
//! row. The f64 sums run two lanes at a time: their order differs from numpy's BLAS only in
//! f64 rounding, far below the single f32 rounding that follows.

use core::arch::wasm32::*;

pub const Q8_0_BLOCK: usize = 32;

pub enum Weights<'a> {
    Float(&'a [f32]),
    /// int8 values [outs, k] and one f32 scale per block of 32 along k.
    Q8_0 { q: &'a [i8], scale: &'a [f32] },
}

pub struct Linear<'a> {
    pub weights: Weights<'a>,
    pub bias: Option<&'a [f32]>,
    pub outs: usize,
    pub k: usize,
}

impl<'a> Linear<'a> {
    /// Row o of W as float32: a slice into model.bin, or dequantised into `scratch`.
    pub fn row<'s>(&'s self, o: usize, scratch: &'s mut [f32]) -> &'s [f32] {
        let k = self.k;
        match &self.weights {
            Weights::Float(w) => &w[o * k..(o + 1) * k],
            Weights::Q8_0 { q, scale } => {
                let blocks = k / Q8_0_BLOCK;
                for b in 0..blocks {
                    let d = scale[o * blocks + b];
                    let at = o * k + b * Q8_0_BLOCK;
                    for (out, &v) in scratch[b * Q8_0_BLOCK..(b + 1) * Q8_0_BLOCK].iter_mut().zip(&q[at..at + Q8_0_BLOCK]) {
                        *out = v as f32 * d;
                    }
                }
                &scratch[..k]
            }
        }
    }

    /// out[r * outs + o] for the first `rows` rows of x ([rows, k]).
    pub fn apply(&self, x: &[f32], rows: usize, out: &mut [f32], scratch: &mut [f32]) {
        let k = self.k;
        for o in 0..self.outs {
            let bias = self.bias.map_or(0.0, |b| b[o]);
            let mut finish = |r: usize, dot: f64| {
                let y = dot as f32;
                out[r * self.outs + o] = if self.bias.is_some() { y + bias } else { y };
            };
            match &self.weights {
                // One row of input (a generated token): dequantise inside the dot product.
                Weights::Q8_0 { q, scale } if rows == 1 => {
                    let blocks = k / Q8_0_BLOCK;
                    finish(0, dot_f64_q8_0(&x[..k], &q[o * k..(o + 1) * k], &scale[o * blocks..(o + 1) * blocks]));
                }
                // Several rows (a prompt): dequantise the weight row once for all of them.
                _ => {
                    let w = self.row(o, scratch);
                    for r in 0..rows {
                        finish(r, dot_f64(&x[r * k..(r + 1) * k], w));
                    }
                }
            }
        }
    }
}

/// The four f64 products of x[0..4] and w[0..4] added to (lo, hi) as dot_f64 adds them.
#[inline(always)]
fn add_products(lo: &mut v128, hi: &mut v128, xv: v128, wv: v128) {
    *lo = f64x2_add(*lo, f64x2_mul(f64x2_promote_low_f32x4(xv), f64x2_promote_low_f32x4(wv)));
    let (xh, wh) = (i32x4_shuffle::<2, 3, 0, 1>(xv, xv), i32x4_shuffle::<2, 3, 0, 1>(wv, wv));
    *hi = f64x2_add(*hi, f64x2_mul(f64x2_promote_low_f32x4(xh), f64x2_promote_low_f32x4(wh)));
}

/// dot_f64(x, float32(q * d) per block), without writing the dequantised row anywhere: the
/// same weights, products and additions in the same order, so the same result bit for bit.
pub fn dot_f64_q8_0(x: &[f32], q: &[i8], scale: &[f32]) -> f64 {
    assert!(x.len() == q.len() && q.len() == scale.len() * Q8_0_BLOCK);
    let (mut lo, mut hi) = (f64x2_splat(0.0), f64x2_splat(0.0));
    for (b, &d) in scale.iter().enumerate() {
        let d = f32x4_splat(d);
        for half in 0..2 {
            let at = b * Q8_0_BLOCK + half * 16;
            // SAFETY: at + 16 <= q.len() == x.len().
            let bytes = unsafe { v128_load(q.as_ptr().add(at) as *const v128) };
            for (quarter, wide) in [i16x8_extend_low_i8x16(bytes), i16x8_extend_high_i8x16(bytes)].into_iter().enumerate() {
                for (eighth, ints) in [i32x4_extend_low_i16x8(wide), i32x4_extend_high_i16x8(wide)].into_iter().enumerate() {
                    let i = at + quarter * 8 + eighth * 4;
                    let wv = f32x4_mul(f32x4_convert_i32x4(ints), d);
                    // SAFETY: i + 4 <= x.len().
                    let xv = unsafe { v128_load(x.as_ptr().add(i) as *const v128) };
                    add_products(&mut lo, &mut hi, xv, wv);
                }
            }
        }
    }
    let sum = f64x2_add(lo, hi);
    f64x2_extract_lane::<0>(sum) + f64x2_extract_lane::<1>(sum)
}

/// sum x[i] * w[i] in f64 (every product exact), two lanes of two accumulators.
pub fn dot_f64(x: &[f32], w: &[f32]) -> f64 {
    let n = x.len().min(w.len());
    let full = n / 4 * 4;
    let (mut lo, mut hi) = (f64x2_splat(0.0), f64x2_splat(0.0));
    let mut i = 0;
    while i < full {
        // SAFETY: i + 4 <= full <= the length of both slices.
        let (xv, wv) = unsafe { (v128_load(x.as_ptr().add(i) as *const v128), v128_load(w.as_ptr().add(i) as *const v128)) };
        add_products(&mut lo, &mut hi, xv, wv);
        i += 4;
    }
    let sum = f64x2_add(lo, hi);
    let mut total = f64x2_extract_lane::<0>(sum) + f64x2_extract_lane::<1>(sum);
    for j in full..n {
        total += x[j] as f64 * w[j] as f64;
    }
    total
}
