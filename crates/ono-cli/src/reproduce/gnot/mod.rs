//! GNOT's tables as experiments (`ono reproduce --paper gnot`): Table 1 (the main results) on the
//! benchmarks this project can make or read, Table 2 (the order of a block's attentions) and
//! Table 3 (the number of experts and of heads).
//!
//! Table 1's experiments are the ONO paper's benchmark experiments ([`BenchmarkRuns`]: the same
//! committed files, data, sizes and seeds), so that a cell of both papers is one run. Tables 2
//! and 3 are versions of GNOT's own experiment on a benchmark, edited in its block order or in
//! its experts and heads. Of GNOT's datasets, NS2d-c, Inductor2d, Heat and Heatsink are
//! its authors' own, published only as files this project does not read, with no generator here;
//! their columns are left out, and Table 3 (on Heat in the paper) runs on Elasticity, labelled so.

pub mod findings;
pub mod numbers;

use anyhow::{Context, Result};
use ono_models::gnot::BlockOrder;
use ono_models::ModelConfig;
use ono_train::config::TrainConfig;

use super::plan::{BenchmarkRuns, DataPaths, Plan, Profile, Source, Task, Work};

/// The tables, by number.
pub const TABLES: [usize; 3] = [1, 2, 3];

/// The row models `--models` takes.
pub const MODELS: [&str; 4] = ["fno", "galerkin", "geofno", "gnot"];

/// Table 1's columns, as the ONO paper's benchmarks.
const TABLE1_TASKS: [Task; 4] = [Task::Darcy, Task::Ns2d, Task::Elasticity, Task::Airfoil];

/// Table 2's columns.
const TABLE2_TASKS: [Task; 2] = [Task::Airfoil, Task::Elasticity];

/// The benchmark Table 3 runs on in place of Heat.
const TABLE3_TASK: Task = Task::Elasticity;

/// Table 3's column.
pub const TABLE3_COLUMN: &str = "Elasticity (for Heat)";

/// A table's title in the report.
pub fn title(table: usize) -> &'static str {
    match table {
        1 => "Table 1: relative L2 error on the benchmarks this project can make or read (MIONet, OFormer and GNOT's own data sets are not here: see the differences)",
        2 => "Table 2: the order of the attentions in GNOT's block (NS2d-c is not here)",
        3 => "Table 3: GNOT's number of experts (1 head) and of attention heads (1 expert), on Elasticity in place of the paper's Heat",
        _ => "?",
    }
}

/// The experts and heads of Table 3 in a profile: the smoke profile's tiny width (8) takes no
/// more than 4 heads.
fn table3_counts(profile: Profile) -> (&'static [i64], &'static [i64]) {
    match profile {
        Profile::Smoke => (&[1, 3], &[1, 4]),
        Profile::Paper | Profile::Quick => (&[1, 3, 8, 16], &[1, 4, 8, 16]),
    }
}

/// Every experiment and cell of a profile.
pub fn plan(profile: Profile, data: &DataPaths) -> Result<Plan> {
    let runs = BenchmarkRuns::new(profile, data);
    let mut p = Plan::default();
    table1(&runs, &mut p)?;
    table2(&runs, &mut p)?;
    table3(&runs, profile, &mut p)?;
    Ok(p)
}

/// Table 1: each ported model on each benchmark it can take.
fn table1(runs: &BenchmarkRuns, p: &mut Plan) -> Result<()> {
    for (model, label, paper) in numbers::TABLE1 {
        for (col, task) in TABLE1_TASKS.into_iter().enumerate() {
            let source = runs.source(p, model, task)?.unwrap_or(Source::Unsupported);
            let column = numbers::TABLE1_COLUMNS[col];
            p.cell(1, label, column, model, Some(paper[col]), source);
        }
    }
    Ok(())
}

/// GNOT's experiment on `task` edited by `edit`, added as `id` unless this profile leaves GNOT's
/// `task` to the paper profile; the source of a cell reading it.
fn gnot_version(
    runs: &BenchmarkRuns,
    p: &mut Plan,
    task: Task,
    id: &str,
    edit: impl Fn(&mut ono_models::gnot::GnotConfig),
) -> Result<Source> {
    if let Some(why) = runs.paper_only("gnot", task) {
        return Ok(Source::PaperOnly(why));
    }
    let mut cfg: TrainConfig = runs
        .experiment("gnot", task)?
        .with_context(|| format!("GNOT has no experiment on {}", task.key()))?;
    let mut gnot = false;
    cfg.model.edit(|m| {
        if let ModelConfig::Gnot(c) = m {
            edit(c);
            gnot = true;
        }
    })?;
    anyhow::ensure!(gnot, "GNOT's experiment on {} is not a GNOT", task.key());
    let work = Work::Train {
        config: Box::new(cfg),
        strides: Vec::new(),
        test_resolutions: Vec::new(),
    };
    p.add(id, "gnot", work, runs.data_note(task));
    Ok(Source::TestError(id.to_string()))
}

/// The experiment id's part for a block order.
fn order_id(order: BlockOrder) -> &'static str {
    match order {
        BlockOrder::CrossSelf => "cross-self",
        BlockOrder::SelfCross => "self-cross",
        BlockOrder::CrossCross => "cross-cross",
    }
}

/// Table 2: GNOT with each block order on each benchmark; "cross + self" is Table 1's run.
fn table2(runs: &BenchmarkRuns, p: &mut Plan) -> Result<()> {
    for (col, task) in TABLE2_TASKS.into_iter().enumerate() {
        for (order, paper) in numbers::TABLE2 {
            let source = match order {
                BlockOrder::CrossSelf => runs
                    .source(p, "gnot", task)?
                    .with_context(|| format!("GNOT has no experiment on {}", task.key()))?,
                _ => {
                    let id = format!("{}/gnot-{}", task.key(), order_id(order));
                    gnot_version(runs, p, task, &id, |c| c.block_order = order)?
                }
            };
            let column = numbers::TABLE2_COLUMNS[col];
            p.cell(2, order.label(), column, "gnot", Some(paper[col]), source);
        }
    }
    Ok(())
}

/// Table 3: GNOT with E experts and one head, and with H heads and one expert (the run with one
/// of each fills a cell of both).
fn table3(runs: &BenchmarkRuns, profile: Profile, p: &mut Plan) -> Result<()> {
    let (experts, heads) = table3_counts(profile);
    let paper = |table: &[(i64, f64)], n: i64| table.iter().find(|r| r.0 == n).map(|r| r.1);
    let cells = experts
        .iter()
        .map(|&e| {
            (
                format!("N_experts = {e} (1 head)"),
                e,
                1,
                paper(&numbers::TABLE3_EXPERTS, e),
            )
        })
        .chain(heads.iter().map(|&h| {
            (
                format!("N_heads = {h} (1 expert)"),
                1,
                h,
                paper(&numbers::TABLE3_HEADS, h),
            )
        }));
    for (row, e, h, paper) in cells {
        let id = format!("{}/gnot-e{e}-h{h}", TABLE3_TASK.key());
        let source = gnot_version(runs, p, TABLE3_TASK, &id, |c| {
            c.n_experts = e;
            c.n_head = h;
        })?;
        p.cell(3, &row, TABLE3_COLUMN, "gnot", paper, source);
    }
    Ok(())
}

/// The report's section on how a profile's runs differ from the paper's.
pub fn differences(profile: Profile) -> String {
    let not_ported = numbers::TABLE1_NOT_PORTED
        .iter()
        .map(|(row, v)| {
            let cells: Vec<String> = numbers::TABLE1_COLUMNS
                .iter()
                .zip(v)
                .map(|(c, v)| format!("{c} {}", v.map_or("–".to_string(), |v| format!("{v:.2e}"))))
                .collect();
            format!("{row} ({})", cells.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ");
    let common = format!("- **Rows left out**: MIONet and OFormer are not ported (the paper's numbers: {not_ported}). FNO(-interp) on Elasticity and NACA interpolates the mesh onto a grid first, which is not ported either: those two cells show \"–\".\n- **Columns left out**: NS2d-c (Tables 1 and 2), Inductor2d, Heat and Heatsink are GNOT's own sets, published by its authors as files this project does not read, and made by no generator here; GNOT's appendix, which describes them, is not in this project's copy of the paper, so a generated stand-in would be our invention rather than their data. NS2d's \"full\" row (more training samples) is left out; \"part\" is the ONO paper's NS2d benchmark.\n- **Table 3 runs on Elasticity in place of Heat**: the paper's claim (three experts suit Heat's three subdomains) is about Heat; on Elasticity the table shows how the counts change GNOT on another irregular problem, and the paper column is Heat's.\n- Table 1's runs are the ONO paper's benchmark experiments (the same files under `experiments/`, the same data, sizes and seeds, so a cell of both reports is one run); the GK-Transformer's Elasticity and NACA files (`experiments/gnot/galerkin_*.toml`) are ours, within GNOT's stated search, because the paper's appendix with its baselines' settings is not published with its code.\n- Table 2's other orders are GNOT's experiment with `block_order` changed: the reference has only \"cross + self\", so \"self + cross\" and \"cross + cross\" are built from the same parts (docs/models.md).\n");
    match profile {
        Profile::Paper => format!("{common}- The published files: Darcy and NS2d (FNO's), Elasticity and NACA (Geo-FNO's), at each experiment file's settings.\n"),
        Profile::Quick | Profile::Smoke => format!("{common}- **The ONO paper's reduced data**: the neuraloperator 0.3.0 wheel's Darcy (16²), the reduced NS2d generator, and the point-cloud stand-in for Elasticity (generated Darcy on random points); NACA reads the published files when they are in the data folder.\n- **Smaller everything**: fewer samples and epochs and narrower, shallower models of the same architectures (the ONO paper's reduced sizes), so the numbers are **not comparable in size** to the paper's; the profile checks that every model learns its task and whether the findings hold at this scale.\n"),
    }
}
