//! Applying one Linear layer: hybrid int8 or int4 (quantise each row, then the integer GEMM),
//! onnxruntime's dynamic uint8 (quantise the whole input, then its integer dot), or float (its
//! weights stored as float32, or as the int8 / int4 / float16 values a weight-only file computes
//! them from).

use crate::kernels::common::dequantize::{dequantize_rows, widen_halves};
use crate::kernels::common::gemm::{gemm, gemm_int4, uses_4bit_kernels, Int8Weights};
use crate::kernels::common::int4::unpack_int4;
use crate::kernels::litert::linear_f32::{linear_f32_rows, FloatWeights};
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
            Weights::Int4 { k, .. } | Weights::FloatFromInt4 { k, .. } => *k,
            Weights::Float(weights) | Weights::FloatOrt(weights) => weights.k,
            Weights::FloatFromInt8 { weights, .. } => weights.k,
            Weights::FloatFromF16 { k, .. } => *k,
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
            // unpacked into the scratch, then the integer GEMM on the same int8 values
            Weights::Int4 { packed, scale, bias, outs, k } => {
                let LinearScratch { quantized, weight_sums, unpacked, .. } = scratch;
                quantized.quantize(x, rows, *k, false);
                let values = first(unpacked, 2 * packed.len());
                unpack_int4(packed, values);
                let weights = Int8Weights { w: &values[..outs * k], scale, bias: *bias, outs: *outs, k: *k };
                if uses_4bit_kernels(*outs, *k) {
                    gemm_int4(&quantized.values, &quantized.scales, rows, &weights, weight_sums, out);
                } else {
                    gemm(&quantized.values, &quantized.scales, rows, quantized.all_zero, &weights, out);
                }
            }
            Weights::OrtDynamic { weights, saturating } => {
                scratch.tensor.quantize(x, rows, weights.k);
                ort_quant::linear(&scratch.tensor, rows, weights, *saturating, out, &mut scratch.weight_sums);
            }
            Weights::Float(weights) => linear_f32_rows(x, rows, tensor_rows, weights, out, &mut scratch.transposed),
            Weights::FloatOrt(weights) => ort_float::linear(x, rows, weights, out, &mut scratch.panel),
            // widened into the scratch, then the float product on bit-identical weights
            Weights::FloatFromInt8 { weights, onnxruntime } => {
                let w = first(&mut scratch.widened, weights.outs * weights.k);
                dequantize_rows(weights.w, weights.scale, weights.k, w);
                let float = FloatWeights { w: &*w, bias: weights.bias, outs: weights.outs, k: weights.k };
                float_product(x, rows, tensor_rows, &float, *onnxruntime, out, &mut scratch.transposed, &mut scratch.panel)
            }
            // unpacked, then widened as int8 values are: LiteRT's DEQUANTIZE of int4 unpacks first
            Weights::FloatFromInt4 { packed, scale, bias, outs, k, onnxruntime } => {
                let values = first(&mut scratch.unpacked, 2 * packed.len());
                unpack_int4(packed, values);
                let w = first(&mut scratch.widened, outs * k);
                dequantize_rows(&values[..outs * k], scale, *k, w);
                let float = FloatWeights { w: &*w, bias: *bias, outs: *outs, k: *k };
                float_product(x, rows, tensor_rows, &float, *onnxruntime, out, &mut scratch.transposed, &mut scratch.panel)
            }
            Weights::FloatFromF16 { halves, bias, outs, k, onnxruntime } => {
                let w = first(&mut scratch.widened, outs * k);
                widen_halves(halves, w);
                let float = FloatWeights { w: &*w, bias: *bias, outs: *outs, k: *k };
                float_product(x, rows, tensor_rows, &float, *onnxruntime, out, &mut scratch.transposed, &mut scratch.panel)
            }
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

/// LiteRT's or onnxruntime's float product.
fn float_product(x: &[f32], rows: usize, tensor_rows: usize, w: &FloatWeights, onnxruntime: bool, out: &mut [f32],
                 transposed: &mut [f32], panel: &mut Vec<f32>) {
    if onnxruntime {
        ort_float::linear(x, rows, w, out, panel)
    } else {
        linear_f32_rows(x, rows, tensor_rows, w, out, transposed)
    }
}

/// Buffers a Linear needs, sized for the widest input.
pub struct LinearScratch {
    pub quantized: QuantizedRows,
    tensor: TensorQuantized,
    weight_sums: Vec<i32>,
    transposed: Vec<f32>,
    panel: Vec<f32>,
    widened: Vec<f32>, // a weight-only layer's float32 weights
    unpacked: Vec<i8>, // an int4 layer's weights, one int8 each
}

/// The first n values of a buffer grown once to the largest layer it serves.
fn first<T: Copy + Default>(buffer: &mut Vec<T>, n: usize) -> &mut [T] {
    if buffer.len() < n {
        buffer.resize(n, T::default());
    }
    &mut buffer[..n]
}

impl LinearScratch {
    pub fn new(rows: usize, widest: usize) -> Self {
        LinearScratch {
            quantized: QuantizedRows::new(rows, widest),
            tensor: TensorQuantized::new(),
            weight_sums: Vec::new(),
            transposed: vec![0.0; rows * widest],
            panel: Vec::new(),
            widened: Vec::new(),
            unpacked: Vec::new(),
        }
    }
}
