//! FNO through the `ono` binary as the FNO scripts train it (Adam with L2 weight decay, StepLR,
//! pointwise Gaussian normalizers, sum-reduced relative L2): it learns a small generated Darcy set
//! and evaluates at a finer grid without retraining; FNO-2D trains autoregressively on NS2d,
//! resumes after kill -9 bit-identically and reports per-step and rollout errors.

mod common;

use std::path::{Path, PathBuf};

use ono_data::benchmarks::{miniature, Benchmark};
use ono_data::dataset::TensorDataset;
use ono_train::checkpoint::EpochRecord;
use ono_train::evaluate::Evaluation;
use ono_train::Summary;

use common::{
    assert_same_checkpoints, generated_darcy, json, mean_field_error, ok, ono, temp_dir,
    train_then_kill,
};

/// The FNO scripts' optimisation (Adam, weight decay 1e-4 as an L2 term, StepLR halving, no
/// clipping) in an experiment file.
const FNO_RECIPE: &str = r#"
[optimizer]
kind = "adam"
lr = 0.003
weight_decay = 1e-4
max_grad_norm = 0

[schedule]
kind = "step"
step_size = 10
gamma = 0.5
"#;

#[test]
fn fno2d_learns_darcy_and_evaluates_at_a_finer_grid() {
    let dir = temp_dir("fno-darcy");
    let data = generated_darcy(&dir, "darcy17.safetensors", "120", "24", "2", "3");
    let ds = TensorDataset::read(&data).unwrap();
    assert_eq!(ds.grid.as_deref(), Some(&[17, 17][..]));
    let baseline = mean_field_error(&ds);
    let cfg = dir.join("fno.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
seed = 0
epochs = 30
batch_size = 4
threads = 1
output_dir = "run"

[model]
arch = "fno2d"
preset = "darcy"
[model.overrides]
modes = [8, 8]
width = 16

[data]
path = "{}"
normalize_x = "gaussian"
normalize_y = "gaussian"
{FNO_RECIPE}
"#,
            data.display()
        ),
    )
    .unwrap();
    let out = ono().arg("train").arg(&cfg).output().unwrap();
    ok(&out);
    let final_err = json::<Summary>(&out).final_test.unwrap();
    let lrs: Vec<f64> = std::fs::read_to_string(dir.join("run/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<EpochRecord>(l).unwrap().lr)
        .collect();

    // A finer set of the same process: 33×33, never seen in training.
    let fine = generated_darcy(&dir, "darcy33.safetensors", "8", "24", "1", "5");
    let fine_ds = TensorDataset::read(&fine).unwrap();
    assert_eq!(fine_ds.grid.as_deref(), Some(&[33, 33][..]));
    let ckpt = dir.join("run/checkpoints/last.safetensors");
    let out = ono()
        .arg("eval")
        .arg(&ckpt)
        .arg("--data")
        .arg(&fine)
        .output()
        .unwrap();
    ok(&out);
    let fine_err = json::<Evaluation>(&out).test_rel_l2;
    let fine_baseline = mean_field_error(&fine_ds);
    eprintln!(
        "FNO2d Darcy 17×17: mean-field baseline {baseline:.4}, final {final_err:.4}; \
         at 33×33 without retraining {fine_err:.4} (mean field of that set {fine_baseline:.4}); \
         lr per epoch {lrs:?}"
    );
    assert!(
        final_err < 0.5 * baseline,
        "final {final_err} vs mean-field {baseline}"
    );
    assert!(
        fine_err.is_finite() && fine_err < fine_baseline,
        "33×33: {fine_err} vs its mean field {fine_baseline}"
    );
    // StepLR: halved every 10 epochs (the lr logged per epoch is the last step's).
    assert_eq!(lrs.len(), 30);
    assert!((lrs[0] - 0.003).abs() < 1e-12 && (lrs[9] - 0.003).abs() < 1e-12);
    assert!((lrs[10] - 0.0015).abs() < 1e-12 && (lrs[29] - 0.00075).abs() < 1e-12);
}

fn ns_config(dir: &Path, data: &Path, out: &str, ntrain: usize, ntest: usize) -> PathBuf {
    let text = format!(
        r#"
seed = 2
epochs = 3
batch_size = 2
threads = 1
output_dir = "{out}"

[model]
arch = "fno2d"
preset = "ns"
[model.overrides]
modes = [4, 4]
width = 8

[data]
benchmark = "ns2d"
data_dir = "{}"
layout = "fno"
ntrain = {ntrain}
ntest = {ntest}
# fourier_2d_time.py feeds its own predictions back in training.
teacher_forcing = false

[checkpoint]
every_steps = 1
{FNO_RECIPE}
"#,
        data.display()
    );
    let p = dir.join(format!("{out}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn fno2d_autoregressive_on_ns2d_resumes_after_kill_nine_and_reports_rollout_errors() {
    let dir = temp_dir("fno-ns");
    let m = miniature::write(Benchmark::Ns2d, &dir.join("data")).unwrap();
    let a = ns_config(&dir, &dir.join("data"), "a", m.ntrain, m.ntest);
    let out = ono().arg("train").arg(&a).arg("--quiet").output().unwrap();
    ok(&out);
    let total = json::<Summary>(&out).steps;

    let b = ns_config(&dir, &dir.join("data"), "b", m.ntrain, m.ntest);
    train_then_kill(&b, &dir.join("b/checkpoints/last.json"), |v| {
        v.epoch >= 1 && v.batch_in_epoch > 0
    });
    let out = ono().arg("train").arg(&b).arg("--resume").output().unwrap();
    ok(&out);
    let resumed: Summary = json(&out);
    assert!(resumed.resumed_at > 0, "{resumed:?}");
    assert_eq!(resumed.steps, total);
    assert_same_checkpoints(
        &dir.join("a/checkpoints/last.safetensors"),
        &dir.join("b/checkpoints/last.safetensors"),
    );

    // Per-step errors over the predicted frames (the miniature file holds 12: 10 in, 2 out) and
    // the whole rollout's.
    let out = ono()
        .arg("eval")
        .arg(dir.join("b/checkpoints/last.safetensors"))
        .output()
        .unwrap();
    ok(&out);
    let Evaluation {
        per_step,
        test_rel_l2: full,
        ..
    } = json(&out);
    eprintln!("FNO2d NS2d rollout: whole {full:.4}, per step {per_step:?}");
    assert_eq!(per_step.len(), 2);
    assert!(per_step.iter().all(|e| e.is_finite() && *e > 0.0));
    assert!(full.is_finite() && full > 0.0);
}
