//! onnxruntime's kernels for QDQ graphs (porter/reference/ort/qdq.py): QuantizeLinear,
//! DequantizeLinear, QLinearMatMul / QGemm (MLAS's integer GEMM and MlasRequantizeOutput),
//! QLinearAdd (MlasQLinearAddKernelAvx2) and QLinearSoftmax.
//!
//! Quantised values travel as i32 here (uint8 and int8 alike: `lo` and `hi` are the type's
//! range). The conversions copy MLAS's: a float is clamped to [lo - zp, hi - zp] with SSE's
//! max / min (a NaN takes the lower bound), rounded half to even, and the zero point added. The
//! products are integer work, exact in any order, so the GEMM with a constant int8 B runs in the
//! int8 GEMM's register tiles (gemm::integer_gemm, its u8 x s8 pairs saturated to int16 where
//! the CPU's kernel saturates); `qgemm_scalar` is the reference it must match.

use super::float::fma;
use crate::kernels::common::gemm::{integer_gemm, pair_dot_scalar, Finish, Int8Weights};
use core::arch::wasm32::*;
use crate::tuning::{GEMM_TILE_OUTS, GEMM_TILE_ROWS};

/// v clamped to [lo - zp, hi - zp] as MLAS's max_ps / min_ps do (a NaN gives the lower bound),
/// rounded half to even, plus zp.
#[inline(always)]
pub fn to_integer(v: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    let (low, high) = ((lo - zp) as f32, (hi - zp) as f32);
    let v = if v > low { v } else { low };
    let v = if v < high { v } else { high };
    v.round_ties_even() as i32 + zp
}

/// QuantizeLinear (MlasQuantizeLinear): x / scale, then to_integer.
#[inline(always)]
pub fn quantize(x: f32, scale: f32, zp: i32, lo: i32, hi: i32) -> i32 {
    to_integer(x / scale, zp, lo, hi)
}

/// DequantizeLinear: float(q - zp) * scale.
#[inline(always)]
pub fn dequantize(q: i32, scale: f32, zp: i32) -> f32 {
    (q - zp) as f32 * scale
}

/// What a QGemm writes: requantised values (as f32, exact integers) or QGemm's float output.
#[derive(Clone, Copy)]
pub enum QgemmOutput {
    Quantized { zp: i32, lo: i32, hi: i32 },
    Float,
}

/// QLinearMatMul / QGemm over `batch` products of a [m, k] and b [k, n]; per output column its
/// B zero point, its scale (a_scale * b_scale / y_scale, or a_scale * b_scale for a float
/// output) and its int32 bias.
pub struct Qgemm<'a> {
    pub batch: usize,
    pub m: usize,
    pub k: usize,
    pub n: usize,
    pub a_zp: i32,
    /// a constant int8 B stored [n, k] (each column's k values together), or None: B is the
    /// step's second operand, an activation [batch, k, n]
    pub b_const: Option<&'a [i8]>,
    pub b_zp: &'a [i32],
    pub scale: &'a [f32],
    pub bias: Option<&'a [i32]>,
    pub output: QgemmOutput,
    /// the u8 x s8 products in int16-saturated pairs (onnxruntime's AVX2 kernel)
    pub saturating: bool,
}

impl Qgemm<'_> {
    /// One output from the raw sum of a * b (the CPU's, pairs saturated or not): the zero
    /// points' terms and the bias in int32, then the float scaling MLAS's output processor does.
    #[inline(always)]
    fn finish(&self, raw: i32, a_sum: i32, b_sum: i32, o: usize) -> f32 {
        let zb = self.b_zp[o];
        let acc = raw - self.a_zp * b_sum - zb * a_sum + self.k as i32 * self.a_zp * zb + self.bias.map_or(0, |b| b[o]);
        match self.output {
            QgemmOutput::Quantized { zp, lo, hi } => to_integer(acc as f32 * self.scale[o], zp, lo, hi) as f32,
            QgemmOutput::Float => acc as f32 * self.scale[o],
        }
    }

    /// Column sums of B (over k), one per output of each batch.
    fn column_sums(&self, b: &[i16]) -> Vec<i32> {
        let (k, n) = (self.k, self.n);
        match self.b_const {
            Some(w) => w.chunks_exact(k).map(|col| col.iter().map(|&v| v as i32).sum()).collect(),
            None => (0..self.batch * n)
                .map(|bo| {
                    let (bi, o) = (bo / n, bo % n);
                    (0..k).map(|j| b[bi * k * n + j * n + o] as i32).sum()
                })
                .collect(),
        }
    }
}

fn row_sums(a: &[i16], rows: usize, k: usize) -> Vec<i32> {
    (0..rows).map(|r| a[r * k..(r + 1) * k].iter().map(|&v| v as i32).sum()).collect()
}

/// The QGemm over quantised a ([batch, m, k], values as i16) and, for an activation B, b
/// ([batch, k, n]); out [batch, m, n].
pub fn qgemm(p: &Qgemm, a: &[i16], b: &[i16], out: &mut [f32]) {
    let Some(w) = p.b_const else { return qgemm_scalar(p, a, b, out) };
    let rows = p.batch * p.m;
    let (a_sums, b_sums) = (row_sums(a, rows, p.k), p.column_sums(b));
    let weights = Int8Weights { w, scale: &[1.0], bias: None, outs: p.n, k: p.k };
    let finish = QgemmFinish { p, a_sums: &a_sums, b_sums: &b_sums };
    if p.saturating {
        integer_gemm::<true, GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, rows, &weights, out, finish);
    } else {
        integer_gemm::<false, GEMM_TILE_ROWS, GEMM_TILE_OUTS>(a, rows, &weights, out, finish);
    }
}

/// The GEMM tiles' outputs: each lane is `Qgemm::finish`, one output at a time (its zero-point
/// terms, bias and requantisation are per output; exact as the scalar path).
#[derive(Clone, Copy)]
struct QgemmFinish<'a> {
    p: &'a Qgemm<'a>,
    a_sums: &'a [i32],
    b_sums: &'a [i32],
}

impl Finish for QgemmFinish<'_> {
    type Columns = usize; // the first of the four outputs

    #[inline(always)]
    fn one(&self, acc: i32, r: usize, o: usize) -> f32 {
        self.p.finish(acc, self.a_sums[r], self.b_sums[o], o)
    }

    #[inline(always)]
    fn columns(&self, o: usize) -> usize {
        o
    }

    #[inline(always)]
    fn four(&self, o: usize, acc: v128, r: usize) -> v128 {
        f32x4(self.one(i32x4_extract_lane::<0>(acc), r, o), self.one(i32x4_extract_lane::<1>(acc), r, o + 1),
              self.one(i32x4_extract_lane::<2>(acc), r, o + 2), self.one(i32x4_extract_lane::<3>(acc), r, o + 3))
    }
}

/// The same, one dot product at a time: the reference of the tiled GEMM, and the kernel of a
/// product of two activations (B packed on the fly in the same pairs: a u8 x s8 product
/// saturates as the constant one does).
pub fn qgemm_scalar(p: &Qgemm, a: &[i16], b: &[i16], out: &mut [f32]) {
    let (m, k, n) = (p.m, p.k, p.n);
    let a_sums = row_sums(a, p.batch * m, k);
    let b_sums = p.column_sums(b);
    let mut column = vec![0i8; k];
    let mut wide = vec![0i32; k];
    for bi in 0..p.batch {
        for o in 0..n {
            match p.b_const {
                Some(w) => column.copy_from_slice(&w[o * k..(o + 1) * k]),
                None => wide.iter_mut().enumerate().for_each(|(j, v)| *v = b[bi * k * n + j * n + o] as i32),
            }
            if p.b_const.is_none() && p.saturating {  // an int8 activation B: its values fit
                column.iter_mut().zip(&wide).for_each(|(c, &v)| *c = v as i8);
            }
            for r in 0..m {
                let row = &a[(bi * m + r) * k..(bi * m + r + 1) * k];
                let raw = if p.b_const.is_some() || p.saturating {
                    pair_dot_scalar(row, &column, p.saturating)
                } else {
                    row.iter().zip(&wide).map(|(&x, &y)| x as i32 * y).sum()
                };
                let b_sum = if p.b_const.is_some() { b_sums[o] } else { b_sums[bi * n + o] };
                out[(bi * m + r) * n + o] = p.finish(raw, a_sums[bi * m + r], b_sum, o);
            }
        }
    }
}

/// QLinearMul (MlasQLinearMul: its SSE2 kernel on every x86 target): the exact product of the
/// centred values as f32, times `ratio` (a_scale * b_scale / c_scale in f32, in that order), plus
/// c's zero point, converted by cvtps_epi32 (half to even; NaN or beyond int32 gives int32's
/// minimum), then the saturating packs: clamped to the type's range.
#[derive(Clone, Copy)]
pub struct QlinearMul {
    pub ratio: f32,
    pub a_zp: i32,
    pub b_zp: i32,
    pub c_zp: f32,
    pub lo: i32,
    pub hi: i32,
}

#[inline(always)]
pub fn qlinear_mul(p: &QlinearMul, a: i32, b: i32) -> i32 {
    let v = ((a - p.a_zp) * (b - p.b_zp)) as f32 * p.ratio + p.c_zp;
    let r = v.round_ties_even();
    let converted = if r.is_nan() || !(-2147483648.0..2147483648.0).contains(&r) { i32::MIN } else { r as i32 };
    converted.clamp(p.lo, p.hi)
}

/// QLinearAdd as MlasQLinearAddKernelAvx2 computes it: ra = a_scale / c_scale, rb = b_scale /
/// c_scale, fixed = zc - fma(ra, za, rb * zb) (porter/codegen computes these as the reference
/// does); an operand that is one value per run (`a_scalar`, `b_scalar`) is folded into the fixed
/// part with a plain multiply and add.
#[derive(Clone, Copy)]
pub struct QlinearAdd {
    pub ra: f32,
    pub rb: f32,
    pub fixed: f32,
    pub a_scalar: bool,
    pub b_scalar: bool,
    pub lo: i32,
    pub hi: i32,
}

#[inline(always)]
pub fn qlinear_add(p: &QlinearAdd, a: i32, b: i32) -> i32 {
    let (a, b) = (a as f32, b as f32);
    let r = if p.a_scalar {
        fma(b, p.rb, p.fixed + a * p.ra)
    } else if p.b_scalar {
        fma(a, p.ra, p.fixed + b * p.rb)
    } else {
        fma(a, p.ra, fma(b, p.rb, p.fixed))
    };
    // cvtps_epi32 then saturating packs: the rounded value clamped to the type's range
    (r.round_ties_even() as i32).clamp(p.lo, p.hi)
}

/// QLinearSoftmax of one row of uint8 values, as onnxruntime 1.32's scalar CPU kernel computes
/// it: table[255 - max + x] summed in order in f32, each output
/// nearbyint(f64(table value) * multiplier / f64(sum)) + zp in f64, saturated to 0..255
/// (`multiplier` is floorf(1 / y_scale), widened to f64).
pub fn qlinear_softmax_row(table: &[f32], multiplier: f64, zp: i32, x: &[u8], out: &mut [u8]) {
    let max = x.iter().copied().max().unwrap_or(0) as usize;
    let value = |v: u8| table[255 - max + v as usize];
    let mut sum = 0.0f32;
    for &v in x {
        sum += value(v);
    }
    let sum = sum as f64;
    for (o, &v) in out.iter_mut().zip(x) {
        let q = (value(v) as f64 * multiplier / sum).round_ties_even() + zp as f64;
        *o = q.clamp(0.0, 255.0) as u8;
    }
}
