//! onnxruntime's float kernels, as the encoder crate has them (ort/float, copied in).

pub mod float;
