//! One attention layer with onnxruntime's arithmetic.

use super::math::{softmax, OrtFloats};
use super::sgemm::{m1_columns, sgemm_columns, stride_k};

/// Work buffers of `attention`, the caller's, allocated once per forward pass.
pub struct OrtAttentionScratch<'a> {
    /// One query row's scores: at least keys.
    pub scores: &'a mut [f32],
    /// One head's keys transposed ([d][keys]): each score is then a column of q . K^T, and the
    /// column kernel runs eight chains of relaxed_madd with no shuffles, each in sgemm_dot's order.
    pub keys_t: &'a mut [f32],
    /// One query row scaled, where the graph scales Q: at least d.
    pub scaled: &'a mut [f32],
}

/// Attention with onnxruntime's arithmetic for the first `rows` query rows over `keys` keys:
/// scores by FusedMatMul (SGEMM, alpha = the scale), softmax MLAS's (the `floats` family's),
/// context by MatMul (SGEMM, or the M = 1 kernel for a single query row).
#[allow(clippy::too_many_arguments)]
pub fn attention(
    floats: OrtFloats,
    heads: usize,
    head_dim: usize,
    scale: f32,
    scale_on_query: bool,
    key_scale: f32,
    mask_value: f32,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keep: Option<&[bool]>,
    rows: usize,
    keys: usize,
    ctx: &mut [f32],
    scratch: OrtAttentionScratch,
) {
    let d = head_dim;
    let hidden = heads * d;
    let OrtAttentionScratch { scores, keys_t, scaled } = scratch;
    let (scores, keys_t, scaled) = (&mut scores[..keys], &mut keys_t[..d * keys], &mut scaled[..d]);
    for h in 0..heads {
        let v_head = &v[h * d..];
        for key in 0..keys {
            for j in 0..d {
                keys_t[j * keys + key] = k[key * hidden + h * d + j] * key_scale;
            }
        }
        for i in 0..rows {
            let mut query = &q[i * hidden + h * d..i * hidden + (h + 1) * d];
            let mut alpha = scale;
            if scale_on_query {
                // the graph scales Q before the product, which then has no alpha
                for (s, &qc) in scaled.iter_mut().zip(query) {
                    *s = qc * scale;
                }
                (query, alpha) = (&*scaled, 1.0);
            }
            sgemm_columns(query, keys_t, keys, keys, stride_k(keys, d, false), alpha, scores);
            if let Some(keep) = keep {
                for (s, &kept) in scores.iter_mut().zip(keep) {
                    if !kept {
                        *s += mask_value;
                    }
                }
            }
            softmax(scores, floats);
            let out = &mut ctx[i * hidden + h * d..i * hidden + (h + 1) * d];
            if rows == 1 {
                m1_columns(scores, v_head, hidden, d, out);
            } else {
                sgemm_columns(scores, v_head, hidden, d, stride_k(d, keys, false), 1.0, out);
            }
        }
    }
}
