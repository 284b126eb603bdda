//! onnxruntime's LayerNormalization and SkipLayerNormalization kernels, row by row.

use super::math::fma;

/// onnxruntime's LayerNormalization AVX2 kernel on one row (at least 8 values; see
/// porter/reference/ort/floats.py layer_norm for the order, read from its machine code).
pub fn layer_norm_row(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len();
    let mut lanes = [0.0f64; 4];
    let blocks = n - n % 4;
    for block in x[..blocks].chunks_exact(4) {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            *lane += v as f64;
        }
    }
    let mut total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
    for &v in &x[blocks..] {
        total += v as f64;
    }
    let mean = (total / n as f64) as f32;
    let inv_std = 1.0 / (squared_deviations(x, mean) / n as f32 + eps).sqrt();
    for i in 0..n {
        out[i] = fma((x[i] - mean) * inv_std, gamma[i], beta[i]);
    }
}

/// Sum of (x - mean)^2: eight fma lanes over blocks of eight, reduced pairwise; then a four-wide
/// step of rounded squares added in order if four or more are left; fma for the last ones.
fn squared_deviations(x: &[f32], mean: f32) -> f32 {
    let n = x.len();
    let mut lanes = [0.0f32; 8];
    let blocks = n - n % 8;
    for block in x[..blocks].chunks_exact(8) {
        for (lane, &v) in lanes.iter_mut().zip(block) {
            let d = v - mean;
            *lane = fma(d, d, *lane);
        }
    }
    let half = [lanes[0] + lanes[4], lanes[1] + lanes[5], lanes[2] + lanes[6], lanes[3] + lanes[7]];
    let mut total = (half[0] + half[2]) + (half[1] + half[3]);
    let mut i = blocks;
    if n - blocks >= 4 {
        for &v in &x[blocks..blocks + 4] {
            let d = v - mean;
            total += d * d;
        }
        i += 4;
    }
    for &v in &x[i..] {
        let d = v - mean;
        total = fma(d, d, total);
    }
    total
}

/// onnxruntime's SkipLayerNormalization float kernel on one row of v = input + skip: Welford's
/// running mean and variance in float32, then (v - mean) / std * gamma + beta, no fma.
pub fn skip_layer_norm_row(v: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) {
    let n = v.len();
    let (mut mean, mut m2) = (0.0f32, 0.0f32);
    for (k, &x) in v.iter().enumerate() {
        let delta = x - mean;
        mean += delta / (k + 1) as f32;
        m2 += (x - mean) * delta;
    }
    let std = (m2 / n as f32 + eps).sqrt();
    for i in 0..n {
        out[i] = (v[i] - mean) / std * gamma[i] + beta[i];
    }
}

/// onnxruntime's EmbedLayerNormalization float loop on one row of the embedding sum: every sum
/// in float32 left to right, no fma; out = (v - mean) / sqrt(var + eps) * gamma + beta.
pub fn embed_layer_norm_row(v: &[f32], gamma: &[f32], beta: &[f32], eps: f32, out: &mut [f32]) {
    let n = v.len() as f32;
    let mut sum = 0.0f32;
    for &x in v {
        sum += x;
    }
    let mean = sum / n;
    let mut squares = 0.0f32;
    for &x in v {
        let d = x - mean;
        squares += d * d;
    }
    let e = (squares / n + eps).sqrt();
    for i in 0..v.len() {
        out[i] = (v[i] - mean) / e * gamma[i] + beta[i];
    }
}
