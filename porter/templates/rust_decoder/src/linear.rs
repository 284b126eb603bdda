//! A decoder Linear: y = x . W^T + b with float32 or Q8_0 weights, as onnxruntime computes it
//! on the (dequantised) float weights: MatMul then Add (porter/reference/ort/floats.py `matmul_add`), or
//! Gemm with the bias as C, every product fma'd into it (`linear`).
//!
//! Or, for Q8_0 weights with int8 dot products (`q8_0_int8`), as porter.decoder's
//! q8_0_int8_linear computes it: each input row quantised to Q8_0, integer block dot products,
//! float32 only to scale and add the block sums (see `dot_q8_0_int8`). These weights are stored
//! in tiles of ROW_TILE rows (porter/codegen/decoder.py `tile_q8_0_rows`), so that one pointer
//! with constant offsets reaches the same block of every row of a tile.
//!
//! Q8_0 weights are dequantised as they are read, float32(q * d) exactly as porter.decoder
//! defines the weights onnxruntime is verified with.

use core::arch::wasm32::*;

use crate::kernels::ort::float::{lane_splats, sgemm_outputs, PACKED_STRIDE_K};

pub const Q8_0_BLOCK: usize = 32;
/// Q8_0Int8 weight rows per tile: tile t holds block b of its rows side by side, [tiles][blocks]
/// [ROW_TILE][32] values and [tiles][blocks][ROW_TILE] scales; the last tile is padded with
/// zero rows (zero values and scales), whose outputs are computed and dropped. Four: a tile's
/// scales of one block are one v128. model.rs checks that model.bin was packed with the same.
pub const ROW_TILE: usize = 4;
/// Q8_0 weight rows dequantised at a time: the outputs a SIMD product advances together.
const DEQUANTISED_ROWS: usize = 8;

#[derive(Clone, Copy)]
pub enum Weights<'a> {
    Float(&'a [f32]),
    /// int8 values [outs, k] and one f32 scale per block of 32 along k.
    Q8_0 { q: &'a [i8], scale: &'a [f32] },
    /// The same values and scales in tiles of ROW_TILE rows, multiplied by Q8_0-quantised
    /// inputs in integers.
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
    /// Gemm: the bias is C, each output's products fma'd into it (else added after them)
    pub bias_in_c: bool,
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
                let (q, scale) = (&q[o * k..(o + 1) * k], &scale[o * blocks..(o + 1) * blocks]);
                for ((values, out), &d) in q.chunks_exact(Q8_0_BLOCK).zip(scratch.chunks_exact_mut(Q8_0_BLOCK)).zip(scale) {
                    dequantize_block(values, d, out);
                }
                &scratch[..k]
            }
            Weights::Q8_0Int8 { q, scale } => {
                let blocks = k / Q8_0_BLOCK;
                let (tile, j) = (o / ROW_TILE, o % ROW_TILE);
                for (b, out) in scratch[..k].chunks_exact_mut(Q8_0_BLOCK).enumerate() {
                    let at = (tile * blocks + b) * ROW_TILE + j;
                    dequantize_block(&q[at * Q8_0_BLOCK..(at + 1) * Q8_0_BLOCK], scale[at], out);
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
            // MatMul on the prepacked (dequantised) weights, then Add of the bias; or Gemm
            Weights::Float(w) => {
                let c = if self.bias_in_c { bias } else { None };
                for r in 0..rows {
                    let y = &mut out[r * outs..(r + 1) * outs];
                    sgemm_outputs(&x[r * k..(r + 1) * k], w, k, outs, PACKED_STRIDE_K, 1.0, c, y);
                    if !self.bias_in_c {
                        add_bias(y, bias);
                    }
                }
            }
            Weights::Q8_0 { .. } => {
                for first in (0..outs).step_by(DEQUANTISED_ROWS) {
                    let group = DEQUANTISED_ROWS.min(outs - first);
                    for g in 0..group {
                        self.row(first + g, &mut scratch.row[g * k..(g + 1) * k]);
                    }
                    let group_bias = bias.map(|b| &b[first..first + group]);
                    let c = if self.bias_in_c { group_bias } else { None };
                    for r in 0..rows {
                        let y = &mut out[r * outs + first..r * outs + first + group];
                        sgemm_outputs(&x[r * k..(r + 1) * k], &scratch.row, k, group, PACKED_STRIDE_K, 1.0, c, y);
                        if !self.bias_in_c {
                            add_bias(y, group_bias);
                        }
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
/// away from zero, the addition in f32 as porter.reference.q8_0.quantize_q8_0 does it), 0 where d = 0.
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

fn finish_q8_0(acc: v128, bias: Option<f32>) -> f32 {
    let y = (f32x4_extract_lane::<0>(acc) + f32x4_extract_lane::<1>(acc)) + (f32x4_extract_lane::<2>(acc) + f32x4_extract_lane::<3>(acc));
    bias.map_or(y, |b| y + b)
}

/// Quantised input rows (xq, xd: `rows` of them) against every tile of Q8_0 weight rows, each
/// tile applied to every input row while it is in cache (a prompt streams the weights once, not
/// once per token). Each output's arithmetic is the same as alone.
fn dot_q8_0_int8(xq: &[i16], xd: &[f32], rows: usize, q: &[i8], scale: &[f32], bias: Option<&[f32]>, out: &mut [f32]) {
    let (k, blocks) = (xq.len() / rows, xd.len() / rows);
    let outs = out.len() / rows;
    let tiles = outs.div_ceil(ROW_TILE);
    assert!(q.len() == tiles * ROW_TILE * k && scale.len() == tiles * ROW_TILE * blocks && k == blocks * Q8_0_BLOCK);
    assert!(xq.len() == rows * k && xd.len() == rows * blocks && out.len() == rows * outs);
    let mut acc = [f32x4_splat(0.0); ROW_TILE];
    for t in 0..tiles {
        let first = t * ROW_TILE;
        for r in 0..rows {
            // SAFETY: tile t's ROW_TILE * k values and ROW_TILE * blocks scales lie inside q and
            // scale, and input row r's k values and blocks scales inside xq and xd (asserted).
            unsafe { tile_dot(q.as_ptr().add(first * k), scale.as_ptr().add(first * blocks), xq.as_ptr().add(r * k), xd.as_ptr().add(r * blocks), blocks, &mut acc) };
            for (j, &a) in acc.iter().enumerate().take(outs - first) {
                out[r * outs + first + j] = finish_q8_0(a, bias.map(|b| b[first + j]));
            }
        }
    }
}

/// acc[j] = the four lane sums of tile row j against one input row: block after block,
/// acc_l += float(lane_l) * (d_w * d_x), the four rows' scales multiplied by d_x in one step.
///
/// The accumulators are written to and read from memory (volatile) once per block, not carried
/// in loop variables (why, at kernels/ort/float/sgemm.rs `columns`): every row's products are then
/// formed right after its own sixteen weights' loads.
///
/// SAFETY: w points at a tile (blocks * ROW_TILE * 32 values), d at its blocks * ROW_TILE scales,
/// x at one input row's blocks * 32 values, xs at its blocks scales.
#[inline(always)]
unsafe fn tile_dot(mut w: *const i8, mut d: *const f32, mut x: *const i16, mut xs: *const f32, blocks: usize, acc: &mut [v128; ROW_TILE]) {
    let acc = acc.as_mut_ptr();
    unsafe {
        for j in 0..ROW_TILE {
            acc.add(j).write_volatile(f32x4_splat(0.0));
        }
        // two blocks per iteration: half the loop's epoch checks and pointer updates
        let mut left = blocks;
        while left >= 2 {
            tile_block(w, d, x, *xs, acc);
            tile_block(w.add(ROW_TILE * Q8_0_BLOCK), d.add(ROW_TILE), x.add(Q8_0_BLOCK), *xs.add(1), acc);
            w = w.add(2 * ROW_TILE * Q8_0_BLOCK);
            d = d.add(2 * ROW_TILE);
            x = x.add(2 * Q8_0_BLOCK);
            xs = xs.add(2);
            left -= 2;
        }
        if left == 1 {
            tile_block(w, d, x, *xs, acc);
        }
    }
}

/// acc[j] += one block of tile row j against the input block at x (scale x_scale).
///
/// SAFETY: w points at a tile's block (ROW_TILE * 32 values), d at its ROW_TILE scales, x at
/// 32 input values, acc at ROW_TILE accumulators.
#[inline(always)]
unsafe fn tile_block(w: *const i8, d: *const f32, x: *const i16, x_scale: f32, acc: *mut v128) {
    unsafe {
        let scales = lane_splats(f32x4_mul(v128_load(d as *const v128), f32x4_splat(x_scale)));
        for (j, &scale) in scales.iter().enumerate() {
            let products = f32x4_mul(f32x4_convert_i32x4(block_lanes(w.add(j * Q8_0_BLOCK), x)), scale);
            acc.add(j).write_volatile(f32x4_add(acc.add(j).read_volatile(), products));
        }
    }
}
