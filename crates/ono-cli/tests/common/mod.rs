//! What the `ono` binary's tests share: the binary, scratch folders, checkpoint contents, the
//! mean-field baseline.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use ono_data::dataset::{Split, TensorDataset};
use ono_train::checkpoint::{Checkpoint, TrainState};
use serde::de::DeserializeOwned;
use tch::{Kind, Tensor};

/// The `ono` binary with one OpenMP thread.
pub fn ono() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_ono"));
    c.env("OMP_NUM_THREADS", "1");
    c
}

/// `ono bench-step` timing one step (no warm-up) of batch 1 at the super-resolution shapes
/// on one thread (a second or so for a tiny model), with `args` after.
pub fn bench_step_once(args: &[&str]) -> Command {
    let mut c = ono();
    c.args(["bench-step", "--shapes", "super_resolution"])
        .args(["--batch", "1", "--steps", "1", "--warmup", "0"])
        .args(["--threads", "1"])
        .args(args);
    c
}

/// Asserts the command succeeded (printing its stderr and stdout if not); returns its stderr.
pub fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(
        out.status.success(),
        "{err}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    err
}

/// The command's stdout as the JSON of a `T` (`ono train`'s [`ono_train::Summary`], `ono eval`'s
/// [`ono_train::evaluate::Evaluation`], ...).
pub fn json<T: DeserializeOwned>(out: &Output) -> T {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e} in the output:\n{}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A fresh scratch folder for one test.
pub fn temp_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-cli-{name}"))
}

/// `ono data darcy` into `dir/name`: a generated Darcy set solved on 33×33 cell centres, every
/// `stride`-th cell kept, `n_test` test samples; returns its path.
pub fn generated_darcy(
    dir: &Path,
    name: &str,
    n_train: &str,
    n_test: &str,
    stride: &str,
    seed: &str,
) -> PathBuf {
    let data = dir.join(name);
    ok(&ono()
        .args(["data", "darcy", "--n-train", n_train, "--n-test", n_test])
        .args(["--res", "33", "--stride", stride, "--seed", seed, "--out"])
        .arg(&data)
        .output()
        .unwrap());
    data
}

/// A JSON file as a `T`, or `None` while it is missing or half-written.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Option<T> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The model, optimizer (and float16 loss-scaler) tensors of a checkpoint, by name, as f64
/// values.
pub fn model_and_optimizer(path: &Path) -> Vec<(String, Vec<f64>)> {
    let c = Checkpoint::load(path).unwrap();
    c.tensors
        .iter()
        .filter(|(k, _)| {
            ["model.", "optim.", "scaler."]
                .iter()
                .any(|p| k.starts_with(p))
        })
        .map(|(k, v)| {
            (
                k.clone(),
                Vec::<f64>::try_from(v.to_kind(Kind::Double).reshape([-1])).unwrap(),
            )
        })
        .collect()
}

/// Asserts that two runs' last checkpoints hold bit-identical model and optimizer tensors (a
/// resumed run against an uninterrupted one).
pub fn assert_same_checkpoints(a: &Path, b: &Path) {
    let (ma, mb) = (model_and_optimizer(a), model_and_optimizer(b));
    assert!(!ma.is_empty());
    assert_eq!(ma.len(), mb.len());
    for ((ka, va), (kb, vb)) in ma.iter().zip(&mb) {
        assert_eq!(ka, kb);
        assert!(va == vb, "{ka} differs after resume");
    }
}

/// Mean over samples of the relative L2 error of `pred` against `y`, in f64 (an oracle
/// independent of the library's own).
pub fn mean_rel_l2(pred: &Tensor, y: &Tensor) -> f64 {
    let b = y.size()[0];
    let (pred, y) = (pred.to_kind(Kind::Double), y.to_kind(Kind::Double));
    let num = (&pred - &y)
        .reshape([b, -1])
        .norm_scalaropt_dim(2, &[1i64][..], false);
    let den = y.reshape([b, -1]).norm_scalaropt_dim(2, &[1i64][..], false);
    (num / den).mean(Kind::Double).double_value(&[])
}

/// Mean relative L2 of predicting the training mean field for every test sample: a bar an
/// untrained model does not clear.
pub fn mean_field_error(ds: &TensorDataset) -> f64 {
    ono_train::evaluate::mean_field_error(ds).unwrap()
}

/// Starts `ono train CONFIG --quiet`, waits until the checkpoint sidecar `sidecar` (a
/// [`TrainState`]) exists and satisfies `ready`, then kills the run with SIGKILL.
pub fn train_then_kill(config: &Path, sidecar: &Path, ready: impl Fn(&TrainState) -> bool) {
    let mut child = ono()
        .arg("train")
        .arg(config)
        .arg("--quiet")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !read_json::<TrainState>(sidecar).is_some_and(|v| ready(&v)) {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "no checkpoint appeared"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    child.kill().unwrap(); // SIGKILL on Unix
    child.wait().unwrap();
}

/// `ono predict CHECKPOINT --input INPUT` into `dir/pred.safetensors`; the `pred` it wrote.
pub fn predict_file(checkpoint: &Path, input: &Path, dir: &Path) -> Tensor {
    let output = dir.join("pred.safetensors");
    let out = ono()
        .arg("predict")
        .arg(checkpoint)
        .arg("--input")
        .arg(input)
        .arg("--output")
        .arg(&output)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Tensor::read_safetensors(&output).unwrap()[0]
        .1
        .shallow_clone()
}

/// [`predict_file`] on the inputs (`fx`, `pos`) of a split, written to `dir/input.safetensors`.
pub fn predict_split(checkpoint: &Path, split: &Split, dir: &Path) -> Tensor {
    let input = dir.join("input.safetensors");
    ono_data::dataset::write_tensors_atomic(
        &input,
        &[
            ("fx".into(), split.fx.shallow_clone()),
            ("pos".into(), split.pos.shallow_clone()),
        ],
    )
    .unwrap();
    predict_file(checkpoint, &input, dir)
}

/// A miniature of the neuraloperator Darcy files (`ono data miniature`) in `dir/neuralop`.
pub fn neuralop_miniature(dir: &Path) -> PathBuf {
    let out = dir.join("neuralop");
    ok(&ono()
        .args(["data", "miniature", "neuralop_darcy", "--out"])
        .arg(&out)
        .output()
        .unwrap());
    out
}

/// A rehearsal: `ono reproduce <paper_args> --rehearse --threads 2 --out <out>` must succeed
/// with every experiment done, each with a finite test error, or a positive step time where
/// `timed` says its id is a timed one. Returns the summary and the call's stderr.
pub fn rehearse(
    paper_args: &[&str],
    out: &Path,
    timed: impl Fn(&str) -> bool,
) -> (serde_json::Value, String) {
    let log = ok(&ono()
        .args(["reproduce"])
        .args(paper_args)
        .args(["--rehearse", "--threads", "2", "--out"])
        .arg(out)
        .output()
        .unwrap());
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let experiments = s["experiments"].as_array().unwrap();
    let not_done: Vec<String> = experiments
        .iter()
        .filter(|e| e["status"] != "done")
        .map(|e| format!("{}: {} {}", e["id"], e["status"], e["detail"]))
        .collect();
    assert!(not_done.is_empty(), "{}\n{log}", not_done.join("\n"));
    for e in experiments {
        let id = e["id"].as_str().unwrap();
        if timed(id) {
            assert!(e["step_s"].as_f64().is_some_and(|t| t > 0.0), "{id}");
        } else {
            let err = e["test_rel_l2"].as_f64().unwrap_or(f64::NAN);
            assert!(err.is_finite(), "{id}: test error {err}");
        }
    }
    (s, log)
}

/// The `summary.json` of an `ono reproduce` call into `out`.
pub fn reproduce_summary(out: &Path) -> ono_cli::reproduce::report::Results {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// Asserts that a reproduce summary judges a claim containing each of `needles` (the verdicts
/// are not checked: a smoke profile's models learn nothing, and that each claim is there is the
/// point).
pub fn assert_claims(s: &ono_cli::reproduce::report::Results, needles: &[&str]) {
    let claims: Vec<&str> = s.findings.iter().map(|f| f.statement.as_str()).collect();
    for needle in needles {
        assert!(
            claims.iter().any(|c| c.contains(needle)),
            "{needle}: {claims:#?}"
        );
    }
}
