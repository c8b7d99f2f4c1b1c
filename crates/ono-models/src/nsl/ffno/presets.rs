//! The `scripts/StandardBench/<bench>/F_FNO.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's `n_hidden`, 8 layers. Parameter counts:
//! `tests/ffno.rs` against `fixtures/ffno/reference_param_counts.json`.

use super::config::FfnoConfig;
use crate::nsl::settings::NslSettings;

/// The preset of a benchmark ([`Presets::by_name`](crate::arch::Presets::by_name)).
pub(crate) fn by_name(name: &str) -> Option<FfnoConfig> {
    let n_hidden = match name {
        "ns2d" => 20,
        "airfoil" => 32,
        _ => 128,
    };
    Some(FfnoConfig {
        nsl: NslSettings::bench(name, n_hidden)?,
        n_layers: 8,
    })
}
