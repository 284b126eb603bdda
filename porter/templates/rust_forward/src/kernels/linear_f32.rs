//! Float FULLY_CONNECTED: y[r][o] = (sum_k x[r][k] * w[o][k], in k order) + bias[o].
//!
//! The sum over k belongs to one output, so it is never split across lanes. The SIMD version
//! transposes the input once (k-major) and computes four rows side by side for several outputs
//! per pass; every lane still adds its products in k order.

use core::arch::wasm32::*;

#[derive(Clone, Copy)]
pub struct FloatWeights<'a> {
    pub w: &'a [f32], // [outs, k]
    pub bias: Option<&'a [f32]>,
    pub outs: usize,
    pub k: usize,
}

impl FloatWeights<'_> {
    #[inline(always)]
    fn finish(&self, acc: f32, o: usize) -> f32 {
        match self.bias {
            Some(b) => acc + b[o],
            None => acc,
        }
    }
}

pub fn linear_f32_scalar(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32]) {
    let k = w.k;
    for r in 0..rows {
        for o in 0..w.outs {
            let mut acc = x[r * k] * w.w[o * k];
            for i in 1..k {
                acc += x[r * k + i] * w.w[o * k + i];
            }
            out[r * w.outs + o] = w.finish(acc, o);
        }
    }
}

const OUTS_PER_PASS: usize = 4;

/// `x_t` is scratch of at least k * rows floats.
pub fn linear_f32(x: &[f32], rows: usize, w: &FloatWeights, out: &mut [f32], x_t: &mut [f32]) {
    let k = w.k;
    assert!(x.len() >= rows * k && out.len() >= rows * w.outs && x_t.len() >= rows * k);
    let blocked_rows = rows / 4 * 4;
    for r in 0..rows {
        for i in 0..k {
            x_t[i * rows + r] = x[r * k + i];
        }
    }
    let mut r0 = 0;
    while r0 < blocked_rows {
        let mut o0 = 0;
        while o0 + OUTS_PER_PASS <= w.outs {
            // SAFETY: r0 + 4 <= rows, o0 + OUTS_PER_PASS <= outs, slices checked above.
            unsafe { four_rows::<OUTS_PER_PASS>(x_t.as_ptr().add(r0), rows, w, o0, r0, out) };
            o0 += OUTS_PER_PASS;
        }
        while o0 < w.outs {
            unsafe { four_rows::<1>(x_t.as_ptr().add(r0), rows, w, o0, r0, out) };
            o0 += 1;
        }
        r0 += 4;
    }
    let tail = &x[blocked_rows * k..rows * k];
    linear_f32_scalar(tail, rows - blocked_rows, w, &mut out[blocked_rows * w.outs..]);
}

#[inline(always)]
unsafe fn four_rows<const N: usize>(x_t: *const f32, stride: usize, w: &FloatWeights, o0: usize, r0: usize, out: &mut [f32]) {
    let k = w.k;
    let wp = w.w.as_ptr();
    let mut acc = [f32x4_splat(0.0); N];
    let x0 = v128_load(x_t as *const v128);
    for c in 0..N {
        acc[c] = f32x4_mul(x0, f32x4_splat(*wp.add((o0 + c) * k)));
    }
    for i in 1..k {
        let xi = v128_load(x_t.add(i * stride) as *const v128);
        for c in 0..N {
            acc[c] = f32x4_add(acc[c], f32x4_mul(xi, f32x4_splat(*wp.add((o0 + c) * k + i))));
        }
    }
    for c in 0..N {
        let lanes = [
            f32x4_extract_lane::<0>(acc[c]),
            f32x4_extract_lane::<1>(acc[c]),
            f32x4_extract_lane::<2>(acc[c]),
            f32x4_extract_lane::<3>(acc[c]),
        ];
        for (l, &v) in lanes.iter().enumerate() {
            out[(r0 + l) * w.outs + o0 + c] = w.finish(v, o0 + c);
        }
    }
}
