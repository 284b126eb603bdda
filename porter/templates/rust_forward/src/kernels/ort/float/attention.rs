//! One attention layer with onnxruntime's arithmetic.

use super::masked_tail::{absorbs, magnitude_exponent, masked_suffix_start};
use super::half::softmax_function;
use super::math::{softmax, OrtFloats};
use super::sgemm::{m1_columns, sgemm_columns, stride_k};

/// Constant terms the graph adds to the scaled scores before the mask (a relative-position
/// bias), each [heads, window, window], added one after the other in the graph's order.
#[derive(Clone, Copy)]
pub struct ScoreTerms<'t> {
    pub arrays: &'t [&'t [f32]],
    pub window: usize,
}

impl<'t> ScoreTerms<'t> {
    pub const NONE: ScoreTerms<'static> = ScoreTerms { arrays: &[], window: 0 };

    /// Adds every term's values for query row `i` of `head` to that row's scores.
    pub fn add_to_row(&self, head: usize, i: usize, scores: &mut [f32]) {
        let start = (head * self.window + i) * self.window;
        let end = start + scores.len();
        for term in self.arrays {
            for (s, &t) in scores.iter_mut().zip(&term[start..end]) {
                *s += t;
            }
        }
    }
}

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

/// One attention layer's constants, as onnxruntime runs it.
#[derive(Clone, Copy)]
pub struct OrtAttention {
    /// Which MLAS family's softmax.
    pub floats: OrtFloats,
    pub heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// The graph scales Q before the product (which then has no alpha).
    pub scale_on_query: bool,
    pub key_scale: f32,
    /// Added to the score of every key the mask drops, or its score when `mask_replaces` (the
    /// graph selects it instead: Where).
    pub mask_value: f32,
    /// Softmax as ONNX's function body (a float16 graph's: half.rs), not MLAS's kernel.
    pub softmax_body: bool,
    pub mask_replaces: bool,
    /// The rows and keys of the reference's products (the whole window): they choose MLAS's
    /// kernel and its blocks, also where the crate computes fewer (padding that is inert).
    pub window: usize,
}

/// Attention with onnxruntime's arithmetic for the first `rows` query rows over `keys` keys:
/// scores by FusedMatMul (SGEMM, alpha = the scale), softmax MLAS's (the `floats` family's),
/// context by MatMul (SGEMM, or the M = 1 kernel for a one-row window). The context leaves out
/// a masked suffix of keys where that changes no bit (masked_tail.rs).
#[allow(clippy::too_many_arguments)]
#[allow(clippy::too_many_arguments)]
pub fn attention(p: &OrtAttention, q: &[f32], k: &[f32], v: &[f32], keep: Option<&[bool]>, terms: ScoreTerms, rows: usize,
                 keys: usize, ctx: &mut [f32], scratch: OrtAttentionScratch) {
    attention_from(p, q, k, v, keep, terms, rows, keys, masked_suffix_start(keep, keys), ctx, scratch)
}

/// `attention` with every key in every context chain: the definition the kernel check holds the
/// shortened chains to.
#[allow(clippy::too_many_arguments)]
pub fn attention_all_keys(p: &OrtAttention, q: &[f32], k: &[f32], v: &[f32], keep: Option<&[bool]>, terms: ScoreTerms,
                          rows: usize, keys: usize, ctx: &mut [f32], scratch: OrtAttentionScratch) {
    attention_from(p, q, k, v, keep, terms, rows, keys, keys, ctx, scratch)
}

/// Attention whose context chains may stop at key `tail` (every key from it on masked).
#[allow(clippy::too_many_arguments)]
fn attention_from(p: &OrtAttention, q: &[f32], k: &[f32], v: &[f32], keep: Option<&[bool]>, terms: ScoreTerms, rows: usize,
                  keys: usize, tail: usize, ctx: &mut [f32], scratch: OrtAttentionScratch) {
    let d = p.head_dim;
    let (score_block, context_block) = (stride_k(p.window, d, false), stride_k(d, p.window, false));
    let one_row_kernel = p.window == 1;
    // one SGEMM block, so that the tail is the end of each chain; the M = 1 kernel's groups of
    // four the cut would regroup
    let tail = if !one_row_kernel && keys <= context_block && tail > 0 { tail } else { keys };
    let hidden = p.heads * d;
    let OrtAttentionScratch { scores, keys_t, scaled } = scratch;
    let (scores, keys_t, scaled) = (&mut scores[..keys], &mut keys_t[..d * keys], &mut scaled[..d]);
    for h in 0..p.heads {
        let v_head = &v[h * d..];
        let tail_values = (tail < keys).then(|| magnitude_exponent((tail..keys).flat_map(|j| v_head[j * hidden..j * hidden + d].iter().copied()))).flatten();
        for key in 0..keys {
            for j in 0..d {
                keys_t[j * keys + key] = k[key * hidden + h * d + j] * p.key_scale;
            }
        }
        for i in 0..rows {
            let mut query = &q[i * hidden + h * d..i * hidden + (h + 1) * d];
            let mut alpha = p.scale;
            if p.scale_on_query {
                for (s, &qc) in scaled.iter_mut().zip(query) {
                    *s = qc * p.scale;
                }
                (query, alpha) = (&*scaled, 1.0);
            }
            sgemm_columns(query, keys_t, keys, keys, score_block, alpha, scores);
            terms.add_to_row(h, i, scores);
            if let Some(keep) = keep {
                for (s, &kept) in scores.iter_mut().zip(keep) {
                    if !kept {
                        *s = if p.mask_replaces { p.mask_value } else { *s + p.mask_value };
                    }
                }
            }
            if p.softmax_body {
                softmax_function(scores, p.floats);
            } else {
                softmax(scores, p.floats);
            }
            let out = &mut ctx[i * hidden + h * d..i * hidden + (h + 1) * d];
            if one_row_kernel {
                m1_columns(scores, v_head, hidden, d, out);
            } else if !live_keys_suffice(scores, v_head, hidden, tail, tail_values, context_block, out) {
                sgemm_columns(scores, v_head, hidden, d, context_block, 1.0, out);
            }
        }
    }
}

/// out = the context over keys [0, tail) when that is provably the context over all of them
/// (masked_tail.rs): whether it is.
fn live_keys_suffice(probs: &[f32], v_head: &[f32], hidden: usize, tail: usize, tail_values: Option<i32>, block: usize,
                     out: &mut [f32]) -> bool {
    let (Some(values), Some(probabilities)) = (tail_values, magnitude_exponent(probs[tail..].iter().copied())) else {
        return false;
    };
    sgemm_columns(&probs[..tail], v_head, hidden, out.len(), block, 1.0, out);
    out.iter().all(|&sum| absorbs(sum, probabilities + values))
}
