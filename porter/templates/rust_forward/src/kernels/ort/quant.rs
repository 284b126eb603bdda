//! onnxruntime's dynamically quantised linear layer (quantize_dynamic's DynamicQuantizeLinear +
//! MatMulInteger + Cast + Mul + Add), exactly as porter/reference/quant.py defines it.
//!
//! DynamicQuantizeLinear takes ONE scale and zero point for the whole input tensor (padding
//! rows included), rounding half to even. The integer dot product is u8 x s8; onnxruntime's
//! AVX2 kernel (vpmaddubsw) adds the products in adjacent pairs saturated to int16 before
//! widening, so `saturating` layers clamp every pair sum to [-32768, 32767]. Integer work is
//! exact in any order: the SIMD path is the int8 GEMM's register tiles (gemm::integer_gemm),
//! whose saturating form adds even and odd products with i16x8.add_sat_s.

use core::arch::wasm32::*;

use crate::kernels::common::gemm::{four_of, integer_gemm, pair_dot_scalar, Finish, Int8Weights};
use crate::tuning::{GEMM_TILE_OUTS, GEMM_TILE_ROWS};

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

/// y[r][o] = float(acc - zp * sum(w[o])) * (scale * w_scale[o]) + bias[o]: the float steps in
/// onnxruntime's order (MatMulInteger's zero point, Cast, Mul by the two scales, Add).
#[inline(always)]
fn dequantize(xq: &TensorQuantized, w: &Int8Weights, weight_sums: &[i32], acc: i32, o: usize) -> f32 {
    let y = (acc - xq.zero_point * weight_sums[o]) as f32 * (xq.scale * w.scale_of(o));
    match w.bias {
        Some(b) => y + b[o],
        None => y,
    }
}

/// `dequantize` as the integer GEMM's tiles finish their outputs.
#[derive(Clone, Copy)]
struct OrtOutput<'a> {
    xq: &'a TensorQuantized,
    w: &'a Int8Weights<'a>,
    weight_sums: &'a [i32],
}

impl Finish for OrtOutput<'_> {
    type Columns = (v128, v128, Option<v128>); // weight sums, both scales' product, bias

    #[inline(always)]
    fn one(&self, acc: i32, _r: usize, o: usize) -> f32 {
        dequantize(self.xq, self.w, self.weight_sums, acc, o)
    }

    #[inline(always)]
    fn columns(&self, o: usize) -> (v128, v128, Option<v128>) {
        let sums = &self.weight_sums[o..o + 4];
        // SAFETY: the slice holds four sums.
        let sums = unsafe { v128_load(sums.as_ptr() as *const v128) };
        (sums, f32x4_mul(f32x4_splat(self.xq.scale), four_of(self.w.scale, o)), self.w.bias.map(|b| four_of(b, o)))
    }

    /// Four outputs, each lane `one`'s steps.
    #[inline(always)]
    fn four(&self, (sums, scale, bias): (v128, v128, Option<v128>), acc: v128, _r: usize) -> v128 {
        let corrected = i32x4_sub(acc, i32x4_mul(i32x4_splat(self.xq.zero_point), sums));
        let y = f32x4_mul(f32x4_convert_i32x4(corrected), scale);
        match bias {
            Some(b) => f32x4_add(y, b),
            None => y,
        }
    }
}

/// sums[o] = sum over k of w[o][k], for MatMulInteger's zero-point term.
fn fill_weight_sums(w: &Int8Weights, sums: &mut Vec<i32>) {
    sums.clear();
    sums.extend(w.w.chunks_exact(w.k).map(|row| row.iter().map(|&v| v as i32).sum::<i32>()));
}

/// The layer over the first `rows` rows of the quantised tensor, in the crate's GEMM tile
/// (tuning.rs); `weight_sums` is scratch.
pub fn linear(xq: &TensorQuantized, rows: usize, w: &Int8Weights, saturating: bool, out: &mut [f32], weight_sums: &mut Vec<i32>) {
    linear_tiled::<GEMM_TILE_ROWS, GEMM_TILE_OUTS>(xq, rows, w, saturating, out, weight_sums)
}

/// `linear` in GEMM tiles of R rows x O outputs: the kernel-check module runs it for every
/// candidate tile (porter/codegen/tuning.py GEMM_TILES).
#[inline(always)]
pub fn linear_tiled<const R: usize, const O: usize>(
    xq: &TensorQuantized,
    rows: usize,
    w: &Int8Weights,
    saturating: bool,
    out: &mut [f32],
    weight_sums: &mut Vec<i32>,
) {
    assert!(xq.cols == w.k && rows <= xq.rows && out.len() >= rows * w.outs);
    fill_weight_sums(w, weight_sums);
    let finish = OrtOutput { xq, w, weight_sums: &weight_sums[..] };
    if saturating {
        integer_gemm::<true, R, O>(&xq.values, rows, w, out, finish);
    } else {
        integer_gemm::<false, R, O>(&xq.values, rows, w, out, finish);
    }
}

/// The same, one dot product at a time.
pub fn linear_scalar(xq: &TensorQuantized, rows: usize, w: &Int8Weights, saturating: bool, out: &mut [f32]) {
    let k = w.k;
    let mut sums = Vec::new();
    fill_weight_sums(w, &mut sums);
    for r in 0..rows {
        for o in 0..w.outs {
            let acc = pair_dot_scalar(&xq.values[r * k..(r + 1) * k], &w.w[o * k..(o + 1) * k], saturating);
            out[r * w.outs + o] = dequantize(xq, w, &sums, acc, o);
        }
    }
}
