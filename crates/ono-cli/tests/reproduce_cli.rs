//! `ono reproduce` end to end on the smoke profile (tiny generated data, one epoch, tiny models):
//! Table 3 for FNO and ONO, two trained experiments evaluated at five resolutions. The report,
//! summary and plot are written; a second call skips everything; a run killed mid-way and called
//! again ends with the same numbers as an uninterrupted one; bad names are clear errors.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{ok, ono, temp_dir};

fn reproduce(out: &Path) -> std::process::Command {
    let mut c = ono();
    c.args(["reproduce", "--profile", "smoke", "--only", "table3"])
        .args(["--models", "fno,ono", "--out"])
        .arg(out);
    c
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

/// The cells' values, in order.
fn values(s: &serde_json::Value) -> Vec<f64> {
    s["cells"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(c["ours"]["kind"], "value", "{c}");
            c["ours"]["value"].as_f64().unwrap()
        })
        .collect()
}

#[test]
fn smoke_table3_runs_skips_and_resumes() {
    let dir = temp_dir("reproduce");

    // Bad names are refused before anything runs, listing the known ones.
    for (flag, bad, known) in [
        ("--only", "table9", "table1, table2"),
        ("--models", "fnoo", "fno, galerkin"),
    ] {
        let out = ono()
            .args(["reproduce", "--profile", "smoke", flag, bad, "--out"])
            .arg(dir.join("bad"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            err.contains(&format!("`{bad}`")) && err.contains(known),
            "{err}"
        );
    }

    let a = dir.join("a");
    ok(&reproduce(&a).output().unwrap());
    let s = summary(&a);
    let cells = s["cells"].as_array().unwrap();
    // 2 models × (the training resolution + 5 test resolutions), nothing else.
    assert_eq!(cells.len(), 12, "{s}");
    assert!(cells.iter().all(|c| c["table"] == 3));
    let v = values(&s);
    assert!(v.iter().all(|x| x.is_finite() && *x > 0.0), "{v:?}");
    for id in ["superres/fno", "superres/ono"] {
        let e = s["experiments"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id)
            .unwrap();
        assert_eq!(e["status"], "done");
        let grids: Vec<i64> = ["7", "5", "3", "2", "1"]
            .iter()
            .map(|r| e["grid_at_stride"][r].as_i64().unwrap())
            .collect();
        assert_eq!(grids, [61, 85, 141, 211, 421]);
        assert!(e["mean_field"].as_f64().unwrap() > 0.0);
        for png in ["curves.png", "panels.png"] {
            assert!(a.join(id).join(png).is_file(), "{id}: no {png}");
        }
        // The experiment file in the run folder is one `ono train` takes.
        let file = a.join(id).join("experiment.toml");
        ok(&ono()
            .arg("train")
            .arg(&file)
            .arg("--resume")
            .arg("--quiet")
            .output()
            .unwrap());
    }
    let report = std::fs::read_to_string(a.join("report.md")).unwrap();
    assert!(
        report.contains("Table 3") && report.contains("0.1164"),
        "{report}"
    );
    assert!(a.join("table3.png").is_file());

    // Everything is done: the second call only rewrites the report, with the same numbers.
    let t = Instant::now();
    let err = ok(&reproduce(&a).output().unwrap());
    assert_eq!(err.matches("done before").count(), 2, "{err}");
    assert!(t.elapsed() < Duration::from_secs(60));
    assert_eq!(values(&summary(&a)), v);

    // Killed while training, then called again: the same numbers.
    let b = dir.join("b");
    let mut child = reproduce(&b)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let marker = b.join("superres/fno/checkpoints/last.safetensors");
    while !marker.exists() && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !b.join("summary.json").exists(),
        "the run was not interrupted"
    );
    let err = ok(&reproduce(&b).output().unwrap());
    assert!(!err.contains("changed since its last run"), "{err}");
    assert_eq!(values(&summary(&b)), v);
    let _ = std::fs::remove_dir_all(&dir);
}
