//! `ono reproduce --plan-only --measure`: FNO's paper-size Darcy and NS2d experiments (Table 1)
//! are built at their real size, trained a few batches on files of the published shapes, and
//! budgeted; the figures that follow from the published sizes are checked against them.

mod common;

use std::path::Path;

use common::{ok, ono, temp_dir};
use ono_cli::reproduce::budget::{Budget, Estimate, Measurement, MemorySource};
use ono_train::RunFolder;

/// FNO's Table 1 experiments of the paper plan, measured into `out`.
fn measure(out: &Path) -> std::process::Output {
    ono()
        .args(["reproduce", "--profile", "paper", "--only", "table1"])
        .args(["--models", "fno", "--plan-only", "--measure"])
        .args(["--threads", "2", "--out"])
        .arg(out)
        .output()
        .unwrap()
}

/// The call's `budget.json`.
fn budget(out: &Path) -> Budget {
    serde_json::from_str(&std::fs::read_to_string(out.join("budget.json")).unwrap()).unwrap()
}

#[test]
fn measure_budgets_paper_size_experiments() {
    let out = temp_dir("budget");
    let run = measure(&out);
    ok(&run);
    let stdout = String::from_utf8_lossy(&run.stdout);
    let b = budget(&out);
    assert_eq!(
        (b.device.as_str(), b.memory),
        ("cpu", MemorySource::CpuPeakRss)
    );
    let ids: Vec<&str> = b.experiments.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["ns2d/fno", "darcy/fno"]);
    let mib = (1u64 << 20) as f64;
    let measured: Vec<(&str, &Estimate)> = b
        .experiments
        .iter()
        .map(|r| match &r.status {
            Measurement::Measured(m) => (r.id.as_str(), m),
            other => panic!("{}: {other:?}", r.id),
        })
        .collect();
    for &(id, r) in &measured {
        // The paper's recipe: batch 20, 1000 training samples, 500 epochs.
        assert_eq!(
            (r.batch, r.batches_per_epoch, r.epochs),
            (20, 50, 500),
            "{r:?}"
        );
        assert_eq!(r.steps_per_batch, 1);
        assert!(
            r.s_per_batch > 0.0 && r.peak_mb.is_some_and(|p| p > 0.0),
            "{r:?}"
        );
        let hours = r.s_per_batch * 50.0 * 500.0 / 3600.0;
        assert!((r.hours - hours).abs() <= 1e-9 * hours, "{r:?}");
        // FNO-2D at width 20 (32 on NS2d), 12 modes: the model the reference builds.
        assert!(r.params > 900_000, "{r:?}");
        assert!(stdout.contains(&format!("| {id} | fno |")), "{stdout}");
        assert!(RunFolder::new(out.join(id)).measure_file().is_file());
    }
    // The data the trainer keeps on the device, from the published sizes: NS2d's 1000 + 200
    // samples of 64² points × (10 input + 10 target frames) in float32 and the positions (one
    // 64² × 2 table per split); Darcy's (FNO's layout: 1000 + 100 samples) 85² points × (1
    // input + 1 target channel).
    let expect = [
        (1200.0 * 4096.0 * 20.0 * 4.0 + 2.0 * 4096.0 * 2.0 * 4.0) / mib,
        (1100.0 * 7225.0 * 2.0 * 4.0 + 2.0 * 7225.0 * 2.0 * 4.0) / mib,
    ];
    for (&(id, r), want) in measured.iter().zip(expect) {
        assert!(
            (r.data_mb - want).abs() < 1e-6,
            "{id}: {} MB, want {want}",
            r.data_mb
        );
    }
    let total: f64 = measured.iter().map(|(_, r)| r.hours).sum();
    assert!((b.total_hours - total).abs() <= 1e-9 * total);
    let md = std::fs::read_to_string(out.join("budget.md")).unwrap();
    assert!(md.contains("**Total:") && md.contains("darcy/fno"), "{md}");
    // A second call keeps what the first measured (the files are unchanged) and writes the
    // same budget.
    let again = measure(&out);
    let log = ok(&again);
    assert_eq!(
        log.matches("(measured by an earlier call)").count(),
        2,
        "{log}"
    );
    let seconds = |b: &Budget| {
        b.experiments
            .iter()
            .map(|r| match &r.status {
                Measurement::Measured(m) => m.s_per_batch,
                _ => f64::NAN,
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(seconds(&b), seconds(&budget(&out)));
    // The measure step trains nothing: no checkpoint anywhere.
    for r in &b.experiments {
        let folder = RunFolder::new(out.join(&r.id));
        assert!(!folder.checkpoints().exists());
        assert!(!folder.measure().checkpoints().exists());
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// The reduced profiles' data are not the published shapes: `--measure` refuses them by name,
/// before anything is written.
#[test]
fn measure_is_for_the_paper_profile() {
    let out = temp_dir("budget-quick");
    let run = ono()
        .args([
            "reproduce",
            "--profile",
            "quick",
            "--plan-only",
            "--measure",
            "--out",
        ])
        .arg(out.join("q"))
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(2),
        "an error, not a failed experiment"
    );
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(err.contains("--measure budgets the paper profile"), "{err}");
    assert!(!out.join("q").exists());
    let _ = std::fs::remove_dir_all(&out);
}
