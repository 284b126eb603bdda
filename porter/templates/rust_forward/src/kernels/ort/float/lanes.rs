//! math's functions four lanes at a time with f32x4.relaxed_madd, where a probe shows that this
//! engine fuses it (same bits as the scalar emulation, in less time).

use core::arch::wasm32::*;
#[cfg(feature = "fused-madd")]
use core::sync::atomic::{AtomicU8, Ordering};

use super::math::Elementwise;
#[cfg(feature = "fused-madd")]
use super::math::*;

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
pub(super) fn fused_in_place(f: Elementwise, values: &mut [f32]) -> usize {
    if !fused_madd() {
        return 0;
    }
    // SAFETY: probed above.
    unsafe { fused_lanes(f, values) }
}

#[cfg(not(feature = "fused-madd"))]
pub(super) fn fused_in_place(_: Elementwise, _: &mut [f32]) -> usize {
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
                Elementwise::FastGelu => fast_gelu_x4(x),
                Elementwise::Exp => sum_exp_x4(x),
                Elementwise::ExpScalef => sum_exp_scalef_x4(x),
                Elementwise::ExpOp => exp_op_x4(x),
                Elementwise::ExpOpScalef => exp_op_scalef_x4(x),
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

/// exp_reduced lane by lane: [q, r, m, biased].
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn exp_reduced_x4(x: v128, low: f32) -> [v128; 4] {
    let x = f32x4_pmax(x, f32x4_splat(low)); // x < low ? low : x, NaN kept
    let biased = fma4(x, f32x4_splat(LOG2E), f32x4_splat(ROUNDING_MAGIC));
    let m = f32x4_sub(biased, f32x4_splat(ROUNDING_MAGIC));
    let r = fma4(m, f32x4_splat(LN2_LO), fma4(m, f32x4_splat(LN2_HI), x));
    [horner4(&SUMEXP_POLY, r), r, m, biased]
}

/// exp_parts lane by lane: [p, m, biased].
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn exp_parts_x4(x: v128) -> [v128; 3] {
    let [q, r, m, biased] = exp_reduced_x4(x, SUMEXP_LOW);
    [fma4(q, r, f32x4_splat(c(SUMEXP_POLY[5]))), m, biased]
}

/// half.rs exp_fma3 lane by lane: 2^m in two factors, the normal one clamped in integer lanes.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn exp_op_x4(x: v128) -> v128 {
    let [q, r, _, biased] = exp_reduced_x4(f32x4_pmin(x, f32x4_splat(EXP_HIGH)), EXP_LOW);
    let shifted = i32x4_shl(biased, 23);
    let normal = i32x4_min(i32x4_max(shifted, i32x4_splat(EXP_MIN_EXPONENT)), i32x4_splat(EXP_MAX_EXPONENT));
    let overflow = i32x4_add(i32x4_sub(shifted, normal), i32x4_splat(EXP_MAX_EXPONENT));
    f32x4_mul(fma4(q, f32x4_mul(r, overflow), overflow), i32x4_add(normal, i32x4_splat(EXP_MAX_EXPONENT)))
}

/// half.rs exp_scalef lane by lane: as sum_exp_scalef_x4, from the Exp op's clamp; +inf gives +inf.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn exp_op_scalef_x4(x: v128) -> v128 {
    let [q, r, m, _] = exp_reduced_x4(x, EXP_LOW);
    let y = scalef_x4(fma4(q, r, f32x4_splat(c(SUMEXP_POLY[5]))), m);
    v128_bitselect(x, y, f32x4_eq(x, f32x4_splat(f32::INFINITY)))
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
    scalef_x4(p, m)
}

/// p * 2^m rounded once, as vscalefps: one f32 product where every lane's 2^m is a normal float,
/// else ldexp_x4 in f64.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn scalef_x4(p: v128, m: v128) -> v128 {
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

/// MLAS's tanh lane by lane. pmin / pmax with the input first keep a NaN, as the clamp does.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn tanh_x4(x: v128) -> v128 {
    let v = f32x4_pmax(f32x4_pmin(x, f32x4_splat(TANH_RANGE)), f32x4_splat(-TANH_RANGE));
    let v2 = f32x4_mul(v, v);
    let p = f32x4_mul(horner4(&TANH_P, v2), v);
    f32x4_div(p, horner4(&TANH_Q, v2))
}

/// FastGelu lane by lane: its own products and sums unfused, as the scalar kernel.
#[cfg(feature = "fused-madd")]
#[target_feature(enable = "relaxed-simd")]
#[inline]
fn fast_gelu_x4(x: v128) -> v128 {
    let cx = f32x4_mul(f32x4_splat(FAST_GELU_C), x);
    let inner = f32x4_mul(x, f32x4_add(f32x4_mul(cx, x), f32x4_splat(FAST_GELU_B)));
    f32x4_mul(f32x4_mul(x, f32x4_splat(0.5)), f32x4_add(tanh_x4(inner), f32x4_splat(1.0)))
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
pub fn lanes(v: v128) -> [f32; 4] {
    [f32x4_extract_lane::<0>(v), f32x4_extract_lane::<1>(v), f32x4_extract_lane::<2>(v), f32x4_extract_lane::<3>(v)]
}
