//! The `scripts/StandardBench/<bench>/U_FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`, and the U-Net norm NSL derives from the
//! task (BatchNorm for the steady benchmarks, InstanceNorm for NS and Plasticity). Parameter
//! counts: `tests/ufno.rs` against `fixtures/ufno/reference_param_counts.json`.

use super::config::{UfnoConfig, UnetNorm};
use crate::arch::normalize_preset_name;
use crate::nsl_settings::{NslSettings, BENCHMARKS};
use crate::{Error, Result};

pub(crate) const NAMES: &[&str] = BENCHMARKS;

pub(crate) fn by_name(name: &str) -> Result<UfnoConfig> {
    let name = normalize_preset_name(name);
    let n_hidden = match name.as_str() {
        "darcy" | "airfoil" => 32,
        "ns" => 64,
        _ => 128,
    };
    match NslSettings::bench(&name, n_hidden) {
        Some(nsl) => Ok(UfnoConfig {
            nsl,
            unet_norm: UnetNorm::of_bench(&name),
        }),
        None => Err(Error::Config(format!(
            "unknown ufno preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}
