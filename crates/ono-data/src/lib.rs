//! Benchmark data: readers for the original dataset files, normalizers, batching of grids and
//! point clouds, and PDE data generators. Depends on no model crate.

pub mod array;
pub mod benchmarks;
pub mod burgers;
pub mod darcy;
pub mod dataset;
mod error;
pub mod gnot;
pub mod grf;
pub mod navier_stokes;
pub mod normalizer;
pub mod parallel;
pub mod point_cloud;
pub mod readers;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
