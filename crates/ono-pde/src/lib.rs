//! PDE solvers and random fields that generate the data of the FNO benchmarks from their published
//! recipes: Darcy flow ([`darcy_flow`], on the thresholded Gaussian random field of [`grf`]),
//! Navier–Stokes 2-D in vorticity form ([`navier_stokes`], batched on tch, CUDA when available)
//! and viscous Burgers 1-D ([`burgers_equation`]), with [`parallel`], the generators' one
//! work-sharing loop. The results are written in the files' own formats and data-set layouts through
//! ono-data, which in turn knows nothing of these solvers.

pub mod burgers_equation;
pub mod darcy_flow;
mod error;
pub mod grf;
pub mod navier_stokes;
pub mod parallel;

pub use error::{Error, Result};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
