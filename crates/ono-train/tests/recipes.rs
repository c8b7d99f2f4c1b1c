//! The reference scripts' settings per benchmark (`ono_train::recipe`), as the ONO and FNO /
//! Geo-FNO scripts train: regimes, normalizers and Darcy's derivative weight.

use ono_data::benchmarks::{Benchmark, Layout};
use ono_data::normalizer::NormalizerKind;
use ono_train::recipe::recipe;
use ono_train::Regime;

#[test]
fn darcy_is_unit_normalized_with_the_derivative_term_in_ono_and_gaussian_in_fno() {
    let l = recipe(Benchmark::Darcy, Layout::Ono);
    assert_eq!(
        (l.normalize_x, l.normalize_y, l.derivative_alpha),
        (NormalizerKind::Unit, NormalizerKind::Unit, 0.1)
    );
    assert_eq!(l.preset, Some("darcy"));
    let f = recipe(Benchmark::Darcy, Layout::Fno);
    assert_eq!(f.normalize_y, NormalizerKind::Gaussian);
    assert_eq!(f.derivative_alpha, 0.0);
}

/// The neuraloperator Darcy set trains as Darcy in every layout (so every model that trains on
/// one trains on the other alike); its Burgers set as neuraloperator's config: plain, rel. L2.
#[test]
fn neuralop_sets_train_as_darcy_and_as_the_neuraloperator_burgers_config() {
    for layout in [Layout::Ono, Layout::Fno, Layout::Galerkin] {
        assert_eq!(
            recipe(Benchmark::NeuralopDarcy, layout),
            recipe(Benchmark::Darcy, layout),
            "{layout:?}"
        );
    }
    let b = recipe(Benchmark::NeuralopBurgers, Layout::Ono);
    assert_eq!(
        (b.regime, b.normalize_x, b.normalize_y, b.preset),
        (
            Regime::Steady,
            NormalizerKind::None,
            NormalizerKind::None,
            None
        )
    );
    assert_eq!(b.loss, ono_train::config::LossKind::RelL2);
}

#[test]
fn time_series_benchmarks_have_their_regimes() {
    assert_eq!(
        recipe(Benchmark::Ns2d, Layout::Ono).regime,
        Regime::Autoregressive
    );
    assert_eq!(
        recipe(Benchmark::Plasticity, Layout::Ono).regime,
        Regime::PerTimeStep
    );
    for b in [
        Benchmark::Darcy,
        Benchmark::Burgers,
        Benchmark::Airfoil,
        Benchmark::Pipe,
        Benchmark::Elasticity,
        Benchmark::ElasticityGrid,
    ] {
        assert_eq!(recipe(b, Layout::Ono).regime, Regime::Steady, "{b:?}");
    }
}

#[test]
fn pipe_and_elasticity_normalize_only_in_the_ono_layout() {
    assert_eq!(
        recipe(Benchmark::Pipe, Layout::Ono).normalize_x,
        NormalizerKind::Unit
    );
    assert_eq!(
        recipe(Benchmark::Pipe, Layout::Fno).normalize_x,
        NormalizerKind::None
    );
    assert_eq!(
        recipe(Benchmark::Elasticity, Layout::Ono).normalize_y,
        NormalizerKind::Unit
    );
    assert_eq!(
        recipe(Benchmark::Elasticity, Layout::Fno).normalize_y,
        NormalizerKind::None
    );
}
