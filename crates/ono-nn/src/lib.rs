//! Layers and blocks of neural operators on `tch::nn::Path`: linear layers with the reference
//! initialisations, MLPs, norms, multi-head attention modules and the orthogonal attention block.

mod error;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
