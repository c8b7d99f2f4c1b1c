//! Neural operator models: the Orthogonal Neural Operator and the baselines it is judged against
//! (Galerkin/Fourier Transformer, GNOT, the FNO family).

mod error;
pub mod io;
pub mod ono;
pub mod ono_cross;
pub mod presets;
pub mod recompute;
pub mod reference;
pub mod reference_check;

pub use error::{Error, Result};
pub use ono::{NnBlock, Ono, OnoConfig};
pub use ono_cross::OnoCross;
pub use presets::Preset;

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
