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

/// `summary.json` of an `ono compare` output folder.
fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
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
    let entries = first["entries"].as_array().unwrap();
    let error = |model: &str| -> f64 {
        let e = entries.iter().find(|e| e["model"] == model).unwrap();
        assert_eq!(e["result"], "run", "{e}");
        assert_eq!(e["outcome"]["status"], "done", "{e}");
        e["outcome"]["test_rel_l2"].as_f64().unwrap()
    };
    let (gnot, transolver, ono_err) = (error("gnot"), error("transolver"), error("ono"));
    assert!(gnot.is_finite() && transolver.is_finite() && ono_err.is_finite());
    // ONO takes the padding mask: real batches, not one sample per micro-batch; and every run
    // is evaluated on its training samples too.
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("one sample at a time"), "{log}");
    let bench: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("compare/ono/bench.json")).unwrap())
            .unwrap();
    assert_eq!(bench["accumulate_steps"], 1, "{bench}");
    for model in ["ono", "gnot", "transolver"] {
        let e = entries.iter().find(|e| e["model"] == model).unwrap();
        assert!(
            e["outcome"]["train_eval_rel_l2"]
                .as_f64()
                .unwrap()
                .is_finite(),
            "{e}"
        );
        assert!(
            e["outcome"]["train_loss"].as_f64().unwrap().is_finite(),
            "{e}"
        );
    }
    let fno = entries.iter().find(|e| e["model"] == "fno").unwrap();
    assert_eq!(fno["result"], "refused");
    assert!(
        fno["why"].as_str().unwrap().contains("regular grid"),
        "{fno}"
    );
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
    let seeds: Vec<u64> = seeded["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [0, 1]);
    assert!(dir.join("compare/ono@seed1/bench.json").is_file());
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
        let path = dir.join("steps").join(model).join("budget.json");
        let b: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        b["epochs"].as_u64().unwrap()
    };
    assert_eq!((epochs("ono"), epochs("gnot")), (3, 1));

    let ckpt = p("compare/gnot/checkpoints/last.safetensors");
    let predicted = |format: &str| -> serde_json::Value {
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
    let mean = npz["mean_rel_l2"].as_f64().unwrap();
    assert!((mean - gnot).abs() <= 1e-5 * gnot, "{mean} vs {gnot}");
    assert_eq!(vtu["samples"], npz["samples"]);
    let files = vtu["files"].as_array().unwrap();
    assert_eq!(files.len(), 2, "round(10 × 0.2) test samples");
    for (v, n) in files.iter().zip(npz["files"].as_array().unwrap()) {
        let source = read_mesh(Path::new(v["source"].as_str().unwrap())).unwrap();
        let back = read_mesh(Path::new(v["output"].as_str().unwrap())).unwrap();
        let arrays = read_npz(Path::new(n["output"].as_str().unwrap()), None).unwrap();
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
    let entry = |m: &str| {
        summary["entries"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["model"] == m)
            .unwrap()
            .clone()
    };
    let fno = entry("fno");
    assert_eq!(fno["outcome"]["status"], "done", "{fno}");
    assert!(fno["outcome"]["test_rel_l2"].as_f64().unwrap().is_finite());
    assert!(
        summary["kind"].as_str().unwrap().contains("grid [17, 17]"),
        "{summary}"
    );
    for (m, why) in [("geofno", "Geo-FNO is FNO"), ("galerkin", "fine grid")] {
        let e = entry(m);
        assert_eq!(e["result"], "refused", "{e}");
        assert!(e["why"].as_str().unwrap().contains(why), "{e}");
    }
}
