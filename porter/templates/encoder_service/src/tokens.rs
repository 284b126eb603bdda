//! Token classification in the Hugging Face token-classification pipeline's shape: POST / and
//! POST /predict take {"inputs", "parameters": {"aggregation_strategy", "ignore_labels"},
//! "raw_scores"} and answer, per input, the entities [{"entity", "score", "index", "word", "start",
//! "end"}] (strategy "none") or [{"entity_group", "score", "word", "start", "end"}] (the others).
//!
//! The pipeline's steps (transformers' pipelines/token_classification.py), in its order:
//! - per text token (special tokens dropped; `index` counts them, as input_ids do): the scores are
//!   the softmax of the logits (classify.rs), and the token is a sub-word when the tokenizer marks
//!   continuations (WordPiece's "##") and its vocabulary entry is not as long as its text, else
//!   (no such prefix) when the character before it and its first are not a space; [UNK] never is;
//! - "first", "average", "max": each word (a token and the sub-words after it) becomes one entity,
//!   of the first token's label and score, of the label of the mean scores (per label, summed in
//!   token order) and that mean, or of the token with the highest score;
//! - every strategy but "none": consecutive entities group while their tags (B-X and I-X: X; any
//!   other label itself) agree and the later one does not begin with B-; a group is named by its
//!   first label after the first "-", its score the mean of its members' (numpy's pairwise sum, as
//!   np.nanmean adds a float32 array);
//! - entities or groups whose label is in ignore_labels (default ["O"]) are left out.
//! Offsets are code points into the original text, end exclusive; "word" is the text between
//! them (the pipeline decodes the tokens instead, which can differ in spacing and case).
//! `raw_scores` (porter's, as TEI's /predict) gives the winning logit as a token's score.

use crate::classify;
use crate::config::{LABELS, UNK_ID};
use crate::embed::floats;
use crate::encode::Tokens;
use crate::json;

#[derive(Clone, Copy, PartialEq)]
pub enum Aggregation {
    None,
    Simple,
    First,
    Average,
    Max,
}

/// A text token with its scores, as the pipeline's pre-entities.
pub struct Token {
    pub scores: Vec<f32>,
    pub index: usize,
    pub start: u32,
    pub end: u32,
    pub is_subword: bool,
}

/// An entity: one token, or one word ("first", "average", "max").
struct Entity {
    label: usize,
    score: f32,
    index: usize,
    start: u32,
    end: u32,
}

/// Each text token's scores (softmax, or the logits with `raw`) and whether it continues a word.
pub fn text_tokens(text: &str, tokens: &Tokens, logits: &[f32], raw: bool, word_aware: bool) -> Vec<Token> {
    let width = LABELS.len();
    let chars: Vec<char> = text.chars().collect();
    (0..tokens.ids.len())
        .filter(|&i| !tokens.special[i])
        .map(|i| {
            let row = &logits[i * width..(i + 1) * width];
            let (start, end) = tokens.offsets[i];
            let is_subword = tokens.ids[i] != UNK_ID
                && if word_aware {
                    tokens.token_chars[i] != end - start
                } else {
                    start > 0 && !chars[start as usize - 1..(start as usize + 1).min(chars.len())].contains(&' ')
                };
            Token { scores: classify::scores(row, raw), index: i, start, end, is_subword }
        })
        .collect()
}

fn argmax(scores: &[f32]) -> usize {
    (0..scores.len()).fold(0, |best, j| if scores[j] > scores[best] { j } else { best })
}

fn token_entity(token: &Token) -> Entity {
    let label = argmax(&token.scores);
    Entity { label, score: token.scores[label], index: token.index, start: token.start, end: token.end }
}

/// One word's tokens as one entity, by the strategy.
fn word_entity(word: &[Token], aggregation: Aggregation) -> Entity {
    let (label, score) = match aggregation {
        Aggregation::Average => {
            let mut mean = vec![0.0f32; LABELS.len()];
            for token in word {
                mean.iter_mut().zip(&token.scores).for_each(|(m, &s)| *m += s);
            }
            mean.iter_mut().for_each(|m| *m /= word.len() as f32);
            let label = argmax(&mean);
            (label, mean[label])
        }
        _ => {
            let chosen = if aggregation == Aggregation::Max {
                // Python's max: the first of the highest.
                word.iter().fold(&word[0], |best, t| if max(&t.scores) > max(&best.scores) { t } else { best })
            } else {
                &word[0]
            };
            let label = argmax(&chosen.scores);
            (label, chosen.scores[label])
        }
    };
    Entity { label, score, index: word[0].index, start: word[0].start, end: word[word.len() - 1].end }
}

fn max(scores: &[f32]) -> f32 {
    scores.iter().fold(f32::NEG_INFINITY, |m, &s| m.max(s))
}

/// (begins, tag) as the pipeline's get_tag: "B-X" and "I-X" have tag X, any other label is I of itself.
fn tag(label: &str) -> (bool, &str) {
    if let Some(tag) = label.strip_prefix("B-") {
        (true, tag)
    } else {
        (false, label.strip_prefix("I-").unwrap_or(label))
    }
}

/// numpy's pairwise sum of a float32 array (what np.nanmean adds): eight running sums in blocks
/// of up to 128, halves above that, a plain loop under eight.
fn pairwise_sum(values: &[f32]) -> f32 {
    const BLOCK: usize = 128;
    let n = values.len();
    if n < 8 {
        return values.iter().fold(0.0f32, |sum, &v| sum + v);
    }
    if n > BLOCK {
        let half = n / 2 - (n / 2) % 8;
        return pairwise_sum(&values[..half]) + pairwise_sum(&values[half..]);
    }
    let mut r = [0.0f32; 8];
    r.copy_from_slice(&values[..8]);
    let whole = n - n % 8;
    for block in values[8..whole].chunks_exact(8) {
        r.iter_mut().zip(block).for_each(|(sum, &v)| *sum += v);
    }
    let sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    values[whole..].iter().fold(sum, |sum, &v| sum + v)
}

pub fn to_json(text: &str, tokens: &[Token], aggregation: Aggregation, ignore: &[String]) -> String {
    let chars: Vec<char> = text.chars().collect();
    let word = |start: u32, end: u32| -> String { chars[start as usize..end as usize].iter().collect() };
    let score = |value: f32| {
        let one = floats(&[value]);
        one[1..one.len() - 1].to_string()
    };
    let ignored = |label: &str| ignore.iter().any(|i| i == label);
    let entities: Vec<Entity> = match aggregation {
        Aggregation::None | Aggregation::Simple => tokens.iter().map(token_entity).collect(),
        _ => words(tokens).map(|w| word_entity(w, aggregation)).collect(),
    };
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
    json::array(groups(&entities).into_iter().filter_map(|group| {
        let label = LABELS[group[0].label];
        let name = label.split_once('-').map_or(label, |(_, rest)| rest);
        if ignored(name) {
            return None;
        }
        let scores: Vec<f32> = group.iter().map(|e| e.score).collect();
        let mean = pairwise_sum(&scores) / group.len() as f32;
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

/// The words: a token and the sub-words that follow it.
fn words(tokens: &[Token]) -> impl Iterator<Item = &[Token]> {
    let mut first = 0;
    (1..=tokens.len()).filter_map(move |i| {
        (i == tokens.len() || !tokens[i].is_subword).then(|| {
            let word = &tokens[first..i];
            first = i;
            word
        })
    }).filter(|word| !word.is_empty())
}

/// Runs of entities whose tags agree, a B- starting a new one.
fn groups(entities: &[Entity]) -> Vec<&[Entity]> {
    let mut groups = Vec::new();
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
    groups
}
