//! Configuration of the pointwise MLP operator.

use serde::{Deserialize, Serialize};

/// The pointwise MLP's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointwiseMlpConfig {
    /// Coordinate channels of `pos` (from the data).
    pub space_dim: i64,
    /// Channels of the input function (from the data).
    pub fun_dim: i64,
    /// Output channels (from the data).
    pub out_dim: i64,
    /// Hidden width.
    pub width: i64,
    /// Residual hidden layers between the first and the last linear layer.
    pub n_layers: usize,
    /// A time value (B, 1) is appended to every point's features (from the data).
    pub time_input: bool,
}

impl PointwiseMlpConfig {
    /// Input features per point.
    pub fn in_dim(&self) -> i64 {
        self.space_dim + self.fun_dim + self.time_input as i64
    }
}
