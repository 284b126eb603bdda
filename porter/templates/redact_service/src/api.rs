//! Request bodies: parsing, type checks and the JSON error every bad request gets.
//!
//! Status codes: 400 malformed JSON, a missing field, a wrong type or an unknown field (a typo
//! such as "minscore" should not be silently ignored); 422 a well-typed value that makes no sense
//! (an unknown label, minScore outside [0, 1]); 413 a body or text over the limits; 404/405 in
//! lib.rs; 503 a request that would overrun its time budget (redact.rs).

use serde_json::{Map, Value};

use crate::{config, json};

pub use crate::error::ApiError;
use crate::error::parse_object;

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(400, message)
}

pub struct RedactRequest {
    pub text: String,
    /// The labels to redact (model categories or recogniser labels); None = all of them.
    pub labels: Option<Vec<&'static str>>,
    pub min_score: f32,
    /// Also return every token with its label and score (for debugging and for the tests that
    /// compare the service with the reference executor).
    pub tokens: bool,
}

pub struct RestoreItem {
    pub placeholder: String,
    pub original: String,
}

pub struct RestoreRequest {
    pub text: String,
    pub items: Vec<RestoreItem>,
}

pub fn parse_redact(body: &[u8]) -> Result<RedactRequest, ApiError> {
    let mut object = parse_object(body, &["text", "labels", "minScore", "tokens"])?;
    let text = take_string(&mut object, "text")?;
    let labels = match object.remove("labels") {
        None | Some(Value::Null) => None,
        Some(Value::Array(values)) => Some(known_labels(values)?),
        Some(_) => return Err(bad("\"labels\" must be an array of label names")),
    };
    let min_score = match object.remove("minScore") {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => {
            let value = n.as_f64().unwrap_or(f64::NAN);
            if !(0.0..=1.0).contains(&value) {
                return Err(ApiError::new(422, "\"minScore\" must lie between 0 and 1"));
            }
            value as f32
        }
        Some(_) => return Err(bad("\"minScore\" must be a number")),
    };
    let tokens = match object.remove("tokens") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => b,
        Some(_) => return Err(bad("\"tokens\" must be true or false")),
    };
    Ok(RedactRequest { text, labels, min_score, tokens })
}

pub fn parse_restore(body: &[u8]) -> Result<RestoreRequest, ApiError> {
    let mut object = parse_object(body, &["text", "items"])?;
    let text = take_string(&mut object, "text")?;
    let Some(Value::Array(values)) = object.remove("items") else {
        return Err(bad("\"items\" must be an array of {\"placeholder\", \"original\"} objects"));
    };
    let mut items = Vec::with_capacity(values.len());
    for (index, value) in values.into_iter().enumerate() {
        // Items are usually the "items" of a /redact response, so their other fields are allowed.
        let Value::Object(mut item) = value else {
            return Err(bad(format!("items[{index}] must be an object")));
        };
        let placeholder = take_string(&mut item, "placeholder").map_err(|e| at_item(index, e))?;
        let original = take_string(&mut item, "original").map_err(|e| at_item(index, e))?;
        if placeholder.is_empty() {
            return Err(bad(format!("items[{index}].placeholder is empty")));
        }
        items.push(RestoreItem { placeholder, original });
    }
    Ok(RestoreRequest { text, items })
}

fn take_string(object: &mut Map<String, Value>, key: &str) -> Result<String, ApiError> {
    match object.remove(key) {
        Some(Value::String(s)) => Ok(s),
        None => Err(bad(format!("missing \"{key}\""))),
        Some(_) => Err(bad(format!("\"{key}\" must be a string"))),
    }
}

fn at_item(index: usize, error: ApiError) -> ApiError {
    bad(format!("items[{index}]: {}", error.message))
}

/// The requested labels as the service's own static names; an unknown one is a 422 that lists
/// the known ones.
fn known_labels(values: Vec<Value>) -> Result<Vec<&'static str>, ApiError> {
    let mut labels = Vec::with_capacity(values.len());
    for value in values {
        let Value::String(name) = value else {
            return Err(bad("\"labels\" must be an array of strings"));
        };
        let Some(known) = config::all_labels().find(|l| *l == name) else {
            let all: Vec<&str> = config::all_labels().collect();
            return Err(ApiError::new(422, format!("unknown label \"{name}\"; known labels: {}", all.join(", "))));
        };
        labels.push(known);
    }
    Ok(labels)
}
