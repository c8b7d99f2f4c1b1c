//! The Galerkin Transformer's three experiments (Cao 2021, §5) end to end through `ono`, at a
//! reduced size on data our own generators make, with the paper's recipe (Adam without decay,
//! OneCycle with div factors 1e4, clipping at 0.999, the H¹ losses, best-epoch selection):
//! Burgers trained at one resolution and evaluated at finer ones, the interface Darcy forward
//! problem, and the inverse problem with noise.

mod common;

use std::path::Path;

use common::{json, mean_field_error, mean_rel_l2, ok, ono, predict_file, temp_dir};
use ono_data::benchmarks::{self, Benchmark, Layout, LoadOptions};
use ono_train::evaluate::Evaluation;
use ono_train::Summary;
use tch::{Kind, Tensor};

/// Cao's training settings (ex1–ex3): only the rate and the warm-up fraction differ per run.
fn recipe(lr: f64, pct_start: f64) -> String {
    format!(
        r#"
[optimizer]
kind = "adam"
lr = {lr}
weight_decay = 0.0
max_grad_norm = 0.999

[schedule]
kind = "one_cycle"
pct_start = {pct_start}
div_factor = 1e4
final_div_factor = 1e4

[checkpoint]
select_best = true
"#
    )
}

/// `ono data gen KIND --n N --res RES --seed SEED --out data/FILE`.
fn generate(data: &Path, kind: &str, n: &str, res: &str, seed: &str, file: &str) {
    std::fs::create_dir_all(data).unwrap();
    let out = ono()
        .args(["data", "gen", kind, "--n", n, "--res", res, "--seed", seed])
        .arg("--out")
        .arg(data.join(file))
        .output()
        .unwrap();
    ok(&out);
}

fn load(b: Benchmark, data: &Path, opts: LoadOptions) -> ono_data::dataset::TensorDataset {
    benchmarks::load(b, data, &opts).unwrap().dataset
}

fn train(cfg: &Path, text: &str) -> Summary {
    std::fs::write(cfg, text).unwrap();
    let out = ono().arg("train").arg(cfg).arg("--quiet").output().unwrap();
    ok(&out);
    json(&out)
}

#[test]
fn galerkin_learns_burgers_and_evaluates_at_finer_resolutions() {
    let dir = temp_dir("galerkin-burgers");
    let data = dir.join("data");
    // 80 solutions at 1024 points; the Galerkin layout takes the first 64 and the last 16.
    generate(&data, "burgers", "80", "1024", "1", "burgers_data_R10.mat");
    let (ntrain, ntest) = (64, 16);
    let cfg = format!(
        r#"
seed = 1127802
epochs = 16
batch_size = 4
threads = 1
output_dir = "run"

[model]
arch = "galerkin"
preset = "burgers"
[model.overrides]
n_hidden = 32
num_encoder_layers = 2
dim_feedforward = 64
freq_dim = 16
fourier_modes = 12

[data]
benchmark = "burgers"
data_dir = "{}"
layout = "galerkin"
r = 8
ntrain = {ntrain}
ntest = {ntest}
{}"#,
        data.display(),
        recipe(3e-3, 0.2)
    );
    let summary = train(&dir.join("burgers.toml"), &cfg);
    let best = summary.final_test.unwrap();
    let ckpt = summary.result_checkpoint;
    assert!(ckpt.ends_with("best.safetensors"), "{}", ckpt.display());
    let mut line = format!("Galerkin Burgers (trained at 128 points): best epoch {best:.4}");
    for r in [8usize, 4, 2, 1] {
        let opts = LoadOptions {
            ntrain: Some(ntrain),
            ntest: Some(ntest),
            r: Some(r),
            layout: Layout::Galerkin,
            ..Default::default()
        };
        let baseline = mean_field_error(&load(Benchmark::Burgers, &data, opts));
        let out = ono()
            .arg("eval")
            .arg(&ckpt)
            .args(["--r", &r.to_string()])
            .output()
            .unwrap();
        ok(&out);
        let e: Evaluation = json(&out);
        let err = e.test_rel_l2;
        let n = e.grid.as_ref().unwrap()[0];
        assert_eq!(n, 1024 / r as i64);
        line += &format!("; at {n} points {err:.4} (mean field {baseline:.4})");
        assert!(
            err < 0.5 * baseline,
            "at {n} points: {err} against the mean field's {baseline}"
        );
        if r == 8 {
            // The training resolution reproduces the run's own best number (up to the float32
            // rounding of another evaluation batch size).
            assert!((err - best).abs() < 1e-5 * best, "{err} vs {best}");
        }
    }
    eprintln!("{line}");
}

/// The interface Darcy problem (ex2) on a 43×43 solver grid: fine grid 15 (r = 3), attention on
/// the coarse 8×8 grid of the scale-factor path (15 → 11 → 8, up 10 → 15), the H¹ loss γ = 0.5.
/// The inverse problem (ex3) on the same files: the noisy solution on the fine grid in, the
/// coefficient pooled to the coarse 8×8 grid out, at noise 0.01 and 0.1.
#[test]
fn galerkin_learns_darcy_and_inverts_it_with_noise() {
    let dir = temp_dir("galerkin-darcy");
    let data = dir.join("data");
    generate(
        &data,
        "darcy",
        "100",
        "43",
        "1",
        "piececonst_r421_N1024_smooth1.mat",
    );
    generate(
        &data,
        "darcy",
        "24",
        "43",
        "2",
        "piececonst_r421_N1024_smooth2.mat",
    );
    let (ntrain, ntest) = (100, 24);
    let model = r#"
n_hidden = 32
n_head = 2
num_encoder_layers = 2
dim_feedforward = 64"#;
    let cfg = format!(
        r#"
seed = 1127802
epochs = 20
batch_size = 4
threads = 1
output_dir = "forward"

[model]
arch = "galerkin"
preset = "darcy"
[model.overrides]{model}
freq_dim = 16
fourier_modes = 6
scaler_grids = {{ fine = 15, coarse = 8 }}

[data]
benchmark = "darcy"
data_dir = "{}"
layout = "galerkin"
r = 3
ntrain = {ntrain}
ntest = {ntest}
{}"#,
        data.display(),
        recipe(3e-3, 0.3)
    );
    let forward = train(&dir.join("forward.toml"), &cfg).final_test.unwrap();
    let opts = |layout| LoadOptions {
        ntrain: Some(ntrain),
        ntest: Some(ntest),
        r: Some(3),
        layout,
        coarse_r: Some(6),
        noise: Some(0.0),
        test_resolution: None,
    };
    let baseline = mean_field_error(&load(Benchmark::Darcy, &data, opts(Layout::Galerkin)));
    eprintln!("Galerkin Darcy 15/8: best epoch {forward:.4}, mean field {baseline:.4}");
    assert!(
        forward < 0.5 * baseline,
        "{forward} against the mean field's {baseline}"
    );

    // The coefficient's mean field does not depend on the input noise.
    let inv = load(Benchmark::DarcyInverse, &data, opts(Layout::Ono));
    let inv_baseline = mean_field_error(&inv);
    for noise in ["0.01", "0.1"] {
        let cfg = format!(
            r#"
seed = 1127802
epochs = 12
batch_size = 4
threads = 1
output_dir = "inverse{noise}"

[model]
arch = "galerkin"
preset = "darcy_inverse"
[model.overrides]{model}
scaler_grids = {{ fine = 15, coarse = 8, output = "coarse" }}

[data]
benchmark = "darcy_inverse"
data_dir = "{}"
r = 3
coarse_r = 6
noise = {noise}
ntrain = {ntrain}
ntest = {ntest}
{}"#,
            data.display(),
            recipe(3e-3, 0.3)
        );
        let s = train(&dir.join(format!("inverse{noise}.toml")), &cfg);
        let err = s.final_test.unwrap();
        eprintln!(
            "Galerkin inverse Darcy 15 → 8, noise {noise}: coefficient error {err:.4} (best epoch), mean field {inv_baseline:.4}"
        );
        assert!(
            err < 0.5 * inv_baseline,
            "noise {noise}: {err} against the mean field's {inv_baseline}"
        );
        if noise == "0.1" {
            // `ono predict` with the coarse query points gives the coefficient there, as the
            // evaluation did (the loader's inputs are already normalized and noisy).
            let noisy = load(
                Benchmark::DarcyInverse,
                &data,
                LoadOptions {
                    noise: Some(0.1),
                    ..opts(Layout::Ono)
                },
            );
            let input = dir.join("inverse_input.safetensors");
            let t = &noisy.test;
            ono_data::dataset::write_tensors_atomic(
                &input,
                &[
                    ("fx".into(), t.fx.shallow_clone()),
                    ("pos".into(), t.pos.shallow_clone()),
                    ("grid".into(), Tensor::from_slice(&[15i64, 15])),
                    ("query".into(), t.query.as_ref().unwrap().shallow_clone()),
                    ("query_grid".into(), Tensor::from_slice(&[8i64, 8])),
                ],
            )
            .unwrap();
            let pred = predict_file(&s.result_checkpoint, &input, &dir);
            assert_eq!(pred.size(), vec![ntest as i64, 64, 1]);
            let again = mean_rel_l2(&pred.to_kind(Kind::Double), &t.y);
            assert!((again - err).abs() < 1e-4, "{again} vs {err}");
        }
    }
}
