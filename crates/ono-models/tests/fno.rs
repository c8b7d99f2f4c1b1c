//! FNO 1-D/2-D/3-D and Geo-FNO on structured meshes against the reference scripts' fixtures
//! (`fixtures/fno`, `fixtures/geofno`), and the presets' parameter counts against the scripts'.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn fno1d_small() {
    run_case("fno", "fno1d_small", "fno1d");
}

#[test]
fn fno2d_small() {
    run_case("fno", "fno2d_small", "fno2d");
}

#[test]
fn fno3d_small() {
    run_case("fno", "fno3d_small", "fno3d");
}

#[test]
fn geofno_airfoil_small() {
    run_case("geofno", "airfoil_geofno_small", "fno2d");
}

#[test]
fn geofno_plasticity_small() {
    run_case("geofno", "plasticity_geofno_small", "fno3d");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("fno", "fno2d_small", "conv1.weights1");
    perturbed_weight_is_caught("fno", "fno1d_small", "w3.bias");
    perturbed_weight_is_caught("geofno", "plasticity_geofno_small", "fc0.weight");
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    let fno = |k: &str| reference_count("fno", &["configs", k, "param_count_real"]);
    assert_param_count("fno1d", "burgers", fno("FNO1d_burgers"));
    assert_param_count("fno2d", "darcy", fno("FNO2d_darcy"));
    assert_param_count("fno3d", "ns", fno("FNO3d_ns"));
    let geo = |k: &str| reference_count("geofno", &["configs", k, "param_count_real"]);
    assert_param_count("fno2d", "airfoil", geo("airfoil"));
    assert_param_count("fno2d", "pipe", geo("pipe"));
    assert_param_count("fno3d", "plasticity", geo("plasticity"));
    // fourier_2d_time.py with its four unused BatchNorm2d (docs/models.md).
    assert_param_count("fno2d", "ns", 926_517);
}

/// A reference `state_dict` saved by `torch.save` (complex spectral weights) imports into
/// `fno2d` and reproduces the fixture's output; the export holds the same tensors.
#[test]
fn a_torch_save_state_dict_with_complex_weights_imports() {
    use ono_models::{Model, ModelInput};
    use tch::{Device, Kind};
    ono_testing::init();
    let fx = common::fixture("fno", "fno2d_small");
    let model = Model::new(&fx.config, Device::Cpu, Kind::Float).unwrap();
    let pt = ono_testing::fixtures_dir().join("fno/fno2d_small.state_dict.pt");
    model.load_reference_file(&pt).unwrap();
    let x = &fx.tensors["input.x"];
    let (b, n) = (x.size()[0], x.size()[1]);
    let a = x.reshape([b, n * n, 1]);
    let pos = ono_nn::grid::index_grid(&[n, n], Kind::Float, Device::Cpu)
        .unwrap()
        .expand([b, n * n, 2], false);
    let out =
        tch::no_grad(|| model.forward(&ModelInput::new(&pos, &a).with_grid(Some(&[n, n])), false))
            .unwrap();
    let want = &fx.tensors["output.eval"];
    let err = (out.reshape(want.size()) - want)
        .abs()
        .max()
        .double_value(&[])
        / want.abs().max().double_value(&[]);
    assert!(err < 1e-5, "{err}");
    let exported = model.export_reference().unwrap();
    for (name, t) in &exported {
        let stored = &fx.tensors[&format!("param.{name}")];
        assert!(t.equal(stored), "{name}");
    }
    // A truncated file is an error, not a panic.
    let dir = std::env::temp_dir().join(format!("ono-fno-pt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bytes = std::fs::read(&pt).unwrap();
    let cut = dir.join("cut.pt");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(model.load_reference_file(&cut).is_err());
}

/// `recompute = true` (layer checkpointing and a chunked head) gives the loss and every gradient
/// of the plain step, to float64 rounding, on a grid whose point count the chunks do not divide.
#[test]
fn recomputation_gives_the_plain_gradients() {
    use ono_models::{Model, ModelConfig, ModelInput};
    use tch::{Device, Kind, Tensor};
    ono_testing::init();
    let mut cfg = ModelConfig::preset("fno2d", "darcy").unwrap();
    if let ModelConfig::Fno2d(c) = &mut cfg {
        c.modes = vec![3, 4];
        c.width = 6;
        c.padding = vec![2, 3];
    }
    let model = Model::new(&cfg, Device::Cpu, Kind::Double).unwrap();
    assert!(model
        .operator()
        .supports_recompute(ono_models::Recompute::Blocks));
    let grid = [9i64, 11];
    let n = grid[0] * grid[1];
    tch::manual_seed(3);
    let fx = Tensor::randn([2, n, 1], (Kind::Double, Device::Cpu));
    let y = Tensor::randn([2, n, 1], (Kind::Double, Device::Cpu));
    let pos = ono_nn::grid::index_grid(&grid, Kind::Double, Device::Cpu)
        .unwrap()
        .expand([2, n, 2], false);
    let input = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
    let grads = |recompute: ono_models::Recompute| {
        let vars = model.var_store().trainable_variables();
        for v in &vars {
            let mut g = v.grad();
            if g.defined() {
                let _ = g.zero_();
            }
        }
        let mut loss = |p: &Tensor| -> Result<Tensor, ono_models::LossError> {
            Ok(ono_nn::loss::relative_l2(
                p,
                &y,
                ono_nn::loss::Reduction::Sum,
                None,
            )?)
        };
        let l = model
            .forward_backward(&input, &mut loss, recompute)
            .unwrap();
        (
            l.double_value(&[]),
            vars.iter().map(|v| v.grad().copy()).collect::<Vec<_>>(),
        )
    };
    let (la, ga) = grads(ono_models::Recompute::None);
    let (lb, gb) = grads(ono_models::Recompute::Blocks);
    assert!((la - lb).abs() < 1e-12 * la.abs(), "{la} vs {lb}");
    for (a, b) in ga.iter().zip(&gb) {
        let err = (a - b).abs().max().double_value(&[]) / a.abs().max().double_value(&[]);
        assert!(err < 1e-10, "{err}");
    }
}
