//! Transolver through the `ono` binary with NSL's Darcy recipe (`scripts/StandardBench/darcy/
//! Transolver.sh` over `run.py`'s defaults): it learns a small generated Darcy set, `ono eval`
//! reproduces the run's test error from the checkpoint, and the unified position embedding lets
//! the same checkpoint run on a finer grid.

mod common;

use std::path::Path;

use ono_data::dataset::TensorDataset;
use ono_train::evaluate::Evaluation;
use ono_train::Summary;

use common::{generated_darcy, json, mean_field_error, ok, ono, temp_dir};

/// NSL's optimisation (AdamW, lr 1e-3, weight decay 1e-5, OneCycle per batch with pct_start 0.3
/// and PyTorch's div factors 25 and 1e4, no clipping) and the darcy script's data recipe
/// (`--normalize 1`: UnitTransformer on input and target, the loss on decoded values;
/// `--derivloss 1`: 0.1 × the finite-difference derivative loss).
const NSL_DARCY_RECIPE: &str = r#"
[loss]
derivative_alpha = 0.1

[optimizer]
kind = "adamw"
lr = 1e-3
weight_decay = 1e-5
max_grad_norm = 0

[schedule]
kind = "one_cycle"
pct_start = 0.3
div_factor = 25
final_div_factor = 1e4
"#;

fn eval(checkpoint: &Path, data: &Path) -> f64 {
    let out = ono()
        .arg("eval")
        .arg(checkpoint)
        .arg("--data")
        .arg(data)
        .output()
        .unwrap();
    ok(&out);
    json::<Evaluation>(&out).test_rel_l2
}

#[test]
fn transolver_learns_darcy_with_nsls_recipe() {
    let dir = temp_dir("transolver-darcy");
    let data = generated_darcy(&dir, "darcy17.safetensors", "120", "24", "2", "3");
    let ds = TensorDataset::read(&data).unwrap();
    assert_eq!(ds.grid.as_deref(), Some(&[17, 17][..]));
    let baseline = mean_field_error(&ds);
    let cfg = dir.join("transolver.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
seed = 0
epochs = 40
batch_size = 4
threads = 1
output_dir = "run"

[model]
arch = "transolver"
preset = "darcy"
[model.overrides]
n_hidden = 32
n_heads = 4
n_layers = 3
slice_num = 16

[data]
path = "{}"
normalize_x = "unit"
normalize_y = "unit"
{NSL_DARCY_RECIPE}"#,
            data.display()
        ),
    )
    .unwrap();
    let out = ono()
        .arg("train")
        .arg(&cfg)
        .arg("--quiet")
        .output()
        .unwrap();
    ok(&out);
    let final_err = json::<Summary>(&out).final_test.unwrap();
    let ckpt = dir.join("run/checkpoints/last.safetensors");
    let again = eval(&ckpt, &data);

    // The same process at 33×33: the unified positions are computed for the input's grid, the
    // 3×3 projections see neighbours half as far apart.
    let fine = generated_darcy(&dir, "darcy33.safetensors", "8", "24", "1", "5");
    let fine_ds = TensorDataset::read(&fine).unwrap();
    let fine_err = eval(&ckpt, &fine);
    let fine_baseline = mean_field_error(&fine_ds);
    eprintln!(
        "Transolver Darcy 17×17 (C 32, 4 heads, 3 layers, 16 slices, 40 epochs): final \
         {final_err:.4} against the mean field's {baseline:.4}; ono eval {again:.4}; at 33×33 \
         without retraining {fine_err:.4} (mean field of that set {fine_baseline:.4})"
    );
    assert!(
        final_err < 0.5 * baseline,
        "final {final_err} vs mean-field {baseline}"
    );
    assert!(
        (again - final_err).abs() <= 1e-6 * final_err,
        "{again} vs {final_err}"
    );
    assert!(
        fine_err.is_finite() && fine_err < fine_baseline,
        "33×33: {fine_err} vs its mean field {fine_baseline}"
    );
}
