//! The value-by-value integer kernels (porter.reference.litert.int8): the rescaled binary ops,
//! MEAN and SUM, the 256-entry tables, SOFTMAX and the conversions between int8 and float32.
//! LiteRT's x86 build runs NEON loops (through NEON_2_SSE) for ADD, MUL and the (de)quantisations
//! on whole blocks and a scalar loop on the rest, which round differently: where a value sits in
//! the tensor (and, for ADD and MUL, how the operands broadcast) decides.

use super::fixed_point::{leading_sign_bits, multiply_double_rounding, multiply_vector_rounding, rounding_divide_by_pot,
                         round_half_away, saturate, srdhm, vshl, Multiplier};

/// One input of ADD / SUB / SQUARED_DIFFERENCE: less its zero point, shifted left, rescaled.
#[derive(Clone, Copy, Debug)]
pub struct Rescale {
    pub zero_point: i32,
    pub left_shift: u32,
    pub multiplier: Multiplier,
}

impl Rescale {
    /// The reference formula: shifted left, then gemmlowp's high multiply and rounding shift.
    #[inline(always)]
    fn apply(&self, q: i8) -> i64 {
        multiply_double_rounding(((q as i64) - self.zero_point as i64) << self.left_shift, self.multiplier) as i64
    }

    /// ADD's NEON loops: AddElementwiseInt8 shifts by the left shift plus the (negative) input
    /// shift at once, then multiplies (one rounding); AddScalarBroadcast (`broadcast`) shifts,
    /// multiplies, then shifts right by the input shift with VSHL (a floor).
    #[inline(always)]
    fn apply_vector(&self, q: i8, broadcast: bool) -> i32 {
        let (offset, Multiplier { m, shift }) = (q as i32 - self.zero_point, self.multiplier);
        if broadcast {
            vshl(srdhm(vshl(offset, self.left_shift as i32), m), shift)
        } else {
            srdhm(vshl(offset, self.left_shift as i32 + shift), m)
        }
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

/// Which of LiteRT's loops computes an element of ADD / MUL (porter.reference.litert.int8.binary_paths).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Path {
    /// the reference formula (scalar loops, tails, a generic broadcast, every other op)
    Scalar,
    /// AddElementwiseInt8's / MulElementwise's NEON blocks
    Vector,
    /// AddScalarBroadcast's / MulSimpleBroadcast's NEON blocks (one operand a broadcast value)
    BroadcastVector,
}

/// How LiteRT walks a binary op's operands (porter.reference.litert.int8.broadcast_walk).
#[derive(Clone, Copy, Debug)]
pub enum Walk {
    /// the reference loop over every element, each operand by its broadcast strides (SUB,
    /// SQUARED_DIFFERENCE, DIV, MAXIMUM, and a broadcast no five-fold pattern fits)
    Reference,
    /// equal shapes: one run over the flat size
    Flat,
    /// ProcessBroadcastShapes' five-fold pattern [y0, y1, y2, y3, y4]; `swapped` when the second
    /// input is the one that broadcasts innermost (the kernels then take it first)
    FiveFold { y: [usize; 5], swapped: bool },
}

/// The NEON blocks of the elementwise and the scalar-broadcast loops (ADD_BLOCKS, MUL_BLOCKS).
fn blocks(combine: Combine) -> (usize, usize) {
    if combine == Combine::Add { (16, 8) } else { (16, 16) }
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
    pub walk: Walk,
}

#[inline(always)]
pub fn binary(p: &Binary, path: Path, x: i8, y: i8) -> i8 {
    let raw = match (p.combine, path) {
        (Combine::Add, Path::Vector | Path::BroadcastVector) => return add_vector(p, path == Path::BroadcastVector, x, y),
        (Combine::Mul, Path::Vector | Path::BroadcastVector) => return mul_vector(p, x, y),
        (Combine::Add, _) => p.x.apply(x) + p.y.apply(y),
        (Combine::Sub, _) => p.x.apply(x) - p.y.apply(y),
        (Combine::SquaredDifference, _) => {
            let d = p.x.apply(x) - p.y.apply(y);
            d * d
        }
        (Combine::Mul, _) => (x as i64 - p.x.zero_point as i64) * (y as i64 - p.y.zero_point as i64),
        (Combine::Div, _) => return divide(p, x, y),
        (Combine::Maximum, _) => return x.max(y),
    };
    saturate(multiply_double_rounding(raw, p.out) as i64 + p.out_zp as i64)
}

/// The sum through the output multiplier, narrowed to int16 (VMOVN: wrapping), the zero point
/// added in int16 (wrapping), saturated to int8 (VQMOVN).
fn add_vector(p: &Binary, broadcast: bool, x: i8, y: i8) -> i8 {
    let raw = p.x.apply_vector(x, broadcast).wrapping_add(p.y.apply_vector(y, broadcast));
    let out = rounding_divide_by_pot(srdhm(raw, p.out.m), (-p.out.shift) as u32);
    saturate((out as i16).wrapping_add(p.out_zp as i16) as i64)
}

/// The reference formula's value saturated to int16 (VQMOVN), the zero point added in int16
/// (wrapping), saturated to int8.
fn mul_vector(p: &Binary, x: i8, y: i8) -> i8 {
    let product = (x as i64 - p.x.zero_point as i64) * (y as i64 - p.y.zero_point as i64);
    let out = multiply_double_rounding(product, p.out).clamp(i16::MIN as i32, i16::MAX as i32) as i16;
    saturate(out.wrapping_add(p.out_zp as i16) as i64)
}

/// ADD / MUL over a Flat or FiveFold walk, each element by the loop LiteRT runs it in: f(output
/// index, x index, y index, path), in LiteRT's order (the output's).
pub fn for_each_walked(walk: Walk, combine: Combine, len: usize, mut f: impl FnMut(usize, usize, usize, Path)) {
    let (block, broadcast_block) = blocks(combine);
    let in_block = |at: usize, run: usize, width: usize| at < run - run % width;
    match walk {
        Walk::Reference => unreachable!("the reference walk goes by strides"),
        Walk::Flat => {
            for i in 0..len {
                f(i, i, i, if in_block(i, len, block) { Path::Vector } else { Path::Scalar });
            }
        }
        Walk::FiveFold { y: [y0, y1, y2, y3, y4], swapped } => {
            let mut o = 0;
            for i0 in 0..y0 {
                for i1 in 0..y1 {
                    for i2 in 0..y2 {
                        for i3 in 0..y3 {
                            for i4 in 0..y4 {
                                // the first walked input skips y3, the second y1
                                let a = ((i0 * y1 + i1) * y2 + i2) * y4 + i4;
                                let b = ((i0 * y2 + i2) * y3 + i3) * y4 + i4;
                                let path = if y4 > 1 {
                                    if in_block(i4, y4, block) { Path::Vector } else { Path::Scalar }
                                } else if in_block(i3, y3, broadcast_block) {
                                    Path::BroadcastVector
                                } else {
                                    Path::Scalar
                                };
                                let (ix, iy) = if swapped { (b, a) } else { (a, b) };
                                f(o, ix, iy, path);
                                o += 1;
                            }
                        }
                    }
                }
            }
        }
    }
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
    let scaled = srdhm(quotient, p.out.m);
    saturate(rounding_divide_by_pot_wide(scaled, -total) as i64 + p.out_zp as i64)
}

/// rounding_divide_by_pot as LiteRT's release build computes it for any exponent (DIV's small
/// dividends reach past 31, a multiplier far above one below 0): the mask 2^e - 1 made in 64 bits
/// (count modulo 64) and cut to 32, the int32 shift's count taken modulo 32, as x86 does.
#[inline(always)]
fn rounding_divide_by_pot_wide(x: i32, exponent: i32) -> i32 {
    let mask = (1i64.wrapping_shl((exponent & 63) as u32)).wrapping_sub(1) as i32;
    let threshold = (mask >> 1) + (x < 0) as i32;
    (x >> (exponent & 31)) + ((x & mask) > threshold) as i32
}

/// MEAN (fixed point, the count folded into the multiplier) or SUM (float32, as LiteRT's).
#[derive(Clone, Copy, Debug)]
pub enum Reduction {
    Mean { x_zp: i32, count: i64, multiplier: Multiplier, out_zp: i32 },
    /// LiteRT's Mean4D (axes 1 and 2 of [batch, h, w, depth], keep_dims): the raw sum by one
    /// multiplier plus a bias; channels in whole blocks of 16 by the NEON loop's rounding
    /// (ties up), the rest by gemmlowp's
    Mean4d { multiplier: Multiplier, bias: i32, depth: usize },
    Sum { scale: f32, bias: f32, out_zp: i32 },
}

/// Mean4D's NEON loop takes 16 channels at a time (MEAN_4D_BLOCK).
pub const MEAN_4D_BLOCK: usize = 16;

/// Output `at` of a reduction from the int sum of its inputs.
#[inline(always)]
pub fn reduced(r: &Reduction, at: usize, total: i64) -> i8 {
    match *r {
        Reduction::Mean { x_zp, count, multiplier, out_zp } =>
            saturate(multiply_double_rounding(total - count * x_zp as i64, multiplier) as i64 + out_zp as i64),
        Reduction::Mean4d { multiplier, bias, depth } => {
            let scaled = if at % depth < depth - depth % MEAN_4D_BLOCK {
                multiply_vector_rounding(total, multiplier)
            } else {
                multiply_double_rounding(total, multiplier)
            };
            saturate(scaled as i64 + bias as i64)
        }
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
