//! LiteRT's builtin float kernels and its hybrid int8 activation quantisation, as
//! porter/reference/litert/ and porter/reference/quant.py define them.

pub mod activation;
pub mod attention;
pub mod eigen;
pub mod libm;
pub mod linear_f32;
pub mod mathfn;
pub mod norm;
pub mod quantize;
pub mod reduce;
