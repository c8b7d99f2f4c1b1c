//! Layers and blocks of neural operators on `tch::nn::Path`: linear layers with the reference
//! initialisations, MLPs, norms, multi-head attention modules, the pre-norm transformer block and
//! the orthogonal attention block of ONO, convolutions, the FNO Fourier layer, the Geo-FNO
//! projection with its deformation net, GNOT's normalized attention and geometric mixture of
//! experts, Transolver's Physics-Attention, the Neural-Solver-Library model frame, its U-Net and
//! LSM's Neural Spectral Block; mixed precision ([`precision`]).
//!
//! Every module follows one pattern: a serde `Config` with defaults, `init(&self, path)` registering
//! parameters under the reference PyTorch names, and `forward` with a `# Shapes` section.

pub mod attention;
pub mod conv;
mod error;
pub mod factorized_spectral_conv;
pub mod geo_projection;
pub mod grid;
pub mod interp_scaler;
pub mod iphi;
pub mod linear;
pub mod loss;
pub mod mixture_of_experts;
pub mod mlp;
pub mod neural_spectral_block;
pub mod norm;
pub mod nsl_frame;
pub mod orthogonal;
pub mod padding;
pub mod precision;
pub mod residual_spectral_conv;
pub mod spectral_conv;
pub mod time_embedding;
pub mod transformer_block;
pub mod unet;
pub mod weights;

pub use error::{Error, Result};
pub use linear::{Linear, LinearConfig, LinearInit};
pub use precision::Precision;

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
