//! onnxruntime's CPU float kernels for an ONNX encoder, as porter/reference/ort/floats.py defines them.
//!
//! Same operations, same order, same roundings as the numpy definitions (which were measured
//! against onnxruntime 1.32's MLAS kernels on an AVX2 and an AVX-512 machine): fused
//! multiply-adds, MLAS's exp and erf polynomials and softmax sum, its LayerNorm kernels, its
//! SGEMM blocking. Of these only softmax depends on the CPU: `OrtFloats` names the kernels.
//!
//! wasm has no fma instruction. `fma` below emulates a correctly rounded one in f64, and, in
//! crates built with the `fused-madd` feature, the matrix products (several outputs at a time)
//! and the one-input functions erf, GELU, FastGelu and softmax's exp (four lanes at a time) use
//! f32x4.relaxed_madd when a probe shows that this engine fuses it (wasmtime does on x86 with
//! FMA and on ARM); both give the same bits, so the choice never shows in a result, only in
//! the time. (LLVM enables a wasm target feature for the whole module, so crates that
//! run LiteRT's arithmetic are built without it and keep their kernels' standard SIMD code.)
//!
//! math: fma, MLAS's exp, erf, GELU and softmax (the scalar definitions); lanes: the same four
//! lanes at a time with relaxed_madd; layer_norm; sgemm: the matrix products and the Gemm
//! Linear; attention: the scores, softmax and context of one layer; masked_tail: when the context
//! may leave out a window's padded keys; half: a float16 graph's roundings and its Softmax
//! function body with MLAS's Exp kernels.

mod attention;
mod half;
mod lanes;
mod layer_norm;
mod masked_tail;
mod math;
mod sgemm;

pub use attention::{attention, attention_all_keys, OrtAttention, OrtAttentionScratch, ScoreTerms};
pub use half::{exp, exp_fma3, exp_scalef, round_half, round_half_in_place, round_half_in_place_scalar, softmax_function};
pub use lanes::{fused_madd, lanes};
pub use layer_norm::{embed_layer_norm_row, layer_norm_row, skip_layer_norm_row};
pub use math::{apply_in_place, apply_in_place_scalar, eigen_log, erf, fast_gelu, fast_gelu_in_place, fma, gelu_erf, gelu_erf_in_place,
               gelu_erf_mul, gelu_erf_mul_in_place, pow_by_products, scaled_subnormal, softmax, sum_exp, sum_exp_scalef, tanh,
               Elementwise, OrtFloats};
pub use sgemm::{lane_splats, linear, m1_columns, m1_dot, m1_transpose_b, sgemm_columns, sgemm_dot, sgemm_outputs, stride_k, transpose, PACKED_STRIDE_K};
