//! The error type of ono-kernels.

/// Everything a kernel can refuse. Bad input is reported here, never by a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor had the wrong rank or sizes for the operation.
    #[error("{op}: expected {expected}, got shape {got:?}")]
    Shape {
        op: &'static str,
        expected: String,
        got: Vec<i64>,
    },
    /// The input held NaN or ±Inf where the operation needs finite values.
    #[error("{op}: input contains NaN or Inf")]
    NonFinite { op: &'static str },
    /// Cholesky failed even after the largest diagonal jitter of the fallback.
    #[error(
        "{op}: matrix is not positive definite even after adding {max_jitter:e} to its diagonal"
    )]
    NotPositiveDefinite { op: &'static str, max_jitter: f64 },
    /// An argument outside its valid range (momentum, landmark count, …).
    #[error("{op}: {msg}")]
    InvalidArgument { op: &'static str, msg: String },
    /// An operation that needs every point of a sample at once, asked for while the points are
    /// split across processes ([`crate::points`]).
    #[error(
        "{op} needs every point of a sample at once ({why}) and cannot run with the points split \
         across processes"
    )]
    NeedsEveryPoint { op: &'static str, why: String },
    /// A collective over the processes that share the points failed (a peer died, a timeout).
    #[error("{op} over the processes sharing the points: {msg}")]
    Collective { op: &'static str, msg: String },
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
