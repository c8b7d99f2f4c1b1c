//! `ono reproduce --paper gnot`: GNOT's tables. The smoke profile trains every cell it has data
//! for (Table 1 on the ONO paper's reduced benchmarks, Table 2's block orders and Table 3's
//! experts and heads on the Elasticity stand-in), reports NACA's missing files by name and
//! writes a report with the paper's numbers and findings; a second call finds everything
//! finished. The paper plan's files are listed by `--plan-only`, and every experiment of it
//! rehearses on miniatures of the published files.

mod common;

use common::{assert_claims, neuralop_miniature, ok, ono, rehearse, reproduce_summary, temp_dir};
use ono_cli::reproduce::execute::Status;
use ono_cli::reproduce::values::Shown;

#[test]
fn the_smoke_profile_runs_every_table_and_resumes() {
    let dir = temp_dir("reproduce-gnot-smoke");
    let out = dir.join("out");
    let neuralop = neuralop_miniature(&dir);
    // No published files: NACA's cells say so.
    let empty = dir.join("published");
    std::fs::create_dir_all(&empty).unwrap();
    let call = || {
        ok(&ono()
            .args(["reproduce", "--paper", "gnot", "--profile", "smoke"])
            .args(["--threads", "1", "--neuralop-dir"])
            .arg(&neuralop)
            .arg("--data-dir")
            .arg(&empty)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap())
    };
    let log = call();
    let s = reproduce_summary(&out);
    for e in &s.experiments {
        let expected = match e.id.starts_with("airfoil/") {
            true => matches!(e.status, Status::MissingData(_)),
            false => e.status == Status::Done,
        };
        assert!(expected, "{}: {:?}\n{log}", e.id, e.status);
    }
    let tables: std::collections::BTreeSet<usize> = s.cells.iter().map(|c| c.table).collect();
    assert_eq!(tables.into_iter().collect::<Vec<_>>(), [1, 2, 3]);
    // Every cell with data has an error; NACA's have none, FNO(-interp) has no mesh cells.
    for c in &s.cells {
        match (&c.ours, c.column.as_str()) {
            (Shown::Value(v), _) => assert!(v.is_finite() && *v > 0.0, "{c:?}"),
            (_, "NACA") => {}
            (Shown::Unsupported, "Elasticity") if c.row == "FNO(-interp)" => {}
            (Shown::PaperOnly, _) => {}
            (other, _) => panic!("{} / {}: {other:?}", c.row, c.column),
        }
    }
    // Table 2: the three orders on the stand-in, "cross + self" being Table 1's GNOT run.
    let table2: Vec<&str> = s
        .cells
        .iter()
        .filter(|c| c.table == 2 && c.column == "Elasticity")
        .map(|c| c.row.as_str())
        .collect();
    assert_eq!(table2, ["cross + cross", "self + cross", "cross + self"]);
    let read = |table: usize, row: &str| {
        s.cells
            .iter()
            .find(|c| c.table == table && c.row == row && c.column.starts_with("Elasticity"))
            .map(|c| c.ours.clone())
    };
    assert_eq!(read(2, "cross + self"), read(1, "GNOT (ours)"));
    // Table 3: one expert and one head is one run, in both halves.
    assert_eq!(
        read(3, "N_experts = 1 (1 head)"),
        read(3, "N_heads = 1 (1 expert)")
    );
    assert_claims(
        &s,
        &[
            "below Geo-FNO's",
            "beats two cross-attentions",
            "Three experts beat one",
            "The number of heads has little impact",
        ],
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.starts_with("# GNOT's tables (Hao et al., ICML 2023): smoke profile"));
    assert!(report.contains("MIONet and OFormer are not ported"));
    assert!(report.contains("NACA_Cylinder_X.npy"), "{report}");
    // A second call trains nothing.
    let again = call();
    assert!(!again.contains("epoch 1/"), "{again}");
    assert_eq!(reproduce_summary(&out).cells.len(), s.cells.len());
}

#[test]
fn the_paper_plan_lists_its_cells_and_files() {
    let dir = temp_dir("reproduce-gnot-plan");
    let out = dir.join("out");
    let plan_only = |extra: &[&str]| {
        ono()
            .args(["reproduce", "--paper", "gnot", "--profile", "paper"])
            .arg("--plan-only")
            .args(extra)
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap()
    };
    ok(&plan_only(&[]));
    let plan = std::fs::read_to_string(out.join("plan.md")).unwrap();
    // Table 1: 4 rows × 4 columns; Table 2: 3 orders × 2 columns; Table 3: 4 + 4 rows.
    let count = |t: &str| plan.lines().filter(|l| l.starts_with(t)).count();
    assert_eq!(
        (count("| 1 |"), count("| 2 |"), count("| 3 |")),
        (16, 6, 8),
        "{plan}"
    );
    for (id, needle) in [
        (
            "elasticity/gnot-cross-cross",
            "block_order = \"cross_cross\"",
        ),
        ("airfoil/gnot-self-cross", "block_order = \"self_cross\""),
        ("elasticity/gnot-e16-h1", "n_experts = 16"),
        ("elasticity/gnot-e1-h16", "n_head = 16"),
        ("elasticity/galerkin", "decoder = \"pointwise\""),
        ("airfoil/galerkin", "arch = \"galerkin\""),
    ] {
        let file = out.join(id).join("experiment.toml");
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(text.contains(needle), "{id}: {needle}\n{text}");
        assert!(plan.contains(id), "{id}");
    }
    // Bad selections are refused with the paper's own names.
    let bad = plan_only(&["--models", "ono"]);
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("known: fno, galerkin, geofno, gnot"), "{err}");
}

#[test]
fn the_paper_plan_rehearses_on_miniatures() {
    let dir = temp_dir("reproduce-gnot-rehearsal");
    let out = dir.join("out");
    let (s, log) = rehearse(&["--paper", "gnot"], &out, |_| false);
    let experiments = s["experiments"].as_array().unwrap();
    // Table 1's 12 runs (Geo-FNO's grids are FNO's), Table 2's 4 other orders, Table 3's 7.
    assert_eq!(experiments.len(), 12 + 4 + 7, "{experiments:#?}");
    assert!(!log.contains("no data"), "{log}");
    assert_eq!(s["findings"].as_array().map(Vec::len), Some(0));
}
