//! The Server-Timing response header (W3C Server Timing): `name;dur=ms[;desc="..."]`, comma
//! separated, so that a client sees where a request's time went (`curl -D -`, browser devtools).
//!
//! Names written by the service: tokenizer (checking the embedded tokenizer), model (walking the
//! embedded weights), encode (tokenizing the text), forward (all windows; desc = the window
//! count), matmul / attention / other (the forward time by phase), decode (labels -> spans,
//! recognisers, placeholders), total (the whole handler).

use std::fmt::Write as _;
use std::time::Instant;

#[derive(Default)]
pub struct ServerTiming {
    entries: Vec<(&'static str, f64, Option<String>)>,
}

impl ServerTiming {
    /// Adds the time since `since` under `name`.
    pub fn record(&mut self, name: &'static str, since: Instant, description: Option<String>) {
        self.add(name, since.elapsed().as_secs_f64() * 1000.0, description);
    }

    pub fn add(&mut self, name: &'static str, ms: f64, description: Option<String>) {
        self.entries.push((name, ms, description));
    }

    pub fn header(&self) -> String {
        let mut header = String::new();
        for (i, (name, ms, description)) in self.entries.iter().enumerate() {
            if i > 0 {
                header.push_str(", ");
            }
            let _ = write!(header, "{name};dur={ms:.2}");
            if let Some(text) = description {
                // Descriptions are the service's own short ASCII text; no quoting needed inside.
                let _ = write!(header, ";desc=\"{text}\"");
            }
        }
        header
    }
}
