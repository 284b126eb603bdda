//! onnxruntime's CPU float kernels for an ONNX encoder, as porter/ort_float.py defines them.
//!
//! Same operations, same order, same roundings as the numpy definitions (which were measured
//! against onnxruntime 1.32's MLAS kernels on an AVX2 and an AVX-512 machine): fused
//! multiply-adds, MLAS's exp and erf polynomials and softmax sum, its LayerNorm kernels, its
//! SGEMM blocking. Of these only softmax depends on the CPU: `OrtFloats` names the kernels.
//!
//! wasm has no fma instruction. `fma` below emulates a correctly rounded one in f64, and, in
//! crates built with the `fused-madd` feature, the matrix products (several outputs at a time)
//! and the one-input functions erf, GELU and softmax's exp (four lanes at a time) use
//! f32x4.relaxed_madd when a probe shows that this engine fuses it (wasmtime does on x86 with
//! FMA and on ARM); both give the same bits, so the choice never shows in a result, only in
//! the time. (LLVM enables a wasm target feature for the whole module, so crates that
//! run LiteRT's arithmetic are built without it and keep their kernels' standard SIMD code.)

use core::arch::wasm32::*;
#[cfg(feature = "fused-madd")]
use core::sync::atomic::{AtomicU8, Ordering};

use super::linear_f32::FloatWeights;

/// fmaf, correctly rounded (porter/ort_float.py `_fma`): the float64 product is exact, the
/// float64 sum is rounded to odd (nudged off an even last bit when inexact, its error found by
/// TwoSum), so that the one rounding to float32 is the hardware fma's.
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let (p, c) = (a as f64 * b as f64, c as f64);
    let s = p + c;
    let back = s - p;
    let error = (p - (s - back)) + (c - back);
    let bits = s.to_bits();
    if error != 0.0 && bits & 1 == 0 && s.is_finite() {
        let away_from_zero = (error > 0.0) == (s > 0.0);
        return f64::from_bits(if away_from_zero { bits + 1 } else { bits - 1 }) as f32;
    }
    s as f32
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
const SQRT1_2: f32 = f32::from_bits(0x3f3504f3);
/// The largest power of two the exponentials are scaled by in f64 (beyond it the f32 result is
/// 0 or infinite either way, and 2^n stays exact in f64).
const SCALE_LIMIT: i32 = 300;

#[inline(always)]
fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

// ---- softmax ---------------------------------------------------------------------------------

/// Which of MLAS's float kernel families a crate reproduces (porter/reference/ort_cpu.py): on
/// these graphs they differ in softmax alone.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OrtFloats {
    /// MlasComputeSumExpF32KernelFma3: 2^m built from m's bits, an 8-lane sum.
    Avx2,
    /// MlasComputeSumExpF32KernelAvx512F: 2^m applied by vscalefps, a 16-lane sum.
    Avx512,
}

impl OrtFloats {
    /// Softmax's exp on this family's kernel.
    pub fn exp(self) -> Elementwise {
        match self {
            OrtFloats::Avx2 => Elementwise::Exp,
            OrtFloats::Avx512 => Elementwise::ExpScalef,
        }
    }
}

/// exp(x) = p * 2^m for MLAS's exp: (p, m, biased), m an integer in f32 and in biased's low
/// mantissa bits. Range reduction by 2^m, a degree-6 polynomial, every step an fma.
#[inline(always)]
fn exp_parts(x: f32) -> (f32, f32, f32) {
    let x = if x < SUMEXP_LOW { SUMEXP_LOW } else { x };
    let biased = fma(x, LOG2E, ROUNDING_MAGIC);
    let m = biased - ROUNDING_MAGIC;
    let r = fma(m, LN2_LO, fma(m, LN2_HI, x));
    let mut p = c(SUMEXP_POLY[0]);
    for &k in &SUMEXP_POLY[1..] {
        p = fma(p, r, c(k));
    }
    (fma(p, r, c(SUMEXP_POLY[5])), m, biased)
}

/// MLAS's exp for softmax, as its AVX2 kernel scales it: 2^m is the integer in biased's low
/// mantissa bits moved into the exponent field (0 from m = -127 down).
pub fn sum_exp(x: f32) -> f32 {
    let (p, _, biased) = exp_parts(x);
    p * f32::from_bits(((biased.to_bits() as i32) << 23).wrapping_add(0x3F80_0000) as u32)
}

/// The same exp as its AVX-512F kernel scales it: vscalefps, p * 2^m rounded once (a subnormal
/// from m = -127 down). Exact in f64 for |m| up to SCALE_LIMIT, past which f32 saturates anyway.
pub fn sum_exp_scalef(x: f32) -> f32 {
    let (p, m, _) = exp_parts(x);
    (p as f64 * 2f64.powi((m as i32).clamp(-SCALE_LIMIT, SCALE_LIMIT))) as f32
}

/// The sum of a row of exponentials as the family's kernel adds them: one accumulator of its
/// width over the row, the tail added into its first lanes (MLAS loads it masked); AVX-512F then
/// adds the upper eight lanes onto the lower eight; the eight are added in adjacent pairs.
fn lane_sum(e: &[f32], floats: OrtFloats) -> f32 {
    let acc = match floats {
        OrtFloats::Avx2 => running_sums::<8>(e),
        OrtFloats::Avx512 => {
            let wide = running_sums::<16>(e);
            core::array::from_fn(|i| wide[i + 8] + wide[i])
        }
    };
    ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

/// N running sums, value i of the row into sum i % N.
#[inline(always)]
fn running_sums<const N: usize>(e: &[f32]) -> [f32; N] {
    let mut acc = [0.0f32; N];
    for block in e.chunks(N) {
        for (a, &v) in acc.iter_mut().zip(block) {
            *a += v;
        }
    }
    acc
}

/// e = exp(x - max), then e * (1 / sum e), in place, with the family's exp and sum.
pub fn softmax(x: &mut [f32], floats: OrtFloats) {
    let max = x.iter().copied().fold(x[0], |m, v| if v > m { v } else { m });
    let neg = -max;
    for v in x.iter_mut() {
        *v += neg;
    }
    apply_in_place(floats.exp(), x);
    let inv = 1.0 / lane_sum(x, floats);
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
    h * ((erf(h / SQRT2) + 1.0) * 0.5)
}

/// The same with erf(h * (1 / sqrt 2)): onnxruntime's Gelu kernel.
pub fn gelu_erf_mul(h: f32) -> f32 {
    h * ((erf(h * SQRT1_2) + 1.0) * 0.5)
}

pub fn gelu_erf_in_place(values: &mut [f32]) {
    apply_in_place(Elementwise::Gelu, values);
}

pub fn gelu_erf_mul_in_place(values: &mut [f32]) {
    apply_in_place(Elementwise::GeluMul, values);
}

/// The one-input functions above, applied over a slice.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Elementwise {
    Erf,
    Gelu,
    GeluMul,
    /// softmax's exp, AVX2 kernel
    Exp,
    /// softmax's exp, AVX-512F kernel
    ExpScalef,
}

impl Elementwise {
    pub fn scalar(self) -> fn(f32) -> f32 {
        match self {
            Elementwise::Erf => erf,
            Elementwise::Gelu => gelu_erf,
            Elementwise::GeluMul => gelu_erf_mul,
            Elementwise::Exp => sum_exp,
            Elementwise::ExpScalef => sum_exp_scalef,
        }
    }
}

/// f over every value: four lanes at a time with relaxed_madd where the engine fuses it
/// (fused_in_place), the rest one at a time through the scalar emulation. Same bits either way.
pub fn apply_in_place(f: Elementwise, values: &mut [f32]) {
    let done = fused_in_place(f, values);
    apply_in_place_scalar(f, &mut values[done..]);
}

pub fn apply_in_place_scalar(f: Elementwise, values: &mut [f32]) {
    let f = f.scalar();
    for v in values {
        *v = f(*v);
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

// ---- matrix products (MLAS SGEMM) ------------------------------------------------------------

/// MLAS's block sizes (MLAS_SGEMM_STRIDEN/K, MLAS_SGEMM_PACKED_STRIDEK), written as powers of
/// two: they are its constants, not a model's shapes.
const STRIDE: usize = 1 << 7;
/// The depth of MLAS's blocks of a prepacked B (a constant weight).
pub const PACKED_STRIDE_K: usize = 1 << 8;

/// The depth of MLAS's SGEMM blocks for an n-column product over k (porter/ort_float.py
/// stride_k): fixed for a prepacked B; otherwise 128, doubled while the N stride (128, halved
/// each time, down to 16) still covers n, when n < k.
pub fn stride_k(n: usize, k: usize, prepacked: bool) -> usize {
    if prepacked {
        return PACKED_STRIDE_K;
    }
    let (mut stride_n, mut depth) = (STRIDE, STRIDE);
    if n < k {
        while stride_n > 16 && stride_n / 2 >= n {
            stride_n /= 2;
            depth *= 2;
        }
    }
    depth
}

/// One output of MLAS's SGEMM: for each block of `block` along k an fma chain in k order from
/// zero, then c = fma(chain, alpha, c) (the first block is chain * alpha when there is no c).
#[inline(always)]
pub fn sgemm_dot(depth: usize, block: usize, a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32, c: Option<f32>, alpha: f32) -> f32 {
    let mut out = c;
    for start in (0..depth).step_by(block) {
        let mut chain = 0.0f32;
        for i in start..depth.min(start + block) {
            chain = fma(a(i), b(i), chain);
        }
        out = Some(out.map_or(chain * alpha, |v| fma(chain, alpha, v)));
    }
    out.unwrap_or(0.0)
}

/// One output of MLAS's M = 1 kernel (a one-row MatMul of two activations): k in groups of
/// four, then two, then one; each group's rounded products added left to right (no fma), then
/// added to the result, which starts at zero.
#[inline(always)]
pub fn m1_dot(depth: usize, a: impl Fn(usize) -> f32, b: impl Fn(usize) -> f32) -> f32 {
    let mut out = 0.0f32;
    let mut i = 0;
    for group in [4, 2, 1] {
        while depth - i >= group {
            let mut t = a(i) * b(i);
            for j in i + 1..i + group {
                t += a(j) * b(j);
            }
            out = t + out;
            i += group;
            if group < 4 {
                break;
            }
        }
    }
    out
}

// ---- the same products four outputs at a time, with a fused relaxed_madd --------------------

#[cfg(feature = "fused-madd")]
static MADD: AtomicU8 = AtomicU8::new(0); // 0: not probed yet, 1: unfused, 2: fused

/// Whether f32x4.relaxed_madd rounds once on this engine (probed once: a case where a product
/// rounded before the add gives another result); false in crates without `fused-madd`.
pub fn fused_madd() -> bool {
    #[cfg(feature = "fused-madd")]
    {
        if MADD.load(Ordering::Relaxed) == 0 {
            // SAFETY: an engine that validated this module runs relaxed-simd instructions.
            let fused = unsafe { madd_is_fused() };
            MADD.store(if fused { 2 } else { 1 }, Ordering::Relaxed);
        }
        MADD.load(Ordering::Relaxed) == 2
    }
    #[cfg(not(feature = "fused-madd"))]
    false
}

#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn madd_is_fused() -> bool {
    let a = core::hint::black_box(1.0f32 + 1.0 / 4096.0);
    let c = core::hint::black_box(-1.0f32);
    f32x4_extract_lane::<0>(f32x4_relaxed_madd(f32x4_splat(a), f32x4_splat(a), f32x4_splat(c))) == fma(a, a, c)
}

/// How many leading values fused_lanes computed (a multiple of four), 0 where unfused.
#[cfg(feature = "fused-madd")]
fn fused_in_place(f: Elementwise, values: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY: probed above.
    unsafe { fused_lanes(f, values) }
}

#[cfg(not(feature = "fused-madd"))]
fn fused_in_place(_: Elementwise, _: &mut [f32]) -> usize {
    0
}

#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn fused_lanes(f: Elementwise, values: &mut [f32]) -> usize {
    let full = values.len() / 4 * 4;
    for four in values[..full].chunks_exact_mut(4) {
        let p = four.as_mut_ptr() as *mut v128;
        // SAFETY: four values, read and written in place.
        unsafe {
            let x = v128_load(p);
            let y = match f {
                Elementwise::Erf => erf_x4(x),
                Elementwise::Gelu => gelu_x4(x, f32x4_div(x, f32x4_splat(SQRT2))),
                Elementwise::GeluMul => gelu_x4(x, f32x4_mul(x, f32x4_splat(SQRT1_2))),
                Elementwise::Exp => sum_exp_x4(x),
                Elementwise::ExpScalef => sum_exp_scalef_x4(x),
            };
            v128_store(p, y);
        }
    }
    full
}

/// `fma` on four lanes: relaxed_madd, which fused_madd() showed to round once.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn fma4(a: v128, b: v128, c: v128) -> v128 {
    f32x4_relaxed_madd(a, b, c)
}

/// A polynomial's Horner steps (coefficients from the highest power) as `fma`s.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn horner4(coefficients: &[u32], x: v128) -> v128 {
    let mut acc = f32x4_splat(c(coefficients[0]));
    for &k in &coefficients[1..] {
        acc = fma4(acc, x, f32x4_splat(c(k)));
    }
    acc
}

/// exp_parts lane by lane: [p, m, biased].
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn exp_parts_x4(x: v128) -> [v128; 3] {
    let x = f32x4_pmax(x, f32x4_splat(SUMEXP_LOW)); // x < LOW ? LOW : x, NaN kept
    let biased = fma4(x, f32x4_splat(LOG2E), f32x4_splat(ROUNDING_MAGIC));
    let m = f32x4_sub(biased, f32x4_splat(ROUNDING_MAGIC));
    let r = fma4(m, f32x4_splat(LN2_LO), fma4(m, f32x4_splat(LN2_HI), x));
    [fma4(horner4(&SUMEXP_POLY, r), r, f32x4_splat(c(SUMEXP_POLY[5]))), m, biased]
}

/// sum_exp lane by lane.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn sum_exp_x4(x: v128) -> v128 {
    let [p, _, biased] = exp_parts_x4(x);
    f32x4_mul(p, i32x4_add(i32x4_shl(biased, 23), i32x4_splat(0x3F80_0000)))
}

/// sum_exp_scalef lane by lane. Where every lane's 2^m is a normal float one f32 product rounds
/// p * 2^m once, as vscalefps does; otherwise (a masked key's m = -127, or NaN) ldexp_x4 in f64.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn sum_exp_scalef_x4(x: v128) -> v128 {
    let [p, m, _] = exp_parts_x4(x);
    let n = i32x4_trunc_sat_f32x4(m);
    if i32x4_all_true(v128_and(f32x4_ge(m, f32x4_splat(-126.0)), f32x4_le(m, f32x4_splat(127.0)))) {
        return f32x4_mul(p, i32x4_shl(i32x4_add(n, i32x4_splat(127)), 23));
    }
    ldexp_x4(p, i32x4_max(i32x4_min(n, i32x4_splat(SCALE_LIMIT)), i32x4_splat(-SCALE_LIMIT)))
}

/// erf lane by lane.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn erf_x4(x: v128) -> v128 {
    let a = f32x4_abs(x);
    let small = fma4(horner4(&ERF_SMALL, f32x4_mul(a, a)), a, a);
    let t = f32x4_neg(fma4(horner4(&ERF_BIG, a), a, a));
    let t = f32x4_pmax(t, f32x4_splat(SUMEXP_LOW));
    let n = f32x4_sub(fma4(f32x4_splat(LOG2E), t, f32x4_splat(ROUNDING_MAGIC)), f32x4_splat(ROUNDING_MAGIC));
    let f = fma4(n, f32x4_splat(LN2_LO), fma4(n, f32x4_splat(LN2_HI), t));
    let big = f32x4_sub(f32x4_splat(1.0), ldexp_x4(horner4(&EXP_POLY, f), i32x4_trunc_sat_f32x4(n)));
    let v = v128_bitselect(big, small, f32x4_gt(a, f32x4_splat(ERF_SPLIT)));
    v128_bitselect(x, v, i32x4_splat(i32::MIN)) // copysign(v, x)
}

/// h * ((erf(x) + 1) * 0.5) lane by lane, x being h / sqrt 2 or h * (1 / sqrt 2).
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn gelu_x4(h: v128, x: v128) -> v128 {
    f32x4_mul(h, f32x4_mul(f32x4_add(erf_x4(x), f32x4_splat(1.0)), f32x4_splat(0.5)))
}

/// e * 2^n per lane as erf's scalar `(e as f64 * 2f64.powi(n)) as f32`: exact in f64, one rounding.
#[cfg(feature = "fused-madd")]
#[inline(always)]
fn ldexp_x4(e: v128, n: v128) -> v128 {
    let pow2 = |n: v128| i64x2_shl(i64x2_add(n, i64x2_splat(1023)), 52);
    let low = f64x2_mul(f64x2_promote_low_f32x4(e), pow2(i64x2_extend_low_i32x4(n)));
    let high = f64x2_mul(f64x2_promote_low_f32x4(i32x4_shuffle::<2, 3, 0, 1>(e, e)), pow2(i64x2_extend_high_i32x4(n)));
    i32x4_shuffle::<0, 1, 4, 5>(f32x4_demote_f64x2_zero(low), f32x4_demote_f64x2_zero(high))
}

#[inline(always)]
fn lanes(v: v128) -> [f32; 4] {
    [f32x4_extract_lane::<0>(v), f32x4_extract_lane::<1>(v), f32x4_extract_lane::<2>(v), f32x4_extract_lane::<3>(v)]
}

/// out[o] = the SGEMM product of x (k values) with row o of w (rows `ldw` apart), o < outs,
/// each output as `sgemm_dot` computes it, with c[o] as its initial C when given.
#[allow(clippy::too_many_arguments)]
pub fn sgemm_outputs(x: &[f32], w: &[f32], ldw: usize, outs: usize, block: usize, alpha: f32, c: Option<&[f32]>, out: &mut [f32]) {
    let k = x.len();
    for o in fused_output_tiles(x, w, ldw, outs, block, alpha, c, out)..outs {
        let row = &w[o * ldw..o * ldw + k];
        out[o] = sgemm_dot(k, block, |i| x[i], |i| row[i], c.map(|c| c[o]), alpha);
    }
}

/// The outputs sgemm_outputs takes with relaxed_madd, in tiles of two groups of four outputs
/// (two independent chains hide relaxed_madd's latency; four measured slower on the Linears),
/// then of one group: how many it computed.
#[cfg(feature = "fused-madd")]
#[allow(clippy::too_many_arguments)]
fn fused_output_tiles(x: &[f32], w: &[f32], ldw: usize, outs: usize, block: usize, alpha: f32, c: Option<&[f32]>, out: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY (both tiles): fused_madd() was probed above; tile_outputs checks its slice bounds.
    let o = fill_tiles::<2>(0, outs, out, |o| unsafe { tile_outputs::<2>(x, &w[o * ldw..], ldw, block, alpha, c.map(|c| &c[o..o + 8])) });
    fill_tiles::<1>(o, outs, out, |o| unsafe { tile_outputs::<1>(x, &w[o * ldw..], ldw, block, alpha, c.map(|c| &c[o..o + 4])) })
}

#[cfg(not(feature = "fused-madd"))]
#[allow(clippy::too_many_arguments)]
fn fused_output_tiles(_: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: f32, _: Option<&[f32]>, _: &mut [f32]) -> usize {
    0
}

/// out[i..] in tiles of G groups of four values, tile(i) computing the tile at i, from `first`
/// on while a whole tile fits in n: the index after the last tile.
#[cfg(feature = "fused-madd")]
#[inline(always)]
fn fill_tiles<const G: usize>(first: usize, n: usize, out: &mut [f32], tile: impl Fn(usize) -> [v128; G]) -> usize {
    let mut i = first;
    while i + 4 * G <= n {
        for (g, group) in tile(i).into_iter().enumerate() {
            out[i + 4 * g..i + 4 * g + 4].copy_from_slice(&lanes(group));
        }
        i += 4 * G;
    }
    i
}

/// 4G rows of w against x: each four-by-four block of a group is transposed so that one
/// relaxed_madd advances its four outputs' chains by one step of k, in k order.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn tile_outputs<const G: usize>(x: &[f32], w: &[f32], ldw: usize, block: usize, alpha: f32, c: Option<&[f32]>) -> [v128; G] {
    let k = x.len();
    assert!(w.len() >= (4 * G - 1) * ldw + k);
    let mut result = c.map(|c| core::array::from_fn::<v128, G, _>(|g| f32x4(c[4 * g], c[4 * g + 1], c[4 * g + 2], c[4 * g + 3])));
    for start in (0..k).step_by(block) {
        let end = k.min(start + block);
        let mut chains = [f32x4_splat(0.0); G];
        let mut i = start;
        while i + 4 <= end {
            // SAFETY: i + 4 <= k and the tile's rows lie inside w (asserted).
            let xs = lane_splats(unsafe { v128_load(x.as_ptr().add(i) as *const v128) });
            for (group, chain) in chains.iter_mut().enumerate() {
                let p = unsafe { w.as_ptr().add(group * 4 * ldw + i) };
                let r = unsafe { [0, 1, 2, 3].map(|row| v128_load(p.add(row * ldw) as *const v128)) };
                for (step, column) in transpose(r).into_iter().enumerate() {
                    *chain = f32x4_relaxed_madd(xs[step], column, *chain);
                }
            }
            i += 4;
        }
        for i in i..end {
            for (group, chain) in chains.iter_mut().enumerate() {
                let row = |r: usize| w[(group * 4 + r) * ldw + i];
                *chain = f32x4_relaxed_madd(f32x4_splat(x[i]), f32x4(row(0), row(1), row(2), row(3)), *chain);
            }
        }
        let alpha = f32x4_splat(alpha);
        result = Some(match result {
            None => chains.map(|chain| f32x4_mul(chain, alpha)),
            Some(c) => core::array::from_fn(|g| f32x4_relaxed_madd(chains[g], alpha, c[g])),
        });
    }
    result.unwrap_or([f32x4_splat(0.0); G])
}

/// Each lane of v in all four lanes (Cranelift turns a scalar load and splat into a load, a
/// move and a broadcast; one vector load and four shuffles are cheaper).
#[inline(always)]
pub fn lane_splats(v: v128) -> [v128; 4] {
    [i32x4_shuffle::<0, 0, 0, 0>(v, v), i32x4_shuffle::<1, 1, 1, 1>(v, v), i32x4_shuffle::<2, 2, 2, 2>(v, v), i32x4_shuffle::<3, 3, 3, 3>(v, v)]
}

/// Rows r[0..4] of four values -> columns: column j holds r[0][j], r[1][j], r[2][j], r[3][j].
#[cfg(feature = "fused-madd")]
#[inline(always)]
fn transpose(r: [v128; 4]) -> [v128; 4] {
    let (t0, t1) = (i32x4_shuffle::<0, 4, 1, 5>(r[0], r[1]), i32x4_shuffle::<2, 6, 3, 7>(r[0], r[1]));
    let (t2, t3) = (i32x4_shuffle::<0, 4, 1, 5>(r[2], r[3]), i32x4_shuffle::<2, 6, 3, 7>(r[2], r[3]));
    [
        i32x4_shuffle::<0, 1, 4, 5>(t0, t2),
        i32x4_shuffle::<2, 3, 6, 7>(t0, t2),
        i32x4_shuffle::<0, 1, 4, 5>(t1, t3),
        i32x4_shuffle::<2, 3, 6, 7>(t1, t3),
    ]
}

/// out[c] = the SGEMM product of p (k values) with column c of v (rows `ldv` apart), c < d.
pub fn sgemm_columns(p: &[f32], v: &[f32], ldv: usize, d: usize, block: usize, alpha: f32, out: &mut [f32]) {
    let k = p.len();
    for c in fused_column_groups(p, v, ldv, d, block, alpha, out)..d {
        out[c] = sgemm_dot(k, block, |j| p[j], |j| v[j * ldv + c], None, alpha);
    }
}

/// The columns sgemm_columns takes with relaxed_madd, eight groups of four at a time (eight
/// independent chains: one alone waits on relaxed_madd's latency at every step), then one group:
/// how many it computed.
#[cfg(feature = "fused-madd")]
fn fused_column_groups(p: &[f32], v: &[f32], ldv: usize, d: usize, block: usize, alpha: f32, out: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY (both tiles): fused_madd() was probed above; columns checks its slice bounds.
    let c = fill_tiles::<8>(0, d, out, |c| unsafe { columns::<8>(p, &v[c..], ldv, block, alpha) });
    fill_tiles::<1>(c, d, out, |c| unsafe { columns::<1>(p, &v[c..], ldv, block, alpha) })
}

#[cfg(not(feature = "fused-madd"))]
fn fused_column_groups(_: &[f32], _: &[f32], _: usize, _: usize, _: usize, _: f32, _: &mut [f32]) -> usize {
    0
}

/// G groups of four columns of the SGEMM product of p with v: per block of `block` products
/// one relaxed_madd chain per group in k order, the blocks combined with alpha as MLAS does.
///
/// The chains go through memory (volatile) once per four products rather than being carried in
/// loop variables, as every hot loop of these crates keeps its running sums. Cranelift keeps each
/// load where the wasm has it but places each pure operation just before its first use, and it
/// spills every vector live across a loop header (the epoch check's slow path is a call): carried
/// sums would be formed only at the loop's end, with every vector loaded in the step live until
/// then, and spilled anyway. Read and written once per step, each sum's arithmetic runs right
/// after its own loads and no vector is live across the header.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
unsafe fn columns<const G: usize>(p: &[f32], v: &[f32], ldv: usize, block: usize, alpha: f32) -> [v128; G] {
    let k = p.len();
    assert!(k == 0 || v.len() >= (k - 1) * ldv + 4 * G);
    let mut result: Option<[v128; G]> = None;
    for start in (0..k).step_by(block) {
        let mut chains = [f32x4_splat(0.0); G];
        let sums = chains.as_mut_ptr();
        let end = k.min(start + block);
        let mut j = start;
        // SAFETY (both loops): j + u < end <= k, so p[j + u] and row j + u's 4G values lie inside
        // p and v (asserted).
        while j + 4 <= end {
            let pj = lane_splats(v128_load(p.as_ptr().add(j) as *const v128));
            for g in 0..G {
                let mut chain = sums.add(g).read_volatile();
                for (u, &pu) in pj.iter().enumerate() {
                    chain = f32x4_relaxed_madd(pu, v128_load(v.as_ptr().add((j + u) * ldv + 4 * g) as *const v128), chain);
                }
                sums.add(g).write_volatile(chain);
            }
            j += 4;
        }
        for j in j..end {
            let pj = f32x4_splat(p[j]);
            for g in 0..G {
                let row = v128_load(v.as_ptr().add(j * ldv + 4 * g) as *const v128);
                sums.add(g).write_volatile(f32x4_relaxed_madd(pj, row, sums.add(g).read_volatile()));
            }
        }
        let chains: [v128; G] = core::array::from_fn(|g| sums.add(g).read_volatile());
        let alpha = f32x4_splat(alpha);
        result = Some(match result {
            None => chains.map(|chain| f32x4_mul(chain, alpha)),
            Some(c) => core::array::from_fn(|g| f32x4_relaxed_madd(chains[g], alpha, c[g])),
        });
    }
    result.unwrap_or([f32x4_splat(0.0); G])
}

/// out[c] = `m1_dot` of p with column c of v (rows `ldv` apart), c < d: no fma, so plain SIMD.
pub fn m1_columns(p: &[f32], v: &[f32], ldv: usize, d: usize, out: &mut [f32]) {
    let k = p.len();
    assert!(k == 0 || v.len() >= (k - 1) * ldv + d);
    let mut c = 0;
    while c + 4 <= d {
        // SAFETY: j < k and c + 4 <= d, inside v (asserted).
        let row = |j: usize| unsafe { v128_load(v.as_ptr().add(j * ldv + c) as *const v128) };
        let mut result = f32x4_splat(0.0);
        let mut j = 0;
        for group in [4, 2, 1] {
            while k - j >= group {
                let mut t = f32x4_mul(f32x4_splat(p[j]), row(j));
                for i in j + 1..j + group {
                    t = f32x4_add(t, f32x4_mul(f32x4_splat(p[i]), row(i)));
                }
                result = f32x4_add(t, result);
                j += group;
                if group < 4 {
                    break;
                }
            }
        }
        out[c..c + 4].copy_from_slice(&lanes(result));
        c += 4;
    }
    for c in c..d {
        out[c] = m1_dot(k, |j| p[j], |j| v[j * ldv + c]);
    }
}

// ---- attention -------------------------------------------------------------------------------

/// Work buffers of `attention`, the caller's, allocated once per forward pass.
pub struct OrtAttentionScratch<'a> {
    /// One query row's scores: at least keys.
    pub scores: &'a mut [f32],
    /// One head's keys transposed ([d][keys]): each score is then a column of q . K^T, and the
    /// column kernel runs eight chains of relaxed_madd with no shuffles, each in sgemm_dot's order.
    pub keys_t: &'a mut [f32],
    /// One query row scaled, where the graph scales Q: at least d.
    pub scaled: &'a mut [f32],
}

/// Attention with onnxruntime's arithmetic for the first `rows` query rows over `keys` keys:
/// scores by FusedMatMul (SGEMM, alpha = the scale), softmax MLAS's (the `floats` family's),
/// context by MatMul (SGEMM, or the M = 1 kernel for a single query row).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    floats: OrtFloats,
    heads: usize,
    head_dim: usize,
    scale: f32,
    scale_on_query: bool,
    key_scale: f32,
    mask_value: f32,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keep: Option<&[bool]>,
    rows: usize,
    keys: usize,
    ctx: &mut [f32],
    scratch: OrtAttentionScratch,
) {
    let d = head_dim;
    let hidden = heads * d;
    let OrtAttentionScratch { scores, keys_t, scaled } = scratch;
    let (scores, keys_t, scaled) = (&mut scores[..keys], &mut keys_t[..d * keys], &mut scaled[..d]);
    for h in 0..heads {
        let v_head = &v[h * d..];
        for key in 0..keys {
            for j in 0..d {
                keys_t[j * keys + key] = k[key * hidden + h * d + j] * key_scale;
            }
        }
        for i in 0..rows {
            let mut query = &q[i * hidden + h * d..i * hidden + (h + 1) * d];
            let mut alpha = scale;
            if scale_on_query {
                // the graph scales Q before the product, which then has no alpha
                for (s, &qc) in scaled.iter_mut().zip(query) {
                    *s = qc * scale;
                }
                (query, alpha) = (&*scaled, 1.0);
            }
            sgemm_columns(query, keys_t, keys, keys, stride_k(keys, d, false), alpha, scores);
            if let Some(keep) = keep {
                for (s, &kept) in scores.iter_mut().zip(keep) {
                    if !kept {
                        *s += mask_value;
                    }
                }
            }
            softmax(scores, floats);
            let out = &mut ctx[i * hidden + h * d..i * hidden + (h + 1) * d];
            if rows == 1 {
                m1_columns(scores, v_head, hidden, d, out);
            } else {
                sgemm_columns(scores, v_head, hidden, d, stride_k(d, keys, false), 1.0, out);
            }
        }
    }
}

// ---- float linear ----------------------------------------------------------------------------

/// Gemm with the bias as C (MLAS SGEMM, its B prepacked).
pub fn linear(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32]) {
    let k = w.k;
    for r in 0..rows {
        let y = &mut out[r * w.outs..(r + 1) * w.outs];
        sgemm_outputs(&x[r * k..(r + 1) * k], w.w, k, w.outs, PACKED_STRIDE_K, 1.0, w.bias, y);
    }
}
