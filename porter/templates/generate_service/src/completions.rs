//! `POST /v1/completions`: one generation answered as OpenAI's `text_completion` object, whole or
//! streamed as server-sent events (`data: {chunk}` per piece of text, the chunk with the finish
//! reason, with stream_options.include_usage one more with the usage and no choices, then
//! `data: [DONE]`). The tokens are the ones `POST /generate` gives for the same prompt, seed
//! and sampling (the same `generate::Generation`); only the stop texts and the answer's shape
//! are this API's.
//!
//! finish_reason: "stop" when a stop text was found (the text ends before it) or <|endoftext|>
//! was generated; "length" when max_tokens were generated or the context is full.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::time::{Instant, SystemTime};

use wasi::http::types::{IncomingRequest, Method, ResponseOutparam};

use crate::generate::{self, Generation, Stop};
use crate::openai::{self, CompletionRequest, OpenAiError};
use crate::timing::ServerTiming;
use crate::{config, http, json, stream};

pub fn handle(request: IncomingRequest, out: ResponseOutparam, mut timing: ServerTiming, started: Instant) {
    match prepare(request, &mut timing) {
        Ok((completion, generation)) if completion.stream => stream_events(out, &completion, generation, timing, started),
        Ok((completion, mut generation)) => {
            let body = whole(&completion, &mut generation);
            generation.record(&mut timing);
            timing.record("total", started, None);
            http::respond(out, 200, &body, &timing.header(), &[]);
        }
        Err(error) => {
            timing.record("total", started, None);
            http::respond(out, error.status, &error.to_json(), &timing.header(), &error.headers);
        }
    }
}

fn prepare(request: IncomingRequest, timing: &mut ServerTiming) -> Result<(CompletionRequest, Generation), OpenAiError> {
    http::expect_method(&request.method(), Method::Post, "POST")?;
    let body = http::read_body(request, config::MAX_BODY_BYTES, config::BODY_DEADLINE)?;
    let completion = openai::parse_completion(&body)?;
    let generation = generate::start(&completion.settings, timing)?;
    Ok((completion, generation))
}

fn whole(completion: &CompletionRequest, generation: &mut Generation) -> String {
    let mut text = String::new();
    let finish = complete(generation, &completion.stop, |piece| {
        text.push_str(piece);
        true
    });
    let answer = Answer::new(completion);
    let choice = answer.choice(&text, finish, completion.return_token_ids.then_some(&generation.tokens[..]));
    answer.object(&json::array([choice])).raw("usage", &usage(generation)).finish()
}

fn stream_events(out: ResponseOutparam, completion: &CompletionRequest, mut generation: Generation, timing: ServerTiming,
                 started: Instant) {
    let Some(streaming) = stream::start(out, "text/event-stream", &timing.header()) else { return };
    let answer = Answer::new(completion);
    let send = |choices: &str, usage: Option<String>| {
        let chunk = answer.object(choices);
        let chunk = match (completion.include_usage, usage) {
            (false, _) => chunk,
            (true, usage) => chunk.raw("usage", usage.as_deref().unwrap_or("null")),
        };
        streaming.write(&format!("data: {}\n\n", chunk.finish()))
    };
    let finish = complete(&mut generation, &completion.stop, |piece| send(&json::array([answer.choice(piece, None, None)]), None));
    let finished = finish.is_some_and(|reason| {
        let tokens = completion.return_token_ids.then_some(&generation.tokens[..]);
        send(&json::array([answer.choice("", Some(reason), tokens)]), None)
            && (!completion.include_usage || send("[]", Some(usage(&generation))))
            && streaming.write("data: [DONE]\n\n")
    });
    let mut trailing = ServerTiming::default();
    generation.record(&mut trailing);
    trailing.record("total", started, None);
    let stop = if finished { finish.unwrap_or_default() } else { "client-gone" };
    streaming.finish(&trailing.header(), stop);
}

/// Runs the generation, handing on the text the stop texts let through, piece by piece, to
/// `on_text` (false: the client went away); returns the finish reason, None if the client left.
fn complete(generation: &mut Generation, stops: &[String], mut on_text: impl FnMut(&str) -> bool) -> Option<&'static str> {
    let mut text = StopText::new(stops);
    let mut gone = false;
    generation.run(|piece| {
        let passed = text.push(piece);
        gone = !passed.is_empty() && !on_text(&passed);
        !gone && !text.found
    });
    if gone {
        return None;
    }
    if text.found {
        return Some("stop");
    }
    let rest = text.finish();
    if !rest.is_empty() && !on_text(&rest) {
        return None;
    }
    Some(match generation.stop {
        Some(Stop::EndOfText) => "stop",
        _ => "length",
    })
}

/// The generated text with the stop texts taken out: text is handed on only once no stop text
/// can begin in it, so a streaming client never receives text that a later token turns into
/// the start of a stop text, and the text ends before the earliest stop text found.
struct StopText<'s> {
    stops: &'s [String],
    held: String,
    found: bool,
}

impl<'s> StopText<'s> {
    fn new(stops: &'s [String]) -> Self {
        StopText { stops, held: String::new(), found: false }
    }

    /// The text that can be handed on once `piece` has come.
    fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if let Some(at) = self.stops.iter().filter_map(|stop| self.held.find(stop.as_str())).min() {
            self.found = true;
            self.held.truncate(at);
            return std::mem::take(&mut self.held);
        }
        let keep = self.start_of_a_stop();
        self.held.drain(..self.held.len() - keep).collect()
    }

    /// The length in bytes of the longest end of the held text that a stop text begins with.
    fn start_of_a_stop(&self) -> usize {
        let ends = (1..=self.held.len()).rev().map(|n| self.held.len() - n);
        ends.filter(|&at| self.held.is_char_boundary(at))
            .find(|&at| self.stops.iter().any(|stop| stop.starts_with(&self.held[at..])))
            .map_or(0, |at| self.held.len() - at)
    }

    /// What was held back, once no more text will come (no stop text was found in it).
    fn finish(self) -> String {
        self.held
    }
}

fn usage(generation: &Generation) -> String {
    let completion_tokens = generation.tokens.len();
    json::Object::new()
        .number("prompt_tokens", generation.prompt_tokens)
        .number("completion_tokens", completion_tokens)
        .number("total_tokens", generation.prompt_tokens + completion_tokens)
        .finish()
}

/// What every object of one answer shares: its id, creation time and model name.
struct Answer<'r> {
    id: String,
    created: u64,
    model: &'r str,
}

impl<'r> Answer<'r> {
    fn new(completion: &'r CompletionRequest) -> Self {
        // Distinct in every instance: std seeds RandomState from wasi's random_get.
        let random = RandomState::new().build_hasher().finish();
        let created = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let model = completion.model.as_deref().unwrap_or(config::MODEL_ID);
        Answer { id: format!("cmpl-{random:016x}"), created, model }
    }

    /// The `text_completion` object up to its choices; the caller adds usage and finishes it.
    fn object(&self, choices: &str) -> json::Object {
        json::Object::new()
            .string("id", &self.id)
            .string("object", "text_completion")
            .number("created", self.created)
            .string("model", self.model)
            .raw("choices", choices)
    }

    fn choice(&self, text: &str, finish: Option<&str>, tokens: Option<&[u32]>) -> String {
        let choice = json::Object::new()
            .string("text", text)
            .number("index", 0)
            .raw("logprobs", "null")
            .raw("finish_reason", &finish.map_or("null".to_string(), json::quote));
        match tokens {
            Some(ids) => choice.raw("token_ids", &json::array(ids.iter().map(u32::to_string))),
            None => choice,
        }
        .finish()
    }
}
