//! The `scripts/StandardBench/<bench>/Transolver.sh` configurations: each benchmark's settings
//! ([`NslSettings::bench`]) with the script's width, heads, layers, MLP ratio and slices, and
//! where the script differs from the other NSL models' (NS with unified positions, Airfoil with
//! the mesh coordinates as a 2-channel input function). Parameter counts: `tests/transolver.rs`
//! against `fixtures/transolver/reference_param_counts.json`.

use super::config::TransolverConfig;
use crate::nsl::settings::NslSettings;

/// The preset of a benchmark ([`Presets::by_name`](crate::arch::Presets::by_name)).
pub(crate) fn by_name(name: &str) -> Option<TransolverConfig> {
    let (n_hidden, slice_num) = match name {
        "ns2d" => (256, 32),
        _ => (128, 64),
    };
    let mut nsl = NslSettings::bench(name, n_hidden)?;
    match name {
        // ns/Transolver.sh: --unified_pos 1 --ref 8.
        "ns2d" => nsl.unified_pos = true,
        // airfoil/Transolver.sh: --fun_dim 2 (NSL's airfoil loader passes the mesh coordinates
        // as both x and fx).
        "airfoil" => nsl.fun_dim = 2,
        _ => {}
    }
    Some(TransolverConfig {
        nsl,
        n_layers: 8,
        n_heads: 8,
        // plasticity/Transolver.sh leaves run.py's default 1.
        mlp_ratio: if name == "plasticity" { 1 } else { 2 },
        slice_num,
    })
}
