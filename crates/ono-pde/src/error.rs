//! The error type of ono-pde.

/// Everything ono-pde can refuse.
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
    /// A bad parameter (a generator's resolution, viscosity, time step, ...).
    #[error("{what}: {msg}")]
    Config {
        /// The parameter.
        what: String,
        /// Why it is refused.
        msg: String,
    },
    /// Data that cannot be used as it is: NaN/Inf, inconsistent sizes.
    #[error("data: {0}")]
    Invalid(String),
    /// A solver that did not converge.
    #[error("{solver} did not converge: {msg}")]
    Solver {
        /// The solver.
        solver: &'static str,
        /// Iterations and residual reached.
        msg: String,
    },
    /// An error from ono-data (writing a MAT file, building a data set).
    #[error(transparent)]
    Data(#[from] ono_data::Error),
    /// An error raised inside libtorch.
    #[error(transparent)]
    Torch(#[from] tch::TchError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
