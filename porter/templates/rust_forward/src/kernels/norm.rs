//! LayerNorm over each row, in the float order the exporter wrote (the IR's `form`).
//!
//! mean and variance are MEANs (Eigen-order sums divided by the length); rstd = 1 / sqrt(var +
//! eps). Each form then produces two rows: `normalised` (before gamma and beta) and `affine`
//! (after). When the graph folded gamma and beta into the next Linear layers, those read
//! `normalised` and only the residual reads `affine`.
//!
//! ONNX graphs follow onnxruntime's kernels instead: LayerNormalization (form Onnx) or, where its
//! optimiser fuses the residual Add into it, SkipLayerNormalization (form OnnxSkip).

use super::eigen::eigen_mean;
use super::ort_float;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Form {
    /// r = rstd; normalised = x * r + (0 - r * mean); affine = normalised * gamma + beta
    Shift,
    /// normalised = (x - mean) * r; affine = normalised * gamma + beta
    Centred,
    /// inv = r * gamma; out = x * inv + (beta - mean * inv), both rows the same
    Keras,
    /// onnxruntime's LayerNormalization, both rows the same
    Onnx,
    /// onnxruntime's SkipLayerNormalization, both rows the same
    OnnxSkip,
}

/// One row of work space.
pub struct NormScratch {
    row: Vec<f32>,
}

impl NormScratch {
    pub fn new(n: usize) -> Self {
        NormScratch { row: vec![0.0; n] }
    }
}

#[derive(Clone, Copy)]
pub struct LayerNormParams<'a> {
    pub gamma: &'a [f32],
    pub beta: &'a [f32],
    pub eps: f32,
    pub form: Form,
}

/// Normalise `rows` rows of `x` (row length = gamma.len()).
pub fn layer_norm(
    p: &LayerNormParams,
    x: &[f32],
    rows: usize,
    normalised: &mut [f32],
    affine: &mut [f32],
    scratch: &mut NormScratch,
) {
    let n = p.gamma.len();
    for r in 0..rows {
        let span = r * n..(r + 1) * n;
        let (row, out) = (&x[span.clone()], &mut affine[span.clone()]);
        match p.form {
            Form::Onnx => ort_float::layer_norm_row(row, p.gamma, p.beta, p.eps, out),
            Form::OnnxSkip => ort_float::skip_layer_norm_row(row, p.gamma, p.beta, p.eps, out),
            _ => {
                layer_norm_row(p, row, &mut normalised[span], out, &mut scratch.row);
                continue;
            }
        }
        normalised[span.clone()].copy_from_slice(&affine[span]);
    }
}

fn layer_norm_row(p: &LayerNormParams, x: &[f32], normalised: &mut [f32], affine: &mut [f32], squares: &mut [f32]) {
    let mean = eigen_mean(x);
    for (s, &v) in squares.iter_mut().zip(x) {
        let c = v - mean;
        *s = c * c;
    }
    let var = eigen_mean(squares);
    let rstd = 1.0 / (var + p.eps).sqrt();
    match p.form {
        Form::Shift => {
            let shift = 0.0 - rstd * mean;
            for i in 0..x.len() {
                let v = x[i] * rstd + shift;
                normalised[i] = v;
                affine[i] = v * p.gamma[i] + p.beta[i];
            }
        }
        Form::Centred => {
            for i in 0..x.len() {
                let v = (x[i] - mean) * rstd;
                normalised[i] = v;
                affine[i] = v * p.gamma[i] + p.beta[i];
            }
        }
        Form::Keras => {
            for i in 0..x.len() {
                let inv = rstd * p.gamma[i];
                let v = x[i] * inv + (p.beta[i] - mean * inv);
                normalised[i] = v;
                affine[i] = v;
            }
        }
        Form::Onnx | Form::OnnxSkip => unreachable!("layer_norm hands the onnxruntime forms to ort_float"),
    }
}
