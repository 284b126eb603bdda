//! BIOES tags -> spans of tokens.
//!
//! The decoding is lenient, because a model's tag sequences are not always well formed and a
//! redactor should rather cover too much than leak: B opens a span, I and E extend an open span of
//! the same category (or open one if there is none), E and S close, O or a tag of another category
//! closes what is open. A span's score is the mean of its tokens' probabilities.

use crate::config::{Tag, LABELS};

#[derive(Debug, Clone, PartialEq)]
pub struct TokenSpan {
    pub category: usize,
    /// First and last token, inclusive.
    pub first: usize,
    pub last: usize,
    pub score: f32,
}

/// A span being built: its category, first token and the sum of its token scores.
struct Open {
    category: usize,
    first: usize,
    score_sum: f32,
}

/// `tokens[i]` = (output label index, probability of that label).
pub fn decode(tokens: &[(usize, f32)]) -> Vec<TokenSpan> {
    let mut spans = Vec::new();
    let mut open: Option<Open> = None;
    let close = |open: &mut Option<Open>, last: usize, spans: &mut Vec<TokenSpan>| {
        if let Some(o) = open.take() {
            let score = o.score_sum / (last + 1 - o.first) as f32;
            spans.push(TokenSpan { category: o.category, first: o.first, last, score });
        }
    };
    for (i, &(label, score)) in tokens.iter().enumerate() {
        let (tag, category) = LABELS[label];
        let continues = open.as_ref().is_some_and(|o| o.category == category);
        if tag == Tag::O || !continues || tag == Tag::B || tag == Tag::S {
            close(&mut open, i.wrapping_sub(1), &mut spans);
        }
        if tag == Tag::O {
            continue;
        }
        match open.as_mut() {
            Some(o) => o.score_sum += score,
            None => open = Some(Open { category, first: i, score_sum: score }),
        }
        if tag == Tag::E || tag == Tag::S {
            close(&mut open, i, &mut spans);
        }
    }
    close(&mut open, tokens.len().wrapping_sub(1), &mut spans);
    spans
}
