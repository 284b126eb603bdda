//! onnxruntime's dynamically quantised linear layer (quantize_dynamic's DynamicQuantizeLinear +
//! MatMulInteger + Cast + Mul + Add), exactly as porter/quant.py defines it.
//!
//! DynamicQuantizeLinear takes ONE scale and zero point for the whole input tensor (padding
//! rows included), rounding half to even. The integer dot product is u8 x s8; onnxruntime's
//! AVX2 kernel (vpmaddubsw) adds the products in adjacent pairs saturated to int16 before
//! widening, so `saturating` layers clamp every pair sum to [-32768, 32767]. Integer work is
//! exact in any order: the SIMD kernel forms the eight products of a vector (each fits in
//! int16: 255 * 128 = 32640), pair-adds them exactly with i32x4_dot_i16x8 against ones,
//! clamps, and accumulates.

use core::arch::wasm32::*;

use super::gemm::Int8Weights;

/// A whole tensor quantised to uint8 (held as i16 for the SIMD products).
pub struct TensorQuantized {
    pub values: Vec<i16>,
    pub rows: usize,
    pub cols: usize,
    pub scale: f32,
    pub zero_point: i32,
}

impl TensorQuantized {
    /// Empty: the first quantize sizes it (TFLite models never use it).
    pub fn new() -> Self {
        TensorQuantized { values: Vec::new(), rows: 0, cols: 0, scale: 1.0, zero_point: 0 }
    }

    /// DynamicQuantizeLinear of x[..rows * cols].
    pub fn quantize(&mut self, x: &[f32], rows: usize, cols: usize) {
        let x = &x[..rows * cols];
        if self.values.len() < x.len() {
            self.values.resize(x.len(), 0);
        }
        let (mut lo, mut hi) = (0.0f32, 0.0f32);
        for &v in x {
            lo = if v < lo { v } else { lo };
            hi = if v > hi { v } else { hi };
        }
        let scale = if hi == lo { 1.0 } else { (hi - lo) / 255.0 };
        let zero_point = (0.0 - lo / scale).clamp(0.0, 255.0).round_ties_even() as i32;
        for (q, &v) in self.values.iter_mut().zip(x) {
            *q = ((v / scale).round_ties_even() + zero_point as f32).clamp(0.0, 255.0) as i16;
        }
        (self.rows, self.cols, self.scale, self.zero_point) = (rows, cols, scale, zero_point);
    }
}

/// Scalar reference: sum over k of q * w, pairs saturated to int16 when `saturating`.
pub fn dot_scalar(q: &[i16], w: &[i8], saturating: bool) -> i32 {
    let mut acc = 0i32;
    for (qp, wp) in q.chunks(2).zip(w.chunks(2)) {
        let mut pair = 0i32;
        for (&a, &b) in qp.iter().zip(wp) {
            pair += a as i32 * b as i32;
        }
        acc += if saturating { pair.clamp(i16::MIN as i32, i16::MAX as i32) } else { pair };
    }
    acc
}

/// The same sum, eight products per step.
pub fn dot(q: &[i16], w: &[i8], saturating: bool) -> i32 {
    let k = q.len().min(w.len());
    let full = k / 8 * 8;
    let ones = i16x8_splat(1);
    let (lo, hi) = (i32x4_splat(i16::MIN as i32), i32x4_splat(i16::MAX as i32));
    let mut acc = i32x4_splat(0);
    let mut i = 0;
    while i < full {
        // SAFETY: i + 8 <= full <= the length of both slices.
        let (a, b) = unsafe { (v128_load(q.as_ptr().add(i) as *const v128), i16x8_load_extend_i8x8(w.as_ptr().add(i))) };
        let mut pairs = i32x4_dot_i16x8(i16x8_mul(a, b), ones);
        if saturating {
            pairs = i32x4_min(i32x4_max(pairs, lo), hi);
        }
        acc = i32x4_add(acc, pairs);
        i += 8;
    }
    let lanes = i32x4_extract_lane::<0>(acc) + i32x4_extract_lane::<1>(acc) + i32x4_extract_lane::<2>(acc)
        + i32x4_extract_lane::<3>(acc);
    lanes + dot_scalar(&q[full..k], &w[full..k], saturating)
}

/// y[r][o] = float(acc - zp * sum(w[o])) * (scale * w_scale[o]) + bias[o] for the first `rows`
/// rows of the quantised tensor.
pub fn linear(xq: &TensorQuantized, rows: usize, w: &Int8Weights, saturating: bool, out: &mut [f32]) {
    let k = w.k;
    assert!(xq.cols == k && rows <= xq.rows && out.len() >= rows * w.outs);
    for o in 0..w.outs {
        let row_w = &w.w[o * k..(o + 1) * k];
        let w_sum: i32 = row_w.iter().map(|&v| v as i32).sum();
        let w_scale = if w.scale.len() == 1 { w.scale[0] } else { w.scale[o] };
        let scale = xq.scale * w_scale;
        for r in 0..rows {
            let acc = dot(&xq.values[r * k..(r + 1) * k], row_w, saturating) - xq.zero_point * w_sum;
            let y = acc as f32 * scale;
            out[r * w.outs + o] = match w.bias {
                Some(b) => y + b[o],
                None => y,
            };
        }
    }
}
