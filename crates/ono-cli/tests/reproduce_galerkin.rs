//! `ono reproduce --paper galerkin`: the Galerkin Transformer paper's tables. The smoke profile
//! generates its data (Burgers and Darcy by FNO's processes), trains every cell it has, times
//! Table 1's steps in processes of their own and writes a report with the paper's numbers and
//! findings; a second call finds everything finished. The paper plan's files are listed by
//! `--plan-only`, and every experiment of it rehearses on miniatures of the published files.

mod common;

use common::{assert_claims, ok, ono, rehearse, reproduce_summary, temp_dir};

#[test]
fn the_smoke_profile_runs_every_table_and_resumes() {
    let dir = temp_dir("reproduce-galerkin-smoke");
    let out = dir.join("out");
    let call = || {
        ok(&ono()
            .args(["reproduce", "--paper", "galerkin", "--profile", "smoke"])
            .args(["--threads", "1", "--out"])
            .arg(&out)
            .output()
            .unwrap())
    };
    let log = call();
    let s = reproduce_summary(&out);
    for e in &s.experiments {
        assert_eq!(
            e.status,
            ono_cli::reproduce::execute::Status::Done,
            "{}: {log}",
            e.id
        );
    }
    // The data it generated, each with the command that made it beside it.
    for f in [
        "burgers_data_R10.mat",
        "piececonst_r421_N1024_smooth1.mat",
        "piececonst_r421_N1024_smooth2.mat",
    ] {
        let args = std::fs::read_to_string(out.join("data").join(f).with_extension("args"))
            .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(args.starts_with("data gen "), "{args}");
    }
    // Every table of the paper: trained cells have an error, Table 1 a memory and a time.
    let tables: std::collections::BTreeSet<usize> = s.cells.iter().map(|c| c.table).collect();
    assert_eq!(tables.into_iter().collect::<Vec<_>>(), [1, 2, 3, 8]);
    for c in &s.cells {
        let v = match &c.ours {
            ono_cli::reproduce::values::Shown::Value(v) => *v,
            other => panic!("{} / {}: {other:?}", c.row, c.column),
        };
        assert!(v.is_finite() && v > 0.0, "{} / {}: {v}", c.row, c.column);
    }
    let memory = s
        .cells
        .iter()
        .filter(|c| c.table == 1 && c.column.starts_with("peak memory"))
        .count();
    assert_eq!(memory, 4, "ST, FT, LT and GT");
    // Table 3's FNO rows: input and target on one grid (no query points).
    assert!(s.cells.iter().any(|c| c.row == "FNO2d (only n_c)"));
    assert_claims(
        &s,
        &[
            "Galerkin-type layer normalization",
            "FT's error is at least 30% below FNO2d's",
            "GT's error is at most half of FNO2d's",
            "less memory than training ST",
        ],
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.starts_with(
        "# The Galerkin Transformer paper's tables (Cao, NeurIPS 2021): smoke profile"
    ));
    assert!(report.contains("`ono reproduce --paper galerkin --profile smoke`"));
    assert!(report.contains("## Cells only in the paper profile"));
    // A second call trains nothing.
    let again = call();
    assert!(!again.contains("epoch 1/"), "{again}");
    let s2 = reproduce_summary(&out);
    assert_eq!(s2.cells.len(), s.cells.len());
}

#[test]
fn the_paper_plan_lists_its_cells_and_files() {
    let dir = temp_dir("reproduce-galerkin-plan");
    let out = dir.join("out");
    ok(&ono()
        .args([
            "reproduce",
            "--paper",
            "galerkin",
            "--profile",
            "paper",
            "--plan-only",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap());
    let plan = std::fs::read_to_string(out.join("plan.md")).unwrap();
    // Tables 2a (27 cells), 2b (18), 3 (48), 8 (27) and 1 (8).
    let cells = plan
        .lines()
        .filter(|l| {
            l.starts_with("| 1 |")
                || l.starts_with("| 2 |")
                || l.starts_with("| 3 |")
                || l.starts_with("| 8 |")
        })
        .count();
    assert_eq!(cells, 27 + 18 + 48 + 27 + 8, "{plan}");
    for id in [
        "burgers/n8192/gt",
        "burgers/n512/gt-reg-eta1-delta0-zeta0",
        "darcy/211/st-reg",
        "inverse/211/eps0.1/fno-nc",
        "memory/n8192/ft",
    ] {
        let file = out.join(id).join("experiment.toml");
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(text.contains("arch = "), "{id}: {text}");
        assert!(plan.contains(id), "{id}");
    }
    // Bad selections are refused with the paper's own names.
    let bad = ono()
        .args([
            "reproduce",
            "--paper",
            "galerkin",
            "--plan-only",
            "--only",
            "table4",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("known: table1, table2, table3, table8"),
        "{err}"
    );
}

#[test]
fn the_paper_plan_rehearses_on_miniatures() {
    let dir = temp_dir("reproduce-galerkin-rehearsal");
    let out = dir.join("out");
    let (s, log) = rehearse(&["--paper", "galerkin"], &out, |id| {
        id.starts_with("memory/")
    });
    let experiments = s["experiments"].as_array().unwrap();
    assert!(
        experiments.len() >= 100,
        "{} experiments",
        experiments.len()
    );
    assert!(out.join("miniatures/burgers_data_R10.mat").is_file());
    assert!(!log.contains("no data"), "{log}");
    assert_eq!(s["findings"].as_array().map(Vec::len), Some(0));
}
