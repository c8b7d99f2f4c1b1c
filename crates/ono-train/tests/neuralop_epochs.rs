//! ONO (ONO layout: Darcy's unit normalizers and derivative loss) and FNO (FNO layout: Darcy's
//! pointwise Gaussian normalizers) train one epoch on the miniature `neuralop_darcy`, tested at
//! the training resolution and at twice it. The two ways to a test set at another resolution
//! agree: a run whose experiment file sets `test_resolution` (its test error every epoch) and
//! `ono eval`'s path (`EvalData::Own { test_resolution }`) on the checkpoint of the same run
//! tested at the training resolution, whose own test error that path also gives back. Every
//! other architecture that trains on `darcy` trains on it too, tested at twice its resolution.

mod common;

use std::path::Path;

use common::{temp_dir, FieldsCheck};
use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::evaluate::{evaluate_checkpoint, EvalData};
use ono_train::progress::Progress;
use ono_train::{RunSpec, Summary, Trainer};
use tch::Device;

/// ONO, small, in the ONO layout.
const ONO: &str = r#"
[model]
preset = "darcy"
[model.overrides]
n_layers = 1
n_hidden = 16
n_head = 2
psi_dim = 4
nn_block = "linear_transformer"
"#;

/// FNO-2D, small.
const FNO: &str = r#"
[model]
arch = "fno2d"
preset = "darcy"
[model.overrides]
modes = [3, 3]
width = 6
"#;

/// The FNO scripts' optimisation (Adam with L2 decay, StepLR, no clipping).
const FNO_RECIPE: &str =
    "[optimizer]\nkind = \"adam\"\nweight_decay = 1e-4\nmax_grad_norm = 0\n\n[schedule]\nkind = \"step\"";

/// One epoch of `model` on the miniature files in `data`, tested at `test_resolution`.
fn one_epoch(
    dir: &Path,
    data: &Path,
    model: &str,
    layout: &str,
    test_resolution: Option<usize>,
    m: miniature::Miniature,
) -> Summary {
    let resolution = test_resolution.map_or(String::new(), |r| format!("test_resolution = {r}"));
    let text = format!(
        r#"
epochs = 1
batch_size = 2
threads = 1
output_dir = "{out}"
{model}
[data]
benchmark = "neuralop_darcy"
data_dir = "{data}"
layout = "{layout}"
ntrain = {ntrain}
ntest = {ntest}
{resolution}

[log]
panels = 1
"#,
        out = dir.display(),
        data = data.display(),
        ntrain = m.ntrain,
        ntest = m.ntest,
    );
    let cfg = TrainConfig::from_toml(&text).unwrap();
    let mut tr = RunSpec::resolve(cfg)
        .and_then(|run| Trainer::new(run, false))
        .unwrap_or_else(|e| panic!("{layout} {test_resolution:?}: {e}"));
    // The panels of the test samples come at the test grid (the observer checks their size).
    let check = FieldsCheck::default();
    tr.set_observer(check.clone());
    let s = tr
        .run(&Progress::Quiet)
        .unwrap_or_else(|e| panic!("{layout} {test_resolution:?}: {e}"));
    assert_eq!(s.steps, m.ntrain.div_ceil(2) as u64);
    assert_eq!(
        check.with_fields.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    s
}

fn assert_close(a: f64, b: f64, what: &str) {
    assert!(
        (a - b).abs() <= 1e-5 * b.abs(),
        "{what}: {a} vs {b} (relative {:e})",
        (a - b).abs() / b.abs()
    );
}

#[test]
fn ono_and_fno_train_at_16_and_test_at_32() {
    // Its two runs of a model must train alike (seeded from torch's global generator): no
    // other test may draw from that generator meanwhile.
    let _rng = ono_testing::torch_rng_lock();
    let dir = temp_dir("neuralop-darcy");
    let data = dir.join("data");
    let m = miniature::write(Benchmark::NeuralopDarcy, &data).unwrap();
    let fno = format!("{FNO}\n{FNO_RECIPE}\n");
    for (name, model, layout) in [("ono", ONO, "ono"), ("fno", fno.as_str(), "fno")] {
        let at16 = one_epoch(
            &dir.join(format!("{name}16")),
            &data,
            model,
            layout,
            None,
            m,
        );
        let at32 = one_epoch(
            &dir.join(format!("{name}32")),
            &data,
            model,
            layout,
            Some(32),
            m,
        );
        let (e16, e32) = (at16.final_test.unwrap(), at32.final_test.unwrap());
        assert!(e16.is_finite() && e16 > 0.0 && e32.is_finite() && e32 > 0.0);

        let eval = |test_resolution| {
            evaluate_checkpoint(
                &at16.result_checkpoint,
                &EvalData::Own {
                    r: None,
                    test_resolution,
                },
                Device::Cpu,
                3,
            )
            .unwrap()
        };
        let own = eval(None);
        assert_eq!((own.grid, own.samples), (Some(vec![8, 8]), m.ntest as i64));
        assert_close(own.test_rel_l2, e16, &format!("{name}: its own test set"));
        // The miniature's "32" file is 16²: the same weights, tested at twice the resolution.
        let zero_shot = eval(Some(32));
        assert_eq!(
            (zero_shot.grid, zero_shot.samples),
            (Some(vec![16, 16]), m.ntest as i64)
        );
        assert_close(
            zero_shot.test_rel_l2,
            e32,
            &format!("{name}: zero-shot at 32"),
        );
    }
    // A checkpoint of a dataset file has no benchmark to re-read at another resolution.
    let e = evaluate_checkpoint(
        &dir.join("nothing.safetensors"),
        &EvalData::Own {
            r: None,
            test_resolution: Some(32),
        },
        Device::Cpu,
        1,
    );
    assert!(e.is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every other architecture that trains on `darcy` trains on `neuralop_darcy` alike (the FNO
/// layout, small overrides as in tests/baseline_epochs.rs, transolver_epochs.rs and
/// lsm_epochs.rs), tested zero-shot at twice the training resolution.
#[test]
fn every_darcy_architecture_trains_at_16_and_tests_at_32() {
    let _rng = ono_testing::torch_rng_lock();
    let nsl = "[optimizer]\nmax_grad_norm = 0";
    let fno = FNO_RECIPE;
    let m = miniature::write(Benchmark::NeuralopDarcy, &temp_dir("count").join("d")).unwrap();
    for (arch, preset, overrides, data, recipe, batch) in [
        (
            "nsl_fno",
            "darcy",
            "n_hidden = 8\nmodes = 3",
            "",
            fno,
            Some(2),
        ),
        (
            "ffno",
            "darcy",
            "n_hidden = 8\nmodes = 3\nn_layers = 2",
            "",
            fno,
            Some(2),
        ),
        // U-FNO's coarsest U-Net level is one cell on the miniature: the whole split per batch.
        (
            "ufno",
            "darcy",
            "n_hidden = 2\nmodes = 3",
            "",
            fno,
            Some(m.ntrain),
        ),
        (
            "transolver",
            "darcy",
            "n_hidden = 8\nn_heads = 2\nn_layers = 2\nmlp_ratio = 1\nslice_num = 4",
            "",
            nsl,
            Some(2),
        ),
        ("lsm", "darcy", "", "", nsl, None),
        (
            "gnot",
            "gnot",
            "n_hidden = 8\nn_head = 2\nn_layers = 1\nn_experts = 2\nmlp_layers = 1",
            "fx_as_function = true\n",
            fno,
            Some(2),
        ),
    ] {
        let data = format!("{data}test_resolution = 32");
        common::one_epoch(&common::Epoch {
            arch,
            preset,
            overrides,
            benchmark: Benchmark::NeuralopDarcy,
            data: &data,
            recipe,
            batch,
        });
    }
}
