//! NSL's Transolver against its fixtures (`fixtures/transolver`: the structured 2-D form with
//! unified positions and the point-cloud form, each at the native initialisation and with
//! well-conditioned weights), the presets' parameter counts against NSL's StandardBench
//! scripts', 1-D and 3-D grids against the point-cloud form, and refusals.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};
use ono_models::nsl::settings::{Geotype, NslSettings};
use ono_models::nsl::transolver::TransolverConfig;
use ono_models::{Error, Model, ModelConfig, ModelInput};
use ono_nn::weights::NamedTensors;
use tch::{Device, Kind, Tensor};

const FAMILY: &str = "transolver";

#[test]
fn transolver_darcy_small() {
    run_case(FAMILY, "transolver_darcy_small", "transolver");
}

#[test]
fn transolver_darcy_wellcond() {
    run_case(FAMILY, "transolver_darcy_wellcond", "transolver");
}

#[test]
fn transolver_irregular_small() {
    run_case(FAMILY, "transolver_irregular_small", "transolver");
}

#[test]
fn transolver_irregular_wellcond() {
    run_case(FAMILY, "transolver_irregular_wellcond", "transolver");
}

#[test]
fn perturbed_weights_are_caught() {
    for name in [
        "placeholder",
        "preprocess.linear_pre.0.weight",
        "blocks.0.Attn.in_project_x.weight",
        "blocks.0.Attn.in_project_slice.weight",
        "blocks.1.Attn.temperature",
        "blocks.1.Attn.to_q.weight",
        "blocks.2.Attn.in_project_fx.bias",
        "blocks.2.mlp2.weight",
    ] {
        perturbed_weight_is_caught(FAMILY, "transolver_darcy_wellcond", name);
    }
    for name in [
        "blocks.0.Attn.in_project_x.weight",
        "blocks.0.Attn.to_k.weight",
        "blocks.1.Attn.to_v.weight",
        "blocks.1.ln_3.weight",
    ] {
        perturbed_weight_is_caught(FAMILY, "transolver_irregular_wellcond", name);
    }
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count(FAMILY, &["configs", bench, "param_count_real"]);
        assert_param_count("transolver", bench, count);
    }
}

fn small(geotype: Geotype, grid_dims: usize, time_input: bool) -> TransolverConfig {
    TransolverConfig {
        nsl: NslSettings {
            space_dim: grid_dims as i64,
            fun_dim: 2,
            out_dim: 3,
            time_input,
            geotype,
            grid_dims,
            n_hidden: 8,
            unified_pos: false,
            ..TransolverConfig::default().nsl
        },
        n_layers: 2,
        n_heads: 2,
        mlp_ratio: 2,
        slice_num: 3,
    }
}

/// On 1-D and 3-D grids, with every convolution tap but the centre zeroed, the structured form
/// is the point-cloud form whose linear projections are those centre taps (temperatures 0.5,
/// inside the clamp): the grid plumbing, the lift with a time input and the blocks agree.
#[test]
fn grids_with_centre_taps_only_are_the_point_cloud_form() {
    ono_testing::init();
    let opts = (Kind::Double, Device::Cpu);
    for shape in [vec![7i64], vec![3, 4, 2]] {
        let dims = shape.len();
        let grid = Model::new(
            &small(Geotype::Structured, dims, true).into(),
            Device::Cpu,
            Kind::Double,
        )
        .unwrap();
        let cloud_cfg = small(Geotype::Unstructured, dims, true);
        let cloud = Model::new(&cloud_cfg.into(), Device::Cpu, Kind::Double).unwrap();
        let mut weights = NamedTensors::new();
        tch::no_grad(|| {
            for (name, var) in grid.var_store().variables() {
                // O(1) weights (temperatures 0.5 kept, inside the clamp), so that every path
                // shows in the output.
                if !name.ends_with("temperature") {
                    var.shallow_clone().copy_(&(var.randn_like() * 0.5));
                }
                let is_conv =
                    name.ends_with("in_project_x.weight") || name.ends_with("in_project_fx.weight");
                // The centre tap of a (out, in, 3, …, 3) kernel.
                let centre = |t: &Tensor| (0..dims).fold(t.shallow_clone(), |t, _| t.select(-1, 1));
                let w = if is_conv {
                    // Keep only the centre tap in the grid model; the cloud gets it as a matrix.
                    let kept = centre(&var).copy();
                    let only_centre = var.zeros_like();
                    centre(&only_centre).copy_(&kept);
                    var.shallow_clone().copy_(&only_centre);
                    kept
                } else {
                    var.copy()
                };
                weights.insert(name, w);
            }
        });
        cloud.load_tensors(&weights, "grid".as_ref()).unwrap();
        let n: i64 = shape.iter().product();
        let pos = Tensor::rand([2, n, dims as i64], opts);
        let fx = Tensor::randn([2, n, 2], opts);
        let t = Tensor::rand([2, 1], opts);
        let input = ModelInput::new(&pos, &fx).with_time(Some(&t));
        let a = grid.forward(&input.with_grid(Some(&shape)), true).unwrap();
        let b = cloud.forward(&input, true).unwrap();
        assert_eq!(a.size(), [2, n, 3]);
        let scale = b.abs().max().double_value(&[]);
        let err = (&a - &b).abs().max().double_value(&[]) / scale;
        assert!(scale > 0.1 && err < 1e-12, "{shape:?}: {err} of {scale}");
        // The neighbours matter once a side tap is set.
        tch::no_grad(|| {
            let v = &grid.var_store().variables()["blocks.0.Attn.in_project_fx.weight"];
            v.shallow_clone()
                .select(-1, 0)
                .copy_(&v.select(-1, 0).full_like(0.3));
        });
        let c = grid.forward(&input.with_grid(Some(&shape)), true).unwrap();
        assert!(
            (&c - &b).abs().max().double_value(&[]) > 1e-3 * scale,
            "{shape:?}"
        );
    }
}

#[test]
fn refuses_bad_inputs_and_configurations() {
    ono_testing::init();
    let opts = (Kind::Float, Device::Cpu);
    let m = Model::new(
        &small(Geotype::Structured, 2, false).into(),
        Device::Cpu,
        Kind::Float,
    )
    .unwrap();
    let pos = Tensor::rand([2, 12, 2], opts);
    let fx = Tensor::randn([2, 12, 2], opts);
    let grid = [3i64, 4];
    let input = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
    assert_eq!(m.forward(&input, false).unwrap().size(), [2, 12, 3]);
    // No grid shape, or one that is not the points'.
    assert!(m.forward(&input.with_grid(None), false).is_err());
    assert!(matches!(
        m.forward(&input.with_grid(Some(&[3, 3])), false),
        Err(Error::Nn(ono_nn::Error::Shape { .. }))
    ));
    // A missing or too wide input function; NaN.
    assert!(m
        .forward(&ModelInput::positions(&pos).with_grid(Some(&grid)), false)
        .is_err());
    let wide = Tensor::randn([2, 12, 3], opts);
    assert!(matches!(
        m.forward(&ModelInput::new(&pos, &wide).with_grid(Some(&grid)), false),
        Err(Error::Nn(ono_nn::Error::Shape { .. }))
    ));
    let nan = fx.full_like(f64::NAN);
    assert!(matches!(
        m.forward(&ModelInput::new(&pos, &nan).with_grid(Some(&grid)), false),
        Err(Error::Nn(ono_nn::Error::NonFinite { .. }))
    ));
    // A time without time_input, a mask, query points.
    let t = Tensor::rand([2, 1], opts);
    let mask = Tensor::ones([2, 12], (Kind::Bool, Device::Cpu));
    for bad in [
        input.with_time(Some(&t)),
        input.with_mask(Some(&mask)),
        input.with_query(Some(&pos), None),
    ] {
        assert!(matches!(
            m.forward(&bad, false),
            Err(Error::Unsupported {
                arch: "transolver",
                ..
            })
        ));
    }
    // With time_input the time is required.
    let timed = Model::new(
        &small(Geotype::Unstructured, 2, true).into(),
        Device::Cpu,
        Kind::Float,
    )
    .unwrap();
    assert!(timed.forward(&ModelInput::new(&pos, &fx), false).is_err());
    assert!(timed
        .forward(&ModelInput::new(&pos, &fx).with_time(Some(&t)), false)
        .is_ok());

    // Configurations no model can be built from.
    let base = small(Geotype::Structured, 2, false);
    for bad in [
        TransolverConfig {
            n_heads: 0,
            ..base.clone()
        },
        TransolverConfig {
            n_heads: 9,
            ..base.clone()
        },
        TransolverConfig {
            slice_num: 0,
            ..base.clone()
        },
        TransolverConfig {
            n_layers: 0,
            ..base.clone()
        },
        TransolverConfig {
            mlp_ratio: 0,
            ..base.clone()
        },
        TransolverConfig {
            nsl: NslSettings {
                geotype: Geotype::Unstructured,
                unified_pos: true,
                ..base.nsl.clone()
            },
            ..base.clone()
        },
        TransolverConfig {
            nsl: NslSettings {
                grid_dims: 4,
                ..base.nsl.clone()
            },
            ..base.clone()
        },
    ] {
        let err = Model::new(&bad.clone().into(), Device::Cpu, Kind::Float).unwrap_err();
        assert!(matches!(err, Error::Config(_)), "{bad:?}: {err}");
    }
    // Unknown fields are refused by name; known ones go over the darcy preset.
    let err =
        ModelConfig::from_fields("transolver", serde_json::json!({ "n_head": 2 })).unwrap_err();
    assert!(err.to_string().contains("n_head"), "{err}");
    let cfg =
        ModelConfig::from_fields("transolver", serde_json::json!({ "slice_num": 5 })).unwrap();
    let ModelConfig::Transolver(c) = cfg else {
        panic!("{cfg:?}")
    };
    assert_eq!((c.slice_num, c.n_hidden, c.n_layers), (5, 128, 8));
}

/// Heads that do not divide the width leave C − H·(C // H) channels out of the attention, as
/// NSL (`to_out` maps H·d back to C).
#[test]
fn heads_need_not_divide_the_width() {
    ono_testing::init();
    let cfg = TransolverConfig {
        n_heads: 3,
        ..small(Geotype::Unstructured, 2, false)
    };
    let m = Model::new(&cfg.into(), Device::Cpu, Kind::Float).unwrap();
    let vars = m.var_store().variables();
    assert_eq!(vars["blocks.0.Attn.in_project_x.weight"].size(), [6, 8]);
    assert_eq!(vars["blocks.0.Attn.to_out.0.weight"].size(), [8, 6]);
    assert_eq!(vars["blocks.0.Attn.to_q.weight"].size(), [2, 2]);
    let pos = Tensor::rand([1, 5, 2], (Kind::Float, Device::Cpu));
    let fx = Tensor::randn([1, 5, 2], (Kind::Float, Device::Cpu));
    let out = m.forward(&ModelInput::new(&pos, &fx), false).unwrap();
    assert_eq!(out.size(), [1, 5, 3]);
}

/// On point clouds a padded batch (garbage in its padding) gives each real point what its sample
/// alone gives, in the output and every gradient (Transolver keeps no batch statistics, so each
/// sample alone is the oracle); padded output rows are zero.
#[test]
fn a_padded_batch_of_point_clouds_is_its_samples_alone() {
    ono_testing::init();
    let _rng = ono_testing::torch_rng_lock();
    tch::manual_seed(5);
    let opts = (Kind::Double, Device::Cpu);
    let m = Model::new(
        &small(Geotype::Unstructured, 2, false).into(),
        Device::Cpu,
        Kind::Double,
    )
    .unwrap();
    // O(1) weights: at NSL's init the slice weights are nearly uniform and their gradients
    // numerically zero (the fixture README), which would test nothing.
    tch::no_grad(|| {
        for (name, var) in m.var_store().variables() {
            if !name.ends_with("temperature") {
                var.shallow_clone().copy_(&(var.randn_like() * 0.5));
            }
        }
    });
    let (lengths, n) = ([7i64, 12, 4], 15);
    let samples: Vec<(Tensor, Tensor)> = lengths
        .iter()
        .map(|&l| {
            (
                Tensor::rand([1, l, 2], opts),
                Tensor::randn([1, l, 2], opts),
            )
        })
        .collect();
    let pad = |t: &Tensor| {
        let garbage = Tensor::randn([1, n - t.size()[1], t.size()[2]], opts) * 3.0 + 1.0;
        Tensor::cat(&[t, &garbage], 1)
    };
    let pos = Tensor::cat(&samples.iter().map(|s| pad(&s.0)).collect::<Vec<_>>(), 0);
    let fx = Tensor::cat(&samples.iter().map(|s| pad(&s.1)).collect::<Vec<_>>(), 0);
    let mask = Tensor::stack(
        &lengths
            .iter()
            .map(|&l| Tensor::arange(n, (Kind::Int64, Device::Cpu)).lt(l))
            .collect::<Vec<_>>(),
        0,
    );
    let grads = || -> Vec<(String, Tensor)> {
        let mut v: Vec<(String, Tensor)> = m
            .var_store()
            .variables()
            .into_iter()
            .map(|(name, t)| {
                let g = t.grad().copy();
                let _ = t.grad().zero_();
                (name, g)
            })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    let out = m
        .forward(&ModelInput::new(&pos, &fx).with_mask(Some(&mask)), true)
        .unwrap();
    out.square().sum(Kind::Double).backward();
    let padded = grads();
    let mut total = Tensor::zeros([], opts);
    for (i, ((p, f), &l)) in samples.iter().zip(&lengths).enumerate() {
        let alone = m.forward(&ModelInput::new(p, f), true).unwrap();
        let row = out.narrow(0, i as i64, 1);
        ono_testing::assert_close(&row.narrow(1, 0, l), &alone, 1e-12, 1e-14);
        assert_eq!(row.narrow(1, l, n - l).abs().max().double_value(&[]), 0.0);
        total += alone.square().sum(Kind::Double);
    }
    total.backward();
    for ((name, a), (_, b)) in padded.iter().zip(grads()) {
        let scale = b.abs().max().double_value(&[]);
        assert!(scale > 0.0, "{name}");
        ono_testing::assert_close(a, &b, 1e-10, 1e-10 * scale);
    }
}
