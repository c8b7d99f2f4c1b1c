//! Neural operator models behind one trait: the Orthogonal Neural Operator and the baselines it is
//! judged against.
//!
//! - [`NeuralOperator`] (`operator.rs`): what every architecture implements, on one input type,
//!   [`ModelInput`];
//! - [`ModelConfig`] (`registry.rs`): the configuration of any registered architecture
//!   (`arch = "ono" | "mlp" | "fno1d" | …`, [`ARCHS`]), with presets; [`Model`] (`model.rs`) builds and owns one;
//! - one folder per architecture, each with its configuration, presets and reference reader:
//!   [`ono`] (ONO, its cross-attention variant, name map, block recomputation), [`pointwise`]
//!   (the pointwise MLP floor), [`fno`] (FNO on 1-, 2- and 3-D grids, and Geo-FNO on structured
//!   meshes), [`geofno`] (Geo-FNO on point clouds);
//! - [`nsl`]: the Neural-Solver-Library's FNO, F-FNO, U-FNO, Latent Spectral Model and
//!   Transolver on its model frame ([`ono_nn::nsl_frame`]);
//! - the baselines of their own papers: Cao's Galerkin / Fourier Transformer ([`galerkin`]) and
//!   GNOT with its CGPT variant ([`gnot`]);
//! - [`io`]: whole models in one file; [`fixture`]: checking a port against reference fixtures.

mod arch;
mod error;
pub mod fixture;
pub mod fno;
pub mod galerkin;
pub mod geofno;
pub mod gnot;
pub mod io;
mod model;
pub mod nsl;
pub mod ono;
mod operator;
pub mod pointwise;
mod recompute;
pub mod registry;

pub use arch::{ArchConfig, DataDims, FromReference, Presets};
pub use error::{Error, Result};
pub use fno::{Fno, FnoConfig, FnoSettings};
pub use model::Model;
pub use ono::{NnBlock, Ono, OnoConfig, OnoCross};
pub use operator::{
    plain_forward_backward, InputFunction, InputPart, LossError, LossFn, ModelInput, NeuralOperator,
};
pub use pointwise::{PointwiseMlp, PointwiseMlpConfig};
pub use recompute::Recompute;
pub use registry::{ModelConfig, ARCHS, DEFAULT_ARCH};

/// Number of trainable scalars in a `VarStore` (buffers excluded), as PyTorch's
/// `sum(p.numel() for p in model.parameters())`.
pub fn parameter_count(vs: &tch::nn::VarStore) -> i64 {
    vs.trainable_variables()
        .iter()
        .map(|t| t.numel() as i64)
        .sum()
}

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
