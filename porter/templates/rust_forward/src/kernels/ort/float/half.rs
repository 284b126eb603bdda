//! onnxruntime on a float16 graph (porter/reference/ort/float16.py): the rounding of a float32
//! value to float16 where it casts one, and the Softmax it runs as ONNX's function body
//! (porter/reference/ops.py softmax_function) with MLAS's Exp kernels.

use core::arch::wasm32::*;

use super::math::{apply_in_place, exp_reduced, fma, OrtFloats, EXP_HIGH, EXP_LOW, EXP_MAX_EXPONENT, EXP_MIN_EXPONENT,
                  SCALE_LIMIT};
// onnxruntime's ReduceSum over a row is Eigen's sum, in the order LiteRT's kernels also use
use crate::kernels::litert::eigen::eigen_sum;

const MAGNITUDE: u32 = 0x7fff_ffff;
const F32_INFINITY: u32 = 0x7f80_0000;
const QUIET_NAN: u32 = 0x7fc0_0000;
/// A NaN's payload bits a float16 keeps (its quiet bit and top nine), in float32's place.
const HALF_PAYLOAD: u32 = 0x007f_e000;
/// 65520: from here up a value rounds to float16's infinity.
const HALF_OVERFLOW: u32 = 0x477f_f000;
/// 2^-14, float16's smallest normal: below it, its subnormals, multiples of 2^-24.
const HALF_NORMAL: u32 = 0x3880_0000;
/// The float32 mantissa bits a float16 drops.
const DROPPED: u32 = 0x1fff;

/// float32 -> nearest float16 (ties to even) -> float32, as onnxruntime's two Casts give it: to
/// infinity from 65520 up; a NaN quiet, with its sign and top payload bits (vcvtps2ph's).
pub fn round_half(x: f32) -> f32 {
    let bits = x.to_bits();
    let (sign, a) = (bits & !MAGNITUDE, bits & MAGNITUDE);
    let rounded = if a > F32_INFINITY {
        QUIET_NAN | (a & HALF_PAYLOAD)
    } else if a >= HALF_OVERFLOW {
        F32_INFINITY
    } else if a < HALF_NORMAL {
        // adding 0.5 rounds |x| to a multiple of 2^-24 (0.5's ulp), ties to even; the
        // subtraction is exact
        ((f32::from_bits(a) + 0.5) - 0.5).to_bits()
    } else {
        // ten mantissa bits, ties to even (a carry into the exponent is the right result)
        (a + (DROPPED >> 1) + ((a >> 13) & 1)) & !DROPPED
    };
    f32::from_bits(sign | rounded)
}

pub fn round_half_in_place_scalar(values: &mut [f32]) {
    values.iter_mut().for_each(|v| *v = round_half(*v));
}

/// round_half four lanes at a time: every case computed, each lane's picked by its magnitude.
pub fn round_half_in_place(values: &mut [f32]) {
    let whole = values.len() / 4 * 4;
    for four in values[..whole].chunks_exact_mut(4) {
        let p = four.as_mut_ptr() as *mut v128;
        // SAFETY: four values, read and written in place.
        unsafe { v128_store(p, round_half_x4(v128_load(p))) }
    }
    round_half_in_place_scalar(&mut values[whole..]);
}

#[inline(always)]
fn round_half_x4(x: v128) -> v128 {
    let sign = v128_and(x, u32x4_splat(!MAGNITUDE));
    let a = v128_and(x, u32x4_splat(MAGNITUDE));
    let nan = v128_or(u32x4_splat(QUIET_NAN), v128_and(a, u32x4_splat(HALF_PAYLOAD)));
    let subnormal = f32x4_sub(f32x4_add(a, f32x4_splat(0.5)), f32x4_splat(0.5));
    let odd = v128_and(u32x4_shr(a, 13), u32x4_splat(1));
    let normal = v128_andnot(i32x4_add(i32x4_add(a, u32x4_splat(DROPPED >> 1)), odd), u32x4_splat(DROPPED));
    // magnitudes are below 2^31: signed comparisons order them
    let mut r = v128_bitselect(subnormal, normal, i32x4_lt(a, u32x4_splat(HALF_NORMAL)));
    r = v128_bitselect(u32x4_splat(F32_INFINITY), r, i32x4_ge(a, u32x4_splat(HALF_OVERFLOW)));
    r = v128_bitselect(nan, r, i32x4_gt(a, u32x4_splat(F32_INFINITY)));
    v128_or(sign, r)
}

// ---- MLAS's Exp kernels and the Softmax function body ----------------------------------------


/// MlasComputeExpF32KernelFma3 (onnxruntime's Exp on AVX2): 2^m in two factors, 2^m clamped to
/// the normal exponents and 2^(m - that) folded into the last fma, so that a subnormal result is
/// one rounding of p * 2^m.
pub fn exp_fma3(x: f32) -> f32 {
    let (p, r, _, biased) = exp_reduced(if x > EXP_HIGH { EXP_HIGH } else { x }, EXP_LOW);
    let shifted = (biased.to_bits() as i32) << 23;
    let normal = shifted.clamp(EXP_MIN_EXPONENT, EXP_MAX_EXPONENT);
    let overflow = f32::from_bits((shifted.wrapping_sub(normal).wrapping_add(EXP_MAX_EXPONENT)) as u32);
    fma(p, r * overflow, overflow) * f32::from_bits(normal.wrapping_add(EXP_MAX_EXPONENT) as u32)
}

/// MlasComputeExpF32KernelAvx512F (onnxruntime's Exp on AVX-512F): no upper clamp, vscalefps,
/// p * 2^m rounded once (exact in f64 for |m| up to SCALE_LIMIT); +inf gives +inf, as measured.
pub fn exp_scalef(x: f32) -> f32 {
    if x == f32::INFINITY {
        return x;
    }
    let (p, r, m, _) = exp_reduced(x, EXP_LOW);
    (fma(p, r, 1.0) as f64 * 2f64.powi((m as i32).clamp(-SCALE_LIMIT, SCALE_LIMIT))) as f32
}

/// onnxruntime's Exp on the family's kernel.
pub fn exp(x: f32, floats: OrtFloats) -> f32 {
    match floats {
        OrtFloats::Avx2 => exp_fma3(x),
        OrtFloats::Avx512 => exp_scalef(x),
    }
}

/// Softmax over a row as ONNX's function body: ReduceMax, Sub, Exp (the family's, four lanes at a
/// time where relaxed_madd fuses), ReduceSum (Eigen's order), Div; in place.
pub fn softmax_function(x: &mut [f32], floats: OrtFloats) {
    let max = x.iter().copied().fold(x[0], |m, v| if v > m { v } else { m });
    for v in x.iter_mut() {
        *v -= max;
    }
    apply_in_place(floats.exp_op(), x);
    let sum = eigen_sum(x);
    for v in x.iter_mut() {
        *v /= sum;
    }
}
