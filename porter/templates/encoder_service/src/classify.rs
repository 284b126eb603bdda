//! Sequence classification: TEI's POST /predict and the Hugging Face API's text classification,
//! and a cross-encoder's TEI POST /rerank (its one logit per (query, text) pair).
//!
//! Scores are the softmax of the model's logits (the sigmoid for a one-output model), computed in
//! float32: the largest logit subtracted, exp, summed in label order, divided; `raw_scores` (or
//! function_to_apply "none") returns the logits themselves, the forward pass's numbers. Each
//! input's labels come sorted by score, highest first, as TEI sorts them; /rerank's texts too, as
//! TEI sorts them (ascending, stable, then reversed: equal scores come later text first).

use crate::config::LABELS;
use crate::embed::floats;
use crate::json;

/// The function the scores are (the Hugging Face pipeline's name for it).
pub const SCORE_FUNCTION: &str = if LABELS.len() == 1 { "sigmoid" } else { "softmax" };

pub fn scores(logits: &[f32], raw: bool) -> Vec<f32> {
    if raw {
        return logits.to_vec();
    }
    if logits.len() == 1 {
        return vec![1.0 / (1.0 + (-logits[0]).exp())];
    }
    let max = logits.iter().fold(f32::NEG_INFINITY, |m, &l| m.max(l));
    let exps: Vec<f32> = logits.iter().map(|&l| (l - max).exp()).collect();
    let sum = exps.iter().fold(0.0f32, |s, &e| s + e);
    exps.into_iter().map(|e| e / sum).collect()
}

/// [{"label", "score"}] sorted by score (stable: equal scores keep label order), at most top_k.
pub fn ranked(scores: &[f32], top_k: Option<usize>) -> String {
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order.truncate(top_k.unwrap_or(order.len()));
    json::array(order.into_iter().map(|i| {
        let score = floats(&scores[i..=i]);
        json::Object::new().string("label", LABELS[i]).raw("score", &score[1..score.len() - 1]).finish()
    }))
}

/// TEI's /rerank reply: [{"index", "text"?, "score"}] by score, highest first.
pub fn ranks(scores: &[f32], texts: Option<&[String]>) -> Result<String, crate::error::ApiError> {
    if scores.iter().any(|s| s.is_nan()) {
        let mut error = crate::error::ApiError::new(500, "score is NaN");
        error.error_type = Some("Backend");
        return Err(error);
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| scores[a].partial_cmp(&scores[b]).unwrap_or(std::cmp::Ordering::Equal));
    order.reverse();
    Ok(json::array(order.into_iter().map(|i| {
        let object = json::Object::new().number("index", i);
        let object = match texts {
            Some(texts) => object.string("text", &texts[i]),
            None => object,
        };
        let score = floats(&scores[i..=i]);
        object.raw("score", &score[1..score.len() - 1]).finish()
    })))
}
