//! The decoder as a library: the generation command (main.rs) and the generation service
//! (templates/generate_service, a Cargo path dependency on this crate) both call it.
//!
//! What a caller needs: `model::Model::load_embedded()` reads the embedded model.bin in place,
//! `decoder::step` feeds tokens through the KV cache (`decoder::Cache`, one allocation for the
//! whole context) and returns their logits, `decoder::argmax` picks the greedy token.

#[cfg(not(target_feature = "simd128"))]
compile_error!("built without simd128: porter's generated .cargo/config.toml sets -C target-feature=+simd128");

pub mod decoder;
pub mod kernels;
pub mod linear;
pub mod model;
