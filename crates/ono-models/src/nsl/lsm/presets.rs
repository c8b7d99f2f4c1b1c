//! The `scripts/StandardBench/<bench>/LSM.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden` and 8 heads, the U-Net norm NSL derives
//! from the task, no unified positions (the Darcy script sets `--unified_pos 0`, unlike
//! FNO's) and no input function on Pipe (`--fun_dim 0`). Parameter counts: `tests/lsm.rs` against
//! `fixtures/lsm/reference_param_counts.json`.

use super::config::LsmConfig;
use crate::nsl::settings::{bench_unet_norm, NslSettings};

/// The preset of a benchmark ([`Presets::by_name`](crate::arch::Presets::by_name)).
pub(crate) fn by_name(name: &str) -> Option<LsmConfig> {
    let n_hidden = match name {
        "darcy" | "ns2d" => 64,
        _ => 32,
    };
    let nsl = NslSettings::bench(name, n_hidden)?;
    Some(LsmConfig {
        nsl: NslSettings {
            unified_pos: false,
            // pipe/LSM.sh passes `--fun_dim 0`: the loader's fx (the mesh coordinates again) is
            // dropped; the other pipe scripts take it.
            fun_dim: if name == "pipe" { 0 } else { nsl.fun_dim },
            ..nsl
        },
        n_heads: 8,
        unet_norm: bench_unet_norm(name),
    })
}
