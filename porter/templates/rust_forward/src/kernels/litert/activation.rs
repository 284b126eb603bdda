//! TANH and LOGISTIC as LiteRT's builtin kernels compute them (porter/reference/litert/floats.py
//! `tanh`, `logistic`): optimized_ops::Tanh and ::Logistic evaluate Eigen's `array().tanh()` and
//! `scalar_logistic_op<float>` over the tensor, with SSE packets and without FMA.
//!
//!   tanh_scalar(x), tanh_in_place(values), tanh_in_place_scalar(values)
//!   logistic_scalar(x)       the packet formula on one value (what each lane computes)
//!   logistic_tail_scalar(x)  Eigen's scalar formula, exp(min(x, hi)) via libm's expf
//!   logistic_in_place(values, tensor_len), logistic_in_place_scalar(values, tensor_len)
//!   gelu_tanh_scalar(x), gelu_tanh_in_place(values), gelu_tanh_in_place_scalar(values)
//!                            GELU with approximate=True (porter/reference/litert/floats.py
//!                            `gelu_tanh`): one Eigen expression whose tanh is this tanh
//!
//! tanh is Eigen's fast rational approximation (a [9/8] odd/even rational on x clamped to
//! [-c, c]) for packets and scalars alike, so every value takes the same path. The logistic's
//! packet formula is its own exp (an outer halving, Cephes' reduction, a degree-5 polynomial,
//! squared back); Eigen's assignment loop runs it on whole packets from the tensor's (64-byte
//! aligned) start and the scalar formula on the last `tensor_len % 4` values, which is why the
//! slice functions take the tensor's length: `values` may be a prefix of it (the live rows).
//!
//! Eigen's pmin(a, b) and pmax(a, b) are `b < a ? b : a` and `a < b ? b : a` (NaN in `a`
//! stays), which are wasm's f32x4_pmin and f32x4_pmax exactly. Constants are bit patterns.

use core::arch::wasm32::*;

use super::libm::expf;
use super::mathfn::{horner_scalar, horner_x4, madd, map_vectors, splat, LN2_HI, LN2_LO, LOG2E};

const TANH_CLAMP: f32 = f32::from_bits(0x40fd0956); // 7.90738964080810547: tanh is 1 beyond
const TANH_ALPHA: [u32; 4] = [0x326f951e, 0x37b063dc, 0x3b66bc7f, 0x3e093cf6];
const TANH_BETA: [u32; 5] = [0x35572c00, 0x39ae6d96, 0x3cd4c460, 0x3eef4922, 0x3f800000];

const SQRT_2_OVER_PI: f32 = f32::from_bits(0x3f4c422a); // kSqrt2dPi, M_2_SQRTPI * M_SQRT1_2 as float
const GELU_CUBE: f32 = f32::from_bits(0x3d372713); // 0.044715

const LOGISTIC_HI: f32 = f32::from_bits(0x41851592); // 16.6355324: the logistic is 1 from here
const LOGISTIC_LO: f32 = f32::from_bits(0xc2d00000); // -104: 0 below
const LOGISTIC_P2: f32 = f32::from_bits(0x3efffee0);
const LOGISTIC_P3: f32 = f32::from_bits(0x3e2aab38);
const LOGISTIC_P4: f32 = f32::from_bits(0x3d2b9df0);
const LOGISTIC_P5: f32 = f32::from_bits(0x3c088e52);

// ---- scalar references ----------------------------------------------------------------------

/// Eigen's pmin(a, b): b when b < a, else a.
fn pmin(a: f32, b: f32) -> f32 {
    if b < a {
        b
    } else {
        a
    }
}

/// Eigen's pmax(a, b): b when a < b, else a.
fn pmax(a: f32, b: f32) -> f32 {
    if a < b {
        b
    } else {
        a
    }
}

/// Eigen's ptanh_float (EIGEN_FAST_MATH, no FMA).
pub fn tanh_scalar(a: f32) -> f32 {
    let x = pmax(pmin(a, TANH_CLAMP), -TANH_CLAMP);
    let x2 = x * x;
    let x3 = x2 * x;
    // x * (1 + x^2 P(x^2)) as x^3 P + x, over Q(x^2)
    let p = x3 * horner_scalar(x2, &TANH_ALPHA) + x;
    p / horner_scalar(x2, &TANH_BETA)
}

pub fn tanh_in_place_scalar(values: &mut [f32]) {
    for v in values {
        *v = tanh_scalar(*v);
    }
}

/// 0.5 * x * (1 + tanh(kSqrt2dPi * (x + 0.044715 * x.cube()))), each operation rounded in
/// that order; x.cube() is x * (x * x).
pub fn gelu_tanh_scalar(x: f32) -> f32 {
    let inner = x + GELU_CUBE * (x * (x * x));
    (0.5 * x) * (1.0 + tanh_scalar(SQRT_2_OVER_PI * inner))
}

pub fn gelu_tanh_in_place_scalar(values: &mut [f32]) {
    for v in values {
        *v = gelu_tanh_scalar(*v);
    }
}

/// 2^e for a biased exponent clamped to [0, 255] as pldexp_fast does (a NaN bias gives 0 bits,
/// as wasm's trunc_sat and x86's cvttps then << 23 both do).
fn pow2_clamped(m: f32) -> f32 {
    let biased = pmin(pmax(m + 127.0, 0.0), 255.0);
    f32::from_bits((biased as i32 as u32) << 23)
}

/// scalar_logistic_op<float>::packetOp on one value.
pub fn logistic_scalar(x_in: f32) -> f32 {
    let x = pmin(x_in, LOGISTIC_HI) * 0.5;
    let m = (x * LOG2E + 0.5).floor();
    let r = m * LN2_HI + x;
    let r = m * LN2_LO + r;
    let r2 = r * r;
    let p_even = r2 * LOGISTIC_P4 + LOGISTIC_P2;
    let p_odd = r2 * LOGISTIC_P5 + LOGISTIC_P3;
    let p = r * p_odd + p_even;
    let p = r2 * p + (r + 1.0);
    let half = p * pow2_clamped(m);
    let e = half * half; // exp(x) = exp(x / 2)^2
    if x_in < LOGISTIC_LO {
        0.0
    } else {
        e / (1.0 + e)
    }
}

/// scalar_logistic_op<float>::operator(): the values after the tensor's last whole packet.
pub fn logistic_tail_scalar(x: f32) -> f32 {
    let e = expf(pmin(x, LOGISTIC_HI));
    e / (1.0 + e)
}

/// Index where a tensor of `tensor_len` values stops taking whole packets.
fn packets_end(tensor_len: usize) -> usize {
    tensor_len / 4 * 4
}

pub fn logistic_in_place_scalar(values: &mut [f32], tensor_len: usize) {
    let end = packets_end(tensor_len);
    for (i, v) in values.iter_mut().enumerate() {
        *v = if i < end { logistic_scalar(*v) } else { logistic_tail_scalar(*v) };
    }
}

// ---- f32x4 versions --------------------------------------------------------------------------

#[inline(always)]
pub fn tanh_x4(a: v128) -> v128 {
    let x = f32x4_pmax(f32x4_pmin(a, splat(TANH_CLAMP)), splat(-TANH_CLAMP));
    let x2 = f32x4_mul(x, x);
    let x3 = f32x4_mul(x2, x);
    let p = madd(x3, horner_x4(x2, &TANH_ALPHA), x);
    f32x4_div(p, horner_x4(x2, &TANH_BETA))
}

#[inline(always)]
pub fn gelu_tanh_x4(x: v128) -> v128 {
    let inner = f32x4_add(x, f32x4_mul(splat(GELU_CUBE), f32x4_mul(x, f32x4_mul(x, x))));
    let t = tanh_x4(f32x4_mul(splat(SQRT_2_OVER_PI), inner));
    f32x4_mul(f32x4_mul(splat(0.5), x), f32x4_add(splat(1.0), t))
}

#[inline(always)]
pub fn logistic_x4(x_in: v128) -> v128 {
    let x = f32x4_mul(f32x4_pmin(x_in, splat(LOGISTIC_HI)), splat(0.5));
    let m = f32x4_floor(madd(x, splat(LOG2E), splat(0.5)));
    let r = madd(m, splat(LN2_HI), x);
    let r = madd(m, splat(LN2_LO), r);
    let r2 = f32x4_mul(r, r);
    let p_even = madd(r2, splat(LOGISTIC_P4), splat(LOGISTIC_P2));
    let p_odd = madd(r2, splat(LOGISTIC_P5), splat(LOGISTIC_P3));
    let p = madd(r, p_odd, p_even);
    let p = madd(r2, p, f32x4_add(r, splat(1.0)));
    let biased = f32x4_pmin(f32x4_pmax(f32x4_add(m, splat(127.0)), splat(0.0)), splat(255.0));
    let half = f32x4_mul(p, i32x4_shl(i32x4_trunc_sat_f32x4(biased), 23));
    let e = f32x4_mul(half, half);
    let logistic = f32x4_div(e, f32x4_add(splat(1.0), e));
    v128_andnot(logistic, f32x4_lt(x_in, splat(LOGISTIC_LO)))
}

pub fn tanh_in_place(values: &mut [f32]) {
    let full = values.len() / 4 * 4;
    map_vectors(values, full, tanh_x4);
    tanh_in_place_scalar(&mut values[full..]);
}

/// Packets and the scalar tail compute the same function, so any prefix of a tensor may be given.
pub fn gelu_tanh_in_place(values: &mut [f32]) {
    let full = values.len() / 4 * 4;
    map_vectors(values, full, gelu_tanh_x4);
    gelu_tanh_in_place_scalar(&mut values[full..]);
}

/// `values` is the start of a tensor of `tensor_len` values (all of it, or its live rows).
pub fn logistic_in_place(values: &mut [f32], tensor_len: usize) {
    assert!(values.len() <= tensor_len);
    let end = packets_end(tensor_len).min(values.len());
    let full = end / 4 * 4;
    map_vectors(values, full, logistic_x4);
    let packets = packets_end(tensor_len);
    for (i, v) in values.iter_mut().enumerate().skip(full) {
        *v = if i < packets { logistic_scalar(*v) } else { logistic_tail_scalar(*v) };
    }
}
