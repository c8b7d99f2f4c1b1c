//! NSL's Latent Spectral Model against its fixtures (`fixtures/lsm`: a Darcy-style grid with
//! BatchNorm, trained and evaluated, twice, and a point cloud through the Geo-FNO projection),
//! the presets' parameter counts against NSL's StandardBench scripts', and the inputs and
//! settings the port refuses.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};
use ono_models::nsl::lsm::LsmConfig;
use ono_models::nsl::settings::{Geotype, NslSettings};
use ono_models::{Error, Model, ModelInput};
use ono_nn::unet::UNetNorm;
use tch::{Device, Kind, Tensor};

#[test]
fn lsm_darcy_small() {
    run_case("lsm", "lsm_darcy_small", "lsm");
}

#[test]
fn lsm_darcy_wellcond() {
    run_case("lsm", "lsm_darcy_wellcond", "lsm");
}

#[test]
fn lsm_irregular_small() {
    run_case("lsm", "lsm_irregular_small", "lsm");
}

#[test]
fn perturbed_weights_are_caught() {
    for name in [
        "process1.latent",
        "process3.weights",
        "process5.encoder_attn.weight",
        "process2.decoder_attn.bias",
        "up2.conv.double_conv.0.weight",
        "down4.maxpool_conv.1.double_conv.4.bias",
        "outc.conv.weight",
        "fc1.weight",
    ] {
        perturbed_weight_is_caught("lsm", "lsm_darcy_wellcond", name);
    }
    perturbed_weight_is_caught("lsm", "lsm_irregular_small", "fftproject_out.weights2");
    perturbed_weight_is_caught("lsm", "lsm_irregular_small", "process4.latent");
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count("lsm", &["configs", bench, "param_count_real"]);
        assert_param_count("lsm", bench, count);
    }
}

/// A small grid LSM: c = 2, one head.
fn small(dims: usize, norm: UNetNorm, time_input: bool) -> LsmConfig {
    LsmConfig {
        nsl: NslSettings {
            space_dim: dims as i64,
            fun_dim: 1,
            out_dim: 2,
            time_input,
            grid_dims: dims,
            n_hidden: 2,
            unified_pos: false,
            ..LsmConfig::default().nsl
        },
        n_heads: 1,
        unet_norm: norm,
    }
}

fn inputs(n: i64, dims: i64, kind: Kind) -> (Tensor, Tensor, Tensor) {
    let opts = (kind, Device::Cpu);
    (
        Tensor::rand([2, n, dims], opts),
        Tensor::randn([2, n, 1], opts),
        Tensor::rand([2, 1], opts),
    )
}

/// The time-dependent scripts' form: InstanceNorm (no running statistics, so training and
/// evaluation agree) with a time input; every parameter gets a gradient.
#[test]
fn instance_norm_and_time_input() {
    ono_testing::init();
    let m = Model::new(
        &small(2, UNetNorm::Instance, true).into(),
        Device::Cpu,
        Kind::Double,
    )
    .unwrap();
    let vars = m.var_store().variables();
    assert!(!vars.keys().any(|k| k.contains("running")));
    assert!(vars.contains_key("time_fc.0.weight"));
    let (pos, fx, t) = inputs(140, 2, Kind::Double);
    // Padded to 16 × 32: a 1 × 2 coarsest level (InstanceNorm needs more than one cell).
    let grid = [7i64, 20];
    let input = ModelInput::new(&pos, &fx)
        .with_grid(Some(&grid))
        .with_time(Some(&t));
    let eval = m.forward(&input, false).unwrap();
    let train = m.forward(&input, true).unwrap();
    assert_eq!(train.size(), [2, 140, 2]);
    assert!(train.f_sub(&eval).unwrap().abs().max().double_value(&[]) < 1e-12);
    train.sum(Kind::Double).backward();
    for (name, var) in &vars {
        assert!(var.grad().defined(), "{name} got no gradient");
    }
    // The time matters.
    let later = m
        .forward(&input.with_time(Some(&(&t + 0.5))), false)
        .unwrap();
    assert!(later.f_sub(&eval).unwrap().abs().max().double_value(&[]) > 1e-6);
}

/// NSL's 1-D and 3-D forms: a 1-D grid is not padded, so its length must be a multiple of 16;
/// a 3-D grid is padded to 16³ (patches of one cell).
#[test]
fn one_and_three_dimensional_grids() {
    ono_testing::init();
    let m1 = Model::new(
        &small(1, UNetNorm::Batch, false).into(),
        Device::Cpu,
        Kind::Float,
    )
    .unwrap();
    let run1 = |n: i64| {
        let (pos, fx, _) = inputs(n, 1, Kind::Float);
        m1.forward(&ModelInput::new(&pos, &fx), true)
            .map(|o| o.size())
    };
    assert_eq!(run1(32).unwrap(), [2, 32, 2]);
    assert!(matches!(run1(40), Err(Error::Shape { .. })));
    let m3 = Model::new(
        &small(3, UNetNorm::Batch, false).into(),
        Device::Cpu,
        Kind::Float,
    )
    .unwrap();
    let (pos, fx, _) = inputs(5 * 6 * 7, 3, Kind::Float);
    let grid = [5i64, 6, 7];
    let out = m3
        .forward(&ModelInput::new(&pos, &fx).with_grid(Some(&grid)), true)
        .unwrap();
    assert_eq!(out.size(), [2, 210, 2]);
    assert!(bool::try_from(out.isfinite().all()).unwrap());
}

#[test]
fn refuses_bad_settings_and_inputs() {
    ono_testing::init();
    let mut heads = small(2, UNetNorm::Batch, false);
    heads.n_heads = 3;
    let e = Model::new(&heads.into(), Device::Cpu, Kind::Float).unwrap_err();
    assert!(e.to_string().contains("n_heads"), "{e}");
    let mut cloud = small(2, UNetNorm::Batch, false);
    cloud.nsl.geotype = Geotype::Unstructured;
    cloud.nsl.fun_dim = 0;
    cloud.nsl.modes = 4;
    cloud.nsl.latent = [32, 40];
    let e = Model::new(&cloud.clone().into(), Device::Cpu, Kind::Float).unwrap_err();
    assert!(e.to_string().contains("multiples of 16"), "{e}");
    cloud.nsl.latent = [32, 48];
    assert!(Model::new(&cloud.into(), Device::Cpu, Kind::Float).is_ok());

    let m = Model::new(
        &small(2, UNetNorm::Batch, false).into(),
        Device::Cpu,
        Kind::Float,
    )
    .unwrap();
    let (pos, fx, t) = inputs(140, 2, Kind::Float);
    let grid = [7i64, 20];
    let ok = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
    assert!(m.forward(&ok, true).is_ok());
    // A time for a model without time_input, a grid that does not hold the points, no grid,
    // the wrong fx, non-finite values.
    assert!(m.forward(&ok.with_time(Some(&t)), false).is_err());
    assert!(m.forward(&ok.with_grid(Some(&[7, 21])), false).is_err());
    assert!(m.forward(&ok.with_grid(None), false).is_err());
    let fx2 = Tensor::randn([2, 140, 2], (Kind::Float, Device::Cpu));
    assert!(m
        .forward(&ModelInput::new(&pos, &fx2).with_grid(Some(&grid)), false)
        .is_err());
    let nan = fx.full_like(f64::NAN);
    assert!(m
        .forward(&ModelInput::new(&pos, &nan).with_grid(Some(&grid)), false)
        .is_err());
    // One sample on a 16 × 16 latent grid: the bottleneck's single value cannot be
    // batch-normalised in training (PyTorch refuses too); evaluation is fine.
    let (p1, f1) = (pos.narrow(0, 0, 1), fx.narrow(0, 0, 1));
    let (p1, f1) = (p1.narrow(1, 0, 112), f1.narrow(1, 0, 112));
    let one = ModelInput::new(&p1, &f1).with_grid(Some(&[7, 16]));
    assert!(matches!(m.forward(&one, true), Err(Error::Nn(_))));
    assert!(m.forward(&one, false).is_ok());
}
