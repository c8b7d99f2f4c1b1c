//! NSL's U-FNO against its fixtures (`fixtures/ufno`: a train-mode pass with BatchNorm batch
//! statistics, the updated running buffers, an eval-mode pass on them), and the presets'
//! parameter counts against NSL's StandardBench scripts' (the embedded U-Nets' unused parts
//! included).

mod common;

use ono_models::nsl::settings::NslSettings;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};
use ono_models::nsl::ufno::UfnoConfig;
use ono_models::{Model, ModelInput};
use ono_nn::unet::UNetNorm;
use tch::{Device, Kind, Tensor};

#[test]
fn ufno_darcy_small() {
    run_case("ufno", "ufno_darcy_small", "ufno");
}

#[test]
fn ufno_darcy_wellcond() {
    run_case("ufno", "ufno_darcy_wellcond", "ufno");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "conv1.weights2");
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "w3.weight");
    perturbed_weight_is_caught(
        "ufno",
        "ufno_darcy_wellcond",
        "u_net2.up1.conv.double_conv.0.weight",
    );
    perturbed_weight_is_caught(
        "ufno",
        "ufno_darcy_wellcond",
        "u_net3.down4.maxpool_conv.1.double_conv.4.bias",
    );
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "u_net3.outc.conv.weight");
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count("ufno", &["configs", bench, "param_count_real"]);
        assert_param_count("ufno", bench, count);
    }
}

/// The time-dependent scripts' U-Nets (InstanceNorm, no running statistics: training and
/// evaluation agree) with a time input; the embedded U-Nets' own preprocess, `time_fc`, fc1 and
/// fc2 exist and get no gradient.
#[test]
fn instance_norm_and_time_input() {
    ono_testing::init();
    let cfg = UfnoConfig {
        nsl: NslSettings {
            space_dim: 2,
            fun_dim: 1,
            out_dim: 2,
            time_input: true,
            n_hidden: 2,
            modes: 3,
            unified_pos: false,
            ..UfnoConfig::default().nsl
        },
        unet_norm: UNetNorm::Instance,
    };
    let m = Model::new(&cfg.into(), Device::Cpu, Kind::Double).unwrap();
    let vars = m.var_store().variables();
    assert!(!vars.keys().any(|k| k.contains("running")));
    for unused in [
        "u_net2.preprocess.linear_pre.0.weight",
        "u_net2.time_fc.0.weight",
        "u_net3.fc1.bias",
        "u_net3.fc2.weight",
    ] {
        assert!(vars.contains_key(unused), "{unused}");
    }
    let opts = (Kind::Double, Device::Cpu);
    let (pos, fx, t) = (
        Tensor::rand([2, 140, 2], opts),
        Tensor::randn([2, 140, 1], opts),
        Tensor::rand([2, 1], opts),
    );
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
        let unused = ["preprocess", "time_fc", "fc1", "fc2"].iter().any(|p| {
            name.starts_with(&format!("u_net2.{p}")) || name.starts_with(&format!("u_net3.{p}"))
        });
        let g = var.grad();
        if unused {
            assert!(!g.defined(), "{name} got a gradient");
        } else if var.requires_grad() {
            assert!(g.defined(), "{name} got no gradient");
        }
    }
}

/// A 1-D grid is not padded (NSL pads only 2-D and 3-D grids), so the U-Nets need a length
/// divisible by 16 (NSL's `Up1D` fails otherwise, and so does the port, with an error).
#[test]
fn one_dimensional_grids_need_multiples_of_16() {
    ono_testing::init();
    let cfg = UfnoConfig {
        nsl: NslSettings {
            space_dim: 1,
            fun_dim: 1,
            out_dim: 1,
            grid_dims: 1,
            n_hidden: 2,
            modes: 3,
            unified_pos: false,
            ..UfnoConfig::default().nsl
        },
        ..UfnoConfig::default()
    };
    let m = Model::new(&cfg.into(), Device::Cpu, Kind::Float).unwrap();
    let opts = (Kind::Float, Device::Cpu);
    let run = |n: i64| {
        let (pos, fx) = (
            Tensor::rand([2, n, 1], opts),
            Tensor::randn([2, n, 1], opts),
        );
        m.forward(&ModelInput::new(&pos, &fx), true)
            .map(|o| o.size())
    };
    assert_eq!(run(32).unwrap(), [2, 32, 1]);
    assert!(run(40).is_err());
}
