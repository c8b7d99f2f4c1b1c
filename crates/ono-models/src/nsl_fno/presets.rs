//! The `scripts/StandardBench/<bench>/FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`. Parameter counts: `tests/geofno.rs`
//! against `fixtures/fno/reference_param_counts.json` (`nsl_FNO`).

use super::config::NslFnoConfig;
use crate::arch::normalize_preset_name;
use crate::nsl_settings::{NslSettings, BENCHMARKS};
use crate::{Error, Result};

pub(crate) const NAMES: &[&str] = BENCHMARKS;

pub(crate) fn by_name(name: &str) -> Result<NslFnoConfig> {
    let name = normalize_preset_name(name);
    let n_hidden = match name.as_str() {
        "darcy" | "pipe" | "plasticity" => 128,
        "ns" => 64,
        _ => 32,
    };
    match NslSettings::bench(&name, n_hidden) {
        Some(nsl) => Ok(NslFnoConfig { nsl }),
        None => Err(Error::Config(format!(
            "unknown nsl_fno preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}
