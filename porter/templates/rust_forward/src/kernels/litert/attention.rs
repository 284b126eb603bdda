//! Multi-head attention: softmax(scale * Q.K^T + terms + mask) . V per head, as LiteRT computes it.
//!
//! Every score and every context value is a float sum whose order is fixed by the reference
//! (BATCH_MATMUL: the first product, then each next product added in k order). The SIMD version
//! therefore never splits one of those sums across lanes: scores are vectorised across keys
//! (K is transposed per head so four keys lie side by side) and the context across the head
//! dimension, and several query rows share each loaded key or value vector.

use core::arch::wasm32::*;

use super::eigen::eigen_sum_scalar;
use crate::kernels::common::unroll::{straight_line, unrolled};
use crate::kernels::ort::float as ort_float;
pub use crate::kernels::ort::float::ScoreTerms;
use super::mathfn::{exp_nonpositive_x4, exp_scalar, exp_x4};
use crate::model::{MAX_HEAD_DIM, SEQ};
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
    key_t: Vec<f32>,   // one head's keys transposed (key_panels), head_dim x keys values
    query: Vec<f32>,   // [rows, head_dim] of one head
    query_splats: Vec<v128>, // [query rows per block, head_dim]: each query value in all four lanes
    probs: Vec<f32>,   // [query rows per block, keys]
    keep_lanes: Vec<u32>, // per key: all ones where the key is kept
    mask_addend: Vec<f32>, // per key: what a score write adds where the mask is added (WriteMask::Add)
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
            query_splats: vec![f32x4_splat(0.0); query_rows * head_dim],
            probs: vec![0.0; query_rows * keys],
            keep_lanes: vec![u32::MAX; keys],
            mask_addend: vec![-0.0; keys],
        }
    }
}

/// Copies one head's query rows, scaled when the graph scales Q.
fn gather_queries(p: &AttentionParams, q: &[f32], rows: usize, hidden: usize, head: usize, out: &mut [f32]) {
    let d = p.head_dim;
    for i in 0..rows {
        let (from, to) = (&q[i * hidden + head * d..][..d], &mut out[i * d..][..d]);
        if p.scale_on_query {
            to.iter_mut().zip(from).for_each(|(y, &x)| *y = x * p.scale);
        } else {
            to.copy_from_slice(from);
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
    // a mask that drops no key (every key of a full window) changes no score: left out, the
    // score writes skip the mask's load and add
    let keep = keep.filter(|keep| keep.iter().take(keys).any(|&kept| !kept));
    if let Some(keep) = keep {
        for (lane, &kept) in scratch.keep_lanes.iter_mut().zip(keep) {
            *lane = if kept { u32::MAX } else { 0 };
        }
        for (addend, &kept) in scratch.mask_addend.iter_mut().zip(keep) {
            *addend = if kept { -0.0 } else { p.mask_value };
        }
    }
    for h in 0..p.heads {
        key_panels(k, keys, hidden, h * p.head_dim, p.head_dim, p.key_scale, &mut scratch.key_t);
        // the head's query rows read in place, or copied scaled where the graph scales Q
        let queries = if p.scale_on_query {
            gather_queries(p, q, rows, hidden, h, &mut scratch.query);
            Queries { rows: scratch.query.as_ptr(), stride: p.head_dim }
        } else {
            Queries { rows: q[h * p.head_dim..].as_ptr(), stride: hidden }
        };
        // only where the mask, if any, is applied as the scores are written (no score term)
        let negligible = (whole_head_context(p.head_dim) && terms.arrays.is_empty())
            .then(|| negligible_products(p, queries, rows, k, v, keys, hidden, h * p.head_dim))
            .flatten();
        let mut i = 0;
        while i + Q <= rows {
            query_block::<Q>(p, queries, i, h, v, negligible, keep.is_some(), terms, keys, ctx, scratch);
            i += Q;
        }
        while i < rows {
            query_block::<1>(p, queries, i, h, v, negligible, keep.is_some(), terms, keys, ctx, scratch);
            i += 1;
        }
    }
}

/// Keys a panel of the transposed keys holds (the last panel of a head: the rest).
const KEY_PANEL: usize = 32;

/// One head's keys, times key_scale, transposed in panels of KEY_PANEL keys: the panel of keys
/// j0..j0 + width holds key j's dimension c at j0 * d + c * width + (j - j0), so that a score
/// step reads four dimensions of a panel's keys at fixed offsets from one address. Four keys by
/// four dimensions at a time, the rest one value at a time.
fn key_panels(k: &[f32], keys: usize, hidden: usize, offset: usize, d: usize, scale: f32, key_t: &mut [f32]) {
    let scale_x4 = f32x4_splat(scale);
    let mut j0 = 0;
    while j0 < keys {
        let width = KEY_PANEL.min(keys - j0);
        let panel = &mut key_t[j0 * d..(j0 + width) * d];
        let key = |j: usize| &k[(j0 + j) * hidden + offset..][..d];
        let (whole_keys, whole_dims) = (width / 4 * 4, d / 4 * 4);
        for j in (0..whole_keys).step_by(4) {
            for c in (0..whole_dims).step_by(4) {
                // SAFETY: each key slice holds d >= c + 4 values.
                let rows = core::array::from_fn(|u| unsafe { f32x4_mul(v128_load(key(j + u)[c..].as_ptr() as *const v128), scale_x4) });
                for (t, column) in ort_float::transpose(rows).into_iter().enumerate() {
                    let out = &mut panel[(c + t) * width + j..][..4];
                    // SAFETY: out holds four values.
                    unsafe { v128_store(out.as_mut_ptr() as *mut v128, column) };
                }
            }
        }
        for j in 0..width {
            let from = if j < whole_keys { whole_dims } else { 0 };
            for (c, &x) in key(j).iter().enumerate().skip(from) {
                panel[c * width + j] = x * scale;
            }
        }
        j0 += width;
    }
}

/// One head's query rows: row i's d values start at rows + i * stride (the queries' own buffer,
/// or the scaled copy).
#[derive(Clone, Copy)]
struct Queries {
    rows: *const f32,
    stride: usize,
}

#[inline(always)]
fn query_block<const R: usize>(
    p: &AttentionParams,
    queries: Queries,
    i0: usize,
    head: usize,
    v: &[f32],
    negligible: Option<u32>,
    masked: bool,
    terms: ScoreTerms,
    keys: usize,
    ctx: &mut [f32],
    s: &mut AttentionScratch,
) {
    let d = p.head_dim;
    let keep = masked.then_some(&s.keep_lanes[..keys]);
    // Where no score term comes between the scale and the mask, the scores are masked and their
    // maximum taken as they are written; else the mask waits for the terms (softmax_row).
    let fused = terms.arrays.is_empty();
    let mask = match keep {
        Some(keep) if fused && p.mask_replaces => WriteMask::Replace(keep.as_ptr()),
        Some(_) if fused => WriteMask::Add(s.mask_addend.as_ptr()),
        _ => WriteMask::None,
    };
    let write = ScoreWrite::new(p, mask);
    let mut maxima = [f32x4_splat(f32::NEG_INFINITY); R];
    let whole_head = whole_head_context(d);
    // SAFETY: the queries hold rows >= i0 + R; key_t holds d x keys; probs R x keys; the query
    // splats R x MAX_HEAD_DIM (AttentionScratch::for_query_rows).
    unsafe {
        let query = Queries { rows: queries.rows.add(i0 * queries.stride), stride: queries.stride };
        if whole_head {
            let splats = s.query_splats.as_mut_ptr();
            scores_by_tiles::<R, WHOLE_HEAD_DIMS>(query, splats, s.key_t.as_ptr(), keys, write, &mut maxima, s.probs.as_mut_ptr())
        } else {
            scores_block::<R>(query, s.key_t.as_ptr(), d, keys, write, &mut maxima, s.probs.as_mut_ptr())
        }
    };
    let mut inverse = [f32x4_splat(1.0); R];
    let mut inverses_numbers = true;
    for r in 0..R {
        let add_terms = |row: &mut [f32]| terms.add_to_row(head, i0 + r, row);
        let row = &mut s.probs[r * keys..(r + 1) * keys];
        let inv = softmax_row(p, keep, fused.then_some(maxima[r]), add_terms, row);
        if whole_head {
            inverse[r] = f32x4_splat(inv); // each probability times it as the context reads it
            inverses_numbers &= !inv.is_nan();
        } else {
            normalise(row, inv);
        }
    }
    // the context may leave out negligible products (negligible_products) where each probability
    // is at most its exp (1 / sum is a number: the sum, of the maximum's exp 1 and more, is then
    // at least 1)
    let negligible = negligible.filter(|_| inverses_numbers);
    let hidden = p.heads * d;
    let ctx = &mut ctx[i0 * hidden + head * d..];
    // SAFETY: v holds keys x hidden; ctx holds R rows of hidden from i0; probs R x keys.
    unsafe {
        if whole_head {
            let (exps, v, ctx) = (s.probs.as_ptr(), v.as_ptr().add(head * d), ctx.as_mut_ptr());
            match negligible {
                Some(sums_from) => context_rows::<R, WHOLE_HEAD_DV, true>(exps, &inverse, v, hidden, keys, sums_from, ctx),
                None => context_rows::<R, WHOLE_HEAD_DV, false>(exps, &inverse, v, hidden, keys, 0, ctx),
            }
        } else {
            context_block::<R>(s.probs.as_ptr(), v.as_ptr().add(head * d), hidden, keys, d, ctx.as_mut_ptr())
        }
    }
}

// The running sums of the score and context loops below live in memory (volatile reads and
// writes), read and written once per four products, not in loop variables: why, at
// ort/float/sgemm.rs `columns`. Each sum's products are formed right after their operands'
// loads and before its store, so that only the row's broadcast values stay in registers; the
// operands are read volatile too, once per row, or LLVM would load each once for all the rows
// of a block and Cranelift spill them.

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

/// How finished scores are written: times the scale where the graph scales the scores (the
/// same product as scaling them afterwards; times 1 where it scales Q, an identity on every
/// score), then the mask (WriteMask).
#[derive(Clone, Copy)]
struct ScoreWrite {
    scale: Option<f32>,
    scale_x4: v128,
    mask: WriteMask,
    mask_value: v128,
}

/// The mask as the scores are written, per key from the block's first key.
#[derive(Clone, Copy)]
enum WriteMask {
    /// None applied here: no mask, or one that waits for the score terms (softmax_row).
    None,
    /// Each score plus its key's addend: -0.0 where the key is kept (x + -0.0 is x, bit for bit,
    /// for every x, so a kept score is as the reference leaves it), the mask value where it is
    /// dropped. One load and one add a vector where two lane selects took six logic instructions
    /// on x86, a tenth of the score pass.
    Add(*const f32),
    /// A dropped key's score becomes the mask value (Keras' masked softmax): lanes all ones where
    /// the key is kept.
    Replace(*const u32),
}

impl ScoreWrite {
    fn new(p: &AttentionParams, mask: WriteMask) -> Self {
        let scale = (!p.scale_on_query).then_some(p.scale);
        ScoreWrite { scale, scale_x4: f32x4_splat(scale.unwrap_or(1.0)), mask, mask_value: f32x4_splat(p.mask_value) }
    }

    /// Four scores of keys j..j + 4 (j + 4 <= keys), as written.
    #[inline(always)]
    unsafe fn four(&self, sum: v128, j: usize) -> v128 {
        let x = f32x4_mul(sum, self.scale_x4);
        match self.mask {
            WriteMask::None => x,
            WriteMask::Add(addend) => f32x4_add(x, v128_load(addend.add(j) as *const v128)),
            WriteMask::Replace(kept) => v128_bitselect(x, self.mask_value, v128_load(kept.add(j) as *const v128)),
        }
    }

    /// `four`'s scores stored at `at` and taken into their row's lanes' maximum.
    #[inline(always)]
    unsafe fn store_four(&self, sum: v128, j: usize, at: *mut f32, max: &mut v128) {
        let x = self.four(sum, j);
        v128_store(at as *mut v128, x);
        *max = f32x4_pmax(*max, x);
    }
}

/// (exps[0..U] * inverse), each in all four lanes: normalise's products, as the context reads them.
#[inline(always)]
unsafe fn probabilities<const U: usize>(exps: *const f32, inverse: v128) -> [v128; U] {
    if U == 4 {
        let lanes = ort_float::lane_splats(f32x4_mul(v128_load(exps as *const v128), inverse));
        core::array::from_fn(|u| lanes[u])
    } else {
        core::array::from_fn(|u| f32x4_mul(v128_load32_splat(exps.add(u) as *const u32), inverse))
    }
}

/// scores[r][j] = sum_c query[r][c] * key[j][c], each sum in c order, written as `write` says,
/// for R query rows (query rows d apart, score rows `keys` apart) and every key of the panels;
/// maxima[r] the lanes' maximum of row r's scores written four at a time.
#[inline(always)]
unsafe fn scores_block<const R: usize>(query: Queries, key_t: *const f32, d: usize, keys: usize, write: ScoreWrite,
                                       maxima: &mut [v128; R], scores: *mut f32) {
    let mut j0 = 0;
    while j0 < keys {
        score_panel::<R>(query, key_t.add(j0 * d), d, keys, write, j0, maxima, scores.add(j0));
        j0 += KEY_PANEL;
    }
}

/// scores_block's work on the panel of keys from j0 (at `panel`; out: row 0's score of key j0).
#[inline(always)]
unsafe fn score_panel<const R: usize>(query: Queries, panel: *const f32, d: usize, keys: usize, write: ScoreWrite, j0: usize,
                                      maxima: &mut [v128; R], out: *mut f32) {
    let width = KEY_PANEL.min(keys - j0);
    let mut j = 0;
    while j + KEY_PANEL <= width {
        score_columns::<R, { KEY_PANEL / 4 }>(query, panel.add(j), width, d, keys, write, j0 + j, maxima, out.add(j));
        j += KEY_PANEL;
    }
    while j + 8 <= width {
        score_columns::<R, 2>(query, panel.add(j), width, d, keys, write, j0 + j, maxima, out.add(j));
        j += 8;
    }
    while j + 4 <= width {
        score_columns::<R, 1>(query, panel.add(j), width, d, keys, write, j0 + j, maxima, out.add(j));
        j += 4;
    }
    // the keys past the last whole vector (softmax_row masks them)
    for jj in j..width {
        for r in 0..R {
            let q = query.rows.add(r * query.stride);
            let mut s = *q * *panel.add(jj);
            for c in 1..d {
                s += *q.add(c) * *panel.add(c * width + jj);
            }
            *out.add(r * keys + jj) = match write.scale {
                Some(scale) => s * scale,
                None => s,
            };
        }
    }
}

/// scores_block for a head of the model's widest D dimensions (whole_head_context): the whole
/// panels' scores in register tiles of 4 query rows (then 1) x 8 keys (score_panel_tiles), the
/// last panel's (narrower) as scores_block does. Panel by panel, each panel for every row group
/// of the block: a panel (4 KiB at 32 dimensions) stays in L1 between the groups, where the
/// head's whole keys (32 KiB in a window of 256) would fill a 32 KiB L1d (Zen 3 and 4). A row's
/// scores still go in key order, so its maximum is taken in the same order. The rows' values
/// are splatted into `splats` first: Cranelift makes a splatting load a load, a move and a
/// broadcast, and a tile reads each of them once per 8 keys.
#[inline(always)]
unsafe fn scores_by_tiles<const R: usize, const D: usize>(query: Queries, splats: *mut v128, key_t: *const f32, keys: usize,
                                                         write: ScoreWrite, maxima: &mut [v128; R], scores: *mut f32) {
    let panels = keys / KEY_PANEL;
    if panels > 0 {
        // four query values a load, each put in all lanes by a shuffle (D is a multiple of 4:
        // whole_head_context); element by element, the address arithmetic cost more than the splats
        for r in 0..R {
            let (row, out) = (query.rows.add(r * query.stride), splats.add(r * D));
            for c in (0..D).step_by(4) {
                let lanes = ort_float::lane_splats(v128_load(row.add(c) as *const v128));
                for (u, lane) in lanes.into_iter().enumerate() {
                    *out.add(c + u) = lane;
                }
            }
        }
    }
    for panel in 0..panels {
        let at = key_t.add(panel * KEY_PANEL * D);
        let mut r = 0;
        while r + 4 <= R {
            score_panel_tiles::<4, D>(splats.add(r * D), at, panel * KEY_PANEL, keys, write, maxima.as_mut_ptr().add(r), scores.add(r * keys));
            r += 4;
        }
        while r < R {
            score_panel_tiles::<1, D>(splats.add(r * D), at, panel * KEY_PANEL, keys, write, maxima.as_mut_ptr().add(r), scores.add(r * keys));
            r += 1;
        }
    }
    let j0 = panels * KEY_PANEL;
    if j0 < keys {
        score_panel::<R>(query, key_t.add(j0 * D), D, keys, write, j0, maxima, scores.add(j0));
    }
}

/// The scores of TR query rows (their splats D apart) against the KEY_PANEL keys of the whole
/// panel at `at` (from key j0: every key vector at a constant offset from the panel), 8 keys at
/// a time; maxima[0..TR] the rows' lanes' maxima.
#[inline(always)]
unsafe fn score_panel_tiles<const TR: usize, const D: usize>(splats: *const v128, at: *const f32, j0: usize, keys: usize,
                                                            write: ScoreWrite, maxima: *mut v128, out: *mut f32) {
    for tile in 0..KEY_PANEL / 8 {
        score_eight_keys::<TR, D>(splats, at.add(8 * tile), write, j0 + 8 * tile, keys, maxima, out);
    }
}

/// score_panel_tiles' 8 keys from key j (at keys_at in their panel): the tile's sums written as
/// scores. Not inlined: in a function of its own the splats' address is one value every load
/// adds a constant to; inlined in the loops, LLVM hoists each splat's address out of them and
/// Cranelift spills them all.
#[inline(never)]
unsafe fn score_eight_keys<const TR: usize, const D: usize>(splats: *const v128, keys_at: *const f32, write: ScoreWrite,
                                                           j: usize, keys: usize, maxima: *mut v128, out: *mut f32) {
    let sums = score_tile::<TR, D>(splats, keys_at);
    for (r, row) in sums.iter().enumerate() {
        for (kv, &sum) in row.iter().enumerate() {
            write.store_four(sum, j + 4 * kv, out.add(r * keys + j + 4 * kv), &mut *maxima.add(r));
        }
    }
}

/// sums[r][kv] = sum_c query[r][c] * key[c][4kv..4kv + 4] in c order, for TR rows (their splats
/// D apart) and the two key vectors of a whole panel's 8 keys from keys_at (dimension c's at
/// keys_at + c * KEY_PANEL), carried in registers through straight-line code over the D
/// dimensions: no loop header, across which Cranelift spills every live vector (the epoch
/// check's slow path is a call).
///
/// Cranelift computes pure arithmetic just before its first side-effecting use, and keeps loads
/// where the wasm has them: so every two dimensions each row's sums are stored (volatile, never
/// read: an anchor), or their whole chains would be computed at the end with every loaded
/// vector live until then. The key loads are volatile so that LLVM keeps them between the
/// anchors. LLVM folds a constant into a load's offset only where it knows the address cannot
/// wrap, and each load without one takes an add of its own (a lea on x86): so no loop for LLVM
/// to unroll (the addresses it derives in an unrolled loop lose that knowledge), and the splats
/// addressed as f32s (offsets from the v128 pointer came out as adds too, in the wasm).
#[inline(always)]
unsafe fn score_tile<const TR: usize, const D: usize>(splats: *const v128, keys_at: *const f32) -> [[v128; 2]; TR] {
    let mut sums = [[f32x4_splat(0.0); 2]; TR];
    let mut anchors = [[f32x4_splat(0.0); 2]; TR];
    let anchors = anchors.as_mut_ptr() as *mut v128;
    let key = |c: usize, kv: usize| (keys_at.add(c * KEY_PANEL + 4 * kv) as *const v128).read_volatile();
    let splat = |r: usize, c: usize| ((splats as *const f32).add(4 * (r * D + c)) as *const v128).read_volatile();
    straight_line!(c in 0..D => {
        if c % 2 == 0 {
            let pair = c + 1 < D;
            let (k0, k1) = (key(c, 0), key(c, 1));
            let (next0, next1) = if pair { (key(c + 1, 0), key(c + 1, 1)) } else { (k0, k1) };
            unrolled::<TR>(|r| {
                let q = splat(r, c);
                let (p0, p1) = (f32x4_mul(q, k0), f32x4_mul(q, k1));
                let sum = &mut sums[r];
                *sum = if c == 0 { [p0, p1] } else { [f32x4_add(sum[0], p0), f32x4_add(sum[1], p1)] };
                if pair {
                    let q = splat(r, c + 1);
                    *sum = [f32x4_add(sum[0], f32x4_mul(q, next0)), f32x4_add(sum[1], f32x4_mul(q, next1))];
                }
                anchors.add(2 * r).write_volatile(sum[0]);
                anchors.add(2 * r + 1).write_volatile(sum[1]);
            });
        }
    });
    sums
}

/// The scores of R query rows and 4 KV keys (from key j) of a panel (its dimension rows
/// `stride` apart).
#[inline(always)]
unsafe fn score_columns<const R: usize, const KV: usize>(query: Queries, panel: *const f32, stride: usize, d: usize,
                                                         keys: usize, write: ScoreWrite, j: usize, maxima: &mut [v128; R],
                                                         out: *mut f32) {
    let mut sums = [[f32x4_splat(0.0); KV]; R];
    let sums = sums.as_mut_ptr() as *mut v128;
    let (q, q_stride) = (query.rows, query.stride);
    let mut c = if d >= 4 {
        score_step::<R, KV, 4, true>(q, panel, stride, q_stride, sums);
        4
    } else {
        score_step::<R, KV, 1, true>(q, panel, stride, q_stride, sums);
        1
    };
    while c + 4 <= d {
        score_step::<R, KV, 4, false>(q.add(c), panel.add(c * stride), stride, q_stride, sums);
        c += 4;
    }
    while c < d {
        score_step::<R, KV, 1, false>(q.add(c), panel.add(c * stride), stride, q_stride, sums);
        c += 1;
    }
    for (r, max) in maxima.iter_mut().enumerate() {
        for kv in 0..KV {
            write.store_four(sums.add(r * KV + kv).read_volatile(), j + 4 * kv, out.add(r * keys + 4 * kv), max);
        }
    }
}

/// sums[r][kv] = (FIRST) or += query[r][u] * panel[u][4kv..4kv + 4] for u in 0..U, in u order
/// (query and panel point at the step's first dimension; query rows q_stride apart).
#[inline(always)]
unsafe fn score_step<const R: usize, const KV: usize, const U: usize, const FIRST: bool>(
    query: *const f32,
    panel: *const f32,
    stride: usize,
    q_stride: usize,
    sums: *mut v128,
) {
    // the step's dimension rows, each key vector a constant offset from one of them
    let dims: [*const f32; U] = core::array::from_fn(|u| panel.add(u * stride));
    unrolled::<R>(|r| {
        let q = splats::<U>(query.add(r * q_stride));
        unrolled::<KV>(|kv| {
            let key = |u: usize| (dims[u].add(4 * kv) as *const v128).read_volatile();
            let sum = sums.add(r * KV + kv);
            let mut acc = if FIRST { f32x4_mul(q[0], key(0)) } else { f32x4_add(sum.read_volatile(), f32x4_mul(q[0], key(0))) };
            for u in 1..U {
                acc = f32x4_add(acc, f32x4_mul(q[u], key(u)));
            }
            sum.write_volatile(acc);
        });
    });
}

/// Scores -> exps in place and 1 / their sum, the vector form of finish_scores_scalar but its
/// last product (the scale was applied as the scores were written): the score terms, the mask
/// and the maximum (or, where the scores' whole vectors were masked as they were written, their
/// lanes' maximum `written`), then exp((s - max) * beta) with its sum in Eigen's order. Each
/// probability is exp * inverse: `normalise`, or the context as it reads them.
fn softmax_row(p: &AttentionParams, keep_lanes: Option<&[u32]>, written: Option<v128>, add_terms: impl Fn(&mut [f32]),
               s: &mut [f32]) -> f32 {
    let n = s.len();
    let full = n / 4 * 4;
    let ptr = s.as_mut_ptr();
    add_terms(s);
    // SAFETY: all accesses below `full` <= n; keep_lanes has n entries.
    let max_x4 = written.unwrap_or_else(|| unsafe {
        match keep_lanes {
            Some(keep) if p.mask_replaces => mask_and_max(ptr, keep, full, |_| f32x4_splat(p.mask_value)),
            Some(keep) => mask_and_max(ptr, keep, full, |x| f32x4_add(x, f32x4_splat(p.mask_value))),
            None => {
                let mut max_x4 = f32x4_splat(f32::NEG_INFINITY);
                let mut j = 0;
                while j < full {
                    max_x4 = f32x4_pmax(max_x4, v128_load(ptr.add(j) as *const v128));
                    j += 4;
                }
                max_x4
            }
        }
    });
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
    1.0 / exponentiate(s, max, p.softmax_beta)
}

/// s[j] *= inv: exps -> probabilities.
fn normalise(s: &mut [f32], inv: f32) {
    let full = s.len() / 4 * 4;
    let (ptr, inv_x4) = (s.as_mut_ptr(), f32x4_splat(inv));
    // SAFETY: every vector lies below `full` <= len.
    unsafe {
        let mut j = 0;
        while j < full {
            v128_store(ptr.add(j) as *mut v128, f32x4_mul(v128_load(ptr.add(j) as *const v128), inv_x4));
            j += 4;
        }
    }
    for x in &mut s[full..] {
        *x *= inv;
    }
}

/// The mask applied to s[..full] (a dropped key's score becomes dropped(score)), and the lanes'
/// maximum of the result.
#[inline(always)]
unsafe fn mask_and_max(s: *mut f32, keep: &[u32], full: usize, dropped: impl Fn(v128) -> v128) -> v128 {
    assert!(keep.len() >= full);
    let mut max_x4 = f32x4_splat(f32::NEG_INFINITY);
    let mut j = 0;
    while j < full {
        let x = v128_load(s.add(j) as *const v128);
        let x = v128_bitselect(x, dropped(x), v128_load(keep.as_ptr().add(j) as *const v128));
        v128_store(s.add(j) as *mut v128, x);
        max_x4 = f32x4_pmax(max_x4, x);
        j += 4;
    }
    max_x4
}

/// s[j] = exp((s[j] - max) * beta), returning their sum in Eigen's order (eigen::eigen_sum: two
/// packet accumulators, even and odd packets): one pass where an exp pass and a sum pass would
/// read the row twice. With beta 1 (every softmax but a distilled one's) the product is left
/// out of the vector loop: x * 1 is x, bit for bit. max is at least every score that is a
/// number (softmax_row), so s - max is <= 0 or NaN, and so is its product with a positive beta:
/// exp_nonpositive_x4's inputs.
fn exponentiate(s: &mut [f32], max: f32, beta: f32) -> f32 {
    if beta == 1.0 {
        exponentiate_with(s, max, beta, |x| exp_nonpositive_x4(x))
    } else if beta > 0.0 {
        let beta_x4 = f32x4_splat(beta);
        exponentiate_with(s, max, beta, |x| exp_nonpositive_x4(f32x4_mul(x, beta_x4)))
    } else {
        let beta_x4 = f32x4_splat(beta);
        exponentiate_with(s, max, beta, |x| exp_x4(f32x4_mul(x, beta_x4)))
    }
}

/// exponentiate with `exp_of_difference`, the vector exp of (s - max) times beta.
#[inline(always)]
fn exponentiate_with(s: &mut [f32], max: f32, beta: f32, exp_of_difference: impl Fn(v128) -> v128) -> f32 {
    let (n, full) = (s.len(), s.len() / 4 * 4);
    let pairs = full / 8 * 8;
    let max_x4 = f32x4_splat(max);
    let p = s.as_mut_ptr();
    // SAFETY: every packet lies below `full` <= n.
    let packet = |j: usize| unsafe {
        let y = exp_of_difference(f32x4_sub(v128_load(p.add(j) as *const v128), max_x4));
        v128_store(p.add(j) as *mut v128, y);
        y
    };
    let mut sum = None;
    if full > 0 {
        let mut acc0 = packet(0);
        if full > 4 {
            let mut acc1 = packet(4);
            let mut j = 8;
            // two pairs an iteration where they fit: half the loop's overhead (its epoch check,
            // the accumulators' spill and reload) for each packet
            while j + 16 <= pairs {
                acc0 = f32x4_add(acc0, packet(j));
                acc1 = f32x4_add(acc1, packet(j + 4));
                acc0 = f32x4_add(acc0, packet(j + 8));
                acc1 = f32x4_add(acc1, packet(j + 12));
                j += 16;
            }
            while j < pairs {
                acc0 = f32x4_add(acc0, packet(j));
                acc1 = f32x4_add(acc1, packet(j + 4));
                j += 8;
            }
            acc0 = f32x4_add(acc0, acc1);
            if full > pairs {
                acc0 = f32x4_add(acc0, packet(pairs));
            }
        }
        sum = Some((f32x4_extract_lane::<0>(acc0) + f32x4_extract_lane::<2>(acc0))
            + (f32x4_extract_lane::<1>(acc0) + f32x4_extract_lane::<3>(acc0)));
    }
    for x in &mut s[full..] {
        *x = exp_scalar((*x - max) * beta);
        sum = Some(sum.map_or(*x, |sum| sum + *x));
    }
    sum.unwrap_or(0.0)
}

/// The widest head (in vectors of four columns) whose context is computed all columns at once:
/// each row's sums of a step are updated in straight-line code.
const WHOLE_HEAD_VECTORS: usize = 16;

/// The model's head in such vectors (1 where it is wider: context_rows is then not taken).
const WHOLE_HEAD_DV: usize = if MAX_HEAD_DIM / 4 <= WHOLE_HEAD_VECTORS { MAX_HEAD_DIM / 4 } else { 1 };

/// Its dimensions: those scores_by_tiles unrolls.
const WHOLE_HEAD_DIMS: usize = 4 * WHOLE_HEAD_DV;

/// Whether a head of d dimensions takes the whole-head paths, scores_by_tiles and context_rows
/// (all its columns per step): one as wide as the model's widest (MAX_HEAD_DIM, up to
/// WHOLE_HEAD_VECTORS vectors).
fn whole_head_context(d: usize) -> bool {
    d == MAX_HEAD_DIM && MAX_HEAD_DIM % 4 == 0 && MAX_HEAD_DIM / 4 <= WHOLE_HEAD_VECTORS
}

/// ctx[r][c] = sum_j probs[r][j] * v[j][c] in j order, 8 columns at a time (a head of another
/// width than context_rows takes).
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

/// ctx[r][c] = sum_j (exps[r][j] * inverse[r]) * v[j][c] in j order, for R rows over all 4DV
/// columns of the head: each row's four probabilities of a step formed and broadcast once, then
/// each column vector's sum updated with its four value rows. CAREFUL: a step with negligible
/// products goes key by key (context_group_by_keys, with the sums' bound `sums_from`).
#[inline(always)]
unsafe fn context_rows<const R: usize, const DV: usize, const CAREFUL: bool>(
    exps: *const f32,
    inverse: &[v128; R],
    v: *const f32,
    hidden: usize,
    keys: usize,
    sums_from: u32,
    ctx: *mut f32,
) {
    let mut sums = [[f32x4_splat(0.0); DV]; R];
    let sums = sums.as_mut_ptr() as *mut v128;
    let mut j = if keys >= 4 {
        context_rows_step::<R, DV, CAREFUL, 4, true>(exps, inverse, v, hidden, keys, sums_from, sums);
        4
    } else {
        context_rows_step::<R, DV, CAREFUL, 1, true>(exps, inverse, v, hidden, keys, sums_from, sums);
        1
    };
    while j + 4 <= keys {
        context_rows_step::<R, DV, CAREFUL, 4, false>(exps.add(j), inverse, v.add(j * hidden), hidden, keys, sums_from, sums);
        j += 4;
    }
    while j < keys {
        context_rows_step::<R, DV, CAREFUL, 1, false>(exps.add(j), inverse, v.add(j * hidden), hidden, keys, sums_from, sums);
        j += 1;
    }
    for r in 0..R {
        for cv in 0..DV {
            v128_store(ctx.add(r * hidden + 4 * cv) as *mut v128, sums.add(r * DV + cv).read_volatile());
        }
    }
}

/// sums[r][cv] = (FIRST) or += (exps[r][u] * inverse[r]) * v[u][4cv..4cv + 4] for u in 0..U, in
/// u order (exps and v point at the step's first key), the rows in pairs (a row left over alone).
#[inline(always)]
unsafe fn context_rows_step<const R: usize, const DV: usize, const CAREFUL: bool, const U: usize, const FIRST: bool>(
    exps: *const f32,
    inverse: &[v128; R],
    v: *const f32,
    hidden: usize,
    keys: usize,
    sums_from: u32,
    sums: *mut v128,
) {
    // the step's value rows, each column vector a constant offset from one of them
    let values: [*const f32; U] = core::array::from_fn(|u| v.add(u * hidden));
    unrolled::<R>(|r| match (r % 2, r + 1 < R) {
        (0, true) => context_row_group::<2, DV, CAREFUL, U, FIRST>(exps, &inverse[r..], values, keys, sums_from, sums, r),
        (0, false) => context_row_group::<1, DV, CAREFUL, U, FIRST>(exps, &inverse[r..], values, keys, sums_from, sums, r),
        _ => {} // the second of a pair
    });
}

/// context_rows_step's work on N rows from r: each value vector loaded once serves every row's
/// sum (with a pair: half the loads of a row at a time, the two rows' eight probabilities held in
/// registers beside the four values).
#[inline(always)]
unsafe fn context_row_group<const N: usize, const DV: usize, const CAREFUL: bool, const U: usize, const FIRST: bool>(
    exps: *const f32,
    inverse: &[v128],
    values: [*const f32; U],
    keys: usize,
    sums_from: u32,
    sums: *mut v128,
    r: usize,
) {
    if CAREFUL && U == 4 {
        // a step with a nonzero exp below NEGLIGIBLE_EXP (subnormal products: a microcode assist
        // each) goes key by key, leaving out the products that cannot change a sum
        let (below, zero) = (i32x4_splat(NEGLIGIBLE_EXP.to_bits() as i32), i32x4_splat(0));
        let tiny = (0..N).fold(zero, |any, i| {
            let e = v128_load(exps.add((r + i) * keys) as *const v128);
            v128_or(any, v128_and(i32x4_lt(e, below), i32x4_gt(e, zero)))
        });
        if v128_any_true(tiny) {
            return context_group_by_keys::<N, DV, U, FIRST>(exps, inverse, values, keys, sums_from, sums, r);
        }
    }
    let pr: [[v128; U]; N] = core::array::from_fn(|i| probabilities::<U>(exps.add((r + i) * keys), inverse[i]));
    unrolled::<DV>(|cv| {
        let value: [v128; U] = core::array::from_fn(|u| (values[u].add(4 * cv) as *const v128).read_volatile());
        for (i, pr) in pr.iter().enumerate() {
            let sum = sums.add((r + i) * DV + cv);
            let mut acc = if FIRST { f32x4_mul(pr[0], value[0]) } else { f32x4_add(sum.read_volatile(), f32x4_mul(pr[0], value[0])) };
            for u in 1..U {
                acc = f32x4_add(acc, f32x4_mul(pr[u], value[u]));
            }
            sum.write_volatile(acc);
        }
    });
}

/// context_row_group's step key by key, for a step with a nonzero exp below NEGLIGIBLE_EXP: the
/// same products and sums in the same order, but that such an exp's products are left out where
/// every sum of its row is at least `sums_from` in magnitude (negligible_products: adding them
/// would round back to each sum; an infinite or NaN sum stays as it is too). Left out, their
/// subnormal multiplies never reach the FPU, where each takes a microcode assist on x86 (about 125
/// cycles on the Xeon; adds take none) and wasm has no flush-to-zero mode.
#[inline(never)]
unsafe fn context_group_by_keys<const N: usize, const DV: usize, const U: usize, const FIRST: bool>(
    exps: *const f32,
    inverse: &[v128],
    values: [*const f32; U],
    keys: usize,
    sums_from: u32,
    sums: *mut v128,
    r: usize,
) {
    for i in 0..N {
        let row_sums = sums.add((r + i) * DV);
        for u in 0..U {
            let exp = *exps.add((r + i) * keys + u);
            let first = FIRST && u == 0;
            if !first && exp < NEGLIGIBLE_EXP && sums_at_least(row_sums, DV, sums_from) {
                continue;
            }
            let probability = f32x4_mul(f32x4_splat(exp), inverse[i]);
            for cv in 0..DV {
                let product = f32x4_mul(probability, (values[u].add(4 * cv) as *const v128).read_volatile());
                let sum = row_sums.add(cv);
                sum.write_volatile(if first { product } else { f32x4_add(sum.read_volatile(), product) });
            }
        }
    }
}

/// Whether each of the n sums from `sums` is at least the float of bits `bound` in magnitude (or
/// infinite, or NaN).
unsafe fn sums_at_least(sums: *const v128, n: usize, bound: u32) -> bool {
    let (magnitude, bound) = (i32x4_splat(i32::MAX), i32x4_splat(bound as i32));
    (0..n).all(|cv| i32x4_all_true(i32x4_ge(v128_and(sums.add(cv).read_volatile(), magnitude), bound)))
}

/// Exps below this (2^-116) are negligible in the context where a row's sums are large enough
/// (negligible_products). Their probabilities, at most the exp, include every subnormal one in a
/// row of up to 1024 keys: each probability is the exp over the row's sum, at most the keys.
const NEGLIGIBLE_EXP: f32 = f32::from_bits((127 - 116) << 23);

/// A row whose scores (times beta) spread less than this has no exp below NEGLIGIBLE_EXP: a
/// little less than -ln(2^-116).
const NEGLIGIBLE_SPREAD: f32 = 79.0;

/// Whether the head at `offset` may have negligible products, and then the bit pattern of the
/// smallest sum magnitude against which they round away (context_group_by_keys).
///
/// - The head's rows' scores can spread no more than 2 |q| |k| (Cauchy-Schwarz) times the scales:
///   below NEGLIGIBLE_SPREAD with the largest query and key, no exp falls below NEGLIGIBLE_EXP and
///   the context need not look for them (the case of most heads: the checks would cost more
///   than the assists they avoid).
/// - With the values below 2^b in magnitude, a probability below NEGLIGIBLE_EXP times a value
///   lies below 2^(b - 116), and a sum of at least 2^(b - 89) has a unit in the last place of at
///   least 2^(b - 112), over sixteen times that: adding the product rounds back to the sum.
///
/// None where beta is not positive, or a value is infinite or NaN (its product with a zero
/// probability would be NaN). The values' magnitudes order as their bit patterns.
#[allow(clippy::too_many_arguments)]
fn negligible_products(p: &AttentionParams, queries: Queries, rows: usize, k: &[f32], v: &[f32], keys: usize, hidden: usize,
                       offset: usize) -> Option<u32> {
    if !(p.softmax_beta > 0.0) {
        return None;
    }
    // SAFETY: the queries hold rows of MAX_HEAD_DIM (a whole head) from each row's start.
    let query = largest_square_norm(rows, |i| unsafe { core::slice::from_raw_parts(queries.rows.add(i * queries.stride), MAX_HEAD_DIM) });
    let key = largest_square_norm(keys, |j| &k[j * hidden + offset..][..MAX_HEAD_DIM]);
    let scale = if p.scale_on_query { 1.0 } else { p.scale.abs() };
    let spread = 2.0 * query.sqrt() * key.sqrt() * p.key_scale.abs() * scale * p.softmax_beta;
    if !(spread >= NEGLIGIBLE_SPREAD) {
        return None;
    }
    let magnitude = i32x4_splat(i32::MAX);
    let mut largest = i32x4_splat(0);
    for j in 0..keys {
        for x in v[j * hidden + offset..][..MAX_HEAD_DIM].chunks_exact(4) {
            // SAFETY: x holds four values.
            largest = i32x4_max(largest, v128_and(unsafe { v128_load(x.as_ptr() as *const v128) }, magnitude));
        }
    }
    let m = ort_float::lanes(largest).map(f32::to_bits).into_iter().max().unwrap_or(0);
    if m >= 0x7f80_0000 {
        return None;
    }
    // the values lie below 2^b: a normal largest's exponent plus one, or 2^-126
    let b = ((m >> 23).max(1) as i32) - 126;
    // and at least 2^-122: sixteen times the smallest subnormal, what a product may round up to
    let sums_from = (b - 89).max(-122);
    (sums_from <= 127).then(|| ((sums_from + 127) as u32) << 23)
}

/// The largest sum of squares of `rows` vectors of MAX_HEAD_DIM (a multiple of 4) values.
fn largest_square_norm<'a>(rows: usize, row: impl Fn(usize) -> &'a [f32]) -> f32 {
    let mut largest = 0.0f32;
    for i in 0..rows {
        let squares = row(i).chunks_exact(4).fold(f32x4_splat(0.0), |sum, x| {
            // SAFETY: x holds four values.
            let x = unsafe { v128_load(x.as_ptr() as *const v128) };
            f32x4_add(sum, f32x4_mul(x, x))
        });
        largest = largest.max(ort_float::lanes(squares).into_iter().sum());
    }
    largest
}

/// ctx[r][4w..4w + 4] for w < W: the context of R rows over 4 * W dimensions (the value
/// vectors of a step loaded once, each row's sums updated with them).
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
    while j + 4 <= keys {
        context_step::<R, W, 4>(probs.add(j), v.add(j * hidden), hidden, keys, sums);
        j += 4;
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
    unrolled::<R>(|r| {
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
