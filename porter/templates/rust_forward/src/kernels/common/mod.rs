//! Kernels both runtimes share: the int8 GEMM (integer products are exact in any order), the
//! op-by-op steps and the tensor steps, each op in the arithmetic of the runtime the program
//! follows, and the exact element work (comparisons, integer arithmetic, casts, running sums, index
//! checks) typed programs and tensor steps share.

pub mod dequantize;
pub mod exact;
pub mod gemm;
pub mod generic;
pub mod int4;
pub mod tensor;
pub mod unroll;
