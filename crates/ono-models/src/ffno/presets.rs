//! The `scripts/StandardBench/<bench>/F_FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`, 8 layers. Parameter counts:
//! `tests/ffno.rs` against `fixtures/ffno/reference_param_counts.json`.

use super::config::FfnoConfig;
use crate::arch::normalize_preset_name;
use crate::nsl_settings::{NslSettings, BENCHMARKS};
use crate::{Error, Result};

pub(crate) const NAMES: &[&str] = BENCHMARKS;

pub(crate) fn by_name(name: &str) -> Result<FfnoConfig> {
    let name = normalize_preset_name(name);
    let n_hidden = match name.as_str() {
        "ns" => 20,
        "airfoil" => 32,
        _ => 128,
    };
    match NslSettings::bench(&name, n_hidden) {
        Some(nsl) => Ok(FfnoConfig { nsl, n_layers: 8 }),
        None => Err(Error::Config(format!(
            "unknown ffno preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}
