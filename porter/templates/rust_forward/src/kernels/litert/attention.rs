//! Multi-head attention: softmax(scale * Q.K^T + terms + mask) . V per head, as LiteRT computes it.
//!
//! Every score and every context value is a float sum whose order is fixed by the reference
//! (BATCH_MATMUL: the first product, then each next product added in k order). The SIMD version
//! therefore never splits one of those sums across lanes: scores are vectorised across keys
//! (K is transposed per head so four keys lie side by side) and the context across the head
//! dimension, and several query rows share each loaded key or value vector.

use core::arch::wasm32::*;

use super::eigen::{eigen_sum, eigen_sum_scalar};
use crate::kernels::ort::float as ort_float;
pub use crate::kernels::ort::float::ScoreTerms;
use super::mathfn::{exp_in_place, exp_scalar};
use crate::model::SEQ;
use crate::tuning::ATTENTION_QUERY_ROWS;

#[derive(Clone, Copy)]
pub struct AttentionParams {
    pub heads: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// The graph scales Q before Q.K^T instead of the scores after it.
    pub scale_on_query: bool,
    pub softmax_beta: f32,
    /// Added to the score of every key whose mask is 0 (when `masked`), or its score when
    /// `mask_replaces` (the graph selects it instead of the score: Keras' masked softmax).
    pub mask_value: f32,
    pub mask_replaces: bool,
    /// The graph drops the mask input's padded keys (else every key is attended).
    pub masked: bool,
    /// Multiplies K before Q.K^T (torch's sdpa scales Q and K by sqrt(scale) each); 1 is exact.
    pub key_scale: f32,
    /// onnxruntime's arithmetic (ort_float::attention) with that CPU's float kernels, instead
    /// of LiteRT's.
    pub onnxruntime: Option<ort_float::OrtFloats>,
    /// onnxruntime's Softmax as ONNX's function body (a float16 graph's), not MLAS's kernel.
    pub softmax_body: bool,
}

/// Work buffers, allocated once per forward pass.
pub struct AttentionScratch {
    key_t: Vec<f32>,   // [head_dim, keys]
    query: Vec<f32>,   // [rows, head_dim] of one head
    probs: Vec<f32>,   // [query rows per block, keys]
    keep_lanes: Vec<u32>, // per key: all ones where the key is kept
}

impl AttentionScratch {
    /// For `attention`, in the crate's query blocks (tuning.rs).
    pub fn new(rows: usize, keys: usize, head_dim: usize) -> Self {
        Self::for_query_rows(rows, keys, head_dim, ATTENTION_QUERY_ROWS)
    }

    /// For `attention_in_blocks` with blocks of up to `query_rows` rows.
    pub fn for_query_rows(rows: usize, keys: usize, head_dim: usize, query_rows: usize) -> Self {
        AttentionScratch {
            key_t: vec![0.0; head_dim * keys],
            query: vec![0.0; rows * head_dim],
            probs: vec![0.0; query_rows * keys],
            keep_lanes: vec![u32::MAX; keys],
        }
    }
}

/// Copies one head's query rows, scaled when the graph scales Q.
fn gather_queries(p: &AttentionParams, q: &[f32], rows: usize, hidden: usize, head: usize, out: &mut [f32]) {
    let d = p.head_dim;
    for i in 0..rows {
        for c in 0..d {
            let v = q[i * hidden + head * d + c];
            out[i * d + c] = if p.scale_on_query { v * p.scale } else { v };
        }
    }
}

// ---- scalar reference ------------------------------------------------------------------------

pub fn attention_scalar(
    p: &AttentionParams,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keep: Option<&[bool]>,
    terms: ScoreTerms,
    rows: usize,
    keys: usize,
    ctx: &mut [f32],
) {
    let (d, hidden) = (p.head_dim, p.heads * p.head_dim);
    let mut query = vec![0.0; rows * d];
    let mut scores = vec![0.0; keys];
    for h in 0..p.heads {
        gather_queries(p, q, rows, hidden, h, &mut query);
        for i in 0..rows {
            for j in 0..keys {
                let mut s = query[i * d] * (k[j * hidden + h * d] * p.key_scale);
                for c in 1..d {
                    s += query[i * d + c] * (k[j * hidden + h * d + c] * p.key_scale);
                }
                scores[j] = s;
            }
            finish_scores_scalar(p, keep, |s: &mut [f32]| terms.add_to_row(h, i, s), &mut scores);
            for c in 0..d {
                let mut acc = scores[0] * v[h * d + c];
                for j in 1..keys {
                    acc += scores[j] * v[j * hidden + h * d + c];
                }
                ctx[i * hidden + h * d + c] = acc;
            }
        }
    }
}

/// Scores -> probabilities: scale, the score terms, mask, then softmax in the reference's order.
fn finish_scores_scalar(p: &AttentionParams, keep: Option<&[bool]>, add_terms: impl Fn(&mut [f32]), s: &mut [f32]) {
    if !p.scale_on_query {
        for v in s.iter_mut() {
            *v *= p.scale;
        }
    }
    add_terms(s);
    if let Some(keep) = keep {
        for (v, &kept) in s.iter_mut().zip(keep) {
            if !kept {
                *v = if p.mask_replaces { p.mask_value } else { *v + p.mask_value };
            }
        }
    }
    let mut max = s[0];
    for &v in s.iter() {
        if v > max {
            max = v;
        }
    }
    for v in s.iter_mut() {
        *v = exp_scalar((*v - max) * p.softmax_beta);
    }
    let inv = 1.0 / eigen_sum_scalar(s);
    for v in s.iter_mut() {
        *v *= inv;
    }
}

// ---- SIMD ----------------------------------------------------------------------------------------

/// Attention for the first `rows` query rows against all `keys` keys; ctx is [rows, hidden].
/// Query rows go in the crate's blocks (tuning.rs).
pub fn attention(p: &AttentionParams, q: &[f32], k: &[f32], v: &[f32], keep: Option<&[bool]>, terms: ScoreTerms,
                 rows: usize, keys: usize, ctx: &mut [f32], scratch: &mut AttentionScratch) {
    attention_in_blocks::<ATTENTION_QUERY_ROWS>(p, q, k, v, keep, terms, rows, keys, ctx, scratch)
}

/// `attention` with Q query rows a block: the kernel-check module runs it for every candidate
/// `porter build --tune` may choose (porter/codegen/tuning.py QUERY_ROWS).
#[inline(always)]
pub fn attention_in_blocks<const Q: usize>(
    p: &AttentionParams,
    q: &[f32],
    k: &[f32],
    v: &[f32],
    keep: Option<&[bool]>,
    terms: ScoreTerms,
    rows: usize,
    keys: usize,
    ctx: &mut [f32],
    scratch: &mut AttentionScratch,
) {
    let hidden = p.heads * p.head_dim;
    assert!(q.len() >= rows * hidden && k.len() >= keys * hidden && v.len() >= keys * hidden);
    assert!(ctx.len() >= rows * hidden && scratch.key_t.len() >= p.head_dim * keys && scratch.probs.len() >= Q * keys);
    if let Some(floats) = p.onnxruntime {
        let ort_scratch = ort_float::OrtAttentionScratch { scores: &mut scratch.probs, keys_t: &mut scratch.key_t, scaled: &mut scratch.query };
        let ort = ort_float::OrtAttention {
            floats,
            heads: p.heads,
            head_dim: p.head_dim,
            scale: p.scale,
            scale_on_query: p.scale_on_query,
            key_scale: p.key_scale,
            mask_value: p.mask_value,
            softmax_body: p.softmax_body,
            mask_replaces: p.mask_replaces,
            window: SEQ,
        };
        return ort_float::attention(&ort, q, k, v, keep, terms, rows, keys, ctx, ort_scratch);
    }
    if let Some(keep) = keep {
        for (lane, &kept) in scratch.keep_lanes.iter_mut().zip(keep) {
            *lane = if kept { u32::MAX } else { 0 };
        }
    }
    for h in 0..p.heads {
        transpose_head(k, keys, hidden, h * p.head_dim, p.head_dim, p.key_scale, &mut scratch.key_t);
        gather_queries(p, q, rows, hidden, h, &mut scratch.query);
        let mut i = 0;
        while i + Q <= rows {
            query_block::<Q>(p, i, h, v, keep.is_some(), terms, keys, ctx, scratch);
            i += Q;
        }
        while i < rows {
            query_block::<1>(p, i, h, v, keep.is_some(), terms, keys, ctx, scratch);
            i += 1;
        }
    }
}

/// key_t[c][j] = k[j][offset + c]: the keys of one head, dimension-major.
fn transpose_head(k: &[f32], keys: usize, hidden: usize, offset: usize, d: usize, scale: f32, key_t: &mut [f32]) {
    for j in 0..keys {
        for c in 0..d {
            key_t[c * keys + j] = k[j * hidden + offset + c] * scale;
        }
    }
}

#[inline(always)]
fn query_block<const R: usize>(
    p: &AttentionParams,
    i0: usize,
    head: usize,
    v: &[f32],
    masked: bool,
    terms: ScoreTerms,
    keys: usize,
    ctx: &mut [f32],
    s: &mut AttentionScratch,
) {
    let d = p.head_dim;
    // SAFETY: query holds rows >= i0 + R rows of d; key_t holds d x keys; probs R x keys.
    unsafe { scores_block::<R>(s.query.as_ptr().add(i0 * d), s.key_t.as_ptr(), d, keys, s.probs.as_mut_ptr()) };
    for r in 0..R {
        let add_terms = |row: &mut [f32]| terms.add_to_row(head, i0 + r, row);
        finish_scores(p, masked.then_some(&s.keep_lanes[..keys]), add_terms, &mut s.probs[r * keys..(r + 1) * keys]);
    }
    let hidden = p.heads * d;
    // SAFETY: v holds keys x hidden; ctx holds (i0 + R) x hidden; probs R x keys.
    unsafe { context_block::<R>(s.probs.as_ptr(), v.as_ptr().add(head * d), hidden, keys, d, ctx.as_mut_ptr().add(i0 * hidden + head * d)) };
}

/// Products added per step of the score and context loops, each sum still in its own order.
const STEP: usize = 4;

// The running sums of both loops below live in memory (volatile reads and writes), read and
// written once per STEP products, not in loop variables: why, at ort/float/sgemm.rs `columns`.

/// f(0), f(1), .., f(R - 1) as straight-line code. LLVM leaves a row loop with a body this long
/// rolled, and the loop would put an epoch check, with the step's loaded vectors spilled
/// across it, between the rows.
#[inline(always)]
fn each_row<const R: usize>(mut f: impl FnMut(usize)) {
    const { assert!(R <= 8, "attention query blocks have at most 8 rows (porter/codegen/tuning.py)") };
    // written out: a `for` over the eight would stay a loop
    if R > 0 { f(0) }
    if R > 1 { f(1) }
    if R > 2 { f(2) }
    if R > 3 { f(3) }
    if R > 4 { f(4) }
    if R > 5 { f(5) }
    if R > 6 { f(6) }
    if R > 7 { f(7) }
}

/// p[0..U], each in all four lanes: four as one load and lane shuffles (Cranelift turns each
/// scalar splat load into a load, a move and a broadcast).
#[inline(always)]
unsafe fn splats<const U: usize>(p: *const f32) -> [v128; U] {
    if U == 4 {
        let lanes = ort_float::lane_splats(v128_load(p as *const v128));
        core::array::from_fn(|u| lanes[u])
    } else {
        core::array::from_fn(|u| v128_load32_splat(p.add(u) as *const u32))
    }
}

/// scores[r][j] = sum_c query[r][c] * key_t[c][j], each sum in c order, 8 keys per pass.
#[inline(always)]
unsafe fn scores_block<const R: usize>(query: *const f32, key_t: *const f32, d: usize, keys: usize, scores: *mut f32) {
    let mut sums = [[f32x4_splat(0.0); 2]; R];
    let sums = sums.as_mut_ptr() as *mut v128;
    let mut j = 0;
    while j + 8 <= keys {
        let (k_lo, k_hi) = (v128_load(key_t.add(j) as *const v128), v128_load(key_t.add(j + 4) as *const v128));
        for r in 0..R {
            let qv = v128_load32_splat(query.add(r * d) as *const u32);
            sums.add(2 * r).write_volatile(f32x4_mul(qv, k_lo));
            sums.add(2 * r + 1).write_volatile(f32x4_mul(qv, k_hi));
        }
        let mut c = 1;
        while c + STEP <= d {
            score_step::<R, STEP>(query.add(c), key_t.add(c * keys + j), d, keys, sums);
            c += STEP;
        }
        while c < d {
            score_step::<R, 1>(query.add(c), key_t.add(c * keys + j), d, keys, sums);
            c += 1;
        }
        for r in 0..R {
            v128_store(scores.add(r * keys + j) as *mut v128, sums.add(2 * r).read_volatile());
            v128_store(scores.add(r * keys + j + 4) as *mut v128, sums.add(2 * r + 1).read_volatile());
        }
        j += 8;
    }
    for jj in j..keys {
        for r in 0..R {
            let mut s = *query.add(r * d) * *key_t.add(jj);
            for c in 1..d {
                s += *query.add(r * d + c) * *key_t.add(c * keys + jj);
            }
            *scores.add(r * keys + jj) = s;
        }
    }
}

/// sums[r] += query[r][u] * key_t[u][0..8] for u in 0..U, in u order (query and key_t point at
/// the step's first dimension; sums holds each row's two vectors of eight keys).
#[inline(always)]
unsafe fn score_step<const R: usize, const U: usize>(query: *const f32, key_t: *const f32, d: usize, keys: usize, sums: *mut v128) {
    let mut k_lo = [f32x4_splat(0.0); U];
    let mut k_hi = [f32x4_splat(0.0); U];
    for u in 0..U {
        let row = key_t.add(u * keys);
        k_lo[u] = v128_load(row as *const v128);
        k_hi[u] = v128_load(row.add(4) as *const v128);
    }
    each_row::<R>(|r| {
        let (mut lo, mut hi) = (sums.add(2 * r).read_volatile(), sums.add(2 * r + 1).read_volatile());
        let qv = splats::<U>(query.add(r * d));
        for u in 0..U {
            lo = f32x4_add(lo, f32x4_mul(qv[u], k_lo[u]));
            hi = f32x4_add(hi, f32x4_mul(qv[u], k_hi[u]));
        }
        sums.add(2 * r).write_volatile(lo);
        sums.add(2 * r + 1).write_volatile(hi);
    });
}

/// The vector form of finish_scores_scalar.
fn finish_scores(p: &AttentionParams, keep_lanes: Option<&[u32]>, add_terms: impl Fn(&mut [f32]), s: &mut [f32]) {
    let n = s.len();
    let full = n / 4 * 4;
    let ptr = s.as_mut_ptr();
    let scale = f32x4_splat(p.scale);
    if !p.scale_on_query {
        // SAFETY: all accesses below `full` <= n.
        unsafe {
            let mut j = 0;
            while j < full {
                v128_store(ptr.add(j) as *mut v128, f32x4_mul(v128_load(ptr.add(j) as *const v128), scale));
                j += 4;
            }
        }
        for x in &mut s[full..] {
            *x *= p.scale;
        }
    }
    add_terms(s);
    let mask_value = f32x4_splat(p.mask_value);
    let dropped = |x: v128| if p.mask_replaces { mask_value } else { f32x4_add(x, mask_value) };
    let mut max_x4 = f32x4_splat(f32::NEG_INFINITY);
    // SAFETY: all accesses below `full` <= n; keep_lanes has n entries.
    unsafe {
        let mut j = 0;
        while j < full {
            let mut x = v128_load(ptr.add(j) as *const v128);
            if let Some(keep) = keep_lanes {
                let kept = v128_load(keep.as_ptr().add(j) as *const v128);
                x = v128_bitselect(x, dropped(x), kept);
            }
            v128_store(ptr.add(j) as *mut v128, x);
            max_x4 = f32x4_pmax(max_x4, x);
            j += 4;
        }
    }
    let mut max = f32::NEG_INFINITY;
    for lane in [f32x4_extract_lane::<0>(max_x4), f32x4_extract_lane::<1>(max_x4), f32x4_extract_lane::<2>(max_x4), f32x4_extract_lane::<3>(max_x4)] {
        if lane > max {
            max = lane;
        }
    }
    for j in full..n {
        let mut x = s[j];
        if keep_lanes.is_some_and(|keep| keep[j] == 0) {
            x = if p.mask_replaces { p.mask_value } else { x + p.mask_value };
        }
        s[j] = x;
        if x > max {
            max = x;
        }
    }
    let (max_x4, beta) = (f32x4_splat(max), f32x4_splat(p.softmax_beta));
    // SAFETY: as above.
    unsafe {
        let mut j = 0;
        while j < full {
            let x = v128_load(ptr.add(j) as *const v128);
            v128_store(ptr.add(j) as *mut v128, f32x4_mul(f32x4_sub(x, max_x4), beta));
            j += 4;
        }
    }
    for x in &mut s[full..] {
        *x = (*x - max) * p.softmax_beta;
    }
    exp_in_place(s);
    let inv = 1.0 / eigen_sum(s);
    let inv_x4 = f32x4_splat(inv);
    // SAFETY: as above.
    unsafe {
        let mut j = 0;
        while j < full {
            let x = v128_load(ptr.add(j) as *const v128);
            v128_store(ptr.add(j) as *mut v128, f32x4_mul(x, inv_x4));
            j += 4;
        }
    }
    for x in &mut s[full..] {
        *x *= inv;
    }
}

/// ctx[r][c] = sum_j probs[r][j] * v[j][c] in j order, 8 dimensions per pass.
#[inline(always)]
unsafe fn context_block<const R: usize>(probs: *const f32, v: *const f32, hidden: usize, keys: usize, d: usize, ctx: *mut f32) {
    let mut c0 = 0;
    while c0 + 8 <= d {
        context_columns::<R, 2>(probs, v.add(c0), hidden, keys, ctx.add(c0), hidden);
        c0 += 8;
    }
    while c0 + 4 <= d {
        context_columns::<R, 1>(probs, v.add(c0), hidden, keys, ctx.add(c0), hidden);
        c0 += 4;
    }
    for c in c0..d {
        for r in 0..R {
            let mut acc = *probs.add(r * keys) * *v.add(c);
            for j in 1..keys {
                acc += *probs.add(r * keys + j) * *v.add(j * hidden + c);
            }
            *ctx.add(r * hidden + c) = acc;
        }
    }
}

/// ctx[r][4w..4w + 4] for w < W: the context of R rows over 4 * W dimensions.
#[inline(always)]
unsafe fn context_columns<const R: usize, const W: usize>(
    probs: *const f32,
    v: *const f32,
    hidden: usize,
    keys: usize,
    ctx: *mut f32,
    ctx_stride: usize,
) {
    let mut sums = [[f32x4_splat(0.0); W]; R];
    let sums = sums.as_mut_ptr() as *mut v128;
    for r in 0..R {
        let pr = v128_load32_splat(probs.add(r * keys) as *const u32);
        for w in 0..W {
            sums.add(r * W + w).write_volatile(f32x4_mul(pr, v128_load(v.add(4 * w) as *const v128)));
        }
    }
    let mut j = 1;
    while j + STEP <= keys {
        context_step::<R, W, STEP>(probs.add(j), v.add(j * hidden), hidden, keys, sums);
        j += STEP;
    }
    while j < keys {
        context_step::<R, W, 1>(probs.add(j), v.add(j * hidden), hidden, keys, sums);
        j += 1;
    }
    for r in 0..R {
        for w in 0..W {
            v128_store(ctx.add(r * ctx_stride + 4 * w) as *mut v128, sums.add(r * W + w).read_volatile());
        }
    }
}

/// sums[r][w] += probs[r][u] * v[u][4w..4w + 4] for u in 0..U, in u order (probs and v point at
/// the step's first key).
#[inline(always)]
unsafe fn context_step<const R: usize, const W: usize, const U: usize>(probs: *const f32, v: *const f32, hidden: usize, keys: usize, sums: *mut v128) {
    let mut vv = [[f32x4_splat(0.0); W]; U];
    for u in 0..U {
        for w in 0..W {
            vv[u][w] = v128_load(v.add(u * hidden + 4 * w) as *const v128);
        }
    }
    each_row::<R>(|r| {
        let mut acc = [f32x4_splat(0.0); W];
        for w in 0..W {
            acc[w] = sums.add(r * W + w).read_volatile();
        }
        let pr = splats::<U>(probs.add(r * keys));
        for u in 0..U {
            for w in 0..W {
                acc[w] = f32x4_add(acc[w], f32x4_mul(pr[u], vv[u][w]));
            }
        }
        for w in 0..W {
            sums.add(r * W + w).write_volatile(acc[w]);
        }
    });
}
