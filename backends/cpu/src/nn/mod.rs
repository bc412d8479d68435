//! Neural-network kernels: softmax family, normalization, convolution, pooling,
//! upsampling, losses, embedding, one-hot and dropout, each as plain `pub fn`s with the
//! argument types of `docs/design.md`.
//!
//! Owns: the `nn` ops listed in the submodules and the part-2 tensor plumbing in
//! `io`. Must not: touch part 1's element-wise / reduction kernels or the runtime's
//! internals (only its public Tensor API).

pub(crate) mod io;
pub(crate) mod vecmath;

mod conv;
mod conv_core;
mod conv_depthwise;
mod distance;
mod dropout;
mod embedding;
mod embedding_bag;
mod fold;
mod grid_sample;
mod group_norm;
mod loss;
mod norm;
mod norm_core;
mod pool;
mod pool3d;
mod softmax;
mod softmax_core;
mod upsample;

pub use conv::*;
pub use distance::*;
pub use dropout::*;
pub use embedding::*;
pub use embedding_bag::*;
pub use fold::*;
pub use grid_sample::*;
pub use group_norm::*;
pub use loss::*;
pub use norm::*;
pub use pool::*;
pub use pool3d::*;
pub use softmax::*;
pub use upsample::*;
