//! Geo-FNO on point clouds (`elas_geofno.py`: FNO2d + IPHI with a geometry code) and NSL's FNO
//! (`models/FNO.py`, Geo-FNO projection on point clouds) against the reference fixtures
//! (`fixtures/geofno`), and the presets' parameter counts against the references'.

mod common;

use ono_models::nsl::settings::NslSettings;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn nsl_fno_irregular_small() {
    run_case("geofno", "nsl_fno_irregular_small", "nsl_fno");
}

#[test]
fn nsl_fno_presets_have_the_reference_parameter_counts() {
    let nsl = |k: &str| reference_count("fno", &["nsl_FNO", "configs", k, "param_count_real"]);
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        assert_param_count("nsl_fno", bench, nsl(bench));
    }
}

#[test]
fn elas_geofno_small() {
    run_case("geofno", "elas_geofno_small", "geofno");
}

#[test]
fn geofno_preset_has_the_reference_parameter_count() {
    let geo = reference_count("geofno", &["configs", "elasticity", "param_count_real"]);
    assert_param_count("geofno", "elasticity", geo);
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model_iphi.fc_code.weight");
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model.conv4.weights1");
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model.b4.weight");
    perturbed_weight_is_caught("geofno", "nsl_fno_irregular_small", "iphi.fc4.weight");
    perturbed_weight_is_caught(
        "geofno",
        "nsl_fno_irregular_small",
        "fftproject_in.weights2",
    );
    perturbed_weight_is_caught(
        "geofno",
        "nsl_fno_irregular_small",
        "preprocess.linear_pre.0.weight",
    );
}

use ono_models::geofno::GeoFnoConfig;
use ono_models::nsl::fno::NslFnoConfig;
use ono_models::{Error, Model, ModelConfig, ModelInput};
use tch::{Device, Kind, Tensor};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

fn small_geofno(space_dim: i64, fun_dim: i64) -> ModelConfig {
    GeoFnoConfig {
        space_dim,
        fun_dim,
        out_dim: 2,
        modes: [3, 2],
        width: 4,
        latent: [8, 6],
        iphi_width: 8,
        proj_hidden: 5,
    }
    .into()
}

/// A model of `cfg` with the weights of `like`.
fn same_weights(cfg: &ModelConfig, like: &Model) -> Model {
    let m = Model::new(cfg, Device::Cpu, Kind::Double).unwrap();
    tch::no_grad(|| {
        for (name, mut v) in m.var_store().variables() {
            v.copy_(&like.var_store().variables()[&name]);
        }
    });
    m
}

/// The mesh and the code may come as pos + fx (the script's x and rr) or all in fx after index
/// positions (the ONO layout of the Elasticity loader): the same model, the same output.
#[test]
fn geofno_input_layouts_agree() {
    ono_testing::init();
    tch::manual_seed(7);
    let a = Model::new(&small_geofno(2, 42), Device::Cpu, Kind::Double).unwrap();
    let b = same_weights(&small_geofno(1, 44), &a);
    let (bs, n) = (2, 11);
    let mesh = Tensor::rand([bs, n, 2], F64);
    let code = Tensor::randn([bs, 1, 42], F64).expand([bs, n, 42], false);
    let index = Tensor::linspace(0.0, 1.0, n, F64)
        .reshape([1, n, 1])
        .expand([bs, n, 1], false);
    let fx = Tensor::cat(&[&mesh, &code], -1);
    let out_a = a.forward(&ModelInput::new(&mesh, &code), false).unwrap();
    let out_b = b.forward(&ModelInput::new(&index, &fx), false).unwrap();
    assert_eq!(out_a.size(), [bs, n, 2]);
    assert!(out_a.allclose(&out_b, 0.0, 0.0, false));
    // Query points equal to the mesh give the same output; others give (B, M, out).
    let out_q = a
        .forward(
            &ModelInput::new(&mesh, &code).with_query(Some(&mesh), None),
            false,
        )
        .unwrap();
    assert!(out_q.allclose(&out_a, 1e-12, 1e-12, false));
    let q = Tensor::rand([bs, 5, 2], F64);
    let out_m = a
        .forward(
            &ModelInput::new(&mesh, &code).with_query(Some(&q), None),
            false,
        )
        .unwrap();
    assert_eq!(out_m.size(), [bs, 5, 2]);
    // Without a code, IPHI takes its no-code branch with the same parameters.
    let c = same_weights(&small_geofno(2, 0), &a);
    let out_c = c.forward(&ModelInput::positions(&mesh), false).unwrap();
    assert_eq!(out_c.size(), [bs, n, 2]);
    assert!(!out_c.allclose(&out_a, 1e-6, 1e-6, false));
}

#[test]
fn geofno_refuses_bad_inputs() {
    ono_testing::init();
    let a = Model::new(&small_geofno(2, 42), Device::Cpu, Kind::Double).unwrap();
    let mesh = Tensor::rand([1, 6, 2], F64);
    let varying = Tensor::randn([1, 6, 42], F64);
    assert!(matches!(
        a.forward(&ModelInput::new(&mesh, &varying), false),
        Err(Error::Config(_))
    ));
    let code = Tensor::zeros([1, 6, 42], F64);
    let nan = mesh.full_like(f64::NAN);
    assert!(matches!(
        a.forward(&ModelInput::new(&nan, &code), false),
        Err(Error::NonFinite { .. })
    ));
    let t = Tensor::zeros([1, 1], F64);
    assert!(matches!(
        a.forward(&ModelInput::new(&mesh, &code).with_time(Some(&t)), false),
        Err(Error::Unsupported { .. })
    ));
    assert!(a.forward(&ModelInput::positions(&mesh), false).is_err());
    // A code of another size than IPHI's 42 is refused.
    let five = Model::new(&small_geofno(2, 5), Device::Cpu, Kind::Double).unwrap();
    let code5 = Tensor::zeros([1, 6, 5], F64);
    assert!(matches!(
        five.forward(&ModelInput::new(&mesh, &code5), false),
        Err(Error::Shape { .. })
    ));
}

fn small_nsl(grid_dims: usize, fun_dim: i64, unified_pos: bool, time_input: bool) -> ModelConfig {
    NslFnoConfig {
        nsl: NslSettings {
            space_dim: grid_dims as i64,
            fun_dim,
            out_dim: 3,
            time_input,
            grid_dims,
            n_hidden: 4,
            modes: 3,
            unified_pos,
            reference: 2,
            ..NslFnoConfig::default().nsl
        },
    }
    .into()
}

/// On grids where exactly one axis is already a multiple of 16, NSL's crop returns nothing;
/// ours returns every point. 1-D and 3-D grids, unified positions, a time input.
#[test]
fn nsl_fno_structured_grids() {
    ono_testing::init();
    for (shape, fun_dim, unified, time) in [
        (vec![16i64, 21], 1i64, false, false),
        (vec![5, 7], 0, true, true),
        (vec![12], 2, false, false),
        (vec![6, 5, 4], 1, true, false),
    ] {
        let m = Model::new(
            &small_nsl(shape.len(), fun_dim, unified, time),
            Device::Cpu,
            Kind::Float,
        )
        .unwrap();
        let n: i64 = shape.iter().product();
        let pos = Tensor::rand([2, n, shape.len() as i64], (Kind::Float, Device::Cpu));
        let fx = Tensor::randn([2, n, fun_dim], (Kind::Float, Device::Cpu));
        let t = Tensor::rand([2, 1], (Kind::Float, Device::Cpu));
        let input = if fun_dim > 0 {
            ModelInput::new(&pos, &fx)
        } else {
            ModelInput::positions(&pos)
        }
        .with_grid(Some(&shape))
        .with_time(time.then_some(&t));
        let out = m.forward(&input, false).unwrap();
        assert_eq!(out.size(), [2, n, 3], "{shape:?}");
        assert!(bool::try_from(out.isfinite().all()).unwrap());
        if time {
            assert!(m.forward(&input.with_time(None), false).is_err());
        } else {
            assert!(matches!(
                m.forward(&input.with_time(Some(&t)), false),
                Err(Error::Unsupported { .. })
            ));
        }
    }
}
