//! AdamW, OneCycle and gradient clipping against values produced by PyTorch 2.11
//! (`fixtures/train`, see its README).

use std::collections::BTreeMap;

use ono_testing::{assert_close, fixtures_dir, to_f64_vec};
use ono_train::adamw::{AdamW, AdamWConfig, GroupSpec};
use ono_train::clip::clip_grad_norm_;
use ono_train::one_cycle::{Anneal, OneCycleConfig};
use serde_json::Value;
use tch::{Kind, Tensor};

fn train_fixture(name: &str) -> std::path::PathBuf {
    fixtures_dir().join("train").join(name)
}

fn load(name: &str) -> BTreeMap<String, Tensor> {
    ono_nn::weights::read_safetensors(&train_fixture(name))
        .expect("fixture readable")
        .0
}

#[test]
fn one_cycle_matches_pytorch_at_every_step() {
    let text = std::fs::read_to_string(train_fixture("one_cycle.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    let mut cases = 0;
    for (case, v) in all.as_object().unwrap() {
        let config: OneCycleConfig = serde_json::from_value(v["config"].clone()).unwrap();
        let schedule = config.build().unwrap();
        let lrs = v["lr_per_step"].as_array().unwrap();
        let betas = v["beta1_per_step"].as_array().unwrap();
        assert_eq!(lrs.len() as u64, config.total_steps, "{case}");
        for (i, (lr, b1)) in lrs.iter().zip(betas).enumerate() {
            let got = schedule.at(i as u64).unwrap();
            let (lr, b1) = (lr.as_f64().unwrap(), b1.as_f64().unwrap());
            assert!(
                (got.lr - lr).abs() <= 1e-9 * lr.abs().max(1e-3),
                "{case} step {i}: lr {} vs {lr}",
                got.lr
            );
            assert!(
                (got.beta1.unwrap() - b1).abs() <= 1e-9,
                "{case} step {i}: beta1"
            );
        }
        cases += 1;
    }
    assert_eq!(cases, 3);
}

#[test]
fn one_cycle_covers_both_strategies_and_refuses_bad_configs() {
    // The fixture cases must exercise both anneal strategies and both phase layouts.
    let text = std::fs::read_to_string(train_fixture("one_cycle.json")).unwrap();
    let all: Value = serde_json::from_str(&text).unwrap();
    let configs: Vec<OneCycleConfig> = all
        .as_object()
        .unwrap()
        .values()
        .map(|v| serde_json::from_value(v["config"].clone()).unwrap())
        .collect();
    assert!(configs
        .iter()
        .any(|c| c.anneal_strategy == Anneal::Linear && c.three_phase));
    assert!(configs
        .iter()
        .any(|c| c.anneal_strategy == Anneal::Cos && !c.three_phase));

    let ok = OneCycleConfig {
        total_steps: 10,
        ..Default::default()
    };
    let s = ok.build().unwrap();
    assert!(
        s.at(10).is_ok(),
        "PyTorch allows get_lr at step == total_steps"
    );
    let err = s.at(11).unwrap_err().to_string();
    assert!(err.contains("schedule.total_steps"), "{err}");
    for (bad, key) in [
        (
            OneCycleConfig {
                total_steps: 0,
                ..ok.clone()
            },
            "schedule.total_steps",
        ),
        (
            OneCycleConfig {
                pct_start: 1.5,
                ..ok.clone()
            },
            "schedule.pct_start",
        ),
        (
            OneCycleConfig {
                max_lr: f64::NAN,
                ..ok.clone()
            },
            "schedule.max_lr",
        ),
        (
            OneCycleConfig {
                div_factor: 0.0,
                ..ok.clone()
            },
            "schedule.div_factor",
        ),
        (
            OneCycleConfig {
                base_momentum: 1.0,
                ..ok.clone()
            },
            "schedule.base_momentum",
        ),
    ] {
        let e = bad.build().unwrap_err().to_string();
        assert!(e.contains(key), "{e}");
    }
}

fn lsq_loss(x: &Tensor, y: &Tensor, w: &Tensor, b: &Tensor) -> Tensor {
    (x.matmul(w) + b - y).square().mean(Kind::Float)
}

fn hyper() -> AdamWConfig {
    let text = std::fs::read_to_string(train_fixture("adamw_trajectory.json")).unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    AdamWConfig {
        lr: v["lr"].as_f64().unwrap(),
        betas: (
            v["betas"][0].as_f64().unwrap(),
            v["betas"][1].as_f64().unwrap(),
        ),
        eps: v["eps"].as_f64().unwrap(),
        weight_decay: v["weight_decay"].as_f64().unwrap(),
        amsgrad: v["amsgrad"].as_bool().unwrap(),
        l2_weight_decay: false,
    }
}

fn fresh_params(f: &BTreeMap<String, Tensor>) -> (Tensor, Tensor) {
    (
        f["init.w"].copy().set_requires_grad(true),
        f["init.b"].copy().set_requires_grad(true),
    )
}

#[test]
fn adamw_follows_the_pytorch_trajectory() {
    ono_testing::init();
    let f = load("adamw_trajectory.safetensors");
    let (w, b) = fresh_params(&f);
    let mut opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![
            ("w".into(), w.shallow_clone()),
            ("b".into(), b.shallow_clone()),
        ],
        config: hyper(),
    }])
    .unwrap();
    for k in 0..5 {
        opt.zero_grad();
        lsq_loss(&f["input.x"], &f["input.y"], &w, &b).backward();
        assert_close(&w.grad(), &f[&format!("step{k}.grad.w")], 1e-6, 1e-7);
        assert_close(&b.grad(), &f[&format!("step{k}.grad.b")], 1e-6, 1e-7);
        opt.step(None).unwrap();
        assert_close(&w, &f[&format!("step{k}.w")], 1e-6, 1e-7);
        assert_close(&b, &f[&format!("step{k}.b")], 1e-6, 1e-7);
        let (state, _) = opt.state("").unwrap();
        assert_close(
            &state["w.exp_avg"],
            &f[&format!("step{k}.exp_avg.w")],
            1e-6,
            1e-9,
        );
        assert_close(
            &state["w.exp_avg_sq"],
            &f[&format!("step{k}.exp_avg_sq.w")],
            1e-5,
            1e-12,
        );
    }
    // The update moved the weights (the comparison above is not vacuous).
    let moved = (&w - &f["init.w"]).abs().max().double_value(&[]);
    assert!(moved > 1e-3, "{moved}");
}

#[test]
fn adamw_negative_control_wrong_weight_decay_is_caught() {
    ono_testing::init();
    let f = load("adamw_trajectory.safetensors");
    let (w, b) = fresh_params(&f);
    let mut cfg = hyper();
    cfg.weight_decay *= 2.0;
    let mut opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![
            ("w".into(), w.shallow_clone()),
            ("b".into(), b.shallow_clone()),
        ],
        config: cfg,
    }])
    .unwrap();
    for _ in 0..5 {
        opt.zero_grad();
        lsq_loss(&f["input.x"], &f["input.y"], &w, &b).backward();
        opt.step(None).unwrap();
    }
    assert!(ono_testing::check_close(&w, &f["step4.w"], 1e-6, 1e-7).is_err());
}

#[test]
fn adamw_state_round_trip_continues_bit_identically() {
    ono_testing::init();
    let f = load("adamw_trajectory.safetensors");
    let run = |split: Option<usize>| -> Vec<f64> {
        let (w, b) = fresh_params(&f);
        let spec = || GroupSpec {
            params: vec![
                ("w".into(), w.shallow_clone()),
                ("b".into(), b.shallow_clone()),
            ],
            config: hyper(),
        };
        let mut opt = AdamW::with_groups(vec![spec()]).unwrap();
        for k in 0..5 {
            if Some(k) == split {
                let (t, s) = opt.state("opt.").unwrap();
                opt = AdamW::with_groups(vec![spec()]).unwrap();
                opt.load_state("opt.", &t, &s).unwrap();
            }
            opt.set_beta1(0.9 - 0.01 * k as f64);
            opt.zero_grad();
            lsq_loss(&f["input.x"], &f["input.y"], &w, &b).backward();
            opt.step(Some(0.1)).unwrap();
        }
        [to_f64_vec(&w), to_f64_vec(&b)].concat()
    };
    let straight = run(None);
    assert_eq!(run(Some(2)), straight);
    assert_ne!(run(Some(2))[..3], to_f64_vec(&f["init.w"])[..3]);
}

#[test]
fn adamw_skips_parameters_without_gradients_like_pytorch() {
    ono_testing::init();
    let f = load("adamw_trajectory.safetensors");
    let (w, b) = fresh_params(&f);
    let unused = Tensor::ones([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let mut opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![
            ("w".into(), w.shallow_clone()),
            ("b".into(), b.shallow_clone()),
            ("unused".into(), unused.shallow_clone()),
        ],
        config: hyper(),
    }])
    .unwrap();
    for k in 0..5 {
        opt.zero_grad();
        lsq_loss(&f["input.x"], &f["input.y"], &w, &b).backward();
        opt.step(None).unwrap();
        assert_close(&w, &f[&format!("step{k}.w")], 1e-6, 1e-7);
    }
    // PyTorch neither decays nor counts a parameter whose grad is None.
    assert_eq!(to_f64_vec(&unused), vec![1.0; 4]);
    let (_, state) = opt.state("").unwrap();
    assert_eq!(state.steps["unused"], 0);
    assert_eq!(state.steps["w"], 5);
}

/// A group whose parameters have gradients at different steps (one never, one every other
/// step) updates each parameter exactly as a group of its own would: the stretches of
/// neighbours updated together must not touch the others or their gaps.
#[test]
fn adamw_with_absent_gradients_matches_one_group_per_parameter() {
    ono_testing::init();
    // (name, length, at which steps it has a gradient)
    type Layout = (&'static str, i64, fn(usize) -> bool);
    let layout: [Layout; 6] = [
        ("a", 5, |_| true),
        ("b", 3, |_| true),
        ("never", 7, |_| false),
        ("c", 17, |_| true),
        ("odd", 4, |k| k % 2 == 1),
        ("d", 2, |_| true),
    ];
    let cfg = AdamWConfig {
        lr: 1e-2,
        weight_decay: 0.1,
        ..Default::default()
    };
    let run = |separate: bool| -> Vec<Vec<f64>> {
        tch::manual_seed(7);
        let params: Vec<(String, Tensor)> = layout
            .iter()
            .map(|(n, len, _)| {
                let t = Tensor::randn([*len], (Kind::Double, tch::Device::Cpu));
                (n.to_string(), t.set_requires_grad(true))
            })
            .collect();
        let specs = if separate {
            params
                .iter()
                .map(|(n, t)| GroupSpec {
                    params: vec![(n.clone(), t.shallow_clone())],
                    config: cfg.clone(),
                })
                .collect()
        } else {
            vec![GroupSpec {
                params: params
                    .iter()
                    .map(|(n, t)| (n.clone(), t.shallow_clone()))
                    .collect(),
                config: cfg.clone(),
            }]
        };
        let mut opt = AdamW::with_groups(specs).unwrap();
        for k in 0..6 {
            opt.zero_grad();
            let mut loss = Tensor::zeros([], (Kind::Double, tch::Device::Cpu));
            for ((_, t), (_, _, used)) in params.iter().zip(&layout) {
                if used(k) {
                    loss += (t * t).sum(Kind::Double).sin();
                }
            }
            loss.backward();
            opt.step(None).unwrap();
        }
        params.iter().map(|(_, t)| to_f64_vec(t)).collect()
    };
    let (together, alone) = (run(false), run(true));
    for ((name, ..), (x, y)) in layout.iter().zip(together.iter().zip(&alone)) {
        assert_eq!(x, y, "{name}");
    }
    tch::manual_seed(7);
    let first = to_f64_vec(&Tensor::randn([5], (Kind::Double, tch::Device::Cpu)));
    assert_ne!(together[0], first, "the parameters moved");
}

#[test]
fn adamw_refuses_bad_hyper_parameters_and_state() {
    let p = Tensor::zeros([2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let spec = |config| GroupSpec {
        params: vec![("p".into(), p.shallow_clone())],
        config,
    };
    for (cfg, key) in [
        (
            AdamWConfig {
                lr: -1.0,
                ..Default::default()
            },
            "optimizer.lr",
        ),
        (
            AdamWConfig {
                betas: (1.0, 0.999),
                ..Default::default()
            },
            "optimizer.betas[0]",
        ),
        (
            AdamWConfig {
                weight_decay: f64::NAN,
                ..Default::default()
            },
            "optimizer.weight_decay",
        ),
    ] {
        let e = AdamW::with_groups(vec![spec(cfg)])
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(key), "{e}");
    }
    let mut opt = AdamW::with_groups(vec![spec(AdamWConfig::default())]).unwrap();
    let (mut t, s) = opt.state("").unwrap();
    t.remove("p.exp_avg");
    let e = opt.load_state("", &t, &s).unwrap_err().to_string();
    assert!(e.contains("p.exp_avg"), "{e}");
}

#[test]
fn clip_grad_norm_matches_pytorch() {
    let f = load("clip_grad_norm.safetensors");
    let mut grads = vec![f["grad0"].copy(), f["grad1"].copy()];
    let total = clip_grad_norm_(&mut grads, 0.1).unwrap();
    assert_close(&total.reshape([1]), &f["total_norm"], 1e-6, 0.0);
    assert_close(&grads[0], &f["clipped0"], 1e-6, 1e-9);
    assert_close(&grads[1], &f["clipped1"], 1e-6, 1e-9);
    // The fixture actually clips (norm above 0.1), and a norm below the bound leaves grads alone.
    assert!(total.double_value(&[]) > 0.1);
    let mut small = vec![f["clipped0"].copy(), f["clipped1"].copy()];
    let _ = clip_grad_norm_(&mut small, 1.0).unwrap();
    assert_close(&small[0], &f["clipped0"], 1e-6, 0.0);
    assert!(clip_grad_norm_(&mut [], 0.1).is_err());
    assert!(clip_grad_norm_(&mut small, 0.0).is_err());
}

#[test]
fn optimizer_clipping_equals_standalone_clipping() {
    ono_testing::init();
    let f = load("adamw_trajectory.safetensors");
    let (w, b) = fresh_params(&f);
    let opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![
            ("w".into(), w.shallow_clone()),
            ("b".into(), b.shallow_clone()),
        ],
        config: hyper(),
    }])
    .unwrap();
    lsq_loss(&f["input.x"], &f["input.y"], &w, &b).backward();
    let mut grads = vec![w.grad().copy(), b.grad().copy()];
    let expected = clip_grad_norm_(&mut grads, 0.1).unwrap();
    let mut flat = opt.gather_grads().unwrap();
    let got = flat.clip_norm_(0.1).unwrap();
    assert_close(&got, &expected, 1e-6, 0.0);
}

/// `torch.optim.Adam` with weight decay (the FNO scripts' optimizer) against the algorithm of
/// PyTorch's documentation written out in f64 scalars: g ← g + λθ, m ← β1 m + (1 − β1) g,
/// v ← β2 v + (1 − β2) g², θ ← θ − lr m̂ / (√v̂ + ε).
#[test]
fn adam_with_l2_weight_decay_follows_the_documented_algorithm() {
    ono_testing::init();
    let target = [0.5f64, -1.0, 2.0, 0.25];
    let init = [1.0f64, 0.3, -0.7, 1.5];
    let cfg = AdamWConfig {
        lr: 0.05,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: 0.1,
        amsgrad: false,
        l2_weight_decay: true,
    };
    let p = Tensor::from_slice(&init).set_requires_grad(true);
    let t = Tensor::from_slice(&target);
    let mut opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![("p".into(), p.shallow_clone())],
        config: cfg.clone(),
    }])
    .unwrap();
    let (mut theta, mut m, mut v) = (init, [0f64; 4], [0f64; 4]);
    for step in 1..=6 {
        opt.zero_grad();
        // loss = Σ (p − t)² → grad 2 (p − t)
        (&p - &t).square().sum(Kind::Double).backward();
        opt.step(None).unwrap();
        let (b1, b2) = cfg.betas;
        for i in 0..4 {
            let g = 2.0 * (theta[i] - target[i]) + cfg.weight_decay * theta[i];
            m[i] = b1 * m[i] + (1.0 - b1) * g;
            v[i] = b2 * v[i] + (1.0 - b2) * g * g;
            let mhat = m[i] / (1.0 - b1.powi(step));
            let vhat = v[i] / (1.0 - b2.powi(step));
            theta[i] -= cfg.lr * mhat / (vhat.sqrt() + cfg.eps);
        }
        let got = Vec::<f64>::try_from(&p.detach()).unwrap();
        for i in 0..4 {
            assert!(
                (got[i] - theta[i]).abs() < 1e-12,
                "step {step}, entry {i}: {} vs {}",
                got[i],
                theta[i]
            );
        }
    }
    // AdamW's decoupled decay gives another trajectory: the comparison can fail.
    let q = Tensor::from_slice(&init).set_requires_grad(true);
    let mut adamw = AdamW::with_groups(vec![GroupSpec {
        params: vec![("q".into(), q.shallow_clone())],
        config: AdamWConfig {
            l2_weight_decay: false,
            ..cfg
        },
    }])
    .unwrap();
    for _ in 0..6 {
        adamw.zero_grad();
        (&q - &t).square().sum(Kind::Double).backward();
        adamw.step(None).unwrap();
    }
    let diff = (&q - &p).abs().max().double_value(&[]);
    assert!(diff > 1e-4, "{diff}");
}

/// Parameters re-seated in the flat buffer start at aligned offsets, so a complex weight kept as
/// (…, 2) pairs after an odd-sized parameter can still be viewed as complex (the F-FNO weights
/// failed with "storage_offset divisible by 2" before).
#[test]
fn parameters_start_aligned_in_the_flat_buffer() {
    ono_testing::init();
    let a = Tensor::ones([3], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let w = Tensor::ones([2, 3, 2], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let _opt = AdamW::with_groups(vec![GroupSpec {
        params: vec![
            ("a".into(), a.shallow_clone()),
            ("w".into(), w.shallow_clone()),
        ],
        config: AdamWConfig::default(),
    }])
    .unwrap();
    assert!(w.f_view_as_complex().is_ok());
    assert_eq!(
        Vec::<f32>::try_from(&w.flatten(0, -1)).unwrap(),
        vec![1.0; 12]
    );
}
