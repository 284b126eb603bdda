//! The JSON error every bad request gets (shared by porter's services; each api.rs adds its own
//! shorthands for the statuses it uses).

use crate::json;

#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    /// For 405: the method the route accepts (the Allow header).
    pub allow: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: u16, message: impl Into<String>) -> Self {
        ApiError { status, message: message.into(), allow: None }
    }

    pub fn to_json(&self) -> String {
        json::Object::new().string("error", &self.message).number("status", self.status).finish()
    }
}
