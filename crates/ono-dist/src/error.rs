//! The error type of ono-dist.

use crate::launch::Launcher;

/// Everything ono-dist can refuse or report. The variants that come from torch carry torch's own
/// message, so what a torchrun user would have seen in Python is what they see here.
#[derive(Debug, thiserror::Error)]
pub enum DistError {
    /// A launcher was recognised but one of the variables it always sets is missing.
    #[error("{launcher} launch: {var} is not set{hint}")]
    MissingVar {
        /// The launcher the other variables named.
        launcher: Launcher,
        /// The missing variable.
        var: &'static str,
        /// What to do about it (empty or starting with "; ").
        hint: &'static str,
    },
    /// A launcher variable whose value cannot be used (not a number, a rank not below the world
    /// size, a world of 0, a port out of range).
    #[error("{var}={value:?}: {why}")]
    BadVar {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// An MPI launch over several nodes without `MASTER_ADDR`: the ranks cannot agree on the host
    /// of rank 0 without it (MPI does not export it).
    #[error(
        "MPI launch: {local_world} of the {world} ranks are on this node and MASTER_ADDR is not \
         set; pass the address of rank 0's host to every rank, e.g. `mpirun -x \
         MASTER_ADDR=<host of rank 0> ...` (MASTER_PORT defaults to 29500)"
    )]
    MpiMasterAddr {
        /// The world size.
        world: usize,
        /// The ranks on this node.
        local_world: usize,
    },
    /// An argument the call cannot use (a rank outside the world, a tensor that is not
    /// contiguous, a zero timeout); nothing was sent.
    #[error("{op}: {why}")]
    InvalidArgument {
        /// The call.
        op: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A process group was asked for but this build has no c10d at all: ono-dist was built
    /// without its `c10d` feature (a library user of ono-train without `dist`).
    #[error(
        "this build has no multi-process training: ono-dist was built without its `c10d` \
         feature; build with ono-train's `dist` feature (the `ono` command line has it) to run \
         under a launcher"
    )]
    C10dNotBuilt,
    /// CUDA graph capture was asked for but this build has no CUDA graph shim, or no CUDA device.
    #[error("CUDA graphs are unavailable: {why}")]
    GraphsUnavailable {
        /// Why: the build left the shim out (its build script's reason), or no device.
        why: String,
    },
    /// Capturing or replaying a CUDA graph failed (torch's message).
    #[error("CUDA graph {op} failed: {message}")]
    Graph {
        /// capture, replay.
        op: &'static str,
        /// torch's message.
        message: String,
    },
    /// NCCL was asked for but this build of ono-dist has no ProcessGroupNCCL.
    #[error("this build of ono-dist has no NCCL backend: {why}")]
    NcclUnavailable {
        /// Why the build left it out (found by its build script).
        why: &'static str,
    },
    /// The TCPStore could not be reached or hosted (nobody listening, a port in use, the other
    /// ranks did not arrive within the timeout).
    #[error("rendezvous at {addr}:{port} failed: {message}")]
    Rendezvous {
        /// MASTER_ADDR.
        addr: String,
        /// MASTER_PORT.
        port: u16,
        /// torch's message.
        message: String,
    },
    /// The store was reached but the backend could not be created (a peer that never connected,
    /// no usable network interface, no CUDA device for NCCL).
    #[error("creating the {backend} process group failed: {message}")]
    Backend {
        /// The backend asked for.
        backend: crate::Backend,
        /// torch's message.
        message: String,
    },
    /// A collective failed: a peer died, the timeout passed, or torch refused the tensors.
    #[error("{op} failed: {message}")]
    Collective {
        /// The collective.
        op: &'static str,
        /// torch's message.
        message: String,
    },
    /// The ranks called a collective with different tensors (found before any data was sent).
    #[error("{op}: the ranks disagree: {detail}")]
    Mismatch {
        /// The collective.
        op: &'static str,
        /// What differs, rank by rank.
        detail: String,
    },
    /// A tensor operation around a collective failed.
    #[error("{op}: {source}")]
    Tensor {
        /// The collective.
        op: &'static str,
        /// tch's error.
        source: tch::TchError,
    },
}

/// `Result` with [`DistError`].
pub type Result<T, E = DistError> = std::result::Result<T, E>;
