//! The `scripts/StandardBench/<bench>/FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`. Parameter counts: `tests/geofno.rs`
//! against `fixtures/fno/reference_param_counts.json` (`nsl_FNO`).

use super::config::NslFnoConfig;
use crate::nsl::settings::NslSettings;

/// The preset of a benchmark ([`Presets::by_name`](crate::arch::Presets::by_name)).
pub(crate) fn by_name(name: &str) -> Option<NslFnoConfig> {
    let n_hidden = match name {
        "darcy" | "pipe" | "plasticity" => 128,
        "ns2d" => 64,
        _ => 32,
    };
    Some(NslFnoConfig {
        nsl: NslSettings::bench(name, n_hidden)?,
    })
}
