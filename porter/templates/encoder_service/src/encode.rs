//! Texts -> windows -> the model's output rows, one window per input.
//!
//! A window is PREFIX_IDS + the text's tokens + SUFFIX_IDS, padded with PAD_ID, the mask 1 on the
//! live tokens: the rule the model's goldens were made with (porter/check/windows.py). A text
//! whose tokens do not fit is cut to fit when the request says `truncate` (from the end, or from
//! the start with truncation_direction "Left"), and otherwise refused with TEI's 413. A pair of
//! texts (a cross-encoder's query and passage, TEI's [[a, b]]) is the tokenizer's pair template
//! with its token types, cut by tokenizers' longest_first truncation when asked.

use std::time::{Duration, Instant};

use encoder::forward;
use encoder::model::Model;
use encoder::profile::Profile;

use crate::config::{MAX_BATCH, PAD_ID, PAIRS, PREFIX_IDS, REQUEST_BUDGET_MS, SUFFIX_IDS, UNK_ID, VOCAB, WINDOW};
use crate::error::ApiError;
use crate::{budget, timing::ServerTiming};

/// Text tokens that fit one window beside the special tokens.
pub const ROOM: usize = WINDOW - PREFIX_IDS.len() - SUFFIX_IDS.len();

#[derive(Clone, Copy)]
pub struct Truncation {
    pub enabled: bool,
    pub from_left: bool,
}

/// One input: a text, or a pair of texts.
pub enum Sequence {
    Single(String),
    Pair(String, String),
}

/// A text's tokens as the model sees them: ids (after the vocabulary fallback), token types and
/// code-point ranges, special tokens included (their ranges are empty).
pub struct Tokens {
    pub ids: Vec<u32>,
    pub types: Vec<u32>,
    pub offsets: Vec<(u32, u32)>,
    /// Which of them are the post-processor's special tokens.
    pub special: Vec<bool>,
    /// The code points of each token's vocabulary entry (tokenizer::Encoding::token_chars).
    pub token_chars: Vec<u32>,
}

pub fn validation(status: u16, message: String) -> ApiError {
    let mut error = ApiError::new(status, message);
    error.error_type = Some("Validation");
    error
}

/// Every text tokenized and fitted to the window; 413 for a batch over MAX_BATCH or a text too
/// long without `truncate`, 422 for an empty batch.
pub fn tokenize_all(texts: &[Sequence], truncation: Truncation, timing: &mut ServerTiming) -> Result<Vec<Tokens>, ApiError> {
    if texts.is_empty() {
        return Err(validation(422, "`inputs` cannot be empty".into()));
    }
    if texts.len() > MAX_BATCH {
        return Err(validation(413, format!("batch size {} > maximum allowed batch size {MAX_BATCH}", texts.len())));
    }
    let started = Instant::now();
    let tokenizer = tokenizer::embedded().map_err(|e| ApiError::new(500, e.to_string()))?;
    timing.record("tokenizer", started, None);
    let started = Instant::now();
    let all = texts
        .iter()
        .map(|sequence| match sequence {
            Sequence::Single(text) => fit(tokenize(&tokenizer, text)?, truncation),
            Sequence::Pair(a, b) => tokenize_pair(&tokenizer, a, b, truncation),
        })
        .collect::<Result<Vec<_>, _>>()?;
    timing.record("encode", started, Some(format!("{} tokens", all.iter().map(|t| t.ids.len()).sum::<usize>())));
    Ok(all)
}

/// The tokenizer's encoding, its special tokens checked against the ones the service was built
/// with, ids past the model's vocabulary replaced by UNK_ID.
pub fn tokenize(tokenizer: &tokenizer::Tokenizer<'_>, text: &str) -> Result<Tokens, ApiError> {
    let encoding = tokenizer.encode(text);
    let ids = &encoding.ids;
    if ids.len() < PREFIX_IDS.len() + SUFFIX_IDS.len() || !ids.starts_with(PREFIX_IDS) || !ids.ends_with(SUFFIX_IDS) {
        return Err(ApiError::new(500, "the tokenizer's special tokens differ from the ones this service was built with"));
    }
    Ok(tokens_of(encoding))
}

fn tokens_of(encoding: tokenizer::Encoding) -> Tokens {
    let ids = encoding.ids.iter().map(|&id| if id < VOCAB { id } else { UNK_ID }).collect();
    Tokens { ids, types: encoding.type_ids, offsets: encoding.char_offsets, special: encoding.special, token_chars: encoding.token_chars }
}

/// A pair through the tokenizer's pair template (config::PAIRS: the build found one whose token
/// types the model reads), cut to the window by longest_first when `truncate` asks.
fn tokenize_pair(tokenizer: &tokenizer::Tokenizer<'_>, a: &str, b: &str, truncation: Truncation) -> Result<Tokens, ApiError> {
    if !PAIRS {
        return Err(validation(422, "this model reads no text pairs: its tokenizer has no pair template, or the template's token types are more than the model's".into()));
    }
    let cut = truncation.enabled.then_some(tokenizer::PairTruncation { max_length: WINDOW, from_left: truncation.from_left });
    let encoding = tokenizer.encode_pair(a, b, cut).map_err(|e| ApiError::new(500, e.to_string()))?;
    if encoding.ids.len() > WINDOW {
        return Err(too_long(encoding.ids.len()));
    }
    Ok(tokens_of(encoding))
}

fn too_long(tokens: usize) -> ApiError {
    validation(413, format!("Input validation error: `inputs` must have less than {WINDOW} tokens. Given: {tokens}"))
}

fn fit(mut tokens: Tokens, truncation: Truncation) -> Result<Tokens, ApiError> {
    let excess = tokens.ids.len().saturating_sub(WINDOW);
    if excess == 0 {
        return Ok(tokens);
    }
    if !truncation.enabled {
        return Err(too_long(tokens.ids.len()));
    }
    let text_start = PREFIX_IDS.len();
    let cut = if truncation.from_left { text_start..text_start + excess } else { text_start + ROOM..text_start + ROOM + excess };
    tokens.ids.drain(cut.clone());
    tokens.types.drain(cut.clone());
    tokens.offsets.drain(cut.clone());
    tokens.token_chars.drain(cut.clone());
    tokens.special.drain(cut);
    Ok(tokens)
}

/// Each input's window through the model: its output rows (the model's WIDTH values per row;
/// one row for a pooled output). Stops with 503 between inputs once the rest would overrun the
/// request budget (service_common's budget).
pub fn run_all(inputs: &[Tokens], request_started: Instant, timing: &mut ServerTiming) -> Result<Vec<Vec<f32>>, ApiError> {
    let started = Instant::now();
    let model = Model::load_embedded();
    timing.record("model", started, None);
    let started = Instant::now();
    let mut phases = [0.0f64; 3];
    let mut outputs = Vec::with_capacity(inputs.len());
    let mut last = Duration::ZERO;
    for (done, tokens) in inputs.iter().enumerate() {
        budget::go_on(request_started, last, inputs.len() - done, inputs.len(), "inputs", REQUEST_BUDGET_MS)?;
        let window_started = Instant::now();
        let (output, window_phases) = run_window(&model, tokens);
        last = window_started.elapsed();
        outputs.push(output);
        for (total, phase) in phases.iter_mut().zip(window_phases) {
            *total += phase;
        }
    }
    let plural = if inputs.len() == 1 { "" } else { "s" };
    timing.record("forward", started, Some(format!("{} window{plural}", inputs.len())));
    for (name, ms) in ["matmul", "attention", "other"].into_iter().zip(phases) {
        timing.add(name, ms, None);
    }
    Ok(outputs)
}

/// One window through the model: (its output, [matmul, attention, other] ms). The one call of
/// the forward pass in this crate.
fn run_window(model: &Model, tokens: &Tokens) -> (Vec<f32>, [f64; 3]) {
    let live = tokens.ids.len();
    let mut ids = vec![PAD_ID; WINDOW];
    let mut types = vec![0u32; WINDOW];
    let mut mask = vec![0i32; WINDOW];
    ids[..live].copy_from_slice(&tokens.ids);
    types[..live].copy_from_slice(&tokens.types);
    mask[..live].fill(1);
    let mut profile = Profile::start();
    let (output, _) = forward::forward_with_types(model, &ids, &types, &mask, live, forward::Extent::Live, &mut profile);
    (output, profile.ms)
}
