//! The `scripts/StandardBench/<bench>/LSM.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden` and 8 heads, the U-Net norm NSL derives
//! from the task, no unified positions (the Darcy script sets `--unified_pos 0`, unlike
//! FNO's) and no input function on Pipe (`--fun_dim 0`). Parameter counts: `tests/lsm.rs` against `fixtures/lsm/reference_param_counts.json`.

use super::config::LsmConfig;
use crate::arch::normalize_preset_name;
use crate::nsl_settings::{NslSettings, UnetNorm, BENCHMARKS};
use crate::{Error, Result};

pub(crate) const NAMES: &[&str] = BENCHMARKS;

pub(crate) fn by_name(name: &str) -> Result<LsmConfig> {
    let name = normalize_preset_name(name);
    let n_hidden = match name.as_str() {
        "darcy" | "ns" => 64,
        _ => 32,
    };
    match NslSettings::bench(&name, n_hidden) {
        Some(nsl) => Ok(LsmConfig {
            nsl: NslSettings {
                unified_pos: false,
                // pipe/LSM.sh passes `--fun_dim 0`: the loader's fx (the mesh coordinates
                // again) is dropped; the other pipe scripts take it.
                fun_dim: if name == "pipe" { 0 } else { nsl.fun_dim },
                ..nsl
            },
            n_heads: 8,
            unet_norm: UnetNorm::of_bench(&name),
        }),
        None => Err(Error::Config(format!(
            "unknown lsm preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}
