//! LiteRT's builtin float kernels, its hybrid int8 activation quantisation and (int8/) the
//! integer kernels of full-integer graphs, as
//! porter/reference/litert/ and porter/reference/quant.py define them.

pub mod activation;
pub mod attention;
pub mod batch_matmul;
pub mod eigen;
pub mod int8;
pub mod libm;
pub mod linear_f32;
pub mod mathfn;
pub mod norm;
pub mod quantize;
pub mod reduce;
