//! The forward pass as a library: the eval command (main.rs) and the redaction service
//! (templates/redact_service, a Cargo path dependency on this crate) both call it.
//!
//! What a caller needs: `model::Model::load_embedded()` reads the embedded model.bin in place,
//! `forward::forward` runs one window (every token in segment A), `forward::forward_with_types`
//! one with its token type ids (sentence pairs: segment B is type 1), `profile::Profile` receives
//! its time split. The shapes (`model::SEQ`, `model::WIDTH`, `model::TYPE_VOCAB`, …) are consts,
//! so a caller can check them at compile time.

#[cfg(not(target_feature = "simd128"))]
compile_error!("built without simd128: porter's generated .cargo/config.toml sets -C target-feature=+simd128");

pub mod forward;
pub mod integer;
pub mod kernels;
pub mod linear;
pub mod model;
pub mod profile;
pub mod program;
pub mod tuning;
