//! The autoregressive (NS2d) and per-time-step (Plasticity) regimes through the library API.

mod common;

use std::path::Path;

use ono_data::dataset::{Split, TensorDataset};
use ono_models::{ModelConfig, Recompute};
use ono_train::config::{RolloutLoss, TrainConfig};
use ono_train::progress::Progress;
use ono_train::{Predictor, RunSpec, Trainer};
use tch::{Device, Kind, Tensor};

use common::{steady_dataset, write_splits};

fn temp_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-regime-{name}"))
}

fn positions(n: i64) -> Tensor {
    Tensor::linspace(0.0, 1.0, n, (Kind::Float, Device::Cpu)).view([1, n, 1])
}

/// Frames of a damped travelling wave: each frame is the previous one shifted and scaled.
fn wave_dataset(path: &Path, s: i64, n: i64, t_in: i64, t_out: i64) {
    let make = |s: i64| {
        let phase = Tensor::rand([s, 1, 1], (Kind::Float, Device::Cpu)) * std::f64::consts::TAU;
        let x = Tensor::linspace(0.0, std::f64::consts::TAU, n, (Kind::Float, Device::Cpu))
            .view([1, n, 1]);
        let frames: Vec<Tensor> = (0..t_in + t_out)
            .map(|k| ((&x + &phase + 0.3 * k as f64).sin() + 1.5) * 0.95f64.powi(k as i32))
            .collect();
        let all = Tensor::cat(&frames, 2); // (S, N, T)
        Split::new(
            all.narrow(2, 0, t_in),
            all.narrow(2, t_in, t_out).unsqueeze(2), // (S, N, 1, T)
            positions(n),
        )
    };
    write_splits(path, make(s), make(4));
}

/// A fresh run of `cfg`, resolved as `ono train` does.
fn trainer(cfg: TrainConfig) -> ono_train::Result<Trainer> {
    Trainer::new(RunSpec::resolve(cfg)?, false)
}

fn config(dir: &Path, data: &str, out: &str, data_extra: &str) -> TrainConfig {
    let text = format!(
        r#"
seed = 1
epochs = 2
batch_size = 4
threads = 1
output_dir = "{}"

[model]
preset = "ns2d"
[model.overrides]
n_layers = 1
n_hidden = 16
n_head = 2
psi_dim = 4

[data]
path = "{}"
{data_extra}

[log]
panels = 0
"#,
        dir.join(out).display(),
        dir.join(data).display()
    );
    TrainConfig::from_toml(&text).unwrap()
}

#[test]
fn autoregressive_training_and_free_rollout() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("ar");
    wave_dataset(&dir.join("wave.safetensors"), 12, 32, 3, 4);
    let mut tr = trainer(config(
        &dir,
        "wave.safetensors",
        "tf",
        "regime = \"autoregressive\"",
    ))
    .unwrap();
    let s = tr.run(&Progress::Quiet).unwrap();
    assert_eq!(s.steps, 2 * 3);
    let h = &tr.state().history;
    assert_eq!(h.last().unwrap().test_per_step.len(), 4);
    // The whole-rollout error lies within the per-step errors' range.
    let per = &h.last().unwrap().test_per_step;
    let full = h.last().unwrap().test_rel_l2.unwrap();
    let (lo, hi) = per
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), &v| (a.min(v), b.max(v)));
    assert!(
        full >= lo * 0.999 && full <= hi * 1.001,
        "{full} not in [{lo}, {hi}]"
    );

    // Predict = a sliding window over the model's own frames, written out by hand here.
    let (p, _) =
        Predictor::from_checkpoint(&dir.join("tf/checkpoints/last.safetensors"), Device::Cpu)
            .unwrap();
    let ds = TensorDataset::read(&dir.join("wave.safetensors")).unwrap();
    let pos = ds.test.pos.expand([4, -1, -1], false);
    let got = p.predict(&pos, &ds.test.fx, 4, None, None).unwrap();
    assert_eq!(got.size(), vec![4, 32, 1, 4]);
    tch::no_grad(|| {
        let mut window = ds.test.fx.shallow_clone();
        for t in 0..4 {
            let f = p
                .model
                .forward(&ono_models::ModelInput::new(&pos, &window), false)
                .unwrap();
            assert_eq!(
                Vec::<f32>::try_from(f.reshape([-1])).unwrap(),
                Vec::<f32>::try_from(got.select(3, t).reshape([-1])).unwrap()
            );
            window = Tensor::cat(&[window.narrow(2, 1, 2), f], 2);
        }
    });

    // Free-running training follows a different trajectory from teacher forcing.
    let mut free = trainer(config(
        &dir,
        "wave.safetensors",
        "free",
        "regime = \"autoregressive\"\nteacher_forcing = false",
    ))
    .unwrap();
    free.run(&Progress::Quiet).unwrap();
    let a = tr.state().history[1].train_loss;
    let b = free.state().history[1].train_loss;
    assert_ne!(a, b);

    // Normalizers are refused in this regime, by key.
    let cfg = config(
        &dir,
        "wave.safetensors",
        "norm",
        "regime = \"autoregressive\"\nnormalize_x = \"unit\"",
    );
    let e = trainer(cfg).err().unwrap().to_string();
    assert!(e.contains("data.normalize_x"), "{e}");
    // A steady regime on time-series targets is refused.
    let e = trainer(config(&dir, "wave.safetensors", "steady", ""))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("data.regime"), "{e}");
}

/// `data.train_steps` (ONO's `time_gen.py`): training sees the first 2 of the 4 target frames,
/// evaluation rolls out all 4.
#[test]
fn train_steps_train_on_the_first_frames_and_test_on_all() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("extrapolate");
    wave_dataset(&dir.join("wave.safetensors"), 12, 32, 3, 4);
    let mut cfg = config(
        &dir,
        "wave.safetensors",
        "run",
        "regime = \"autoregressive\"\ntrain_steps = 2",
    );
    // One batch of every sample: the epoch's training loss is the untrained model's loss.
    cfg.epochs = 1;
    cfg.batch_size = 12;
    let mut tr = trainer(cfg).unwrap();
    assert_eq!(tr.train_split().y.size(), [12, 32, 1, 2]);
    assert_eq!(tr.test_split().y.size(), [4, 32, 1, 4]);
    // Σ_b Σ_t relL2 of a teacher-forced rollout over `steps` frames, by hand, before the step.
    let rollout_loss = |steps: i64| -> f64 {
        let split = tr.train_split();
        let ds = TensorDataset::read(&dir.join("wave.safetensors")).unwrap();
        let pos = split.pos.expand([12, -1, -1], false);
        let mut window = split.fx.shallow_clone();
        let mut sum = 0.0;
        tch::no_grad(|| {
            for t in 0..steps {
                let input = ono_models::ModelInput::new(&pos, &window);
                let f = tr.model().forward(&input, true).unwrap();
                let yt = ds.train.y.select(3, t);
                let num = (&f - &yt)
                    .reshape([12, -1])
                    .norm_scalaropt_dim(2, [1], false);
                let den = yt.reshape([12, -1]).norm_scalaropt_dim(2, [1], false);
                sum += (num / den).sum(Kind::Double).double_value(&[]);
                window = Tensor::cat(&[window.narrow(2, 1, 2), yt], 2);
            }
        });
        sum / 12.0
    };
    let (two, four) = (rollout_loss(2), rollout_loss(4));
    tr.run(&Progress::Quiet).unwrap();
    let last = tr.state().history.last().unwrap();
    assert!(
        (last.train_loss - two).abs() < 1e-5 * two && (last.train_loss - four).abs() > 0.1 * two,
        "train loss {} vs 2 frames {two}, 4 frames {four}",
        last.train_loss
    );
    assert_eq!(last.test_per_step.len(), 4);
    let metrics = std::fs::read_to_string(dir.join("run/metrics.jsonl")).unwrap();
    let line: serde_json::Value = serde_json::from_str(metrics.lines().last().unwrap()).unwrap();
    assert_eq!(line["test_per_step"].as_array().unwrap().len(), 4);

    // `loss.rollout = "cumulative"` (time_gen.py's weights, `regime::frame_loss_tests`): the
    // same model from the same seed reports the same plain Σ over its 2 frames, but steps
    // along another gradient.
    let mut cfg = config(
        &dir,
        "wave.safetensors",
        "cumulative",
        "regime = \"autoregressive\"\ntrain_steps = 2",
    );
    cfg.epochs = 1;
    cfg.batch_size = 12;
    cfg.loss.rollout = RolloutLoss::Cumulative;
    let mut weighted = trainer(cfg).unwrap();
    weighted.run(&Progress::Quiet).unwrap();
    let w = weighted.state().history.last().unwrap();
    assert!(
        (w.train_loss - two).abs() < 1e-5 * two,
        "train loss {} vs 2 frames {two}",
        w.train_loss
    );
    assert_ne!(w.test_rel_l2, last.test_rel_l2);

    // Refused, by key: beyond T, below 1, in the steady regime, in the space-time regime.
    for (extra, want) in [
        ("regime = \"autoregressive\"\ntrain_steps = 5", "[1, 4]"),
        ("regime = \"space_time\"\ntrain_steps = 2", "space_time"),
        ("train_steps = 2", "steady"),
    ] {
        let e = trainer(config(&dir, "wave.safetensors", "bad", extra))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("data.train_steps") && e.contains(want), "{e}");
    }
    for regime in ["steady", "per_time_step", "space_time"] {
        let mut cfg = config(
            &dir,
            "wave.safetensors",
            "bad",
            &format!("regime = \"{regime}\""),
        );
        cfg.loss.rollout = RolloutLoss::Cumulative;
        let e = trainer(cfg).err().unwrap().to_string();
        assert!(e.contains("loss.rollout"), "{regime}: {e}");
    }
    let text = format!(
        "epochs = 1\nbatch_size = 1\noutput_dir = \"x\"\n[model]\n[data]\npath = \"{}\"\ntrain_steps = 0",
        dir.join("wave.safetensors").display()
    );
    let e = RunSpec::resolve(TrainConfig::from_toml(&text).unwrap())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("data.train_steps"), "{e}");
}

#[test]
fn per_time_step_training_covers_every_step() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("pts");
    plasticity_dataset(&dir.join("pla.safetensors"));
    let cfg = config(
        &dir,
        "pla.safetensors",
        "run",
        "regime = \"per_time_step\"\nnormalize_x = \"unit\"",
    );
    let mut tr = trainer(cfg).unwrap();
    assert!(
        matches!(tr.model().config(), ModelConfig::Ono(c) if c.time_input),
        "time input is switched on for this regime"
    );
    tr.run(&Progress::Quiet).unwrap();
    // One AdamW step per time step: 2 epochs × 2 batches × 5 steps.
    let st = &tr.state().optimizer;
    assert!(
        st.steps.values().all(|&s| s == 2 * 2 * 5),
        "{:?}",
        st.steps.values().next()
    );
    assert_eq!(
        tr.state().global_step,
        4,
        "the schedule steps once per batch"
    );
    let last = tr.state().history.last().unwrap();
    assert_eq!(last.test_per_step.len(), 5);
    // Training on the first 2 of the 5 steps: 2 AdamW steps per batch, 5 test steps.
    let mut short = trainer(config(
        &dir,
        "pla.safetensors",
        "short",
        "regime = \"per_time_step\"\nnormalize_x = \"unit\"\ntrain_steps = 2",
    ))
    .unwrap();
    short.run(&Progress::Quiet).unwrap();
    assert!(short
        .state()
        .optimizer
        .steps
        .values()
        .all(|&s| s == 2 * 2 * 2));
    let h = short.state().history.last().unwrap();
    assert_eq!(h.test_per_step.len(), 5);
    let (p, _) =
        Predictor::from_checkpoint(&dir.join("run/checkpoints/last.safetensors"), Device::Cpu)
            .unwrap();
    let ds = TensorDataset::read(&dir.join("pla.safetensors")).unwrap();
    let pred = p
        .predict(
            &ds.test.pos.expand([4, -1, -1], false),
            &ds.test.fx,
            5,
            None,
            None,
        )
        .unwrap();
    assert_eq!(pred.size(), vec![4, 24, 2, 5]);
}

#[test]
fn recompute_trains_like_the_plain_path() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("recompute");
    steady_dataset(&dir.join("s.safetensors"), 8);
    let run = |out: &str, extra: &str| {
        let mut cfg = config(&dir, "s.safetensors", out, "normalize_y = \"unit\"");
        cfg.double = true;
        cfg.recompute = extra.parse().unwrap();
        let mut tr = trainer(cfg).unwrap();
        tr.run(&Progress::Quiet).unwrap();
        let mut vars: Vec<(String, Tensor)> =
            tr.model().var_store().variables().into_iter().collect();
        vars.sort_by(|a, b| a.0.cmp(&b.0));
        vars
    };
    let plain = run("plain", "none");
    for mode in ["blocks", "selective"] {
        let re = run(mode, mode);
        for ((n, a), (_, b)) in plain.iter().zip(&re) {
            let err = (a - b).abs().max().double_value(&[]);
            assert!(err < 1e-9, "{mode} {n}: {err}");
        }
    }
}

/// Plasticity-like: a static input profile, 2 output channels over 5 time steps.
fn plasticity_dataset(path: &Path) {
    let make = |s: i64| {
        let fx = Tensor::rand([s, 24, 1], (Kind::Float, Device::Cpu)) + 0.5;
        let t = Tensor::linspace(0.0, 1.0, 5, (Kind::Float, Device::Cpu)).view([1, 1, 1, 5]);
        let y = Tensor::cat(
            &[
                fx.unsqueeze(-1) * (&t + 1.0),
                fx.unsqueeze(-1).square() - &t,
            ],
            2,
        );
        Split::new(fx, y, positions(24))
    };
    write_splits(path, make(8), make(4));
}

ono_testing::device_tests! {
    /// Every regime (steady plain and recomputed with normalizers, autoregressive, per time
    /// step) trains on `dev`, in float64, to the CPU's result; the checkpoint written from `dev`
    /// predicts on the CPU. The CPU variant is the control (it must equal itself).
    fn every_regime_trains_on_the_device_like_on_the_cpu(dev) {
        let _rng = ono_testing::torch_rng_lock();
        tch::manual_seed(0);
        let dir = temp_dir(&format!("dev-{dev:?}").replace([':', '(', ')'], ""));
        steady_dataset(&dir.join("s.safetensors"), 8);
        wave_dataset(&dir.join("wave.safetensors"), 8, 24, 3, 3);
        plasticity_dataset(&dir.join("pla.safetensors"));
        let cases = [
            ("s.safetensors", "normalize_x = \"unit\"\nnormalize_y = \"gaussian\"", Recompute::None),
            ("s.safetensors", "normalize_y = \"unit\"", Recompute::Blocks),
            ("s.safetensors", "normalize_y = \"unit\"", Recompute::Selective),
            ("wave.safetensors", "regime = \"autoregressive\"", Recompute::Auto),
            ("pla.safetensors", "regime = \"per_time_step\"\nnormalize_x = \"unit\"", Recompute::None),
        ];
        for (i, (data, extra, recompute)) in cases.into_iter().enumerate() {
            let run = |device: Device, out: &str| {
                let mut cfg = config(&dir, data, out, extra);
                cfg.double = true;
                cfg.recompute = recompute;
                cfg.device = match device {
                    Device::Cuda(n) => format!("cuda:{n}"),
                    _ => "cpu".into(),
                };
                let mut tr = trainer(cfg).unwrap();
                let s = tr.run(&Progress::Quiet).unwrap();
                assert_eq!(tr.host_reads().in_steps, 0, "case {i} on {device:?}");
                s.final_test.unwrap()
            };
            let on_cpu = run(Device::Cpu, &format!("cpu{i}"));
            let on_dev = run(dev, &format!("dev{i}"));
            println!("case {i}: test error CPU {on_cpu:.12}, {dev:?} {on_dev:.12}");
            assert!(on_dev.is_finite());
            assert!(
                (on_dev - on_cpu).abs() <= 1e-6 * on_cpu,
                "case {i}: {on_dev} on {dev:?} against {on_cpu} on the CPU"
            );
            // The checkpoint written on `dev` loads and predicts on the CPU.
            let ckpt = dir.join(format!("dev{i}/checkpoints/last.safetensors"));
            let (p, _) = Predictor::from_checkpoint(&ckpt, Device::Cpu).unwrap();
            let ds = TensorDataset::read(&dir.join(data)).unwrap();
            let steps = if ds.test.y.dim() == 4 { ds.test.y.size()[3] } else { 0 };
            let pos = ds.test.pos.expand([4, -1, -1], false).to_kind(Kind::Double);
            let pred = p.predict(&pos, &ds.test.fx.to_kind(Kind::Double), steps, None, None).unwrap();
            assert_eq!(pred.device(), Device::Cpu);
            assert_eq!(pred.size()[0], 4);
        }
    }
}
