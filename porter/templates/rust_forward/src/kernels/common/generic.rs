//! Elementwise ops, reductions and slices: the graph's own ops, one at a time, for whatever
//! porter recovered no block for (porter/reference/ops.py is their definition).
//!
//! Shapes have four axes (leading ones padded with 1); an operand is read through per-axis
//! strides, 0 where it is broadcast. Only the first `rows` positions of the token axis are
//! computed. These run rarely and on small tensors (a head's pooling, an op an exporter added),
//! so they are plain loops: each value is one IEEE operation, exactly the reference's; LiteRT's
//! TANH and LOGISTIC run their kernels (activation.rs) over the values in tensor order, since
//! the logistic's formula depends on where a value lies in its tensor.

use crate::kernels::litert::activation::{logistic_in_place, tanh_in_place};
use crate::kernels::litert::eigen::eigen_sum;
use crate::kernels::litert::libm::expf;
use crate::kernels::ort::float as ort_float;
use crate::program::{Elementwise, Reduce};

/// A one-input op over `values`, the first values of a tensor of `tensor_len` in its row-major
/// order (all of it, or its live rows).
fn unary_in_place(op: Elementwise, values: &mut [f32], tensor_len: usize) {
    match op {
        Elementwise::TanhLitert => tanh_in_place(values),
        Elementwise::LogisticLitert => logistic_in_place(values, tensor_len),
        // four lanes at a time where the engine fuses relaxed_madd (same bits as `unary`): an
        // exported GELU's Erf runs over every value of the FFN
        Elementwise::ErfOrt => ort_float::apply_in_place(ort_float::Elementwise::Erf, values),
        Elementwise::RoundHalf => ort_float::round_half_in_place(values),
        _ => values.iter_mut().for_each(|v| *v = unary(op, *v)),
    }
}

/// out[i] = op(out[i], b[i]) where the first operand is laid out like the output (its slot is
/// the output's); `tensor_len`: the whole output's size (shape may be its live rows).
pub fn elementwise_in_place(op: Elementwise, out: &mut [f32], b: Option<(&[f32], [usize; 4])>, shape: [usize; 4],
                            tensor_len: usize) {
    let n = shape.iter().product::<usize>();
    let dense = natural(shape);
    match b {
        Some((b, strides)) if strides == dense => dense_binary(op, &mut out[..n], None, &b[..n]),
        Some((b, strides)) => {
            let mut i = 0;
            for i0 in 0..shape[0] {
                for i1 in 0..shape[1] {
                    for i2 in 0..shape[2] {
                        for i3 in 0..shape[3] {
                            out[i] = binary(op, out[i], b[i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3]]);
                            i += 1;
                        }
                    }
                }
            }
        }
        None => unary_in_place(op, &mut out[..n], tensor_len),
    }
}

/// The output shape limited to `rows` positions along the token axis (4: no token axis).
pub fn limited(shape: [usize; 4], token_axis: usize, rows: usize) -> [usize; 4] {
    let mut s = shape;
    if token_axis < 4 {
        s[token_axis] = s[token_axis].min(rows);
    }
    s
}

fn unary(op: Elementwise, x: f32) -> f32 {
    match op {
        Elementwise::Neg => -x,
        Elementwise::Abs => x.abs(),
        Elementwise::Sqrt => x.sqrt(),
        Elementwise::Rsqrt => 1.0 / x.sqrt(),
        Elementwise::Relu => if x > 0.0 { x } else { 0.0 },
        Elementwise::ExpLitert => expf(x),
        Elementwise::TanhOrt => ort_float::tanh(x),
        _ => unreachable!("{op:?} takes two operands, or runs over its tensor"),
    }
}

/// out[i] = op(a[i], b[i]), a being out itself when None: the op chosen once, so that each
/// loop is one operation a value (which LLVM vectorises), not a jump through a table per value.
fn dense_binary(op: Elementwise, out: &mut [f32], a: Option<&[f32]>, b: &[f32]) {
    #[inline(always)]
    fn each(out: &mut [f32], a: Option<&[f32]>, b: &[f32], f: impl Fn(f32, f32) -> f32) {
        match a {
            Some(a) => out.iter_mut().zip(a).zip(b).for_each(|((o, &x), &y)| *o = f(x, y)),
            None => out.iter_mut().zip(b).for_each(|(o, &y)| *o = f(*o, y)),
        }
    }
    match op {
        Elementwise::Add => each(out, a, b, |x, y| x + y),
        Elementwise::Sub => each(out, a, b, |x, y| x - y),
        Elementwise::Mul => each(out, a, b, |x, y| x * y),
        Elementwise::Div => each(out, a, b, |x, y| x / y),
        _ => each(out, a, b, |x, y| binary(op, x, y)),
    }
}

fn binary(op: Elementwise, a: f32, b: f32) -> f32 {
    match op {
        Elementwise::Add => a + b,
        Elementwise::Sub => a - b,
        Elementwise::Mul => a * b,
        Elementwise::Div => a / b,
        // std::max / std::min, as both runtimes' kernels call them: `a` unless b is strictly
        // beyond it (so -0 and +0, and NaN in a, give a)
        Elementwise::Maximum => if a < b { b } else { a },
        Elementwise::Minimum => if b < a { b } else { a },
        Elementwise::SquaredDifference => {
            let d = a - b;
            d * d
        }
        _ => unreachable!("{op:?} takes one operand"),
    }
}

/// The strides of a tensor of `shape` read in its own row-major order.
pub fn natural(shape: [usize; 4]) -> [usize; 4] {
    [shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1]
}

/// The offset in x (of `strides`) of each position of out_shape, in row-major order: where each
/// output of a reduction starts.
pub fn output_bases(out_shape: [usize; 4], strides: [usize; 4]) -> impl Iterator<Item = usize> {
    (0..out_shape[0]).flat_map(move |i0| {
        (0..out_shape[1]).flat_map(move |i1| {
            (0..out_shape[2]).flat_map(move |i2| {
                (0..out_shape[3]).map(move |i3| i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3])
            })
        })
    })
}

/// Steps `index` to the next position over the `reduced` axes, last axis fastest; false once it
/// wrapped around (every position visited).
pub fn next_reduced_index(index: &mut [usize; 4], reduced: &[usize], shape: [usize; 4]) -> bool {
    for &a in reduced.iter().rev() {
        index[a] += 1;
        if index[a] < shape[a] {
            return true;
        }
        index[a] = 0;
    }
    false
}

/// out[i] = op(a[i], b[i]) over `shape` (row-major), operands read through their strides;
/// `tensor_len`: the whole output's size (shape may be its live rows).
pub fn elementwise(op: Elementwise, a: &[f32], a_strides: [usize; 4], b: Option<(&[f32], [usize; 4])>,
                   shape: [usize; 4], tensor_len: usize, out: &mut [f32]) {
    let n = shape.iter().product::<usize>();
    let dense = natural(shape);
    let Some((b, b_strides)) = b else {
        gather(a, a_strides, shape, &mut out[..n]);
        return unary_in_place(op, &mut out[..n], tensor_len);
    };
    // Operands laid out like the output (a residual add): one flat pass.
    if a_strides == dense && b_strides == dense {
        return dense_binary(op, &mut out[..n], Some(&a[..n]), &b[..n]);
    }
    let mut o = 0;
    for i0 in 0..shape[0] {
        for i1 in 0..shape[1] {
            for i2 in 0..shape[2] {
                for i3 in 0..shape[3] {
                    let at = |s: [usize; 4]| i0 * s[0] + i1 * s[1] + i2 * s[2] + i3 * s[3];
                    out[o] = binary(op, a[at(a_strides)], b[at(b_strides)]);
                    o += 1;
                }
            }
        }
    }
}

/// out = a over `shape` in row-major order, read through a's strides.
fn gather(a: &[f32], strides: [usize; 4], shape: [usize; 4], out: &mut [f32]) {
    if strides == natural(shape) {
        return out.copy_from_slice(&a[..out.len()]);
    }
    let mut o = 0;
    for i0 in 0..shape[0] {
        for i1 in 0..shape[1] {
            for i2 in 0..shape[2] {
                for i3 in 0..shape[3] {
                    out[o] = a[i0 * strides[0] + i1 * strides[1] + i2 * strides[2] + i3 * strides[3]];
                    o += 1;
                }
            }
        }
    }
}

/// onnxruntime's reduction over the flagged axes of x ([4] shape, row-major), keeping them as
/// size one. `eigen_rows`: a sum over the last axis alone in Eigen's packet order; any other sum
/// adds the values one by one in index order. (LiteRT's: reduce.rs.)
pub fn reduce(op: Reduce, x: &[f32], shape: [usize; 4], axes: [bool; 4], eigen_rows: bool, out_shape: [usize; 4],
              out: &mut [f32]) {
    let strides = natural(shape);
    let reduced: Vec<usize> = (0..4).filter(|&a| axes[a]).collect();
    let count: usize = reduced.iter().map(|&a| shape[a]).product();
    for (o, base) in output_bases(out_shape, strides).enumerate() {
        let value = if eigen_rows { eigen_sum(&x[base..base + shape[3]]) } else { fold(op, x, base, shape, &reduced, &strides) };
        out[o] = match op {
            Reduce::Mean => value / count as f32,
            Reduce::L2 => value.sqrt(),
            _ => value,
        };
    }
}

fn fold(op: Reduce, x: &[f32], base: usize, shape: [usize; 4], reduced: &[usize], strides: &[usize; 4]) -> f32 {
    let mut index = [0usize; 4];
    let mut acc: Option<f32> = None;
    loop {
        let at = base + reduced.iter().map(|&a| index[a] * strides[a]).sum::<usize>();
        let v = if op == Reduce::L2 { x[at] * x[at] } else { x[at] };
        acc = Some(match (acc, op) {
            (None, _) => v,
            (Some(m), Reduce::Max) => if v > m { v } else { m },
            (Some(s), _) => s + v,
        });
        if !next_reduced_index(&mut index, reduced, shape) {
            return acc.unwrap_or(0.0);
        }
    }
}

/// out = x[start + step * i] along each axis, for count positions per axis.
pub fn slice(x: &[f32], shape: [usize; 4], ranges: [(usize, usize, usize); 4], out: &mut [f32]) {
    let strides = natural(shape);
    let mut o = 0;
    for i0 in 0..ranges[0].2 {
        for i1 in 0..ranges[1].2 {
            for i2 in 0..ranges[2].2 {
                for i3 in 0..ranges[3].2 {
                    let index = [i0, i1, i2, i3];
                    let at: usize = (0..4).map(|a| (ranges[a].0 + ranges[a].1 * index[a]) * strides[a]).sum();
                    out[o] = x[at];
                    o += 1;
                }
            }
        }
    }
}
