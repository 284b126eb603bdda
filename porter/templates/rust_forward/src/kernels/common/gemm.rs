//! The int8 GEMM of a hybrid Linear: y[r][o] = bias[o] + acc * (w_scale[o] * s[r]), where
//! acc = sum_k a[r][k] * w[o][k] over quantised activations a (i16, q - zp) and int8 weights.
//!
//! Integer sums are exact in any order, so the SIMD kernel blocks and reorders them freely: a
//! tile of GEMM_TILE_ROWS activation rows x GEMM_TILE_OUTS weight rows (tuning.rs), 32 k per iteration, each loaded
//! vector reused across the tile, i32x4_dot_i16x8 multiplying and pair-adding in one
//! instruction. The only float step, the dequantisation, keeps the reference's order.
//! onnxruntime's u8 x s8 dot (ort/quant.rs) runs through the same tiles, its int16 pair
//! saturation included, with its own dequantisation.

use core::arch::wasm32::*;

use super::unroll::unrolled;
use crate::model::GEMM_DEPTHS;
use crate::tuning::{GEMM_ROW_BLOCK_BYTES, GEMM_TILE_OUTS, GEMM_TILE_ROWS};

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

/// LiteRT's zero point for int4 weights in its 4-bit kernels: they add 7 to make them unsigned.
const ZERO_POINT_4BIT: i32 = -7;

/// LiteRT's 4-bit kernels take weights in blocks of this many rows by this depth.
const BLOCK_ROWS_4BIT: usize = 4;
const BLOCK_DEPTH_4BIT: usize = 32;

/// Whether LiteRT runs an int4 layer on its 4-bit kernels (at least one weight block, an even
/// depth: fully_connected.cc PrepareImpl); otherwise the int8 hybrid path runs on the same
/// values (porter.reference.quant.uses_4bit_kernels).
pub fn uses_4bit_kernels(outs: usize, k: usize) -> bool {
    outs >= BLOCK_ROWS_4BIT && k >= BLOCK_DEPTH_4BIT && k % 2 == 0
}

impl Int8Weights<'_> {
    /// LiteRT's hybrid int4 output (optimized_4bit, fully_connected_reference.cc): the unsigned
    /// weights' dot acc_u = acc + 7 * sum(q) and the row's offset -7 * sum(q), each times the row
    /// scale then the weight scale, the offset's term first with the bias (if any) added, each
    /// step rounded to float32.
    #[inline(always)]
    fn int4_output(&self, acc: i32, row_sum: i32, o: usize, row_scale: f32) -> f32 {
        let offset = row_sum * ZERO_POINT_4BIT;
        let acc_unsigned = acc - offset;
        let first = offset as f32 * row_scale * self.scale_of(o);
        let first = match self.bias {
            Some(b) => first + b[o],
            None => first,
        };
        first + acc_unsigned as f32 * row_scale * self.scale_of(o)
    }
}

/// Each row's sum of its quantised values (the 4-bit kernels' input offsets before the zero point).
pub fn row_sums(a: &[i16], rows: usize, k: usize, sums: &mut Vec<i32>) {
    sums.clear();
    sums.extend(a[..rows * k].chunks_exact(k.max(1)).map(|row| row.iter().map(|&v| v as i32).sum::<i32>()));
}

/// Scalar reference of the int4 layer: one dot product per (row, output), LiteRT's 4-bit output.
pub fn gemm_int4_scalar(a: &[i16], row_scales: &[f32], rows: usize, w: &Int8Weights, sums: &mut Vec<i32>, out: &mut [f32]) {
    let k = w.k;
    row_sums(a, rows, k, sums);
    for r in 0..rows {
        for o in 0..w.outs {
            let mut acc = 0i32;
            for i in 0..k {
                acc += a[r * k + i] as i32 * w.w[o * k + i] as i32;
            }
            out[r * w.outs + o] = w.int4_output(acc, sums[r], o, row_scales[r]);
        }
    }
}

/// The int4 layer on the register-tiled integer GEMM (its dots are the int8 ones: the weights
/// hold -7..7), with LiteRT's 4-bit output; no all-zero shortcut (the 4-bit kernels have none).
pub fn gemm_int4(a: &[i16], row_scales: &[f32], rows: usize, w: &Int8Weights, sums: &mut Vec<i32>, out: &mut [f32]) {
    row_sums(a, rows, w.k, sums);
    integer_gemm::<false, GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, rows, w, out, Int4Output { w, row_sums: &sums[..], row_scales });
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

/// Register-tiled SIMD GEMM over the first `rows` rows of `a`, in the crate's tile (tuning.rs).
pub fn gemm(a: &[i16], row_scales: &[f32], rows: usize, all_zero: bool, w: &Int8Weights, out: &mut [f32]) {
    gemm_tiled::<GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, row_scales, rows, all_zero, w, out)
}

/// `gemm` in tiles of R activation rows x O outputs: the kernel-check module runs it for every
/// candidate tile `porter build --tune` may choose (porter/codegen/tuning.py GEMM_TILES).
#[inline(always)]
pub fn gemm_tiled<const R: usize, const O: usize>(
    a: &[i16],
    row_scales: &[f32],
    rows: usize,
    all_zero: bool,
    w: &Int8Weights,
    out: &mut [f32],
) {
    if all_zero {
        return w.bias_only(rows, out);
    }
    integer_gemm::<false, R, O>(a, rows, w, out, HybridOutput { w, row_scales });
}

/// How a tile's integer sums become outputs: one at a time, or the four outputs o..o + 4 of a
/// row at once, from what those four share across rows (`columns`): lane by lane the same float
/// steps as `one`, so the same bits.
pub trait Finish: Copy {
    type Columns: Copy;
    fn one(&self, acc: i32, r: usize, o: usize) -> f32;
    fn columns(&self, o: usize) -> Self::Columns;
    fn four(&self, columns: Self::Columns, acc: v128, r: usize) -> v128;
}

/// Four consecutive values of a per-output array (or one per-tensor value in every lane).
#[inline(always)]
pub fn four_of(values: &[f32], o: usize) -> v128 {
    if values.len() == 1 {
        f32x4_splat(values[0])
    } else {
        let four = &values[o..o + 4];
        // SAFETY: the slice holds four values.
        unsafe { v128_load(four.as_ptr() as *const v128) }
    }
}

/// LiteRT's hybrid output: bias + acc * (w_scale * row_scale).
#[derive(Clone, Copy)]
struct HybridOutput<'a> {
    w: &'a Int8Weights<'a>,
    row_scales: &'a [f32],
}

impl Finish for HybridOutput<'_> {
    type Columns = [v128; 2]; // bias (0 without one, as bias_of), weight scales

    #[inline(always)]
    fn one(&self, acc: i32, r: usize, o: usize) -> f32 {
        self.w.dequantize(acc, o, self.row_scales[r])
    }

    #[inline(always)]
    fn columns(&self, o: usize) -> [v128; 2] {
        [self.w.bias.map_or(f32x4_splat(0.0), |b| four_of(b, o)), four_of(self.w.scale, o)]
    }

    #[inline(always)]
    fn four(&self, [bias, scale]: [v128; 2], acc: v128, r: usize) -> v128 {
        let scale = f32x4_mul(scale, f32x4_splat(self.row_scales[r]));
        f32x4_add(bias, f32x4_mul(f32x4_convert_i32x4(acc), scale))
    }
}

/// LiteRT's 4-bit output (`Int8Weights::int4_output`).
#[derive(Clone, Copy)]
struct Int4Output<'a> {
    w: &'a Int8Weights<'a>,
    row_sums: &'a [i32],
    row_scales: &'a [f32],
}

impl Finish for Int4Output<'_> {
    type Columns = (Option<v128>, v128); // bias, weight scales

    #[inline(always)]
    fn one(&self, acc: i32, r: usize, o: usize) -> f32 {
        self.w.int4_output(acc, self.row_sums[r], o, self.row_scales[r])
    }

    #[inline(always)]
    fn columns(&self, o: usize) -> (Option<v128>, v128) {
        (self.w.bias.map(|b| four_of(b, o)), four_of(self.w.scale, o))
    }

    #[inline(always)]
    fn four(&self, (bias, scale): (Option<v128>, v128), acc: v128, r: usize) -> v128 {
        let (offset, row_scale) = (self.row_sums[r] * ZERO_POINT_4BIT, f32x4_splat(self.row_scales[r]));
        let acc_unsigned = i32x4_sub(acc, i32x4_splat(offset));
        let first = f32x4_mul(f32x4_mul(f32x4_splat(offset as f32), row_scale), scale);
        let first = match bias {
            Some(b) => f32x4_add(first, b),
            None => first,
        };
        f32x4_add(first, f32x4_mul(f32x4_mul(f32x4_convert_i32x4(acc_unsigned), row_scale), scale))
    }
}

/// out[r][o] = finish(sum_k a[r][k] * w[o][k], r, o) for the first `rows` rows of `a`, in
/// register tiles of R rows x O outputs. With PAIRS_SATURATE the products are first added in adjacent pairs
/// (k = 2i, 2i + 1) clamped to int16, as onnxruntime's AVX2 u8 x s8 kernel (vpmaddubsw) does;
/// that path needs |a * w| < 2^15 (uint8 activations), so each product is exact in an i16 lane.
#[inline(always)]
pub fn integer_gemm<const PAIRS_SATURATE: bool, const R: usize, const O: usize>(
    a: &[i16],
    rows: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Finish,
) {
    assert!(a.len() >= rows * w.k && out.len() >= rows * w.outs && w.w.len() == w.outs * w.k);
    // The model's Linear depths as constants, so the tile's row strides become load offsets
    // (with a runtime k each row needs an address register, more than Cranelift keeps across
    // the loop header); 0 takes k at run time.
    match w.k {
        k if k == GEMM_DEPTHS[0] => row_blocks::<R, O, PAIRS_SATURATE, { GEMM_DEPTHS[0] }>(a, rows, w, out, finish),
        k if k == GEMM_DEPTHS[1] => row_blocks::<R, O, PAIRS_SATURATE, { GEMM_DEPTHS[1] }>(a, rows, w, out, finish),
        _ => row_blocks::<R, O, PAIRS_SATURATE, 0>(a, rows, w, out, finish),
    }
}

/// Every output of the first `rows` rows, R rows at a time, the rows left over in blocks of 4,
/// 2 and 1 (a short input's rows are few: each block shares its weights among its rows); K is
/// w.k or 0.
#[inline(always)]
fn row_blocks<const R: usize, const O: usize, const S: bool, const K: usize>(
    a: &[i16],
    rows: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Finish,
) {
    // rows too long to keep R of them in L1 beside the weights: blocks of 4
    let long_rows = R > 4 && R * (if K == 0 { w.k } else { K }) * 2 > GEMM_ROW_BLOCK_BYTES;
    let mut r0 = 0;
    while !long_rows && r0 + R <= rows {
        row_block::<R, O, S, K>(a, r0, w, out, finish);
        r0 += R;
    }
    while R > 4 && r0 + 4 <= rows {
        row_block::<4, O, S, K>(a, r0, w, out, finish);
        r0 += 4;
    }
    if R > 2 && r0 + 2 <= rows {
        row_block::<2, O, S, K>(a, r0, w, out, finish);
        r0 += 2;
    }
    if R > 1 && r0 < rows {
        row_block::<1, O, S, K>(a, r0, w, out, finish);
    }
}

/// All outputs of M activation rows starting at r0, O outputs at a time, then one at a time.
/// (A function of its own: inlined into each of row_blocks' calls, the checks module's many
/// tiles would take minutes to compile.)
#[inline(never)]
fn row_block<const M: usize, const O: usize, const S: bool, const K: usize>(
    a: &[i16],
    r0: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Finish,
) {
    let mut o0 = 0;
    while o0 + O <= w.outs {
        store_tile::<M, O, S, K>(a, r0, o0, w, out, finish);
        o0 += O;
    }
    while o0 < w.outs {
        store_tile::<M, 1, S, K>(a, r0, o0, w, out, finish);
        o0 += 1;
    }
}

/// The tile's outputs: a row's sums of four outputs reduced to one vector and finished together.
#[inline(always)]
fn store_tile<const M: usize, const N: usize, const S: bool, const K: usize>(
    a: &[i16],
    r0: usize,
    o0: usize,
    w: &Int8Weights,
    out: &mut [f32],
    finish: impl Finish,
) {
    let k = if K == 0 { w.k } else { K };
    let (a, ws) = (&a[r0 * k..(r0 + M) * k], &w.w[o0 * k..(o0 + N) * k]);
    let mut sums = [[i32x4_splat(0); N]; M];
    let s = sums.as_mut_ptr() as *mut v128;
    // read back as the steps wrote them (volatile): a plain read lets the compilers keep the
    // last step's sums in registers into the loop's exit, spilled in every iteration
    // SAFETY: s holds M x N sums.
    let sum = |r: usize, c: usize| unsafe { s.add(r * N + c).read_volatile() };
    // SAFETY: the slices hold the tile's M rows and N weight rows of k values each.
    unsafe {
        let (a, ws) = (a.as_ptr(), ws.as_ptr());
        // eight weight vectors held: 16 k of four columns, 32 of two, 64 of one
        match N {
            1 => tile_sums::<M, N, S, 8>(a, ws, k, s),
            2 => tile_sums::<M, N, S, 4>(a, ws, k, s),
            4 => tile_sums::<M, N, S, 2>(a, ws, k, s),
            _ => unreachable!("GEMM tiles have 1, 2 or 4 outputs (porter/codegen/tuning.py)"),
        }
    }
    let full = k / NARROW_K * NARROW_K;
    let tail = |r: usize, c: usize| pair_dot_scalar(&a[r * k + full..(r + 1) * k], &ws[c * k + full..(c + 1) * k], S);
    if N == 4 {
        let columns = finish.columns(o0);
        unrolled::<M>(|r| {
            let mut acc = reduce_four([sum(r, 0), sum(r, 1), sum(r, 2), sum(r, 3)]);
            if full < k {
                acc = i32x4_add(acc, i32x4(tail(r, 0), tail(r, 1), tail(r, 2), tail(r, 3)));
            }
            let row = &mut out[(r0 + r) * w.outs + o0..][..4];
            // SAFETY: row holds four values.
            unsafe { v128_store(row.as_mut_ptr() as *mut v128, finish.four(columns, acc, r0 + r)) };
        });
    } else {
        for r in 0..M {
            for c in 0..N {
                let v = sum(r, c);
                let acc = i32x4_extract_lane::<0>(v) + i32x4_extract_lane::<1>(v) + i32x4_extract_lane::<2>(v)
                    + i32x4_extract_lane::<3>(v) + tail(r, c);
                out[(r0 + r) * w.outs + o0 + c] = finish.one(acc, r0 + r, o0 + c);
            }
        }
    }
}

/// [sum of s[0]'s lanes, .., sum of s[3]'s lanes] (integer sums: exact in any order).
#[inline(always)]
fn reduce_four(s: [v128; 4]) -> v128 {
    let t0 = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(s[0], s[1]), i32x4_shuffle::<2, 6, 3, 7>(s[0], s[1]));
    let t1 = i32x4_add(i32x4_shuffle::<0, 4, 1, 5>(s[2], s[3]), i32x4_shuffle::<2, 6, 3, 7>(s[2], s[3]));
    i32x4_add(i32x4_shuffle::<0, 1, 4, 5>(t0, t1), i32x4_shuffle::<2, 3, 6, 7>(t0, t1))
}

/// The tiles' steps cover k in multiples of this; the rest goes to pair_dot_scalar.
const NARROW_K: usize = 16;

/// sums[r][c] += the products of M activation rows with N weight rows (row stride k each),
/// four lanes of partial sums per (row, output), over the first k / NARROW_K * NARROW_K values:
/// steps of 8H values, two per loop iteration (half the back-edges and epoch checks), then
/// narrower steps.
///
/// The tile's sums go through memory (volatile reads and writes) once per step rather than
/// being carried in loop variables: why, at ort/float/sgemm.rs `columns`. (Cranelift does not
/// fold a v128 load into an instruction's operand, so each costs a load and a store.)
#[inline(always)]
unsafe fn tile_sums<const M: usize, const N: usize, const S: bool, const H: usize>(
    a: *const i16,
    w: *const i8,
    k: usize,
    sums: *mut v128,
) {
    let width = 8 * H;
    let mut i = 0;
    while i + 2 * width <= k {
        step::<M, N, S, H>(a.add(i), w.add(i), k, sums);
        step::<M, N, S, H>(a.add(i + width), w.add(i + width), k, sums);
        i += 2 * width;
    }
    if i + width <= k {
        step::<M, N, S, H>(a.add(i), w.add(i), k, sums);
        i += width;
    }
    if H > 4 && i + 2 * NARROW_K <= k {
        step::<M, N, S, 4>(a.add(i), w.add(i), k, sums);
        i += 2 * NARROW_K;
    }
    if H > 2 && i + NARROW_K <= k {
        step::<M, N, S, 2>(a.add(i), w.add(i), k, sums);
    }
}

/// sums[r][c] += the products of 8 * H values (H even) of row r (a + r * k) and column c
/// (w + c * k). The columns' weights are loaded (widened) once and held while each row's
/// activations are loaded in turn and used by every column: one widening per 8M products, each
/// loaded activation used N times.
///
/// With S each pair (k = 2i, 2i + 1) is saturated to int16 first: even and odd values are split
/// into their own vectors, so one i16x8.add_sat_s forms eight saturated pair sums (vpmaddubsw's
/// arithmetic), each product exact in an i16 lane (|a * w| <= 255 * 128).
#[inline(always)]
unsafe fn step<const M: usize, const N: usize, const S: bool, const H: usize>(a: *const i16, w: *const i8, k: usize, sums: *mut v128) {
    let weights: [[v128; H]; N] = core::array::from_fn(|c| {
        let column = w.add(c * k);
        let mut v = [i32x4_splat(0); H];
        for h in (0..H).step_by(2) {
            [v[h], v[h + 1]] = if S {
                // i16 lane j of sixteen weights holds w[2j] in its low byte and w[2j + 1] in its high one
                let w16 = v128_load(column.add(8 * h) as *const v128);
                [i16x8_shr(i16x8_shl(w16, 8), 8), i16x8_shr(w16, 8)]
            } else {
                [i16x8_load_extend_i8x8(column.add(8 * h)), i16x8_load_extend_i8x8(column.add(8 * h + 8))]
            };
        }
        v
    });
    let ones = i16x8_splat(1);
    unrolled::<M>(|r| {
        let row = a.add(r * k);
        let mut acts = [i32x4_splat(0); H];
        for h in (0..H).step_by(2) {
            let (lo, hi) = (v128_load(row.add(8 * h) as *const v128), v128_load(row.add(8 * h + 8) as *const v128));
            [acts[h], acts[h + 1]] = if S { split_even_odd(lo, hi) } else { [lo, hi] };
        }
        for (c, weights) in weights.iter().enumerate() {
            let pair = |h: usize| {
                if S {
                    let sixteen = i16x8_add_sat(i16x8_mul(acts[h], weights[h]), i16x8_mul(acts[h + 1], weights[h + 1]));
                    i32x4_dot_i16x8(sixteen, ones)
                } else {
                    i32x4_add(i32x4_dot_i16x8(acts[h], weights[h]), i32x4_dot_i16x8(acts[h + 1], weights[h + 1]))
                }
            };
            let mut products = pair(0);
            for h in (2..H).step_by(2) {
                products = i32x4_add(products, pair(h));
            }
            let sum = sums.add(r * N + c);
            sum.write_volatile(i32x4_add(products, sum.read_volatile()));
        }
    });
}

/// Sixteen i16 values as [even-index values, odd-index values].
#[inline(always)]
fn split_even_odd(lo: v128, hi: v128) -> [v128; 2] {
    [
        i8x16_shuffle::<0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28, 29>(lo, hi),
        i8x16_shuffle::<2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30, 31>(lo, hi),
    ]
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
