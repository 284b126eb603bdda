//! What porter's wasi:http services share: the JSON error every bad request gets (error), the
//! bounded body read with its own deadline and the one JSON response (http), the JSON writer
//! (json), the Server-Timing header (timing) and load shedding against a time budget (budget). A service names these modules at its crate root
//! (`use service_common::{error, http, json, timing};`).

pub mod budget;
pub mod error;
pub mod http;
pub mod json;
pub mod timing;
