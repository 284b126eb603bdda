//! Token classification in the Hugging Face token-classification pipeline's shape: POST / and
//! POST /predict take {"inputs", "parameters": {"aggregation_strategy", "ignore_labels"},
//! "raw_scores"} and answer, per input, the entities [{"entity", "score", "index", "word", "start",
//! "end"}] (strategy "none") or [{"entity_group", "score", "word", "start", "end"}] ("simple").
//!
//! Per token, as the pipeline: the scores are the softmax of the logits (classify.rs), the entity
//! the first label of the highest score; "simple" groups consecutive tokens whose labels have one
//! tag and do not begin with B- (O is its own tag), the group's score the mean of its tokens'.
//! "first", "average" and "max" group a word's sub-tokens first, which needs the tokenizer's word
//! of each token, which this service's tokenizer does not report yet: they are refused (422).
//! Offsets are code points into the original text, end exclusive; "word" is the text between
//! them (the pipeline decodes the tokens instead, which can differ in spacing).
//! `raw_scores` (porter's, as TEI's /predict) gives the winning logit as the score.

use crate::classify;
use crate::config::LABELS;
use crate::embed::floats;
use crate::encode::Tokens;
use crate::json;

#[derive(Clone, Copy, PartialEq)]
pub enum Aggregation {
    None,
    Simple,
}

pub struct Entity {
    pub label: usize,
    pub score: f32,
    pub index: usize,
    pub start: u32,
    pub end: u32,
}

/// Each text token's entity, special tokens dropped (`index` counts them, as input_ids do).
pub fn entities(tokens: &Tokens, logits: &[f32], raw: bool) -> Vec<Entity> {
    let width = LABELS.len();
    (0..tokens.ids.len())
        .filter(|&i| !tokens.special[i])
        .map(|i| {
            let row = &logits[i * width..(i + 1) * width];
            let scores = classify::scores(row, false);
            let label = (0..width).fold(0, |best, j| if scores[j] > scores[best] { j } else { best });
            let score = if raw { row[label] } else { scores[label] };
            Entity { label, score, index: i, start: tokens.offsets[i].0, end: tokens.offsets[i].1 }
        })
        .collect()
}

/// (B or I, tag) as the pipeline's get_tag: "B-X" and "I-X" have tag X, any other label is I of itself.
fn tag(label: &str) -> (bool, &str) {
    match label.split_once('-') {
        Some(("B", tag)) => (true, tag),
        Some(("I", tag)) => (false, tag),
        _ => (false, label),
    }
}

pub fn to_json(text: &str, entities: &[Entity], aggregation: Aggregation, ignore: &[String]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let word = |start: u32, end: u32| -> String { chars[start as usize..end as usize].iter().collect() };
    let score = |value: f32| {
        let one = floats(&[value]);
        one[1..one.len() - 1].to_string()
    };
    let ignored = |label: &str| ignore.iter().any(|i| i == label);
    if aggregation == Aggregation::None {
        return json::array(entities.iter().filter(|e| !ignored(LABELS[e.label])).map(|e| {
            json::Object::new()
                .string("entity", LABELS[e.label])
                .raw("score", &score(e.score))
                .number("index", e.index)
                .string("word", &word(e.start, e.end))
                .number("start", e.start)
                .number("end", e.end)
                .finish()
        }));
    }
    let mut groups: Vec<&[Entity]> = Vec::new();
    let mut first = 0;
    for i in 1..=entities.len() {
        let split = i == entities.len() || {
            let (begins, label_tag) = tag(LABELS[entities[i].label]);
            begins || label_tag != tag(LABELS[entities[i - 1].label]).1
        };
        if split && first < i {
            groups.push(&entities[first..i]);
            first = i;
        }
    }
    json::array(groups.into_iter().filter_map(|group| {
        let name = tag(LABELS[group[0].label]).1;
        if ignored(name) {
            return None;
        }
        let mean = group.iter().fold(0.0f32, |sum, e| sum + e.score) / group.len() as f32;
        let (start, end) = (group[0].start, group[group.len() - 1].end);
        Some(json::Object::new()
            .string("entity_group", name)
            .raw("score", &score(mean))
            .string("word", &word(start, end))
            .number("start", start)
            .number("end", end)
            .finish())
    }))
}
