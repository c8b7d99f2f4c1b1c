//! The error type of ono-plot.

use std::path::PathBuf;

/// Everything ono-plot can refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A figure that cannot be drawn: nothing to draw, inconsistent sizes, or a failure inside
    /// plotters (its panics included).
    #[error("plot {path}: {msg}")]
    Plot {
        /// The PNG being written.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
    /// The PNG could not be written (the atomic writer of ono-io).
    #[error(transparent)]
    File(#[from] ono_io::Error),
}

/// The result of ono-plot's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;
