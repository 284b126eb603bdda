//! The forward pass: the model's steps (model.rs) run in order over their buffers.
//!
//! Which rows are computed: the whole window, or (`Extent::Live`, where PADDING_IS_INERT) each
//! step's `Rows`: the live tokens, every key up to the last kept token, or the whole window.
//! That is exact, not an approximation: every step but attention and the few that mix rows works
//! row by row (the hybrid FC quantises each row on its own), and attention adds the mask value to
//! the dropped keys' scores, so their probabilities underflow to exactly 0 and only ever add 0 to
//! the softmax sum and to the context. Attention still runs over a multiple of KEY_BLOCK keys, so
//! that dropping whole blocks of such zeros leaves the order of every other addition as it was;
//! the few padding keys that rounding adds get zero K and V rows (any finite values would do:
//! their scores are masked too) instead of being computed. `porter verify` checks the claim on
//! every window it runs.

use crate::kernels::litert::attention::{attention, AttentionScratch, ScoreTerms};
use crate::kernels::common::dequantize::widen_halves;
use crate::kernels::common::generic;
use crate::kernels::common::tensor;
use crate::kernels::litert::activation::gelu_tanh_in_place;
use crate::kernels::litert::mathfn::gelu_in_place;
use crate::kernels::litert::norm::{layer_norm, NormScratch};
use crate::kernels::ort::float::{fast_gelu_in_place, gelu_erf_mul_in_place};
use crate::kernels::litert::reduce::{l2_normalization, reduce_litert};
use crate::linear::LinearScratch;
use crate::model::*;
use crate::profile::{Phase, Profile};
use crate::program::*;

/// Which rows of the window the steps compute.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Each step's rows where padding is inert, else all.
    Live,
    /// Every row, as the reference runtime does.
    WholeWindow,
}

/// Softmax sums its keys in Eigen's order: 4-lane packets alternating between two accumulators.
/// Cutting the keys at a multiple of two packets removes only whole packets of zeros from each
/// accumulator, so every remaining addition happens in the same order as over the full window.
const KEY_BLOCK: usize = 8;

/// The row counts of one window: the live tokens (the output's rows), and the rows the steps
/// compute: `live` and `used` (up to the last kept token) for Rows::Live and Rows::Keys, and
/// `keys`, that rounded up to KEY_BLOCK, the keys attention runs over. For the whole window all
/// three are SEQ.
#[derive(Clone, Copy)]
pub struct Counts {
    pub output: usize,
    pub live: usize,
    pub used: usize,
    pub keys: usize,
}

impl Counts {
    pub fn of(&self, rows: Rows) -> usize {
        match rows {
            Rows::One => 1,
            Rows::Live => self.live,
            Rows::Keys => self.used,
            Rows::All => SEQ,
        }
    }
}

/// The keys attention keeps: those whose mask is nonzero, or (KEYS_BY_LEADING_COUNT) the first
/// count(mask == 1), as onnxruntime's Attention reads a 1-D mask_index.
fn kept_keys(mask: &[i32]) -> Vec<bool> {
    if KEYS_BY_LEADING_COUNT {
        let count = mask.iter().filter(|&&m| m == 1).count();
        (0..mask.len()).map(|j| j < count).collect()
    } else {
        mask.iter().map(|&m| m != 0).collect()
    }
}

pub fn rows_to_compute(mask: &[i32], live: usize, extent: Extent) -> Counts {
    if extent == Extent::WholeWindow || !PADDING_IS_INERT {
        return Counts { output: live, live: SEQ, used: SEQ, keys: SEQ };
    }
    let last_kept = mask.iter().rposition(|&m| m != 0).map_or(0, |i| i + 1);
    let used = live.max(last_kept).max(1);
    let keys = (used.div_ceil(KEY_BLOCK) * KEY_BLOCK).min(SEQ);
    Counts { output: live, live, used, keys }
}

/// Every buffer of one forward pass, each sized for the rows this window computes (a short input
/// allocates and zeroes only its share of the window), and the kernels' work space.
struct State {
    buffers: Vec<Vec<f32>>,
    norm: NormScratch,
    linear: LinearScratch,
    attention: AttentionScratch,
    /// The slot (and whether asymmetric) whose rows `linear.quantized` holds: Q, K and V quantise
    /// their shared input once. Forgotten when a step writes that slot again.
    quantized_from: Option<(usize, bool)>,
}

impl State {
    fn new(counts: &Counts) -> Self {
        let buffers = SLOTS.iter().map(|b| vec![0.0f32; (counts.keys * b.row).max(SEQ * b.row_all).max(b.len)]).collect();
        // a step over Rows::All works on the whole window even where padding is inert
        let rows = if SLOTS.iter().any(|b| b.row_all > 0) { SEQ } else { counts.keys };
        State {
            buffers,
            norm: NormScratch::new(WIDEST),
            linear: LinearScratch::new(rows, WIDEST),
            attention: AttentionScratch::new(rows, counts.keys, MAX_HEAD_DIM),
            quantized_from: None,
        }
    }

    /// The output slot, taken out so that inputs can be borrowed beside it (a step never writes
    /// a slot it reads).
    fn take(&mut self, out: usize) -> Vec<f32> {
        if self.quantized_from.is_some_and(|(slot, _)| slot == out) {
            self.quantized_from = None;
        }
        std::mem::take(&mut self.buffers[out])
    }
}

/// Every token in segment A: the token types of a caller that has none.
static SEGMENT_A: [u32; SEQ] = [0; SEQ];

/// The output rows of one window ([live, WIDTH] for a token output, [1, WIDTH] pooled) and the
/// number of rows computed, every token in segment A (token type 0). ids and mask hold SEQ entries.
pub fn forward(model: &Model, ids: &[u32], mask: &[i32], live: usize, extent: Extent, profile: &mut Profile)
    -> (Vec<f32>, usize) {
    forward_with_types(model, ids, &SEGMENT_A, mask, live, extent, profile)
}

/// `forward` with each token's type id (segment A 0, segment B 1, ..., below TYPE_VOCAB; a
/// model without a token-type input has TYPE_VOCAB 1). ids, types and mask hold SEQ entries.
pub fn forward_with_types(model: &Model, ids: &[u32], types: &[u32], mask: &[i32], live: usize, extent: Extent,
                          profile: &mut Profile) -> (Vec<f32>, usize) {
    assert!(ids.len() == SEQ && types.len() == SEQ && mask.len() == SEQ && live <= SEQ);
    assert!(types.iter().all(|&t| (t as usize) < TYPE_VOCAB), "token type outside [0, TYPE_VOCAB)");
    if INTEGER {
        return crate::integer::forward(model, ids, types, mask, live, profile);
    }
    let counts = rows_to_compute(mask, live, extent);
    let mut s = State::new(&counts);
    let keep = kept_keys(mask);
    s.buffers[MASK_BUFFER] = mask.iter().map(|&m| m as f32).collect();
    for step in &model.steps {
        let phase = run_step(step, ids, types, &keep, &counts, &mut s);
        profile.lap(phase);
    }
    let rows = if OUTPUT_TOKENS { counts.output } else { 1 };
    let mut out = std::mem::take(&mut s.buffers[OUTPUT_BUFFER]);
    out.truncate(rows * WIDTH);
    (out, counts.used)
}

fn run_step(step: &Step, ids: &[u32], types: &[u32], keep: &[bool], counts: &Counts, s: &mut State) -> Phase {
    match step {
        Step::Embed { out, rows, word, terms } => {
            let mut y = s.take(*out);
            let n = counts.of(*rows);
            embed(word, terms, &ids[..n], &types[..n], &mut y);
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::Linear { x, out, x_rows, rows, tensor_rows, linear } => {
            let mut y = s.take(*out);
            let (xs, n) = (&s.buffers[*x], counts.of(*rows));
            match linear.asymmetric_inputs() {
                Some(asymmetric) => {
                    if s.quantized_from != Some((*x, asymmetric)) {
                        s.linear.quantized.quantize(xs, counts.of(*x_rows), linear.in_features(), asymmetric);
                        s.quantized_from = Some((*x, asymmetric));
                    }
                    linear.apply_quantized(&s.linear.quantized, n, &mut y);
                }
                None => linear.apply(xs, n, *tensor_rows, &mut y, &mut s.linear),
            }
            s.buffers[*out] = y;
            Phase::Matmul
        }
        Step::LayerNorm { x, out, normalised, rows, params } => {
            let mut y = s.take(*out);
            let mut pre = normalised.map(|n| s.take(n));
            layer_norm(params, &s.buffers[*x], counts.of(*rows), pre.as_deref_mut(), &mut y, &mut s.norm);
            s.buffers[*out] = y;
            if let (Some(n), Some(pre)) = (normalised, pre) {
                s.buffers[*n] = pre;
            }
            Phase::Other
        }
        Step::Attention { q, k, v, out, rows, params, terms, query_mask } => {
            // keys past the last kept one, up to KEY_BLOCK: zero K and V rows (the slots may hold
            // an earlier buffer's values there), and zero terms for them (steps computed the rest)
            let hidden = params.heads * params.head_dim;
            for slot in [*k, *v] {
                s.buffers[slot][counts.used * hidden..counts.keys * hidden].fill(0.0);
            }
            let n = counts.of(*rows);
            for term in terms {
                if let Source::Buffer(slot) = term {
                    zero_unread_keys(&mut s.buffers[*slot], params.heads, n, counts);
                }
            }
            let mut y = s.take(*out);
            let arrays: Vec<&[f32]> = terms.iter().map(|t| match t {
                Source::Buffer(slot) => &s.buffers[*slot][..],
                Source::Const(values) => *values,
            }).collect();
            let kept = params.masked.then_some(&keep[..counts.keys]);
            let (q, k, v) = (&s.buffers[*q], &s.buffers[*k], &s.buffers[*v]);
            attention(params, q, k, v, kept, ScoreTerms { arrays: &arrays, window: SEQ }, n, counts.keys, &mut y,
                      &mut s.attention);
            if *query_mask && params.masked {
                // a query the mask drops has every key dropped: its rows again, with no key kept
                let none = vec![false; counts.keys];
                for (i0, i1) in dropped_runs(&keep[..n]) {
                    let shifted: Vec<&[f32]> = arrays.iter().map(|t| &t[i0 * SEQ..]).collect();
                    attention(params, &q[i0 * hidden..], k, v, Some(&none), ScoreTerms { arrays: &shifted, window: SEQ },
                              i1 - i0, counts.keys, &mut y[i0 * hidden..], &mut s.attention);
                }
            }
            s.buffers[*out] = y;
            Phase::Attention
        }
        Step::Gelu { x, out, rows, row, len, kind } => {
            let n = if *row == 0 { *len } else { counts.of(*rows) * row };
            let mut y = s.take(*out);
            if x != out {
                y[..n].copy_from_slice(&s.buffers[*x][..n]);
            }
            match kind {
                Gelu::Litert => gelu_in_place(&mut y[..n]),
                Gelu::OrtErfMul => gelu_erf_mul_in_place(&mut y[..n]),
                Gelu::LitertTanh => gelu_tanh_in_place(&mut y[..n]),
                Gelu::OrtFastGelu => fast_gelu_in_place(&mut y[..n]),
            }
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::Elementwise { op, a, b, out, rows, shape, token_axis } => {
            let mut y = s.take(*out);
            let tensor_len = shape.iter().product();
            let shape = generic::limited(*shape, *token_axis, counts.of(*rows));
            let b = b.as_ref().map(|b| (values(&s.buffers, b), b.strides));
            if matches!(a.source, Source::Buffer(slot) if slot == *out) {
                generic::elementwise_in_place(*op, &mut y, b, shape, tensor_len); // a's slot is the output's
            } else {
                generic::elementwise(*op, values(&s.buffers, a), a.strides, b, shape, tensor_len, &mut y);
            }
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::Reduce { op, x, out, rows, shape, axes, order, token_axis } => {
            let mut y = s.take(*out);
            let in_shape = generic::limited(*shape, *token_axis, counts.of(*rows));
            let mut out_shape = in_shape;
            for a in 0..4 {
                if axes[a] {
                    out_shape[a] = 1;
                }
            }
            let x = values(&s.buffers, x);
            match order {
                // LiteRT's order follows the whole tensor's shape (its normalised axes, each
                // row's alignment), whichever rows are computed
                ReduceOrder::Litert => reduce_litert(*op, x, *shape, *axes, out_shape, &mut y),
                _ => generic::reduce(*op, x, in_shape, *axes, *order == ReduceOrder::EigenRows, out_shape, &mut y),
            }
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::L2Normalize { x, out, rows, cols, width } => {
            let mut y = s.take(*out);
            let n = counts.of(*rows) * cols;
            l2_normalization(&s.buffers[*x][..n], *width, &mut y[..n]);
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::Slice { x, out, shape, ranges } => {
            let mut y = s.take(*out);
            generic::slice(values(&s.buffers, x), *shape, *ranges, &mut y);
            s.buffers[*out] = y;
            Phase::Other
        }
        Step::Integer(_) => unreachable!("integer steps run in integer.rs"),
        Step::Tensor { step, limits } => {
            let mut y = s.take(step.out);
            let n: [usize; 4] = core::array::from_fn(|a| if limits[a] == Rows::All { step.shape[a] } else { counts.of(limits[a]).min(step.shape[a]) });
            tensor::run(step, n, &s.buffers, &s.buffers[MASK_BUFFER], &mut y);
            s.buffers[step.out] = y;
            if matches!(step.kernel, TensorKernel::MatMul { .. }) { Phase::Matmul } else { Phase::Other }
        }
    }
}

/// A computed score term's values for the keys past the last kept one that attention still
/// reads (up to KEY_BLOCK), in the rows it computes: zero (any finite value would do: those keys
/// are masked), since the steps that compute the term stopped at the last kept key.
fn zero_unread_keys(term: &mut [f32], heads: usize, rows: usize, counts: &Counts) {
    for h in 0..heads {
        for i in 0..rows {
            let row = (h * SEQ + i) * SEQ;
            term[row + counts.used..row + counts.keys].fill(0.0);
        }
    }
}

/// The runs [start, end) of queries the mask drops.
fn dropped_runs(keep: &[bool]) -> Vec<(usize, usize)> {
    let mut runs = Vec::new();
    let mut i = 0;
    while i < keep.len() {
        if keep[i] {
            i += 1;
            continue;
        }
        let start = i;
        while i < keep.len() && !keep[i] {
            i += 1;
        }
        runs.push((start, i));
    }
    runs
}

fn values<'b>(buffers: &'b [Vec<f32>], operand: &'b Operand) -> &'b [f32] {
    match operand.source {
        Source::Buffer(i) => &buffers[i],
        Source::Const(c) => c,
    }
}

/// x[t] = the word row of ids[t] (dequantised), then each term added in graph order.
fn embed(word: &Lookup, terms: &[Term], ids: &[u32], types: &[u32], x: &mut [f32]) {
    let width = word.width;
    let mut seen = 0u32; // real tokens so far, for RoBERTa's position ids
    for (t, &id) in ids.iter().enumerate() {
        let row = &mut x[t * width..(t + 1) * width];
        lookup_row(word, id as usize, row);
        for term in terms {
            match term {
                Term::Rows { values, row_stride } => {
                    for (out, &v) in row.iter_mut().zip(&values[t * row_stride..t * row_stride + width]) {
                        *out += v;
                    }
                }
                Term::Positions { lookup, pad_id } => {
                    if id != *pad_id {
                        seen += 1;
                    }
                    let position = if id == *pad_id { *pad_id } else { pad_id + seen };
                    add_lookup_row(lookup, position as usize, row);
                }
                Term::Types { lookup } => add_lookup_row(lookup, types[t] as usize, row),
            }
        }
    }
}

fn lookup_row(l: &Lookup, id: usize, out: &mut [f32]) {
    let w = l.width;
    match l.kind {
        TableKind::Float32 => out.copy_from_slice(&l.table_f32[id * w..(id + 1) * w]),
        TableKind::Float16 => widen_halves(&l.table_f16[id * w..(id + 1) * w], out),
        TableKind::Uint8Tensor => {
            for (o, &q) in out.iter_mut().zip(&l.table_u8[id * w..(id + 1) * w]) {
                *o = (q as i32 - l.zero_point) as f32 * l.scale[0];
            }
        }
        TableKind::Int8Rows | TableKind::Int8Tensor => {
            let scale = if l.kind == TableKind::Int8Rows { l.scale[id] } else { l.scale[0] };
            for (o, &q) in out.iter_mut().zip(&l.table_i8[id * w..(id + 1) * w]) {
                *o = q as f32 * scale;
            }
        }
    }
}

fn add_lookup_row(l: &Lookup, id: usize, out: &mut [f32]) {
    let mut row = vec![0.0f32; l.width];
    lookup_row(l, id, &mut row);
    for (o, v) in out.iter_mut().zip(row) {
        *o += v;
    }
}
