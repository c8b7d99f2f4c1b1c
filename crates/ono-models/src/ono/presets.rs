//! The seven configurations the ONO paper's README commands train, plus the time-extrapolation
//! run (docs/reference-implementations.md#ono-training-recipes). Parameter counts are checked
//! against the counts measured by instantiating the reference `ONO2`
//! (`fixtures/ono/*_config_params_only.json`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::config::{NnBlock, OnoConfig};
use crate::arch::{preset_key, Presets, BENCHMARKS};
use crate::Error;

/// A benchmark configuration of the paper (also the step shapes of `ono bench-step`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnoPreset {
    /// 10 layers, k 32, mlp_ratio 2, Nyström; (x, y, a) → u.
    Darcy,
    /// 8 layers, k 16, linear transformer; 10 input frames → 1.
    Ns2d,
    /// 6 layers, k 8, Nyström; index grid + (X, Y) → Mach number.
    Airfoil,
    /// 8 layers, k 8, Nyström; point index + (X, Y) → velocity.
    Pipe,
    /// 8 layers, k 8, Nyström; node index + (X, Y) → stress.
    Elasticity,
    /// 8 layers, k 8, linear transformer, time input; → 4 displacement components.
    Plasticity,
    /// Darcy super-resolution (`space_gen.py`): 8 layers, k 16, linear transformer.
    SuperResolution,
    /// NS time extrapolation (`time_gen.py`): 8 layers, k 8, linear transformer.
    TimeExtrapolation,
}

/// The preset names, in the order of [`OnoPreset::ALL`]: the six benchmarks, then the two
/// generalisation runs.
pub const NAMES: [&str; 8] = {
    let [darcy, ns2d, airfoil, pipe, elasticity, plasticity] = BENCHMARKS;
    [
        darcy,
        ns2d,
        airfoil,
        pipe,
        elasticity,
        plasticity,
        "super_resolution",
        "time_extrapolation",
    ]
};

impl OnoPreset {
    pub const ALL: [OnoPreset; 8] = [
        OnoPreset::Darcy,
        OnoPreset::Ns2d,
        OnoPreset::Airfoil,
        OnoPreset::Pipe,
        OnoPreset::Elasticity,
        OnoPreset::Plasticity,
        OnoPreset::SuperResolution,
        OnoPreset::TimeExtrapolation,
    ];

    pub fn name(self) -> &'static str {
        NAMES[OnoPreset::ALL.iter().position(|p| *p == self).unwrap_or(0)]
    }

    /// The preset of a canonical name ([`Presets::by_name`]).
    fn from_key(key: &str) -> Option<Self> {
        OnoPreset::ALL.into_iter().find(|p| p.name() == key)
    }

    /// Training batch size of the README command.
    pub fn batch_size(self) -> i64 {
        match self {
            OnoPreset::Darcy | OnoPreset::Airfoil => 4,
            OnoPreset::Pipe => 2,
            _ => 8,
        }
    }

    /// The model configuration.
    pub fn config(self) -> OnoConfig {
        let base = OnoConfig {
            n_hidden: 128,
            n_head: 8,
            n_layers: 8,
            mlp_ratio: 1,
            out_dim: 1,
            ..OnoConfig::default()
        };
        match self {
            OnoPreset::Darcy => OnoConfig {
                n_layers: 10,
                psi_dim: 32,
                mlp_ratio: 2,
                nn_block: NnBlock::Nystrom,
                space_dim: 2,
                fun_dim: 1,
                ..base
            },
            OnoPreset::Ns2d => OnoConfig {
                psi_dim: 16,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 10,
                ..base
            },
            OnoPreset::Airfoil => OnoConfig {
                n_layers: 6,
                psi_dim: 8,
                nn_block: NnBlock::Nystrom,
                space_dim: 2,
                fun_dim: 2,
                ..base
            },
            OnoPreset::Pipe | OnoPreset::Elasticity => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::Nystrom,
                space_dim: 1,
                fun_dim: 2,
                ..base
            },
            OnoPreset::Plasticity => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 1,
                fun_dim: 1,
                out_dim: 4,
                time_input: true,
                ..base
            },
            OnoPreset::SuperResolution => OnoConfig {
                psi_dim: 16,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 1,
                ..base
            },
            OnoPreset::TimeExtrapolation => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 10,
                ..base
            },
        }
    }
}

impl FromStr for OnoPreset {
    type Err = Error;

    /// Any spelling [`preset_key`] reads (`ns` for `ns2d`, `super-resolution`).
    fn from_str(s: &str) -> Result<Self, Error> {
        OnoPreset::from_key(&preset_key(s)).ok_or_else(|| {
            Error::Config(format!(
                "unknown ono preset {s:?}; known: {}",
                NAMES.join(", ")
            ))
        })
    }
}

impl Presets for OnoConfig {
    const NAMES: &'static [&'static str] = &NAMES;

    fn by_name(name: &str) -> Option<Self> {
        OnoPreset::from_key(name).map(OnoPreset::config)
    }
}
