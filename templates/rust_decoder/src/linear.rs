//! A decoder Linear: y = x . W^T + b with float32 or Q8_0 weights, as onnxruntime's MatMul
//! then Add compute it on the (dequantised) float weights (porter/ort_float.py `matmul_add`).
//!
//! Or, for Q8_0 weights with int8 dot products (`q8_0_int8`), as porter.decoder's
//! q8_0_int8_linear computes it: each input row quantised to Q8_0, integer block dot products,
//! float32 only to scale and add the block sums (see `dot_q8_0_int8`).
//!
//! Q8_0 weights are dequantised as they are read, float32(q * d) exactly as porter.decoder
//! defines the weights onnxruntime is verified with.

use core::arch::wasm32::*;

use crate::kernels::ort_float::{sgemm_outputs, PACKED_STRIDE_K};

pub const Q8_0_BLOCK: usize = 32;
/// Q8_0 weight rows dequantised at a time: the outputs a SIMD product advances together.
const DEQUANTISED_ROWS: usize = 8;

pub enum Weights<'a> {
    Float(&'a [f32]),
    /// int8 values [outs, k] and one f32 scale per block of 32 along k.
    Q8_0 { q: &'a [i8], scale: &'a [f32] },
    /// The same storage, multiplied by Q8_0-quantised inputs in integers.
    Q8_0Int8 { q: &'a [i8], scale: &'a [f32] },
}

/// Work space of the widest Linear for `rows` input rows, allocated once.
pub struct LinearScratch {
    /// Dequantised weight rows: a token's embedding, or a group of rows for a product.
    row: Vec<f32>,
    /// The input rows quantised to Q8_0: values widened to i16, one scale per block.
    values: Vec<i16>,
    scales: Vec<f32>,
}

impl LinearScratch {
    pub fn new(rows: usize, widest: usize) -> Self {
        LinearScratch { row: vec![0.0; DEQUANTISED_ROWS * widest], values: vec![0; rows * widest], scales: vec![0.0; rows * widest / Q8_0_BLOCK] }
    }

    pub fn row_buffer(&mut self) -> &mut [f32] {
        &mut self.row
    }
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
            Weights::Q8_0 { q, scale } | Weights::Q8_0Int8 { q, scale } => {
                let blocks = k / Q8_0_BLOCK;
                let (q, scale) = (&q[o * k..(o + 1) * k], &scale[o * blocks..(o + 1) * blocks]);
                for ((values, out), &d) in q.chunks_exact(Q8_0_BLOCK).zip(scratch.chunks_exact_mut(Q8_0_BLOCK)).zip(scale) {
                    dequantize_block(values, d, out);
                }
                &scratch[..k]
            }
        }
    }

    /// out[r * outs + o] for the first `rows` rows of x ([rows, k]), bias included.
    pub fn apply(&self, x: &[f32], rows: usize, out: &mut [f32], scratch: &mut LinearScratch) {
        self.apply_with(x, rows, out, scratch, self.bias);
    }

    /// The product alone, for a caller that adds the bias in its own order.
    pub fn apply_without_bias(&self, x: &[f32], rows: usize, out: &mut [f32], scratch: &mut LinearScratch) {
        self.apply_with(x, rows, out, scratch, None);
    }

    fn apply_with(&self, x: &[f32], rows: usize, out: &mut [f32], scratch: &mut LinearScratch, bias: Option<&[f32]>) {
        let (k, outs) = (self.k, self.outs);
        match &self.weights {
            Weights::Q8_0Int8 { q, scale } => {
                let (values, scales) = (&mut scratch.values[..rows * k], &mut scratch.scales[..rows * k / Q8_0_BLOCK]);
                quantize_rows_q8_0(&x[..rows * k], values, scales);
                dot_q8_0_int8(values, scales, rows, q, scale, bias, &mut out[..rows * outs]);
            }
            // MatMul on the prepacked (dequantised) weights, then Add of the bias
            Weights::Float(w) => {
                for r in 0..rows {
                    let y = &mut out[r * outs..(r + 1) * outs];
                    sgemm_outputs(&x[r * k..(r + 1) * k], w, k, outs, PACKED_STRIDE_K, 1.0, None, y);
                    add_bias(y, bias);
                }
            }
            Weights::Q8_0 { .. } => {
                for first in (0..outs).step_by(DEQUANTISED_ROWS) {
                    let group = DEQUANTISED_ROWS.min(outs - first);
                    for g in 0..group {
                        self.row(first + g, &mut scratch.row[g * k..(g + 1) * k]);
                    }
                    for r in 0..rows {
                        let y = &mut out[r * outs + first..r * outs + first + group];
                        sgemm_outputs(&x[r * k..(r + 1) * k], &scratch.row, k, group, PACKED_STRIDE_K, 1.0, None, y);
                        add_bias(y, bias.map(|b| &b[first..first + group]));
                    }
                }
            }
        }
    }
}

/// out[i] = float32(q[i] * d) for one block of 32, eight values per step.
#[inline(always)]
fn dequantize_block(q: &[i8], d: f32, out: &mut [f32]) {
    assert!(q.len() == Q8_0_BLOCK && out.len() == Q8_0_BLOCK);
    let d = f32x4_splat(d);
    for (eight, out) in q.chunks_exact(8).zip(out.chunks_exact_mut(8)) {
        // SAFETY: eight values read, eight written, inside the asserted blocks.
        unsafe {
            let wide = i16x8_load_extend_i8x8(eight.as_ptr());
            let (lo, hi) = (i32x4_extend_low_i16x8(wide), i32x4_extend_high_i16x8(wide));
            v128_store(out.as_mut_ptr() as *mut v128, f32x4_mul(f32x4_convert_i32x4(lo), d));
            v128_store(out.as_mut_ptr().add(4) as *mut v128, f32x4_mul(f32x4_convert_i32x4(hi), d));
        }
    }
}

fn add_bias(y: &mut [f32], bias: Option<&[f32]>) {
    if let Some(b) = bias {
        for (v, &b) in y.iter_mut().zip(b) {
            *v += b;
        }
    }
}

/// Q8_0 of each block of 32: d = max|x| / 127, q = trunc(x / d + copysign(0.5)) (round half
/// away from zero, the addition in f32 as porter.decoder.quantize_q8_0 does it), 0 where d = 0.
fn quantize_rows_q8_0(x: &[f32], values: &mut [i16], scales: &mut [f32]) {
    for ((block, q), d) in x.chunks_exact(Q8_0_BLOCK).zip(values.chunks_exact_mut(Q8_0_BLOCK)).zip(scales.iter_mut()) {
        let amax = block.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        *d = amax / 127.0;
        let safe = if *d == 0.0 { 1.0 } else { *d };
        for (qv, &v) in q.iter_mut().zip(block) {
            let ratio = v / safe;
            *qv = if *d == 0.0 { 0 } else { (ratio + 0.5f32.copysign(ratio)).trunc().clamp(-127.0, 127.0) as i16 };
        }
    }
}

/// The integer products of one block of 32 as four i32 lanes: lane l holds the pairs
/// (8g + 2l, 8g + 2l + 1), g = 0..3 (i32x4.dot_i16x8_s of each eight). Each eight weights are
/// loaded already widened to i16 (v128.load8x8_s: one x86 instruction, no shuffles).
///
/// SAFETY: w points at 32 readable i8, x at 32 readable i16.
#[inline(always)]
unsafe fn block_lanes(w: *const i8, x: *const i16) -> v128 {
    unsafe {
        let x = x as *const v128;
        let d0 = i32x4_dot_i16x8(i16x8_load_extend_i8x8(w), v128_load(x));
        let d1 = i32x4_dot_i16x8(i16x8_load_extend_i8x8(w.add(8)), v128_load(x.add(1)));
        let d2 = i32x4_dot_i16x8(i16x8_load_extend_i8x8(w.add(16)), v128_load(x.add(2)));
        let d3 = i32x4_dot_i16x8(i16x8_load_extend_i8x8(w.add(24)), v128_load(x.add(3)));
        i32x4_add(i32x4_add(d0, d1), i32x4_add(d2, d3))
    }
}

/// acc_l += float(lane_l) * (d_w * d_x): one block of one output row.
#[inline(always)]
fn accumulate(acc: v128, lanes: v128, block_scale: f32) -> v128 {
    f32x4_add(acc, f32x4_mul(f32x4_convert_i32x4(lanes), f32x4_splat(block_scale)))
}

fn finish_q8_0(acc: v128, bias: Option<f32>) -> f32 {
    let y = (f32x4_extract_lane::<0>(acc) + f32x4_extract_lane::<1>(acc)) + (f32x4_extract_lane::<2>(acc) + f32x4_extract_lane::<3>(acc));
    bias.map_or(y, |b| y + b)
}

/// Quantised input rows (xq, xd: `rows` of them) against every Q8_0 weight row, two weight rows
/// at a time, each pair applied to every input row while it is in cache (a prompt streams the
/// weights once, not once per token).
/// Under epoch interruption Cranelift keeps a loop's vector accumulator in a stack slot (the
/// epoch check's slow path is a call), so each accumulation waits on a store and a load; two
/// weight rows give two independent chains per iteration (one, two and four rows measured
/// within noise of each other). Each output's arithmetic is the same as alone.
fn dot_q8_0_int8(xq: &[i16], xd: &[f32], rows: usize, q: &[i8], scale: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let (k, blocks) = (xq.len() / rows, xd.len() / rows);
    let outs = out.len() / rows;
    assert!(q.len() >= outs * k && scale.len() >= outs * blocks && k == blocks * Q8_0_BLOCK);
    assert!(xq.len() == rows * k && xd.len() == rows * blocks && out.len() == rows * outs);
    let finish = |acc: v128, row: usize| finish_q8_0(acc, bias.map(|b| b[row]));
    let mut row = 0;
    while row + 2 <= outs {
        let (d0, d1) = (&scale[row * blocks..(row + 1) * blocks], &scale[(row + 1) * blocks..(row + 2) * blocks]);
        for r in 0..rows {
            let xd = &xd[r * blocks..(r + 1) * blocks];
            let (mut a0, mut a1) = (f32x4_splat(0.0), f32x4_splat(0.0));
            // SAFETY: row + 1 < outs, so both rows' k weights lie inside q (asserted); input
            // row r has k values.
            unsafe {
                let (mut w, mut x) = (q.as_ptr().add(row * k), xq.as_ptr().add(r * k));
                for b in 0..blocks {
                    a0 = accumulate(a0, block_lanes(w, x), d0[b] * xd[b]);
                    a1 = accumulate(a1, block_lanes(w.add(k), x), d1[b] * xd[b]);
                    w = w.add(Q8_0_BLOCK);
                    x = x.add(Q8_0_BLOCK);
                }
            }
            out[r * outs + row] = finish(a0, row);
            out[r * outs + row + 1] = finish(a1, row + 1);
        }
        row += 2;
    }
    if row < outs {
        for r in 0..rows {
            let xd = &xd[r * blocks..(r + 1) * blocks];
            let mut acc = f32x4_splat(0.0);
            // SAFETY: as above, for the last row.
            unsafe {
                let (mut w, mut x) = (q.as_ptr().add(row * k), xq.as_ptr().add(r * k));
                for b in 0..blocks {
                    acc = accumulate(acc, block_lanes(w, x), scale[row * blocks + b] * xd[b]);
                    w = w.add(Q8_0_BLOCK);
                    x = x.add(Q8_0_BLOCK);
                }
            }
            out[r * outs + row] = finish(acc, row);
        }
    }
}
