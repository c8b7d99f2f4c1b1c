//! The error type of ono-data.

use std::path::PathBuf;

/// Everything ono-data can refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Arrays of the wrong shape.
    #[error("{op}: expected {expected}, got shape {got:?}")]
    Shape {
        /// The operation that refused.
        op: &'static str,
        /// What it needed.
        expected: String,
        /// What it got.
        got: Vec<i64>,
    },
    /// A bad parameter (a split larger than the data, an unknown benchmark name, ...).
    #[error("{what}: {msg}")]
    Config {
        /// The parameter.
        what: String,
        /// Why it is refused.
        msg: String,
    },
    /// Data that cannot be used as it is: NaN/Inf, an all-zero target, inconsistent sizes.
    #[error("data: {0}")]
    Invalid(String),
    /// A file-system error, with the path it happened on.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file in a format that cannot be read.
    #[error("{path}: {msg}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// A file that ono-io could not write or read (the atomic writer, the torch.save reader).
    #[error(transparent)]
    File(#[from] ono_io::Error),
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
