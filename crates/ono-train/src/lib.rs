//! Training, evaluation and checkpoints: losses, AdamW, OneCycle, gradient clipping and the
//! training loop of the ONO paper.

pub mod adamw;
pub mod bench_step;
pub mod checkpoint;
pub mod clip;
pub mod config;
mod error;
pub mod loss;
pub mod one_cycle;
pub mod plots;
pub mod progress;
pub mod trainer;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
