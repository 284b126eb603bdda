//! OpenAI's completions API (`POST /v1/completions`): the request as OpenAI's clients send it,
//! and its error shape, `{"error": {"message", "type", "param", "code"}}`.
//!
//! Fields: model (any string, echoed in the answer as OpenAI does; the service serves one
//! model, whose file name answers a request without one), prompt
//! (a string, or a list of one), max_tokens (default 16, as OpenAI's), temperature (0..=2,
//! default 1; 0 is greedy), top_p ((0, 1], default 1), seed (default 0, so a request without
//! one is still reproducible), stop (a string or up to 4; the text ends before the first one
//! found), stream, stream_options {"include_usage"}, n (1 only), user (ignored); and three
//! extensions under vLLM's names: top_k (0 or -1 = every token), ignore_eos (keep generating past
//! <|endoftext|>) and return_token_ids (the generated ids in the choice, "token_ids").
//!
//! Every refusal is 400 with the field in "param", as OpenAI answers, except a body or prompt
//! over the byte limits (413); errors the shared glue raises (405, 408, 413) keep their status.

use decoder::model::{N_CTX, VOCAB};
use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::generate::{Refusal, Settings};
use crate::sample::Sampling;
use crate::{config, json};

const FIELDS: &[&str] = &[
    "model", "prompt", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "stream_options",
    "n", "user", "ignore_eos", "return_token_ids",
];
const DEFAULT_MAX_TOKENS: u64 = 16;
const MAX_TEMPERATURE: f64 = 2.0;
const MAX_STOPS: usize = 4;

pub struct OpenAiError {
    pub status: u16,
    pub message: String,
    pub param: Option<String>,
    pub code: Option<&'static str>,
    /// Allow (405) or Retry-After (503), from the shared glue's errors.
    pub headers: Vec<(&'static str, String)>,
}

impl OpenAiError {
    fn invalid(param: &str, message: impl Into<String>) -> Self {
        OpenAiError { status: 400, message: message.into(), param: Some(param.to_string()), code: None, headers: Vec::new() }
    }

    /// A body that is not a JSON object: no one field is at fault.
    fn malformed(message: impl Into<String>) -> Self {
        OpenAiError { param: None, ..OpenAiError::invalid("", message) }
    }

    fn with_code(mut self, code: &'static str) -> Self {
        self.code = Some(code);
        self
    }

    pub fn to_json(&self) -> String {
        let kind = if self.status < 500 { "invalid_request_error" } else { "server_error" };
        let param = self.param.as_deref().map_or("null".to_string(), json::quote);
        let code = self.code.map_or("null".to_string(), json::quote);
        let error = json::Object::new()
            .string("message", &self.message)
            .string("type", kind)
            .raw("param", &param)
            .raw("code", &code)
            .finish();
        json::Object::new().raw("error", &error).finish()
    }
}

impl From<ApiError> for OpenAiError {
    fn from(error: ApiError) -> Self {
        let headers = error.headers();
        OpenAiError { status: error.status, message: error.message, param: None, code: None, headers }
    }
}

impl From<Refusal> for OpenAiError {
    fn from(refusal: Refusal) -> Self {
        let code = match refusal {
            Refusal::Context { .. } => "context_length_exceeded",
            Refusal::Vocabulary { .. } => "invalid_prompt",
        };
        OpenAiError::invalid("prompt", refusal.message("max_tokens")).with_code(code)
    }
}

pub struct CompletionRequest {
    pub model: Option<String>,
    pub settings: Settings,
    pub stop: Vec<String>,
    pub stream: bool,
    pub include_usage: bool,
    pub return_token_ids: bool,
}

pub fn parse_completion(body: &[u8]) -> Result<CompletionRequest, OpenAiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| OpenAiError::malformed(format!("invalid JSON: {e}")))?;
    let Value::Object(mut object) = value else {
        return Err(OpenAiError::malformed("the body must be a JSON object"));
    };
    if let Some(unknown) = object.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(OpenAiError::invalid(unknown, format!("unrecognized request argument \"{unknown}\"; this service takes {}", FIELDS.join(", ")))
            .with_code("unknown_parameter"));
    }
    let model = take_string(&mut object, "model")?;
    take_string(&mut object, "user")?;
    let prompt = take_prompt(&mut object)?;
    let max_tokens = take_integer(&mut object, "max_tokens")?.unwrap_or(DEFAULT_MAX_TOKENS as i64);
    if !(1..N_CTX as i64).contains(&max_tokens) {
        return Err(out_of_range("max_tokens", format!("must lie in 1..={}", N_CTX - 1)));
    }
    let temperature = take_number(&mut object, "temperature")?.unwrap_or(1.0);
    if !(0.0..=MAX_TEMPERATURE).contains(&temperature) {
        return Err(out_of_range("temperature", format!("must lie in 0..={MAX_TEMPERATURE} (0 is greedy)")));
    }
    let top_p = take_number(&mut object, "top_p")?.unwrap_or(1.0);
    if !(top_p > 0.0 && top_p <= 1.0) {
        return Err(out_of_range("top_p", "must lie in (0, 1]"));
    }
    let top_k = match take_integer(&mut object, "top_k")?.unwrap_or(0) {
        -1 => 0,
        k if (0..=VOCAB as i64).contains(&k) => k as usize,
        _ => return Err(out_of_range("top_k", format!("must lie in 0..={VOCAB}, or be -1 (0 and -1: every token)"))),
    };
    let seed = take_integer(&mut object, "seed")?.unwrap_or(0);
    if seed < 0 {
        return Err(out_of_range("seed", "must not be negative"));
    }
    if take_integer(&mut object, "n")?.is_some_and(|n| n != 1) {
        return Err(out_of_range("n", "this service returns one choice per request: n must be 1"));
    }
    let settings = Settings {
        prompt,
        max_tokens: max_tokens as usize,
        sampling: Sampling { temperature, top_k, top_p },
        seed: seed as u64,
        stop_at_end_of_text: !take_bool(&mut object, "ignore_eos")?,
    };
    Ok(CompletionRequest {
        model,
        settings,
        stop: take_stop(&mut object)?,
        stream: take_bool(&mut object, "stream")?,
        include_usage: take_include_usage(&mut object)?,
        return_token_ids: take_bool(&mut object, "return_token_ids")?,
    })
}

fn out_of_range(param: &str, rule: impl std::fmt::Display) -> OpenAiError {
    OpenAiError::invalid(param, format!("\"{param}\" {rule}")).with_code("invalid_value")
}

fn wrong_type(param: &str, wanted: &str) -> OpenAiError {
    OpenAiError::invalid(param, format!("\"{param}\" must be {wanted}")).with_code("invalid_type")
}

fn take_prompt(object: &mut Map<String, Value>) -> Result<String, OpenAiError> {
    let prompt = match object.remove("prompt") {
        Some(Value::String(s)) => s,
        Some(Value::Array(items)) if items.len() == 1 && items[0].is_string() => {
            items.into_iter().next().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
        }
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            return Err(out_of_range("prompt", format!("is a list of {} prompts; this service takes one per request", items.len())));
        }
        None => return Err(OpenAiError::invalid("prompt", "missing \"prompt\"").with_code("missing_required_parameter")),
        Some(_) => return Err(wrong_type("prompt", "a string or a list of one string")),
    };
    if prompt.is_empty() {
        return Err(out_of_range("prompt", "is empty; the model needs at least one token to continue"));
    }
    if prompt.len() > config::MAX_PROMPT_BYTES {
        let message = format!("\"prompt\" is longer than {} bytes", config::MAX_PROMPT_BYTES);
        return Err(OpenAiError { status: 413, ..OpenAiError::invalid("prompt", message).with_code("context_length_exceeded") });
    }
    Ok(prompt)
}

/// The stop texts: none, a string or a list of up to four non-empty strings.
fn take_stop(object: &mut Map<String, Value>) -> Result<Vec<String>, OpenAiError> {
    let stops = match object.remove("stop") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::String(s)) => vec![s],
        Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
            items.into_iter().filter_map(|v| v.as_str().map(str::to_string)).collect()
        }
        Some(_) => return Err(wrong_type("stop", "a string or a list of strings")),
    };
    if stops.len() > MAX_STOPS {
        return Err(out_of_range("stop", format!("takes at most {MAX_STOPS} strings")));
    }
    if stops.iter().any(String::is_empty) {
        return Err(out_of_range("stop", "must not contain an empty string"));
    }
    Ok(stops)
}

fn take_include_usage(object: &mut Map<String, Value>) -> Result<bool, OpenAiError> {
    match object.remove("stream_options") {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Object(mut options)) => {
            if let Some(unknown) = options.keys().find(|k| k.as_str() != "include_usage") {
                return Err(OpenAiError::invalid("stream_options", format!("unrecognized stream option \"{unknown}\""))
                    .with_code("unknown_parameter"));
            }
            take_bool(&mut options, "include_usage")
        }
        Some(_) => Err(wrong_type("stream_options", "an object")),
    }
}

fn take_string(object: &mut Map<String, Value>, key: &str) -> Result<Option<String>, OpenAiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(wrong_type(key, "a string")),
    }
}

/// An integer (JSON 16.0 is not one: the client meant something else).
fn take_integer(object: &mut Map<String, Value>, key: &str) -> Result<Option<i64>, OpenAiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) if n.is_i64() => Ok(n.as_i64()),
        Some(Value::Number(n)) if n.is_u64() => Err(out_of_range(key, "is too large")),
        Some(_) => Err(wrong_type(key, "an integer")),
    }
}

fn take_number(object: &mut Map<String, Value>, key: &str) -> Result<Option<f64>, OpenAiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(wrong_type(key, "a number")),
    }
}

fn take_bool(object: &mut Map<String, Value>, key: &str) -> Result<bool, OpenAiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(wrong_type(key, "true or false")),
    }
}
