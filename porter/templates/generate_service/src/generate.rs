//! One generation: the prompt pass, then one decoder step per token, the decoder crate's own
//! `step` with its KV cache (so greedy output is the decoder crate's, token for token).
//!
//! A request is checked against the context before any model work: prompt tokens + max_tokens
//! must fit in N_CTX (else a `Refusal`, which each API words in its own error shape). The last token is only chosen, never fed back, so the cache never holds
//! more than N_CTX - 1 positions.

use std::time::Instant;

use decoder::decoder::{step, Cache, Scratch};
use decoder::model::{Model, N_CTX, VOCAB};

use crate::bpe::Bpe;
use crate::config::END_OF_TEXT;
use crate::sample::{choose, Sampling, SplitMix64};
use crate::text::Utf8Stream;
use crate::timing::ServerTiming;

#[derive(Clone, Copy)]
pub enum Stop {
    /// maxTokens were generated.
    Length,
    /// The prompt and the generated tokens fill the context: no further token could be chosen.
    Context,
    /// <|endoftext|> was generated (it is the last of the returned tokens).
    EndOfText,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Length => "length",
            Stop::Context => "context",
            Stop::EndOfText => "endoftext",
        }
    }
}

/// What a generation needs, whichever API asked for it.
pub struct Settings {
    pub prompt: String,
    pub max_tokens: usize,
    pub sampling: Sampling,
    pub seed: u64,
    /// false: keep generating past <|endoftext|> (as the decoder crate's greedy protocol does).
    pub stop_at_end_of_text: bool,
}

/// Why a request cannot be generated, found before any model work.
pub enum Refusal {
    /// The prompt's tokens and max_tokens do not fit in the context.
    Context { prompt_tokens: usize, max_tokens: usize },
    /// The tokenizer gave an id the model has no row for.
    Vocabulary { token: u32 },
}

impl Refusal {
    /// The message, naming the request's field for the number of tokens to generate.
    pub fn message(&self, max_tokens_field: &str) -> String {
        match self {
            Refusal::Context { prompt_tokens, max_tokens } => format!(
                "the prompt is {prompt_tokens} tokens; with \"{max_tokens_field}\" {max_tokens} that exceeds the \
                 context of {N_CTX} tokens"
            ),
            Refusal::Vocabulary { token } => {
                format!("the prompt has token {token}, past the model's vocabulary of {VOCAB}")
            }
        }
    }
}

pub struct Generation {
    bpe: Bpe,
    model: Model<'static>,
    cache: Cache,
    scratch: Scratch,
    rng: SplitMix64,
    sampling: Sampling,
    max_tokens: usize,
    stop_at_end_of_text: bool,
    /// The token chosen but not yet handed out (the first comes from the prompt pass).
    pending: Option<u32>,
    pub prompt_tokens: usize,
    pub tokens: Vec<u32>,
    pub stop: Option<Stop>,
    /// Time in the decoder steps after the prompt pass, with the sampling.
    decode_ms: f64,
}

/// Tokenizes the prompt, checks it against the context, loads the model and runs the prompt
/// pass; records tokenizer, model and prompt in `timing`.
pub fn start(settings: &Settings, timing: &mut ServerTiming) -> Result<Generation, Refusal> {
    let clock = Instant::now();
    let bpe = Bpe::embedded();
    let ids = bpe.encode(&settings.prompt);
    timing.record("tokenizer", clock, Some(format!("{} tokens", ids.len())));
    if ids.len() + settings.max_tokens > N_CTX {
        return Err(Refusal::Context { prompt_tokens: ids.len(), max_tokens: settings.max_tokens });
    }
    if let Some(&token) = ids.iter().find(|&&id| id as usize >= VOCAB) {
        return Err(Refusal::Vocabulary { token });
    }
    let clock = Instant::now();
    let model = Model::load_embedded();
    let mut cache = Cache::new();
    let mut scratch = Scratch::new(ids.len());
    timing.record("model", clock, None);

    let clock = Instant::now();
    let logits = step(&model, &mut cache, &ids, 1, &mut scratch);
    let sampling = settings.sampling;
    let mut rng = SplitMix64::new(settings.seed);
    let first = choose(&logits, &sampling, &mut rng);
    timing.record("prompt", clock, Some(format!("{} tokens", ids.len())));
    Ok(Generation {
        bpe,
        model,
        cache,
        scratch,
        rng,
        sampling,
        max_tokens: settings.max_tokens,
        stop_at_end_of_text: settings.stop_at_end_of_text,
        pending: Some(first),
        prompt_tokens: ids.len(),
        tokens: Vec::with_capacity(settings.max_tokens),
        stop: None,
        decode_ms: 0.0,
    })
}

impl Generation {
    /// The next token, or None once generation has stopped (`stop` says why).
    fn next_token(&mut self) -> Option<u32> {
        let token = self.pending.take()?;
        self.tokens.push(token);
        self.stop = if self.stop_at_end_of_text && token == END_OF_TEXT {
            Some(Stop::EndOfText)
        } else if self.prompt_tokens + self.tokens.len() == N_CTX {
            Some(Stop::Context)
        } else if self.tokens.len() == self.max_tokens {
            Some(Stop::Length)
        } else {
            None
        };
        if self.stop.is_none() {
            let clock = Instant::now();
            let logits = step(&self.model, &mut self.cache, &[token], 1, &mut self.scratch);
            self.pending = Some(choose(&logits, &self.sampling, &mut self.rng));
            self.decode_ms += clock.elapsed().as_secs_f64() * 1000.0;
        }
        Some(token)
    }

    /// Decodes every remaining token into text, as `on_text` pieces that end on whole characters;
    /// stops early when `on_text` returns false (a streaming client went away).
    pub fn run(&mut self, mut on_text: impl FnMut(&str) -> bool) {
        let mut text = Utf8Stream::default();
        while let Some(token) = self.next_token() {
            let piece = text.push(self.bpe.decoded_bytes(token));
            if !piece.is_empty() && !on_text(&piece) {
                return;
            }
        }
        let rest = text.finish();
        if !rest.is_empty() {
            on_text(&rest);
        }
    }

    /// decode (the steps after the prompt pass) and per_token (their mean).
    pub fn record(&self, timing: &mut ServerTiming) {
        let steps = self.tokens.len().saturating_sub(1);
        timing.add("decode", self.decode_ms, Some(format!("{steps} steps")));
        timing.add("per_token", if steps > 0 { self.decode_ms / steps as f64 } else { 0.0 }, None);
    }
}
