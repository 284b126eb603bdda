//! Fixed-point arithmetic of TFLite's integer kernels, built without TFLITE_SINGLE_ROUNDING:
//! gemmlowp's SaturatingRoundingDoublingHighMul (ties up, as NEON's VQRDMULH) and
//! RoundingDivideByPOT (ties away from zero), ruy's multiplier (its right shift rounds ties up)
//! and NEON's VSHL, as porter.reference.litert.int8.

/// A real multiplier as TFLite's QuantizeMultiplier gives it: m * 2^(shift - 31).
#[derive(Clone, Copy, Debug)]
pub struct Multiplier {
    pub m: i32,
    pub shift: i32,
}

/// gemmlowp's SaturatingRoundingDoublingHighMul: (ab + nudge) / 2^31 truncating, which is
/// floor((ab + 2^30) / 2^31), ties rounded up, as NEON's VQRDMULH rounds them too;
/// INT32_MIN * INT32_MIN saturates.
#[inline(always)]
pub fn srdhm(a: i32, b: i32) -> i32 {
    if a == i32::MIN && b == i32::MIN {
        return i32::MAX;
    }
    let ab = a as i64 * b as i64;
    let nudge = if ab >= 0 { 1i64 << 30 } else { 1 - (1i64 << 30) };
    ((ab + nudge) / (1i64 << 31)) as i32
}

/// gemmlowp: x / 2^exponent rounded to nearest, ties away from zero.
#[inline(always)]
pub fn rounding_divide_by_pot(x: i32, exponent: u32) -> i32 {
    let mask = ((1i64 << exponent) - 1) as i32;
    let remainder = x & mask;
    let threshold = (mask >> 1) + (x < 0) as i32;
    (x >> exponent) + (remainder > threshold) as i32
}

/// MultiplyByQuantizedMultiplier, double rounding: the left shift (wrapping to 32 bits as C's
/// int32 arithmetic does), the high multiply, the rounding right shift.
#[inline(always)]
pub fn multiply_double_rounding(x: i64, mult: Multiplier) -> i32 {
    let (left, right) = (mult.shift.max(0) as u32, (-mult.shift).max(0) as u32);
    rounding_divide_by_pot(srdhm(x.wrapping_shl(left) as i32, mult.m), right)
}

/// ruy's multiplier (LiteRT's FULLY_CONNECTED on x86): (x * m + 2^30) >> 31 after the left
/// shift, then a right shift rounding half up.
#[inline(always)]
pub fn multiply_ruy(x: i64, mult: Multiplier) -> i32 {
    let (left, right) = (mult.shift.max(0) as u32, (-mult.shift).max(0) as u32);
    let v = ((x.wrapping_shl(left) as i32) as i64 * mult.m as i64 + (1i64 << 30)) >> 31;
    (if right > 0 { (v + (1i64 << (right - 1))) >> right } else { v }) as i32
}

/// Requantize's vector loop (NEON's vqrdmulh, then vrshl: ties rounded up).
#[inline(always)]
pub fn multiply_vector_rounding(x: i64, mult: Multiplier) -> i32 {
    let (left, right) = (mult.shift.max(0) as u32, (-mult.shift).max(0) as u32);
    let high = srdhm(x.wrapping_shl(left) as i32, mult.m) as i64;
    (if right > 0 { (high + (1i64 << (right - 1))) >> right } else { high }) as i32
}

/// NEON's VSHL by a register (NEON_2_SSE's serial loop): left, wrapping, for a count of 0 or more;
/// an arithmetic right shift (a floor) for a negative count; 0 past 31 either way.
#[inline(always)]
pub fn vshl(x: i32, count: i32) -> i32 {
    match count {
        c if c.unsigned_abs() >= i32::BITS => 0,
        c if c >= 0 => x.wrapping_shl(c as u32),
        c => x >> -c,
    }
}

/// An int32 result plus the output's zero point, saturated to int8.
#[inline(always)]
pub fn saturate(x: i64) -> i8 {
    x.clamp(i8::MIN as i64, i8::MAX as i64) as i8
}

/// TfLiteRound on a float32: ties away from zero, in float32 (|v| + 0.5 rounds first).
#[inline(always)]
pub fn round_half_away(v: f32) -> f32 {
    let r = (v.abs() + 0.5).floor();
    if v < 0.0 { -r } else { r }
}

/// CountLeadingSignBits of an int32 (31 for 0 and -1).
#[inline(always)]
pub fn leading_sign_bits(x: i32) -> u32 {
    (if x >= 0 { x } else { !x }).leading_zeros() - 1
}
