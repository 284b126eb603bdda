//! One decoder step with the KV cache in linear memory, in onnxruntime's float arithmetic on the
//! CPU model.rs names (the same operations as porter/reference/execute_decoder.py):
//!
//!     x = embed(ids) (+ learned positions)
//!     per layer: x += o(attention(norm1(x)))      q, k (rotated), v from one Linear or three
//!                x += down(act(gate(norm2(x))) * up(norm2(x)))   (or down(act(up(.))))
//!     or, parallel: x += o(attention(norm1(x))) + mlp(norm2(x))  (the branches summed first)
//!     logits = head(final_norm(x))
//!
//! The cache holds every layer's keys and values for the whole context, [LAYERS][KV_HEADS]
//! [N_CTX][HEAD_DIM] each, allocated once; a step writes only its new positions and reads the
//! ones before, so a token costs its own work plus attention over the tokens so far.

use core::arch::wasm32::*;

use crate::kernels::decoder_float::{activate_in_place, rms_norm_row, rotary, simplified_layer_norm_row, Rotate};
use crate::kernels::ort::float::{layer_norm_row, m1_columns, m1_dot, m1_transpose_b, sgemm_columns, sgemm_outputs, skip_layer_norm_row, softmax, stride_k};
use crate::linear::LinearScratch;
use crate::model::*;

pub struct Cache {
    keys: Vec<f32>,
    values: Vec<f32>,
    /// Positions filled so far (the graph's `past`).
    pub len: usize,
}

impl Cache {
    pub fn new() -> Self {
        let size = LAYERS * KV_HEADS * N_CTX * HEAD_DIM;
        Cache { keys: vec![0.0; size], values: vec![0.0; size], len: 0 }
    }

    fn at(layer: usize, head: usize, pos: usize) -> usize {
        ((layer * KV_HEADS + head) * N_CTX + pos) * HEAD_DIM
    }
}

/// Work buffers for up to `rows` new tokens, allocated once.
pub struct Scratch {
    x: Vec<f32>,
    normed: Vec<f32>,
    projected: [Vec<f32>; PROJECTIONS],
    query: Vec<f32>,
    context: Vec<f32>,
    block: Vec<f32>,
    attended: Vec<f32>,
    hidden: Vec<f32>,
    up: Vec<f32>,
    scores: Vec<f32>,
    squares: Vec<f32>,
    linear: LinearScratch,
}

impl Scratch {
    pub fn new(rows: usize) -> Self {
        Scratch {
            x: vec![0.0; rows * HIDDEN],
            normed: vec![0.0; rows * HIDDEN],
            projected: PROJECTION_WIDTHS.map(|w| vec![0.0; rows * w]),
            query: vec![0.0; HEAD_DIM],
            context: vec![0.0; rows * HEADS * HEAD_DIM],
            block: vec![0.0; rows * HIDDEN],
            attended: vec![0.0; if PARALLEL { rows * HIDDEN } else { 0 }],
            hidden: vec![0.0; rows * FFN],
            up: vec![0.0; rows * FFN],
            scores: vec![0.0; N_CTX],
            squares: vec![0.0; HIDDEN],
            linear: LinearScratch::new(rows, WIDEST),
        }
    }
}

/// The norm of each of `rows` rows of x into out (a fused SkipLayerNormalization is the final
/// norm's own case, in `final_norm`).
fn norm(n: &Norm, x: &[f32], rows: usize, out: &mut [f32], squares: &mut [f32]) {
    for r in 0..rows {
        let span = r * HIDDEN..(r + 1) * HIDDEN;
        match n.kind {
            NormKind::LayerNorm | NormKind::LayerNormSkip => {
                layer_norm_row(&x[span.clone()], n.gamma.unwrap(), n.beta.unwrap(), n.eps, &mut out[span])
            }
            NormKind::RmsReciprocal | NormKind::RmsDivide => {
                rms_norm_row(&x[span.clone()], n.gamma, n.eps, n.kind == NormKind::RmsReciprocal, squares, &mut out[span])
            }
            NormKind::RmsSimplified => simplified_layer_norm_row(&x[span.clone()], n.gamma.unwrap(), n.eps, &mut out[span]),
            NormKind::Identity => out[span.clone()].copy_from_slice(&x[span]),
        }
    }
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// q, k or v of head `head` of token `row`: its columns of the projection that makes it.
fn part(s: &Scratch, at: (usize, usize), row: usize, head: usize) -> &[f32] {
    let (projection, first) = at;
    &s.projected[projection][row * PROJECTION_WIDTHS[projection] + first + head * HEAD_DIM..][..HEAD_DIM]
}

/// Attention of `rows` new tokens at positions past.. over every cached key up to theirs.
fn attention(model: &Model, layer: usize, cache: &mut Cache, rows: usize, s: &mut Scratch) {
    let a = &model.layers[layer].attention;
    norm(&a.norm, &s.x, rows, &mut s.normed, &mut s.squares);
    for (lin, out) in a.projections.iter().zip(s.projected.iter_mut()) {
        lin.apply(&s.normed, rows, out, &mut s.linear);
    }
    let past = cache.len;
    let keys = past + rows;
    for r in 0..rows {
        for h in 0..KV_HEADS {
            let slot = Cache::at(layer, h, past + r);
            let k = part(s, K_AT, r, h);
            match (a.rotary, model.rope) {
                (Some(style), Some((cos, sin))) => turn(k, cos, sin, past + r, style, &mut cache.keys[slot..slot + HEAD_DIM]),
                _ => cache.keys[slot..slot + HEAD_DIM].copy_from_slice(k),
            }
            scale(&mut cache.keys[slot..slot + HEAD_DIM], a.k_factor);
            let v = part(s, V_AT, r, h);
            cache.values[slot..slot + HEAD_DIM].copy_from_slice(v);
        }
    }
    for r in 0..rows {
        // the later keys are hidden: their scores are the fill (replace) or score + fill (add)
        let visible = past + r + 1;
        let computed = if a.mask_adds { keys } else { visible };
        for h in 0..HEADS {
            let kv = h / (HEADS / KV_HEADS);
            let mut q = core::mem::take(&mut s.query);
            match (a.rotary, model.rope) {
                (Some(style), Some((cos, sin))) => turn(part(s, Q_AT, r, h), cos, sin, past + r, style, &mut q),
                _ => q.copy_from_slice(part(s, Q_AT, r, h)),
            }
            scale(&mut q, a.q_factor);
            let head_keys = &cache.keys[Cache::at(layer, kv, 0)..];
            let scores = &mut s.scores[..keys];
            // each head its own GEMM of `rows` rows, unless a broadcast kv head folds them all into one
            let one_row = |broadcast: bool| rows == 1 && !broadcast;
            match a.scale {
                // FusedMatMul of one row at alpha 1: MLAS's transposed-B one-row kernel
                Some(alpha) if one_row(a.keys_broadcast) && alpha == 1.0 => m1_transpose_b(&q, head_keys, HEAD_DIM, computed, &mut scores[..computed]),
                // FusedMatMul over every key the graph multiplies
                Some(alpha) => sgemm_outputs(&q, head_keys, HEAD_DIM, computed, stride_k(keys, HEAD_DIM, false), alpha, None, &mut scores[..computed]),
                // a MatMul of two activations: MLAS's M = 1 kernel for one token, else SGEMM
                None if one_row(a.keys_broadcast) => {
                    for (j, score) in scores[..computed].iter_mut().enumerate() {
                        *score = m1_dot(HEAD_DIM, |i| q[i], |i| head_keys[j * HEAD_DIM + i]);
                    }
                }
                None => sgemm_outputs(&q, head_keys, HEAD_DIM, computed, stride_k(keys, HEAD_DIM, false), 1.0, None, &mut scores[..computed]),
            }
            s.query = q;
            if a.mask_adds {
                for (j, score) in scores.iter_mut().enumerate() {
                    *score += if j < visible { 0.0 } else { a.fill };
                }
            } else {
                scores[visible..].fill(a.fill);
            }
            softmax(scores, ORT_FLOATS);
            let out = &mut s.context[(r * HEADS + h) * HEAD_DIM..][..HEAD_DIM];
            let head_values = &cache.values[Cache::at(layer, kv, 0)..];
            // MatMul of two activations: MLAS's M = 1 kernel when one token is fed
            if one_row(a.values_broadcast) {
                m1_columns(scores, head_values, HEAD_DIM, HEAD_DIM, out);
            } else {
                sgemm_columns(scores, head_values, HEAD_DIM, HEAD_DIM, stride_k(HEAD_DIM, keys, false), 1.0, out);
            }
        }
    }
    a.o.apply(&s.context, rows, &mut s.block, &mut s.linear);
}

/// Values times or over the graph's scalar factor, one rounding each (onnxruntime's Mul / Div).
fn scale(x: &mut [f32], factor: Option<Factor>) {
    match factor {
        Some(Factor::Mul(f)) => x.iter_mut().for_each(|v| *v *= f),
        Some(Factor::Div(f)) => x.iter_mut().for_each(|v| *v /= f),
        None => {}
    }
}

/// One head of q or k at `position`: its first ROTARY_DIMS values rotated, the rest copied.
fn turn(x: &[f32], cos: &[f32], sin: &[f32], position: usize, style: Rotate, out: &mut [f32]) {
    let table = position * ROTARY_DIMS..(position + 1) * ROTARY_DIMS;
    rotary(&x[..ROTARY_DIMS], &cos[table.clone()], &sin[table], style, &mut out[..ROTARY_DIMS]);
    out[ROTARY_DIMS..].copy_from_slice(&x[ROTARY_DIMS..]);
}

/// The MLP of `rows` tokens into s.block (without the down projection's bias when the final
/// SkipLayerNormalization adds it).
fn mlp(m: &Mlp, rows: usize, s: &mut Scratch, with_bias: bool) {
    norm(&m.norm, &s.x, rows, &mut s.normed, &mut s.squares);
    let n = rows * FFN;
    m.gate.as_ref().unwrap_or(&m.up).apply(&s.normed, rows, &mut s.hidden, &mut s.linear);
    activate_in_place(m.activation, &mut s.hidden[..n]);
    if m.gate.is_some() {
        m.up.apply(&s.normed, rows, &mut s.up, &mut s.linear);
        for (h, &u) in s.hidden[..n].iter_mut().zip(&s.up[..n]) {
            *h *= u;
        }
    }
    if with_bias {
        m.down.apply(&s.hidden, rows, &mut s.block, &mut s.linear);
    } else {
        m.down.apply_without_bias(&s.hidden, rows, &mut s.block, &mut s.linear);
    }
}

/// The final norm of the `rows` rows wanted into `out`; the last MLP's output (`block`) is
/// added to the stream here, where onnxruntime fuses that residual sum into
/// SkipLayerNormalization(x, y [, bias]): (x + y) + bias, then normalised.
fn final_norm(model: &Model, x: &mut [f32], block: &[f32], rows: usize, out: &mut [f32], squares: &mut [f32]) {
    let n = &model.final_norm;
    let bias = if n.skip_bias { model.layers[LAYERS - 1].mlp.down.bias } else { None };
    for r in 0..rows {
        let span = r * HIDDEN..(r + 1) * HIDDEN;
        for (i, (v, &y)) in x[span.clone()].iter_mut().zip(&block[span.clone()]).enumerate() {
            *v = bias.map_or(*v + y, |b| (*v + y) + b[i]);
        }
        if n.kind == NormKind::LayerNormSkip {
            skip_layer_norm_row(&x[span.clone()], n.gamma.unwrap(), n.beta.unwrap(), n.eps, &mut out[span]);
        }
    }
    if n.kind != NormKind::LayerNormSkip {
        norm(n, x, rows, out, squares);
    }
}

/// Feeds `ids` at positions cache.len.. and returns the logits of the last `wanted` of them
/// ([wanted, VOCAB]); the cache then holds them too.
pub fn step(model: &Model, cache: &mut Cache, ids: &[u32], wanted: usize, s: &mut Scratch) -> Vec<f32> {
    let rows = ids.len();
    assert!(rows >= 1 && wanted >= 1 && wanted <= rows && cache.len + rows <= N_CTX);
    for (r, &id) in ids.iter().enumerate() {
        let token = model.wte.row(id as usize, s.linear.row_buffer());
        let x = &mut s.x[r * HIDDEN..(r + 1) * HIDDEN];
        match model.wpe {
            Some(wpe) => {
                let position = &wpe[(cache.len + r) * HIDDEN..][..HIDDEN];
                for ((x, &t), &p) in x.iter_mut().zip(token).zip(position) {
                    *x = t + p;
                }
            }
            None => x.copy_from_slice(token),
        }
    }
    let n = rows * HIDDEN;
    for (index, layer) in model.layers.iter().enumerate() {
        attention(model, index, cache, rows, s);
        let last = index + 1 == LAYERS;
        if layer.parallel {
            // both branches read the layer's input; their sum is what closes the layer
            s.attended[..n].copy_from_slice(&s.block[..n]);
            mlp(&layer.mlp, rows, s, true);
            for (b, &a) in s.block[..n].iter_mut().zip(&s.attended[..n]) {
                *b = a + *b;
            }
        } else {
            add_in_place(&mut s.x[..n], &s.block[..n]);
            mlp(&layer.mlp, rows, s, !(last && model.final_norm.skip_bias));
        }
        if !last {
            add_in_place(&mut s.x[..rows * HIDDEN], &s.block[..rows * HIDDEN]);
        }
    }
    cache.len += rows;
    let first = rows - wanted;
    final_norm(model, &mut s.x[first * HIDDEN..rows * HIDDEN], &s.block[first * HIDDEN..rows * HIDDEN], wanted, &mut s.normed, &mut s.squares);
    let mut logits = vec![0.0; wanted * VOCAB];
    model.head.apply(&s.normed, wanted, &mut logits, &mut s.linear);
    logits
}

/// The first index of the largest logit, as numpy's argmax: a NaN counts as the largest, so the
/// first NaN wins if there is one.
fn argmax_scalar(logits: &[f32]) -> u32 {
    if let Some(nan) = logits.iter().position(|v| v.is_nan()) {
        return nan as u32;
    }
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// The same, four lanes at a time (a whole vocabulary per generated token). Each lane keeps its
/// largest value and the first index it was seen at (a strictly greater value replaces it), so
/// the lowest index among the lanes holding the maximum is the first one overall.
pub fn argmax(logits: &[f32]) -> u32 {
    let full = logits.len() / 4 * 4;
    if full == 0 {
        return argmax_scalar(logits);
    }
    // SAFETY: every load reads four floats at i < full <= logits.len().
    let (best, at, nan) = unsafe {
        let mut best = v128_load(logits.as_ptr() as *const v128);
        let mut nan = f32x4_ne(best, best);
        let mut at = i32x4(0, 1, 2, 3);
        let mut index = at;
        let mut i = 4;
        while i < full {
            let v = v128_load(logits.as_ptr().add(i) as *const v128);
            index = i32x4_add(index, i32x4_splat(4));
            let greater = f32x4_gt(v, best);
            best = v128_bitselect(v, best, greater);
            at = v128_bitselect(index, at, greater);
            nan = v128_or(nan, f32x4_ne(v, v));
            i += 4;
        }
        (best, at, nan)
    };
    if v128_any_true(nan) {
        return argmax_scalar(logits);
    }
    let lanes = [(f32x4_extract_lane::<0>(best), i32x4_extract_lane::<0>(at)), (f32x4_extract_lane::<1>(best), i32x4_extract_lane::<1>(at)),
                 (f32x4_extract_lane::<2>(best), i32x4_extract_lane::<2>(at)), (f32x4_extract_lane::<3>(best), i32x4_extract_lane::<3>(at))];
    let (mut value, mut first) = lanes[0];
    for &(v, i) in &lanes[1..] {
        if v > value || (v == value && i < first) {
            (value, first) = (v, i);
        }
    }
    let mut first = first as usize;
    for (i, &v) in logits.iter().enumerate().skip(full) {
        if v.is_nan() {
            return i as u32;
        }
        if v > value {
            (value, first) = (v, i);
        }
    }
    first as u32
}
