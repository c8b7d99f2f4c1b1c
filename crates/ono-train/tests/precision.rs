//! Mixed precision in training: float16's loss scaler skips a step with overflowing gradients
//! on the device without touching parameters or optimizer state, and resumes exactly from its
//! saved state; the `precision` key of the experiment file.

use std::collections::BTreeMap;

use ono_testing::{seeded, torch_rng_lock};
use ono_train::adamw::{AdamW, AdamWConfig};
use ono_train::config::TrainConfig;
use ono_train::scaler::{LossScaler, INIT_SCALE};
use ono_train::Precision;
use tch::nn::{Init, VarStore};
use tch::{Device, Kind, Tensor};

/// Two parameters, drawn from `seed`.
fn params(seed: u64) -> (VarStore, Tensor, Tensor) {
    seeded(seed);
    let vs = VarStore::new(Device::Cpu);
    let a = vs.root().var(
        "a",
        &[3],
        Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        },
    );
    let b = vs.root().var(
        "b",
        &[2, 2],
        Init::Randn {
            mean: 0.0,
            stdev: 1.0,
        },
    );
    (vs, a, b)
}

/// A loss whose gradient is `ga` for `a` and `gb` for `b`.
fn linear_loss(a: &Tensor, b: &Tensor, ga: &[f32], gb: &[f32]) -> Tensor {
    (a * Tensor::from_slice(ga)).sum(Kind::Float)
        + (b * Tensor::from_slice(gb).view([2, 2])).sum(Kind::Float)
}

/// Parameters and optimizer moments, to compare bit for bit.
fn snapshot(vs: &VarStore, opt: &AdamW) -> BTreeMap<String, Tensor> {
    let mut all: BTreeMap<String, Tensor> = vs
        .variables()
        .into_iter()
        .map(|(k, v)| (k, v.detach().copy()))
        .collect();
    all.extend(
        opt.state("optim.")
            .unwrap()
            .0
            .into_iter()
            .filter(|(k, _)| !k.ends_with(".skipped_steps")),
    );
    all
}

fn assert_same(a: &BTreeMap<String, Tensor>, b: &BTreeMap<String, Tensor>) {
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (k, v) in a {
        assert!(v.equal(&b[k]), "{k} differs: {v} vs {}", b[k]);
    }
}

/// One scaled step: the loss times the scale, backward, then the scaler's step.
fn scaled_step(opt: &mut AdamW, scaler: &mut LossScaler, loss: &Tensor) {
    opt.zero_grad();
    scaler.scale(loss).unwrap().backward();
    scaler.step(opt, Some(10.0)).unwrap();
}

const G1: ([f32; 3], [f32; 4]) = ([0.5, -1.0, 2.0], [0.25, 0.0, -3.0, 1.5]);
const G2: ([f32; 3], [f32; 4]) = ([-0.75, 0.125, 1.0], [2.0, -0.5, 0.0, 1.0]);

#[test]
fn an_overflowing_step_is_skipped_on_the_device_and_the_next_is_a_first_step() {
    let _rng = torch_rng_lock();
    let hp = AdamWConfig {
        weight_decay: 0.1,
        ..AdamWConfig::default()
    };
    let (vs, a, b) = params(1);
    let mut opt = AdamW::new(&vs, hp.clone()).unwrap();
    let mut scaler = LossScaler::new(Device::Cpu).unwrap();
    // A clean first step moves something, so that "untouched" below is not trivially true.
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &G1.0, &G1.1));
    assert_eq!(scaler.found_inf().double_value(&[0]), 0.0);
    let before = snapshot(&vs, &opt);

    // Inf in one gradient: nothing moves (weight decay and moment decay included), the scale
    // halves, and no host read was needed to decide.
    let inf = [f32::INFINITY, 0.0, 0.0];
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &inf, &G2.1));
    assert_eq!(scaler.found_inf().double_value(&[0]), 1.0);
    assert_same(&before, &snapshot(&vs, &opt));
    assert_eq!(scaler.current_scale().unwrap(), INIT_SCALE / 2.0);
    // A NaN is skipped the same way.
    let nan = [0.0, f32::NAN, 0.0];
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &nan, &G2.1));
    assert_same(&before, &snapshot(&vs, &opt));
    assert_eq!(scaler.current_scale().unwrap(), INIT_SCALE / 4.0);

    // The next clean step is the optimizer's second (bias corrections of t = 2), exactly as an
    // unscaled optimizer that never saw the skipped steps takes it.
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &G2.0, &G2.1));
    let (ref_vs, ra, rb) = params(1);
    let mut reference = AdamW::new(&ref_vs, hp).unwrap();
    for g in [G1, G2] {
        reference.zero_grad();
        linear_loss(&ra, &rb, &g.0, &g.1).backward();
        let _ = reference.step(Some(10.0)).unwrap();
    }
    let (got, want) = (snapshot(&vs, &opt), snapshot(&ref_vs, &reference));
    for (k, v) in &want {
        let err = (&got[k] - v).abs().max().double_value(&[]);
        assert!(err < 1e-7, "{k}: {err:e}");
    }
    let state = opt.state("optim.").unwrap().0;
    assert_eq!(state["optim.a.skipped_steps"].int64_value(&[]), 2);
}

#[test]
fn a_restored_scaler_and_optimizer_continue_bit_identically() {
    let _rng = torch_rng_lock();
    let (vs, a, b) = params(2);
    let mut opt = AdamW::new(&vs, AdamWConfig::default()).unwrap();
    let mut scaler = LossScaler::new(Device::Cpu).unwrap();
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &G1.0, &G1.1));
    let inf = [0.0, f32::INFINITY, 0.0];
    scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &inf, &G1.1));

    // What a checkpoint holds, restored into a fresh model, optimizer and scaler.
    let (tensors, host) = opt.state("optim.").unwrap();
    let mut saved = tensors;
    saved.extend(scaler.tensors("scaler.").unwrap());
    let (vs2, a2, b2) = params(99);
    tch::no_grad(|| {
        for (k, mut v) in vs2.variables() {
            v.copy_(&vs.variables()[&k]);
        }
    });
    let mut opt2 = AdamW::new(&vs2, AdamWConfig::default()).unwrap();
    opt2.load_state("optim.", &saved, &host).unwrap();
    let mut scaler2 = LossScaler::new(Device::Cpu).unwrap();
    scaler2.load("scaler.", &saved).unwrap();
    assert_eq!(scaler2.current_scale().unwrap(), INIT_SCALE / 2.0);

    for g in [G2, G1] {
        scaled_step(&mut opt, &mut scaler, &linear_loss(&a, &b, &g.0, &g.1));
        scaled_step(&mut opt2, &mut scaler2, &linear_loss(&a2, &b2, &g.0, &g.1));
    }
    assert_same(&snapshot(&vs, &opt), &snapshot(&vs2, &opt2));
    // A checkpoint without the scaler's state is refused, naming it.
    let err = LossScaler::new(Device::Cpu)
        .unwrap()
        .load("scaler.", &BTreeMap::new())
        .unwrap_err();
    assert!(err.to_string().contains("scaler.scale"), "{err}");
}

const BASE: &str = r#"
epochs = 1
batch_size = 2
output_dir = "run"
[model]
[data]
path = "d.safetensors"
"#;

#[test]
fn precision_is_read_written_only_when_not_f32_and_checked() {
    let plain = TrainConfig::from_toml(BASE).unwrap();
    assert_eq!(plain.precision, Precision::F32);
    // Earlier configurations keep their fingerprint: the default is not written.
    let json = |c: &TrainConfig| serde_json::to_value(c.fingerprint()).unwrap();
    assert!(json(&plain).get("precision").is_none());
    for p in Precision::ALL {
        let cfg = TrainConfig::from_toml(&format!("precision = \"{p}\"\n{BASE}")).unwrap();
        assert_eq!(cfg.precision, p);
        let text = toml::to_string(&cfg).unwrap();
        assert_eq!(TrainConfig::from_toml(&text).unwrap(), cfg);
        if p != Precision::F32 {
            assert_eq!(json(&cfg)["precision"], p.name());
        }
    }
    let err = TrainConfig::from_toml(&format!("precision = \"fp8\"\n{BASE}")).unwrap_err();
    assert!(err.to_string().contains("fp8"), "{err}");
    let err = TrainConfig::from_toml(&format!("precision = \"bf16\"\ndouble = true\n{BASE}"))
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("precision"), "{err}");
}

/// Every architecture, at tiny widths: its bfloat16 forward agrees with its float32 forward (the
/// FFT-based ones keep their spectral layers in float32), and a full training step runs in
/// bfloat16 and in float16 (with the loss scaler).
#[test]
fn every_architecture_runs_in_bf16_and_f16() {
    use ono_models::ono::OnoPreset;
    use ono_models::{Model, ModelConfig, ModelInput};
    use ono_train::bench_step::{bench_step, StepRecipe, StepShapes};
    let _rng = torch_rng_lock();
    let cases = [
        ("ono", "super_resolution", "n_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4\nnn_block = \"linear_transformer\"", OnoPreset::SuperResolution),
        ("ono", "super_resolution", "n_layers = 1\nn_hidden = 16\nn_head = 2\npsi_dim = 4\nnn_block = \"nystrom\"", OnoPreset::SuperResolution),
        ("mlp", "small", "", OnoPreset::SuperResolution),
        ("fno2d", "darcy", "width = 4\nmodes = [4, 4]", OnoPreset::SuperResolution),
        ("ufno", "darcy", "n_hidden = 4\nmodes = 4", OnoPreset::SuperResolution),
        ("ffno", "darcy", "n_hidden = 4\nmodes = 4\nn_layers = 1", OnoPreset::SuperResolution),
        ("lsm", "darcy", "n_hidden = 4\nn_heads = 2", OnoPreset::SuperResolution),
        ("transolver", "darcy", "n_hidden = 8\nn_heads = 2\nn_layers = 1\nslice_num = 4", OnoPreset::SuperResolution),
        ("gnot", "gnot_e3", "n_hidden = 8\nn_layers = 1\nn_head = 2\nn_inner = 2", OnoPreset::SuperResolution),
        ("galerkin", "darcy", "n_hidden = 8\nn_head = 2\nnum_encoder_layers = 1\ndim_feedforward = 16\nscaler_grids = { fine = 43, coarse = 22, scale_factor = false }", OnoPreset::SuperResolution),
        ("geofno", "elasticity", "width = 4\nmodes = [4, 4]", OnoPreset::Elasticity),
    ];
    for (arch, preset, overrides, shapes) in cases {
        let base = ModelConfig::preset(arch, preset).unwrap();
        let table: toml::Table = overrides.parse().unwrap();
        let mut cfg = ono_train::config::with_overrides(&base, &table, "overrides").unwrap();
        let shapes = StepShapes {
            batch: 1,
            ..StepShapes::of(shapes)
        };
        cfg.set_data_dims(shapes.dims.clone());
        seeded(4);
        let mut model = Model::new(&cfg, Device::Cpu, Kind::Float).unwrap();
        let d = &shapes.dims;
        let opts = (Kind::Float, Device::Cpu);
        let pos = Tensor::rand([1, shapes.points, d.space_dim], opts);
        let fx = Tensor::randn([1, shapes.points, d.fun_dim], opts);
        let grid = shapes.grid;
        let input = ModelInput::new(&pos, &fx).with_grid(grid.as_ref().map(|g| &g[..]));
        let y32 = model.forward(&input, false).unwrap();
        model.set_precision(Precision::Bf16).unwrap();
        let y16 = model.forward(&input, false).unwrap();
        assert_eq!(
            y16.kind(),
            Kind::Float,
            "{arch}: the output comes back in float32"
        );
        let err = (&y16 - &y32).norm().double_value(&[]) / y32.norm().double_value(&[]);
        assert!(
            err < 3e-2,
            "{arch} ({overrides}): bf16 differs from f32 by {err:.2e}"
        );
        for p in [Precision::Bf16, Precision::F16] {
            let recipe = if arch.starts_with("fno") {
                StepRecipe::Fno
            } else {
                StepRecipe::Ono
            };
            let r = bench_step(
                &cfg,
                preset,
                shapes.clone(),
                recipe,
                1,
                0,
                Device::Cpu,
                ono_models::Recompute::Auto,
                p,
                ono_train::graphs::Graphs::Off,
            )
            .unwrap_or_else(|e| panic!("{arch} {p}: {e}"));
            assert!(r.median_s.is_finite() && r.precision == p);
        }
    }
}
