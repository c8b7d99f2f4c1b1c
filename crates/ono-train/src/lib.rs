//! Training, evaluation and checkpoints: losses, AdamW, OneCycle, gradient clipping and the
//! training loop of the ONO paper.

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
