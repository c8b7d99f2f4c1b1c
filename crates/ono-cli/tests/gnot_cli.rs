//! GNOT through the `ono` binary: it learns a small generated Darcy set fed as GNOT takes the
//! standard benchmarks (the coefficient as its input function, rows (x, a(x))), with GNOT's own
//! recipe; and it trains, evaluates and resumes on a ragged multi-input-output pickle.

mod common;

use std::path::Path;

use ono_data::dataset::TensorDataset;
use ono_train::evaluate::Evaluation;
use ono_train::Summary;

use common::{
    assert_same_checkpoints, generated_darcy, json, mean_field_error, mean_rel_l2, ok, ono,
    temp_dir, train_then_kill,
};
use tch::Tensor;

/// GNOT's training settings (`train.py` with the README's command): AdamW, weight decay 5e-5,
/// OneCycle with div factors 1e4 and pct_start 0.2, clipping at 1000, the per-channel relative L2
/// on normalized targets, unit normalizers.
const GNOT_RECIPE: &str = r#"
[loss]
kind = "gnot"

[optimizer]
lr = 0.003
weight_decay = 5e-5
max_grad_norm = 1000

[schedule]
pct_start = 0.2
div_factor = 1e4
final_div_factor = 1e4
"#;

#[test]
fn gnot_learns_darcy_from_its_input_function() {
    let dir = temp_dir("gnot-darcy");
    let data = generated_darcy(&dir, "darcy17.safetensors", "120", "24", "2", "3");
    let baseline = mean_field_error(&TensorDataset::read(&data).unwrap());
    let cfg = dir.join("gnot.toml");
    std::fs::write(
        &cfg,
        format!(
            r#"
seed = 2023
epochs = 24
batch_size = 4
threads = 1
output_dir = "run"

[model]
arch = "gnot"
preset = "gnot"
[model.overrides]
n_hidden = 32
n_head = 2
n_layers = 2
n_experts = 2

[data]
path = "{}"
fx_as_function = true
normalize_pos = "unit"
normalize_y = "unit"
{GNOT_RECIPE}"#,
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
    let err = json::<Summary>(&out).final_test.unwrap();
    eprintln!("GNOT Darcy 17×17: final {err:.4}, mean field {baseline:.4}");
    assert!(
        err < 0.5 * baseline,
        "{err} against the mean field's {baseline}"
    );
}

/// The reference's own data format end to end: `ono train` reads the pickle natively (ragged
/// samples, θ, two input functions), a run killed with SIGKILL after a checkpoint and resumed ends
/// bit-identical to an uninterrupted one, and `ono eval` reproduces the run's test error.
#[test]
fn gnot_trains_resumes_and_evaluates_on_a_ragged_pickle() {
    let dir = temp_dir("gnot-pickle");
    let pkl = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/gnot/mio_small.pkl");
    let config = |name: &str| {
        let cfg = dir.join(format!("{name}.toml"));
        std::fs::write(
            &cfg,
            format!(
                r#"
seed = 2023
epochs = 200
batch_size = 2
threads = 1
output_dir = "{name}"

[model]
arch = "gnot"
preset = "gnot"
[model.overrides]
n_hidden = 8
n_head = 2
n_layers = 1
n_experts = 2

[data]
point_clouds = {{ train = "{pkl}", test = "{pkl}" }}
normalize_pos = "unit"
normalize_y = "unit"
normalize_theta = "unit"
batch_order = "fixed_chunks"

[checkpoint]
every_steps = 1
{GNOT_RECIPE}"#,
                pkl = pkl.display()
            ),
        )
        .unwrap();
        cfg
    };
    let a = config("a");
    let out = ono().arg("train").arg(&a).arg("--quiet").output().unwrap();
    ok(&out);
    let summary: Summary = json(&out);
    let final_err = summary.final_test.unwrap();
    assert!(final_err.is_finite() && final_err > 0.0);

    let b = config("b");
    train_then_kill(&b, &dir.join("b/checkpoints/last.json"), |v| v.epoch >= 2);
    let out = ono().arg("train").arg(&b).arg("--resume").output().unwrap();
    ok(&out);
    let resumed: Summary = json(&out);
    assert_eq!(resumed.steps, summary.steps);
    let at = resumed.resumed_at;
    assert!(at > 0 && at < summary.steps, "{resumed:?}");
    assert_same_checkpoints(
        &dir.join("a/checkpoints/last.safetensors"),
        &dir.join("b/checkpoints/last.safetensors"),
    );

    // Unmasked, as the reference, a sample's output depends on the samples padded with it: the
    // run's own batches (size 2) give its number back, and others give another.
    let ckpt = dir.join("a/checkpoints/last.safetensors");
    let eval = |batch: &str| {
        let out = ono()
            .arg("eval")
            .arg(&ckpt)
            .args(["--batch", batch])
            .output()
            .unwrap();
        ok(&out);
        json::<Evaluation>(&out).test_rel_l2
    };
    let again = eval("2");
    assert!(
        (again - final_err).abs() < 1e-5 * final_err,
        "{again} vs {final_err}"
    );
    // `ono predict` on the raw samples (lengths, θ, two input functions) in the run's batches
    // gives the evaluation's number back.
    let split = ono_data::gnot::read_gnot(&pkl).unwrap().to_split().unwrap();
    let input = dir.join("input.safetensors");
    let mut arrays = vec![
        ("fx".to_string(), split.fx.shallow_clone()),
        ("pos".to_string(), split.pos.shallow_clone()),
        (
            "theta".to_string(),
            split.theta.as_ref().unwrap().shallow_clone(),
        ),
        (
            "lengths".to_string(),
            Tensor::from_slice(split.lengths.as_ref().unwrap()),
        ),
    ];
    for (j, f) in split.functions.iter().enumerate() {
        arrays.push((format!("f{j}"), f.values.shallow_clone()));
        if let Some(l) = &f.lengths {
            arrays.push((format!("f{j}.lengths"), Tensor::from_slice(l)));
        }
    }
    ono_data::dataset::write_tensors_atomic(&input, &arrays).unwrap();
    let output = dir.join("pred.safetensors");
    ok(&ono()
        .arg("predict")
        .arg(&ckpt)
        .arg("--input")
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .args(["--batch", "2"])
        .output()
        .unwrap());
    let pred = Tensor::read_safetensors(&output).unwrap().remove(0).1;
    let lengths = split.lengths.as_ref().unwrap();
    let per: f64 = lengths
        .iter()
        .enumerate()
        .map(|(s, &l)| {
            let s = s as i64;
            mean_rel_l2(
                &pred.narrow(0, s, 1).narrow(1, 0, l),
                &split.y.narrow(0, s, 1).narrow(1, 0, l),
            )
        })
        .sum::<f64>()
        / lengths.len() as f64;
    assert!(
        (per - final_err).abs() < 1e-5 * final_err,
        "predict {per} vs {final_err}"
    );
    let whole = eval("3");
    assert!(
        (whole - final_err).abs() > 1e-4 * final_err,
        "{whole} vs {final_err}"
    );
}
