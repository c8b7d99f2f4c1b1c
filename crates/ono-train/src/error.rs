//! The error type of ono-train.

use std::path::PathBuf;

/// Everything ono-train can refuse.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Tensors of the wrong shape.
    #[error("{op}: expected {expected}, got shape {got:?}")]
    Shape {
        /// The operation that refused.
        op: &'static str,
        /// What it needed.
        expected: String,
        /// What it got.
        got: Vec<i64>,
    },
    /// A bad configuration value; `key` names it as written in the TOML file.
    #[error("config: `{key}`: {msg}")]
    Config {
        /// The dotted key, e.g. `optimizer.lr`.
        key: String,
        /// Why it is refused.
        msg: String,
    },
    /// A configuration value that a lower crate refused (an unknown preset, a split larger than
    /// the data, …); `key` names it as written in the TOML file, `source` is that crate's error.
    #[error("config: `{key}`: {source}")]
    Invalid {
        /// The dotted key.
        key: String,
        /// The refusal, typed (`Error::Models`, `Error::DataCrate`, …).
        source: Box<Error>,
    },
    /// Bad data: an all-zero target, a NaN in the inputs, inconsistent sizes.
    #[error("data: {0}")]
    Data(String),
    /// The loss stopped being finite.
    #[error("the training loss became {value} at optimizer step {step} (epoch {epoch}); no checkpoint was written after it")]
    NonFiniteLoss {
        /// The first global optimizer step whose loss was not finite (0-based).
        step: u64,
        /// The epoch it belongs to (0-based).
        epoch: u64,
        /// The value, `NaN` or `inf`.
        value: f64,
    },
    /// A training step failed (for example a diverged model whose weights became NaN).
    #[error("optimizer step {step} (epoch {epoch}) failed; no checkpoint was written after it: {source}")]
    Step {
        /// The global step (0-based).
        step: u64,
        /// The epoch (0-based).
        epoch: u64,
        /// What failed.
        source: Box<Error>,
    },
    /// A checkpoint that cannot be written or read.
    #[error("checkpoint {path}: {msg}")]
    Checkpoint {
        /// The file or directory.
        path: PathBuf,
        /// What went wrong.
        msg: String,
    },
    /// A checkpoint file that a lower crate could not write or read (the safetensors container,
    /// the atomic write); `source` is that crate's error, typed.
    #[error("checkpoint {path}: {source}")]
    CheckpointFile {
        /// The file.
        path: PathBuf,
        /// What failed (`Error::Nn`, `Error::File`).
        source: Box<Error>,
    },
    /// The run's [`EpochObserver`](crate::EpochObserver) failed after an epoch (in the `ono`
    /// binary: drawing or writing a figure); that epoch's checkpoint is kept.
    #[error("after epoch {epoch}: {source}")]
    Observer {
        /// The epoch just finished (0-based).
        epoch: u64,
        /// What the observer reported.
        source: crate::observer::ObserverError,
    },
    /// A file-system error, with the path it happened on.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file that ono-io could not write (the atomic writer).
    #[error(transparent)]
    File(#[from] ono_io::Error),
    /// An error from ono-nn (weights, layers).
    #[error(transparent)]
    Nn(#[from] ono_nn::Error),
    /// An error from ono-models (a loss error raised inside a model's training step comes back
    /// as itself, not as this).
    #[error(transparent)]
    Models(ono_models::Error),
    /// An error from ono-data.
    #[error(transparent)]
    DataCrate(#[from] ono_data::Error),
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
    /// An error from ono-kernels outside a model (the EMA capture of a data-parallel step).
    #[error(transparent)]
    Kernels(#[from] ono_kernels::Error),
    /// The processes of a data-parallel run disagree (configurations, data, a resumed step) or
    /// cannot reach each other: the collective's own message, or which rank differs in what.
    #[error("data-parallel run: {0}")]
    Parallel(String),
    /// A collective of a data-parallel run failed (a process died, a timeout, an unreachable
    /// rendezvous).
    #[error("data-parallel run: {0}")]
    Dist(#[from] ono_dist::DistError),
}

impl Error {
    /// An [`Error::Io`] for `path`.
    /// The architecture's refusal of an input part (a padding mask, query points, …) when this
    /// error is one, or wraps one: the run cannot train on these data with this architecture,
    /// whatever its settings.
    pub fn refused_input(&self) -> Option<&ono_models::Error> {
        match self {
            Error::Models(e @ ono_models::Error::Unsupported { .. }) => Some(e),
            Error::Invalid { source, .. }
            | Error::Step { source, .. }
            | Error::CheckpointFile { source, .. } => source.refused_input(),
            _ => None,
        }
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// An [`Error::Invalid`]: `source` refused the value of `key`.
    pub fn invalid(key: impl Into<String>, source: impl Into<Error>) -> Self {
        Error::Invalid {
            key: key.into(),
            source: Box::new(source.into()),
        }
    }

    /// The typed error of a check a model deferred ([`ono_kernels::health`]), as the same check
    /// would have returned it at once through the model.
    pub fn deferred(error: Box<dyn std::error::Error + Send + Sync>) -> Self {
        let error = match error.downcast::<ono_models::Error>() {
            Ok(e) => return Error::from(*e),
            Err(e) => e,
        };
        let error = match error.downcast::<ono_nn::Error>() {
            Ok(e) => return Error::from(ono_models::Error::Nn(*e)),
            Err(e) => e,
        };
        match error.downcast::<ono_kernels::Error>() {
            Ok(e) => Error::from(ono_models::Error::Kernel(*e)),
            Err(e) => Error::Data(e.to_string()),
        }
    }

    /// An [`Error::Config`] for `key`.
    pub fn config(key: impl Into<String>, msg: impl Into<String>) -> Self {
        Error::Config {
            key: key.into(),
            msg: msg.into(),
        }
    }
}

impl From<ono_models::Error> for Error {
    /// The loss closure of a training step returns this crate's errors through the model as
    /// `ono_models::Error::Loss`; they are unwrapped back to themselves here.
    fn from(e: ono_models::Error) -> Self {
        match e {
            ono_models::Error::Loss(source) => match source.downcast::<Error>() {
                Ok(own) => *own,
                Err(other) => Error::Models(ono_models::Error::Loss(other)),
            },
            e => Error::Models(e),
        }
    }
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn a_loss_error_returned_through_a_model_comes_back_as_itself() {
        let through: ono_models::Error = ono_models::Error::Loss(Box::new(Error::Data("x".into())));
        assert!(matches!(Error::from(through), Error::Data(m) if m == "x"));
        // Another crate's loss error stays wrapped, with its source.
        let io = std::io::Error::other("y");
        let other: Error = ono_models::Error::Loss(Box::new(io)).into();
        match other {
            Error::Models(ono_models::Error::Loss(e)) => assert_eq!(e.to_string(), "y"),
            e => panic!("{e:?}"),
        }
        // A refused configuration value keeps the refusing crate's error as its source.
        let e = Error::invalid("model.preset", ono_models::Error::Config("no".into()));
        assert!(
            matches!(&e, Error::Invalid { source, .. } if matches!(**source, Error::Models(_)))
        );
        assert!(e.to_string().contains("model.preset"));
    }
}
