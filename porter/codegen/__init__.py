"""IR -> a Rust crate and its flat model.bin, rendered from porter/templates (`porter compile`)."""
