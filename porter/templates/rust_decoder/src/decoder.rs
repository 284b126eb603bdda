//! One decoder step with the KV cache in linear memory, in onnxruntime's float arithmetic on
//! the CPU model.rs names (the same operations as porter/reference/execute_decoder.py).
//!
//! The cache holds every layer's keys and values for the whole context, [LAYERS][HEADS][N_CTX]
//! [HEAD_DIM] each, allocated once; a step writes only its new positions and reads the ones
//! before, so a token costs its own work plus attention over the tokens so far.

use core::arch::wasm32::*;

use crate::kernels::ort_float::{gelu_erf_in_place, layer_norm_row, m1_columns, sgemm_columns, sgemm_outputs, skip_layer_norm_row, softmax, stride_k};
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
        let size = LAYERS * HEADS * N_CTX * HEAD_DIM;
        Cache { keys: vec![0.0; size], values: vec![0.0; size], len: 0 }
    }

    fn at(layer: usize, head: usize, pos: usize) -> usize {
        ((layer * HEADS + head) * N_CTX + pos) * HEAD_DIM
    }
}

/// Work buffers for up to `rows` new tokens, allocated once.
pub struct Scratch {
    x: Vec<f32>,
    normed: Vec<f32>,
    qkv: Vec<f32>,
    context: Vec<f32>,
    block: Vec<f32>,
    hidden: Vec<f32>,
    scores: Vec<f32>,
    linear: LinearScratch,
}

impl Scratch {
    pub fn new(rows: usize) -> Self {
        Scratch {
            x: vec![0.0; rows * HIDDEN],
            normed: vec![0.0; rows * HIDDEN],
            qkv: vec![0.0; rows * 3 * HIDDEN],
            context: vec![0.0; rows * HIDDEN],
            block: vec![0.0; rows * HIDDEN],
            hidden: vec![0.0; rows * FFN],
            scores: vec![0.0; N_CTX],
            linear: LinearScratch::new(rows, HIDDEN.max(FFN)),
        }
    }
}

fn layer_norm(ln: &LayerNorm, x: &[f32], rows: usize, out: &mut [f32]) {
    for r in 0..rows {
        let span = r * HIDDEN..(r + 1) * HIDDEN;
        layer_norm_row(&x[span.clone()], ln.gamma, ln.beta, ln.eps, &mut out[span]);
    }
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Attention of `rows` new tokens at positions past.. over every cached key up to theirs.
fn attention(layer: usize, cache: &mut Cache, rows: usize, s: &mut Scratch) {
    let past = cache.len;
    let keys = past + rows;
    for r in 0..rows {
        for h in 0..HEADS {
            let slot = Cache::at(layer, h, past + r);
            let k = &s.qkv[r * 3 * HIDDEN + HIDDEN + h * HEAD_DIM..][..HEAD_DIM];
            cache.keys[slot..slot + HEAD_DIM].copy_from_slice(k);
            let v = &s.qkv[r * 3 * HIDDEN + 2 * HIDDEN + h * HEAD_DIM..][..HEAD_DIM];
            cache.values[slot..slot + HEAD_DIM].copy_from_slice(v);
        }
    }
    for r in 0..rows {
        for h in 0..HEADS {
            let q = &s.qkv[r * 3 * HIDDEN + h * HEAD_DIM..][..HEAD_DIM];
            let scores = &mut s.scores[..keys];
            // FusedMatMul over every key the graph multiplies; the causal mask then hides the
            // later ones, so only the visible keys are computed.
            let visible = past + r + 1;
            let head_keys = &cache.keys[Cache::at(layer, h, 0)..];
            sgemm_outputs(q, head_keys, HEAD_DIM, visible, stride_k(keys, HEAD_DIM, false), SCALE, None, &mut scores[..visible]);
            scores[visible..].fill(f32::NEG_INFINITY);
            softmax(scores, ORT_FLOATS);
            let out = &mut s.context[r * HIDDEN + h * HEAD_DIM..][..HEAD_DIM];
            let head_values = &cache.values[Cache::at(layer, h, 0)..];
            // MatMul of two activations: MLAS's M = 1 kernel when one token is fed
            if rows == 1 {
                m1_columns(scores, head_values, HEAD_DIM, HEAD_DIM, out);
            } else {
                sgemm_columns(scores, head_values, HEAD_DIM, HEAD_DIM, stride_k(HEAD_DIM, keys, false), 1.0, out);
            }
        }
    }
}

/// The last residual sum is read by the final LayerNorm alone, so onnxruntime fuses the two
/// into SkipLayerNormalization(x, h . W, bias): (x + h . W) + bias, then normalised. `x` holds
/// the residual stream and `h` the last layer's GELU output for the `rows` rows wanted.
fn final_layer_norm(model: &Model, x: &mut [f32], h: &[f32], rows: usize, product: &mut [f32], out: &mut [f32], linear: &mut LinearScratch) {
    let fc_out = &model.layers[LAYERS - 1].fc_out;
    fc_out.apply_without_bias(h, rows, product, linear);
    let bias = fc_out.bias.expect("the last Linear of a block has a bias");
    for r in 0..rows {
        let span = r * HIDDEN..(r + 1) * HIDDEN;
        for ((v, &p), &b) in x[span.clone()].iter_mut().zip(&product[span.clone()]).zip(bias) {
            *v = (*v + p) + b;
        }
        let ln = &model.final_ln;
        skip_layer_norm_row(&x[span.clone()], ln.gamma, ln.beta, ln.eps, &mut out[span]);
    }
}

/// Feeds `ids` at positions cache.len.. and returns the logits of the last `wanted` of them
/// ([wanted, VOCAB]); the cache then holds them too.
pub fn step(model: &Model, cache: &mut Cache, ids: &[u32], wanted: usize, s: &mut Scratch) -> Vec<f32> {
    let rows = ids.len();
    assert!(rows >= 1 && wanted >= 1 && wanted <= rows && cache.len + rows <= N_CTX);
    for (r, &id) in ids.iter().enumerate() {
        let token = model.head.row(id as usize, s.linear.row_buffer());
        let position = &model.wpe[(cache.len + r) * HIDDEN..][..HIDDEN];
        for ((x, &t), &p) in s.x[r * HIDDEN..(r + 1) * HIDDEN].iter_mut().zip(token).zip(position) {
            *x = t + p;
        }
    }
    for (index, layer) in model.layers.iter().enumerate() {
        layer_norm(&layer.ln1, &s.x, rows, &mut s.normed);
        layer.qkv.apply(&s.normed, rows, &mut s.qkv, &mut s.linear);
        attention(index, cache, rows, s);
        layer.o.apply(&s.context, rows, &mut s.block, &mut s.linear);
        add_in_place(&mut s.x[..rows * HIDDEN], &s.block[..rows * HIDDEN]);
        layer_norm(&layer.ln2, &s.x, rows, &mut s.normed);
        layer.fc.apply(&s.normed, rows, &mut s.hidden, &mut s.linear);
        gelu_erf_in_place(&mut s.hidden[..rows * FFN]);
        if index + 1 < LAYERS {
            layer.fc_out.apply(&s.hidden, rows, &mut s.block, &mut s.linear);
            add_in_place(&mut s.x[..rows * HIDDEN], &s.block[..rows * HIDDEN]);
        }
    }
    cache.len += rows;
    let first = rows - wanted;
    final_layer_norm(model, &mut s.x[first * HIDDEN..rows * HIDDEN], &s.hidden[first * FFN..rows * FFN], wanted, &mut s.block, &mut s.normed, &mut s.linear);
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
