//! Checks of the full-integer kernels (kernels/litert/int8/): the simd128 int8 dot against its
//! scalar reference, alone and inside FULLY_CONNECTED and BATCH_MATMUL, on random data; and the
//! scalar value-by-value kernels on stdin data, which porter's tests compare with
//! porter.reference.litert.int8 over every int8 input.

use crate::kernels::litert::int8::dot::{batch_matmul, dot, dot_scalar, fully_connected, BatchMatmul, FullyConnected};
use crate::kernels::litert::int8::elementwise::{self as ew, Binary, Combine, Path, Reduction, Rescale, Walk};
use crate::kernels::litert::int8::fixed_point::Multiplier;
use crate::{Rng, Tally};

fn random_i8s(rng: &mut Rng, len: usize) -> Vec<i8> {
    (0..len).map(|_| rng.i8()).collect()
}

fn multiplier(rng: &mut Rng) -> Multiplier {
    Multiplier { m: (1 << 30) + rng.below(1 << 30) as i32, shift: -(rng.below(20) as i32) }
}

/// `int8 SEED`: dots of every length up to 300 with random zero points, then FULLY_CONNECTED
/// and BATCH_MATMUL (each adjoint) on random shapes, simd128 against scalar.
pub fn check_int8(seed: u64) -> ! {
    let mut rng = Rng(seed | 1);
    let mut tally = Tally::new("int8");
    for len in 0..300 {
        let (a, b) = (random_i8s(&mut rng, len), random_i8s(&mut rng, len));
        let (za, zb) = (rng.i8() as i32, rng.i8() as i32);
        let (simd, scalar) = (dot(&a, za, &b, zb), dot_scalar(&a, za, &b, zb));
        tally.record(simd == scalar, || format!("dot of {len}: {simd} vs {scalar}"));
    }
    for trial in 0..40 {
        let (rows, k, outs) = (1 + rng.below(9) as usize, 1 + rng.below(70) as usize, 1 + rng.below(20) as usize);
        let (w, x) = (random_i8s(&mut rng, outs * k), random_i8s(&mut rng, rows * k));
        let bias: Vec<i32> = (0..outs).map(|_| rng.below(20000) as i32 - 10000).collect();
        let multipliers: Vec<i32> = (0..outs).flat_map(|_| { let m = multiplier(&mut rng); [m.m, m.shift] }).collect();
        let p = FullyConnected { w: &w, bias: Some(&bias), multipliers: &multipliers, outs, k,
                                 x_zp: rng.i8() as i32, out_zp: rng.i8() as i32 };
        let (mut y, mut y_ref) = (vec![0i8; rows * outs], vec![0i8; rows * outs]);
        fully_connected(&p, &x, &mut y, dot);
        fully_connected(&p, &x, &mut y_ref, dot_scalar);
        tally.record(y == y_ref, || format!("fully connected trial {trial}: {rows}x{k} by {outs}"));
        let (batch, m, n) = (1 + rng.below(4) as usize, 1 + rng.below(9) as usize, 1 + rng.below(9) as usize);
        let (a, b) = (random_i8s(&mut rng, batch * m * k), random_i8s(&mut rng, batch * k * n));
        let p = BatchMatmul { batch, rows: m, depth: k, cols: n, adjoint: (trial % 2 == 1, trial % 4 >= 2),
                              a_zp: rng.i8() as i32, b_zp: rng.i8() as i32, multiplier: multiplier(&mut rng),
                              out_zp: rng.i8() as i32 };
        let (mut y, mut y_ref) = (vec![0i8; batch * m * n], vec![0i8; batch * m * n]);
        batch_matmul(&p, &a, &b, &mut y, dot);
        batch_matmul(&p, &a, &b, &mut y_ref, dot_scalar);
        tally.record(y == y_ref, || format!("batch matmul trial {trial}: {batch} x {m}x{k} by {k}x{n}"));
    }
    tally.finish()
}

/// A binary kernel's parameters from COMBINE - XZ YZ LEFT_SHIFT MX SX MY SY MO SO OZ (DIV's
/// reciprocal table given apart).
fn binary_params<'a>(args: &[String], walk: Walk, reciprocals: &'a [i32]) -> Binary<'a> {
    let combine = match args.first().map(String::as_str) {
        Some("add") => Combine::Add,
        Some("sub") => Combine::Sub,
        Some("squared-difference") => Combine::SquaredDifference,
        Some("mul") => Combine::Mul,
        Some("div") => Combine::Div,
        _ => crate::usage(),
    };
    let mult = |i: usize| Multiplier { m: int(args, i), shift: int(args, i + 1) };
    let shift = int(args, 4) as u32;
    Binary { combine, x: Rescale { zero_point: int(args, 2), left_shift: shift, multiplier: mult(5) },
             y: Rescale { zero_point: int(args, 3), left_shift: shift, multiplier: mult(7) },
             out: mult(9), out_zp: int(args, 11), reciprocals, walk }
}

fn int(args: &[String], i: usize) -> i32 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| crate::usage())
}

/// `reference int8-*`: a value-by-value kernel on stdin's values (int8 values as floats), each
/// row a tensor of its own (a binary kernel's rows are x then y). Returns the output bytes, or
/// None for another op.
pub fn reference_int8(op: &str, args: &[String], data: &[f32], cols: usize) -> Option<Vec<u8>> {
    let x: Vec<i8> = data.iter().map(|&v| v as i8).collect();
    let bytes = |y: Vec<i8>| y.iter().map(|&v| v as u8).collect::<Vec<u8>>();
    let floats = |y: Vec<f32>| y.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>();
    let mult = |i: usize| Multiplier { m: int(args, i), shift: int(args, i + 1) };
    Some(match op {
        // XZ M SHIFT OZ
        "int8-requantize" => {
            let mut y = vec![0i8; x.len()];
            for (xr, yr) in x.chunks(cols).zip(y.chunks_mut(cols)) {
                ew::requantize(xr, int(args, 0), mult(1), int(args, 3), yr);
            }
            bytes(y)
        }
        // ZP SCALE_BITS
        "int8-dequantize" | "int8-output" => {
            let (zp, scale) = (int(args, 0), f32::from_bits(int(args, 1) as u32));
            let mut y = vec![0.0f32; x.len()];
            for (xr, yr) in x.chunks(cols).zip(y.chunks_mut(cols)) {
                if op == "int8-dequantize" { ew::dequantize(xr, scale, zp, yr) } else { ew::dequantize_output(xr, scale, zp, yr) }
            }
            floats(y)
        }
        // the first row (256 values) is the table
        "int8-table" => bytes(x[256..].iter().map(|&v| ew::table(&x[..256], v)).collect()),
        // add|sub|squared-difference|mul|div scalar|vector|broadcast-vector XZ YZ LEFT_SHIFT MX SX MY SY
        // MO SO OZ: each pair (rows x and y) by one loop's formula; div's third row begins with
        // its reciprocal table [256, 2] as int32 bits
        "int8-binary" => {
            let reciprocals: Vec<i32> = data.get(2 * cols..2 * cols + 512).unwrap_or(&[]).iter().map(|v| v.to_bits() as i32).collect();
            let p = binary_params(args, Walk::Reference, &reciprocals);
            let path = match args.get(1).map(String::as_str) {
                Some("scalar") => Path::Scalar,
                Some("vector") => Path::Vector,
                Some("broadcast-vector") => Path::BroadcastVector,
                _ => crate::usage(),
            };
            let (xs, ys) = (&x[..cols], &x[cols..2 * cols]);
            bytes(xs.iter().zip(ys).map(|(&a, &b)| ew::binary(&p, path, a, b)).collect())
        }
        // M SHIFT BIAS: Mean4D's outputs from each row's sums (a row the depth)
        "int8-mean-4d" => {
            let r = Reduction::Mean4d { multiplier: mult(0), bias: int(args, 2), depth: cols };
            bytes(data.iter().enumerate().map(|(at, &total)| ew::reduced(&r, at, total as i64)).collect())
        }
        // add|mul - XZ YZ LEFT_SHIFT MX SX MY SY MO SO OZ XLEN flat | ... XLEN five Y0 Y1 Y2 Y3 Y4 SWAPPED:
        // ADD / MUL over LiteRT's walk of two operands (stdin's row: x's XLEN values, then y's)
        "int8-walk" => {
            let number = |i: usize| int(args, i) as usize;
            let walk = match args.get(13).map(String::as_str) {
                Some("flat") => Walk::Flat,
                Some("five") => Walk::FiveFold { y: [number(14), number(15), number(16), number(17), number(18)],
                                                 swapped: number(19) == 1 },
                _ => crate::usage(),
            };
            let p = binary_params(args, walk, &[]);
            let (xs, ys) = x.split_at(number(12));
            let len = match walk { Walk::FiveFold { y, .. } => y.iter().product(), _ => xs.len() };
            let mut out = vec![0i8; len];
            ew::for_each_walked(walk, p.combine, len, |i, ix, iy, path| out[i] = ew::binary(&p, path, xs[ix], ys[iy]));
            bytes(out)
        }
        _ => return None,
    })
}
