//! NSL's F-FNO against its fixtures (`fixtures/ffno`), and the presets' parameter counts against
//! NSL's StandardBench scripts'.

mod common;

use ono_models::nsl::settings::NslSettings;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};
use ono_models::nsl::ffno::FfnoConfig;
use ono_models::{Error, Model, ModelInput};
use tch::{Device, Kind, Tensor};

#[test]
fn ffno_darcy_small() {
    run_case("ffno", "ffno_darcy_small", "ffno");
}

#[test]
fn ffno_irregular_small() {
    run_case("ffno", "ffno_irregular_small", "ffno");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught(
        "ffno",
        "ffno_darcy_small",
        "spectral_layers.1.fourier_weight.0",
    );
    perturbed_weight_is_caught(
        "ffno",
        "ffno_darcy_small",
        "spectral_layers.2.fourier_weight.1",
    );
    perturbed_weight_is_caught("ffno", "ffno_darcy_small", "preprocess.linear_pre.0.weight");
    perturbed_weight_is_caught("ffno", "ffno_irregular_small", "fftproject_out.weights2");
    perturbed_weight_is_caught(
        "ffno",
        "ffno_irregular_small",
        "spectral_layers.0.fourier_weight.1",
    );
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count("ffno", &["configs", bench, "param_count_real"]);
        assert_param_count("ffno", bench, count);
    }
}

fn small(grid_dims: usize, space_dim: i64) -> FfnoConfig {
    FfnoConfig {
        nsl: NslSettings {
            space_dim,
            fun_dim: 2,
            out_dim: 3,
            grid_dims,
            n_hidden: 4,
            modes: 3,
            unified_pos: false,
            ..FfnoConfig::default().nsl
        },
        n_layers: 2,
    }
}

fn has_var(model: &Model, name: &str) -> bool {
    model.var_store().variables().contains_key(name)
}

/// 1-D grids take NSL's plain FNO layer (`weights1`, no padding), 3-D grids three factorised
/// axes (`fourier_weight.0..2`, padded to multiples of 16); a time input needs `time_input`.
#[test]
fn one_and_three_dimensional_grids_and_time() {
    ono_testing::init();
    let opts = (Kind::Float, Device::Cpu);
    let m1 = Model::new(&small(1, 1).into(), Device::Cpu, Kind::Float).unwrap();
    assert!(has_var(&m1, "spectral_layers.1.weights1"));
    assert!(!has_var(&m1, "spectral_layers.1.fourier_weight.0"));
    let (pos, fx) = (
        Tensor::rand([2, 10, 1], opts),
        Tensor::randn([2, 10, 2], opts),
    );
    let out = m1.forward(&ModelInput::new(&pos, &fx), false).unwrap();
    assert_eq!(out.size(), [2, 10, 3]);

    let m3 = Model::new(&small(3, 3).into(), Device::Cpu, Kind::Float).unwrap();
    assert!(has_var(&m3, "spectral_layers.0.fourier_weight.2"));
    let (pos, fx) = (
        Tensor::rand([2, 60, 3], opts),
        Tensor::randn([2, 60, 2], opts),
    );
    let grid = [5i64, 4, 3];
    let out = m3
        .forward(&ModelInput::new(&pos, &fx).with_grid(Some(&grid)), true)
        .unwrap();
    assert_eq!(out.size(), [2, 60, 3]);
    let t = Tensor::rand([2, 1], opts);
    let err = m3
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_grid(Some(&grid))
                .with_time(Some(&t)),
            false,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    let timed = FfnoConfig {
        nsl: NslSettings {
            time_input: true,
            ..small(2, 2).nsl
        },
        ..small(2, 2)
    };
    let m = Model::new(&timed.into(), Device::Cpu, Kind::Float).unwrap();
    assert!(has_var(&m, "time_fc.2.weight"));
    let (pos, fx) = (
        Tensor::rand([2, 12, 2], opts),
        Tensor::randn([2, 12, 2], opts),
    );
    let grid = [3i64, 4];
    let input = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
    let a = m.forward(&input.with_time(Some(&t)), false).unwrap();
    let b = m
        .forward(&input.with_time(Some(&(&t + 0.5))), false)
        .unwrap();
    assert!(a.f_sub(&b).unwrap().abs().max().double_value(&[]) > 0.0);
    assert!(m.forward(&input, false).is_err());
}
