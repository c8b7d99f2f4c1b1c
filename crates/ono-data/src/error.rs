//! The error type of ono-data.

/// Everything ono-data can refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
