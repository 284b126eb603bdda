//! Texts -> windows -> the model's output rows, one window per input.
//!
//! A window is PREFIX_IDS + the text's tokens + SUFFIX_IDS, padded with PAD_ID, the mask 1 on the
//! live tokens: the rule the model's goldens were made with (porter/check/windows.py). A text
//! whose tokens do not fit is cut to fit when the request says `truncate` (from the end, or from
//! the start with truncation_direction "Left"), and otherwise refused with TEI's 413.

use std::time::{Duration, Instant};

use encoder::forward;
use encoder::model::Model;
use encoder::profile::Profile;

use crate::config::{MAX_BATCH, PAD_ID, PREFIX_IDS, REQUEST_BUDGET_MS, SUFFIX_IDS, UNK_ID, VOCAB, WINDOW};
use crate::error::ApiError;
use crate::{budget, timing::ServerTiming};

/// Text tokens that fit one window beside the special tokens.
pub const ROOM: usize = WINDOW - PREFIX_IDS.len() - SUFFIX_IDS.len();

#[derive(Clone, Copy)]
pub struct Truncation {
    pub enabled: bool,
    pub from_left: bool,
}

/// A text's tokens as the model sees them: ids (after the vocabulary fallback) and code-point
/// ranges, special tokens included (their ranges are empty).
pub struct Tokens {
    pub ids: Vec<u32>,
    pub offsets: Vec<(u32, u32)>,
    /// Which of them are the post-processor's special tokens.
    pub special: Vec<bool>,
}

pub fn validation(status: u16, message: String) -> ApiError {
    let mut error = ApiError::new(status, message);
    error.error_type = Some("Validation");
    error
}

/// Every text tokenized and fitted to the window; 413 for a batch over MAX_BATCH or a text too
/// long without `truncate`, 422 for an empty batch.
pub fn tokenize_all(texts: &[String], truncation: Truncation, timing: &mut ServerTiming) -> Result<Vec<Tokens>, ApiError> {
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
    let all = texts.iter().map(|text| fit(tokenize(&tokenizer, text)?, truncation)).collect::<Result<Vec<_>, _>>()?;
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
    let text_range = PREFIX_IDS.len()..ids.len() - SUFFIX_IDS.len();
    let special = (0..ids.len()).map(|i| !text_range.contains(&i)).collect();
    let ids = ids.iter().map(|&id| if id < VOCAB { id } else { UNK_ID }).collect();
    Ok(Tokens { ids, offsets: encoding.char_offsets.clone(), special })
}

fn fit(mut tokens: Tokens, truncation: Truncation) -> Result<Tokens, ApiError> {
    let excess = tokens.ids.len().saturating_sub(WINDOW);
    if excess == 0 {
        return Ok(tokens);
    }
    if !truncation.enabled {
        return Err(validation(
            413,
            format!("Input validation error: `inputs` must have less than {WINDOW} tokens. Given: {}", tokens.ids.len()),
        ));
    }
    let text_start = PREFIX_IDS.len();
    let cut = if truncation.from_left { text_start..text_start + excess } else { text_start + ROOM..text_start + ROOM + excess };
    tokens.ids.drain(cut.clone());
    tokens.offsets.drain(cut.clone());
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
        let (output, window_phases) = run_window(&model, &tokens.ids);
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
fn run_window(model: &Model, live_ids: &[u32]) -> (Vec<f32>, [f64; 3]) {
    let mut ids = vec![PAD_ID; WINDOW];
    let mut mask = vec![0i32; WINDOW];
    ids[..live_ids.len()].copy_from_slice(live_ids);
    mask[..live_ids.len()].fill(1);
    let mut profile = Profile::start();
    let (output, _) = forward::forward(model, &ids, &mask, live_ids.len(), forward::Extent::Live, &mut profile);
    (output, profile.ms)
}
