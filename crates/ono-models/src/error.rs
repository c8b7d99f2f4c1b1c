//! The error type of ono-models.

/// Everything a model can refuse. Bad input is reported here, never by a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An input with the wrong shape for the model's configuration.
    #[error("{op}: expected {expected}, got shape {got:?}")]
    Shape {
        op: &'static str,
        expected: String,
        got: Vec<i64>,
    },
    /// An input holding NaN or ±Inf.
    #[error("{op}: {what} contains NaN or Inf")]
    NonFinite {
        op: &'static str,
        what: &'static str,
    },
    /// A configuration that cannot build the model.
    #[error("invalid model configuration: {0}")]
    Config(String),
    /// An input this architecture cannot take (a padding mask, query points, …).
    #[error("the `{arch}` architecture does not take {what}")]
    Unsupported {
        arch: &'static str,
        what: &'static str,
    },
    /// The loss closure of a training step failed; the source is the caller's own error.
    #[error("the loss failed: {0}")]
    Loss(#[source] crate::operator::LossError),
    /// A layer refused (shapes, weights files, kernels).
    #[error(transparent)]
    Nn(#[from] ono_nn::Error),
    /// A kernel refused its input (e.g. a covariance that is not positive definite).
    #[error(transparent)]
    Kernel(#[from] ono_kernels::Error),
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
