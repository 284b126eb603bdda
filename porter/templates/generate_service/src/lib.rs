//! A text-generation service as a wasi:http proxy component (Spin, `wasmtime serve`).
//!
//! Routes:
//!   GET  /ping      answers at once, before the tokenizer or the model is touched;
//!   POST /generate  {"prompt", "maxTokens"?, "temperature"?, "topK"?, "seed"?, "stream"?,
//!                   "stopAtEndOfText"?} -> {"text", "tokens", "promptTokens", "stop"}, or with
//!                   "stream": true the generated text itself, streamed as it is produced;
//!   POST /tokenize  {"prompt"} -> {"tokens", "promptTokens", "text"} (the ids, and the text
//!                   decoded back from them);
//!   POST /v1/completions  OpenAI's completions API (completions.rs, openai.rs), its errors in
//!                   OpenAI's shape.
//! Every response carries a Server-Timing header; errors are JSON.
//!
//! The platform starts a fresh instance for every request, so nothing is cached between
//! requests: the tokenizer and the weights are read in place from the component's own data.
//!
//! The generated decoder (templates/rust_decoder) is the crate `decoder`, a Cargo path
//! dependency rendered beside this one.

#[cfg(not(target_feature = "simd128"))]
compile_error!("built without simd128: porter's generated .cargo/config.toml sets -C target-feature=+simd128");

mod api;
mod bpe;
mod completions;
mod config;
mod generate;
mod openai;
mod sample;
mod stream;
mod text;

// The wasi:http glue porter's services share (templates/service_common).
use service_common::{error, http, json, timing};

use std::time::Instant;

use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

use api::ApiError;
use generate::Generation;
use timing::ServerTiming;

struct Service;

wasi::http::proxy::export!(Service);

enum Reply {
    Json(String),
    Stream(Generation),
}

impl wasi::exports::http::incoming_handler::Guest for Service {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let started = Instant::now();
        let mut timing = ServerTiming::default();
        // POST / is the main route (OpenAI's completions), as Hugging Face's endpoints answer.
        if matches!(http::path(&request).as_str(), "/v1/completions" | "/") {
            return completions::handle(request, response_out, timing, started);
        }
        let (status, body, headers) = match route(request, &mut timing) {
            Ok(Reply::Json(body)) => (200, body, Vec::new()),
            Ok(Reply::Stream(generation)) => return stream_text(response_out, generation, timing, started),
            Err(error) => (error.status, error.to_json(), error.headers()),
        };
        timing.record("total", started, None);
        http::respond(response_out, status, &body, &timing.header(), &headers);
    }
}

/// Dispatches on the path first (unknown path: 404), then on the method (wrong one: 405).
fn route(request: IncomingRequest, timing: &mut ServerTiming) -> Result<Reply, ApiError> {
    let path = http::path(&request);
    let method = request.method();
    match path.as_str() {
        "/health" | "/ping" => {
            http::expect_method(&method, Method::Get, "GET")?;
            Ok(Reply::Json(json::Object::new().string("status", "ok").finish()))
        }
        "/info" => {
            http::expect_method(&method, Method::Get, "GET")?;
            Ok(Reply::Json(info()))
        }
        "/generate" => {
            http::expect_method(&method, Method::Post, "POST")?;
            let body = http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)?;
            let parsed = api::parse_generate(&body)?;
            let generation = generate::start(&parsed.settings, timing).map_err(api::refused)?;
            if parsed.stream {
                return Ok(Reply::Stream(generation));
            }
            Ok(Reply::Json(generate_json(generation, timing)))
        }
        "/tokenize" => {
            http::expect_method(&method, Method::Post, "POST")?;
            let body = http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)?;
            Ok(Reply::Json(tokenize_json(&api::parse_tokenize(&body)?, timing)))
        }
        _ => Err(ApiError::new(404, format!("no route {path}; try POST /v1/completions (or /), POST /generate, POST /tokenize, GET /info or GET /health"))),
    }
}

/// TEI's /info fields that apply to a decoder: what it is, how long an input may be, what it reproduces.
fn info() -> String {
    json::Object::new()
        .string("model_id", config::MODEL_ID)
        .string("model_sha", config::MODEL_SHA256)
        .string("task", "text-generation")
        .number("max_input_length", decoder::model::N_CTX - 1)
        .number("vocab", decoder::model::VOCAB)
        .string("version", config::PORTER_VERSION)
        .string("reference", config::REFERENCE)
        .finish()
}

fn generate_json(mut generation: Generation, timing: &mut ServerTiming) -> String {
    let mut text = String::new();
    generation.run(|piece| {
        text.push_str(piece);
        true
    });
    generation.record(timing);
    let stop = generation.stop.map_or("length", |s| s.name());
    json::Object::new()
        .string("text", &text)
        .raw("tokens", &json::array(generation.tokens.iter().map(u32::to_string)))
        .number("promptTokens", generation.prompt_tokens)
        .string("stop", stop)
        .finish()
}

fn tokenize_json(prompt: &str, timing: &mut ServerTiming) -> String {
    let clock = Instant::now();
    let bpe = bpe::Bpe::embedded();
    let ids = bpe.encode(prompt);
    let mut decoder = text::Utf8Stream::default();
    let mut decoded: String = ids.iter().map(|&id| decoder.push(bpe.decoded_bytes(id))).collect();
    decoded.push_str(&decoder.finish());
    timing.record("tokenizer", clock, Some(format!("{} tokens", ids.len())));
    json::Object::new()
        .raw("tokens", &json::array(ids.iter().map(u32::to_string)))
        .number("promptTokens", ids.len())
        .string("text", &decoded)
        .finish()
}

/// Sends the headers with what is timed so far, then the text as it is generated; the rest of
/// the timing and the stop reason ("client-gone" when the client left early) go into trailers.
fn stream_text(out: ResponseOutparam, mut generation: Generation, timing: ServerTiming, started: Instant) {
    let Some(streaming) = stream::start(out, "text/plain; charset=utf-8", &timing.header()) else { return };
    generation.run(|piece| streaming.write(piece));
    let mut trailing = ServerTiming::default();
    generation.record(&mut trailing);
    trailing.record("total", started, None);
    let stop = generation.stop.map_or("client-gone", |s| s.name());
    streaming.finish(&trailing.header(), stop);
}
