//! exp, erfc and the exact GELU as LiteRT's builtin kernels compute them (Eigen's pexp_float
//! and generic_fast_erfc, compiled without FMA), after porter/reference/litert/floats.py. SOFTMAX's exp
//! is this one (exp_nonpositive_x4 where every input is s - max); the EXP op is libm's expf (libm.rs).
//!
//! Both functions are branch-free in Eigen: every lane computes every path and a comparison
//! selects. So the f32x4 versions are the scalar ones lane for lane and need no per-lane
//! fallback; the GELU takes erfc's long path only for the lanes that select it, gathered four at
//! a time (gelu_chunk). Constants are written as bit patterns, so no decimal literal can round
//! twice.

use core::arch::wasm32::*;

const EXP_HI: f32 = f32::from_bits(0x42b1722d); // 88.723
const EXP_LO: f32 = f32::from_bits(0xc2d00000); // -104: exp is 0 below
pub(super) const LOG2E: f32 = f32::from_bits(0x3fb8aa3b);
pub(super) const LN2_HI: f32 = f32::from_bits(0xbf318000); // -0.693359375
pub(super) const LN2_LO: f32 = f32::from_bits(0x395e8083); // 2.12194440e-4
const EXP_P2: f32 = f32::from_bits(0x3efffffc);
const EXP_P3: f32 = f32::from_bits(0x3e2aaa47);
const EXP_P4: f32 = f32::from_bits(0x3d2aadcc);
const EXP_P5: f32 = f32::from_bits(0x3c091de6);
const EXP_P6: f32 = f32::from_bits(0x3ab42872);

const ERFC_CLAMP: f32 = 11.0;
const ERFC_ALPHA: [u32; 6] = [0x3a1345ea, 0xbba10415, 0x3cdac9b8, 0xbde703be, 0x3ec09330, 0xbf906eba];
const ERFC_GAMMA: [u32; 4] = [0x3dd10fee, 0x3edbc0fa, 0x3ea5c7e8, 0x3d5d11b8];
const ERFC_DELTA: [u32; 5] = [0x3c8d5364, 0x3ec861dd, 0x3f800000, 0x3f1f29db, 0x3dc3eae4];
const NEG_SQRT_HALF: f32 = f32::from_bits(0xbf3504f3);

// ---- scalar references ----------------------------------------------------------------------

/// min and max as wasm's f32x4_min/max and numpy's minimum/maximum: a NaN operand wins.
fn min_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if b < a {
        b
    } else {
        a
    }
}

fn max_nan(a: f32, b: f32) -> f32 {
    if a.is_nan() || b.is_nan() {
        f32::NAN
    } else if b > a {
        b
    } else {
        a
    }
}

/// 2^e for e in [-126, 127], built from its exponent bits.
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// Moves a very negative exponent into the normal range for the first of ldexp's two products.
const LDEXP_SHIFT: i32 = 100;

/// y * 2^e rounded once, like ldexpf, for the e that exp produces ([-150, 128]): the first
/// product stays normal and is exact, the second does the one rounding (or overflows).
fn ldexp_scalar(y: f32, e: i32) -> f32 {
    let (first, second) = ldexp_split(e);
    y * pow2(first) * pow2(second)
}

fn ldexp_split(e: i32) -> (i32, i32) {
    if e < -126 {
        (e + LDEXP_SHIFT, -LDEXP_SHIFT)
    } else if e > 127 {
        (127, e - 127)
    } else {
        (e, 0)
    }
}

pub fn exp_scalar(x_in: f32) -> f32 {
    if x_in < EXP_LO {
        return 0.0;
    }
    let x = min_nan(x_in, EXP_HI);
    let m = (x * LOG2E + 0.5).floor();
    let r = m * LN2_HI + x;
    let r = m * LN2_LO + r;
    let r2 = r * r;
    let p_even = r2 * EXP_P6 + EXP_P4;
    let p_odd = r2 * EXP_P5 + EXP_P3;
    let p_even = r2 * p_even + EXP_P2;
    let p_low = r + 1.0;
    let y = r * p_odd + p_even;
    let y = r2 * y + p_low;
    // A NaN input has m = NaN; `as i32` makes that 0 and max_nan returns the NaN.
    max_nan(ldexp_scalar(y, m as i32), x_in)
}

pub(super) fn horner_scalar(x: f32, coefficients: &[u32]) -> f32 {
    let mut acc = f32::from_bits(coefficients[0]);
    for &c in &coefficients[1..] {
        acc = acc * x + f32::from_bits(c);
    }
    acc
}

pub fn erfc_scalar(x_in: f32) -> f32 {
    let x = min_nan(max_nan(x_in, -ERFC_CLAMP), ERFC_CLAMP);
    let x2 = x * x;
    let small = x * horner_scalar(x2, &ERFC_ALPHA) + 1.0;
    // The rounding error of x * x, exactly: a double holds the product of two floats exactly.
    let x2_lo = ((x as f64) * (x as f64) - (x2 as f64)) as f32;
    let exp_hi = exp_scalar(-x2);
    let z = exp_hi - exp_hi * x2_lo;
    let q2 = 1.0 / x2;
    let num = horner_scalar(q2, &ERFC_GAMMA);
    let den = x * horner_scalar(q2, &ERFC_DELTA);
    let r = num / den;
    let two = if x < 0.0 { 2.0 } else { 0.0 };
    let large = z * r + two;
    if x2 > 1.0 {
        large
    } else {
        small
    }
}

/// Exact GELU: 0.5 * x * erfc(-x / sqrt(2)), in LiteRT's operation order.
pub fn gelu_scalar(x: f32) -> f32 {
    (0.5 * x) * erfc_scalar(x * NEG_SQRT_HALF)
}

pub fn gelu_in_place_scalar(values: &mut [f32]) {
    for v in values {
        *v = gelu_scalar(*v);
    }
}

// ---- f32x4 versions --------------------------------------------------------------------------

#[inline(always)]
pub(super) fn splat(v: f32) -> v128 {
    f32x4_splat(v)
}

#[inline(always)]
pub(super) fn madd(a: v128, b: v128, c: v128) -> v128 {
    f32x4_add(f32x4_mul(a, b), c)
}

#[inline(always)]
fn pow2_x4(e: v128) -> v128 {
    i32x4_shl(i32x4_add(e, i32x4_splat(127)), 23)
}

/// y * 2^e per lane, as ldexp_scalar: the first exponent min(e, 127), or e + LDEXP_SHIFT below
/// -126, the second what is left of e (integer identities of ldexp_split, lane by lane).
#[inline(always)]
fn ldexp_x4(y: v128, e: v128) -> v128 {
    let below = i32x4_lt(e, i32x4_splat(-126));
    let first = v128_bitselect(i32x4_add(e, i32x4_splat(LDEXP_SHIFT)), i32x4_min(e, i32x4_splat(127)), below);
    let second = i32x4_sub(e, first);
    f32x4_mul(f32x4_mul(y, pow2_x4(first)), pow2_x4(second))
}

/// 1.5 * 2^23: an integer-valued float m with |m| < 2^22 added to it leaves m in the sum's low
/// mantissa bits, exactly.
const ROUND_MAGIC: f32 = f32::from_bits(0x4b40_0000);

/// The integer value of each lane of m, an integer-valued float below 2^22 in magnitude (the
/// exponent of exp_x4, in [-151, 128] wherever its result is not masked to 0 or NaN), with two
/// operations where i32x4.trunc_sat_f32x4_s takes seven.
#[inline(always)]
pub(super) fn small_integer_x4(m: v128) -> v128 {
    i32x4_sub(f32x4_add(m, splat(ROUND_MAGIC)), i32x4_splat(ROUND_MAGIC.to_bits() as i32))
}

/// m = floor(x log2 e + 1/2) and y = e^r, r = x - m ln 2, of exp_scalar: e^x is y * 2^m.
#[inline(always)]
fn exp_parts(x: v128) -> (v128, v128) {
    let m = f32x4_floor(madd(x, splat(LOG2E), splat(0.5)));
    let r = madd(m, splat(LN2_HI), x);
    let r = madd(m, splat(LN2_LO), r);
    let r2 = f32x4_mul(r, r);
    let p_even = madd(r2, splat(EXP_P6), splat(EXP_P4));
    let p_odd = madd(r2, splat(EXP_P5), splat(EXP_P3));
    let p_even = madd(r2, p_even, splat(EXP_P2));
    let p_low = f32x4_add(r, splat(1.0));
    let y = madd(r, p_odd, p_even);
    (m, madd(r2, y, p_low))
}

/// exp_scalar's two ends in three instructions: `out` is zeroed where x_in < EXP_LO or x_in is
/// NaN (EXP_LO <= x_in fails for both), then pmax(x_in, out) (`x_in < out ? out : x_in`) is out
/// wherever x_in is a number (out, e^x or that 0, is above x: e^x > x for every x, and 0 > x
/// below EXP_LO) and the NaN where x_in is one (every comparison with it fails). Written as
/// andnot(out, x_in < EXP_LO), LLVM inverts the comparison and the wasm carries a v128.not that
/// Cranelift computes as two instructions more.
#[inline(always)]
fn exp_ends(x_in: v128, out: v128) -> v128 {
    f32x4_pmax(x_in, v128_and(out, f32x4_le(splat(EXP_LO), x_in)))
}

#[inline(always)]
pub fn exp_x4(x_in: v128) -> v128 {
    // the clamp in one instruction where f32x4_min takes seven (the bound is no zero, so no
    // signed-zero tie); a NaN lane's result is set at the end
    let (m, y) = exp_parts(f32x4_pmin(x_in, splat(EXP_HI)));
    exp_ends(x_in, ldexp_x4(y, small_integer_x4(m)))
}

/// 1.5 * 2^23 + 151: m + this is 1.5 * 2^23 + (m + 24 + 127) exactly, whose low bits shifted into
/// the exponent field are 2^(m + 24).
const POW2_PLUS_24_MAGIC: f32 = f32::from_bits(0x4b40_0000 + 151);
const TWO_TO_MINUS_24: f32 = f32::from_bits((127 - 24) << 23);

/// exp_x4 for lanes that are <= 0 or NaN, as softmax's s - max and erfc's -x^2 are: no clamp
/// above, and a cheaper ldexp. Where x_in >= EXP_LO, m lies in [-150, 0], so 2^(m + 24) is a
/// normal float, y * 2^(m + 24) is exact and times 2^-24 rounds once: the correctly rounded
/// y * 2^m that ldexp_x4's two products give too. 4 instructions where ldexp_x4 takes 15; lanes
/// below EXP_LO, whose m falls outside, are zeroed by exp_ends. A positive lane's result is
/// undefined.
#[inline(always)]
pub fn exp_nonpositive_x4(x_in: v128) -> v128 {
    let (m, y) = exp_parts(x_in);
    let pow2 = i32x4_shl(f32x4_add(m, splat(POW2_PLUS_24_MAGIC)), 23);
    exp_ends(x_in, f32x4_mul(f32x4_mul(y, pow2), splat(TWO_TO_MINUS_24)))
}

#[inline(always)]
pub(super) fn horner_x4(x: v128, coefficients: &[u32]) -> v128 {
    let mut acc = splat(f32::from_bits(coefficients[0]));
    for &c in &coefficients[1..] {
        acc = madd(acc, x, splat(f32::from_bits(c)));
    }
    acc
}

/// x * x - round(x * x) per lane, through two f64x2 halves (see erfc_scalar).
#[inline(always)]
fn square_error_x4(x: v128, x2: v128) -> v128 {
    let low = |v: v128| f64x2_promote_low_f32x4(v);
    let high = |v: v128| f64x2_promote_low_f32x4(i32x4_shuffle::<2, 3, 0, 1>(v, v));
    let err_low = f64x2_sub(f64x2_mul(low(x), low(x)), low(x2));
    let err_high = f64x2_sub(f64x2_mul(high(x), high(x)), high(x2));
    i32x4_shuffle::<0, 1, 4, 5>(f32x4_demote_f64x2_zero(err_low), f32x4_demote_f64x2_zero(err_high))
}

/// erfc's argument clamped to [-ERFC_CLAMP, ERFC_CLAMP] and its square: the clamp as exp_x4's,
/// pmax then pmin with x_in first keep a NaN, in two instructions.
#[inline(always)]
fn erfc_arguments(x_in: v128) -> (v128, v128) {
    let x = f32x4_pmin(f32x4_pmax(x_in, splat(-ERFC_CLAMP)), splat(ERFC_CLAMP));
    (x, f32x4_mul(x, x))
}

/// erfc_scalar's result where x2 <= 1 (and for a NaN, which fails x2 > 1).
#[inline(always)]
fn erfc_short_x4(x: v128, x2: v128) -> v128 {
    madd(x, horner_x4(x2, &ERFC_ALPHA), splat(1.0))
}

/// erfc_scalar's result where x2 > 1.
#[inline(always)]
fn erfc_long_x4(x: v128, x2: v128) -> v128 {
    let x2_lo = square_error_x4(x, x2);
    let exp_hi = exp_nonpositive_x4(f32x4_neg(x2));
    let z = f32x4_sub(exp_hi, f32x4_mul(exp_hi, x2_lo));
    let q2 = f32x4_div(splat(1.0), x2);
    let num = horner_x4(q2, &ERFC_GAMMA);
    let den = f32x4_mul(x, horner_x4(q2, &ERFC_DELTA));
    let r = f32x4_div(num, den);
    let two = v128_and(f32x4_lt(x, splat(0.0)), splat(2.0));
    madd(z, r, two)
}

/// gelu_scalar's last step: 0.5 * x times erfc(x * -sqrt(1/2)).
#[inline(always)]
fn gelu_from_erfc(x: v128, erfc: v128) -> v128 {
    f32x4_mul(f32x4_mul(splat(0.5), x), erfc)
}

/// f over whole vectors of values[..end] (end a multiple of 4), two per iteration: half
/// the loop back-edges (and epoch checks).
#[inline(always)]
pub fn map_vectors(values: &mut [f32], end: usize, f: impl Fn(v128) -> v128) {
    assert!(end % 4 == 0 && end <= values.len());
    let p = values.as_mut_ptr();
    let mut i = 0;
    // SAFETY: every access is below `end` <= len.
    unsafe {
        while i + 8 <= end {
            let a = v128_load(p.add(i) as *const v128);
            let b = v128_load(p.add(i + 4) as *const v128);
            v128_store(p.add(i) as *mut v128, f(a));
            v128_store(p.add(i + 4) as *mut v128, f(b));
            i += 8;
        }
        if i < end {
            v128_store(p.add(i) as *mut v128, f(v128_load(p.add(i) as *const v128)));
        }
    }
}

/// The values gelu_chunk takes at a time: its notes of the long-path lanes live on the stack.
const GELU_CHUNK: usize = 1 << 8;

/// GELU over a buffer, four lanes at a time, chunk by chunk; the tail that does not fill a vector
/// is scalar.
pub fn gelu_in_place(values: &mut [f32]) {
    let full = values.len() / 4 * 4;
    for chunk in values[..full].chunks_mut(GELU_CHUNK) {
        gelu_chunk(chunk);
    }
    gelu_in_place_scalar(&mut values[full..]);
}

/// GELU of a chunk of whole vectors. erfc_scalar takes one of two paths per value, the long one
/// (an exp, two divisions) where the argument's square exceeds 1: 22 % of MiniLM's FFN values,
/// but in 60 % of its vectors of four. So every vector goes the short path first, its long-path
/// lanes packed (without a branch: a mispredicted one would stall the short paths' chains) into
/// a list; then the list takes the long path four at a time and its results are written back.
/// Each lane gets its own path's operations, as erfc_scalar gives it.
fn gelu_chunk(values: &mut [f32]) {
    assert!(values.len() % 4 == 0 && values.len() <= GELU_CHUNK);
    // each list has room for a whole vector stored past its last entry
    let mut long_at = [0u32; GELU_CHUNK + 4];
    let mut long_x = [0.0f32; GELU_CHUNK + 4];
    let mut n = 0;
    let p = values.as_mut_ptr();
    for i in (0..values.len()).step_by(4) {
        // SAFETY: the vector lies inside the chunk; each list's store starts at n <= i, so below
        // GELU_CHUNK, with the four slots past it.
        unsafe {
            let x = v128_load(p.add(i) as *const v128);
            let (h, h2) = erfc_arguments(f32x4_mul(x, splat(NEG_SQRT_HALF)));
            let long = i32x4_bitmask(f32x4_gt(h2, splat(1.0))) as usize;
            let pack = v128_load(PACK_LANES[long].as_ptr() as *const v128);
            v128_store(long_x.as_mut_ptr().add(n) as *mut v128, i8x16_swizzle(x, pack));
            let at = i32x4_add(i32x4_splat(i as i32), i32x4(0, 1, 2, 3));
            v128_store(long_at.as_mut_ptr().add(n) as *mut v128, i8x16_swizzle(at, pack));
            n += long.count_ones() as usize;
            v128_store(p.add(i) as *mut v128, gelu_from_erfc(x, erfc_short_x4(h, h2)));
        }
    }
    for g in (0..n).step_by(4) {
        // past n the lanes hold whatever was stored there: computed, never written back
        // SAFETY: g + 4 <= n + 3 < GELU_CHUNK + 4.
        let x = unsafe { v128_load(long_x.as_ptr().add(g) as *const v128) };
        let (h, h2) = erfc_arguments(f32x4_mul(x, splat(NEG_SQRT_HALF)));
        let y = gelu_from_erfc(x, erfc_long_x4(h, h2));
        let y = [f32x4_extract_lane::<0>(y), f32x4_extract_lane::<1>(y), f32x4_extract_lane::<2>(y), f32x4_extract_lane::<3>(y)];
        for k in 0..(n - g).min(4) {
            values[long_at[g + k] as usize] = y[k];
        }
    }
}

/// For each 4-bit lane mask, the byte shuffle that moves the masked 32-bit lanes to the front,
/// in order (the rest of the vector repeats lane 0: it lands past the list's end, where the next
/// vector's store overwrites it or the last group computes it without writing it back).
const PACK_LANES: [[u8; 16]; 16] = {
    let mut table = [[0u8; 16]; 16];
    let mut mask = 0;
    while mask < 16 {
        let mut to = 0;
        let mut lane = 0;
        while lane < 4 {
            if mask & (1 << lane) != 0 {
                let mut byte = 0;
                while byte < 4 {
                    table[mask][4 * to + byte] = (4 * lane + byte) as u8;
                    byte += 1;
                }
                to += 1;
            }
            lane += 1;
        }
        mask += 1;
    }
    table
};

/// A vector exp (exp_x4, or exp_nonpositive_x4 on its inputs) over a buffer in place, then
/// exp_scalar over the tail that does not fill a vector: what the kernel checks compare.
pub fn exp_in_place(values: &mut [f32], exp: impl Fn(v128) -> v128) {
    let full = values.len() / 4 * 4;
    map_vectors(values, full, exp);
    for v in &mut values[full..] {
        *v = exp_scalar(*v);
    }
}
