//! Checks of onnxruntime's QDQ kernels (kernels/ort/qdq.rs): the QGEMM's register tiles against
//! its scalar reference on random shapes, and the scalar kernels on stdin values, which porter's
//! tests compare with porter.reference.ort.qdq (every 8-bit input where a kernel reads one).

use crate::kernels::ort::float::pow_by_products;
use crate::kernels::ort::qdq::{self, qgemm, qgemm_scalar, Qgemm, QgemmOutput, QlinearAdd, QlinearMul};
use crate::{Rng, Tally};

/// `qdq SEED`: QLinearMatMul / QGemm with a constant int8 B on random shapes, zero points,
/// scales, biases and outputs, saturating pairs and not: the tiles against qgemm_scalar.
pub fn check_qdq(seed: u64) -> ! {
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::new("qdq");
    for trial in 0..200 {
        let (m, k, n) = (1 + rng.below(12) as usize, 1 + rng.below(80) as usize, 1 + rng.below(24) as usize);
        let w: Vec<i8> = (0..n * k).map(|_| rng.i8()).collect();
        let a: Vec<i16> = (0..m * k).map(|_| (rng.i8() as u8) as i16).collect();
        let b_zp: Vec<i32> = (0..n).map(|_| if trial % 3 == 0 { rng.i8() as i32 } else { 0 }).collect();
        let scale: Vec<f32> = (0..n).map(|_| 1e-3 + (rng.unit() + 1.0) * 1e-2).collect();
        let bias: Vec<i32> = (0..n).map(|_| rng.below(20000) as i32 - 10000).collect();
        let output = match trial % 3 {
            0 => QgemmOutput::Float,
            1 => QgemmOutput::Quantized { zp: (rng.i8() as u8) as i32, lo: 0, hi: 255 },
            _ => QgemmOutput::Quantized { zp: rng.i8() as i32, lo: -128, hi: 127 },
        };
        let p = Qgemm { batch: 1, m, k, n, a_zp: (rng.i8() as u8) as i32, b_const: Some(&w), b_zp: &b_zp, scale: &scale,
                        bias: (trial % 2 == 0).then_some(&bias[..]), output, saturating: trial % 4 < 2 };
        let (mut tiled, mut scalar) = (vec![0.0f32; m * n], vec![0.0f32; m * n]);
        qgemm(&p, &a, &[], &mut tiled);
        qgemm_scalar(&p, &a, &[], &mut scalar);
        let same = tiled.iter().zip(&scalar).all(|(x, y)| x.to_bits() == y.to_bits());
        tally.record(same, || format!("qgemm trial {trial}: {m}x{k} by {n}, saturating {}", p.saturating));
    }
    tally.finish()
}

fn int(args: &[String], i: usize) -> i32 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| crate::usage())
}

/// An f32 argument given as its bits (a u32).
fn float(args: &[String], i: usize) -> f32 {
    f32::from_bits(args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| crate::usage()))
}

fn words(values: impl Iterator<Item = i32>) -> Vec<u8> {
    values.flat_map(|v| v.to_le_bytes()).collect()
}

fn floats(values: impl Iterator<Item = f32>) -> Vec<u8> {
    values.flat_map(|v| v.to_le_bytes()).collect()
}

/// `reference qdq-*`: a scalar kernel on stdin's values, each row of `cols` (a binary kernel's
/// rows are a then b). Float arguments are given as their bits. Returns the output bytes, or
/// None for another op.
pub fn reference_qdq(op: &str, args: &[String], data: &[f32], cols: usize) -> Option<Vec<u8>> {
    Some(match op {
        // SCALE ZP LO HI: every value quantised, as i32
        "qdq-quantize" => words(data.iter().map(|&x| qdq::quantize(x, float(args, 0), int(args, 1), int(args, 2), int(args, 3)))),
        // SCALE ZP: the values (integers) dequantised
        "qdq-dequantize" => floats(data.iter().map(|&q| qdq::dequantize(q as i32, float(args, 0), int(args, 1)))),
        // SCALE ZP LO HI: the values' bits are int32 accumulators, requantised as MLAS does
        "qdq-requantize" => {
            let (scale, zp, lo, hi) = (float(args, 0), int(args, 1), int(args, 2), int(args, 3));
            words(data.iter().map(|&acc| qdq::to_integer(acc.to_bits() as i32 as f32 * scale, zp, lo, hi)))
        }
        // RA RB FIXED A_SCALAR B_SCALAR LO HI
        "qdq-add" => {
            let p = QlinearAdd { ra: float(args, 0), rb: float(args, 1), fixed: float(args, 2), a_scalar: int(args, 3) == 1,
                                 b_scalar: int(args, 4) == 1, lo: int(args, 5), hi: int(args, 6) };
            let (a, b) = data.split_at(cols);
            words(a.iter().zip(b).map(|(&x, &y)| qdq::qlinear_add(&p, x as i32, y as i32)))
        }
        // RATIO A_ZP B_ZP C_ZP LO HI: a's row then b's, QLinearMul of each pair
        "qdq-mul" => {
            let p = QlinearMul { ratio: float(args, 0), a_zp: int(args, 1), b_zp: int(args, 2), c_zp: int(args, 3) as f32,
                                 lo: int(args, 4), hi: int(args, 5) };
            let (a, b) = data.split_at(cols);
            words(a.iter().zip(b).map(|(&x, &y)| qdq::qlinear_mul(&p, x as i32, y as i32)))
        }
        // CUBE: Pow by 2 (0) or 3 (1) of every value, as onnxruntime multiplies
        "qdq-pow" => floats(data.iter().map(|&x| pow_by_products(x, int(args, 0) == 1))),
        // MULTIPLIER (an f32, widened) ZP ROW: the first 256 values are the table, then softmax rows of ROW values
        "qdq-softmax" => {
            let (table, rows) = data.split_at(256);
            let x: Vec<u8> = rows.iter().map(|&v| v as u8).collect();
            let mut y = vec![0u8; x.len()];
            for (xr, yr) in x.chunks(int(args, 2) as usize).zip(y.chunks_mut(int(args, 2) as usize)) {
                qdq::qlinear_softmax_row(table, float(args, 0) as f64, int(args, 1), xr, yr);
            }
            y
        }
        // M K N A_ZP OUTPUT(0 float, 1 uint8 at ZP, 2 int8 at ZP) ZP SATURATING BIAS B_CONST: data a [m, k]
        // (values), b (constant: [n, k]; else [k, n]), b's zero points [n], scales [n], bias [n]
        "qdq-gemm" => {
            let arg = |i: usize| int(args, i) as usize;
            let (m, k, n, b_const) = (arg(0), arg(1), arg(2), int(args, 8) == 1);
            let a: Vec<i16> = data[..m * k].iter().map(|&v| v as i16).collect();
            let b: Vec<i16> = data[m * k..m * k + n * k].iter().map(|&v| v as i16).collect();
            let w: Vec<i8> = b.iter().map(|&v| v as i8).collect();
            let rest = &data[m * k + n * k..];
            let b_zp: Vec<i32> = rest[..n].iter().map(|&v| v as i32).collect();
            let bias: Vec<i32> = rest[2 * n..3 * n].iter().map(|&v| v as i32).collect();
            let output = match int(args, 4) {
                0 => QgemmOutput::Float,
                1 => QgemmOutput::Quantized { zp: int(args, 5), lo: 0, hi: 255 },
                _ => QgemmOutput::Quantized { zp: int(args, 5), lo: -128, hi: 127 },
            };
            let p = Qgemm { batch: 1, m, k, n, a_zp: int(args, 3), b_const: b_const.then_some(&w[..]), b_zp: &b_zp,
                            scale: &rest[n..2 * n], bias: (int(args, 7) == 1).then_some(&bias[..]), output,
                            saturating: int(args, 6) == 1 };
            let mut y = vec![0.0f32; m * n];
            qgemm_scalar(&p, &a, &b, &mut y);
            floats(y.into_iter())
        }
        _ => return None,
    })
}
