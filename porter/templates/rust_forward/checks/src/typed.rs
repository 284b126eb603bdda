//! Checks of the exact element work typed programs and tensor steps share (kernels/common/exact.rs)
//! on stdin values, which porter's tests compare with porter.reference.exact and .typed
//! (tests/test_kernels_exhaustive.py). Integers travel as little-endian i64s: two stdin words each.

use crate::kernels::common::exact::{self, Arithmetic, Comparison};

fn int(args: &[String], i: usize) -> i64 {
    args.get(i).and_then(|s| s.parse().ok()).unwrap_or_else(|| crate::usage())
}

fn flag(args: &[String], i: usize) -> bool {
    int(args, i) == 1
}

/// The stdin words (each an f32 by the protocol, its bits kept) as i64s, two words each.
fn longs(data: &[f32]) -> Vec<i64> {
    data.chunks_exact(2).map(|w| (w[0].to_bits() as u64 | (w[1].to_bits() as u64) << 32) as i64).collect()
}

fn bytes(values: impl Iterator<Item = i64>) -> Vec<u8> {
    values.flat_map(|v| v.to_le_bytes()).collect()
}

fn comparison(name: &str) -> Comparison {
    match name {
        "equal" => Comparison::Equal,
        "not_equal" => Comparison::NotEqual,
        "less" => Comparison::Less,
        "less_equal" => Comparison::LessEqual,
        "greater" => Comparison::Greater,
        "greater_equal" => Comparison::GreaterEqual,
        _ => crate::usage(),
    }
}

fn arithmetic(name: &str) -> Arithmetic {
    match name {
        "add" => Arithmetic::Add,
        "sub" => Arithmetic::Sub,
        "mul" => Arithmetic::Mul,
        "maximum" => Arithmetic::Maximum,
        "minimum" => Arithmetic::Minimum,
        _ => crate::usage(),
    }
}

/// `reference typed-*`: one kernel of exact.rs on stdin's values. Returns the output bytes, or
/// None for another op.
pub fn reference_typed(op: &str, args: &[String], data: &[f32]) -> Option<Vec<u8>> {
    let name = || args.first().map(String::as_str).unwrap_or_else(|| crate::usage());
    Some(match op {
        // KIND: a's i64s then b's; one byte per pair
        "typed-compare" => {
            let v = longs(data);
            let (a, b) = v.split_at(v.len() / 2);
            a.iter().zip(b).map(|(&x, &y)| exact::compare(comparison(name()), x, y) as u8).collect()
        }
        // KIND: a's f32s then b's (compared widened to f64, as a float operand is)
        "typed-compare-f32" => {
            let (a, b) = data.split_at(data.len() / 2);
            a.iter().zip(b).map(|(&x, &y)| exact::compare(comparison(name()), x as f64, y as f64) as u8).collect()
        }
        // KIND BITS: a's i64s then b's; each result narrowed to a signed BITS-bit integer
        "typed-arith" => {
            let v = longs(data);
            let (a, b) = v.split_at(v.len() / 2);
            let bits = int(args, 1) as u32;
            bytes(a.iter().zip(b).map(|(&x, &y)| exact::narrow(exact::arithmetic(arithmetic(name()), x, y), bits, true)))
        }
        // OUTER N INNER EXCLUSIVE REVERSE BITS: x's i64s
        "typed-cumsum" => {
            let (outer, n, inner) = (int(args, 0) as usize, int(args, 1) as usize, int(args, 2) as usize);
            let y = exact::cumsum(&longs(data), outer, n, inner, flag(args, 3), flag(args, 4));
            let bits = int(args, 5) as u32;
            bytes(y.into_iter().map(|v| exact::narrow(v, bits, true)))
        }
        // INNER WRAPS DIM...: index vectors of len(DIM) i64s; the table positions read
        "typed-gather-nd" => {
            let dims: Vec<usize> = (2..args.len()).map(|i| int(args, i) as usize).collect();
            bytes(exact::gather_nd_positions(&longs(data), &dims, int(args, 0) as usize, flag(args, 1)).into_iter().map(|p| p as i64))
        }
        // AXIS DIM WRAPS RANK SHAPE... STRIDES...: one i64 index per output value; the table positions read
        "typed-gather-elements" => {
            let rank = int(args, 3) as usize;
            let shape: Vec<usize> = (0..rank).map(|i| int(args, 4 + i) as usize).collect();
            let strides: Vec<usize> = (0..rank).map(|i| int(args, 4 + rank + i) as usize).collect();
            let at = exact::gather_elements_positions(&longs(data), &shape, &strides, int(args, 0) as usize,
                                                   int(args, 1) as usize, flag(args, 2));
            bytes(at.into_iter().map(|p| p as i64))
        }
        // WIDE: each f32 cast to int32 (or int64) as x86's cvttss2si does
        "typed-float-to-int" => bytes(data.iter().map(|&x| exact::float_to_int(x, flag(args, 0)))),
        _ => return None,
    })
}
