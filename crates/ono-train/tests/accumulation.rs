//! Gradient accumulation (`accumulate_steps`): the step's samples cut into micro-batches whose
//! gradients add up before one optimizer step.
//!
//! The independent truth: for a model whose forward does not couple the samples of a batch (FNO
//! without BatchNorm), a step accumulated over micro-batches is the step on the whole batch, up
//! to the rounding of the sums: with a summed loss the micro-batches' gradients add to the
//! batch's, with a mean-reduced one they add once weighted by their shares. Several float64
//! steps through the whole trainer (schedule, clipping, AdamW) must end within 1e-10.

mod common;

use std::path::Path;

use ono_data::dataset::{Split, TensorDataset};
use ono_train::config::TrainConfig;
use ono_train::progress::Progress;
use ono_train::{RunSpec, Trainer};
use tch::{Device, Kind, Tensor};

use common::temp_dir;

const H: i64 = 8;

/// A steady set on an H×H grid: 10 training and 3 test samples, `y` a smooth pointwise
/// function of two input channels.
fn grid_dataset(path: &Path) {
    let n = H * H;
    let opts = (Kind::Float, Device::Cpu);
    let r = Tensor::linspace(0.0, 1.0, H, opts);
    let pos = Tensor::stack(
        &[
            r.view([H, 1]).expand([H, H], false),
            r.view([1, H]).expand([H, H], false),
        ],
        2,
    )
    .view([1, n, 2]);
    let make = |s: i64| {
        let fx = Tensor::randn([s, n, 2], opts);
        let y = (fx.narrow(2, 0, 1) * 0.5).sin() * 4.0 + fx.narrow(2, 1, 1) + 3.0;
        Split::new(fx, y, pos.shallow_clone())
    };
    TensorDataset {
        train: make(10),
        test: make(3),
        grid: Some(vec![H, H]),
        query_grid: None,
        test_grid: None,
    }
    .write(path)
    .unwrap();
}

fn config(dir: &Path, out: &str, arch: &str, extra: &str) -> TrainConfig {
    let model = match arch {
        "fno" => "arch = \"fno2d\"\npreset = \"darcy\"\n[model.overrides]\nmodes = [3, 3]\nwidth = 6\nn_layers = 2\npadding = [0, 0]\nproj_hidden = 8",
        _ => "preset = \"ns2d\"\n[model.overrides]\nn_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4",
    };
    let text = format!(
        r#"
seed = 3
epochs = 2
batch_size = 4
threads = 1
double = true
output_dir = "{out}"
{extra}

[model]
{model}

[data]
path = "{data}"

[optimizer]
max_grad_norm = 0.5

[log]
panels = 0
"#,
        out = dir.join(out).display(),
        data = dir.join("grid.safetensors").display(),
    );
    TrainConfig::from_toml(&text).unwrap()
}

fn train(cfg: TrainConfig) -> Trainer {
    let mut t = Trainer::new(RunSpec::resolve(cfg).unwrap(), false).unwrap();
    t.run(&Progress::Quiet).unwrap();
    t
}

/// max |a − b| / max |b| over every variable of the two models (parameters and buffers).
fn max_rel_diff(a: &Trainer, b: &Trainer) -> f64 {
    let va = a.model().var_store().variables();
    let vb = b.model().var_store().variables();
    assert_eq!(va.len(), vb.len());
    va.iter()
        .map(|(k, x)| {
            let y = &vb[k];
            let d = (x - y).abs().max().double_value(&[]);
            d / y.abs().max().double_value(&[]).max(1e-300)
        })
        .fold(0.0, f64::max)
}

#[test]
fn fno_steps_accumulated_over_micro_batches_are_the_whole_batch_steps() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("accumulate-fno");
    grid_dataset(&dir.join("grid.safetensors"));
    // 10 samples in batches of 4: two full steps and a last one of 2 per epoch, so the uneven
    // cut (2 + 2, then 1 + 1) and the last partial batch are both exercised; both reductions.
    for reduction in ["sum", "mean"] {
        let loss = format!("[loss]\nreduction = \"{reduction}\"");
        let whole = train(config(&dir, &format!("w-{reduction}"), "fno", &loss));
        let micro = train(config(
            &dir,
            &format!("m-{reduction}"),
            "fno",
            &format!("accumulate_steps = 2\n{loss}"),
        ));
        let rel = max_rel_diff(&micro, &whole);
        assert!(rel < 1e-10, "{reduction}: {rel:e}");
        // The same steps, the same samples, the same training loss.
        let (hw, hm) = (&whole.state().history, &micro.state().history);
        assert_eq!(whole.state().global_step, 6);
        assert_eq!(micro.state().global_step, 6);
        for (a, b) in hw.iter().zip(hm) {
            assert!((a.train_loss - b.train_loss).abs() <= 1e-10 * a.train_loss.abs());
        }
        // Not vacuous: the parameters moved.
        assert!(hw[0].train_loss != hw[1].train_loss);
    }
}

/// ONO whitens each micro-batch with its own covariance, so accumulation changes its steps;
/// its EMA buffers still fold every micro-batch's statistic in order: after one epoch of three
/// steps (2 + 2, 2 + 2, 1 + 1 samples) the counter says six updates.
#[test]
fn ono_folds_each_micro_batch_into_its_ema() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir("accumulate-ono");
    grid_dataset(&dir.join("grid.safetensors"));
    let micro = train(config(&dir, "m", "ono", "accumulate_steps = 2"));
    let whole = train(config(&dir, "w", "ono", ""));
    let emas = micro.model().ema_statistics();
    assert!(!emas.is_empty());
    for e in &emas {
        assert_eq!(e.count().unwrap(), 12, "two epochs of six micro-batches");
    }
    for e in whole.model().ema_statistics() {
        assert_eq!(e.count().unwrap(), 6);
    }
    assert!(max_rel_diff(&micro, &whole) > 1e-6);
}

#[test]
fn accumulation_refuses_more_micro_batches_than_samples() {
    let dir = temp_dir("accumulate-bad");
    let text = format!(
        "epochs = 1\nbatch_size = 2\naccumulate_steps = 3\noutput_dir = \"{}\"\n[model]\npreset = \"ns2d\"\n[data]\npath = \"x\"\n",
        dir.join("o").display()
    );
    let Err(err) = TrainConfig::from_toml(&text).and_then(|c| c.validate()) else {
        panic!("accumulate_steps = 3 with batch_size = 2 was accepted");
    };
    assert!(err.to_string().contains("accumulate_steps"), "{err}");
}
