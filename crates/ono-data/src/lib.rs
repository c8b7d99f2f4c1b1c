//! Benchmark data: readers (and the MAT v5 writer) of the original dataset files ([`readers`],
//! [`array`](mod@array)), the benchmark loaders with their miniature copies ([`benchmarks`],
//! [`gnot`]), data sets, normalizers and batching of grids and point clouds ([`dataset`],
//! [`normalizer`], [`point_cloud`]) and the stencils the reference scripts apply to their data
//! ([`stencils`]). Depends on no model crate; the PDE solvers that generate
//! benchmark data live in ono-pde, which builds on this crate.

pub mod array;
pub mod benchmarks;
pub mod dataset;
mod error;
pub mod example_meshes;
pub mod gnot;
pub mod import;
pub mod normalizer;
pub mod point_cloud;
pub mod readers;
pub mod stencils;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
