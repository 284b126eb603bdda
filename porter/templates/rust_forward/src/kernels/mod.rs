//! The numeric kernels, grouped by the runtime whose arithmetic they reproduce. Every vectorised
//! kernel sits beside the scalar reference it must match bit for bit; the check crate (checks/)
//! compares the two, exhaustively where the input is one f32, and porter's tests compare the
//! scalar references with porter's numpy definitions.
//!
//! - litert/: LiteRT's builtin kernels (porter/reference/litert/), operation for operation; its
//!   attention and LayerNorm also take an ONNX graph's form, which they hand to ort/.
//! - ort/: onnxruntime's CPU kernels (porter/reference/ort/ and porter/reference/quant.py): float/
//!   (MLAS's float kernels per CPU target) and quant.rs (quantize_dynamic's linear layers).
//! - common/: what both share: the int8 GEMM and the op-by-op steps (generic.rs).
//!
//! wasm has no fused multiply-add and Rust never contracts `a * b + c`, so every product and sum
//! rounds exactly where the reference rounds.

// The forward pass calls the SIMD kernels; the scalar references are called by checks/.
#![allow(dead_code)]

pub mod common;
pub mod litert;
pub mod ort;
