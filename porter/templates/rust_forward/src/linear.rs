//! Applying one Linear layer: hybrid int8 (quantise each row, then the integer GEMM),
//! onnxruntime's dynamic uint8 (quantise the whole input, then its integer dot), or float.

use crate::kernels::common::gemm::gemm;
use crate::kernels::litert::linear_f32::linear_f32_rows;
use crate::kernels::ort::float as ort_float;
use crate::kernels::ort::quant::{self as ort_quant, TensorQuantized};
use crate::kernels::litert::quantize::QuantizedRows;
use crate::program::{Linear, Weights};

impl Linear<'_> {
    /// The per-row activation quantisation this layer expects (TFLite's hybrid layers only).
    pub fn asymmetric_inputs(&self) -> Option<bool> {
        match &self.weights {
            Weights::Int8 { asymmetric, .. } => Some(*asymmetric),
            _ => None,
        }
    }

    /// The input width (k).
    pub fn in_features(&self) -> usize {
        match &self.weights {
            Weights::Int8 { weights, .. } | Weights::OrtDynamic { weights, .. } => weights.k,
            Weights::Float(weights) | Weights::FloatOrt(weights) => weights.k,
        }
    }

    /// out[..rows * outs] = this layer applied to x[..rows * k], the first rows of a tensor of
    /// `tensor_rows` (LiteRT's float product sums in an order its row count decides). An
    /// OrtDynamic layer quantises exactly those rows as one tensor: the caller passes every row.
    pub fn apply(&self, x: &[f32], rows: usize, tensor_rows: usize, out: &mut [f32], scratch: &mut LinearScratch) {
        match &self.weights {
            Weights::Int8 { weights, asymmetric } => {
                scratch.quantized.quantize(x, rows, weights.k, *asymmetric);
                self.apply_quantized(&scratch.quantized, rows, out);
            }
            Weights::OrtDynamic { weights, saturating } => {
                scratch.tensor.quantize(x, rows, weights.k);
                ort_quant::linear(&scratch.tensor, rows, weights, *saturating, out, &mut scratch.weight_sums);
            }
            Weights::Float(weights) => linear_f32_rows(x, rows, tensor_rows, weights, out, &mut scratch.transposed),
            Weights::FloatOrt(weights) => ort_float::linear(x, rows, weights, out, &mut scratch.panel),
        }
    }

    /// The GEMM on rows quantised already (Q, K and V share one quantisation of their input).
    pub fn apply_quantized(&self, xq: &QuantizedRows, rows: usize, out: &mut [f32]) {
        let Weights::Int8 { weights, .. } = &self.weights else {
            panic!("apply_quantized on a Linear that is not a hybrid int8 one");
        };
        assert!(rows <= xq.rows && xq.cols == weights.k);
        gemm(&xq.values, &xq.scales, rows, xq.all_zero, weights, out);
    }
}

/// Buffers a Linear needs, sized for the widest input.
pub struct LinearScratch {
    pub quantized: QuantizedRows,
    tensor: TensorQuantized,
    weight_sums: Vec<i32>,
    transposed: Vec<f32>,
    panel: Vec<f32>,
}

impl LinearScratch {
    pub fn new(rows: usize, widest: usize) -> Self {
        LinearScratch {
            quantized: QuantizedRows::new(rows, widest),
            tensor: TensorQuantized::new(),
            weight_sums: Vec::new(),
            transposed: vec![0.0; rows * widest],
            panel: Vec::new(),
        }
    }
}
