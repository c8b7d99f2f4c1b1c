//! The StandardBench scripts of NSL (`scripts/StandardBench/<bench>/U_FNO.sh`) with the data
//! dimensions of NSL's loaders. Parameter counts (complex weights as two reals, the embedded
//! U-Nets' unused parts included) are checked against `fixtures/ufno/reference_param_counts.json`
//! by the tests.

use super::config::{UfnoConfig, UnetNorm};
use crate::arch::normalize_preset_name;
use crate::nsl_fno::Geotype;
use crate::{Error, Result};

pub(crate) const NAMES: &[&str] = &["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"];

/// Every script: 12 modes, a structured 2-D grid, a steady task (BatchNorm).
fn grid(fun_dim: i64, out_dim: i64, n_hidden: i64) -> UfnoConfig {
    UfnoConfig {
        space_dim: 2,
        fun_dim,
        out_dim,
        time_input: false,
        geotype: Geotype::Structured,
        grid_dims: 2,
        latent: [96, 96],
        n_hidden,
        modes: 12,
        unified_pos: false,
        reference: 8,
        unet_norm: UnetNorm::Batch,
    }
}

/// A preset by name (case-insensitive).
pub(crate) fn by_name(name: &str) -> Result<UfnoConfig> {
    Ok(match normalize_preset_name(name).as_str() {
        // 85 × 85, the coefficient as fx, unified positions (8² distances) instead of (x, y).
        "darcy" => UfnoConfig {
            unified_pos: true,
            ..grid(1, 1, 32)
        },
        // 64 × 64, the last 10 frames as fx; dynamic_autoregressive → InstanceNorm.
        "ns" => UfnoConfig {
            unet_norm: UnetNorm::Instance,
            ..grid(10, 1, 64)
        },
        // 221 × 51, the mesh coordinates as pos, no fx.
        "airfoil" => grid(0, 1, 32),
        // 129 × 129, the mesh coordinates as pos and again as fx.
        "pipe" => grid(2, 1, 128),
        // 972 points, Geo-FNO projection on a 96 × 96 latent grid, IPHI without a code.
        "elasticity" => UfnoConfig {
            geotype: Geotype::Unstructured,
            ..grid(0, 1, 128)
        },
        // 101 × 31, the die profile as fx, a time per sample, 4 outputs;
        // dynamic_conditional → InstanceNorm.
        "plasticity" => UfnoConfig {
            time_input: true,
            unet_norm: UnetNorm::Instance,
            ..grid(1, 4, 128)
        },
        _ => {
            return Err(Error::Config(format!(
                "unknown ufno preset {name:?}; known: {}",
                NAMES.join(", ")
            )))
        }
    })
}
