//! The configurations of the reference scripts, per benchmark. Parameter counts (complex
//! weights as two reals, the FNO scripts' `count_params`) are checked against the fixtures'
//! `reference_param_counts.json` by the tests.

use super::config::{FnoConfig, FnoSettings};
use crate::arch::Presets;

/// The first preset of the dimension.
pub(crate) fn base<const D: usize>() -> FnoConfig<D> {
    FnoConfig::by_name(FnoConfig::<D>::NAMES[0]).expect("the first preset exists")
}

fn config<const D: usize>(modes: &[i64], width: i64, padding: &[i64]) -> FnoSettings {
    FnoSettings {
        space_dim: D as i64,
        fun_dim: 1,
        out_dim: 1,
        modes: modes.to_vec(),
        width,
        n_layers: 4,
        padding: padding.to_vec(),
        pos_input: false,
        proj_hidden: 128,
        unused_batchnorms: false,
    }
}

impl<const D: usize> Presets for FnoConfig<D> {
    const NAMES: &'static [&'static str] = match D {
        1 => &["burgers"],
        2 => &["darcy", "ns2d", "airfoil", "pipe"],
        _ => &["ns2d", "plasticity"],
    };

    fn by_name(name: &str) -> Option<Self> {
        let settings = match (D, name) {
            // fourier_1d.py: FNO1d(16, 64), (a, x) in; the padding lines are commented out.
            (1, "burgers") => config::<D>(&[16], 64, &[0]),
            // fourier_2d.py: FNO2d(12, 12, 32), (a, x, y) in, padding 9.
            (2, "darcy") => config::<D>(&[12, 12], 32, &[9, 9]),
            // fourier_2d_time.py: FNO2d(12, 12, 20), the last 10 frames + (x, y) in, no padding,
            // four unused BatchNorm2d.
            (2, "ns2d") => FnoSettings {
                fun_dim: 10,
                unused_batchnorms: true,
                ..config::<D>(&[12, 12], 20, &[0, 0])
            },
            // Geo-FNO naca_geofno.py: FNO2d(modes * 2, modes, width) = (24, 12, 32), padding 8,
            // the mesh nodes' (X, Y) in.
            (2, "airfoil") => FnoSettings {
                fun_dim: 0,
                pos_input: true,
                ..config::<D>(&[24, 12], 32, &[8, 8])
            },
            // Geo-FNO pipe.py: FNO2d(12, 12, 32), padding 8, (X, Y) in.
            (2, "pipe") => FnoSettings {
                fun_dim: 0,
                pos_input: true,
                ..config::<D>(&[12, 12], 32, &[8, 8])
            },
            // fourier_3d.py: FNO3d(8, 8, 8, 20), 10 frames + (x, y, t) in, padding 6 on t.
            (3, "ns2d") => FnoSettings {
                fun_dim: 10,
                unused_batchnorms: true,
                ..config::<D>(&[8, 8, 8], 20, &[0, 0, 6])
            },
            // Geo-FNO plasticity_3d.py: FNO3d(12, 12, 8, 32), padding 5 on every axis, 4 outputs.
            (3, "plasticity") => FnoSettings {
                out_dim: 4,
                unused_batchnorms: true,
                ..config::<D>(&[12, 12, 8], 32, &[5, 5, 5])
            },
            _ => return None,
        };
        Some(FnoConfig(settings))
    }
}
