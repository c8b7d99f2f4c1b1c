//! `ono compare`: every chosen operator trained on one dataset file (yours, from `ono data
//! import`, or any other) with its own recipe adapted to the data's kind, one budget for all,
//! and a report. Built on `reproduce`'s machinery: each model is an experiment in its own
//! folder (a finished one is skipped, an interrupted one resumes), and its result is
//! `reproduce`'s outcome.
//!
//! The recipe of a model is its committed base experiment of the paper's benchmark of the same
//! kind: Darcy's for a 2-D grid, Elasticity's for point clouds (`experiments/`, as `reproduce`
//! reads them), with the data, the epochs and the batch (at most the training samples) changed.
//! Before training, a few batches are timed in a process of their own (`ono bench-train`): the
//! time per batch and peak memory of the report, and a first forward pass that lets an
//! architecture refuse the data (a padding mask it cannot take, …) by its own words.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use ono_data::normalizer::NormalizerKind;
use ono_models::ModelConfig;
use ono_nn::attention::Landmarks;
use ono_nn::orthogonal::KernelScale;
use ono_train::bench_train::BatchReport;
use ono_train::config::TrainConfig;
use ono_train::run_folder::{Record, RecordFile};
use ono_train::RunFolder;

use crate::message::{self, Ended, Message};
use crate::reproduce::execute::{self, Outcome, Status};
use crate::reproduce::plan::{self, Experiment, Task, Work};
use crate::reproduce::RunContext;

/// The command's options.
#[derive(clap::Args)]
pub struct Options {
    /// The dataset file (from `ono data import`, `ono data darcy`, …).
    #[arg(long)]
    pub data: PathBuf,
    /// The models, comma-separated (fno, galerkin, geofno, ufno, ffno, lsm, gnot, ono,
    /// transolver); default: all.
    #[arg(long, value_delimiter = ',')]
    pub models: Option<Vec<String>>,
    /// Epochs per model (models of different batch sizes then take different numbers of
    /// optimizer steps; `--steps` and `--minutes` do not).
    #[arg(long, conflicts_with_all = ["minutes", "steps"])]
    pub epochs: Option<u64>,
    /// Optimizer steps per model: each model's epochs from its batches per epoch (at least
    /// one), so that every model takes about the same number of steps whatever its batch.
    #[arg(long, conflicts_with = "minutes")]
    pub steps: Option<u64>,
    /// Training time per model, in minutes: its epochs from its own timed batches (at least
    /// one; kept by later calls so that a resumed run is the same run).
    #[arg(long)]
    pub minutes: Option<f64>,
    /// Where results go (default: results/compare).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// Torch intra-op threads (default: libtorch's).
    #[arg(long)]
    pub threads: Option<i32>,
    /// The seed of every run (the first, with `--seeds`).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Runs per model, at seeds `--seed`, `--seed` + 1, …: the report gives their mean and
    /// spread (re-runs of these models on small data move by tens of percent).
    #[arg(long, default_value_t = 1)]
    pub seeds: u64,
    /// The models' sizes: `quick` (the quick profile's, which train in minutes on a CPU) or
    /// `paper` (the published presets). Default: quick on a CPU, paper on CUDA.
    #[arg(long, value_enum)]
    pub size: Option<Size>,
}

/// How large the compared models are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Size {
    Quick,
    Paper,
}

/// What became of one model.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "result")]
pub enum Entry {
    /// Trained (or failed while training): `reproduce`'s outcome and the timed batches.
    Run {
        model: String,
        /// Its seed (`--seeds` runs each model at several).
        #[serde(default)]
        seed: u64,
        outcome: Box<Outcome>,
        bench: Option<BatchReport>,
        epochs: u64,
    },
    /// Not trained, and why.
    Refused { model: String, why: String },
}

/// The comparison, machine readable (`summary.json` of the output folder).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Comparison {
    pub data: PathBuf,
    pub kind: String,
    pub machine: String,
    pub device: String,
    pub commit: String,
    pub finished: String,
    /// The error of the training targets' mean at the nearest training points, one per sample
    /// (`ono_train::evaluate::local_mean_field_error`): the floor by position where the samples'
    /// points differ (the report's mean field column is then a constant field's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub local_mean_field: Option<f64>,
    pub entries: Vec<Entry>,
}

impl Record for Comparison {
    const FILE: RecordFile = RecordFile::Summary;
}

/// A model's timed batches and the micro-batching they were timed with (its bench record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Timed {
    pub accumulate_steps: u64,
    pub report: BatchReport,
}

impl Record for Timed {
    const FILE: RecordFile = RecordFile::Bench;
}

/// What every model is given: epochs, optimizer steps or training minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Limit {
    Epochs(u64),
    Steps(u64),
    Minutes(f64),
}

/// The budget a model was given, kept in its folder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Granted {
    /// The training minutes it was given, when the budget was in minutes.
    pub minutes: Option<f64>,
    /// The epochs that budget came to.
    pub epochs: u64,
}

impl Record for Granted {
    const FILE: RecordFile = RecordFile::Budget;
}

/// Runs the comparison; `Ok(false)` when a model failed.
pub fn run(o: Options) -> Result<bool> {
    crate::device(&o.device)?;
    if let Some(n) = o.threads {
        anyhow::ensure!(n > 0, "--threads must be positive");
        tch::set_num_threads(n);
    }
    if let Some(m) = o.minutes {
        anyhow::ensure!(m > 0.0 && m.is_finite(), "--minutes must be positive");
    }
    anyhow::ensure!(o.epochs != Some(0), "--epochs must be at least 1");
    anyhow::ensure!(o.steps != Some(0), "--steps must be at least 1");
    let limit = match (o.minutes, o.steps) {
        (Some(m), _) => Limit::Minutes(m),
        (None, Some(s)) => Limit::Steps(s),
        (None, None) => Limit::Epochs(o.epochs.unwrap_or(10)),
    };
    let data = o
        .data
        .canonicalize()
        .with_context(|| format!("--data: {}", o.data.display()))?;
    // Read once: what decides the recipes and the budgets.
    let facts = {
        let ds = ono_data::dataset::TensorDataset::read(&data)?;
        let size = o.size.unwrap_or(if o.device == "cpu" {
            Size::Quick
        } else {
            Size::Paper
        });
        Facts {
            path: data.clone(),
            kind: DataKind::of(&ds),
            ntrain: ds.train.len(),
            inputs: ds.train.fx.size()[2],
            unit_box: in_unit_box(&ds)?,
            size,
            local_mean_field: ono_train::evaluate::local_mean_field_error(&ds)?,
        }
    };
    let (kind, ntrain) = (&facts.kind, facts.ntrain);
    let models = match &o.models {
        Some(m) => m.clone(),
        None => plan::MODELS.iter().map(|m| m.to_string()).collect(),
    };
    if let Some(m) = models.iter().find(|m| !plan::MODELS.contains(&m.as_str())) {
        anyhow::bail!("--models: `{m}` is not one of {}", plan::MODELS.join(", "));
    }
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("results").join("compare"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize()?;
    let ctx = RunContext {
        exe: std::env::current_exe().context("finding the ono binary")?,
        device: o.device.clone(),
        threads: o.threads,
        graphs: None,
        machine: crate::reproduce::machine(),
        commit: crate::reproduce::commit(),
        quiet: false,
        eval_batch: 4,
        train_eval: true,
        rehearsal: false,
        reference: None,
        nproc_per_node: None,
        paper: crate::reproduce::papers::Paper::Ono,
    };
    eprintln!(
        "{}: {}, {ntrain} training samples",
        data.display(),
        kind.describe()
    );
    let mut entries = Vec::new();
    'models: for (i, model) in models.iter().enumerate() {
        for seed in o.seed..o.seed + o.seeds {
            let mut label = format!("[{}/{}] {model}", i + 1, models.len());
            if o.seeds > 1 {
                label.push_str(&format!(" seed {seed}"));
            }
            let cfg = match recipe(model, &facts, seed)? {
                Ok(cfg) => cfg,
                Err(why) => {
                    eprintln!("{label}: refused: {why}");
                    entries.push(Entry::Refused {
                        model: model.clone(),
                        why,
                    });
                    continue 'models;
                }
            };
            let entry = run_model(
                model,
                cfg,
                &run_dir(&out, model, seed - o.seed),
                limit,
                &facts,
                &ctx,
                &label,
            )?;
            let refused = matches!(entry, Entry::Refused { .. });
            entries.push(entry);
            if refused {
                continue 'models;
            }
        }
    }
    let failed = entries.iter().any(
        |e| matches!(e, Entry::Run { outcome, .. } if matches!(outcome.status, Status::Failed(_))),
    );
    let summary = Comparison {
        data,
        kind: kind.describe(),
        machine: ctx.machine.clone(),
        device: ctx.device.clone(),
        commit: ctx.commit.clone(),
        finished: crate::reproduce::utc_now(),
        local_mean_field: facts.local_mean_field,
        entries,
    };
    RunFolder::new(&out).write(&summary)?;
    let mut md = report(&summary, &out);
    match plot(&out, &summary.entries) {
        Ok(Some(png)) => md.push_str(&format!(
            "\n![test relative L2 per epoch of every trained model]({png})\n"
        )),
        Ok(None) => {}
        Err(e) => eprintln!("compare.png: {e}"),
    }
    ono_io::atomic::write_atomic(&out.join("report.md"), md.as_bytes())?;
    eprintln!("report: {}", out.join("report.md").display());
    Ok(!failed)
}

/// The folder of a model's `k`-th seed: the model's name for the first, `<model>@seed<k>` after.
fn run_dir(out: &Path, model: &str, k: u64) -> RunFolder {
    RunFolder::new(match k {
        0 => out.join(model),
        k => out.join(format!("{model}@seed{k}")),
    })
}

/// What the recipes and budgets need to know of the data file.
struct Facts {
    path: PathBuf,
    kind: DataKind,
    /// Training samples.
    ntrain: i64,
    /// Input channels at the points.
    inputs: i64,
    /// Every coordinate of every sample lies in [-1, 1].
    unit_box: bool,
    size: Size,
    /// The mean field by position, where the samples' points differ.
    local_mean_field: Option<f64>,
}

/// Whether every coordinate of `ds` lies in [-1, 1] (padding rows are zeros, inside it): the
/// range the models' coordinate inputs were designed for.
fn in_unit_box(ds: &ono_data::dataset::TensorDataset) -> Result<bool> {
    let mut inside = true;
    for split in [&ds.train, &ds.test] {
        let largest = split.pos.f_abs()?.f_max()?.f_double_value(&[])?;
        inside &= largest <= 1.0;
    }
    Ok(inside)
}

/// The kind of a dataset, which decides the recipes.
#[derive(Debug, Clone, PartialEq)]
enum DataKind {
    /// A regular grid of this shape.
    Grid(Vec<i64>),
    /// Point clouds; `ragged` when the samples differ in size.
    Points { ragged: bool, max: i64 },
}

impl DataKind {
    fn of(ds: &ono_data::dataset::TensorDataset) -> Self {
        match &ds.grid {
            Some(g) => DataKind::Grid(g.clone()),
            None => DataKind::Points {
                ragged: ds.train.lengths.is_some() || ds.test.lengths.is_some(),
                max: ds.train.points().max(ds.test.points()),
            },
        }
    }

    fn describe(&self) -> String {
        match self {
            DataKind::Grid(g) => format!("a grid {g:?}"),
            DataKind::Points { ragged: true, max } => {
                format!("point clouds of different sizes (up to {max} points)")
            }
            DataKind::Points { ragged: false, max } => format!("point clouds of {max} points"),
        }
    }
}

/// The experiment of `model` on the data, or why it has none.
fn recipe(
    model: &str,
    facts: &Facts,
    seed: u64,
) -> Result<std::result::Result<TrainConfig, String>> {
    let (kind, data, ntrain) = (&facts.kind, facts.path.as_path(), facts.ntrain);
    let task = match kind {
        DataKind::Grid(g) if g.len() == 2 => Task::Darcy,
        DataKind::Grid(g) => {
            return Ok(Err(format!(
                "the recipes here are for 2-D grids and point clouds; this grid is {}-D",
                g.len()
            )))
        }
        DataKind::Points { .. } => Task::Elasticity,
    };
    let why = match (model, task) {
        ("fno", Task::Elasticity) => Some(
            "FNO's spectral layers are FFTs over a regular grid, and these data are point clouds (Geo-FNO and the attention models take them)",
        ),
        ("geofno", Task::Darcy) => Some(
            "on a regular grid Geo-FNO is FNO (the paper's tables reuse FNO's runs): see the fno row",
        ),
        ("galerkin", Task::Darcy) => Some(
            "its Darcy recipe reads a fine grid beside the training one (its derivative targets), which a dataset file does not carry",
        ),
        ("galerkin", Task::Elasticity) => Some(
            "the Galerkin Transformer has no point-cloud recipe (its papers train it on grids only)",
        ),
        _ => None,
    };
    if let Some(why) = why {
        return Ok(Err(why.to_string()));
    }
    let Some(mut cfg) = plan::base(model, task)? else {
        return Ok(Err(format!(
            "no committed recipe for {model} on {}",
            task.key()
        )));
    };
    let benchmark = cfg.data.benchmark;
    let recipe = benchmark.map(|b| ono_train::recipe::recipe(b, cfg.data.layout));
    let d = &mut cfg.data;
    d.path = Some(data.to_path_buf());
    d.benchmark = None;
    d.data_dir = None;
    d.r = None;
    d.ntrain = None;
    d.ntest = None;
    if let Some(r) = &recipe {
        d.normalize_x = d.normalize_x.or(Some(r.normalize_x));
        d.normalize_y = d.normalize_y.or(Some(r.normalize_y));
        cfg.loss.kind = cfg.loss.kind.or(Some(r.loss));
    }
    if let DataKind::Points { .. } = kind {
        // Elasticity's recipes leave its raw coordinates in [0, 1] and its targets as they are;
        // a user's fields and meshes come in any units. One mean and std per channel over every
        // real point (the padding does not count), as ONO's and GNOT's UnitTransformer.
        let d = &mut cfg.data;
        if facts.inputs > 0 {
            d.normalize_x = Some(NormalizerKind::Unit);
        }
        d.normalize_y = Some(NormalizerKind::Unit);
        if !facts.unit_box {
            d.normalize_pos = Some(NormalizerKind::Unit);
        }
    }
    if facts.size == Size::Quick {
        let side = match kind {
            DataKind::Grid(g) => g.iter().copied().min(),
            DataKind::Points { .. } => None,
        };
        plan::shrink_model(&mut cfg, false, side, task == Task::Darcy)?;
    }
    // The reference's 256 landmarks on a few hundred points are mostly zero padding (and its
    // pseudo-inverse most of the step): attend exactly up to 256 points, with fewer landmarks
    // beyond (`ono_nn::attention::Landmarks`).
    // On samples of different sizes ψ̃ᵀf is averaged over each sample's points rather than
    // summed, so one operator serves every size: 0.131 against 0.139 on the worked example of
    // docs/data.md (two seeds each; docs/ono.md, "The kernel's scale"). On one grid the
    // reference's sum trained better (Table 3's cell: 0.098 against 0.116 at the trained 43²).
    let ragged = matches!(kind, DataKind::Points { ragged: true, .. });
    cfg.model.edit(|m| {
        if let ModelConfig::Ono(c) = m {
            c.landmarks = Landmarks::Auto;
            if ragged {
                c.kernel_scale = KernelScale::Mean;
            }
        }
    })?;
    // Darcy's derivative term is about Darcy's solution, not these data.
    cfg.loss.derivative_alpha = Some(0.0);
    // Geo-FNO's point-cloud model takes the coordinates alone.
    if model == "geofno" && matches!(kind, DataKind::Points { .. }) && facts.inputs > 0 {
        return Ok(Err(
            "Geo-FNO's point-cloud model (Elasticity's) takes the coordinates alone, and these data have input arrays at the points".to_string(),
        ));
    }
    cfg.batch_size = cfg.batch_size.min(ntrain);
    cfg.seed = seed;
    cfg.output_dir = PathBuf::from(".");
    Ok(Ok(cfg))
}

/// Times, then trains `model` in `dir` (skipping a finished run, resuming an interrupted one).
fn run_model(
    model: &str,
    mut cfg: TrainConfig,
    dir: &RunFolder,
    limit: Limit,
    facts: &Facts,
    ctx: &RunContext,
    label: &str,
) -> Result<Entry> {
    let _lock = dir.lock()?;
    // The timed batches first: a model that refuses the data stops here.
    cfg.epochs = 1;
    let bench = match dir.read::<Timed>() {
        Some(t) => {
            cfg.accumulate_steps = t.accumulate_steps;
            t.report
        }
        None => {
            let mut result = timed(&mut cfg, dir, ctx)?;
            // An architecture without padding masks still trains on samples of different sizes
            // one sample at a time: micro-batches of one (no padding) accumulated into the
            // recipe's batch give the padded batch's gradients.
            if matches!(result, Err(Refusal::Refused(_)))
                && matches!(facts.kind, DataKind::Points { ragged: true, .. })
                && cfg.batch_size > 1
                && cfg.accumulate_steps <= 1
            {
                cfg.accumulate_steps = cfg.batch_size as u64;
                eprintln!(
                    "{label}: it takes no padding mask; its batches of {} run one sample at a time (accumulate_steps = {})",
                    cfg.batch_size, cfg.accumulate_steps
                );
                result = timed(&mut cfg, dir, ctx)?;
            }
            match result {
                Ok(b) => {
                    let t = Timed {
                        accumulate_steps: cfg.accumulate_steps,
                        report: b,
                    };
                    dir.write(&t)?;
                    t.report
                }
                Err(Refusal::Refused(why)) => {
                    eprintln!("{label}: refused: {why}");
                    return Ok(Entry::Refused {
                        model: model.into(),
                        why,
                    });
                }
                Err(Refusal::Failed(why)) => {
                    eprintln!("{label}: FAILED before training: {why}");
                    let e = experiment(model, &cfg);
                    let mut outcome = Outcome::new(&e, ctx);
                    outcome.status = Status::Failed(why);
                    return Ok(Entry::Run {
                        model: model.into(),
                        seed: cfg.seed,
                        outcome: Box::new(outcome),
                        bench: None,
                        epochs: 0,
                    });
                }
            }
        }
    };
    let minutes = match limit {
        Limit::Minutes(m) => Some(m),
        _ => None,
    };
    let kept = dir
        .read::<Granted>()
        .filter(|b| b.minutes.is_some() && b.minutes == minutes);
    // Optimizer steps per epoch (micro-batches accumulate into one step).
    let batches = (facts.ntrain as u64)
        .div_ceil(bench.batch.max(1) as u64)
        .max(1);
    let budget = match (kept, limit) {
        (Some(b), _) => b,
        (None, Limit::Minutes(m)) => {
            let per_epoch = bench.median_s * batches as f64;
            Granted {
                minutes,
                epochs: ((m * 60.0 / per_epoch.max(1e-9)).floor() as u64).max(1),
            }
        }
        (None, Limit::Steps(s)) => Granted {
            minutes: None,
            epochs: s.div_ceil(batches).max(1),
        },
        (None, Limit::Epochs(e)) => Granted {
            minutes: None,
            epochs: e,
        },
    };
    dir.write(&budget)?;
    cfg.epochs = budget.epochs;
    let e = experiment(model, &cfg);
    let mut outcome = match execute::finished(dir, &e) {
        Some(o) => {
            eprintln!(
                "{label}: done before ({:.4e})",
                o.test_rel_l2.unwrap_or(f64::NAN)
            );
            o
        }
        None => {
            eprintln!("{label}: {} epochs", budget.epochs);
            let o = execute::run(&e, dir, ctx);
            match &o.status {
                Status::Done => eprintln!(
                    "{label}: test relative L2 {:.4e} in {:.0} s",
                    o.test_rel_l2.unwrap_or(f64::NAN),
                    o.wall_s
                ),
                Status::Failed(m) | Status::MissingData(m) => eprintln!("{label}: FAILED: {m}"),
            }
            o
        }
    };
    outcome.params = Some(bench.params);
    outcome.step_s = Some(bench.median_s);
    outcome.peak_mb = bench.peak_rss_mb;
    Ok(Entry::Run {
        model: model.into(),
        seed: cfg.seed,
        outcome: Box::new(outcome),
        bench: Some(bench),
        epochs: budget.epochs,
    })
}

/// The timed batches of `cfg` (its experiment file written to the folder's
/// [`RunFolder::timing`]).
fn timed(
    cfg: &mut TrainConfig,
    dir: &RunFolder,
    ctx: &RunContext,
) -> Result<std::result::Result<BatchReport, Refusal>> {
    let file = execute::write_experiment(&dir.timing(), &execute::as_run(cfg, ctx))?;
    bench_train(&file, ctx)
}

fn experiment(model: &str, cfg: &TrainConfig) -> Experiment {
    Experiment {
        id: model.to_string(),
        model: model.to_string(),
        work: Work::Train {
            config: Box::new(cfg.clone()),
            strides: Vec::new(),
            test_resolutions: Vec::new(),
        },
        data_note: String::new(),
        replicate_of: None,
    }
}

enum Refusal {
    Refused(String),
    Failed(String),
}

/// `ono bench-train FILE` in a process of its own: its peak memory is this model's alone.
fn bench_train(file: &Path, ctx: &RunContext) -> Result<std::result::Result<BatchReport, Refusal>> {
    let mut cmd = Command::new(&ctx.exe);
    cmd.env("RUST_BACKTRACE", "0")
        .arg("bench-train")
        .arg(file)
        .args(["--steps", "2", "--warmup", "1"]);
    Ok(match message::run(cmd, |_| {})? {
        Ended::Said(Message::BatchTimes(report)) => Ok(report),
        Ended::Said(Message::Refused { why }) => Err(Refusal::Refused(why)),
        other => Err(Refusal::Failed(format!(
            "bench-train: {}",
            other.describe()
        ))),
    })
}

/// `compare.png`: the test error per epoch of every trained model, from its last checkpoint's
/// history; `None` when no model has one.
fn plot(out: &Path, entries: &[Entry]) -> Result<Option<String>> {
    let mut series = Vec::new();
    for e in entries {
        let Entry::Run { model, .. } = e else {
            continue;
        };
        if let Ok(Some(state)) = RunFolder::new(out.join(model)).last_state() {
            let points = state
                .history
                .iter()
                .filter_map(|r| r.test_rel_l2.map(|v| ((r.epoch + 1) as f64, v)))
                .collect();
            series.push(ono_plot::Series::new(plan::model_label(model), points));
        }
    }
    if series.is_empty() {
        return Ok(None);
    }
    let name = "compare.png";
    ono_plot::training_curves(
        &out.join(name),
        "test relative L2",
        "epoch",
        "relative L2",
        &series,
    )?;
    Ok(Some(name.into()))
}

/// A model's row of `report.md`: its run, or the mean (± the sample standard deviation, with
/// the range) of its runs at several seeds.
fn run_row(model: &str, runs: &[&Entry], out: &Path) -> String {
    let num = |v: Option<f64>, f: &dyn Fn(f64) -> String| v.map_or("–".into(), f);
    let parts: Vec<(&Outcome, &Option<BatchReport>, u64)> = runs
        .iter()
        .filter_map(|e| match e {
            Entry::Run {
                outcome,
                bench,
                epochs,
                ..
            } => Some((outcome.as_ref(), bench, *epochs)),
            Entry::Refused { .. } => None,
        })
        .collect();
    let Some(&(first, bench, epochs)) = parts.first() else {
        return String::new();
    };
    let mean = |f: &dyn Fn(&Outcome) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = parts.iter().filter_map(|p| f(p.0)).collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    };
    let failed = parts.iter().find_map(|p| match &p.0.status {
        Status::Failed(m) | Status::MissingData(m) => Some(m),
        Status::Done => None,
    });
    let tests: Vec<f64> = parts.iter().filter_map(|p| p.0.test_rel_l2).collect();
    let err = match (failed, tests.len()) {
        (Some(m), _) => format!("failed: {}", m.replace('|', "/").replace('\n', " ")),
        (None, 0) => "–".into(),
        (None, 1) => format!("{:.4e}", tests[0]),
        (None, n) => {
            let m = tests.iter().sum::<f64>() / n as f64;
            let sd = (tests.iter().map(|t| (t - m).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt();
            let (lo, hi) = tests
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &t| (a.min(t), b.max(t)));
            format!("{m:.4e} ± {sd:.1e} ({n} seeds, {lo:.3e}–{hi:.3e})")
        }
    };
    // Relative to the report, which lies in `out`.
    let folder = RunFolder::new(model);
    let links: Vec<String> = [("curves", folder.curves()), ("panels", folder.panels())]
        .into_iter()
        .filter(|(_, f)| out.join(f).is_file())
        .map(|(name, f)| format!("[{name}]({})", f.display()))
        .collect();
    let steps = match (first.steps, bench) {
        (Some(s), Some(b)) => format!("{s} × {}", b.batch),
        (Some(s), None) => s.to_string(),
        (None, _) => "–".into(),
    };
    format!(
        "| {} | {err} | {} | {} | {} | {epochs} | {steps} | {} | {} | {} | {} | {} |\n",
        plan::model_label(model),
        num(first.mean_field, &|v| format!("{v:.4e}")),
        num(mean(&|o| o.train_loss), &|v| format!("{v:.4e}")),
        num(mean(&|o| o.train_eval_rel_l2), &|v| format!("{v:.4e}")),
        first.params.map_or("–".into(), |p| p.to_string()),
        num(first.step_s, &|v| format!("{v:.3}")),
        num(first.peak_mb, &|v| format!("{v:.0}")),
        crate::reproduce::clock(parts.iter().map(|p| p.0.wall_s).sum()),
        if links.is_empty() {
            "–".into()
        } else {
            links.join(", ")
        }
    )
}

/// `report.md`: one row per model.
fn report(s: &Comparison, out: &Path) -> String {
    let mut md = format!(
        "# Comparison on {}\n\nData: {} ({}). Machine: {}, device {}. Commit {}. Finished {}.\n\n\
         Each model trains with its committed recipe for the paper's benchmark of this kind \
         (`experiments/`), the same budget for all; errors are the test split's relative L2 \
         of the last epoch's checkpoint, the mean field is the error of predicting the training \
         targets' mean. The training loss is the last epoch's, in the recipe's loss and in \
         training mode; beside it the result's relative L2 on the training samples in evaluation mode: far apart, the two \
         modes disagree (running statistics). Time per batch and peak memory are from `ono \
         bench-train` in a process of its own.\n\n\
         | model | test rel. L2 | mean field | train loss | train, eval mode | epochs | steps × batch | parameters | s / batch | peak MB | wall | curves |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        s.data.display(),
        s.data.display(),
        s.kind,
        s.machine,
        s.device,
        s.commit,
        s.finished
    );
    if let Some(v) = s.local_mean_field {
        // Inserted before the table: the samples' points differ, so the column's floor is a
        // constant field; this one follows the position.
        let at = md.find("| model |").unwrap_or(md.len());
        md.insert_str(
            at,
            &format!(
                "The samples' points differ, so the mean field column is a constant field per \
                 channel; by position (at each test point the training targets' mean at the \
                 nearest training points, one per sample) the floor is {v:.4e}.\n\n"
            ),
        );
    }
    let mut models: Vec<&str> = Vec::new();
    for e in &s.entries {
        let model = match e {
            Entry::Run { model, .. } | Entry::Refused { model, .. } => model.as_str(),
        };
        if !models.contains(&model) {
            models.push(model);
        }
    }
    for model in models {
        let runs: Vec<&Entry> = s
            .entries
            .iter()
            .filter(|e| matches!(e, Entry::Run { model: m, .. } if m == model))
            .collect();
        let refusal = s.entries.iter().find_map(|e| match e {
            Entry::Refused { model: m, why } if m == model => Some(why),
            _ => None,
        });
        match (runs.is_empty(), refusal) {
            (true, Some(why)) => md.push_str(&format!(
                "| {} | refused: {} | | | | | | | | | | |\n",
                plan::model_label(model),
                why.replace('|', "/")
            )),
            _ => md.push_str(&run_row(model, &runs, out)),
        }
    }
    md
}
