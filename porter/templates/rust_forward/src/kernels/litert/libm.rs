//! glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, glibc 2.28 and later), which LiteRT's EXP op
//! (reference_ops::Exp: std::exp per value) and the logistic's scalar tail call through the
//! host's libm (porter/reference/litert/floats.py `exp_op`), and its logf (below), which its LOG
//! op calls.
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

// ---- logf ------------------------------------------------------------------------------------
//
// glibc's logf (sysdeps/ieee754/flt-32/e_logf.c, glibc 2.28 and later), which LiteRT's LOG op
// (reference_ops' std::log per value) calls through the host's libm (porter/reference/litert/
// floats.py `log_op`). x = 2^k * z with z in [OFF, 2 * OFF) exactly; log(x) = log1p(z / c - 1) +
// log(c) + k ln 2, with 1/c and log(c) from a 16-entry table and log1p(r) a cubic in r, in double,
// rounded once. The reference host runs __logf_fma: r = z * invc - 1, y0 = logc + k * ln2 and the
// polynomial's multiply-adds are fused, as f64::mul_add is here.

/// (1/c, log(c)) of each of the 16 subintervals.
const LOGF_TABLE: [(f64, f64); 16] = [
    (f64::from_bits(0x3ff661ec79f8f3be), f64::from_bits(0xbfd57bf7808caade)),
    (f64::from_bits(0x3ff571ed4aaf883d), f64::from_bits(0xbfd2bef0a7c06ddb)),
    (f64::from_bits(0x3ff49539f0f010b0), f64::from_bits(0xbfd01eae7f513a67)),
    (f64::from_bits(0x3ff3c995b0b80385), f64::from_bits(0xbfcb31d8a68224e9)),
    (f64::from_bits(0x3ff30d190c8864a5), f64::from_bits(0xbfc6574f0ac07758)),
    (f64::from_bits(0x3ff25e227b0b8ea0), f64::from_bits(0xbfc1aa2bc79c8100)),
    (f64::from_bits(0x3ff1bb4a4a1a343f), f64::from_bits(0xbfba4e76ce8c0e5e)),
    (f64::from_bits(0x3ff12358f08ae5ba), f64::from_bits(0xbfb1973c5a611ccc)),
    (f64::from_bits(0x3ff0953f419900a7), f64::from_bits(0xbfa252f438e10c1e)),
    (f64::from_bits(0x3ff0000000000000), f64::from_bits(0x0000000000000000)),
    (f64::from_bits(0x3fee608cfd9a47ac), f64::from_bits(0x3faaa5aa5df25984)),
    (f64::from_bits(0x3feca4b31f026aa0), f64::from_bits(0x3fbc5e53aa362eb4)),
    (f64::from_bits(0x3feb2036576afce6), f64::from_bits(0x3fc526e57720db08)),
    (f64::from_bits(0x3fe9c2d163a1aa2d), f64::from_bits(0x3fcbc2860d224770)),
    (f64::from_bits(0x3fe886e6037841ed), f64::from_bits(0x3fd1058bc8a07ee1)),
    (f64::from_bits(0x3fe767dcf5534862), f64::from_bits(0x3fd4043057b6ee09)),
];
const LOGF_LN2: f64 = f64::from_bits(0x3fe62e42fefa39ef);
const LOGF_A: [f64; 3] = [f64::from_bits(0xbfd00ea348b88334), f64::from_bits(0x3fd5575b0be00b6a),
                          f64::from_bits(0xbfdffffef20a4123)];
const LOGF_OFF: u32 = 0x3f330000;
/// What 0 / 0 gives on x86: glibc's result for a negative x.
const X86_DEFAULT_NAN: u32 = 0xffc00000;

pub fn logf(x: f32) -> f32 {
    let bits = x.to_bits();
    if bits == 0x3f800000 {
        return 0.0;
    }
    if bits & 0x7fffffff == 0 {
        return f32::NEG_INFINITY;
    }
    if bits == 0x7f800000 {
        return x;
    }
    if x.is_nan() {
        return x + x;
    }
    if bits >= 0x80000000 {
        return f32::from_bits(X86_DEFAULT_NAN);
    }
    // a subnormal x is scaled by 2^23 into the normal range, its exponent taken back from k
    let ix = if bits < 0x00800000 { (x * 8388608.0).to_bits().wrapping_sub(23 << 23) } else { bits };
    let tmp = ix.wrapping_sub(LOGF_OFF);
    let (invc, logc) = LOGF_TABLE[((tmp >> 19) % 16) as usize];
    let k = ((tmp as i32) >> 23) as f64;
    let z = f32::from_bits(ix.wrapping_sub(tmp & 0xff800000)) as f64;
    let r = z.mul_add(invc, -1.0);
    let y0 = k.mul_add(LOGF_LN2, logc);
    let r2 = r * r;
    let y = LOGF_A[0].mul_add(r2, LOGF_A[1].mul_add(r, LOGF_A[2]));
    y.mul_add(r2, y0 + r) as f32
}
