//! Presets of the pointwise MLP. The data set fixes the input and output channels, so a preset
//! is only a size.

use super::config::PointwiseMlpConfig;
use crate::arch::normalize_preset_name;
use crate::{Error, Result};

/// The preset names: `default` (width 128, 4 hidden layers, about the depth of the ONO presets'
/// encoder and head) and `small` (width 32, 1 hidden layer, for tests and quick runs).
pub const NAMES: [&str; 2] = ["default", "small"];

/// The `default` preset.
pub(crate) fn base() -> PointwiseMlpConfig {
    PointwiseMlpConfig {
        space_dim: 2,
        fun_dim: 1,
        out_dim: 1,
        width: 128,
        n_layers: 4,
        time_input: false,
    }
}

pub(crate) fn by_name(name: &str) -> Result<PointwiseMlpConfig> {
    match normalize_preset_name(name).as_str() {
        "default" => Ok(base()),
        "small" => Ok(PointwiseMlpConfig {
            width: 32,
            n_layers: 1,
            ..base()
        }),
        _ => Err(Error::Config(format!(
            "unknown mlp preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}

impl Default for PointwiseMlpConfig {
    /// The `default` preset.
    fn default() -> Self {
        base()
    }
}
