//! onnxruntime's CPU kernels: float/ (MLAS's float kernels, per CPU target), quant.rs
//! (quantize_dynamic's DynamicQuantizeLinear + MatMulInteger linear layer) and qdq.rs (the
//! quantised kernels of QDQ graphs: QuantizeLinear, DequantizeLinear, QLinearMatMul / QGemm,
//! QLinearAdd, QLinearSoftmax).

pub mod float;
pub mod qdq;
pub mod quant;
