//! Neural operator models: the Orthogonal Neural Operator and the baselines it is judged against
//! (Galerkin/Fourier Transformer, GNOT, the FNO family).

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
