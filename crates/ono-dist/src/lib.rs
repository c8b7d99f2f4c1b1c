//! Multi-process training for ono: torch's own c10d behind a small safe API.
//!
//! A rank finds its place from its launcher's variables ([`Launch::from_env`]: torchrun, plain
//! `env://`, Slurm's `srun`, MPI), joins the group ([`ProcessGroup::new`]) and sums gradients
//! with [`ProcessGroup::all_reduce_sum`].
//!
//! Why c10d, through a C++ shim (`cpp/c10d_shim.cpp`), and not a Rust collective library:
//!
//! * It is torch's own engine: the TCPStore rendezvous and the Gloo and NCCL process groups that
//!   `torchrun` + DDP users already run, with their timeouts and error messages, in the same
//!   `libtorch_cpu` / `libtorch_cuda` that tch already links. Nothing new is downloaded.
//! * Gloo on CPU because it builds from a fresh clone: the PyPI wheel ships c10d's headers and
//!   torch's own Gloo compiled into `libtorch_cpu`; only Gloo's declarations come from Debian's
//!   `libgloo-dev` (ProcessGroupGloo holds every Gloo type by pointer, so those headers fix no
//!   layout; all code that runs is torch's). MPI would need an MPI installation and, through
//!   rsmpi's bindgen, libclang.
//! * NCCL on CUDA when the build finds NCCL's and CUDA's headers (build.rs says which are
//!   missing); otherwise [`Backend::Nccl`] is a runtime error carrying that reason.
//!
//! The same shim build carries CUDA graph capture ([`graph::CudaGraph`]: libtorch's
//! `at::cuda::CUDAGraph`), which ono-train's captured training step replays.
//!
//! Every failure torch reports (a peer that died, a timeout, an unreachable store) arrives as a
//! [`DistError`] with torch's message: the shim catches every C++ exception, so nothing unwinds
//! across the FFI boundary, and every collective waits for completion bounded by the group's
//! timeout, so a dead peer is an error, not a hang.

mod error;
mod ffi;
pub mod graph;
pub mod group;
pub mod launch;

pub use error::{DistError, Result};
pub use group::{Backend, ProcessGroup};
pub use launch::{Launch, Launcher};

#[cfg(test)]
mod tests {
    /// The link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
