"""tokenizer.json (WordPiece, Unigram) and byte-level BPE compiled into flat blobs that the Rust
side reads in place."""
