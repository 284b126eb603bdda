//! Weight-only weights widened to the float32 weights the file computes from them: int8 as
//! LiteRT's DEQUANTIZE and onnxruntime's DequantizeLinear (zero point 0) compute them,
//! w[o][i] = f32(q[o][i]) * scale[o] (one scale for a per-tensor weight), where the int8 value
//! converts exactly and the one rounding is the product's (porter.reference.ops._dequantize);
//! float16 as LiteRT's half-to-float DEQUANTIZE, exactly. The float product then runs on weights
//! bit-identical to the ones porter's recovery folded.

use core::arch::wasm32::*;

const LANES: usize = 16; // int8 values per v128

fn row_scale(scale: &[f32], o: usize) -> f32 {
    if scale.len() == 1 { scale[0] } else { scale[o] }
}

/// out[..outs * k] = the dequantized rows of q ([outs, k]).
pub fn dequantize_rows_scalar(q: &[i8], scale: &[f32], k: usize, out: &mut [f32]) {
    for (o, (row, dst)) in q.chunks_exact(k).zip(out.chunks_exact_mut(k)).enumerate() {
        let s = row_scale(scale, o);
        for (d, &v) in dst.iter_mut().zip(row) {
            *d = v as f32 * s;
        }
    }
}

/// The same, sixteen values at a time (i8 -> i16 -> i32 -> f32, then the product).
pub fn dequantize_rows(q: &[i8], scale: &[f32], k: usize, out: &mut [f32]) {
    assert!(out.len() >= q.len() && q.len() % k.max(1) == 0);
    for (o, (row, dst)) in q.chunks_exact(k).zip(out.chunks_exact_mut(k)).enumerate() {
        let s = row_scale(scale, o);
        let splat = f32x4_splat(s);
        let whole = k / LANES * LANES;
        let mut i = 0;
        while i < whole {
            // SAFETY: i + 16 <= k values of this row and of its output row.
            unsafe {
                let v = v128_load(row.as_ptr().add(i) as *const v128);
                let (lo, hi) = (i16x8_extend_low_i8x16(v), i16x8_extend_high_i8x16(v));
                let quads = [i32x4_extend_low_i16x8(lo), i32x4_extend_high_i16x8(lo),
                             i32x4_extend_low_i16x8(hi), i32x4_extend_high_i16x8(hi)];
                for (n, quad) in quads.iter().enumerate() {
                    let product = f32x4_mul(f32x4_convert_i32x4(*quad), splat);
                    v128_store(dst.as_mut_ptr().add(i + 4 * n) as *mut v128, product);
                }
            }
            i += LANES;
        }
        for (d, &v) in dst[whole..].iter_mut().zip(&row[whole..]) {
            *d = v as f32 * s;
        }
    }
}

const HALF_MAGNITUDE: u32 = 0x7fff;
const HALF_INFINITY: u32 = 0x7c00;
const F32_INFINITY: u32 = 0x7f80_0000;
const TWO_TO_112: u32 = 0x7780_0000; // 2^112: a half's magnitude bits, shifted into a float32's, scale by 2^-112

/// A float16 (IEEE binary16 bits) widened to float32, exactly: its magnitude bits shifted into
/// place are the value times 2^-112 (subnormal halves included, as float32 subnormals), so one
/// exact product by 2^112 restores it; infinities and NaNs (payload kept) are set apart.
pub fn half_to_f32(h: u16) -> f32 {
    let magnitude = h as u32 & HALF_MAGNITUDE;
    let sign = (h as u32 & 0x8000) << 16;
    let value = if magnitude >= HALF_INFINITY {
        f32::from_bits((magnitude << 13) | F32_INFINITY)
    } else {
        f32::from_bits(magnitude << 13) * f32::from_bits(TWO_TO_112)
    };
    f32::from_bits(value.to_bits() | sign)
}

/// out[i] = halves[i] widened to float32 (weight-only float16).
pub fn widen_halves_scalar(halves: &[u16], out: &mut [f32]) {
    for (d, &h) in out.iter_mut().zip(halves) {
        *d = half_to_f32(h);
    }
}

/// The same, eight halves at a time.
pub fn widen_halves(halves: &[u16], out: &mut [f32]) {
    assert!(out.len() >= halves.len());
    let whole = halves.len() / 8 * 8;
    let mut i = 0;
    while i < whole {
        // SAFETY: i + 8 <= len halves (16 bytes) read and 8 floats written.
        unsafe {
            let v = v128_load(halves.as_ptr().add(i) as *const v128);
            for (n, h) in [u32x4_extend_low_u16x8(v), u32x4_extend_high_u16x8(v)].iter().enumerate() {
                let magnitude = v128_and(*h, u32x4_splat(HALF_MAGNITUDE));
                let shifted = i32x4_shl(magnitude, 13);
                let finite = f32x4_mul(shifted, f32x4_splat(f32::from_bits(TWO_TO_112)));
                let special = v128_or(shifted, u32x4_splat(F32_INFINITY));
                let value = v128_bitselect(special, finite, u32x4_ge(magnitude, u32x4_splat(HALF_INFINITY)));
                let sign = i32x4_shl(v128_and(*h, u32x4_splat(0x8000)), 16);
                v128_store(out.as_mut_ptr().add(i + 4 * n) as *mut v128, v128_or(value, sign));
            }
        }
        i += 8;
    }
    widen_halves_scalar(&halves[whole..], &mut out[whole..]);
}
