//! The results: `report.md` (what of the paper holds at this scale and what does not, and why;
//! how the run differs from the paper and which cells only the paper profile runs; then every
//! table as the paper's number, ours and their ratio, with the machine, device, commit, date and
//! wall time of each cell), `summary.json` (the same, machine readable) and the plots (Table 1 as
//! grouped bars, the super-resolution curves, the NS2d error per time step).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;
use ono_plot::{grouped_bars, line_chart, ChartSeries};
use ono_train::run_folder::{Record, RecordFile, RunFolder};
use serde::{Deserialize, Serialize};

use super::execute::{self, Outcome, Status};
use super::findings::{self, Finding};
use super::papers::Paper;
use super::plan::{self, Cell, Measure, PaperOnly, Plan, Profile, Source, Work, SEEN_STEPS};
use super::values::{err, num, Readings, SeedValue, Shown};
use super::{clock, paper, RunContext};

/// `summary.json`: the report, machine readable.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Results {
    pub profile: String,
    pub machine: String,
    pub device: String,
    pub commit: String,
    /// When it was written (UTC).
    pub written: String,
    /// Seconds of the call that wrote it.
    pub wall_s: f64,
    pub findings: Vec<Finding>,
    pub cells: Vec<CellOut>,
    pub experiments: Vec<Outcome>,
}

impl Record for Results {
    const FILE: RecordFile = RecordFile::Summary;
}

/// A cell with its value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CellOut {
    pub table: usize,
    pub row: String,
    pub column: String,
    pub paper: Option<f64>,
    /// The value; the mean over the seeds where the cell has several.
    pub ours: Shown,
    /// Half the range of the seeds' values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Every seed's value, where the cell has several.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub seeds: Vec<SeedValue>,
    pub ratio: Option<f64>,
    pub experiment: Option<String>,
}

/// The differences between this profile's runs and the ONO paper's, said once at the top.
pub fn ono_differences(profile: Profile) -> String {
    let table3 = "- **Table 3 has FNO twice**, as the paper's FNO could have met the finer grids: with its pointwise normalizers fitted on the training grid and interpolated onto the finer one (our choice, docs/training.md, and the row of earlier reports), and with per-channel normalizers, whose statistics do not depend on the grid. Each row's finding is stated on its own.\n";
    table3.to_string()
        + &match profile {
        Profile::Paper => "- The paper's settings: each model's own recipe and preset, the published files, 500 epochs (the Geo-FNO Elasticity script: 200). The paper ran on an RTX 3090; Table 2 and 8 are measured on the machine named above.\n- Where the paper's text and the reference code disagree, the code's values are used (docs/reference-implementations.md).\n- The Transolver row is an extra (its own paper's numbers in the paper column).\n- Tables 2 and 8 have no paper column: their values could not be read from any version of the paper available to us.\n".to_string(),
        Profile::Quick | Profile::Smoke => {
            let darcy = format!(
                "- **Darcy (Table 1) is published data, but not the paper's:** the Darcy set of {}: 1000 training problems at 16 × 16 and 50 test problems, also published at 32 × 32, where FNO's and ONO's runs are tested zero-shot (Table 3's `neuralop` columns). The Galerkin Transformer's Darcy recipe needs a finer grid beside the training one, which this set does not have: its cell is left to the paper profile.\n",
                ono_data::benchmarks::neuralop_source()
            );
            darcy + concat!(
            "- **Data we generate, not the published files.** Table 3's Darcy: FNO's process (`ono data gen darcy`, solved on 421²), trained at r = 10 (43 × 43, as the paper) and tested on the same samples up to 421². NS2d: the reduced 64² generator (`ono data gen ns2d --profile reduced`, integrating-factor RK4, docs/data.md), subsampled as each cell's experiment file says, 10 frames in and 10 out as the benchmark. **Elasticity is replaced** by Darcy on a different random point cloud per sample (`ono data darcy --points`): the irregular-geometry task that every point-cloud model and Tables 5–7 run on. Airfoil, Pipe and Plasticity have no generator: they run only when their published files are in the data folder (`--data-dir`), at reduced size. Geo-FNO's Elasticity model takes the mesh coordinates alone, so it has no input for the stand-in's coefficient field: its cell is left to the paper profile. Every model normalizes the stand-in's input and target pointwise (`unit`, ONO's Elasticity recipe for the target).\n",
            "- **Smaller everything:** fewer samples, a few epochs, one batch size per benchmark, and narrower, shallower models of the same architectures (each cell's experiment file says exactly what). Geo-FNO on the regular grids is FNO, as in the paper.\n",
            "- **ONO's block:** the presets' Nyström block costs seconds per training step on 2 CPU cores even on a few hundred points (its 256 landmarks and their pseudo-inverse), so ONO runs with the linear transformer block (the paper's other choice) in Tables 1, 3, 4, 6 and 7; Table 5 runs both, Nyström with fewer landmarks (each experiment file says how many).\n",
            "- **Table 7** runs ONO-8, and ONO-30 where this profile runs it, at width 32 (the paper: 128).\n",
            "- So the numbers are **not comparable in size** to the paper's (the ratio column shows how far). The profile checks that every model learns its task (better than the mean field) and whether the qualitative findings (ONO's error growing less than FNO's with resolution, the ablations' order) hold at this scale.\n",
            "- Tables 2 and 8 are measured at 43 × 43 (batch 8, 2 timed steps after one warm-up) on this machine; the paper's were on an RTX 3090 and could not be read from the versions of the paper available to us (no paper column). Peak memory is the process's resident set (CPU).\n",
        )
        }
    }
}

/// The section "Cells only in the paper profile": the paper plan's cells that `plan` does not
/// run, by reason and table.
fn paper_only(paper: &Plan, plan: &Plan) -> String {
    let dropped = plan::only_in(paper, plan);
    let mut s = String::from("## Cells only in the paper profile\n\n");
    if dropped.is_empty() {
        s.push_str(
            "This profile runs every cell of the paper profile (under the same selection).\n\n",
        );
        return s;
    }
    let _ = writeln!(
        s,
        "This profile does not run {} of the paper profile's cells:\n",
        match dropped.len() {
            1 => "this one".to_string(),
            n => format!("these {n}"),
        }
    );
    let reason = |d: &Cell| {
        plan.cells.iter().find_map(|c| match c.source {
            Source::PaperOnly(why)
                if (c.table, &c.row, &c.column) == (d.table, &d.row, &d.column) =>
            {
                Some(why)
            }
            _ => None,
        })
    };
    let mut reasons: Vec<Option<PaperOnly>> = Vec::new();
    for d in &dropped {
        if !reasons.contains(&reason(d)) {
            reasons.push(reason(d));
        }
    }
    for why in reasons {
        let mut by_table = Vec::new();
        for table in 1..=8 {
            let cells: Vec<String> = dropped
                .iter()
                .filter(|c| c.table == table && reason(c) == why)
                .map(|c| format!("{} / {}", c.row, c.column))
                .collect();
            if !cells.is_empty() {
                by_table.push(format!("Table {table}: {}", cells.join("; ")));
            }
        }
        let why = why.map_or("not in this profile's tables", PaperOnly::why);
        let _ = writeln!(s, "- {}: {why}.", by_table.join("; "));
    }
    s.push('\n');
    s
}

/// Writes `plan.md` (the experiments and the cells they fill) and each trained experiment's
/// file, as a run would write it (`--plan-only`).
pub fn write_plan(out: &Path, profile: Profile, plan: &Plan, ctx: &RunContext) -> Result<()> {
    let mut s = format!(
        "# Plan of the {} profile\n\n| experiment | model | work | data |\n|---|---|---|---|\n",
        profile.name()
    );
    for e in &plan.experiments {
        let work = match &e.work {
            Work::Train { .. } => format!("`ono train {}/experiment.toml`", e.id),
            Work::TimeRun { steps, .. } => {
                format!("`ono bench-train {}/experiment.toml --steps {steps}`", e.id)
            }
            Work::Measure(Measure { model, .. }) => format!(
                "`ono bench-step --arch {} --preset {}`",
                model.arch,
                model.preset.as_deref().unwrap_or("default")
            ),
        };
        let _ = writeln!(s, "| {} | {} | {work} | {} |", e.id, e.model, e.data_note);
        if let Work::Train { config, .. } | Work::TimeRun { config, .. } = &e.work {
            execute::write_experiment(
                &ono_train::RunFolder::new(out.join(&e.id)),
                &execute::as_run(config, ctx),
            )?;
        }
    }
    s.push_str("\n| table | row | column | paper | experiment |\n|---|---|---|---|---|\n");
    for c in &plan.cells {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            c.table,
            c.row,
            c.column,
            c.paper.map_or("".into(), |p| format!("{p}")),
            c.source.experiment().unwrap_or("–")
        );
    }
    ono_io::atomic::write_atomic(&out.join("plan.md"), s.as_bytes())?;
    Ok(())
}

/// Writes `report.md`, `summary.json` and the plots into `out`. `paper` is the paper profile's
/// plan under the same selection (`None` when this is the paper profile): the cells this
/// profile drops and the settings the findings compare with.
pub fn write(
    out: &Path,
    profile: Profile,
    plan: &Plan,
    paper: Option<&Plan>,
    outcomes: &[Outcome],
    ctx: &RunContext,
    wall: f64,
) -> Result<()> {
    let readings = Readings::new(plan, outcomes);
    // A rehearsal's numbers come from one epoch on miniature files: nothing to judge the
    // paper's findings on.
    let found = if ctx.rehearsal {
        Vec::new()
    } else {
        ctx.paper.findings(&readings, paper)
    };
    let mut md = header(profile, plan, paper, &found, ctx, wall);
    let (tables, cells_out) = tables(out, ctx.paper, plan, &readings)?;
    md.push_str(&tables);
    md.push_str(&reference_section(plan, &readings));
    md.push_str(&experiments(plan, &readings, outcomes));
    ono_io::atomic::write_atomic(&out.join("report.md"), md.as_bytes())?;
    RunFolder::new(out).write(&Results {
        profile: profile.name().to_owned(),
        machine: ctx.machine.clone(),
        device: ctx.device.clone(),
        commit: ctx.commit.clone(),
        written: super::utc_now(),
        wall_s: wall,
        findings: found,
        cells: cells_out,
        experiments: outcomes.to_vec(),
    })?;
    Ok(())
}

/// The report's top: title, command and machine, the findings, how the run differs from the
/// paper and which cells only the paper profile runs.
fn header(
    profile: Profile,
    plan: &Plan,
    paper: Option<&Plan>,
    found: &[Finding],
    ctx: &RunContext,
    wall: f64,
) -> String {
    let mut md = String::new();
    let (title, flag) = if ctx.rehearsal {
        (
            "a rehearsal of the paper profile (miniature files, one epoch of a few steps: the numbers check that every cell runs, they are not results)".to_string(),
            "--rehearse".to_string(),
        )
    } else {
        (
            format!("{} profile", profile.name()),
            format!("--profile {}", profile.name()),
        )
    };
    let _ = writeln!(md, "# {}: {title}\n", ctx.paper.title());
    let flag = match ctx.paper {
        Paper::Ono => flag,
        other => format!("--paper {} {flag}", other.key()),
    };
    let _ = writeln!(
        md,
        "- Command: `cargo xtask reproduce {flag}` (or `ono reproduce {flag}`), with the selection recorded in summary.json\n- Machine: {}\n- Device: {}\n- Commit: {}\n- Report written: {}; this call took {} (experiments finished by earlier calls keep their own date and wall time below)\n",
        ctx.machine,
        ctx.device,
        ctx.commit,
        super::utc_now(),
        clock(wall)
    );
    if ctx.rehearsal {
        md.push_str("## The paper's findings

Not judged: a rehearsal checks that every experiment builds at its paper size, reads its file, trains, evaluates and writes its result; its numbers (one epoch on miniature files) say nothing about the findings.

");
    } else {
        let _ = writeln!(md, "{}", findings::markdown(found));
    }
    let _ = writeln!(
        md,
        "## How this run differs from the paper\n\n{}",
        ctx.paper.differences(profile)
    );
    if let Some(paper) = paper {
        md.push_str(&paper_only(paper, plan));
    }
    md
}

/// Every table of the plan as markdown (with its plot), and its cells for `summary.json`.
fn tables(
    out: &Path,
    paper: Paper,
    plan: &Plan,
    readings: &Readings,
) -> Result<(String, Vec<CellOut>)> {
    let mut md = String::new();
    let mut cells_out = Vec::new();
    let mut seeds_said = false;
    for &table in paper.tables() {
        let cells: Vec<&Cell> = plan.cells.iter().filter(|c| c.table == table).collect();
        if cells.is_empty() {
            continue;
        }
        let read: Vec<_> = cells.iter().map(|c| readings.cell(c)).collect();
        if !seeds_said && read.iter().any(|r| !r.seeds.is_empty()) {
            seeds_said = true;
            md.push_str("Cells run with several seeds (the same experiment otherwise) show the mean of the seeds' values ± half their range, and the number of seeds; the ratio and the findings use the mean, and summary.json lists every seed's value.\n\n");
        }
        let title = paper.table_title(table);
        let _ = writeln!(md, "## {title}\n");
        md.push_str("| model | column | paper | ours | ours / paper | mean field | data | wall | finished | commit |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for (c, reading) in cells.iter().zip(read) {
            let o = c.source.experiment().and_then(|id| readings.outcome(id));
            let ratio = match (reading.value(), c.paper) {
                (Some(v), Some(p)) if p > 0.0 => Some(v / p),
                _ => None,
            };
            let paper = match (c.paper, &c.source) {
                (Some(p), _) => num(&c.source, p),
                (None, Source::Unsupported) => "–".into(),
                (None, _) => "".into(),
            };
            let ours = reading.format(&c.source);
            let data = c
                .source
                .experiment()
                .and_then(|id| readings.experiment(id))
                .map(|e| format!("`{}`", e.id))
                .unwrap_or_default();
            let _ = writeln!(
                md,
                "| {} | {} | {paper} | {ours} | {} | {} | {data} | {} | {} | {} |",
                c.row,
                c.column,
                ratio.map_or("".into(), |r| format!("{r:.2}×")),
                o.and_then(|o| o.mean_field)
                    .filter(|_| matches!(c.source, Source::TestError(_)))
                    .map_or("".into(), err),
                o.map_or("".into(), |o| clock(o.wall_s)),
                o.map_or("".into(), |o| o.finished.clone()),
                o.map_or("".into(), |o| o.commit.clone()),
            );
            cells_out.push(CellOut {
                table,
                row: c.row.clone(),
                column: c.column.clone(),
                paper: c.paper,
                spread: reading.spread(),
                ours: reading.shown,
                seeds: reading.seeds,
                ratio,
                experiment: c.source.experiment().map(str::to_owned),
            });
        }
        md.push('\n');
        // The plots draw the ONO paper's tables (its Table 3's resolutions, Table 4's steps).
        if paper == Paper::Ono {
            if let Some(png) = plot(out, table, &cells, readings)? {
                let _ = writeln!(md, "![{title}]({png})\n");
            }
        }
    }
    Ok((md, cells_out))
}

/// The experiments' table (status, wall time, machine, device) and the published files that
/// were missing.
fn experiments(plan: &Plan, readings: &Readings, outcomes: &[Outcome]) -> String {
    let mut md = String::new();
    md.push_str("## Experiments\n\nEach folder holds the experiment file, checkpoints, metrics.jsonl and figures; rerun a cell with `ono train <folder>/experiment.toml --resume`.\n\n| experiment | data | status | wall | machine | device |\n|---|---|---|---|---|---|\n");
    for e in &plan.experiments {
        let o = readings.outcome(&e.id);
        let status = match o.map(|o| &o.status) {
            Some(Status::Done) => "done".to_string(),
            Some(Status::MissingData(_)) => "no data (below)".into(),
            Some(Status::Failed(m)) => {
                format!("failed: {}", m.replace('|', "/").replace('\n', " "))
            }
            None => "not run".into(),
        };
        let _ = writeln!(
            md,
            "| `{}` | {} | {status} | {} | {} | {} |",
            e.id,
            e.data_note,
            o.map_or("".into(), |o| clock(o.wall_s)),
            o.map_or("", |o| o.machine.as_str()),
            o.map_or("", |o| o.device.as_str()),
        );
    }
    let mut missing: Vec<&str> = outcomes
        .iter()
        .filter_map(|o| match &o.status {
            Status::MissingData(m) => Some(m.as_str()),
            _ => None,
        })
        .collect();
    missing.sort_unstable();
    missing.dedup();
    if !missing.is_empty() {
        md.push_str("\n## Missing data\n\nThese published files were not in the data folder; the experiments that read them did not run (put the files there and call the command again):\n\n");
        for m in missing {
            let _ = writeln!(md, "- {m}");
        }
    }
    md
}

/// Ours against the reference loop's error: parity when the ratio lies in this band...
const PARITY_BAND: (f64, f64) = (0.90, 1.10);

/// "Beside the PyTorch reference loop": per trained experiment (its seeds together) our error
/// and the reference loop's on the same hand-off, the ratio and the verdict, both loops' seconds
/// of training and evaluation; then the runs it could not take. Empty when no experiment ran
/// the reference loop.
fn reference_section(plan: &Plan, readings: &Readings) -> String {
    use execute::Reference;
    let mut rows = String::new();
    let mut others = String::new();
    for e in plan.experiments.iter().filter(|e| e.replicate_of.is_none()) {
        let runs: Vec<&Outcome> = plan
            .seeds_of(&e.id)
            .filter_map(|r| readings.outcome(&r.id))
            .collect();
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        let (mut ours_s, mut theirs_s) = (0.0, 0.0);
        let mut network = String::new();
        for o in &runs {
            match (&o.reference, o.test_rel_l2) {
                (
                    Some(Reference::Done {
                        test_rel_l2,
                        train_s,
                        ours_train_s,
                        network: n,
                        ..
                    }),
                    Some(mine),
                ) => {
                    ours.push(mine);
                    theirs.push(*test_rel_l2);
                    ours_s += ours_train_s;
                    theirs_s += train_s;
                    network.clone_from(n);
                }
                (Some(Reference::Refused { why }), _) => {
                    let _ = writeln!(others, "- `{}`: not restated: {why}", o.id);
                }
                (Some(Reference::Failed { why }), _) => {
                    let _ = writeln!(others, "- `{}`: FAILED: {why}", o.id);
                }
                _ => {}
            }
        }
        if theirs.is_empty() {
            continue;
        }
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let range = |v: &[f64]| {
            v.iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| {
                    (a.min(x), b.max(x))
                })
        };
        let (m_ours, m_ref) = (mean(&ours), mean(&theirs));
        let ratio = m_ours / m_ref;
        let (lo, hi) = range(&theirs);
        let verdict = if (PARITY_BAND.0..=PARITY_BAND.1).contains(&ratio) {
            "parity"
        } else if theirs.len() > 1 && (lo..=hi).contains(&m_ours) {
            "parity (inside the reference's seeds)"
        } else {
            "differs"
        };
        let shown = |v: &[f64]| {
            if v.len() == 1 {
                err(v[0])
            } else {
                let (a, b) = range(v);
                format!(
                    "{} ({}–{}, {} seeds)",
                    err(mean(v)),
                    err(a),
                    err(b),
                    v.len()
                )
            }
        };
        let _ = writeln!(
            rows,
            "| `{}` | {} | {} | {ratio:.2}× | {verdict} | {} | {} | {:.2}× | {network} |",
            e.id,
            shown(&ours),
            shown(&theirs),
            clock(ours_s),
            clock(theirs_s),
            ours_s / theirs_s,
        );
    }
    if rows.is_empty() && others.is_empty() {
        return String::new();
    }
    let mut md = format!(
        "## Beside the PyTorch reference loop\n\nEach trained experiment again, trained by `benches/pytorch/train_ref.py`: the reference's own network (restated, proved on the fixtures) from its own seeded initialisation, with torch.optim, torch's schedulers and the scripts' normalizers, loss and evaluation, on the very tensors and recipe of our run (its hand-off in `<experiment>/reference/`). The random streams differ. Parity: ours / reference within [{:.2}, {:.2}], or ours inside the range of the reference's seeds. Time: seconds of the training and evaluation epochs in each loop (neither reading the data nor building the network), ours as recorded when our run was made: compare them only where both ran in the same call, one after the other on one machine.\n\n| experiment | ours | reference | ours / reference | verdict | our time | reference time | time ratio | reference network |\n|---|---|---|---|---|---|---|---|---|\n",
        PARITY_BAND.0, PARITY_BAND.1
    );
    md.push_str(&rows);
    if !others.is_empty() {
        md.push_str("\nNot run beside the reference loop:\n\n");
        md.push_str(&others);
    }
    md.push('\n');
    md
}

/// The table's plot, if it has one and something to draw; returns its file name.
fn plot(out: &Path, table: usize, cells: &[&Cell], readings: &Readings) -> Result<Option<String>> {
    let ours = |c: &Cell| readings.cell(c).value();
    let mut rows: Vec<&str> = Vec::new();
    let mut columns: Vec<&str> = Vec::new();
    for c in cells {
        if !rows.contains(&c.row.as_str()) {
            rows.push(&c.row);
        }
        if !columns.contains(&c.column.as_str()) {
            columns.push(&c.column);
        }
    }
    let grid = |pick: &dyn Fn(&Cell) -> Option<f64>| -> Vec<ChartSeries> {
        rows.iter()
            .map(|r| ChartSeries {
                name: r.to_string(),
                values: columns
                    .iter()
                    .map(|col| {
                        cells
                            .iter()
                            .find(|c| c.row == *r && c.column == *col)
                            .and_then(|c| pick(c))
                    })
                    .collect(),
            })
            .collect()
    };
    let any = |s: &[ChartSeries]| s.iter().any(|s| s.values.iter().any(Option::is_some));
    let name = format!("table{table}.png");
    let path = out.join(&name);
    match table {
        1 | 5 | 6 | 7 => {
            let series = grid(&ours);
            if !any(&series) {
                return Ok(None);
            }
            let groups: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
            grouped_bars(
                &path,
                &format!("Table {table}: test relative L2 (ours)"),
                &groups,
                &series,
                "relative L2",
                true,
            )?;
        }
        3 => {
            // x: the training resolution, then the test resolutions.
            let mut x = vec![43.0];
            x.extend(paper::TABLE3.iter().map(|(s, _, _)| *s as f64));
            let mut series = Vec::new();
            for r in &rows {
                // The 43 → 421 curve; the neuraloperator pair (`neuralop s=…`) is a table row.
                let row: Vec<&&Cell> = cells
                    .iter()
                    .filter(|c| c.row == *r && c.column.starts_with("s="))
                    .collect();
                // A row of the neuraloperator pair alone (FNO's, beside its two 43 → 421 rows).
                if row.is_empty() {
                    continue;
                }
                series.push(ChartSeries {
                    name: r.to_string(),
                    values: row.iter().map(|c| ours(c)).collect(),
                });
                series.push(ChartSeries {
                    name: format!("{r}: paper"),
                    values: row.iter().map(|c| c.paper).collect(),
                });
            }
            if !any(&series) || series.iter().any(|s| s.values.len() != x.len()) {
                return Ok(None);
            }
            line_chart(
                &path,
                "Table 3: Darcy, trained at 43 × 43",
                &x,
                "resolution s",
                &series,
                "relative L2",
                true,
            )?;
        }
        4 => {
            // The error of each rolled-out step of the Table 4 runs.
            let mut series = Vec::new();
            let mut steps = 0;
            for id in ["ns2d-time/fno", "ns2d-time/ono"] {
                if let Some(o) = readings.outcome(id).filter(|o| !o.per_step.is_empty()) {
                    steps = steps.max(o.per_step.len());
                    series.push((id, o.per_step.clone()));
                }
            }
            if series.is_empty() {
                return Ok(None);
            }
            let x: Vec<f64> = (1..=steps).map(|s| s as f64).collect();
            let series: Vec<ChartSeries> = series
                .into_iter()
                .map(|(id, v)| ChartSeries {
                    name: if id.ends_with("fno") {
                        "FNO".into()
                    } else {
                        "ONO".into()
                    },
                    values: (0..steps).map(|i| v.get(i).copied()).collect(),
                })
                .collect();
            line_chart(
                &path,
                &format!("Table 4: NS2d error per step (trained on steps 1–{SEEN_STEPS})"),
                &x,
                "predicted step",
                &series,
                "relative L2",
                true,
            )?;
        }
        _ => return Ok(None),
    }
    Ok(Some(name))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::reproduce::plan::{plan, DataPaths};

    /// The quick profile's dropped cells are listed once each, under the reason its plan gives.
    #[test]
    fn cells_only_in_the_paper_profile_say_why() {
        let data = DataPaths {
            published: PathBuf::from("/data"),
            neuralop: PathBuf::from("/neuralop"),
            generated: PathBuf::from("/out/data"),
        };
        let paper = plan(Profile::Paper, &data).unwrap();
        let quick = plan(Profile::Quick, &data).unwrap();
        let s = paper_only(&paper, &quick);
        assert!(s.contains("does not run these 12 of"), "{s}");
        let line = |why: PaperOnly| {
            s.lines()
                .find(|l| l.ends_with(&format!("{}.", why.why())))
                .unwrap_or_else(|| panic!("no line for {why:?} in {s}"))
        };
        assert_eq!(
            line(PaperOnly::NeedsFineGrid),
            format!(
                "- Table 1: Galerkin / Darcy: {}.",
                PaperOnly::NeedsFineGrid.why()
            )
        );
        let starved = line(PaperOnly::NotLearnedInBudget);
        for cell in [
            "GNOT / NS2d",
            "ONO (ours) / NS2d",
            "Transolver (extra row) / NS2d",
        ] {
            assert_eq!(starved.matches(cell).count(), 1, "{starved}");
        }
        assert!(
            starved.contains(
                "Table 6: BN / Elasticity; LN / Elasticity; Table 7: ONO-30 / Elasticity:"
            ),
            "{starved}"
        );
        assert!(line(PaperOnly::CoordinatesOnly).contains("Geo-FNO / Elasticity"));
        let coarse = line(PaperOnly::GridTooCoarse);
        assert!(
            coarse.starts_with("- Table 1: U-FNO / NS2d; LSM / NS2d: "),
            "{coarse}"
        );
        assert!(paper_only(&paper, &paper).contains("runs every cell"));
    }

    /// One row per experiment with its seeds together: the means' ratio, the verdict (inside
    /// the band, inside the reference's seeds, or not) and both times; refusals listed below.
    #[test]
    fn the_reference_section_compares_seeds_together() {
        use execute::Reference;
        let data = DataPaths {
            published: PathBuf::from("/data"),
            neuralop: PathBuf::from("/neuralop"),
            generated: PathBuf::from("/out/data"),
        };
        let quick = plan(Profile::Quick, &data).unwrap();
        let ctx = RunContext::for_tests();
        let done = |ours: f64, theirs: f64| {
            (
                ours,
                Some(Reference::Done {
                    test_rel_l2: theirs,
                    train_s: 10.0,
                    ours_train_s: 8.0,
                    network: "ref_fno: FNO".into(),
                    torch: "2.11.0".into(),
                    threads: 2,
                }),
            )
        };
        let runs = [
            // Mean 0.11 against 0.10: 1.10×, on the band's edge.
            ("darcy/fno", done(0.10, 0.09)),
            ("darcy/fno@seed1", done(0.12, 0.11)),
            // 0.13 against a mean of 0.10, inside neither the band nor the seeds' 0.08–0.12.
            ("darcy/ono", done(0.13, 0.08)),
            ("darcy/ono@seed1", done(0.13, 0.12)),
            // 0.125 against 0.10 and 0.15: 1.0×, parity.
            ("darcy/lsm", done(0.125, 0.10)),
            ("darcy/lsm@seed1", done(0.125, 0.15)),
            (
                "elasticity/ono-galerkin",
                (
                    0.3,
                    Some(Reference::Refused {
                        why: "no reference".into(),
                    }),
                ),
            ),
        ];
        let outcomes: Vec<Outcome> = runs
            .iter()
            .map(|(id, (ours, reference))| {
                let e = quick.experiments.iter().find(|e| e.id == *id).unwrap();
                Outcome {
                    test_rel_l2: Some(*ours),
                    reference: reference.clone(),
                    ..Outcome::new(e, &ctx)
                }
            })
            .collect();
        let md = reference_section(&quick, &Readings::new(&quick, &outcomes));
        let row = |id: &str| {
            md.lines()
                .find(|l| l.starts_with(&format!("| `{id}` |")))
                .unwrap_or_else(|| panic!("no row for {id} in {md}"))
                .to_string()
        };
        let fno = row("darcy/fno");
        assert!(fno.contains("| 1.10× | parity |"), "{fno}");
        assert!(fno.contains("2 seeds"), "{fno}");
        assert!(fno.contains("| 0.80× |"), "{fno}");
        assert!(row("darcy/ono").contains("| differs |"));
        let lsm = row("darcy/lsm");
        assert!(lsm.contains("| 1.00× | parity |"), "{lsm}");
        assert!(md.contains("- `elasticity/ono-galerkin`: not restated: no reference"));
        assert!(!md.contains("| `darcy/fno@seed1` |"));
        assert_eq!(reference_section(&quick, &Readings::new(&quick, &[])), "");
    }
}
