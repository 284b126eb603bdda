//! The float kernels: those shared with the encoder crate (copied from templates/rust_forward by
//! porter's decoder codegen, at the same paths: onnxruntime's arithmetic in ort/float, Eigen's
//! sums and the float weight view in litert/) and the decoder's own (decoder_float).

#![allow(dead_code)]

pub mod decoder_float;
pub mod litert;
pub mod ort;
