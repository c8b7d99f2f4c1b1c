//! What the reference scripts train with on each published benchmark, beside the data: how
//! samples are fed, the normalizers, Darcy's derivative-loss weight and the ONO preset. Unset
//! keys of an experiment file's `[data]` and `[loss]` take these values.

use ono_data::benchmarks::{Benchmark, Layout};
use ono_data::normalizer::NormalizerKind;
use serde::{Deserialize, Serialize};

use crate::config::LossKind;
use crate::regime::Regime;

/// See the module documentation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    /// How the samples are fed.
    pub regime: Regime,
    /// Normalizer of the input functions.
    pub normalize_x: NormalizerKind,
    /// Normalizer of the targets.
    pub normalize_y: NormalizerKind,
    /// Darcy's derivative-loss weight (0 elsewhere).
    pub derivative_alpha: f64,
    /// The training loss.
    pub loss: LossKind,
    /// γ of the Galerkin H¹ term.
    pub h1_gamma: f64,
    /// The ONO preset of this benchmark (ONO has none for Burgers and the gridded Elasticity).
    pub preset: Option<&'static str>,
}

/// The recipe of `benchmark` in the scripts of `layout` (ONO's, or FNO's / Geo-FNO's where they
/// differ: Darcy's Gaussian normalizers without the derivative term, no normalizers on
/// Elasticity's targets and on Pipe; the Galerkin Transformer's: its normalizers fitted on NumPy
/// arrays and its H¹ losses, γ = 0.1 on Burgers, 0.5 on Darcy, 0 in the inverse problem, whose
/// loader normalizes the input itself because the noise is added after normalization).
/// `neuralop_darcy` trains as `darcy` in the same layout (so every model that trains on `darcy`
/// trains on it alike); `neuralop_burgers` as neuraloperator's Burgers config: no normalizers,
/// the relative L2.
pub fn recipe(benchmark: Benchmark, layout: Layout) -> Recipe {
    use NormalizerKind::{Gaussian, GaussianPopulation, None as Plain, Unit};
    let ono = layout == Layout::Ono;
    let steady = |normalize_x, normalize_y, preset| Recipe {
        regime: Regime::Steady,
        normalize_x,
        normalize_y,
        derivative_alpha: 0.0,
        loss: LossKind::RelL2,
        h1_gamma: 0.0,
        preset,
    };
    let galerkin = |normalize_x, normalize_y, h1_gamma| Recipe {
        loss: LossKind::GalerkinH1,
        h1_gamma,
        ..steady(normalize_x, normalize_y, None)
    };
    match (benchmark, layout) {
        (Benchmark::Burgers, Layout::Galerkin) => return galerkin(Plain, Plain, 0.1),
        (Benchmark::Darcy, Layout::Galerkin) => {
            return galerkin(GaussianPopulation, GaussianPopulation, 0.5)
        }
        (Benchmark::DarcyInverse, _) => return galerkin(Plain, GaussianPopulation, 0.0),
        _ => {}
    }
    match benchmark {
        Benchmark::Darcy if ono => Recipe {
            derivative_alpha: 0.1,
            ..steady(Unit, Unit, Some("darcy"))
        },
        Benchmark::Darcy => steady(Gaussian, Gaussian, Some("darcy")),
        Benchmark::Ns2d => Recipe {
            regime: Regime::Autoregressive,
            ..steady(Plain, Plain, Some("ns2d"))
        },
        Benchmark::Burgers => steady(Plain, Plain, None),
        Benchmark::Airfoil => steady(Plain, Plain, Some("airfoil")),
        Benchmark::Pipe if ono => steady(Unit, Unit, Some("pipe")),
        Benchmark::Pipe => steady(Plain, Plain, Some("pipe")),
        Benchmark::Elasticity if ono => steady(Plain, Unit, Some("elasticity")),
        Benchmark::Elasticity => steady(Plain, Plain, Some("elasticity")),
        Benchmark::ElasticityGrid => steady(Plain, Plain, None),
        Benchmark::Plasticity => Recipe {
            regime: Regime::PerTimeStep,
            ..steady(Unit, Plain, Some("plasticity"))
        },
        Benchmark::DarcyInverse => galerkin(Plain, GaussianPopulation, 0.0),
        Benchmark::NeuralopDarcy => recipe(Benchmark::Darcy, layout),
        Benchmark::NeuralopBurgers => steady(Plain, Plain, None),
    }
}
