//! onnxruntime's CPU float kernels for an ONNX encoder, as porter/ort_float.py defines them.
//!
//! Same operations, same order, same roundings as the numpy definitions (which were measured
//! against onnxruntime 1.32's MLAS kernels on an AVX2 machine): fused multiply-adds, MLAS's exp
//! and erf polynomials, the 8-lane softmax sum, numpy's pairwise float64 sums for LayerNorm.
//! wasm has no fma instruction; `fma` below is the numpy definition's own: the product is
//! exact in f64 and the sum rounds there before rounding to f32.
//!
//! Scalar code: these kernels serve ONNX graphs, whose reference is onnxruntime; speed here
//! matters less than for the TFLite path, and every step stays visible.

use super::linear_f32::FloatWeights;

#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    (a as f64 * b as f64 + c as f64) as f32
}

// ---- constants (bit patterns of porter/ort_float.py's float32 values) -----------------------

const SUMEXP_LOW: f32 = f32::from_bits(0xc2b0c0a5); // -88.376...: exp's input clamp
const LOG2E: f32 = f32::from_bits(0x3fb8aa3b);
const LN2_HI: f32 = f32::from_bits(0xbf317200);
const LN2_LO: f32 = f32::from_bits(0xb5bfbe8e);
const ROUNDING_MAGIC: f32 = f32::from_bits(0x4b400000); // 1.5 * 2^23
const SUMEXP_POLY: [u32; 6] = [0x3ab4a000, 0x3c092f6e, 0x3d2aadad, 0x3e2aaa28, 0x3efffffb, 0x3f800000];
const ERF_SPLIT: f32 = f32::from_bits(0x3f6c0000); // 0.921875
const ERF_SMALL: [u32; 6] = [0xba1d0d41, 0x3ba39fa4, 0xbcdb45e9, 0x3de70d23, 0xbec09370, 0x3e0375d3];
const ERF_BIG: [u32; 7] = [0x37911480, 0xb9c8e966, 0x3b7e899b, 0xbcc6b180, 0x3ddaae58, 0x3f228550, 0x3e03ce86];
const EXP_POLY: [u32; 7] = [0x3ab54c6d, 0x3c093965, 0x3d2aad10, 0x3e2aaa17, 0x3efffffb, 0x3f800000, 0x3f800000];
const SQRT2: f32 = f32::from_bits(0x3fb504f3);
const SUM_LANES: usize = 8;

#[inline(always)]
fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

// ---- softmax ---------------------------------------------------------------------------------

/// MLAS's exp for softmax: 2^m by range reduction, a degree-6 polynomial, every step an fma.
pub fn sum_exp(x: f32) -> f32 {
    let x = if x < SUMEXP_LOW { SUMEXP_LOW } else { x };
    let biased = fma(x, LOG2E, ROUNDING_MAGIC);
    let m = biased - ROUNDING_MAGIC;
    let r = fma(m, LN2_LO, fma(m, LN2_HI, x));
    // 2^m: the integer in biased's low mantissa bits, moved into the exponent field.
    let scale = f32::from_bits(((biased.to_bits() as i32) << 23).wrapping_add(0x3F80_0000) as u32);
    let mut p = c(SUMEXP_POLY[0]);
    for &k in &SUMEXP_POLY[1..] {
        p = fma(p, r, c(k));
    }
    p = fma(p, r, c(SUMEXP_POLY[5]));
    p * scale
}

/// One 8-lane accumulator over the row, the lanes added in adjacent pairs, then the tail.
fn lane_sum(e: &[f32]) -> f32 {
    let full = e.len() / SUM_LANES * SUM_LANES;
    let mut acc = [0.0f32; SUM_LANES];
    for block in e[..full].chunks_exact(SUM_LANES) {
        for (a, &v) in acc.iter_mut().zip(block) {
            *a += v;
        }
    }
    let mut total = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
    for &v in &e[full..] {
        total += v;
    }
    total
}

/// e = exp(x - max), then e * (1 / sum e), in place.
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().copied().fold(x[0], |m, v| if v > m { v } else { m });
    let neg = -max;
    for v in x.iter_mut() {
        *v = sum_exp(*v + neg);
    }
    let inv = 1.0 / lane_sum(x);
    for v in x.iter_mut() {
        *v *= inv;
    }
}

// ---- erf and GELU ----------------------------------------------------------------------------

/// MLAS's erf (its FMA3 kernel: no clamp of |x|): an odd polynomial up to 0.921875, then
/// 1 - exp(-poly(|x|)) with its own exp polynomial.
pub fn erf(x: f32) -> f32 {
    let a = x.abs();
    let square = a * a;
    let mut small = c(ERF_SMALL[0]);
    for &k in &ERF_SMALL[1..] {
        small = fma(small, square, c(k));
    }
    small = fma(small, a, a);
    let mut big = c(ERF_BIG[0]);
    for &k in &ERF_BIG[1..] {
        big = fma(big, a, c(k));
    }
    let t = -fma(big, a, a);
    let t = if t < SUMEXP_LOW { SUMEXP_LOW } else { t };
    let n = fma(LOG2E, t, ROUNDING_MAGIC) - ROUNDING_MAGIC;
    let f = fma(n, LN2_LO, fma(n, LN2_HI, t));
    let mut e = c(EXP_POLY[0]);
    for &k in &EXP_POLY[1..] {
        e = fma(e, f, c(k));
    }
    // ldexp(e, n): exact in f64, one rounding to f32 (also for a subnormal result).
    let scaled = (e as f64 * 2f64.powi(n as i32)) as f32;
    let big = 1.0 - scaled;
    let v = if a > ERF_SPLIT { big } else { small };
    v.copysign(x)
}

/// h * (0.5 * (erf(h / sqrt 2) + 1)) in the graph's order.
pub fn gelu_erf(h: f32) -> f32 {
    let e = erf(h / SQRT2);
    h * ((e + 1.0) * 0.5)
}

pub fn gelu_erf_in_place(values: &mut [f32]) {
    for v in values {
        *v = gelu_erf(*v);
    }
}

// ---- LayerNormalization ----------------------------------------------------------------------

/// onnxruntime's LayerNormalization AVX2 kernel on one row (at least 8 values; see
/// porter/ort_float.py layer_norm for the order, read from its machine code).
pub fn layer_norm_row(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len();
    let mut lanes = [0.0f64; 4];
    let blocks = n - n % 4;
    for block in x[..blocks].chunks_exact(4) {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            *lane += v as f64;
        }
    }
    let mut total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for &v in &x[blocks..] {
        total += v as f64;
    }
    let mean = (total / n as f64) as f32;
    let inv_std = 1.0 / (squared_deviations(x, mean) / n as f32 + eps).sqrt();
    for i in 0..n {
        out[i] = fma((x[i] - mean) * inv_std, gamma[i], beta[i]);
    }
}

/// Sum of (x - mean)^2: eight fma lanes over blocks of eight, reduced pairwise; then a four-wide
/// step of rounded squares added in order if four or more are left; fma for the last ones.
fn squared_deviations(x: &[f32], mean: f32) -> f32 {
    let n = x.len();
    let mut lanes = [0.0f32; 8];
    let blocks = n - n % 8;
    for block in x[..blocks].chunks_exact(8) {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            let d = v - mean;
            *lane = fma(d, d, *lane);
        }
    }
    let half = [lanes[0] + lanes[4], lanes[1] + lanes[5], lanes[2] + lanes[6], lanes[3] + lanes[7]];
    let mut total = (half[0] + half[2]) + (half[1] + half[3]);
    let mut i = blocks;
    if n - blocks >= 4 {
        for &v in &x[blocks..blocks + 4] {
            let d = v - mean;
            total += d * d;
        }
        i += 4;
    }
    for &v in &x[i..] {
        let d = v - mean;
        total = fma(d, d, total);
    }
    total
}

/// onnxruntime's SkipLayerNormalization float kernel on one row of v = input + skip: Welford's
/// running mean and variance in float32, then (v - mean) / std * gamma + beta, no fma.
pub fn skip_layer_norm_row(v: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) {
    let n = v.len();
    let (mut mean, mut m2) = (0.0f32, 0.0f32);
    for (k, &x) in v.iter().enumerate() {
        let delta = x - mean;
        mean += delta / (k + 1) as f32;
        m2 += (x - mean) * delta;
    }
    let std = (m2 / n as f32 + eps).sqrt();
    for i in 0..n {
        out[i] = (v[i] - mean) / std * gamma[i] + beta[i];
    }
}

// ---- attention -------------------------------------------------------------------------------

/// Attention with onnxruntime's arithmetic for the first `rows` query rows over `keys` keys:
/// scores and context are fma chains in k order (MLAS SGEMM for these sizes), softmax MLAS's.
#[allow(clippy::too_many_arguments)]
pub fn attention(
    heads: usize,
    head_dim: usize,
    scale: f32,
    scale_on_query: bool,
    mask_value: f32,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keep: Option<&[bool]>,
    rows: usize,
    keys: usize,
    ctx: &mut [f32],
    scores: &mut [f32],
) {
    let d = head_dim;
    let hidden = heads * d;
    let scores = &mut scores[..keys];
    for h in 0..heads {
        for i in 0..rows {
            let query = &q[i * hidden + h * d..i * hidden + (h + 1) * d];
            for (j, s) in scores.iter_mut().enumerate() {
                let key = &k[j * hidden + h * d..j * hidden + (h + 1) * d];
                let mut acc = 0.0f32;
                for (&qc, &kc) in query.iter().zip(key) {
                    let qc = if scale_on_query { qc * scale } else { qc };
                    acc = fma(qc, kc, acc);
                }
                *s = if scale_on_query { acc } else { acc * scale };
            }
            if let Some(keep) = keep {
                for (s, &kept) in scores.iter_mut().zip(keep) {
                    if !kept {
                        *s += mask_value;
                    }
                }
            }
            softmax(scores);
            for c in 0..d {
                let mut acc = 0.0f32;
                for (j, &p) in scores.iter().enumerate() {
                    acc = fma(p, v[j * hidden + h * d + c], acc);
                }
                ctx[i * hidden + h * d + c] = acc;
            }
        }
    }
}

// ---- float linear ----------------------------------------------------------------------------

/// Gemm with the bias as C: the dot product in f64 rounded once to f32, then + bias (MLAS
/// blocks long k into several fma chains: this is within an ulp of it, not bit-exact).
pub fn linear(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32]) {
    let k = w.k;
    for r in 0..rows {
        let row = &x[r * k..(r + 1) * k];
        for o in 0..w.outs {
            let mut acc = 0.0f64;
            for (&a, &b) in row.iter().zip(&w.w[o * k..(o + 1) * k]) {
                acc += a as f64 * b as f64;
            }
            let y = acc as f32;
            out[r * w.outs + o] = match w.bias {
                Some(b) => y + b[o],
                None => y,
            };
        }
    }
}
