//! Applying one Linear layer: hybrid int8 (quantise the rows, then the integer GEMM) or float.

use crate::kernels::gemm::gemm;
use crate::kernels::linear_f32::linear_f32;
use crate::kernels::quantize::QuantizedRows;
use crate::model::{Linear, Weights};

impl Linear<'_> {
    /// The activation quantisation this layer expects, None for float weights.
    pub fn asymmetric_inputs(&self) -> Option<bool> {
        match &self.weights {
            Weights::Int8 { asymmetric, .. } => Some(*asymmetric),
            Weights::Float(_) => None,
        }
    }

    /// out[..rows * outs] = this layer applied to x[..rows * k].
    pub fn apply(&self, x: &[f32], rows: usize, out: &mut [f32], scratch: &mut LinearScratch) {
        match &self.weights {
            Weights::Int8 { weights, asymmetric } => {
                scratch.quantized.quantize(x, rows, weights.k, *asymmetric);
                self.apply_quantized(&scratch.quantized, rows, out);
            }
            Weights::Float(weights) => linear_f32(x, rows, weights, out, &mut scratch.transposed),
        }
    }

    /// The GEMM on rows quantised already (Q, K and V share one quantisation of their input).
    pub fn apply_quantized(&self, xq: &QuantizedRows, rows: usize, out: &mut [f32]) {
        let Weights::Int8 { weights, .. } = &self.weights else {
            panic!("apply_quantized on a float Linear");
        };
        assert!(rows <= xq.rows && xq.cols == weights.k);
        gemm(&xq.values, &xq.scales, rows, xq.all_zero, weights, out);
    }
}

/// Buffers a Linear needs, sized for the widest input.
pub struct LinearScratch {
    pub quantized: QuantizedRows,
    transposed: Vec<f32>,
}

impl LinearScratch {
    pub fn new(rows: usize, widest: usize) -> Self {
        LinearScratch { quantized: QuantizedRows::new(rows, widest), transposed: vec![0.0; rows * widest] }
    }
}
