//! Embeddings: TEI's POST /embed (-> [[float]]) and OpenAI's POST /v1/embeddings.
//!
//! The numbers are the model's output row as the forward pass computes it (printed so that they
//! parse back to the same float32). `normalize` (TEI's default, and OpenAI's embeddings are unit
//! length) divides the row by its L2 norm, the squares summed in index order in float32; a model
//! whose own output is already of unit length (config::OUTPUT_IS_NORMALIZED) is returned as it is.

use crate::api::EmbedRequest;
use crate::config::{MODEL_ID, OUTPUT_IS_NORMALIZED};
use crate::json;

pub fn finish(rows: Vec<Vec<f32>>, normalize: bool) -> Vec<Vec<f32>> {
    if !normalize || OUTPUT_IS_NORMALIZED {
        return rows;
    }
    rows.into_iter().map(unit_length).collect()
}

fn unit_length(row: Vec<f32>) -> Vec<f32> {
    let norm = row.iter().fold(0.0f32, |sum, &x| sum + x * x).sqrt();
    if norm == 0.0 {
        return row;
    }
    row.into_iter().map(|x| x / norm).collect()
}

/// TEI's reply: one array of floats per input (base64 strings if asked, as the HF API allows).
pub fn tei_json(rows: &[Vec<f32>], request: &EmbedRequest) -> String {
    json::array(rows.iter().map(|row| if request.base64 { json::quote(&base64(row)) } else { floats(row) }))
}

/// OpenAI's reply: {"object": "list", "data": [{"object": "embedding", "index", "embedding"}],
/// "model", "usage": {"prompt_tokens", "total_tokens"}}.
pub fn openai_json(rows: &[Vec<f32>], request: &EmbedRequest, model: Option<&str>, prompt_tokens: usize) -> String {
    let data = json::array(rows.iter().enumerate().map(|(index, row)| {
        let embedding = if request.base64 { json::quote(&base64(row)) } else { floats(row) };
        json::Object::new().string("object", "embedding").number("index", index).raw("embedding", &embedding).finish()
    }));
    let usage = json::Object::new().number("prompt_tokens", prompt_tokens).number("total_tokens", prompt_tokens).finish();
    json::Object::new()
        .string("object", "list")
        .raw("data", &data)
        .string("model", model.unwrap_or(MODEL_ID))
        .raw("usage", &usage)
        .finish()
}

/// Floats as JSON numbers: Rust prints the shortest decimal that parses back to the same f32.
pub fn floats(row: &[f32]) -> String {
    json::array(row.iter().map(|&x| if x.is_finite() { x.to_string() } else { "null".to_string() }))
}

/// The little-endian float32 bytes in standard base64 with padding (what OpenAI's clients decode).
fn base64(row: &[f32]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes: Vec<u8> = row.iter().flat_map(|x| x.to_le_bytes()).collect();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = group.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            let symbol = if i <= group.len() { ALPHABET[(n >> (18 - 6 * i) & 63) as usize] } else { b'=' };
            out.push(symbol as char);
        }
    }
    out
}
