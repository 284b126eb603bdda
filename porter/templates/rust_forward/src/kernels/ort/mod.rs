//! onnxruntime's CPU kernels: float/ (MLAS's float kernels, per CPU target) and quant.rs
//! (quantize_dynamic's DynamicQuantizeLinear + MatMulInteger linear layer).

pub mod float;
pub mod quant;
