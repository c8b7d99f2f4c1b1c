//! Presets of the pointwise MLP. The data set fixes the input and output channels, so a preset
//! is only a size.

use super::config::PointwiseMlpConfig;
use crate::arch::Presets;

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

impl Presets for PointwiseMlpConfig {
    const NAMES: &'static [&'static str] = &NAMES;

    fn by_name(name: &str) -> Option<Self> {
        match name {
            "default" => Some(base()),
            "small" => Some(PointwiseMlpConfig {
                width: 32,
                n_layers: 1,
                ..base()
            }),
            _ => None,
        }
    }
}

impl Default for PointwiseMlpConfig {
    /// The `default` preset.
    fn default() -> Self {
        base()
    }
}
