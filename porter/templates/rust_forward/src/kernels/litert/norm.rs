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
use crate::kernels::ort::float as ort_float;

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
    /// onnxruntime's EmbedLayerNormalization loop, both rows the same
    OrtEmbed,
}

/// Rows of work space.
pub struct NormScratch {
    row: Vec<f32>,
    pre: Vec<f32>,
}

impl NormScratch {
    pub fn new(n: usize) -> Self {
        NormScratch { row: vec![0.0; n], pre: vec![0.0; n] }
    }
}

/// gamma and beta are absent where the graph has no such op (Shift and Centred only: Keras
/// and onnxruntime's kernels take both).
#[derive(Clone, Copy)]
pub struct LayerNormParams<'a> {
    pub width: usize,
    pub gamma: Option<&'a [f32]>,
    pub beta: Option<&'a [f32]>,
    pub eps: f32,
    pub form: Form,
}

/// Normalise `rows` rows of `x`; `normalised` (the rows before gamma and beta) is written only
/// where the program reads it.
pub fn layer_norm(
    p: &LayerNormParams,
    x: &[f32],
    rows: usize,
    mut normalised: Option<&mut [f32]>,
    affine: &mut [f32],
    scratch: &mut NormScratch,
) {
    let n = p.width;
    for r in 0..rows {
        let span = r * n..(r + 1) * n;
        let (row, out) = (&x[span.clone()], &mut affine[span.clone()]);
        match p.form {
            Form::Onnx => ort_float::layer_norm_row(row, both(p.gamma), both(p.beta), p.eps, out),
            Form::OnnxSkip => ort_float::skip_layer_norm_row(row, both(p.gamma), both(p.beta), p.eps, out),
            Form::OrtEmbed => ort_float::embed_layer_norm_row(row, both(p.gamma), both(p.beta), p.eps, out),
            _ => {
                let pre = match normalised.as_deref_mut() {
                    Some(buffer) => &mut buffer[span],
                    None => &mut scratch.pre[..n],
                };
                layer_norm_row(p, row, pre, out, &mut scratch.row[..n]);
                continue;
            }
        }
        if let Some(buffer) = normalised.as_deref_mut() {
            buffer[span.clone()].copy_from_slice(&affine[span]);
        }
    }
}

fn both(v: Option<&[f32]>) -> &[f32] {
    v.expect("this LayerNorm form takes gamma and beta")
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
                normalised[i] = x[i] * rstd + shift;
            }
            apply_affine(p, normalised, affine);
        }
        Form::Centred => {
            for i in 0..x.len() {
                normalised[i] = (x[i] - mean) * rstd;
            }
            apply_affine(p, normalised, affine);
        }
        Form::Keras => {
            let (gamma, beta) = (both(p.gamma), both(p.beta));
            for i in 0..x.len() {
                let inv = rstd * gamma[i];
                let v = x[i] * inv + (beta[i] - mean * inv);
                normalised[i] = v;
                affine[i] = v;
            }
        }
        Form::Onnx | Form::OnnxSkip | Form::OrtEmbed => unreachable!("layer_norm hands the onnxruntime forms to ort_float"),
    }
}

/// affine = normalised (* gamma) (+ beta): each present op rounds on its own, as in the graph.
fn apply_affine(p: &LayerNormParams, normalised: &[f32], affine: &mut [f32]) {
    match (p.gamma, p.beta) {
        (Some(g), Some(b)) => {
            for i in 0..normalised.len() {
                affine[i] = normalised[i] * g[i] + b[i];
            }
        }
        (Some(g), None) => {
            for i in 0..normalised.len() {
                affine[i] = normalised[i] * g[i];
            }
        }
        (None, Some(b)) => {
            for i in 0..normalised.len() {
                affine[i] = normalised[i] + b[i];
            }
        }
        (None, None) => affine.copy_from_slice(normalised),
    }
}
