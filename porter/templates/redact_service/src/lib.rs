//! A PII redaction service as a wasi:http proxy component (Spin, `wasmtime serve`).
//!
//! Routes:
//!   GET  /ping     answers at once, before the tokenizer or the model is touched, so that the
//!                  cost of a fresh instance plus the network can be measured on its own;
//!   POST /redact   {"text", "labels"?, "minScore"?, "tokens"?} -> {"redactedText", "items"};
//!   POST /restore  {"text", "items"} -> {"restoredText"}.
//! Every response, errors included, is JSON and carries a Server-Timing header; a body that has
//! not arrived within config::BODY_DEADLINE gets 408 (service_common's http.rs). A /redact that
//! would run past the request budget (config::REQUEST_BUDGET_MS) stops between windows and
//! answers 503 with Retry-After (redact.rs), before the host's timeout would kill it.
//!
//! The platform starts a fresh instance for every request, so nothing here is cached between
//! requests: the tokenizer and the weights are read in place from the component's own data.
//!
//! The tokenizer (templates/tokenizer), the forward pass (templates/rust_forward) and the wasi:http
//! glue (templates/service_common) are the crates `tokenizer`, `encoder` and `service_common`,
//! Cargo path dependencies rendered beside this one.

#[cfg(not(target_feature = "simd128"))]
compile_error!("built without simd128: porter's generated .cargo/config.toml sets -C target-feature=+simd128");

mod api;
mod bioes;
mod checks;
mod config;
mod recognise;
mod redact;
mod restore;

// The wasi:http glue porter's services share (templates/service_common).
use service_common::{budget, error, http, json, timing};

use std::time::Instant;

use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

use api::ApiError;
use timing::ServerTiming;

struct Service;

wasi::http::proxy::export!(Service);

impl wasi::exports::http::incoming_handler::Guest for Service {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        http::handle(request, response_out, route);
    }
}

/// Dispatches on the path first (unknown path: 404), then on the method (wrong one: 405).
fn route(request: IncomingRequest, started: Instant, timing: &mut ServerTiming) -> Result<String, ApiError> {
    let path = http::path(&request);
    let method = request.method();
    match path.as_str() {
        "/ping" => {
            http::expect_method(&method, Method::Get, "GET")?;
            Ok(json::Object::new().string("status", "ok").finish())
        }
        "/redact" => {
            http::expect_method(&method, Method::Post, "POST")?;
            let body = http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)?;
            let parsed = api::parse_redact(&body)?;
            redact::redact(&parsed, started, timing).map(|outcome| outcome.to_json(parsed.tokens))
        }
        "/restore" => {
            http::expect_method(&method, Method::Post, "POST")?;
            let body = http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)?;
            let parsed = api::parse_restore(&body)?;
            let restored = restore::restore(&parsed.text, &parsed.items);
            Ok(json::Object::new().string("restoredText", &restored).finish())
        }
        _ => Err(ApiError::new(404, format!("no route {path}; try POST /redact, POST /restore or GET /ping"))),
    }
}
