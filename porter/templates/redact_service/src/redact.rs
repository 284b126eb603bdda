//! POST /redact: text -> tokens -> windows -> logits -> labels -> spans -> placeholders.
//!
//! Offsets are in Unicode code points (what `len()` counts in Python or `[...str].length` in
//! JavaScript), end exclusive: `original == text[start:end]`.
//!
//! Windows follow the rule the model's goldens were made with: the text's tokens, without special
//! tokens, are cut into consecutive chunks of WINDOW - |PREFIX_IDS| - |SUFFIX_IDS|; each window is
//! PREFIX_IDS + chunk + SUFFIX_IDS, padded with PAD_ID, the mask 1 on those live tokens. Labels
//! are decoded over the concatenated chunks, so a span that crosses a window edge stays one span.
//!
//! Load shedding: a request has REQUEST_BUDGET_MS from the handler's start, below the host's
//! timeout; between windows service_common's budget::go_on decides whether the rest still fits.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::api::{ApiError, RedactRequest};
use crate::budget;
use crate::bioes::{self, TokenSpan};
use crate::checks::{self, Verdict};
use crate::config::{self, CATEGORIES, MAX_WINDOWS, PAD_ID, PREFIX_IDS, REQUEST_BUDGET_MS, SUFFIX_IDS, UNK_ID, VOCAB, WINDOW};
use crate::json;
use crate::recognise;
use crate::timing::ServerTiming;
use encoder::forward;
use encoder::model::Model;
use encoder::profile::Profile;

// The labels and the window rendered into config.rs must be the model's own.
const _: () = assert!(
    encoder::model::WIDTH == config::LABELS.len() && encoder::model::OUTPUT_TOKENS && encoder::model::SEQ == WINDOW
);

/// Tokens of one window's text part: WINDOW minus the special tokens around it.
const CHUNK: usize = WINDOW - PREFIX_IDS.len() - SUFFIX_IDS.len();

pub struct Item {
    pub label: &'static str,
    pub original: String,
    pub placeholder: String,
    pub start: usize,
    pub end: usize,
    pub score: f32,
}

/// A token of the text as the model saw it: the id fed to the model (after the vocabulary
/// fallback), its code-point range, and the winning label with its probability.
pub struct Token {
    pub id: u32,
    pub start: usize,
    pub end: usize,
    pub label: usize,
    pub score: f32,
}

/// A model span the checks refused (checks.rs): it is not among the items.
pub struct Vetoed {
    pub label: &'static str,
    pub start: usize,
    pub end: usize,
}

pub struct Outcome {
    pub redacted_text: String,
    pub items: Vec<Item>,
    pub tokens: Vec<Token>,
    pub vetoed: Vec<Vetoed>,
}

impl Outcome {
    pub fn to_json(&self, with_tokens: bool) -> String {
        let items = json::array(self.items.iter().map(|item| {
            json::Object::new()
                .string("label", item.label)
                .string("original", &item.original)
                .string("placeholder", &item.placeholder)
                .number("start", item.start)
                .number("end", item.end)
                .raw("score", &json::score(item.score))
                .finish()
        }));
        let mut object = json::Object::new().string("redactedText", &self.redacted_text).raw("items", &items);
        if with_tokens {
            let tokens = json::array(self.tokens.iter().map(|t| {
                json::Object::new()
                    .number("id", t.id)
                    .number("start", t.start)
                    .number("end", t.end)
                    .string("label", &config::label_name(t.label))
                    .raw("score", &json::score(t.score))
                    .finish()
            }));
            let vetoed = json::array(self.vetoed.iter().map(|v| {
                json::Object::new().string("label", v.label).number("start", v.start).number("end", v.end).finish()
            }));
            object = object.raw("tokens", &tokens).raw("vetoed", &vetoed);
        }
        object.finish()
    }
}

/// A labelled range of the text in code points, from the model or a recogniser.
struct Span {
    label: &'static str,
    start: usize,
    end: usize,
    score: f32,
}

/// `started`: when the handler began, the start of the request's time budget.
pub fn redact(request: &RedactRequest, started: Instant, timing: &mut ServerTiming) -> Result<Outcome, ApiError> {
    let tokens = classify(&request.text, started, timing)?;
    let started = Instant::now();
    let chars: Vec<char> = request.text.chars().collect();
    let model_spans = bioes::decode(&tokens.iter().map(|t| (t.label, t.score)).collect::<Vec<_>>());
    let (checked, vetoed) = apply_checks(&chars, model_spans.iter().map(|s| to_chars(s, &tokens, &chars)).collect());
    let spans = merge(&chars, checked);
    let kept: Vec<Span> = spans
        .into_iter()
        .filter(|s| s.score >= request.min_score)
        .filter(|s| request.labels.as_ref().map_or(true, |wanted| wanted.contains(&s.label)))
        .collect();
    let (redacted_text, items) = substitute(&chars, kept);
    timing.record("decode", started, None);
    Ok(Outcome { redacted_text, items, tokens, vetoed })
}

/// Tokenizes the text, runs every window through the model and returns one labelled token per
/// text token (special tokens and padding dropped); 503 if the windows would overrun the budget.
fn classify(text: &str, request_started: Instant, timing: &mut ServerTiming) -> Result<Vec<Token>, ApiError> {
    let started = Instant::now();
    let tokenizer = tokenizer::embedded().map_err(|e| ApiError::new(500, e.to_string()))?;
    timing.record("tokenizer", started, None);

    let started = Instant::now();
    let model = Model::load_embedded();
    timing.record("model", started, None);

    let started = Instant::now();
    let encoding = tokenizer.encode(text);
    let (ids, offsets) = text_tokens(&encoding.ids, &encoding.char_offsets)?;
    timing.record("encode", started, None);

    let windows = ids.len().div_ceil(CHUNK);
    if windows > MAX_WINDOWS {
        return Err(ApiError::new(
            413,
            format!("the text is {} tokens; this service takes at most {} ({MAX_WINDOWS} windows)", ids.len(), MAX_WINDOWS * CHUNK),
        ));
    }
    let started = Instant::now();
    let mut phases = [0.0f64; 3];
    let mut tokens = Vec::with_capacity(ids.len());
    let mut last_window = Duration::ZERO;
    for (done, (chunk, chunk_offsets)) in ids.chunks(CHUNK).zip(offsets.chunks(CHUNK)).enumerate() {
        if let Err(busy) = budget::go_on(request_started, last_window, windows - done, windows, "windows", REQUEST_BUDGET_MS) {
            timing.record("forward", started, Some(format!("stopped after {done} of {windows} windows")));
            return Err(busy);
        }
        let window_started = Instant::now();
        let (logits, window_phases) = run_window(&model, chunk);
        last_window = window_started.elapsed();
        for (i, (&id, &(start, end))) in chunk.iter().zip(chunk_offsets).enumerate() {
            let row = &logits[(PREFIX_IDS.len() + i) * config::LABELS.len()..][..config::LABELS.len()];
            let (label, score) = best_label(row);
            tokens.push(Token { id, start: start as usize, end: end as usize, label, score });
        }
        for (total, phase) in phases.iter_mut().zip(window_phases) {
            *total += phase;
        }
    }
    let plural = if windows == 1 { "" } else { "s" };
    timing.record("forward", started, Some(format!("{windows} window{plural}")));
    for (name, ms) in ["matmul", "attention", "other"].into_iter().zip(phases) {
        timing.add(name, ms, None);
    }
    Ok(tokens)
}

/// The text's own tokens: the post-processor's special tokens removed, ids past the model's
/// vocabulary replaced by UNK_ID. Returns (ids, code-point ranges).
fn text_tokens(ids: &[u32], offsets: &[(u32, u32)]) -> Result<(Vec<u32>, Vec<(u32, u32)>), ApiError> {
    let specials = PREFIX_IDS.len() + SUFFIX_IDS.len();
    if ids.len() < specials || !ids.starts_with(PREFIX_IDS) || !ids.ends_with(SUFFIX_IDS) {
        return Err(ApiError::new(500, "the tokenizer's special tokens differ from the ones this service was built with"));
    }
    let inner = PREFIX_IDS.len()..ids.len() - SUFFIX_IDS.len();
    let text_ids = ids[inner.clone()].iter().map(|&id| if id < VOCAB { id } else { UNK_ID }).collect();
    Ok((text_ids, offsets[inner].to_vec()))
}

/// One window through the model: (logits of its live rows, [matmul, attention, other] ms).
fn run_window(model: &Model, chunk: &[u32]) -> (Vec<f32>, [f64; 3]) {
    let mut ids = vec![PAD_ID; WINDOW];
    let mut mask = vec![0i32; WINDOW];
    let live = PREFIX_IDS.len() + chunk.len() + SUFFIX_IDS.len();
    for (slot, &id) in ids.iter_mut().zip(PREFIX_IDS.iter().chain(chunk).chain(SUFFIX_IDS)) {
        *slot = id;
    }
    // A whole-window model ignores the mask and attends to the padding too; a mask-input model
    // drops the padded keys, and then the forward pass computes only the rows up to the last
    // live token (bit-identical to the whole window, which `porter verify` checks).
    mask[..live].fill(1);
    let mut profile = Profile::start();
    let (logits, _) = forward::forward(model, &ids, &mask, live, forward::Extent::Live, &mut profile);
    (logits, profile.ms)
}

/// Argmax (the first on ties) and its softmax probability, 1 / sum(exp(l - max)).
fn best_label(logits: &[f32]) -> (usize, f32) {
    let mut best = 0;
    for (i, &value) in logits.iter().enumerate() {
        if value > logits[best] {
            best = i;
        }
    }
    let max = logits[best];
    let sum: f32 = logits.iter().map(|&l| (l - max).exp()).sum();
    (best, 1.0 / sum)
}

/// A token span as code points, without whitespace at either end: a SentencePiece token's range
/// includes the space its metaspace stands for.
fn to_chars(span: &TokenSpan, tokens: &[Token], chars: &[char]) -> Span {
    let (mut start, mut end) = (tokens[span.first].start, tokens[span.last].end);
    while start < end && chars[start].is_whitespace() {
        start += 1;
    }
    while end > start && chars[end - 1].is_whitespace() {
        end -= 1;
    }
    Span { label: CATEGORIES[span.category], start, end, score: span.score }
}

/// Model spans after the checks of checks.rs: those that pass (as the whole value the check
/// judged) or are not checked, and those that were vetoed. A checked value replaces the other
/// model spans it overlaps (a model that split a number labelled parts of the same value), the
/// first of several overlapping values wins; so the spans kept never overlap.
fn apply_checks(chars: &[char], spans: Vec<Span>) -> (Vec<Span>, Vec<Vetoed>) {
    let mut checked: Vec<Span> = Vec::new();
    let mut unchecked = Vec::with_capacity(spans.len());
    let mut vetoed = Vec::new();
    let overlaps = |a: &Span, b: &Span| a.start < b.end && b.start < a.end;
    for span in spans {
        match checks::check(span.label, chars, span.start, span.end) {
            Verdict::Unchecked => unchecked.push(span),
            Verdict::Valid { start, end } => {
                let value = Span { start, end, ..span };
                if !checked.iter().any(|c| overlaps(c, &value)) {
                    checked.push(value);
                }
            }
            Verdict::Vetoed => vetoed.push(Vetoed { label: span.label, start: span.start, end: span.end }),
        }
    }
    unchecked.retain(|u| !checked.iter().any(|c| overlaps(c, u)));
    checked.extend(unchecked);
    checked.sort_by_key(|s| s.start);
    (checked, vetoed)
}

/// The model's spans, except where a recogniser proved a span: that one replaces every model
/// span it overlaps. Sorted by start; empty spans dropped.
fn merge(chars: &[char], model_spans: Vec<Span>) -> Vec<Span> {
    let proven: Vec<Span> = recognise::find_all(chars)
        .into_iter()
        .map(|f| Span { label: f.label, start: f.start, end: f.end, score: 1.0 })
        .collect();
    let overlaps = |a: &Span, b: &Span| a.start < b.end && b.start < a.end;
    let mut spans: Vec<Span> = model_spans
        .into_iter()
        .filter(|m| m.start < m.end && !proven.iter().any(|p| overlaps(m, p)))
        .collect();
    spans.extend(proven);
    spans.sort_by_key(|s| s.start);
    spans
}

/// Replaces each span by its placeholder. Placeholders are numbered per label in order of first
/// appearance, and the same (label, original) always gets the same one.
fn substitute(chars: &[char], spans: Vec<Span>) -> (String, Vec<Item>) {
    let mut numbers: HashMap<(&str, String), String> = HashMap::new();
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut redacted = String::with_capacity(chars.len());
    let mut items = Vec::with_capacity(spans.len());
    let mut at = 0;
    for span in spans {
        let original: String = chars[span.start..span.end].iter().collect();
        let placeholder = numbers
            .entry((span.label, original.clone()))
            .or_insert_with(|| {
                let count = counts.entry(span.label).or_insert(0);
                *count += 1;
                format!("[{}_{}]", span.label, count)
            })
            .clone();
        redacted.extend(&chars[at..span.start]);
        redacted.push_str(&placeholder);
        at = span.end;
        items.push(Item { label: span.label, original, placeholder, start: span.start, end: span.end, score: span.score });
    }
    redacted.extend(&chars[at..]);
    (redacted, items)
}
