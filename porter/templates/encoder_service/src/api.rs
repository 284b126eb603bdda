//! Request bodies of the encoder service's routes, in the field names of the APIs they follow:
//! Text Embeddings Inference (/embed, /predict, /tokenize), OpenAI (/v1/embeddings) and the
//! Hugging Face Inference API (POST /). 400 for malformed JSON, a wrong type or an unknown field;
//! 422 for a value the service cannot honour (text pairs to an embedding model, another dimension
//! count).

use serde_json::{Map, Value};

use crate::encode::{Sequence, Truncation};
use crate::error::{parse_object, ApiError};

fn bad(message: impl Into<String>) -> ApiError {
    crate::encode::validation(400, message.into())
}

fn unsupported(message: impl Into<String>) -> ApiError {
    crate::encode::validation(422, message.into())
}

/// One text or a batch of them; `single` says which the reply mirrors.
pub struct Inputs {
    pub texts: Vec<String>,
    pub single: bool,
}

pub struct EmbedRequest {
    pub inputs: Inputs,
    pub normalize: bool,
    pub truncation: Truncation,
    pub base64: bool,
}

pub struct PredictRequest {
    pub inputs: Vec<Sequence>,
    /// Whether the reply is one input's labels (TEI: a string or one [a, b] pair) or a list.
    pub single: bool,
    pub raw_scores: bool,
    pub truncation: Truncation,
    /// The Hugging Face API's top_k (None: every label).
    pub top_k: Option<usize>,
}

pub struct TokenizeRequest {
    pub inputs: Inputs,
    pub add_special_tokens: bool,
}

/// TEI's POST /embed (and POST / for embeddings, where huggingface_hub's feature_extraction
/// sends the same fields).
pub fn parse_embed(body: &[u8], width: usize) -> Result<EmbedRequest, ApiError> {
    let allowed = ["inputs", "normalize", "truncate", "truncation_direction", "prompt_name", "dimensions", "encoding_format"];
    let mut object = parse_object(body, &allowed)?;
    let inputs = texts(object.remove("inputs"), "inputs")?;
    if !matches!(object.remove("prompt_name"), None | Some(Value::Null)) {
        return Err(unsupported("\"prompt_name\": this model has no prompts"));
    }
    check_dimensions(object.remove("dimensions"), width)?;
    let base64 = encoding_format(object.remove("encoding_format"))?;
    let normalize = flag(&mut object, "normalize", true)?;
    Ok(EmbedRequest { inputs, normalize, truncation: truncation(&mut object)?, base64 })
}

/// OpenAI's POST /v1/embeddings: {"input", "model", "encoding_format", "dimensions", "user"}.
pub fn parse_openai(body: &[u8], width: usize) -> Result<EmbedRequest, ApiError> {
    let mut object = parse_object(body, &["input", "model", "encoding_format", "dimensions", "user"])?;
    let inputs = texts(object.remove("input"), "input")?;
    check_dimensions(object.remove("dimensions"), width)?;
    let base64 = encoding_format(object.remove("encoding_format"))?;
    let no_truncation = Truncation { enabled: false, from_left: false };
    Ok(EmbedRequest { inputs, normalize: true, truncation: no_truncation, base64 })
}

/// TEI's POST /predict: {"inputs", "raw_scores", "truncate", "truncation_direction"}, its inputs
/// as TEI reads them: "a" or ["a"] one text, ["a", "b"] one pair, [["a"], ["a", "b"], ...] a batch
/// of texts and pairs.
pub fn parse_predict(body: &[u8]) -> Result<PredictRequest, ApiError> {
    let mut object = parse_object(body, &["inputs", "raw_scores", "truncate", "truncation_direction"])?;
    let (inputs, single) = predict_inputs(object.remove("inputs"))?;
    let raw_scores = flag(&mut object, "raw_scores", false)?;
    Ok(PredictRequest { inputs, single, raw_scores, truncation: truncation(&mut object)?, top_k: None })
}

fn predict_inputs(value: Option<Value>) -> Result<(Vec<Sequence>, bool), ApiError> {
    const EXPECTED: &str = "\"inputs\" must be a string, a pair [string, string] or a batch [[string], [string, string], ...]";
    match value {
        Some(Value::String(text)) => Ok((vec![Sequence::Single(text)], true)),
        Some(Value::Array(values)) if values.first().is_some_and(Value::is_string) => Ok((vec![sequence(values)?], true)),
        Some(Value::Array(values)) => {
            let batch = values.into_iter().map(|v| match v {
                Value::Array(strings) => sequence(strings),
                _ => Err(bad(EXPECTED)),
            });
            Ok((batch.collect::<Result<_, _>>()?, false))
        }
        None => Err(bad("missing \"inputs\"")),
        Some(_) => Err(bad(EXPECTED)),
    }
}

/// ["a"] or ["a", "b"].
fn sequence(values: Vec<Value>) -> Result<Sequence, ApiError> {
    let mut strings = values.into_iter().map(|v| match v {
        Value::String(s) => Ok(s),
        _ => Err(bad("a sequence must be [string] or [string, string]")),
    });
    match (strings.next(), strings.next(), strings.next()) {
        (Some(a), None, None) => Ok(Sequence::Single(a?)),
        (Some(a), Some(b), None) => Ok(Sequence::Pair(a?, b?)),
        _ => Err(bad("a sequence must be [string] or [string, string]")),
    }
}

pub struct RerankRequest {
    pub query: String,
    pub texts: Vec<String>,
    pub raw_scores: bool,
    pub return_text: bool,
    pub truncation: Truncation,
}

/// TEI's POST /rerank: {"query", "texts", "truncate", "truncation_direction", "raw_scores",
/// "return_text"}; no texts is TEI's 400 "Empty".
pub fn parse_rerank(body: &[u8]) -> Result<RerankRequest, ApiError> {
    let allowed = ["query", "texts", "truncate", "truncation_direction", "raw_scores", "return_text"];
    let mut object = parse_object(body, &allowed)?;
    let query = match object.remove("query") {
        Some(Value::String(query)) => query,
        None => return Err(bad("missing \"query\"")),
        Some(_) => return Err(bad("\"query\" must be a string")),
    };
    let texts = match texts(object.remove("texts"), "texts")? {
        Inputs { single: true, .. } => return Err(bad("\"texts\" must be an array of strings")),
        Inputs { texts, .. } => texts,
    };
    if texts.is_empty() {
        let mut error = ApiError::new(400, "`texts` cannot be empty");
        error.error_type = Some("Empty");
        return Err(error);
    }
    let raw_scores = flag(&mut object, "raw_scores", false)?;
    let return_text = flag(&mut object, "return_text", false)?;
    Ok(RerankRequest { query, texts, raw_scores, return_text, truncation: truncation(&mut object)? })
}

/// The Hugging Face Inference API's text classification (POST /): {"inputs", "parameters":
/// {"top_k", "function_to_apply": "softmax" | "sigmoid" | "none"}}.
pub fn parse_hf_classification(body: &[u8]) -> Result<PredictRequest, ApiError> {
    let mut object = parse_object(body, &["inputs", "parameters"])?;
    let inputs = texts(object.remove("inputs"), "inputs")?.texts.into_iter().map(Sequence::Single).collect();
    let mut parameters = match object.remove("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(bad("\"parameters\" must be an object")),
    };
    if let Some(unknown) = parameters.keys().find(|k| !["top_k", "function_to_apply"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter \"{unknown}\"; expected top_k, function_to_apply")));
    }
    let top_k = match parameters.remove("top_k") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|k| k > 0) => n.as_u64().map(|k| k as usize),
        Some(_) => return Err(bad("\"top_k\" must be a positive integer")),
    };
    let raw_scores = match parameters.remove("function_to_apply") {
        None | Some(Value::Null) => false,
        Some(Value::String(name)) if name == "none" => true,
        Some(Value::String(name)) if name == crate::classify::SCORE_FUNCTION => false,
        Some(other) => {
            return Err(unsupported(format!(
                "function_to_apply {other}: this model's scores are {} (or \"none\")",
                crate::classify::SCORE_FUNCTION
            )))
        }
    };
    let no_truncation = Truncation { enabled: false, from_left: false };
    Ok(PredictRequest { inputs, single: false, raw_scores, truncation: no_truncation, top_k })
}

/// TEI's POST /tokenize: {"inputs", "add_special_tokens"}.
pub fn parse_tokenize(body: &[u8]) -> Result<TokenizeRequest, ApiError> {
    let mut object = parse_object(body, &["inputs", "add_special_tokens"])?;
    let inputs = texts(object.remove("inputs"), "inputs")?;
    Ok(TokenizeRequest { inputs, add_special_tokens: flag(&mut object, "add_special_tokens", true)? })
}

fn texts(value: Option<Value>, key: &str) -> Result<Inputs, ApiError> {
    match value {
        Some(Value::String(text)) => Ok(Inputs { texts: vec![text], single: true }),
        Some(Value::Array(values)) => {
            let mut texts = Vec::with_capacity(values.len());
            for value in values {
                match value {
                    Value::String(text) => texts.push(text),
                    Value::Array(_) => return Err(unsupported(format!("\"{key}\": text pairs are for POST /predict of a sequence classifier"))),
                    _ => return Err(bad(format!("\"{key}\" must be a string or an array of strings"))),
                }
            }
            Ok(Inputs { texts, single: false })
        }
        None => Err(bad(format!("missing \"{key}\""))),
        Some(_) => Err(bad(format!("\"{key}\" must be a string or an array of strings"))),
    }
}

fn flag(object: &mut Map<String, Value>, key: &str, default: bool) -> Result<bool, ApiError> {
    match object.remove(key) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(b),
        Some(_) => Err(bad(format!("\"{key}\" must be true or false"))),
    }
}

fn truncation(object: &mut Map<String, Value>) -> Result<Truncation, ApiError> {
    let enabled = flag(object, "truncate", false)?;
    let from_left = match object.remove("truncation_direction") {
        None | Some(Value::Null) => false,
        Some(Value::String(d)) if d.eq_ignore_ascii_case("right") => false,
        Some(Value::String(d)) if d.eq_ignore_ascii_case("left") => true,
        Some(_) => return Err(bad("\"truncation_direction\" must be \"Right\" or \"Left\"")),
    };
    Ok(Truncation { enabled, from_left })
}

fn check_dimensions(value: Option<Value>, width: usize) -> Result<(), ApiError> {
    match value {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Number(n)) if n.as_u64() == Some(width as u64) => Ok(()),
        Some(other) => Err(unsupported(format!("\"dimensions\" {other}: this model's embeddings have {width}"))),
    }
}

/// true for "base64" (little-endian float32 bytes, as OpenAI's), false for "float" or none.
fn encoding_format(value: Option<Value>) -> Result<bool, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(false),
        Some(Value::String(f)) if f == "float" => Ok(false),
        Some(Value::String(f)) if f == "base64" => Ok(true),
        Some(_) => Err(bad("\"encoding_format\" must be \"float\" or \"base64\"")),
    }
}

pub struct TokenRequest {
    pub inputs: Inputs,
    pub aggregation: crate::tokens::Aggregation,
    pub ignore_labels: Vec<String>,
    pub raw_scores: bool,
}

/// The Hugging Face token-classification API (POST / and POST /predict): {"inputs", "parameters":
/// {"aggregation_strategy", "ignore_labels"}, "raw_scores"}.
pub fn parse_token_request(body: &[u8]) -> Result<TokenRequest, ApiError> {
    use crate::tokens::Aggregation;

    let mut object = parse_object(body, &["inputs", "parameters", "raw_scores"])?;
    let inputs = texts(object.remove("inputs"), "inputs")?;
    let raw_scores = flag(&mut object, "raw_scores", false)?;
    let mut parameters = match object.remove("parameters") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => map,
        Some(_) => return Err(bad("\"parameters\" must be an object")),
    };
    if let Some(unknown) = parameters.keys().find(|k| !["aggregation_strategy", "ignore_labels"].contains(&k.as_str())) {
        return Err(bad(format!("unknown parameter \"{unknown}\"; expected aggregation_strategy, ignore_labels")));
    }
    let aggregation = match parameters.remove("aggregation_strategy") {
        None | Some(Value::Null) => Aggregation::None,
        Some(Value::String(s)) if s == "none" => Aggregation::None,
        Some(Value::String(s)) if s == "simple" => Aggregation::Simple,
        Some(Value::String(s)) if s == "first" => Aggregation::First,
        Some(Value::String(s)) if s == "average" => Aggregation::Average,
        Some(Value::String(s)) if s == "max" => Aggregation::Max,
        Some(_) => return Err(bad("\"aggregation_strategy\" must be none, simple, first, average or max")),
    };
    let ignore_labels = match parameters.remove("ignore_labels") {
        None | Some(Value::Null) => vec!["O".to_string()],
        Some(Value::Array(values)) => values
            .into_iter()
            .map(|v| match v {
                Value::String(s) => Ok(s),
                _ => Err(bad("\"ignore_labels\" must be an array of label names")),
            })
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(bad("\"ignore_labels\" must be an array of label names")),
    };
    Ok(TokenRequest { inputs, aggregation, ignore_labels, raw_scores })
}
