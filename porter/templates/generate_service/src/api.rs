//! Request bodies: parsing, type checks and the JSON error every bad request gets.
//!
//! Status codes: 400 malformed JSON, a missing field, a wrong type or an unknown field (a typo
//! such as "maxtokens" should not be silently ignored); 422 a well-typed value out of range
//! (maxTokens, temperature, topK, an empty prompt, a prompt that leaves no room in the context);
//! 413 a body or prompt over the byte limits; 404/405 in lib.rs.

use decoder::model::{N_CTX, VOCAB};
use serde_json::{Map, Value};

use crate::config;
use crate::generate::{Refusal, Settings};
use crate::sample::Sampling;

const FIELDS: &[&str] = &["prompt", "maxTokens", "temperature", "topK", "seed", "stream", "stopAtEndOfText"];
const DEFAULT_MAX_TOKENS: u64 = 32;

pub use crate::error::ApiError;
use crate::error::parse_object;

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(400, message)
}

fn out_of_range(message: impl Into<String>) -> ApiError {
    ApiError::new(422, message)
}

pub struct GenerateRequest {
    pub settings: Settings,
    pub stream: bool,
}

/// A request the context cannot hold, in this API's words (422).
pub fn refused(refusal: Refusal) -> ApiError {
    out_of_range(refusal.message("maxTokens"))
}

/// /tokenize takes {"prompt"} only.
pub fn parse_tokenize(body: &[u8]) -> Result<String, ApiError> {
    let mut object = parse_object(body, &["prompt"])?;
    take_prompt(&mut object)
}

pub fn parse_generate(body: &[u8]) -> Result<GenerateRequest, ApiError> {
    let mut object = parse_object(body, FIELDS)?;
    let prompt = take_prompt(&mut object)?;
    let max_tokens = take_integer(&mut object, "maxTokens", DEFAULT_MAX_TOKENS)?;
    if !(1..N_CTX as u64).contains(&max_tokens) {
        return Err(out_of_range(format!("\"maxTokens\" must lie in 1..={}", N_CTX - 1)));
    }
    let temperature = match object.remove("temperature") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n.as_f64().unwrap_or(f64::NAN),
        Some(_) => return Err(bad("\"temperature\" must be a number")),
    };
    if !(temperature.is_finite() && temperature >= 0.0) {
        return Err(out_of_range("\"temperature\" must be 0 (greedy) or positive"));
    }
    let top_k = take_integer(&mut object, "topK", 0)?;
    if top_k > VOCAB as u64 {
        return Err(out_of_range(format!("\"topK\" must lie in 0..={VOCAB} (0 = every token)")));
    }
    let settings = Settings {
        prompt,
        max_tokens: max_tokens as usize,
        sampling: Sampling { temperature, top_k: top_k as usize, top_p: 1.0 },
        seed: take_integer(&mut object, "seed", 0)?,
        stop_at_end_of_text: take_bool(&mut object, "stopAtEndOfText", true)?,
    };
    Ok(GenerateRequest { settings, stream: take_bool(&mut object, "stream", false)? })
}

fn take_prompt(object: &mut Map<String, Value>) -> Result<String, ApiError> {
    let prompt = match object.remove("prompt") {
        Some(Value::String(s)) => s,
        None => return Err(bad("missing \"prompt\"")),
        Some(_) => return Err(bad("\"prompt\" must be a string")),
    };
    if prompt.is_empty() {
        return Err(out_of_range("\"prompt\" is empty; the model needs at least one token to continue"));
    }
    if prompt.len() > config::MAX_PROMPT_BYTES {
        return Err(ApiError::new(413, format!("\"prompt\" is longer than {} bytes", config::MAX_PROMPT_BYTES)));
    }
    Ok(prompt)
}

/// A non-negative integer (JSON 32.0 is not one: the client meant something else).
fn take_integer(object: &mut Map<String, Value>, key: &str, default: u64) -> Result<u64, ApiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Number(n)) if n.is_u64() => Ok(n.as_u64().unwrap_or(default)),
        Some(Value::Number(n)) if n.is_i64() => Err(out_of_range(format!("\"{key}\" must not be negative"))),
        Some(_) => Err(bad(format!("\"{key}\" must be a non-negative integer"))),
    }
}

fn take_bool(object: &mut Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(bad(format!("\"{key}\" must be true or false"))),
    }
}
