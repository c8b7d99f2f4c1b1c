//! Your own data, end to end, as docs/data.md walks through it: VTU files of different point
//! counts (`ono data darcy-vtu`), `ono data import`, `ono compare` of two point-cloud models for
//! one epoch, and `ono predict` back on the meshes (`--format vtu`) and as NumPy (`--format
//! npz`): the VTU files read back with the same crate hold exactly the NumPy prediction, and the
//! targets and points of the sample's own file.

mod common;

use std::path::Path;

use ono_data::readers::npy::read_npz;
use ono_data::readers::vtk::read_mesh;

use common::{json, ok, ono, temp_dir};
use ono_cli::compare::{Comparison, Entry, Granted, Timed};
use ono_cli::predict::Predictions;
use ono_cli::reproduce::execute::{Outcome, Status};
use ono_train::RunFolder;

/// `summary.json` of an `ono compare` output folder.
fn summary(out: &Path) -> Comparison {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The entry of `model` (its first seed).
fn entry<'a>(s: &'a Comparison, model: &str) -> &'a Entry {
    s.entries
        .iter()
        .find(|e| match e {
            Entry::Run { model: m, .. } | Entry::Refused { model: m, .. } => m == model,
        })
        .unwrap_or_else(|| panic!("no {model} in {s:?}"))
}

/// The outcome of a model that ran.
fn outcome<'a>(s: &'a Comparison, model: &str) -> &'a Outcome {
    match entry(s, model) {
        Entry::Run { outcome, .. } => outcome,
        other => panic!("{model} did not run: {other:?}"),
    }
}

/// Why a model was refused.
fn refusal<'a>(s: &'a Comparison, model: &str) -> &'a str {
    match entry(s, model) {
        Entry::Refused { why, .. } => why,
        other => panic!("{model} was not refused: {other:?}"),
    }
}

fn run(args: &[&str]) -> String {
    ok(&ono().args(args).output().unwrap())
}

#[test]
fn vtu_files_import_compare_and_predict_back_on_their_meshes() {
    let dir = temp_dir("own-data");
    let p = |s: &str| dir.join(s).display().to_string();
    run(&[
        "data",
        "darcy-vtu",
        "--n",
        "10",
        "--res",
        "17",
        "--min-points",
        "40",
        "--max-points",
        "70",
        "--out",
        &p("meshes"),
    ]);
    run(&[
        "data",
        "import",
        &p("meshes"),
        "--out",
        &p("set.safetensors"),
    ]);
    // `ono data info` describes the file it wrote.
    let out = ono()
        .args(["data", "info", &p("set.safetensors")])
        .output()
        .unwrap();
    ok(&out);
    let info = String::from_utf8_lossy(&out.stdout);
    for line in [
        "layout: point clouds of ",
        "channels: 2 coordinates, 1 inputs, 1 targets",
        "train: 8 samples",
        "inputs a (1); targets u (1)",
    ] {
        assert!(info.contains(line), "no {line} in\n{info}");
    }
    let out = ono()
        .args([
            "compare",
            "--data",
            &p("set.safetensors"),
            "--models",
            "ono,gnot,transolver,fno",
        ])
        .args(["--epochs", "1", "--out", &p("compare")])
        .output()
        .unwrap();
    ok(&out);
    let first = summary(&dir.join("compare"));
    let error = |model: &str| -> f64 {
        let o = outcome(&first, model);
        assert_eq!(o.status, Status::Done, "{o:?}");
        o.test_rel_l2.unwrap()
    };
    let (gnot, transolver, ono_err) = (error("gnot"), error("transolver"), error("ono"));
    assert!(gnot.is_finite() && transolver.is_finite() && ono_err.is_finite());
    // ONO takes the padding mask: real batches, not one sample per micro-batch; and every run
    // is evaluated on its training samples too.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("one sample at a time"), "{log}");
    let bench = RunFolder::new(dir.join("compare/ono"))
        .read::<Timed>()
        .unwrap();
    assert_eq!(bench.accumulate_steps, 1, "{bench:?}");
    for model in ["ono", "gnot", "transolver"] {
        let o = outcome(&first, model);
        assert!(o.train_eval_rel_l2.unwrap().is_finite(), "{o:?}");
        assert!(o.train_loss.unwrap().is_finite(), "{o:?}");
    }
    let why = refusal(&first, "fno");
    assert!(why.contains("regular grid"), "{why}");
    let report = std::fs::read_to_string(dir.join("compare/report.md")).unwrap();
    assert!(dir.join("compare/compare.png").is_file());
    for row in [
        "| ONO (ours) | ",
        "| GNOT | ",
        "| Transolver",
        "| FNO | refused: ",
        "(compare.png)",
        "| train loss | train, eval mode |",
    ] {
        assert!(report.contains(row), "no {row} in\n{report}");
    }
    // A second call finds both runs finished and trains nothing.
    let again = ono()
        .args([
            "compare",
            "--data",
            &p("set.safetensors"),
            "--models",
            "gnot,transolver",
        ])
        .args(["--epochs", "1", "--out", &p("compare")])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(log.matches("done before").count() == 2, "{log}");
    // A second seed of ONO: the first is done, the second trains; the row gives both.
    let seeds = ono()
        .args([
            "compare",
            "--data",
            &p("set.safetensors"),
            "--models",
            "ono",
        ])
        .args(["--epochs", "1", "--seeds", "2", "--out", &p("compare")])
        .output()
        .unwrap();
    ok(&seeds);
    let seeded = summary(&dir.join("compare"));
    let seeds: Vec<u64> = seeded
        .entries
        .iter()
        .map(|e| match e {
            Entry::Run { seed, .. } => *seed,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(seeds, [0, 1]);
    assert!(RunFolder::new(dir.join("compare/ono@seed1"))
        .read::<Timed>()
        .is_some());
    let report = std::fs::read_to_string(dir.join("compare/report.md")).unwrap();
    assert!(report.contains(" (2 seeds, "), "{report}");
    // A budget in optimizer steps: ONO's batch of 8 is one step per epoch of the 8 training
    // samples, GNOT's batch of 1 eight.
    let steps = ono()
        .args([
            "compare",
            "--data",
            &p("set.safetensors"),
            "--models",
            "ono,gnot",
        ])
        .args(["--steps", "3", "--out", &p("steps")])
        .output()
        .unwrap();
    ok(&steps);
    let epochs = |model: &str| -> u64 {
        RunFolder::new(dir.join("steps").join(model))
            .read::<Granted>()
            .unwrap()
            .epochs
    };
    assert_eq!((epochs("ono"), epochs("gnot")), (3, 1));

    let ckpt = p("compare/gnot/checkpoints/last.safetensors");
    let predicted = |format: &str| -> Predictions {
        let out = ono()
            .args([
                "predict",
                &ckpt,
                "--input",
                &p("set.safetensors"),
                "--output",
                &p(format),
            ])
            .args(["--format", format, "--batch", "1000"])
            .output()
            .unwrap();
        json(&out)
    };
    let (vtu, npz) = (predicted("vtu"), predicted("npz"));
    // The mean over the test samples is the test error the run reported.
    let mean = npz.mean_rel_l2;
    assert!((mean - gnot).abs() <= 1e-5 * gnot, "{mean} vs {gnot}");
    assert_eq!(vtu.samples, npz.samples);
    assert_eq!(vtu.files.len(), 2, "round(10 × 0.2) test samples");
    for (v, n) in vtu.files.iter().zip(&npz.files) {
        assert_eq!(v.rel_l2, n.rel_l2, "one prediction, two formats");
        let source = read_mesh(&v.source).unwrap();
        let back = read_mesh(&v.output).unwrap();
        let arrays = read_npz(&n.output, None).unwrap();
        let npy = |name: &str| {
            arrays
                .iter()
                .find(|a| a.name == name)
                .unwrap_or_else(|| panic!("no {name}"))
                .data
                .to_f64()
        };
        assert_eq!(back.points, source.points, "the sample's own mesh");
        assert_eq!(back.cells, source.cells);
        let prediction = &back.point_array("u_prediction").unwrap().values;
        assert_eq!(
            prediction,
            &npy("u_prediction"),
            "VTU and NumPy agree exactly"
        );
        let target = &back.point_array("u_target").unwrap().values;
        let u = &source.point_array("u").unwrap().values;
        // The target in the file's own point order (through the float32 dataset).
        assert!(target
            .iter()
            .zip(u)
            .all(|(a, b)| (a - b).abs() <= 1e-6 * b.abs().max(1e-3)));
        let err = &back.point_array("u_error").unwrap().values;
        assert!(err
            .iter()
            .zip(prediction.iter().zip(target))
            .all(|(e, (p, t))| (e - (p - t)).abs() < 1e-12));
        // The positions as the file has them (x, y of the planar mesh).
        let coords = npy("coords");
        let xy: Vec<f64> = source.points.chunks(3).flat_map(|q| [q[0], q[1]]).collect();
        assert!(coords.iter().zip(&xy).all(|(a, b)| (a - b).abs() < 1e-6));
    }
}

/// On a grid (a dataset file of `ono data darcy`) the FNO family trains, and the models without
/// a recipe for the data say why.
#[test]
fn compare_on_a_grid_trains_fno_and_refuses_by_reason() {
    let dir = temp_dir("own-grid");
    let p = |s: &str| dir.join(s).display().to_string();
    run(&[
        "data",
        "darcy",
        "--n-train",
        "8",
        "--n-test",
        "2",
        "--res",
        "17",
        "--out",
        &p("grid.safetensors"),
    ]);
    let out = ono()
        .args([
            "compare",
            "--data",
            &p("grid.safetensors"),
            "--models",
            "fno,geofno,galerkin",
        ])
        .args(["--epochs", "1", "--out", &p("compare")])
        .output()
        .unwrap();
    ok(&out);
    let summary = summary(&dir.join("compare"));
    let fno = outcome(&summary, "fno");
    assert_eq!(fno.status, Status::Done, "{fno:?}");
    assert!(fno.test_rel_l2.unwrap().is_finite());
    assert!(summary.kind.contains("grid [17, 17]"), "{summary:?}");
    for (m, why) in [("geofno", "Geo-FNO is FNO"), ("galerkin", "fine grid")] {
        let said = refusal(&summary, m);
        assert!(said.contains(why), "{said}");
    }
}
