//! Kernels both runtimes share: the int8 GEMM (integer products are exact in any order), the
//! op-by-op steps and the tensor steps, each op in the arithmetic of the runtime the program
//! follows, and the exact integer work of typed programs (index arithmetic).

pub mod dequantize;
pub mod gemm;
pub mod generic;
pub mod index;
pub mod int4;
pub mod tensor;
pub mod unroll;
