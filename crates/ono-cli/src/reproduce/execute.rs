//! Running the plan: the generated data first, then each experiment in its own folder. A finished
//! experiment leaves `result.json` and is skipped by the next call (when its experiment file is
//! unchanged); an interrupted one resumes from its last checkpoint.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use ono_train::checkpoint::Checkpoint;
use ono_train::config::TrainConfig;
use ono_train::evaluate::{evaluate_checkpoint, EvalData};
use ono_train::progress::Progress;
use ono_train::run_folder::{Record, RecordFile};
use ono_train::{RunFolder, RunSpec, Trainer};

use crate::data::{DarcyArgs, GenArgs};
use crate::message::{self, Ended, Message};
use ono_data::benchmarks::Benchmark;

use super::plan::{DataPaths, Experiment, Measure, Profile, Reduced, Work};
use super::RunContext;

/// Trajectories the reduced NS2d generator solves together.
const NS2D_GEN_BATCH: usize = 100;

/// How an experiment ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status", content = "detail")]
pub enum Status {
    Done,
    /// A published file is not in the data folder (the message names it and where it is
    /// published).
    MissingData(String),
    Failed(String),
}

/// What an experiment produced (its folder's result record).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Outcome {
    pub id: String,
    #[serde(flatten)]
    pub status: Status,
    /// Test relative L2 of the result checkpoint.
    pub test_rel_l2: Option<f64>,
    /// The same error of the training targets' mean field.
    pub mean_field: Option<f64>,
    /// Per rolled-out step, for time series.
    #[serde(default)]
    pub per_step: Vec<f64>,
    /// Test error at other strides of the benchmark ("7" → error).
    #[serde(default)]
    pub at_stride: BTreeMap<String, f64>,
    /// Grid side at those strides ("7" → 61).
    #[serde(default)]
    pub grid_at_stride: BTreeMap<String, i64>,
    /// Test error with the test set at other resolutions ("32" → error).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub at_resolution: BTreeMap<String, f64>,
    /// The last epoch's mean training loss (training mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_loss: Option<f64>,
    /// The result's relative L2 on the training samples in evaluation mode (`ono compare`):
    /// beside `train_loss`, what training and evaluation mode disagree by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_eval_rel_l2: Option<f64>,
    /// Optimizer steps trained.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steps: Option<u64>,
    /// Median seconds per training step (Table 2).
    pub step_s: Option<f64>,
    pub params: Option<i64>,
    pub peak_mb: Option<f64>,
    /// Seconds this experiment took (all its sessions: resumed runs add up).
    pub wall_s: f64,
    /// UTC time it finished.
    pub finished: String,
    pub machine: String,
    pub device: String,
    pub commit: String,
    /// The experiment as run; a changed plan reruns it.
    pub experiment: Recorded,
    /// The PyTorch reference loop on the same run (`--reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<Reference>,
}

/// The PyTorch reference loop (`benches/pytorch/train_ref.py`) on a trained experiment's
/// hand-off, in `<experiment>/reference/`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "status")]
pub enum Reference {
    Done {
        /// The reference's test error.
        test_rel_l2: f64,
        /// Seconds of the reference's epochs (training and evaluation).
        train_s: f64,
        /// Seconds of our epochs (metrics.jsonl), the same work.
        ours_train_s: f64,
        /// The restatement it trained.
        network: String,
        /// `torch.__version__` and its threads.
        torch: String,
        threads: i32,
    },
    /// The loop restates no part this run needs (its message).
    Refused {
        why: String,
    },
    Failed {
        why: String,
    },
}

/// Where the reference loop runs: a Python with torch (and the restatements' packages) and the
/// loop's script.
#[derive(Debug, Clone)]
pub struct ReferenceLoop {
    pub python: PathBuf,
    pub script: PathBuf,
}

/// The exit status of `train_ref.py` for a run it does not restate.
const REFUSED: i32 = 3;

/// The reference loop on trained experiment `e` in `dir` (after ours): its hand-off written to
/// the folder's [`RunFolder::reference`], the loop run there unless its result is there for the
/// same hand-off. `None` for an experiment that trains nothing.
pub fn reference(e: &Experiment, dir: &RunFolder, rl: &ReferenceLoop) -> Option<Reference> {
    if !matches!(e.work, Work::Train { .. }) {
        return None;
    }
    Some(
        run_reference(dir, rl).unwrap_or_else(|err| Reference::Failed {
            why: format!("{err:#}"),
        }),
    )
}

fn run_reference(dir: &RunFolder, rl: &ReferenceLoop) -> Result<Reference> {
    use ono_train::handoff::{Handoff, ReferenceResult};
    let cfg = TrainConfig::from_file(&dir.experiment_file())?;
    let run = RunSpec::resolve(cfg)?;
    let folder = dir.reference();
    let spec = Handoff::of(&run)?;
    let cached =
        Handoff::read(&folder).ok() == Some(spec) && ReferenceResult::read(&folder).is_ok();
    if !cached {
        // A result of another hand-off must not be read as this one's.
        let _ = std::fs::remove_file(folder.join(ono_train::handoff::RESULT_FILE));
        Handoff::write(&run, &folder)?;
        drop(run);
        let out = Command::new(&rl.python)
            .arg(&rl.script)
            .arg(&folder)
            .arg("--quiet")
            .output()
            .with_context(|| format!("starting {}", rl.python.display()))?;
        let said = String::from_utf8_lossy(&out.stderr);
        let last = said
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        match out.status.code() {
            Some(0) => {}
            Some(REFUSED) => {
                return Ok(Reference::Refused {
                    why: last.trim_start_matches("train_ref: ").to_string(),
                })
            }
            _ => bail!("the reference loop failed ({}): {last}", out.status),
        }
    }
    let r = ReferenceResult::read(&folder)?;
    let ours_train_s = dir.read_metrics()?.iter().map(|r| r.seconds).sum();
    Ok(Reference::Done {
        test_rel_l2: r.test_rel_l2,
        train_s: r.history.iter().map(|h| h.seconds).sum(),
        ours_train_s,
        network: r.network,
        torch: r.torch,
        threads: r.threads,
    })
}

impl Outcome {
    /// A finished experiment without numbers yet, made now by this call.
    pub fn new(e: &Experiment, ctx: &RunContext) -> Self {
        Outcome {
            id: e.id.clone(),
            status: Status::Done,
            test_rel_l2: None,
            mean_field: None,
            per_step: Vec::new(),
            at_stride: BTreeMap::new(),
            grid_at_stride: BTreeMap::new(),
            at_resolution: BTreeMap::new(),
            train_loss: None,
            train_eval_rel_l2: None,
            steps: None,
            step_s: None,
            params: None,
            peak_mb: None,
            wall_s: 0.0,
            finished: super::utc_now(),
            machine: ctx.machine.clone(),
            device: ctx.device.clone(),
            commit: ctx.commit.clone(),
            experiment: Recorded::of(e),
            reference: None,
        }
    }
}

/// The experiment a result was made by, as `result.json` records it (the plan's experiment,
/// before the device and threads of the call are set).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Recorded {
    Train {
        train: RecordedConfig,
        strides: Vec<usize>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        test_resolutions: Vec<usize>,
    },
    Measure {
        measure: Measure,
    },
    TimeRun {
        time_run: Box<TrainConfig>,
        steps: usize,
    },
}

/// A trained experiment in `result.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordedConfig {
    Typed(Box<TrainConfig>),
    /// Written before the plan was typed: the experiment's table as the plan built it, without
    /// `output_dir`.
    Table(toml::Table),
}

impl RecordedConfig {
    fn config(&self) -> Option<TrainConfig> {
        match self {
            RecordedConfig::Typed(c) => Some(c.as_ref().clone()),
            RecordedConfig::Table(t) => {
                let mut t = t.clone();
                // Every run's `output_dir` is its folder; the old tables lack it.
                t.entry("output_dir")
                    .or_insert_with(|| toml::Value::String(".".into()));
                toml::Value::Table(t).try_into().ok()
            }
        }
    }
}

impl Recorded {
    /// How `e` is recorded.
    pub fn of(e: &Experiment) -> Self {
        match &e.work {
            Work::Train {
                config,
                strides,
                test_resolutions,
            } => Recorded::Train {
                train: RecordedConfig::Typed(config.clone()),
                strides: strides.clone(),
                test_resolutions: test_resolutions.clone(),
            },
            Work::Measure(m) => Recorded::Measure { measure: m.clone() },
            Work::TimeRun { config, steps } => Recorded::TimeRun {
                time_run: config.clone(),
                steps: *steps,
            },
        }
    }

    /// Whether this is the experiment `e`: the same settings and the same model once presets
    /// and overrides are resolved (results written by earlier versions of the plan, which
    /// spelled the same models with other overrides, still count).
    pub fn is(&self, e: &Experiment) -> bool {
        match (self, &e.work) {
            (
                Recorded::Train {
                    train,
                    strides,
                    test_resolutions,
                },
                Work::Train {
                    config,
                    strides: s,
                    test_resolutions: t,
                },
            ) => {
                strides == s
                    && test_resolutions == t
                    && train.config().is_some_and(|r| r.same_experiment(config))
            }
            (Recorded::TimeRun { time_run, steps }, Work::TimeRun { config, steps: s }) => {
                steps == s && time_run.same_experiment(config)
            }
            (Recorded::Measure { measure }, Work::Measure(m)) => {
                let model = |m: &Measure| m.model.config().ok();
                (&measure.shapes, measure.batch, measure.steps) == (&m.shapes, m.batch, m.steps)
                    && model(measure).is_some()
                    && model(measure) == model(m)
            }
            _ => false,
        }
    }
}

impl Record for Outcome {
    const FILE: RecordFile = RecordFile::Result;
}

/// The finished result of `e` in `dir`, if it is there and for the same experiment.
pub fn finished(dir: &RunFolder, e: &Experiment) -> Option<Outcome> {
    let o: Outcome = dir.read()?;
    (o.status == Status::Done && o.experiment.is(e)).then_some(o)
}

/// Generates the reduced profiles' data sets that the selected experiments read and that are
/// not there yet, in this process (each file is written atomically, and a marker beside it
/// records the `ono data` command that makes it).
pub fn prepare_data(profile: Profile, data: &DataPaths, experiments: &[Experiment]) -> Result<()> {
    for (out, line, job) in data_jobs(profile, data, experiments)? {
        let marker = out.with_extension("args");
        if out.is_file() && std::fs::read_to_string(&marker).ok().as_deref() == Some(&line) {
            continue;
        }
        eprintln!("[data] ono {line}");
        let start = Instant::now();
        match &job {
            DataJob::Gen(a) => crate::data::generate(a),
            DataJob::Darcy(a) => crate::data::darcy(a),
        }
        .with_context(|| format!("data generation failed: ono {line}"))?;
        ono_io::atomic::write_atomic(&marker, line.as_bytes())?;
        eprintln!("[data] done in {:.1} s", start.elapsed().as_secs_f64());
    }
    Ok(())
}

/// The data sets the experiments read from the generated folder: each file, the `ono data`
/// command line that makes it (its marker) and the job.
fn data_jobs(
    profile: Profile,
    data: &DataPaths,
    experiments: &[Experiment],
) -> Result<Vec<(PathBuf, String, DataJob)>> {
    let Some(r) = Reduced::of(profile) else {
        return Ok(Vec::new());
    };
    // The most training and test samples any experiment reads from a generated benchmark.
    let counts = |benchmarks: &[Benchmark]| -> Option<(i64, i64)> {
        experiments
            .iter()
            .filter_map(|e| match &e.work {
                Work::Train { config, .. } | Work::TimeRun { config, .. } => Some(&config.data),
                Work::Measure(_) => None,
            })
            .filter(|d| {
                d.data_dir.as_deref() == Some(data.generated.as_path())
                    && d.benchmark.is_some_and(|b| benchmarks.contains(&b))
            })
            .map(|d| (d.ntrain.unwrap_or(0), d.ntest.unwrap_or(0)))
            .reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)))
    };
    let reads = |needle: Option<Benchmark>| {
        experiments.iter().any(|e| match &e.work {
            Work::Train { config, .. } | Work::TimeRun { config, .. } => {
                let d = &config.data;
                match needle {
                    Some(b) => {
                        d.data_dir.as_deref() == Some(data.generated.as_path())
                            && d.benchmark == Some(b)
                    }
                    // The point clouds, a dataset file.
                    None => d.path.as_deref() == Some(data.cloud().as_path()),
                }
            }
            Work::Measure { .. } => false,
        })
    };
    std::fs::create_dir_all(&data.generated)
        .with_context(|| format!("creating {}", data.generated.display()))?;
    // Each job with the command line that makes the same file: the marker beside the file
    // records it, so that a data folder of an earlier version is reused as it was.
    let mut jobs: Vec<(PathBuf, String, DataJob)> = Vec::new();
    let count =
        |n: i64| usize::try_from(n).with_context(|| format!("the plan asks for {n} samples"));
    // The Darcy files serve the forward and the inverse problem alike.
    if let Some((ntrain, ntest)) = counts(&[Benchmark::Darcy, Benchmark::DarcyInverse]) {
        for (file, n, seed) in [
            ("piececonst_r421_N1024_smooth1.mat", ntrain, 1),
            ("piececonst_r421_N1024_smooth2.mat", ntest, 2),
        ] {
            let out = data.generated.join(file);
            let line = format!(
                "data gen darcy --res 421 --n {n} --seed {seed} --out {}",
                out.display()
            );
            let job = DataJob::Gen(generator("darcy", count(n)?, Some(421), seed, &out));
            jobs.push((out, line, job));
        }
    }
    if reads(Some(Benchmark::Ns2d)) {
        let n = r.ns2d.ntrain + r.ns2d.ntest;
        let out = data.generated.join("NavierStokes_V1e-5_N1200_T20.mat");
        // The trajectories depend on the batch (round-off, through the flow's instability): a
        // fixed batch keeps them the same whatever `n`.
        let line = format!(
            "data gen ns2d --profile reduced --n {n} --batch {NS2D_GEN_BATCH} --seed 0 --out {}",
            out.display()
        );
        let job = DataJob::Gen(GenArgs {
            profile: "reduced".into(),
            batch: Some(NS2D_GEN_BATCH),
            ..generator("ns2d", count(n)?, None, 0, &out)
        });
        jobs.push((out, line, job));
    }
    if let (Some((ntrain, ntest)), Some(res)) = (
        counts(&[Benchmark::Burgers]),
        super::galerkin::burgers_resolution(profile),
    ) {
        // The Galerkin layout trains on the first samples and tests on the last: one file of
        // both, with no sample in both splits.
        let n = ntrain + ntest;
        let out = data.generated.join("burgers_data_R10.mat");
        let line = format!(
            "data gen burgers --res {res} --n {n} --seed 0 --out {}",
            out.display()
        );
        let job = DataJob::Gen(generator("burgers", count(n)?, Some(res), 0, &out));
        jobs.push((out, line, job));
    }
    if reads(None) {
        let (ntrain, ntest) = (r.cloud.ntrain, r.cloud.ntest);
        let out = data.cloud();
        let line = format!(
            "data darcy --res {} --stride {} --points {} --n-train {ntrain} --n-test {ntest} --seed 3 --out {}",
            r.cloud_res,
            r.cloud_stride,
            r.cloud_points,
            out.display()
        );
        let job = DataJob::Darcy(DarcyArgs {
            n_train: count(ntrain)?,
            n_test: count(ntest)?,
            res: r.cloud_res,
            stride: r.cloud_stride,
            seed: 3,
            points: Some(r.cloud_points),
            out: out.clone(),
        });
        jobs.push((out, line, job));
    }
    Ok(jobs)
}

/// `ono data gen <kind> [--res] --n --seed --out` on the CPU, the generator's full profile.
fn generator(kind: &str, n: usize, res: Option<usize>, seed: u64, out: &Path) -> GenArgs {
    GenArgs {
        kind: kind.into(),
        n,
        res,
        seed,
        out: out.to_path_buf(),
        profile: "full".into(),
        device: "cpu".into(),
        t_final: None,
        batch: None,
        scheme: None,
    }
}

/// A data set reproduce generates, in this process.
enum DataJob {
    Gen(GenArgs),
    Darcy(DarcyArgs),
}

/// Runs `e` in `dir` (training resumes from the last checkpoint there) and writes its
/// `result.json` when it is done.
pub fn run(e: &Experiment, dir: &RunFolder, ctx: &RunContext) -> Outcome {
    let start = Instant::now();
    let spent_before = dir.read::<Spent>().map_or(0.0, |s| s.wall_s);
    if let Err(err) = dir.create() {
        eprintln!("{err}");
    }
    let result = match &e.work {
        Work::Train {
            config,
            strides,
            test_resolutions,
        } => train(config, strides, test_resolutions, dir, ctx),
        Work::Measure(m) => measure(m, ctx),
        Work::TimeRun { config, steps } => time_run(config, *steps, dir, ctx),
    };
    let mut o = Outcome::new(e, ctx);
    match result {
        Ok(fill) => fill(&mut o),
        Err(err) => {
            o.status = match missing_file(&err) {
                Some(m) => Status::MissingData(m),
                None => Status::Failed(format!("{err:#}")),
            }
        }
    }
    o.wall_s = spent_before + start.elapsed().as_secs_f64();
    if o.status == Status::Done {
        if let Err(err) = dir.write(&o) {
            o.status = Status::Failed(format!("{err:#}"));
        }
    } else {
        // Not a result: remember only the time spent, so that a later success adds it up.
        let _ = dir.write(&Spent { wall_s: o.wall_s });
    }
    o
}

/// The time an experiment spent in calls that did not finish it.
#[derive(Serialize, Deserialize)]
struct Spent {
    wall_s: f64,
}

impl Record for Spent {
    const FILE: RecordFile = RecordFile::Wall;
}

/// The message of a missing published file, when that is what `err` is.
fn missing_file(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|e| {
        let io = match e.downcast_ref::<ono_train::Error>() {
            Some(ono_train::Error::DataCrate(ono_data::Error::Io { source, .. })) => source,
            _ => match e.downcast_ref::<ono_data::Error>() {
                Some(ono_data::Error::Io { source, .. }) => source,
                _ => return None,
            },
        };
        (io.kind() == std::io::ErrorKind::NotFound).then(|| e.to_string())
    })
}

pub fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    ono_io::atomic::write_atomic(path, text.as_bytes())?;
    Ok(())
}

type Fill = Box<dyn FnOnce(&mut Outcome)>;

/// The experiment as this call runs it: the plan's, on the call's device and threads, with the
/// call's graphs.
pub fn as_run(config: &TrainConfig, ctx: &RunContext) -> TrainConfig {
    let mut cfg = config.clone();
    cfg.device = ctx.device.clone();
    if let Some(n) = ctx.threads {
        cfg.threads = n;
    }
    if let Some(g) = ctx.graphs {
        cfg.graphs = g;
    }
    cfg
}

/// Writes the folder's experiment file, the file `ono train` runs; its paths are absolute or
/// relative to the folder (the run folder is its `output_dir`).
pub fn write_experiment(dir: &RunFolder, cfg: &TrainConfig) -> Result<PathBuf> {
    let (file, text) = run_file(&dir.experiment_file(), cfg, |file| {
        format!(
            "rerun this cell with `ono train {} --resume`",
            file.display()
        )
    })?;
    ono_io::atomic::write_atomic(&file, text.as_bytes())?;
    Ok(file)
}

/// `file` (its folder created) and the text `reproduce` writes there for the checked run `cfg`:
/// a comment that says what wrote it and `how` to use the file (given its path), then the
/// configuration.
pub fn run_file(
    file: &Path,
    cfg: &TrainConfig,
    how: impl Fn(&Path) -> String,
) -> Result<(PathBuf, String)> {
    cfg.validate()?;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let file = file.to_path_buf();
    let text = format!(
        "# Written by `ono reproduce`; {}.\n{}",
        how(&file),
        toml::to_string(cfg)?
    );
    Ok((file, text))
}

/// Writes the experiment file into `dir`, trains (resuming if a checkpoint is there), and
/// evaluates the result: test error, mean field, the other strides.
fn train(
    config: &TrainConfig,
    strides: &[usize],
    test_resolutions: &[usize],
    dir: &RunFolder,
    ctx: &RunContext,
) -> Result<Fill> {
    let file = write_experiment(dir, &as_run(config, ctx))?;
    let cfg = TrainConfig::from_file(&file)?;
    // A run of another version of this experiment (the plan changed) cannot be resumed: it
    // starts again. The same experiment on another device or thread count resumes (the
    // checkpoint's fingerprint leaves them out).
    let stale = match dir.last_state() {
        Ok(Some(state)) if state.config.same_experiment(&cfg.fingerprint()) => None,
        Ok(Some(_)) => Some("the experiment changed since its last run"),
        Ok(None) => None,
        Err(_) => Some("its last checkpoint's state cannot be read"),
    };
    if let Some(why) = stale {
        eprintln!("{}: {why}; starting it again", dir.dir().display());
        dir.clear_training()?;
    }
    let resume = dir.has_checkpoint();
    let (summary, per_step) = match ctx.nproc_per_node {
        Some(n) => {
            // Resolved here first, as the single process would: a missing published file is
            // then reported as missing data (not as a failed launch), and a bad configuration
            // by name, before any process starts.
            drop(RunSpec::resolve(cfg.clone())?);
            train_parallel(&file, n, resume, ctx)?
        }
        None => {
            let mut trainer = Trainer::new(RunSpec::resolve(cfg.clone())?, resume)?;
            trainer.set_observer(crate::figures::RunFigures);
            let total = trainer.steps_per_epoch() * cfg.epochs;
            let progress = if ctx.quiet {
                Progress::Quiet
            } else {
                Progress::auto(total, trainer.state().global_step)
            };
            let summary = trainer.run(&progress)?;
            let per_step = trainer
                .state()
                .history
                .last()
                .map(|r| r.test_per_step.clone())
                .unwrap_or_default();
            (summary, per_step)
        }
    };
    let test = summary
        .final_test
        .ok_or_else(|| anyhow!("the run ended without a test error"))?;
    // The mean field of every test step, also those a time-extrapolation run did not train on.
    let mut all_steps = cfg.data.clone();
    all_steps.train_steps = None;
    let ds = ono_train::data_source::resolve_data(&all_steps, &cfg.loss)?.dataset;
    let mean_field = ono_train::evaluate::mean_field_error(&ds)?;
    drop(ds);
    let mut at_stride = BTreeMap::new();
    let mut grids = BTreeMap::new();
    for &r in strides {
        let v = evaluate_checkpoint(
            &summary.result_checkpoint,
            &EvalData::Own {
                r: Some(r),
                test_resolution: None,
            },
            cfg.device()?,
            ctx.eval_batch,
        )?;
        at_stride.insert(r.to_string(), v.test_rel_l2);
        if let Some(&side) = v.grid.as_ref().and_then(|g| g.first()) {
            grids.insert(r.to_string(), side);
        }
    }
    let mut at_resolution = BTreeMap::new();
    for &s in test_resolutions {
        let v = evaluate_checkpoint(
            &summary.result_checkpoint,
            &EvalData::Own {
                r: None,
                test_resolution: Some(s),
            },
            cfg.device()?,
            ctx.eval_batch,
        )?;
        at_resolution.insert(s.to_string(), v.test_rel_l2);
    }
    let state = Checkpoint::read_state(&summary.result_checkpoint)?;
    let train_loss = state.history.last().map(|r| r.train_loss);
    let steps = state.global_step;
    let train_eval = if ctx.train_eval {
        // Samples per forward pass as the trainer evaluates: a model trained a micro-batch at a
        // time (samples of different sizes and no padding mask) is evaluated so too.
        let per_forward = (cfg.batch_size.max(1) as u64).div_ceil(cfg.accumulate_steps.max(1));
        let v = ono_train::evaluate::evaluate_checkpoint_split(
            &summary.result_checkpoint,
            &EvalData::Own {
                r: None,
                test_resolution: None,
            },
            ono_train::evaluate::EvalSplit::Train,
            cfg.device()?,
            per_forward as i64,
        )?;
        Some(v.test_rel_l2)
    } else {
        None
    };
    Ok(Box::new(move |o: &mut Outcome| {
        o.train_loss = train_loss;
        o.train_eval_rel_l2 = train_eval;
        o.steps = Some(steps);
        o.at_resolution = at_resolution;
        o.test_rel_l2 = Some(test);
        o.mean_field = Some(mean_field);
        o.per_step = per_step;
        o.at_stride = at_stride;
        o.grid_at_stride = grids;
    }))
}

/// `torchrun --no-python --nproc-per-node N ono train FILE [--resume]`: the experiment trained
/// data-parallel; its summary line and the last epoch's per-step errors.
fn train_parallel(
    file: &Path,
    n: usize,
    resume: bool,
    ctx: &RunContext,
) -> Result<(ono_train::Summary, Vec<f64>)> {
    let torchrun = std::env::var_os("ONO_TORCHRUN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("torchrun"));
    let mut cmd = Command::new(&torchrun);
    cmd.arg(format!("--nproc-per-node={n}"))
        .arg("--no-python")
        .arg(&ctx.exe)
        .arg("train")
        .arg(file);
    if resume {
        cmd.arg("--resume");
    }
    if ctx.quiet {
        cmd.arg("--quiet");
    }
    let ended = message::run(cmd, |_| {}).with_context(|| {
        format!(
            "running {} (set ONO_TORCHRUN or put torch's torchrun on PATH)",
            torchrun.display()
        )
    })?;
    let Ended::Said(Message::Trained(summary)) = ended else {
        bail!("the data-parallel run failed: {}", ended.describe());
    };
    let state = Checkpoint::read_state(&summary.last_checkpoint)
        .context("reading the run's last checkpoint state")?;
    let per_step = state
        .history
        .last()
        .map(|r| r.test_per_step.clone())
        .unwrap_or_default();
    Ok((summary, per_step))
}

/// `ono bench-train` of the experiment `config` in a process of its own: `steps` batches timed
/// after one warm-up, and the peak memory of a process that trains this model on these data.
fn time_run(config: &TrainConfig, steps: usize, dir: &RunFolder, ctx: &RunContext) -> Result<Fill> {
    let file = write_experiment(dir, &as_run(config, ctx))?;
    // Resolved here first: a missing file is then reported as missing data, by name.
    drop(RunSpec::resolve(TrainConfig::from_file(&file)?)?);
    let mut cmd = Command::new(&ctx.exe);
    cmd.arg("bench-train").arg(&file).args([
        "--steps",
        &steps.to_string(),
        "--device",
        &ctx.device,
    ]);
    let v = match timed(cmd, ctx)? {
        Ended::Said(Message::BatchTimes(v)) => v,
        other => bail!("bench-train failed: {}", other.describe()),
    };
    Ok(timing(v.median_s, v.params, v.peak_rss_mb))
}

/// Runs a timing command (with the call's threads) and waits for its message.
fn timed(mut cmd: Command, ctx: &RunContext) -> Result<Ended> {
    if let Some(n) = ctx.threads {
        cmd.args(["--threads", &n.to_string()]);
    }
    message::run(cmd, |_| {})
}

/// The outcome's timing: median seconds per step, parameters, the process's peak memory.
fn timing(step_s: f64, params: i64, peak_mb: Option<f64>) -> Fill {
    Box::new(move |o: &mut Outcome| {
        o.step_s = Some(step_s);
        o.params = Some(params);
        o.peak_mb = peak_mb;
    })
}

/// `ono bench-step` in a process of its own: the peak memory is this model's alone.
fn measure(m: &Measure, ctx: &RunContext) -> Result<Fill> {
    let preset = m.model.preset.as_deref().unwrap_or("default");
    let mut cmd = Command::new(&ctx.exe);
    cmd.args(["bench-step", "--arch", &m.model.arch, "--preset", preset])
        .args(["--shapes", &m.shapes, "--batch", &m.batch.to_string()])
        .args(["--steps", &m.steps.to_string()])
        .args(["--device", &ctx.device]);
    if !m.model.overrides.is_empty() {
        cmd.args(["--overrides", &toml::to_string(&m.model.overrides)?]);
    }
    let v = match timed(cmd, ctx)? {
        Ended::Said(Message::StepTimes(v)) => v,
        other => bail!("bench-step failed: {}", other.describe()),
    };
    Ok(timing(v.median_s, v.params, v.peak_rss_mb))
}
