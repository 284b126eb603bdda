//! The JSON error every bad request gets, and the first parsing step every request body takes
//! (shared by porter's services; each api.rs adds its own fields and shorthands).

use serde_json::{Map, Value};

use crate::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// For 405: the method the route accepts (the Allow header).
    pub allow: Option<&'static str>,
    /// For 503: seconds after which a retry may find the service less busy (Retry-After).
    pub retry_after_s: Option<u64>,
    /// Text Embeddings Inference's error class ("Validation", "Overloaded", ...), written as
    /// "error_type" where a service speaks TEI's API.
    pub error_type: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), allow: None, retry_after_s: None, error_type: None }
    }

    /// The headers this error adds to the response (Allow, Retry-After).
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let allow = self.allow.map(|methods| ("allow", methods.to_string()));
        let retry = self.retry_after_s.map(|s| ("retry-after", s.to_string()));
        allow.into_iter().chain(retry).collect()
    }

    pub fn to_json(&self) -> String {
        let object = json::Object::new().string("error", &self.message);
        let object = match self.error_type {
            Some(kind) => object.string("error_type", kind),
            None => object,
        };
        object.number("status", self.status).finish()
    }
}

/// The body as a JSON object with only the `allowed` fields: anything else is a 400 (a typo in a
/// field name should not be silently ignored).
pub fn parse_object(body: &[u8], allowed: &[&str]) -> Result<Map<String, Value>, ApiError> {
    let bad = |message: String| ApiError::new(400, message);
    let value: Value = serde_json::from_slice(body).map_err(|e| bad(format!("invalid JSON: {e}")))?;
    let Value::Object(object) = value else {
        return Err(bad("the body must be a JSON object".into()));
    };
    if let Some(unknown) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
        return Err(bad(format!("unknown field \"{unknown}\"; expected {}", allowed.join(", "))));
    }
    Ok(object)
}
