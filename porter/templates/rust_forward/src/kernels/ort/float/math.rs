//! The scalar definitions: fma, MLAS's exp (softmax's two scalings), erf and GELU, tanh and
//! FastGelu, softmax, Pow by 2 or 3.

use super::lanes::fused_in_place;

/// fmaf, correctly rounded (porter/reference/ort/floats.py `_fma`): the float64 product is exact, the
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

/// onnxruntime's Pow by a constant 2 or 3 (element_wise_ops.cc): x * x, or (x * x) * x, each
/// product rounded to float32; every other exponent is std::pow, which porter does not reproduce.
#[inline(always)]
pub fn pow_by_products(x: f32, cube: bool) -> f32 {
    let square = x * x;
    if cube { square * x } else { square }
}

// ---- constants (bit patterns of porter/reference/ort/floats.py's float32 values) -----------------------

pub(super) const SUMEXP_LOW: f32 = f32::from_bits(0xc2b0c0a5); // -88.376...: exp's input clamp
pub(super) const LOG2E: f32 = f32::from_bits(0x3fb8aa3b);
pub(super) const LN2_HI: f32 = f32::from_bits(0xbf317200);
pub(super) const LN2_LO: f32 = f32::from_bits(0xb5bfbe8e);
pub(super) const ROUNDING_MAGIC: f32 = f32::from_bits(0x4b400000); // 1.5 * 2^23
pub(super) const SUMEXP_POLY: [u32; 6] = [0x3ab4a000, 0x3c092f6e, 0x3d2aadad, 0x3e2aaa28, 0x3efffffb, 0x3f800000];
pub(super) const ERF_SPLIT: f32 = f32::from_bits(0x3f6c0000); // 0.921875
pub(super) const ERF_SMALL: [u32; 6] = [0xba1d0d41, 0x3ba39fa4, 0xbcdb45e9, 0x3de70d23, 0xbec09370, 0x3e0375d3];
pub(super) const ERF_BIG: [u32; 7] = [0x37911480, 0xb9c8e966, 0x3b7e899b, 0xbcc6b180, 0x3ddaae58, 0x3f228550, 0x3e03ce86];
pub(super) const EXP_POLY: [u32; 7] = [0x3ab54c6d, 0x3c093965, 0x3d2aad10, 0x3e2aaa17, 0x3efffffb, 0x3f800000, 0x3f800000];
pub(super) const TANH_RANGE: f32 = 9.0; // MLAS's tanh clamps its input to [-9, 9]
pub(super) const TANH_P: [u32; 7] = [0xa59f25c0, 0x2a61337e, 0xaebd37ff, 0x335c0041, 0x3779434a, 0x3a270ded, 0x3ba059dc];
pub(super) const TANH_Q: [u32; 4] = [0x35a0d3d8, 0x38f895d6, 0x3b14aa05, 0x3ba059dd];
pub(super) const FAST_GELU_B: f32 = f32::from_bits(0x3f4c422a); // sqrt(2 / pi)
pub(super) const FAST_GELU_C: f32 = f32::from_bits(0x3d122279); // 0.044715 * sqrt(2 / pi)
pub(super) const SQRT2: f32 = f32::from_bits(0x3fb504f3);
pub(super) const SQRT1_2: f32 = f32::from_bits(0x3f3504f3);
// onnxruntime's Exp op (MLAS's ComputeExpF32Kernel, half.rs): its input clamp, and the normal
// exponents its AVX2 kernel clamps 2^m to
pub(super) const EXP_LOW: f32 = f32::from_bits(0xc2cf_f1b5); // -103.97
pub(super) const EXP_HIGH: f32 = f32::from_bits(0x42b1_8d72); // 88.78: the AVX2 kernel's upper clamp
pub(super) const EXP_MIN_EXPONENT: i32 = -126 << 23;
pub(super) const EXP_MAX_EXPONENT: i32 = 127 << 23;
/// The largest power of two the exponentials are scaled by in f64 (beyond it the f32 result is
/// 0 or infinite either way, and 2^n stays exact in f64).
pub(super) const SCALE_LIMIT: i32 = 300;

#[inline(always)]
pub(super) fn c(bits: u32) -> f32 {
    f32::from_bits(bits)
}

// ---- softmax ---------------------------------------------------------------------------------

/// Which of MLAS's float kernel families a crate reproduces (porter/reference/ort/cpu.py): on
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

    /// The Exp op's kernel of this family (a float16 graph's Softmax body).
    pub fn exp_op(self) -> Elementwise {
        match self {
            OrtFloats::Avx2 => Elementwise::ExpOp,
            OrtFloats::Avx512 => Elementwise::ExpOpScalef,
        }
    }
}

/// MLAS's exp before its last step, x clamped below at `low`: (q, r, m, biased), x = m ln 2 + r,
/// m an integer in f32 and in biased's low mantissa bits, exp(x) = (q * r + 1) * 2^m. Range
/// reduction by 2^m, a degree-6 polynomial, every step an fma.
#[inline(always)]
pub(super) fn exp_reduced(x: f32, low: f32) -> (f32, f32, f32, f32) {
    let x = if x < low { low } else { x };
    let biased = fma(x, LOG2E, ROUNDING_MAGIC);
    let m = biased - ROUNDING_MAGIC;
    let r = fma(m, LN2_LO, fma(m, LN2_HI, x));
    let mut q = c(SUMEXP_POLY[0]);
    for &k in &SUMEXP_POLY[1..] {
        q = fma(q, r, c(k));
    }
    (q, r, m, biased)
}

/// exp(x) = p * 2^m for softmax's exp: (p, m, biased).
#[inline(always)]
fn exp_parts(x: f32) -> (f32, f32, f32) {
    let (q, r, m, biased) = exp_reduced(x, SUMEXP_LOW);
    (fma(q, r, c(SUMEXP_POLY[5])), m, biased)
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
    scale_in_place(x, 1.0 / lane_sum(x, floats));
}

/// v *= scale for every value, bit for bit, without a subnormal operand reaching the multiplier.
///
/// AVX-512F's exp gives every masked key a subnormal probability (softmax's vscalefps), and x86
/// finishes each multiply with a subnormal operand in a microcode assist: a padded window's
/// softmax spent most of attention's time on them. Groups of four with none go to the vector
/// multiply (f32::is_subnormal reads the bits only); a subnormal's product is formed exactly
/// instead (scaled_subnormal), once per distinct value (a row's masked keys share one).
pub fn scale_in_place(x: &mut [f32], scale: f32) {
    if !x.iter().any(|v| v.is_subnormal()) {
        x.iter_mut().for_each(|v| *v *= scale);
        return;
    }
    let mut last: Option<(u32, f32)> = None;
    for group in x.chunks_mut(4) {
        if !group.iter().any(|v| v.is_subnormal()) {
            group.iter_mut().for_each(|v| *v *= scale);
            continue;
        }
        for v in group {
            if !v.is_subnormal() {
                *v *= scale;
                continue;
            }
            let bits = v.to_bits();
            *v = match last {
                Some((seen, product)) if seen == bits => product,
                _ => {
                    let product = scaled_subnormal(*v, scale);
                    last = Some((bits, product));
                    product
                }
            };
        }
    }
}

/// a * scale, rounded once as f32.mul rounds it, for a subnormal a, in integer and normal f64
/// arithmetic: |a| = m * 2^-149, so the product is m * scale * 2^-149, exact in f64 (a 23-bit
/// times a 24-bit significand; 2^-149 is a normal f64), then rounded once to f32.
pub fn scaled_subnormal(a: f32, scale: f32) -> f32 {
    if !scale.is_normal() {
        return a * scale; // never for softmax (1 / a sum of at least 1)
    }
    let m = (a.to_bits() & 0x007f_ffff) as f64;
    let magnitude = m * scale.abs() as f64 * f64::from_bits((1023 - 149) << 52);
    // the sign by its bit: a multiply by -1 would take the assist this avoids
    let sign = (a.to_bits() ^ scale.to_bits()) & 0x8000_0000;
    f32::from_bits((magnitude as f32).to_bits() | sign)
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

// ---- Log ---------------------------------------------------------------------------------------

/// Eigen's plog, as onnxruntime's Log runs it on each packet of four values (porter/reference/ort/
/// floats.py `eigen_log`; the last size % 4 values take glibc's logf): the exponent split off,
/// the mantissa moved into [sqrt(1/2), sqrt(2)) less one, a (3, 3) rational in it, then e * ln 2
/// added, every product and sum rounded (the CPU provider is built without fma). Zero gives -inf,
/// +inf itself, a negative value or a NaN the NaN of all ones.
pub fn eigen_log(x: f32) -> f32 {
    const ALPHA: [f32; 3] = [0.18256296349849254, 1.0000000190281063, 1.0000000190281136];
    const BETA: [f32; 4] = [0.049616247954120038, 0.59923249590823520, 1.4999999999999927, 1.0];
    if x == 0.0 {
        return f32::NEG_INFINITY;
    }
    if x.is_nan() || x < 0.0 {
        return f32::from_bits(u32::MAX);
    }
    if x == f32::INFINITY {
        return x;
    }
    // frexp: x = m * 2^e, m in [0.5, 1); a subnormal scaled into the normal range first
    let (bits, shift) = if x.to_bits() < 0x0080_0000 { ((x * 8388608.0).to_bits(), 23) } else { (x.to_bits(), 0) };
    let mut e = ((bits >> 23) as i32 - 126 - shift) as f32;
    let mut m = f32::from_bits((bits & 0x807f_ffff) | 0x3f00_0000);
    let small = m < 0.707_106_781_186_547_524;
    if small {
        e -= 1.0;
    }
    m = (m - 1.0) + if small { m } else { 0.0 };
    let p = ALPHA[1..].iter().fold(ALPHA[0], |p, &c| p * m + c);
    let q = BETA[1..].iter().fold(BETA[0], |q, &c| q * m + c);
    e * core::f32::consts::LN_2 + m * p / q
}

// ---- tanh and FastGelu -------------------------------------------------------------------------

/// MLAS's tanh (MlasComputeTanhF32KernelFma3, the kernel on every x86 CPU with AVX2, AVX-512
/// ones too): x clamped to [-9, 9] (NaN kept), odd and even polynomials in x^2 by fma, then
/// their quotient.
pub fn tanh(x: f32) -> f32 {
    let v = if x < -TANH_RANGE { -TANH_RANGE } else if x > TANH_RANGE { TANH_RANGE } else { x };
    let v2 = v * v;
    let mut p = fma(v2, c(TANH_P[0]), c(TANH_P[1]));
    for &k in &TANH_P[2..] {
        p = fma(p, v2, c(k));
    }
    let p = p * v;
    let mut q = fma(v2, c(TANH_Q[0]), c(TANH_Q[1]));
    for &k in &TANH_Q[2..] {
        q = fma(q, v2, c(k));
    }
    p / q
}

/// onnxruntime's FastGelu kernel (contrib_ops/cpu/bert/bias_gelu.cc; its Gelu op with
/// approximate="tanh" has the same loops): t = x * ((C * x) * x + B) in plain float steps (the
/// CPU provider is built for baseline x86-64, no fma), MLAS's tanh of t, then (x * 0.5) * (t + 1).
/// With a bias, x is the biased value (input + bias, rounded).
pub fn fast_gelu(x: f32) -> f32 {
    let inner = x * (FAST_GELU_C * x * x + FAST_GELU_B);
    (x * 0.5) * (tanh(inner) + 1.0)
}

pub fn fast_gelu_in_place(values: &mut [f32]) {
    apply_in_place(Elementwise::FastGelu, values);
}

/// The one-input functions above, applied over a slice.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Elementwise {
    Erf,
    Gelu,
    GeluMul,
    FastGelu,
    /// softmax's exp, AVX2 kernel
    Exp,
    /// softmax's exp, AVX-512F kernel
    ExpScalef,
    /// the Exp op's kernel, AVX2 (MlasComputeExpF32KernelFma3)
    ExpOp,
    /// the Exp op's kernel, AVX-512F (MlasComputeExpF32KernelAvx512F)
    ExpOpScalef,
}

impl Elementwise {
    pub fn scalar(self) -> fn(f32) -> f32 {
        match self {
            Elementwise::Erf => erf,
            Elementwise::Gelu => gelu_erf,
            Elementwise::GeluMul => gelu_erf_mul,
            Elementwise::FastGelu => fast_gelu,
            Elementwise::Exp => sum_exp,
            Elementwise::ExpScalef => sum_exp_scalef,
            Elementwise::ExpOp => super::half::exp_fma3,
            Elementwise::ExpOpScalef => super::half::exp_scalef,
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
