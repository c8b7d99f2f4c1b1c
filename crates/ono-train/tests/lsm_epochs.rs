//! NSL's Latent Spectral Model trains one epoch end to end through the loader of each of its six
//! StandardBench benchmarks, on the miniature files, in the FNO layout (as `nsl_fno`, `ffno` and
//! `ufno` in `baseline_epochs.rs`), with NSL's optimisation (AdamW, lr 1e-3, weight decay 1e-5,
//! OneCycle, no clipping).

mod common;

use common::{temp_dir, Epoch};
use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::progress::Progress;
use ono_train::{RunSpec, Trainer};

/// One epoch of the `preset` LSM with `overrides` on the miniature `b`, the whole training split
/// as one batch; returns the test error.
fn one_epoch(preset: &str, overrides: &str, b: Benchmark) -> f64 {
    let overrides = format!("n_hidden = 4\nn_heads = 2\n{overrides}");
    let (s, _) = common::one_epoch(&Epoch {
        arch: "lsm",
        preset,
        overrides: &overrides,
        benchmark: b,
        data: "",
        // The trainer's defaults are NSL's run.py's (AdamW, lr 1e-3, weight decay 1e-5,
        // OneCycle) but for the clipping.
        recipe: "[optimizer]\nmax_grad_norm = 0",
        batch: None,
    });
    s.final_test.unwrap()
}

/// The trainer's optimiser defaults are NSL's `run.py` defaults, which the epochs above rely on.
#[test]
fn the_trainer_defaults_are_nsl_run_defaults() {
    let cfg = TrainConfig::from_toml(
        "epochs = 1\nbatch_size = 1\noutput_dir = \"x\"\n[model]\narch = \"lsm\"\n[data]\nbenchmark = \"darcy\"\n",
    )
    .unwrap();
    assert_eq!(cfg.optimizer.lr, 1e-3, "NSL's run.py default");
    assert_eq!(cfg.optimizer.weight_decay, 1e-5, "NSL's run.py default");
}

/// The miniatures' grids are at most 16 per axis, so the padded latent grid is 16 × 16 and the
/// U-Net's coarsest level one cell: BatchNorm trains on it only with more than one sample per
/// batch (hence the whole split as one batch), and InstanceNorm cannot normalise it at all
/// (PyTorch refuses both, and so does the port). NS2d and Plasticity, whose scripts' tasks give
/// InstanceNorm, therefore run with BatchNorm here; their real 64 × 64 and 101 × 31 grids take
/// InstanceNorm. Elasticity's point cloud goes through a 16 × 16 latent grid.
#[test]
fn lsm_trains_one_epoch_on_every_standard_benchmark() {
    let batch_norm = "unet_norm = \"batch\"";
    for (preset, overrides, b) in [
        ("darcy", "", Benchmark::Darcy),
        ("ns", batch_norm, Benchmark::Ns2d),
        ("airfoil", "", Benchmark::Airfoil),
        ("pipe", "", Benchmark::Pipe),
        (
            "elasticity",
            "latent = [16, 16]\nmodes = 3",
            Benchmark::Elasticity,
        ),
        ("plasticity", batch_norm, Benchmark::Plasticity),
    ] {
        let err = one_epoch(preset, overrides, b);
        eprintln!("lsm {}: test error after one epoch {err:.4}", b.name());
    }
}

/// InstanceNorm (the time-dependent tasks' norm) on the miniatures' one-cell coarsest level is
/// refused with an error, not a panic.
#[test]
fn instance_norm_on_a_one_cell_level_is_an_error() {
    let dir = temp_dir("ns-instance");
    let m = miniature::write(Benchmark::Ns2d, &dir.join("data")).unwrap();
    let text = format!(
        "epochs = 1\nbatch_size = {}\nthreads = 1\noutput_dir = \"{}\"\n[model]\narch = \"lsm\"\npreset = \"ns\"\n[model.overrides]\nn_hidden = 4\nn_heads = 2\n[data]\nbenchmark = \"ns2d\"\ndata_dir = \"{}\"\nlayout = \"fno\"\nntrain = {}\nntest = {}\n",
        m.ntrain,
        dir.join("run").display(),
        dir.join("data").display(),
        m.ntrain,
        m.ntest
    );
    let cfg = TrainConfig::from_toml(&text).unwrap();
    let e = RunSpec::resolve(cfg)
        .and_then(|run| Trainer::new(run, false))
        .and_then(|mut tr| tr.run(&Progress::Quiet))
        .expect_err("InstanceNorm of one value per channel must fail")
        .to_string();
    assert!(e.contains("coarsest level"), "{e}");
}
