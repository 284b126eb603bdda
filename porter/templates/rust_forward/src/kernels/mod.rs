//! The numeric kernels. Every vectorised kernel sits beside the scalar reference it must match
//! bit for bit; the check crate (checks/) compares the two, exhaustively where the input is one
//! f32, and porter's tests compare the scalar references with porter's numpy definitions.
//!
//! The float kernels reproduce LiteRT's builtin kernels (porter/reference/litert.py) operation for
//! operation, and for ONNX graphs onnxruntime's (ort_float, ort_quant: porter/reference/ort.py
//! and porter/reference/quant.py). wasm has no fused multiply-add and Rust never contracts `a * b + c`, so
//! every product and sum rounds exactly where the reference rounds.

// The forward pass calls the SIMD kernels; the scalar references are called by checks/.
#![allow(dead_code)]

pub mod activation;
pub mod attention;
pub mod eigen;
pub mod gemm;
pub mod generic;
pub mod libm;
pub mod linear_f32;
pub mod mathfn;
pub mod norm;
pub mod ort_float;
pub mod ort_quant;
pub mod quantize;
pub mod reduce;
