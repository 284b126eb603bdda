//! The encoder crate's LiteRT kernels a decoder uses: Eigen's sums and the float weight view.

pub mod eigen;
pub mod linear_f32;
