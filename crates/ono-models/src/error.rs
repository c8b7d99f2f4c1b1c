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
