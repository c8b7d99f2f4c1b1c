//! Our training loop against the PyTorch reference loop (`benches/pytorch/train_ref.py`), one tiny
//! run per family: `ono train --handoff` trains and hands the resolved run, its data and its
//! initial weights over; the reference loop trains the restated reference network from those
//! weights with torch.optim, torch's schedulers and the scripts' normalizers and losses. Each
//! epoch is one batch, so the two runs see the same samples in every step and, in float64, must
//! agree to rounding: every epoch's training loss and test error. A run handed over with another
//! learning rate must not agree, so the comparison can fail.
//!
//! Needs the Python that `cargo xtask test` names in `ONO_REFERENCE_PYTHON` (its venv, with the
//! restatements' pinned packages); without it the tests say so and pass.

mod common;

use std::path::{Path, PathBuf};

use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::checkpoint::EpochRecord;
use ono_train::handoff::{Handoff, ReferenceResult};

use common::{generated_darcy, ok, ono, temp_dir};

/// Relative disagreement allowed per epoch. The runs are in float64: in float32 the rounding
/// noise of gradients near zero decides the sign of Adam's first, normalised step for those
/// parameters, and U-FNO's BatchNormed U-Net parted by 2% within three steps.
const TOL: f64 = 1e-6;

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("ONO_REFERENCE_PYTHON").map(PathBuf::from);
    if p.is_none() {
        eprintln!("skipped: ONO_REFERENCE_PYTHON is unset (`cargo xtask test` sets it)");
    }
    p
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../benches/pytorch/train_ref.py")
}

/// Trains `toml` (its `output_dir` is `run`) with a hand-off to `dir/handoff`; our epochs.
fn ours(dir: &Path, toml: &str) -> Vec<EpochRecord> {
    let cfg = dir.join("experiment.toml");
    std::fs::write(&cfg, toml).unwrap();
    ok(&ono()
        .arg("train")
        .arg(&cfg)
        .arg("--quiet")
        .arg("--handoff")
        .arg(dir.join("handoff"))
        .output()
        .unwrap());
    our_epochs(dir)
}

/// The epochs of our run in `dir/run`.
fn our_epochs(dir: &Path) -> Vec<EpochRecord> {
    std::fs::read_to_string(dir.join("run/metrics.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The reference loop on the hand-off in `handoff`, from our initial weights.
fn reference(python: &Path, handoff: &Path) -> ReferenceResult {
    ok(&std::process::Command::new(python)
        .arg(script())
        .arg(handoff)
        .args(["--init", "ours", "--threads", "1", "--quiet"])
        .output()
        .unwrap());
    ReferenceResult::read(handoff).unwrap()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(1e-12)
}

/// The largest relative disagreement over the epochs' training losses, test errors and learning
/// rates.
fn disagreement(ours: &[EpochRecord], theirs: &ReferenceResult) -> f64 {
    assert_eq!(ours.len(), theirs.history.len());
    ours.iter()
        .zip(&theirs.history)
        .map(|(a, b)| {
            let test = match (a.test_rel_l2, b.test_rel_l2) {
                (Some(x), Some(y)) => rel(x, y),
                (x, y) => panic!("epoch {}: test errors {x:?} and {y:?}", a.epoch),
            };
            rel(a.train_loss, b.train_loss)
                .max(test)
                .max(rel(a.lr, b.lr))
        })
        .fold(0.0, f64::max)
}

/// Runs `toml` through both loops and checks they agree; returns the hand-off folder.
fn agree(name: &str, python: &Path, toml: &str, dir: &Path) -> PathBuf {
    let run = dir.join(name);
    std::fs::create_dir_all(&run).unwrap();
    let mine = ours(&run, toml);
    let handoff = run.join("handoff");
    let theirs = reference(python, &handoff);
    let worst = disagreement(&mine, &theirs);
    eprintln!(
        "{name}: ours {:.6e}, reference {:.6e}, worst epoch disagreement {worst:.2e}",
        mine.last().and_then(|r| r.test_rel_l2).unwrap(),
        theirs.test_rel_l2
    );
    assert!(
        worst <= TOL,
        "{name}: the loops disagree by {worst:.2e} (> {TOL:e}): ours {mine:?}, reference {:?}",
        theirs.history
    );
    assert!(mine.last().unwrap().test_rel_l2.unwrap() > 0.0);
    handoff
}

/// 8 + 4 generated Darcy samples at 9 × 9, one batch of 8 per epoch.
fn darcy_experiment(dir: &Path, model: &str, recipe: &str) -> String {
    let data = dir.join("darcy9.safetensors");
    if !data.exists() {
        generated_darcy(dir, "darcy9.safetensors", "8", "4", "4", "5");
    }
    format!(
        r#"
seed = 3
epochs = 3
batch_size = 8
threads = 1
double = true
output_dir = "run"

[model]
{model}

[data]
path = "{}"
{recipe}
"#,
        data.display()
    )
}

/// FNO's recipe (Adam with L2 weight decay, StepLR, Gaussian normalizers, no clipping) and ONO's
/// (AdamW, OneCycle, clipping, unit normalizers, the derivative loss).
const FNO_RECIPE: &str = r#"normalize_x = "gaussian"
normalize_y = "gaussian"
[optimizer]
kind = "adam"
lr = 0.01
weight_decay = 1e-4
max_grad_norm = 0
[schedule]
kind = "step"
step_size = 2
gamma = 0.5
"#;

const ONO_RECIPE: &str = r#"normalize_x = "unit"
normalize_y = "unit"
[loss]
derivative_alpha = 0.1
[optimizer]
lr = 0.01
max_grad_norm = 0.1
"#;

/// NSL's scripts: AdamW, OneCycle, clipping; here plain normalizers and a cosine schedule.
const NSL_RECIPE: &str = r#"normalize_x = "unit"
normalize_y = "unit"
[optimizer]
lr = 0.005
weight_decay = 1e-5
max_grad_norm = 0.1
[schedule]
kind = "cosine"
"#;

#[test]
fn fno2d_and_ono_on_darcy_agree_with_the_reference_loop_and_a_changed_run_does_not() {
    let Some(py) = python() else { return };
    let dir = temp_dir("ref-loop-darcy");
    let fno = darcy_experiment(
        &dir,
        "arch = \"fno2d\"\npreset = \"darcy\"\n[model.overrides]\nmodes = [3, 3]\nwidth = 8",
        FNO_RECIPE,
    );
    let handoff = agree("fno2d", &py, &fno, &dir);
    let ono_toml = darcy_experiment(
        &dir,
        "arch = \"ono\"\npreset = \"darcy\"\n[model.overrides]\nn_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4\nlandmarks = 8",
        ONO_RECIPE,
    );
    agree("ono", &py, &ono_toml, &dir);

    // The same FNO hand-off at 1.5 times the learning rate: the comparison notices.
    let mut spec = Handoff::read(&handoff).unwrap();
    spec.optimizer.lr *= 1.5;
    std::fs::write(
        handoff.join(ono_train::handoff::SPEC_FILE),
        serde_json::to_string(&spec).unwrap(),
    )
    .unwrap();
    let changed = reference(&py, &handoff);
    let worst = disagreement(&our_epochs(&dir.join("fno2d")), &changed);
    assert!(
        worst > 10.0 * TOL,
        "a changed recipe still agrees: {worst:.2e}"
    );
}

#[test]
fn nsl_families_on_darcy_agree_with_the_reference_loop() {
    let Some(py) = python() else { return };
    let dir = temp_dir("ref-loop-nsl");
    for (arch, overrides) in [
        ("nsl_fno", "n_hidden = 8\nmodes = 3"),
        ("ffno", "n_hidden = 8\nmodes = 3\nn_layers = 2"),
        ("ufno", "n_hidden = 8\nmodes = 3"),
        ("lsm", "n_hidden = 8\nmodes = 3\nn_heads = 2"),
        (
            "transolver",
            "n_hidden = 8\nn_layers = 2\nn_heads = 2\nslice_num = 4",
        ),
    ] {
        let toml = darcy_experiment(
            &dir,
            &format!("arch = \"{arch}\"\npreset = \"darcy\"\n[model.overrides]\n{overrides}"),
            NSL_RECIPE,
        );
        agree(arch, &py, &toml, &dir);
    }
}

/// GNOT as the quick profile trains it (the input function on its own points, unit-normalized
/// positions, the relative L2) and with its own loss (per channel, on normalized values).
#[test]
fn gnot_on_darcy_agrees_with_the_reference_loop() {
    let Some(py) = python() else { return };
    let dir = temp_dir("ref-loop-gnot");
    for (name, loss) in [
        ("gnot-rel-l2", ""),
        ("gnot-own-loss", "[loss]\nkind = \"gnot\""),
    ] {
        let toml = darcy_experiment(
            &dir,
            "arch = \"gnot\"\npreset = \"gnot_e3\"\n[model.overrides]\nn_head = 2\nn_hidden = 16\nn_inner = 2\nn_layers = 1",
            &format!("fx_as_function = true\nnormalize_x = \"unit\"\nnormalize_y = \"unit\"\nnormalize_pos = \"unit\"\n{loss}\n[optimizer]\nlr = 0.005\n"),
        );
        agree(name, &py, &toml, &dir);
    }
}

/// The Galerkin Transformer as its Burgers script trains it: the H¹ loss on the targets'
/// derivatives (the Galerkin layout's aux channel), Adam, OneCycle with cycled momentum,
/// clipping, and the best epoch as the result.
#[test]
fn galerkin_on_burgers_agrees_with_the_reference_loop() {
    let Some(py) = python() else { return };
    let dir = temp_dir("ref-loop-galerkin");
    let m = miniature::write(Benchmark::Burgers, &dir.join("data")).unwrap();
    let toml = format!(
        r#"
seed = 2
epochs = 3
batch_size = {ntrain}
threads = 1
double = true
output_dir = "run"

[model]
arch = "galerkin"
preset = "burgers"
[model.overrides]
dim_feedforward = 16
fourier_modes = 3
n_head = 2
n_hidden = 8
num_encoder_layers = 2

[data]
benchmark = "burgers"
data_dir = "{data_dir}"
layout = "galerkin"
ntrain = {ntrain}
ntest = {ntest}

[optimizer]
kind = "adam"
lr = 0.005
weight_decay = 0.0
max_grad_norm = 0.999

[schedule]
kind = "one_cycle"
div_factor = 1e4
final_div_factor = 1e4
pct_start = 0.2

[checkpoint]
select_best = true
"#,
        ntrain = m.ntrain,
        ntest = m.ntest,
        data_dir = dir.join("data").display(),
    );
    let handoff = agree("galerkin-burgers", &py, &toml, &dir);
    let spec = Handoff::read(&handoff).unwrap();
    assert_eq!(spec.loss.kind, ono_train::config::LossKind::GalerkinH1);
    assert!(spec.loss.h1_gamma > 0.0 && spec.select_best);
}

#[test]
fn autoregressive_ns2d_agrees_with_the_reference_loop() {
    let Some(py) = python() else { return };
    let dir = temp_dir("ref-loop-ns2d");
    let m = miniature::write(Benchmark::Ns2d, &dir.join("data")).unwrap();
    for (name, model, data, loss) in [
        (
            "fno2d-teacher-forced",
            "arch = \"fno2d\"\npreset = \"ns2d\"\n[model.overrides]\nmodes = [3, 3]\nwidth = 8",
            "teacher_forcing = true",
            "",
        ),
        (
            "galerkin-teacher-forced",
            "arch = \"galerkin\"\npreset = \"burgers\"\n[model.overrides]\ndim_feedforward = 16\nfourier_modes = 3\nn_head = 2\nn_hidden = 8\nnum_encoder_layers = 2",
            "teacher_forcing = true",
            "",
        ),
        (
            "ono-free-cumulative",
            "arch = \"ono\"\npreset = \"ns2d\"\n[model.overrides]\nn_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4",
            "teacher_forcing = false",
            "[loss]\nrollout = \"cumulative\"",
        ),
    ] {
        let toml = format!(
            r#"
seed = 1
epochs = 3
batch_size = {ntrain}
threads = 1
double = true
output_dir = "run"

[model]
{model}

[data]
benchmark = "ns2d"
data_dir = "{data_dir}"
ntrain = {ntrain}
ntest = {ntest}
{data}

{loss}

[optimizer]
lr = 0.005
"#,
            ntrain = m.ntrain,
            ntest = m.ntest,
            data_dir = dir.join("data").display(),
        );
        agree(name, &py, &toml, &dir);
    }
}

/// Each restatement the reference loop trains reproduces its families' fixtures (outputs,
/// gradients, parameter counts) through the interface the loop uses.
#[test]
fn restatements_reproduce_their_fixtures() {
    let Some(py) = python() else { return };
    let dir = script().parent().unwrap().to_path_buf();
    for file in [
        "ref_fno.py",
        "ref_nsl.py",
        "ref_galerkin.py",
        "ref_gnot.py",
        "ono_step.py",
    ] {
        let out = std::process::Command::new(&py)
            .arg(dir.join(file))
            .arg("--check")
            .current_dir(&dir)
            .output()
            .unwrap();
        ok(&out);
    }
}
