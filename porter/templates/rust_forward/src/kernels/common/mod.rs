//! Kernels both runtimes share: the int8 GEMM (integer products are exact in any order) and the
//! op-by-op steps, each op in the arithmetic of the runtime the program follows.

pub mod dequantize;
pub mod gemm;
pub mod generic;
pub mod int4;
pub mod unroll;
