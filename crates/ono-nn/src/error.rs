//! The error type of ono-nn.

/// Everything ono-nn can refuse. Bad input is reported here, never by a panic.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tensor had the wrong rank or sizes for the layer.
    #[error("{op}: expected {expected}, got shape {got:?}")]
    Shape {
        op: &'static str,
        expected: String,
        got: Vec<i64>,
    },
    /// The input held NaN or ±Inf.
    #[error("{op}: input contains NaN or Inf")]
    NonFinite { op: &'static str },
    /// A configuration that cannot build a layer (zero widths, heads that do not divide, …).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// A weight file that cannot be read or does not fit the module.
    #[error("weights {path}: {msg}")]
    Weights { path: String, msg: String },
    /// A kernel refused its input.
    #[error(transparent)]
    Kernel(#[from] ono_kernels::Error),
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// A file that ono-io could not write or read (the atomic writer, the torch.save reader).
    #[error(transparent)]
    File(#[from] ono_io::Error),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
