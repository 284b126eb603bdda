//! An encoder model as a wasi:http proxy component (Spin, `wasmtime serve`), in the APIs clients
//! already speak: Text Embeddings Inference, OpenAI and the Hugging Face Inference API.
//!
//! Routes (config::TASK says which of the task routes this build serves):
//!   GET  /health, GET /ping   answer at once, before the tokenizer or the model is touched;
//!   GET  /info                TEI's model description (id, sha256, task, max input length, ...);
//!   POST /tokenize            TEI's: {"inputs", "add_special_tokens"} -> [[{"id", "text",
//!                             "special", "start", "stop"}]] (code-point offsets);
//!   embeddings:               POST /embed (TEI), POST /v1/embeddings (OpenAI), POST / (= /embed);
//!   sequence-classification:  POST /predict (TEI), POST / (the Hugging Face API's shape);
//!   token-classification:     POST /predict and POST / (the Hugging Face pipeline's shape, tokens.rs).
//! Every response carries a Server-Timing header; every error is JSON {"error", "error_type",
//! "status"} (TEI's fields). Each input is one model window; a batch is bounded by MAX_BATCH,
//! the request by REQUEST_BUDGET_MS (503) and the body's arrival by BODY_DEADLINE (408).

#[cfg(not(target_feature = "simd128"))]
compile_error!("built without simd128: porter's generated .cargo/config.toml sets -C target-feature=+simd128");

mod api;
mod classify;
mod config;
mod embed;
mod encode;
mod tokens;

// The wasi:http glue porter's services share (templates/service_common).
use service_common::{budget, error, http, json, timing};

use std::time::Instant;

use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

use encoder::model::WIDTH;
use error::ApiError;
use timing::ServerTiming;

// The labels rendered into config.rs must be the model's own outputs.
const _: () = assert!(encoder::model::OUTPUT_TOKENS == config::TOKEN_OUTPUT && encoder::model::SEQ == config::WINDOW);
const _: () = assert!(config::LABELS.is_empty() || config::LABELS.len() == WIDTH);

struct Service;

wasi::http::proxy::export!(Service);

impl wasi::exports::http::incoming_handler::Guest for Service {
    fn handle(request: IncomingRequest, response_out: ResponseOutparam) {
        let started = Instant::now();
        let mut timing = ServerTiming::default();
        let (status, body, headers) = match route(request, started, &mut timing) {
            Ok(body) => (200, body, Vec::new()),
            Err(mut error) => {
                error.error_type.get_or_insert(error_type(error.status));
                (error.status, error.to_json(), error.headers())
            }
        };
        timing.record("total", started, None);
        http::respond(response_out, status, &body, &timing.header(), &headers);
    }
}

/// TEI's error classes by status, for the errors that do not name their own.
fn error_type(status: u16) -> &'static str {
    match status {
        503 => "Overloaded",
        500 => "Backend",
        _ => "Validation",
    }
}

fn route(request: IncomingRequest, started: Instant, timing: &mut ServerTiming) -> Result<String, ApiError> {
    let path = http::path(&request);
    let method = request.method();
    let embeddings = config::TASK == "embeddings";
    let tokens = config::TOKEN_OUTPUT;
    match path.as_str() {
        "/health" | "/ping" => {
            http::expect_method(&method, Method::Get, "GET")?;
            Ok(json::Object::new().string("status", "ok").finish())
        }
        "/info" => {
            http::expect_method(&method, Method::Get, "GET")?;
            Ok(info())
        }
        "/tokenize" => tokenize(&api::parse_tokenize(&post_body(request, &method)?)?, timing),
        "/" | "/embed" if embeddings => {
            let parsed = api::parse_embed(&post_body(request, &method)?, WIDTH)?;
            let (rows, _) = embed_rows(&parsed, started, timing)?;
            Ok(embed::tei_json(&rows, &parsed))
        }
        "/v1/embeddings" if embeddings => {
            let body = post_body(request, &method)?;
            let model = serde_json::from_slice::<serde_json::Value>(&body).ok();
            let model = model.as_ref().and_then(|v| v.get("model")?.as_str().map(str::to_string));
            let parsed = api::parse_openai(&body, WIDTH)?;
            let (rows, tokens) = embed_rows(&parsed, started, timing)?;
            Ok(embed::openai_json(&rows, &parsed, model.as_deref(), tokens))
        }
        "/" | "/predict" if tokens => {
            let parsed = api::parse_token_request(&post_body(request, &method)?)?;
            predict_tokens(&parsed, started, timing)
        }
        "/predict" if !embeddings => {
            let parsed = api::parse_predict(&post_body(request, &method)?)?;
            predict(&parsed, started, timing, parsed.inputs.single)
        }
        "/" if !embeddings => {
            // The Hugging Face API answers one list of labels per input, a single text included.
            let parsed = api::parse_hf_classification(&post_body(request, &method)?)?;
            predict(&parsed, started, timing, false)
        }
        _ => {
            let routes = if embeddings { "POST /embed, POST /v1/embeddings" } else { "POST /predict" };
            Err(ApiError::new(404, format!("no route {path}; this {} service has {routes}, POST /, POST /tokenize, GET /info and GET /health", config::TASK)))
        }
    }
}

fn post_body(request: IncomingRequest, method: &Method) -> Result<Vec<u8>, ApiError> {
    http::expect_method(method, Method::Post, "POST")?;
    http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)
}

/// The rows of an embedding request, and how many tokens its windows held (OpenAI's usage).
fn embed_rows(request: &api::EmbedRequest, started: Instant, timing: &mut ServerTiming) -> Result<(Vec<Vec<f32>>, usize), ApiError> {
    let inputs = encode::tokenize_all(&request.inputs.texts, request.truncation, timing)?;
    let tokens = inputs.iter().map(|t| t.ids.len()).sum();
    let rows = encode::run_all(&inputs, started, timing)?;
    Ok((embed::finish(rows, request.normalize), tokens))
}

fn predict(request: &api::PredictRequest, started: Instant, timing: &mut ServerTiming, single: bool) -> Result<String, ApiError> {
    let inputs = encode::tokenize_all(&request.inputs.texts, request.truncation, timing)?;
    let logits = encode::run_all(&inputs, started, timing)?;
    let mut ranked = logits.iter().map(|l| classify::ranked(&classify::scores(l, request.raw_scores), request.top_k));
    Ok(if single { ranked.next().unwrap_or_default() } else { json::array(ranked) })
}

fn predict_tokens(request: &api::TokenRequest, started: Instant, timing: &mut ServerTiming) -> Result<String, ApiError> {
    let inputs = encode::tokenize_all(&request.inputs.texts, encode::Truncation { enabled: false, from_left: false }, timing)?;
    let logits = encode::run_all(&inputs, started, timing)?;
    let mut replies = request.inputs.texts.iter().zip(&inputs).zip(&logits).map(|((text, tokens), logits)| {
        let entities = tokens::entities(tokens, logits, request.raw_scores);
        tokens::to_json(text, &entities, request.aggregation, &request.ignore_labels)
    });
    Ok(if request.inputs.single { replies.next().unwrap_or_default() } else { json::array(replies) })
}

fn tokenize(request: &api::TokenizeRequest, timing: &mut ServerTiming) -> Result<String, ApiError> {
    let started = Instant::now();
    let tokenizer = tokenizer::embedded().map_err(|e| ApiError::new(500, e.to_string()))?;
    let mut all = Vec::with_capacity(request.inputs.texts.len());
    for text in &request.inputs.texts {
        let tokens = encode::tokenize(&tokenizer, text)?;
        let chars: Vec<char> = text.chars().collect();
        let listed = (0..tokens.ids.len()).filter(|&i| request.add_special_tokens || !tokens.special[i]).map(|i| {
            let (start, stop) = tokens.offsets[i];
            let object = json::Object::new().number("id", tokens.ids[i]);
            let object = if tokens.special[i] {
                object.raw("text", "null").raw("special", "true").raw("start", "null").raw("stop", "null")
            } else {
                let piece: String = chars[start as usize..stop as usize].iter().collect();
                object.string("text", &piece).raw("special", "false").number("start", start).number("stop", stop)
            };
            object.finish()
        });
        all.push(json::array(listed));
    }
    timing.record("tokenizer", started, None);
    Ok(json::array(all))
}

/// TEI's /info fields, plus porter's own: the task, the window and whose arithmetic it is.
fn info() -> String {
    let model_type = if config::TASK == "embeddings" {
        json::Object::new().raw("embedding", &json::Object::new().string("pooling", "model").finish()).finish()
    } else {
        let id2label = config::LABELS.iter().enumerate().fold(json::Object::new(), |o, (i, l)| o.string(&i.to_string(), l));
        let label2id = config::LABELS.iter().enumerate().fold(json::Object::new(), |o, (i, l)| o.number(l, i));
        let classifier = json::Object::new().raw("id2label", &id2label.finish()).raw("label2id", &label2id.finish());
        json::Object::new().raw("classifier", &classifier.finish()).finish()
    };
    json::Object::new()
        .string("model_id", config::MODEL_ID)
        .string("model_sha", config::MODEL_SHA256)
        .string("model_dtype", "float32")
        .raw("model_type", &model_type)
        .string("task", config::TASK)
        .number("max_input_length", config::WINDOW)
        .number("max_client_batch_size", config::MAX_BATCH)
        .number("max_batch_tokens", config::WINDOW * config::MAX_BATCH)
        .number("width", WIDTH)
        .string("version", config::PORTER_VERSION)
        .string("reference", config::REFERENCE)
        .finish()
}
