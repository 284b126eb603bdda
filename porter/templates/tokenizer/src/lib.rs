//! A tokenizer that reads porter's tokenizer.bin in place: no parsing, no hash maps, std only.
//!
//! `Tokenizer::new(blob)` checks the header (magic, version, size, section bounds) and keeps
//! slices into the blob; `encode(text)` returns the ids and, for every id, the offsets of the
//! original text it came from: `offsets` in UTF-8 bytes (exact) and `char_offsets` in Unicode
//! code points (what Python's `tokenizers` reports, converted the way it converts them). Special
//! tokens added by the post-processor have offsets (0, 0). `encode_pair(a, b, truncation)` is the
//! pair template's encoding (each text's offsets into that text, the template's token types),
//! optionally cut by tokenizers' longest_first truncation.
//!
//! Everything here mirrors the Hugging Face `tokenizers` library step by step, including its
//! alignment bookkeeping (each normalized character remembers the original byte range it came
//! from, and an inserted character takes the range of the character consumed before it). One
//! module a stage, in the order `encode` (encode.rs) runs them:
//!
//!   blob.rs          the blob's layout and the views that read it in place
//!   added.rs         added tokens, split off the original text first
//!   normalize.rs     the normalizers (grapheme.rs: the UAX #29 clusters Precompiled needs)
//!   pre_tokenize.rs  the splits into words
//!   wordpiece.rs     the WordPiece model
//!   unigram.rs       the Unigram model (Viterbi)
//!   piece.rs         the aligned text the stages hand each other
//!
//! The check program (main.rs) and the redaction service (a Cargo path dependency on this crate)
//! call `embedded()`, which reads the tokenizer.bin beside this crate's Cargo.toml.

mod added;
mod blob;
mod encode;
mod grapheme;
mod normalize;
mod piece;
mod pre_tokenize;
mod unigram;
mod wordpiece;

pub use blob::{BlobError, Tokenizer};
pub use encode::{Encoding, PairError, PairTruncation};

/// The tokenizer.bin this crate was rendered with.
pub static TOKENIZER_BLOB: &[u8] = include_bytes!("../tokenizer.bin");

/// The embedded tokenizer; "loading" is checking the blob's header.
pub fn embedded() -> Result<Tokenizer<'static>, BlobError> {
    Tokenizer::new(TOKENIZER_BLOB)
}
