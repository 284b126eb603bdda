//! A JSON object writer that keeps fields in the order they are written (serde_json's own map
//! sorts keys unless it pulls in indexmap), with serde_json doing the string escaping.

pub struct Object {
    out: String,
    empty: bool,
}

impl Object {
    pub fn new() -> Self {
        Object { out: String::from("{"), empty: true }
    }

    fn key(&mut self, key: &str) {
        if !self.empty {
            self.out.push(',');
        }
        self.empty = false;
        self.out.push_str(&quote(key));
        self.out.push(':');
    }

    pub fn string(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        self.out.push_str(&quote(value));
        self
    }

    pub fn number(mut self, key: &str, value: impl std::fmt::Display) -> Self {
        self.key(key);
        self.out.push_str(&value.to_string());
        self
    }

    /// `value` must already be JSON (an array or object written by this module).
    pub fn raw(mut self, key: &str, value: &str) -> Self {
        self.key(key);
        self.out.push_str(value);
        self
    }

    pub fn finish(mut self) -> String {
        self.out.push('}');
        self.out
    }
}

pub fn array(elements: impl IntoIterator<Item = String>) -> String {
    let parts: Vec<String> = elements.into_iter().collect();
    format!("[{}]", parts.join(","))
}

pub fn quote(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// A probability as JSON: four decimals are plenty for a threshold and keep responses short.
pub fn score(value: f32) -> String {
    let rounded = (f64::from(value) * 10_000.0).round() / 10_000.0;
    serde_json::Value::from(rounded).to_string()
}
