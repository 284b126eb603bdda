//! A precompiled Hugging Face tokenizer, read in place from the tokenizer.bin beside this crate's
//! Cargo.toml. The check program (main.rs) and the redaction service (a Cargo path dependency on
//! this crate) call `embedded()`.

pub mod tokenizer;

pub use tokenizer::{BlobError, Encoding, Tokenizer};

/// The tokenizer.bin this crate was rendered with.
pub static TOKENIZER_BLOB: &[u8] = include_bytes!("../tokenizer.bin");

/// The embedded tokenizer; "loading" is checking the blob's header.
pub fn embedded() -> Result<Tokenizer<'static>, BlobError> {
    Tokenizer::new(TOKENIZER_BLOB)
}
