//! An encoder model as a wasi:http proxy component (Spin, `wasmtime serve`), in the APIs clients
//! already speak: Text Embeddings Inference, OpenAI and the Hugging Face Inference API.
//!
//! Routes (config::TASK says which of the task routes this build serves):
//!   GET  /health, GET /ping   answer at once, before the tokenizer or the model is touched;
//!   GET  /info                TEI's model description (id, sha256, task, max input length, ...);
//!   POST /tokenize            TEI's: {"inputs", "add_special_tokens"} -> [[{"id", "text",
//!                             "special", "start", "stop"}]] (code-point offsets);
//!   embeddings:               POST /embed (TEI), POST /v1/embeddings (OpenAI), POST / (= /embed);
//!   sequence-classification:  POST /predict (TEI: texts and [a, b] pairs), POST / (the Hugging Face
//!                             API's shape);
//!   rerank (one output):      POST /rerank (TEI: a query against texts, sorted), POST / (= /rerank),
//!                             POST /predict;
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

use encode::Sequence;
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
        http::handle(request, response_out, |request, started, timing| {
            route(request, started, timing).map_err(|mut error| {
                error.error_type.get_or_insert(error_type(error.status));
                error
            })
        });
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
    let rerank = config::TASK == "rerank";
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
        "/" | "/rerank" if rerank => {
            let parsed = api::parse_rerank(&post_body(request, &method)?)?;
            let pairs: Vec<Sequence> = parsed.texts.iter().map(|t| Sequence::Pair(parsed.query.clone(), t.clone())).collect();
            let inputs = encode::tokenize_all(&pairs, parsed.truncation, timing)?;
            let logits = encode::run_all(&inputs, started, timing)?;
            let scores: Vec<f32> = logits.iter().map(|l| classify::scores(l, parsed.raw_scores)[0]).collect();
            classify::ranks(&scores, parsed.return_text.then_some(&parsed.texts[..]))
        }
        "/predict" if !embeddings => {
            let parsed = api::parse_predict(&post_body(request, &method)?)?;
            predict(&parsed, started, timing, parsed.single)
        }
        "/" if !embeddings => {
            // The Hugging Face API answers one list of labels per input, a single text included.
            let parsed = api::parse_hf_classification(&post_body(request, &method)?)?;
            predict(&parsed, started, timing, false)
        }
        _ => {
            let routes = match () {
                _ if embeddings => "POST /embed, POST /v1/embeddings",
                _ if rerank => "POST /rerank, POST /predict",
                _ => "POST /predict",
            };
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
    let inputs = encode::tokenize_all(&singles(&request.inputs.texts), request.truncation, timing)?;
    let tokens = inputs.iter().map(|t| t.ids.len()).sum();
    let rows = encode::run_all(&inputs, started, timing)?;
    Ok((embed::finish(rows, request.normalize), tokens))
}

fn predict(request: &api::PredictRequest, started: Instant, timing: &mut ServerTiming, single: bool) -> Result<String, ApiError> {
    let inputs = encode::tokenize_all(&request.inputs, request.truncation, timing)?;
    let logits = encode::run_all(&inputs, started, timing)?;
    let mut ranked = logits.iter().map(|l| classify::ranked(&classify::scores(l, request.raw_scores), request.top_k));
    Ok(if single { ranked.next().unwrap_or_default() } else { json::array(ranked) })
}

fn singles(texts: &[String]) -> Vec<Sequence> {
    texts.iter().cloned().map(Sequence::Single).collect()
}

fn predict_tokens(request: &api::TokenRequest, started: Instant, timing: &mut ServerTiming) -> Result<String, ApiError> {
    let no_truncation = encode::Truncation { enabled: false, from_left: false };
    let inputs = encode::tokenize_all(&singles(&request.inputs.texts), no_truncation, timing)?;
    let logits = encode::run_all(&inputs, started, timing)?;
    let tokenizer = tokenizer::embedded().map_err(|e| ApiError::new(500, e.to_string()))?;
    let word_aware = tokenizer.continuing_subword_prefix().is_some();
    let mut replies = request.inputs.texts.iter().zip(&inputs).zip(&logits).map(|((text, tokens), logits)| {
        let text_tokens = tokens::text_tokens(text, tokens, logits, request.raw_scores, word_aware);
        tokens::to_json(text, &text_tokens, request.aggregation, &request.ignore_labels)
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
        let kind = if config::TASK == "rerank" { "reranker" } else { "classifier" };
        json::Object::new().raw(kind, &classifier.finish()).finish()
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
