//! The float kernels shared with the encoder crate (copied from templates/rust_forward by
//! porter's decoder codegen): onnxruntime's arithmetic (ort_float) and the float weight view.

#![allow(dead_code)]

pub mod linear_f32;
pub mod ort_float;
