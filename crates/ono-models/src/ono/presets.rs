//! The seven configurations the ONO paper's README commands train, plus the time-extrapolation
//! run (docs/reference-implementations.md#ono-training-recipes). Parameter counts are checked
//! against the counts measured by instantiating the reference `ONO2`
//! (`fixtures/ono/*_config_params_only.json`).

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::config::{NnBlock, OnoConfig};
use crate::Error;

/// A benchmark configuration of the paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preset {
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

/// The preset names, in the order of [`Preset::ALL`].
pub const NAMES: [&str; 8] = [
    "darcy",
    "ns2d",
    "airfoil",
    "pipe",
    "elasticity",
    "plasticity",
    "super_resolution",
    "time_extrapolation",
];

impl Preset {
    pub const ALL: [Preset; 8] = [
        Preset::Darcy,
        Preset::Ns2d,
        Preset::Airfoil,
        Preset::Pipe,
        Preset::Elasticity,
        Preset::Plasticity,
        Preset::SuperResolution,
        Preset::TimeExtrapolation,
    ];

    pub fn name(self) -> &'static str {
        NAMES[Preset::ALL.iter().position(|p| *p == self).unwrap_or(0)]
    }

    /// Training batch size of the README command.
    pub fn batch_size(self) -> i64 {
        match self {
            Preset::Darcy | Preset::Airfoil => 4,
            Preset::Pipe => 2,
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
            Preset::Darcy => OnoConfig {
                n_layers: 10,
                psi_dim: 32,
                mlp_ratio: 2,
                nn_block: NnBlock::Nystrom,
                space_dim: 2,
                fun_dim: 1,
                ..base
            },
            Preset::Ns2d => OnoConfig {
                psi_dim: 16,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 10,
                ..base
            },
            Preset::Airfoil => OnoConfig {
                n_layers: 6,
                psi_dim: 8,
                nn_block: NnBlock::Nystrom,
                space_dim: 2,
                fun_dim: 2,
                ..base
            },
            Preset::Pipe | Preset::Elasticity => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::Nystrom,
                space_dim: 1,
                fun_dim: 2,
                ..base
            },
            Preset::Plasticity => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 1,
                fun_dim: 1,
                out_dim: 4,
                time_input: true,
                ..base
            },
            Preset::SuperResolution => OnoConfig {
                psi_dim: 16,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 1,
                ..base
            },
            Preset::TimeExtrapolation => OnoConfig {
                psi_dim: 8,
                nn_block: NnBlock::LinearTransformer,
                space_dim: 2,
                fun_dim: 10,
                ..base
            },
        }
    }
}

impl FromStr for Preset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let norm = crate::arch::normalize_preset_name(s);
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == norm || (norm == "ns" && *p == Preset::Ns2d))
            .ok_or_else(|| {
                let names: Vec<_> = Preset::ALL.iter().map(|p| p.name()).collect();
                Error::Config(format!(
                    "unknown ono preset {s:?}; known: {} (and ns for ns2d)",
                    names.join(", ")
                ))
            })
    }
}
