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

/// Checks a (B, N, C) activation: rank 3, C channels, at least one point, finite values.
/// The finiteness check costs one device→host read; models call it once on their inputs only.
pub fn check_points(op: &'static str, t: &tch::Tensor, channels: i64) -> Result<[i64; 3]> {
    let size = t.size();
    let dims = match size[..] {
        [b, n, c] if c == channels && b > 0 && n > 0 => [b, n, c],
        _ => {
            return Err(Error::Shape {
                op,
                expected: format!("(B, N, {channels}) with B, N > 0"),
                got: size,
            })
        }
    };
    if !t.is_floating_point() {
        return Err(Error::Config(format!(
            "{op}: needs a floating-point tensor, got {:?}",
            t.kind()
        )));
    }
    if !bool::try_from(t.f_isfinite()?.f_all()?)? {
        return Err(Error::NonFinite { op });
    }
    Ok(dims)
}
