//! glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, glibc 2.28 and later), which LiteRT's EXP op
//! (reference_ops::Exp: std::exp per value) and the logistic's scalar tail call through the
//! host's libm (porter/reference/litert/floats.py `exp_op`).
//!
//! The algorithm works in double precision: x * 32 / ln 2 = k + r with |r| <= 1/2, 2^(k/32)
//! from a 32-entry table with k / 32 added to its exponent bits, times a cubic in r, rounded
//! once to float. On the reference host (FMA and AVX2) glibc runs __expf_fma, where GCC fused
//! r = x * 32/ln2 - k and the cubic's three multiply-adds; f64::mul_add is a correctly rounded
//! fma on every target (wasm's libm call), so each step rounds as glibc's does.

const TABLE_BITS: u32 = 5;
const N: u64 = 1 << TABLE_BITS;
/// tab[i] = bits(2^(i/32)) - (i << 47): adding k << 47 gives 2^(k/32) for any k.
const TABLE: [u64; N as usize] = [
    0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
    0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
    0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
    0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
    0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
    0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
    0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
    0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
];
const INV_LN2_N: f64 = f64::from_bits(0x40471547652b82fe); // 32 / ln 2
const SHIFT: f64 = f64::from_bits(0x4338000000000000); // 0x1.8p52: adding it rounds to an integer
const C0: f64 = f64::from_bits(0x3ebc6af84b912394);
const C1: f64 = f64::from_bits(0x3f2ebfce50fac4f3);
const C2: f64 = f64::from_bits(0x3f962e42ff0c52d6);

const OVERFLOW_ABOVE: f32 = f32::from_bits(0x42b17217); // log(2^128)
const ZERO_BELOW: f32 = f32::from_bits(0xc2cff1b4); // log(2^-150)
const MAY_UNDERFLOW_BELOW: f32 = f32::from_bits(0xc2ce8ecf); // log(2^-149)
const SMALLEST_SUBNORMAL: f32 = f32::from_bits(1);

fn top12(x: f32) -> u32 {
    x.to_bits() >> 20
}

pub fn expf(x: f32) -> f32 {
    let abstop = top12(x) & 0x7ff;
    if abstop >= top12(88.0) {
        // |x| >= 88 or NaN: glibc's special cases (its __math_*flowf results)
        if x == f32::NEG_INFINITY {
            return 0.0;
        }
        if abstop >= top12(f32::INFINITY) {
            return x + x;
        }
        if x > OVERFLOW_ABOVE {
            return f32::INFINITY;
        }
        if x < ZERO_BELOW {
            return 0.0;
        }
        if x < MAY_UNDERFLOW_BELOW {
            return SMALLEST_SUBNORMAL; // 0x1.4p-75f squared, rounded
        }
    }
    let xd = x as f64;
    let shifted = INV_LN2_N * xd + SHIFT;
    let k = shifted.to_bits();
    let r = INV_LN2_N.mul_add(xd, -(shifted - SHIFT));
    let s = f64::from_bits(TABLE[(k % N) as usize].wrapping_add(k << (52 - TABLE_BITS)));
    let y = C0.mul_add(r, C1).mul_add(r * r, C2.mul_add(r, 1.0));
    (y * s) as f32
}

pub fn expf_in_place(values: &mut [f32]) {
    for v in values {
        *v = expf(*v);
    }
}
