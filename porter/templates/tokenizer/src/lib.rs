//! A precompiled Hugging Face tokenizer. The reader and encoder live in `tokenizer.rs`, which
//! other crates include as a module with their own `include_bytes!` of a tokenizer.bin.

pub mod tokenizer;

pub use tokenizer::{BlobError, Encoding, Tokenizer};

/// The tokenizer.bin this crate was rendered with.
pub static TOKENIZER_BLOB: &[u8] = include_bytes!("../tokenizer.bin");

/// The embedded tokenizer; "loading" is checking the blob's header.
pub fn embedded() -> Result<Tokenizer<'static>, BlobError> {
    Tokenizer::new(TOKENIZER_BLOB)
}
