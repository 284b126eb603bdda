//! SUM, MEAN, REDUCE_MAX and L2_NORMALIZATION as LiteRT's optimized kernels compute them
//! (porter/reference/litert/floats.py `reduce_sum`, `reduce_mean`, `reduce_max`, `l2_normalization`).
//!
//!   reduce_litert(op, x, shape, axes, out_shape, out)   keepdims; shapes of four axes as in
//!                                                       generic.rs, out_shape possibly limited
//!                                                       to the live positions of a kept axis
//!   l2_normalization(x, width, out)                     every row of `width` values
//!
//! reduce.cc normalises the shape first (size-one axes dropped, neighbours that are both
//! reduced or both kept merged). Each output then starts from its first value and takes the
//! others one at a time in row-major order of the reduced indices (SUM and MEAN add, MAX keeps
//! `acc > v ? acc : v`), and MEAN divides by the count; except that a MEAN whose normalised
//! shape is (kept, reduced) sums each row with Eigen (eigen_sum_from, the row's 16-byte
//! alignment in the tensor giving its head). Plain loops: one IEEE operation per value.

use super::eigen::eigen_sum_from;
use crate::kernels::common::generic::{natural, next_reduced_index, output_bases};
use crate::program::Reduce;

const PACKET: usize = 4;
const L2_EPSILON: f32 = 1e-6;

/// The length of each row when the normalised reduction is (kept, reduced): the reduced axes,
/// past their size-one ones, come after every kept axis of size above one.
fn eigen_row_length(shape: [usize; 4], axes: [bool; 4]) -> Option<usize> {
    let sized: Vec<usize> = (0..4).filter(|&a| shape[a] != 1).collect();
    let first_reduced = sized.iter().position(|&a| axes[a])?;
    let kept_before = first_reduced > 0;
    let reduced_suffix = sized[first_reduced..].iter().all(|&a| axes[a]);
    (kept_before && reduced_suffix).then(|| sized[first_reduced..].iter().map(|&a| shape[a]).product())
}

/// `acc > v ? acc : v`, MaxOp's comparison.
fn max_op(acc: f32, v: f32) -> f32 {
    if acc > v {
        acc
    } else {
        v
    }
}

/// The reduced values of one output, in row-major order of their indices, folded from the first.
fn fold(op: Reduce, x: &[f32], base: usize, shape: [usize; 4], axes: [bool; 4]) -> f32 {
    let strides = natural(shape);
    let reduced: Vec<usize> = (0..4).filter(|&a| axes[a]).collect();
    let mut acc = x[base];
    let mut index = [0usize; 4];
    while next_reduced_index(&mut index, &reduced, shape) {
        let v = x[base + reduced.iter().map(|&a| index[a] * strides[a]).sum::<usize>()];
        acc = if op == Reduce::Max { max_op(acc, v) } else { acc + v };
    }
    acc
}

/// A reduction over the flagged axes of x (shape row-major), keeping them as size one; out in
/// out_shape's row-major order (out_shape[a] <= shape[a], 1 on reduced axes).
pub fn reduce_litert(op: Reduce, x: &[f32], shape: [usize; 4], axes: [bool; 4], out_shape: [usize; 4],
                     out: &mut [f32]) {
    let strides = natural(shape);
    let count: usize = (0..4).filter(|&a| axes[a]).map(|a| shape[a]).product();
    let eigen_rows = if op == Reduce::Mean { eigen_row_length(shape, axes) } else { None };
    for (o, base) in output_bases(out_shape, strides).enumerate() {
        out[o] = match eigen_rows {
            Some(n) => {
                let head = (PACKET - base % PACKET) % PACKET;
                eigen_sum_from(&x[base..base + n], head) / n as f32
            }
            None if op == Reduce::Mean => fold(op, x, base, shape, axes) / count as f32,
            None => fold(op, x, base, shape, axes),
        };
    }
}

/// L2_NORMALIZATION over rows of `width`: sqrt of the squares summed from 0, at least 1e-6
/// (std::max), each value divided by it.
pub fn l2_normalization(x: &[f32], width: usize, out: &mut [f32]) {
    for (row, o) in x.chunks_exact(width).zip(out.chunks_exact_mut(width)) {
        let mut squares = 0.0f32;
        for &v in row {
            squares += v * v;
        }
        let norm = squares.sqrt();
        let norm = if norm < L2_EPSILON { L2_EPSILON } else { norm };
        for (y, &v) in o.iter_mut().zip(row) {
            *y = v / norm;
        }
    }
}
