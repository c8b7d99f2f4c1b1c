//! The `ono` binary end to end: training, kill -9 and resume, errors that leave no corrupt
//! checkpoint, eval and predict.

mod common;

use std::path::{Path, PathBuf};

use ono_data::dataset::{grid_positions_2d, Split, TensorDataset};
use ono_train::bench_step::StepReport;
use ono_train::checkpoint::{Checkpoint, EpochRecord};
use ono_train::evaluate::Evaluation;
use ono_train::Summary;
use tch::{Device, Kind, Tensor};

use common::{
    bench_step_once, json, mean_field_error, model_and_optimizer, ok, ono, predict_split, temp_dir,
    train_then_kill,
};

/// A smooth-field operator on an s×s grid: y = a blurred, shifted copy of fx plus a product
/// term; enough structure to learn, nothing to solve.
fn synthetic_dataset(path: &Path, n_train: i64, n_test: i64, s: i64, seed: i64) {
    tch::manual_seed(seed);
    let make = |n: i64| {
        let coarse = Tensor::randn([n, 1, 4, 4], (Kind::Float, Device::Cpu));
        let fx = coarse.upsample_bilinear2d([s, s], true, None, None);
        let blur = fx.avg_pool2d([3, 3], [1, 1], [1, 1], false, true, None::<i64>);
        let y = &blur * 0.8 + fx.roll([1], [3]) * 0.3 + &fx * &blur * 0.2 + 1.0;
        let to_points = |t: &Tensor| t.reshape([n, s * s, 1]);
        Split::new(
            to_points(&fx),
            to_points(&y),
            grid_positions_2d(s, s).unwrap(),
        )
    };
    TensorDataset {
        train: make(n_train),
        test: make(n_test),
        grid: Some(vec![s, s]),
        query_grid: None,
        test_grid: None,
    }
    .write(path)
    .unwrap();
}

fn config(dir: &Path, data: &str, out: &str, epochs: u64, extra: &str) -> PathBuf {
    let text = format!(
        r#"
seed = 7
epochs = {epochs}
batch_size = 4
threads = 1
output_dir = "{out}"

[model]
preset = "darcy"
[model.overrides]
n_layers = 2
n_hidden = 16
n_head = 2
psi_dim = 4
mlp_ratio = 1
nn_block = "linear_transformer"

[data]
path = "{data}"
normalize_x = "unit"
normalize_y = "unit"

[optimizer]
lr = 0.003

[checkpoint]
every_steps = 2

[log]
every_steps = 1
panels = 2
{extra}
"#
    );
    let p = dir.join(format!("{out}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn kill_nine_mid_epoch_then_resume_is_bit_identical() {
    killed_run_resumes_bit_identically("resume", "");
}

/// Float16 mixed precision: the loss scaler's state and the optimizer's skip counts are in the
/// checkpoint, so a killed run resumes bit-identically too; `ono eval` evaluates in the
/// precision the run trained in.
#[test]
fn a_float16_run_resumes_bit_identically_and_evaluates_in_float16() {
    let dir = killed_run_resumes_bit_identically("resume-f16", "precision = \"f16\"\n");
    let ckpt = dir.join("a/checkpoints/last.safetensors");
    let c = Checkpoint::load(&ckpt).unwrap();
    let scale = c.tensors["scaler.scale"].double_value(&[0]);
    let skipped: i64 = c
        .tensors
        .iter()
        .filter(|(k, _)| k.ends_with(".skipped_steps"))
        .map(|(_, t)| t.int64_value(&[]))
        .max()
        .unwrap();
    // The first steps overflow float16 at GradScaler's initial 2^16 and are skipped: the
    // resumed run had a non-trivial scaler state to restore.
    assert!(
        skipped > 0 && scale < 65536.0,
        "scale {scale}, skipped {skipped}"
    );
    let last: EpochRecord = serde_json::from_str(
        std::fs::read_to_string(dir.join("a/metrics.jsonl"))
            .unwrap()
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    let trained = last.test_rel_l2.unwrap();
    let e = json::<Evaluation>(&ono().arg("eval").arg(&ckpt).output().unwrap()).test_rel_l2;
    // float32 evaluation of the same weights differs in the 4th digit.
    assert!((e - trained).abs() <= 1e-7 * trained, "{e} vs {trained}");
}

/// Trains `a` uninterrupted and `b` killed with SIGKILL mid-epoch then resumed, both from the
/// configuration with the top-level keys `top` put in front; asserts they end with the same
/// tensors and metrics. Returns the scratch folder.
fn killed_run_resumes_bit_identically(name: &str, top: &str) -> ono_testing::Scratch {
    let config = |dir: &Path, out: &str| {
        let p = config(dir, "data.safetensors", out, 4, "");
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, format!("{top}{text}")).unwrap();
        p
    };
    let dir = temp_dir(name);
    synthetic_dataset(&dir.join("data.safetensors"), 40, 8, 8, 1);
    // Uninterrupted reference run.
    let cfg_a = config(&dir, "a");
    let out = ono()
        .arg("train")
        .arg(&cfg_a)
        .arg("--quiet")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The same run, killed with SIGKILL once a mid-epoch checkpoint exists.
    let cfg_b = config(&dir, "b");
    train_then_kill(&cfg_b, &dir.join("b/checkpoints/last.json"), |v| {
        v.epoch >= 1 && v.batch_in_epoch > 0
    });
    let killed_at = Checkpoint::load(&dir.join("b/checkpoints/last.safetensors"))
        .unwrap()
        .state;
    let total = 4 * 10;
    assert!(
        killed_at.global_step < total,
        "the child finished before it was killed"
    );

    let out = ono()
        .arg("train")
        .arg(&cfg_b)
        .arg("--resume")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Summary = json(&out);
    assert!(summary.resumed_at > 0, "{summary:?}");
    assert_eq!(summary.steps, total);

    let a = model_and_optimizer(&dir.join("a/checkpoints/last.safetensors"));
    let b = model_and_optimizer(&dir.join("b/checkpoints/last.safetensors"));
    assert_eq!(a.len(), b.len());
    assert!(
        a.iter().any(|(k, _)| k.contains("feature_cov")),
        "EMA buffers are checkpointed"
    );
    for ((ka, va), (kb, vb)) in a.iter().zip(&b) {
        assert_eq!(ka, kb);
        assert!(va == vb, "{ka} differs after resume");
    }
    // The recorded history matches too (except wall-clock seconds).
    let strip = |p: &Path| -> Vec<EpochRecord> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| EpochRecord {
                seconds: 0.0,
                ..serde_json::from_str(l).unwrap()
            })
            .collect()
    };
    let (ma, mb) = (
        strip(&dir.join("a/metrics.jsonl")),
        strip(&dir.join("b/metrics.jsonl")),
    );
    assert_eq!(ma.len(), 4);
    assert_eq!(ma, mb);
    // No temporary files survive.
    for f in std::fs::read_dir(dir.join("b/checkpoints")).unwrap() {
        let name = f.unwrap().file_name().to_string_lossy().to_string();
        assert!(!name.contains(".tmp"), "left over: {name}");
    }
    dir
}

#[test]
fn bad_configs_missing_data_and_nan_give_clear_errors() {
    let dir = temp_dir("errors");
    synthetic_dataset(&dir.join("data.safetensors"), 12, 4, 8, 2);
    let run = |cfg: &Path, extra: &[&str]| {
        let out = ono()
            .arg("train")
            .arg(cfg)
            .args(extra)
            .arg("--quiet")
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    // Unknown key, bad value, unknown preset, unknown override: each named.
    for (extra, key) in [
        ("[loss]\nalpha = 0.1", "alpha"),
        ("[schedule]\npct_start = 2.0", "schedule.pct_start"),
    ] {
        let cfg = config(&dir, "data.safetensors", "bad", 1, extra);
        let (ok, err) = run(&cfg, &[]);
        assert!(!ok && err.contains(key), "{err}");
    }
    let cfg = config(&dir, "data.safetensors", "bad", 1, "");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(&cfg, text.replace("batch_size = 4", "batch_size = 0")).unwrap();
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok && err.contains("batch_size"), "{err}");
    std::fs::write(&cfg, text.replace("n_hidden = 16", "n_hiden = 16")).unwrap();
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok && err.contains("model.overrides.n_hiden"), "{err}");
    std::fs::write(
        &cfg,
        text.replace("preset = \"darcy\"", "preset = \"darcyy\""),
    )
    .unwrap();
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok && err.contains("model.preset"), "{err}");

    // Missing data names the file.
    let cfg = config(&dir, "nowhere.safetensors", "missing", 1, "");
    let (ok, err) = run(&cfg, &[]);
    assert!(
        !ok && err.contains("nowhere.safetensors") && err.contains("does not exist"),
        "{err}"
    );

    // A diverging run stops at the step whose loss is not finite and writes no checkpoint after it.
    let cfg = config(&dir, "data.safetensors", "nan", 3, "");
    let text = std::fs::read_to_string(&cfg)
        .unwrap()
        .replace("lr = 0.003", "lr = 1e30\nmax_grad_norm = 1e30")
        .replace(
            "[checkpoint]\nevery_steps = 2",
            "[checkpoint]\nevery_steps = 1",
        );
    std::fs::write(&cfg, text).unwrap();
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok, "a run with lr 1e30 should not finish");
    assert!(
        err.contains("optimizer step") && (err.contains("NaN") || err.contains("inf")),
        "{err}"
    );
    if let Ok(c) = Checkpoint::load(&dir.join("nan/checkpoints/last.safetensors")) {
        for (k, t) in &c.tensors {
            let finite = t.isfinite().all().int64_value(&[]) == 1;
            assert!(finite, "checkpoint tensor {k} is not finite");
        }
    }

    // A checkpoint that cannot be written: the checkpoint folder is a file.
    let cfg = config(&dir, "data.safetensors", "blocked", 1, "");
    std::fs::create_dir_all(dir.join("blocked")).unwrap();
    std::fs::write(dir.join("blocked/checkpoints"), b"not a folder").unwrap();
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok && err.contains("checkpoint"), "{err}");

    // A second `train` into a folder with a run refuses instead of overwriting it.
    let cfg = config(&dir, "data.safetensors", "twice", 1, "");
    assert!(run(&cfg, &[]).0);
    let (ok, err) = run(&cfg, &[]);
    assert!(!ok && err.contains("--resume"), "{err}");
}

/// Width and height from the header of a PNG file.
fn png_size(bytes: &[u8]) -> (u32, u32) {
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && &bytes[12..16] == b"IHDR");
    let be = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().unwrap());
    (be(16), be(20))
}

#[test]
fn ono_learns_darcy_and_writes_curves_panels_eval_and_predict() {
    let dir = temp_dir("darcy");
    let data = dir.join("darcy.safetensors");
    let out = ono()
        .args([
            "data",
            "darcy",
            "--n-train",
            "120",
            "--n-test",
            "24",
            "--res",
            "33",
            "--stride",
            "2",
            "--seed",
            "3",
            "--out",
        ])
        .arg(&data)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ds = TensorDataset::read(&data).unwrap();
    let baseline = mean_field_error(&ds);

    let text = format!(
        r#"
seed = 0
epochs = 30
batch_size = 4
threads = 1
output_dir = "run"

[model]
preset = "darcy"
[model.overrides]
n_layers = 3
n_hidden = 32
n_head = 4
psi_dim = 8
nn_block = "linear_transformer"

[data]
path = "{}"
normalize_x = "unit"
# FNO's pointwise normalizer: decode(0) is the mean field, so the model starts at the baseline
# and the short run is spent on the sample-dependent part.
normalize_y = "gaussian"

[loss]
derivative_alpha = 0.1

[optimizer]
lr = 0.005
"#,
        data.display()
    );
    let cfg = dir.join("darcy.toml");
    std::fs::write(&cfg, text).unwrap();
    let out = ono().arg("train").arg(&cfg).output().unwrap();
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    // Not a terminal: plain progress lines.
    assert!(log.contains("epoch 30/30") && log.contains("it/s"), "{log}");
    let final_err = json::<Summary>(&out).final_test.unwrap();
    let lines: Vec<EpochRecord> = std::fs::read_to_string(dir.join("run/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 30);
    let first = lines[0].test_rel_l2.unwrap();
    eprintln!("mean-field baseline {baseline:.4}, epoch 1 {first:.4}, final {final_err:.4}");
    // Measured 2026-11-24: baseline 0.268, epoch 1 0.274, final 0.144 (seed 3, 17×17, 120 samples).
    // Thirty float32 epochs carry the kernels' last bits into the weights, so where the run ends
    // depends on the CPU's kernel paths (docs/results.md, "What reproduces means on another
    // machine"). Measured on an Intel AVX-512 machine: final 0.1399 on its own kernels, 0.1311 with
    // ATen held to AVX2, 0.1656 on the x86-64 baseline (0.62× the mean field and 0.60× epoch 1,
    // which failed a bar of 0.6). A run that does not learn stays near 1×; 0.75 clears the
    // kernel-path spread.
    const LEARNED: f64 = 0.75;
    assert!(
        final_err < LEARNED * baseline,
        "final {final_err} vs mean-field {baseline}"
    );
    assert!(
        final_err < LEARNED * first,
        "final {final_err} vs first epoch {first}"
    );
    // The figures of the last epoch: the curves, and `log.panels` (3 by default) test samples of
    // the 17 × 17 grid.
    let panels = ono_plot::field_panels_size(17, 17, 3).unwrap();
    for (png, size) in [
        ("run/curves.png", ono_plot::CURVES_SIZE),
        ("run/panels.png", panels),
    ] {
        let bytes = std::fs::read(dir.join(png)).unwrap();
        assert_eq!(png_size(&bytes), size, "{png}");
    }
    assert!(dir.join("run/checkpoints/best.safetensors").exists());

    // `ono eval` on the last checkpoint reproduces the final test error.
    let ckpt = dir.join("run/checkpoints/last.safetensors");
    let out = ono().arg("eval").arg(&ckpt).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = json::<Evaluation>(&out).test_rel_l2;
    assert!(
        (e - final_err).abs() < 1e-6 * final_err.max(1.0),
        "{e} vs {final_err}"
    );

    // Zero-shot super-resolution: the same checkpoint on a 33×33 set of the same process (its
    // pointwise target normalizer is interpolated onto the finer grid).
    let fine = dir.join("darcy33.safetensors");
    ok(&ono()
        .args([
            "data",
            "darcy",
            "--n-train",
            "4",
            "--n-test",
            "8",
            "--res",
            "33",
        ])
        .args(["--stride", "1", "--seed", "5", "--out"])
        .arg(&fine)
        .output()
        .unwrap());
    let out = ono()
        .arg("eval")
        .arg(&ckpt)
        .arg("--data")
        .arg(&fine)
        .output()
        .unwrap();
    ok(&out);
    let fine_err = json::<Evaluation>(&out).test_rel_l2;
    eprintln!("ONO at 33×33 without retraining: {fine_err:.4}");
    assert!(fine_err.is_finite() && fine_err < 1.0, "{fine_err}");

    // `ono predict` writes predictions of the inputs' shape; they score the same error.
    let pred = &predict_split(&ckpt, &ds.test, &dir);
    assert_eq!(pred.size(), ds.test.y.size());
    let b = pred.size()[0];
    let y = ds.test.y.to_kind(Kind::Float);
    let rel = ((pred - &y)
        .reshape([b, -1])
        .norm_scalaropt_dim(2, &[1i64][..], false)
        / y.reshape([b, -1]).norm_scalaropt_dim(2, &[1i64][..], false))
    .mean(Kind::Double)
    .double_value(&[]);
    assert!((rel - final_err).abs() < 1e-4, "{rel} vs {final_err}");
}

/// `ono bench-step --precision`: one JSON line naming the precision for each kind; an unknown
/// one is refused by name.
#[test]
fn bench_step_times_each_precision_and_refuses_an_unknown_one() {
    let tiny =
        "n_layers = 1\nn_hidden = 16\nn_head = 2\npsi_dim = 4\nnn_block = \"linear_transformer\"";
    let bench = |precision: &str| {
        bench_step_once(&["--preset", "darcy"])
            .args(["--overrides", tiny, "--precision", precision])
            .output()
            .unwrap()
    };
    for p in ["f32", "bf16", "f16"] {
        let out = bench(p);
        ok(&out);
        let v: StepReport = json(&out);
        assert_eq!(v.precision.name(), p, "{v:?}");
        assert!(v.median_s > 0.0, "{v:?}");
    }
    let out = bench("fp8");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--precision") && err.contains("fp8"),
        "{err}"
    );
}
