//! The float kernels: those shared with the encoder crate (copied from templates/rust_forward by
//! porter's decoder codegen: onnxruntime's arithmetic in ort_float, Eigen's sums, the float
//! weight view) and the decoder's own (decoder_float).

#![allow(dead_code)]

pub mod decoder_float;
pub mod eigen;
pub mod linear_f32;
pub mod ort_float;
