//! LiteRT's builtin integer kernels for full-integer int8 graphs, as
//! porter/reference/litert/int8.py defines them: the fixed-point multipliers with the rounding of
//! each kernel (fixed_point.rs), the int8 dot products of FULLY_CONNECTED and BATCH_MATMUL
//! (dot.rs: simd128 beside its scalar reference), and the elementwise, reduction, table,
//! softmax and (de)quantisation kernels (elementwise.rs). Every parameter (multiplier, shift,
//! zero point, table) is computed by porter from the file and arrives as data.

pub mod dot;
pub mod elementwise;
pub mod fixed_point;
