//! The elasticity script's configuration. Its parameter count (complex weights as two reals) is
//! checked against `fixtures/geofno/reference_param_counts.json` by the tests.

use super::config::GeoFnoConfig;
use crate::arch::Presets;

impl Presets for GeoFnoConfig {
    const NAMES: &'static [&'static str] = &["elasticity"];

    fn by_name(name: &str) -> Option<Self> {
        match name {
            // elas_geofno.py: FNO2d(12, 12, 32, in_channels=2, out_channels=1), s1 = s2 = 40,
            // IPHI() (width 32), the mesh as pos and the 42-entry code rr as fx.
            "elasticity" => Some(GeoFnoConfig {
                space_dim: 2,
                fun_dim: 42,
                out_dim: 1,
                modes: [12, 12],
                width: 32,
                latent: [40, 40],
                iphi_width: 32,
                proj_hidden: 128,
            }),
            _ => None,
        }
    }
}
