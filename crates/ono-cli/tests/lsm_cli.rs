//! NSL's Latent Spectral Model through the `ono` binary with the recipe of NSL's Darcy script
//! (`scripts/StandardBench/darcy/LSM.sh`: Adam with weight decay 1e-4 as an L2 term, lr 5e-4,
//! StepLR halving, no clipping, pointwise Gaussian normalizers of the input function and the
//! target, the sum-reduced relative L2 on decoded values): it learns a small generated Darcy
//! set and evaluates from its checkpoint.

mod common;

use ono_data::dataset::TensorDataset;
use ono_train::evaluate::Evaluation;
use ono_train::Summary;

use common::{generated_darcy, json, mean_field_error, ok, ono, temp_dir};

/// NSL's Darcy LSM script's optimisation, its StepLR(100, 0.5) over 500 epochs scaled to this
/// run's 15: halved every 3 epochs.
const LSM_DARCY_RECIPE: &str = r#"
[optimizer]
kind = "adam"
lr = 5e-4
weight_decay = 1e-4
max_grad_norm = 0

[schedule]
kind = "step"
step_size = 3
gamma = 0.5
"#;

#[test]
fn lsm_learns_darcy() {
    let dir = temp_dir("lsm-darcy");
    let data = generated_darcy(&dir, "darcy17.safetensors", "120", "24", "2", "3");
    let ds = TensorDataset::read(&data).unwrap();
    assert_eq!(ds.grid.as_deref(), Some(&[17, 17][..]));
    let baseline = mean_field_error(&ds);
    let cfg = dir.join("lsm.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
seed = 0
epochs = 15
batch_size = 4
threads = 1
output_dir = "run"

[model]
arch = "lsm"
preset = "darcy"
[model.overrides]
n_hidden = 8
n_heads = 2

[data]
path = "{}"
normalize_x = "gaussian"
normalize_y = "gaussian"
{LSM_DARCY_RECIPE}
"#,
            data.display()
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let out = ono().arg("train").arg(&cfg).output().unwrap();
    ok(&out);
    let seconds = started.elapsed().as_secs_f64();
    let final_err = json::<Summary>(&out).final_test.unwrap();
    let out = ono()
        .arg("eval")
        .arg(dir.join("run/checkpoints/last.safetensors"))
        .output()
        .unwrap();
    ok(&out);
    let eval_err = json::<Evaluation>(&out).test_rel_l2;
    eprintln!(
        "LSM Darcy 17×17 (padded 32×32): mean-field baseline {baseline:.4}, final {final_err:.4}, \
         eval of the checkpoint {eval_err:.4}; training {seconds:.1} s"
    );
    assert!(
        final_err < 0.5 * baseline,
        "final {final_err} vs mean-field {baseline}"
    );
    assert!(
        (eval_err - final_err).abs() <= 1e-6 * final_err,
        "eval {eval_err} vs the run's final {final_err}"
    );
}
