//! The `scripts/StandardBench/<bench>/U_FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`, and the U-Net norm NSL derives from the
//! task (BatchNorm for the steady benchmarks, InstanceNorm for NS and Plasticity). Parameter
//! counts: `tests/ufno.rs` against `fixtures/ufno/reference_param_counts.json`.

use super::config::UfnoConfig;
use crate::nsl::settings::{bench_unet_norm, NslSettings};

/// The preset of a benchmark ([`Presets::by_name`](crate::arch::Presets::by_name)).
pub(crate) fn by_name(name: &str) -> Option<UfnoConfig> {
    let n_hidden = match name {
        "darcy" | "airfoil" => 32,
        "ns2d" => 64,
        _ => 128,
    };
    Some(UfnoConfig {
        nsl: NslSettings::bench(name, n_hidden)?,
        unet_norm: bench_unet_norm(name),
    })
}
