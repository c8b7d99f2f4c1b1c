//! The error type of ono-io.

use std::path::PathBuf;

/// Everything ono-io can refuse. Every variant names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file-system error, with the path it happened on (the target of a write, not its
    /// temporary sibling).
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A path that names no file (`/`, `..`, an empty path).
    #[error("{path}: not a file path")]
    NotAFile {
        /// The path.
        path: PathBuf,
    },
    /// A file whose content cannot be read (or tensors that cannot be written) in the format.
    #[error("{path}: {msg}")]
    Format {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        msg: String,
    },
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    pub(crate) fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
