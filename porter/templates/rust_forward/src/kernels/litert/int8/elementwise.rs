//! The value-by-value integer kernels (porter.reference.litert.int8): the rescaled binary ops,
//! MEAN and SUM, the 256-entry tables, SOFTMAX and the conversions between int8 and float32.
//! The (de)quantisations run LiteRT's NEON loops (through NEON_2_SSE) on whole blocks and a
//! scalar loop on the rest, which round differently: where a value sits in the tensor decides.

use super::fixed_point::{leading_sign_bits, multiply_double_rounding, multiply_vector_rounding, rounding_divide_by_pot,
                         round_half_away, saturate, srdhm, Multiplier};

/// One input of ADD / SUB / SQUARED_DIFFERENCE: less its zero point, shifted left, rescaled.
#[derive(Clone, Copy, Debug)]
pub struct Rescale {
    pub zero_point: i32,
    pub left_shift: u32,
    pub multiplier: Multiplier,
}

impl Rescale {
    #[inline(always)]
    fn apply(&self, q: i8) -> i64 {
        multiply_double_rounding(((q as i64) - self.zero_point as i64) << self.left_shift, self.multiplier) as i64
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Combine {
    Add,
    Sub,
    SquaredDifference,
    /// (x - zx)(y - zy) by one multiplier
    Mul,
    /// (x - zx) times gemmlowp's reciprocal of (y - zy) (a table by |y - zy|), by one multiplier
    Div,
    /// the larger stored value (both share the output's quantisation)
    Maximum,
}

/// A binary kernel's parameters (`x`, `y` rescale each input; Mul and Div take their zero points).
pub struct Binary<'a> {
    pub combine: Combine,
    pub x: Rescale,
    pub y: Rescale,
    pub out: Multiplier,
    pub out_zp: i32,
    /// Div: [256, 2], the reciprocal of each divisor 0..255 and its shift (GetReciprocal)
    pub reciprocals: &'a [i32],
}

#[inline(always)]
pub fn binary(p: &Binary, x: i8, y: i8) -> i8 {
    let raw = match p.combine {
        Combine::Add => p.x.apply(x) + p.y.apply(y),
        Combine::Sub => p.x.apply(x) - p.y.apply(y),
        Combine::SquaredDifference => {
            let d = p.x.apply(x) - p.y.apply(y);
            d * d
        }
        Combine::Mul => (x as i64 - p.x.zero_point as i64) * (y as i64 - p.y.zero_point as i64),
        Combine::Div => return divide(p, x, y),
        Combine::Maximum => return x.max(y),
    };
    saturate(multiply_double_rounding(raw, p.out) as i64 + p.out_zp as i64)
}

fn divide(p: &Binary, x: i8, y: i8) -> i8 {
    let (mut a, mut b) = (x as i32 - p.x.zero_point, y as i32 - p.y.zero_point);
    assert!(b != 0, "int8 DIV by its divisor's zero point (LiteRT refuses it)");
    if b < 0 {
        a = -a;
        b = -b;
    }
    let (inverse, inverse_shift) = (p.reciprocals[2 * b as usize], p.reciprocals[2 * b as usize + 1]);
    let headroom = leading_sign_bits(a);
    let quotient = srdhm(a << headroom, inverse);
    let total = p.out.shift - inverse_shift - headroom as i32;
    assert!(total <= 0, "int8 DIV: a left shift of the quotient");
    let scaled = srdhm(quotient, p.out.m);
    saturate(rounding_divide_by_pot(scaled, (-total) as u32) as i64 + p.out_zp as i64)
}

/// MEAN (fixed point, the count folded into the multiplier) or SUM (float32, as LiteRT's).
#[derive(Clone, Copy, Debug)]
pub enum Reduction {
    Mean { x_zp: i32, count: i64, multiplier: Multiplier, out_zp: i32 },
    Sum { scale: f32, bias: f32, out_zp: i32 },
}

/// One output of a reduction from the int sum of its inputs.
#[inline(always)]
pub fn reduced(r: &Reduction, total: i64) -> i8 {
    match *r {
        Reduction::Mean { x_zp, count, multiplier, out_zp } =>
            saturate(multiply_double_rounding(total - count * x_zp as i64, multiplier) as i64 + out_zp as i64),
        Reduction::Sum { scale, bias, out_zp } =>
            saturate(round_half_away(total as f32 * scale + bias) as i64 + out_zp as i64),
    }
}

/// A one-input kernel by its table (index value + 128).
#[inline(always)]
pub fn table(table: &[i8], x: i8) -> i8 {
    table[(x as i32 + 128) as usize]
}

/// int8 SOFTMAX over rows: each value's exp read from the table at 255 - max + x, the row
/// summed in order in float32, each probability rounded at the output scale.
pub fn softmax(table: &[f32], out_scale: f32, out_zp: i32, x: &[i8], row: usize, y: &mut [i8], exps: &mut Vec<f32>) {
    for (xr, yr) in x.chunks_exact(row).zip(y.chunks_exact_mut(row)) {
        let max = *xr.iter().max().unwrap() as i32;
        exps.clear();
        exps.extend(xr.iter().map(|&v| table[(255 - max + v as i32) as usize]));
        let mut total = 0.0f32;
        for &e in exps.iter() {
            total += e;
        }
        let inverse = 1.0f32 / (total * out_scale);
        for (o, &e) in yr.iter_mut().zip(exps.iter()) {
            *o = saturate(round_half_away(e * inverse) as i64 + out_zp as i64);
        }
    }
}

/// QUANTIZE's and DEQUANTIZE's vector loop takes 8 values at a time, Requantize's 16.
pub const QUANTIZE_BLOCK: usize = 8;
pub const REQUANTIZE_BLOCK: usize = 16;

/// float32 -> int8: whole blocks by x * (1 / scale) in float32 rounded half to even, the tail by
/// x / scale in double rounded half away from zero.
pub fn quantize(x: &[f32], scale: f32, zp: i32, y: &mut [i8]) {
    let vector = x.len() / QUANTIZE_BLOCK * QUANTIZE_BLOCK;
    let inverse = 1.0f32 / scale;
    for (i, (&v, o)) in x.iter().zip(y.iter_mut()).enumerate() {
        let rounded = if i < vector {
            (v * inverse).round_ties_even() as i64
        } else {
            let q = v as f64 / scale as f64;
            (if q < 0.0 { -(q.abs() + 0.5).floor() } else { (q + 0.5).floor() }) as i64
        };
        *o = saturate(rounded + zp as i64);
    }
}

/// int8 -> int8 at another scale: whole blocks of 16 by the vector loop's rounding, the tail
/// by gemmlowp's.
pub fn requantize(x: &[i8], x_zp: i32, multiplier: Multiplier, out_zp: i32, y: &mut [i8]) {
    let vector = x.len() / REQUANTIZE_BLOCK * REQUANTIZE_BLOCK;
    for (i, (&q, o)) in x.iter().zip(y.iter_mut()).enumerate() {
        let offset = q as i64 - x_zp as i64;
        let scaled = if i < vector {
            multiply_vector_rounding(offset, multiplier)
        } else {
            multiply_double_rounding(offset, multiplier)
        };
        *o = saturate(scaled as i64 + out_zp as i64);
    }
}

/// DEQUANTIZE: whole blocks as q * scale - zp * scale (two roundings), the tail as (q - zp) * scale.
pub fn dequantize(x: &[i8], scale: f32, zp: i32, y: &mut [f32]) {
    let vector = x.len() / QUANTIZE_BLOCK * QUANTIZE_BLOCK;
    for (i, (&q, o)) in x.iter().zip(y.iter_mut()).enumerate() {
        *o = if i < vector { q as f32 * scale - zp as f32 * scale } else { (q as i32 - zp) as f32 * scale };
    }
}

/// An int8 output as the golden reports it: (q - zp) * scale.
pub fn dequantize_output(x: &[i8], scale: f32, zp: i32, y: &mut [f32]) {
    for (&q, o) in x.iter().zip(y.iter_mut()) {
        *o = (q as i32 - zp) as f32 * scale;
    }
}
