//! `ono reproduce`: the ONO paper's tables, one command. The plan ([`plan`]) lists the
//! experiments of every table; [`execute`] runs each in its own folder (skipping finished ones,
//! resuming interrupted ones); [`report`] writes `report.md` (led by the paper's findings as
//! [`findings`] judges them), `summary.json` and the plots.

pub mod budget;
pub mod execute;
pub mod findings;
pub mod galerkin;
pub mod gnot;
mod jobs;
mod paper;
pub mod papers;
pub mod plan;
pub mod report;
pub mod values;

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context as _, Result};

use ono_train::RunFolder;
use plan::{DataPaths, Profile};

/// The command's options.
#[derive(clap::Args)]
pub struct Options {
    /// Whose tables: `ono` (the ONO paper), `galerkin` (the Galerkin Transformer paper) or
    /// `gnot` (GNOT's).
    #[arg(long, default_value = "ono")]
    pub paper: String,
    /// `quick` (reduced sizes for a CPU: the neuraloperator Darcy set and generated data),
    /// `paper` (the paper's settings on the published files) or `smoke` (a few steps, for tests).
    #[arg(long, default_value = "quick")]
    pub profile: String,
    /// Only these tables (table1,…,table8; the paper's own numbers).
    #[arg(long)]
    pub only: Option<String>,
    /// Only these models' rows (ONO paper: fno, galerkin, geofno, ufno, ffno, lsm, gnot, ono,
    /// transolver; Galerkin paper: fno, ft, gt, st, lt; GNOT: fno, galerkin, geofno, gnot).
    #[arg(long)]
    pub models: Option<String>,
    /// cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// The published files (default: $ONO_DATA_DIR, else ./data).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// The neuraloperator 0.3.0 wheel's files, the reduced profiles' Darcy (default:
    /// $ONO_NEURALOP_DIR, else the data folder; `cargo xtask reproduce` fetches them and sets it).
    #[arg(long)]
    pub neuralop_dir: Option<PathBuf>,
    /// Where results go (default: results/<profile>, results/<paper>/<profile> for another
    /// paper than ONO's).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Torch intra-op threads (default: libtorch's).
    #[arg(long)]
    pub threads: Option<i32>,
    /// Every experiment's step as a CUDA graph: auto (the experiments' default: captured on
    /// CUDA), on, off, or emulate (`graphs` of an experiment file).
    #[arg(long)]
    pub graphs: Option<ono_train::graphs::Graphs>,
    /// Write plan.md and each experiment's file, run nothing.
    #[arg(long)]
    pub plan_only: bool,
    /// With --plan-only and the paper profile: train a few batches of every experiment at its real size and batch on
    /// `--device` (files of the published shapes, written into the results folder), and write
    /// budget.md and budget.json: parameters, seconds per batch, peak memory, the data's size and
    /// the estimated hours of every run.
    #[arg(long, requires = "plan_only", conflicts_with = "rehearse")]
    pub measure: bool,
    /// After each trained experiment, train it again with the PyTorch reference loop
    /// (`benches/pytorch/train_ref.py`) run by this Python (torch and the restatements'
    /// packages), and report both (`cargo xtask reproduce --reference` sets it).
    #[arg(long)]
    pub reference_python: Option<PathBuf>,
    /// The reference loop's script (default: benches/pytorch/train_ref.py under the current
    /// folder).
    #[arg(long, requires = "reference_python")]
    pub reference_script: Option<PathBuf>,
    /// Train this many experiments at once, each in a process of its own on `--device`, the
    /// torch threads split between them; longest first.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// Train on these devices at once (`cuda:0,cuda:1,…`), one process each; longest first.
    #[arg(long, conflicts_with = "jobs")]
    pub devices: Option<String>,
    /// Train each experiment data-parallel in N processes on this node
    /// (`torchrun --no-python --nproc-per-node N ono train`; torchrun from $ONO_TORCHRUN, else
    /// PATH): on CUDA one GPU each, cuda:0 … cuda:N−1. The experiment's batch per step is
    /// unchanged (docs/training.md, "Several processes").
    #[arg(long, conflicts_with_all = ["jobs", "devices", "measure"])]
    pub nproc_per_node: Option<usize>,
    /// Only the experiments whose position in the plan is I − 1 modulo N (`3/8`): a fixed part
    /// of the plan for one of N machines. The report is written by a call that finds every
    /// experiment finished (run the command once more without `--shard` when all are done).
    /// Without it, processes on one results folder share the work through its locks.
    #[arg(long)]
    pub shard: Option<String>,
    /// Rehearse the paper profile: every experiment with its paper model and recipe for one
    /// epoch of a few steps and an evaluation, on miniatures of the published files written
    /// into the results folder (default results/rehearsal); no published file is read.
    #[arg(long, conflicts_with_all = ["profile", "data_dir"])]
    pub rehearse: bool,
    /// Run as a worker of `--jobs` or `--devices` under this label: train what the locks leave,
    /// longest first, and write no report.
    #[arg(long, hide = true)]
    pub worker: Option<String>,
}

impl Options {
    /// The arguments of a worker of this call (`jobs::run_workers` adds its label, device and
    /// threads): the same plan, data and results folder.
    fn worker_args(&self, out: &Path, data: &DataPaths) -> Vec<std::ffi::OsString> {
        let mut a: Vec<std::ffi::OsString> = Vec::new();
        // A flag with its value, or alone (`None`) for a switch.
        let mut opt = |flag: &str, v: Option<std::ffi::OsString>| {
            a.push(flag.into());
            a.extend(v);
        };
        opt("--paper", Some(self.paper.clone().into()));
        if self.rehearse {
            opt("--rehearse", None);
        } else {
            opt("--profile", Some(self.profile.clone().into()));
        }
        for (flag, v) in [("--only", &self.only), ("--models", &self.models)] {
            if let Some(v) = v {
                opt(flag, Some(v.into()));
            }
        }
        if !self.rehearse {
            opt("--data-dir", Some(data.published.clone().into()));
        }
        opt("--neuralop-dir", Some(data.neuralop.clone().into()));
        opt("--out", Some(out.as_os_str().to_owned()));
        for (flag, v) in [
            ("--reference-python", &self.reference_python),
            ("--reference-script", &self.reference_script),
        ] {
            if let Some(v) = v {
                opt(flag, Some(v.into()));
            }
        }
        if let Some(v) = &self.shard {
            opt("--shard", Some(v.into()));
        }
        a
    }
}

/// What every experiment shares.
pub struct RunContext {
    /// This binary (data generation and timed steps run in processes of their own).
    pub exe: PathBuf,
    pub device: String,
    pub threads: Option<i32>,
    /// `--graphs`, set in every experiment this call runs.
    pub graphs: Option<ono_train::graphs::Graphs>,
    pub machine: String,
    pub commit: String,
    pub quiet: bool,
    pub eval_batch: i64,
    /// A rehearsal (`--rehearse`): the report says so, and a finished experiment's checkpoints
    /// are deleted (paper-size models are gigabytes each, and nothing reads them).
    pub rehearsal: bool,
    /// Runs the reference loop after each trained experiment.
    pub reference: Option<execute::ReferenceLoop>,
    /// Train each experiment in this many data-parallel processes (`--nproc-per-node`).
    pub nproc_per_node: Option<usize>,
    /// Also evaluate each result on its training samples (`Outcome::train_eval_rel_l2`).
    pub train_eval: bool,
    /// Whose tables.
    pub paper: papers::Paper,
}

#[cfg(test)]
impl RunContext {
    /// A quiet CPU context with nothing recorded, for outcomes made in tests.
    pub fn for_tests() -> Self {
        RunContext {
            exe: Default::default(),
            device: "cpu".into(),
            threads: None,
            graphs: None,
            machine: String::new(),
            commit: String::new(),
            quiet: true,
            eval_batch: 1,
            train_eval: false,
            rehearsal: false,
            reference: None,
            nproc_per_node: None,
            paper: papers::Paper::Ono,
        }
    }
}

/// Runs the selected tables of a profile and writes the report; `Ok(false)` when an experiment
/// failed (missing published files are not failures: they are reported by name).
pub fn run(o: Options) -> Result<bool> {
    let started = Instant::now();
    let which: papers::Paper = o.paper.parse()?;
    let profile: Profile = if o.rehearse {
        Profile::Paper
    } else {
        o.profile.parse()?
    };
    anyhow::ensure!(
        !o.measure || profile == Profile::Paper,
        "--measure budgets the paper profile at the published files' shapes; the {} profile's data are smaller (add --profile paper)",
        profile.name()
    );
    crate::device(&o.device)?;
    let out = o.out.clone().unwrap_or_else(|| {
        which.results_dir(if o.rehearse {
            "rehearsal"
        } else {
            profile.name()
        })
    });
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let out = out.canonicalize()?;
    let data = data_paths(&o, &out)?;
    let worker_args = o.worker_args(&out, &data);
    let shard: Option<jobs::Shard> = o.shard.as_deref().map(str::parse).transpose()?;
    let workers = jobs::plan_jobs(o.jobs, o.devices.as_deref(), &o.device, o.threads)?;
    anyhow::ensure!(
        o.worker.is_none() || workers.is_empty(),
        "--worker runs one job; it takes no --jobs or --devices"
    );
    let tables = plan::list(o.only.as_deref());
    let models = plan::list(o.models.as_deref());
    let mut plan = plan::select(which, which.plan(profile, &data)?, &tables, &models)?;
    if o.rehearse {
        let split = write_miniatures(&data.published, which)?;
        plan = plan::rehearsal::rehearse(plan, &data.published, split)?;
    }
    // What the report compares this profile with: the cells it drops, the settings it shrinks.
    let paper = match profile {
        Profile::Paper => None,
        _ => Some(plan::select(
            which,
            which.plan(Profile::Paper, &data)?,
            &tables,
            &models,
        )?),
    };
    let ctx = context(&o, which)?;
    if o.plan_only {
        set_threads(o.threads);
        return plan_only(&out, profile, &plan, &ctx, o.measure);
    }
    {
        // One process generates the data; the others wait for it and find it there. With
        // libtorch's own thread count, whatever `--threads` says: the generators' sums (NS2d's
        // unstable flow above all) round by it, and the data must be the same for every call
        // (they were made by an `ono data` child of its own before).
        let _data = ono_io::lock::FileLock::acquire(
            &ono_io::lock::folder_lock(&data.generated),
            &ono_io::lock::this_process(),
        )?;
        execute::prepare_data(profile, &data, &plan.experiments)?;
    }
    set_threads(o.threads);
    if !workers.is_empty() {
        jobs::run_workers(&ctx.exe, &worker_args, &workers)?;
    }

    let n = plan.experiments.len();
    // Workers start the long experiments first, so that the last one to finish is short; a
    // single process keeps the plan's order.
    let order = if o.worker.is_some() {
        jobs::longest_first(&plan.experiments, &budget::measured_hours(&out))
    } else {
        (0..n).collect()
    };
    let outcomes = run_experiments(&plan.experiments, &order, &out, &ctx, shard, started);
    let wall = started.elapsed().as_secs_f64();
    let failed = outcomes
        .iter()
        .flatten()
        .any(|o| matches!(o.status, execute::Status::Failed(_)));
    if o.worker.is_some() {
        return Ok(!failed);
    }
    let missing = outcomes.iter().filter(|o| o.is_none()).count();
    if missing > 0 {
        eprintln!(
            "{missing} of {n} experiments belong to other shards and are not finished: no report yet \
             (run the command again without --shard once every shard is done; it trains what is \
             left and writes the report)"
        );
        return Ok(!failed);
    }
    let outcomes: Vec<execute::Outcome> = outcomes.into_iter().flatten().collect();
    report::write(&out, profile, &plan, paper.as_ref(), &outcomes, &ctx, wall)?;
    eprintln!(
        "report: {} ({} experiments, {})",
        out.join("report.md").display(),
        n,
        clock(wall)
    );
    Ok(!failed)
}

/// Sets torch's intra-op threads when the call names a number.
fn set_threads(threads: Option<i32>) {
    if let Some(n) = threads {
        tch::set_num_threads(n);
    }
}

/// Where the plan reads its data: the published files (the miniatures in a rehearsal), the
/// neuraloperator set, and what reproduce generates. Absolute: the experiment files live in the
/// run folders.
fn data_paths(o: &Options, out: &Path) -> Result<DataPaths> {
    let published = if o.rehearse {
        out.join("miniatures")
    } else {
        absolute(ono_data::benchmarks::data_dir(o.data_dir.as_deref()))?
    };
    let neuralop = match o
        .neuralop_dir
        .clone()
        .or_else(|| std::env::var_os(NEURALOP_DIR_ENV).map(PathBuf::from))
    {
        Some(dir) => absolute(dir)?,
        None => published.clone(),
    };
    Ok(DataPaths {
        published,
        neuralop,
        generated: out.join("data"),
    })
}

/// The call's context: checks the thread and process counts, finds this binary, the machine
/// and commit, and the reference loop's script.
fn context(o: &Options, paper: papers::Paper) -> Result<RunContext> {
    anyhow::ensure!(
        o.threads.is_none_or(|n| n > 0),
        "--threads must be positive"
    );
    if o.nproc_per_node == Some(0) {
        anyhow::bail!("--nproc-per-node must be at least 1");
    }
    Ok(RunContext {
        nproc_per_node: o.nproc_per_node,
        exe: std::env::current_exe().context("finding the ono binary")?,
        device: o.device.clone(),
        threads: o.threads,
        graphs: o.graphs,
        machine: machine(),
        commit: commit(),
        quiet: false,
        eval_batch: 4,
        train_eval: false,
        rehearsal: o.rehearse,
        paper,
        reference: match o.reference_python.clone() {
            Some(python) => {
                let script = absolute(
                    o.reference_script
                        .clone()
                        .unwrap_or_else(|| PathBuf::from("benches/pytorch/train_ref.py")),
                )?;
                anyhow::ensure!(
                    script.is_file(),
                    "--reference-script: {} is not a file",
                    script.display()
                );
                Some(execute::ReferenceLoop { python, script })
            }
            None => None,
        },
    })
}

/// `--plan-only`: the plan's files and `plan.md`, and with `measure` the budget measured.
fn plan_only(
    out: &Path,
    profile: Profile,
    plan: &plan::Plan,
    ctx: &RunContext,
    measure: bool,
) -> Result<bool> {
    report::write_plan(out, profile, plan, ctx)?;
    eprintln!(
        "{} experiments, {} cells: {}",
        plan.experiments.len(),
        plan.cells.len(),
        out.join("plan.md").display()
    );
    if measure {
        let b = budget::measure(plan, out, ctx)?;
        print!("{}", budget::markdown(&b));
        eprintln!("budget: {}", out.join("budget.md").display());
        let failed = b
            .experiments
            .iter()
            .any(|r| matches!(r.status, budget::Measurement::Failed { .. }));
        return Ok(!failed);
    }
    Ok(true)
}

/// This process's pass over `experiments` in `order`: each whose lock it takes is run (or found
/// finished); those another process holds are waited for afterwards, then taken as finished or
/// run. An experiment of another shard is only read. One outcome per experiment, `None` where
/// another shard has not finished it.
fn run_experiments(
    experiments: &[plan::Experiment],
    order: &[usize],
    out: &Path,
    ctx: &RunContext,
    shard: Option<jobs::Shard>,
    started: Instant,
) -> Vec<Option<execute::Outcome>> {
    let n = experiments.len();
    let mut outcomes: Vec<Option<execute::Outcome>> = vec![None; n];
    let mut pass = Pass {
        ctx,
        n,
        started,
        seen: 0,
        spent_new: 0.0,
        done_new: 0,
    };
    let mut locked_elsewhere = Vec::new();
    for &i in order {
        let e = &experiments[i];
        let dir = RunFolder::new(out.join(&e.id));
        if shard.is_some_and(|s| !s.takes(i)) {
            outcomes[i] = execute::finished(&dir, e);
            continue;
        }
        match dir.try_lock() {
            Ok(Some(_lock)) => outcomes[i] = Some(pass.run(i, e, &dir)),
            Ok(None) => locked_elsewhere.push(i),
            Err(err) => outcomes[i] = Some(lock_failed(e, ctx, err)),
        }
    }
    // What other processes were training: wait for each, then take its result (or train it,
    // when its process died or failed).
    for i in locked_elsewhere {
        let e = &experiments[i];
        let dir = RunFolder::new(out.join(&e.id));
        if let Some(holder) = dir.lock_holder() {
            eprintln!("[{}/{n}] {}: waiting for {holder}", i + 1, e.id);
        }
        outcomes[i] = Some(match dir.lock() {
            Ok(_lock) => pass.run(i, e, &dir),
            Err(err) => lock_failed(e, ctx, err),
        });
    }
    outcomes
}

/// Writes the rehearsal's miniatures of the paper's benchmarks into `dir` and returns their
/// split.
fn write_miniatures(
    dir: &Path,
    paper: papers::Paper,
) -> Result<ono_data::benchmarks::miniature::Miniature> {
    use ono_data::benchmarks::{miniature, Benchmark};
    let what = format!("write_rehearsal {}", miniature::sizes_label(true, 0));
    let benchmarks: &[Benchmark] = match paper {
        papers::Paper::Ono => &Benchmark::PAPER,
        // Its inverse problem reads the Darcy files.
        papers::Paper::Galerkin => &[Benchmark::Burgers, Benchmark::Darcy],
        papers::Paper::Gnot => &[
            Benchmark::Darcy,
            Benchmark::Ns2d,
            Benchmark::Elasticity,
            Benchmark::Airfoil,
        ],
    };
    write_once(dir, "rehearsal miniature", &what, benchmarks, |b, dir| {
        miniature::write_rehearsal(b, dir, miniature::MatVersion::V5)
    })?;
    miniature::rehearsal_split(Benchmark::Darcy).context("the rehearsal sizes Darcy")
}

/// Writes the files of `benchmarks` into `dir` with `write`, once: a marker names what wrote
/// them (this version and `what`, which names the sizes), and a folder with another marker is
/// written again. One
/// process writes while the others wait.
fn write_once(
    dir: &Path,
    name: &str,
    what: &str,
    benchmarks: &[ono_data::benchmarks::Benchmark],
    write: impl Fn(
        ono_data::benchmarks::Benchmark,
        &Path,
    ) -> ono_data::Result<ono_data::benchmarks::miniature::Miniature>,
) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let _lock = ono_io::lock::FileLock::acquire(
        &ono_io::lock::folder_lock(dir),
        &ono_io::lock::this_process(),
    )?;
    let marker = dir.join("written-by");
    let names: Vec<&str> = benchmarks.iter().map(|b| b.name()).collect();
    let stamp = format!(
        "ono {} {what}: {}",
        env!("CARGO_PKG_VERSION"),
        names.join(", ")
    );
    if std::fs::read_to_string(&marker).ok().as_deref() != Some(stamp.as_str()) {
        for &b in benchmarks {
            eprintln!("[data] {}: {} in {}", name, b.name(), dir.display());
            write(b, dir)?;
        }
        ono_io::atomic::write_atomic(&marker, stamp.as_bytes())?;
    }
    Ok(())
}

/// The outcome of an experiment whose lock could not be taken (its folder cannot be written).
fn lock_failed(e: &plan::Experiment, ctx: &RunContext, err: ono_train::Error) -> execute::Outcome {
    let mut o = execute::Outcome::new(e, ctx);
    o.status = execute::Status::Failed(format!("locking its folder: {err}"));
    o
}

/// One process's pass over the plan: runs the experiments it holds the locks of, and keeps the
/// numbers of its progress line.
struct Pass<'a> {
    ctx: &'a RunContext,
    n: usize,
    started: Instant,
    /// Experiments this pass has taken up, finished before or not.
    seen: usize,
    spent_new: f64,
    done_new: usize,
}

impl Pass<'_> {
    /// Experiment `i` (whose lock the caller holds): its result when it is finished, else a run
    /// of it (resuming what an earlier call left); with the reference loop when the call asks.
    fn run(&mut self, i: usize, e: &plan::Experiment, dir: &RunFolder) -> execute::Outcome {
        let (n, ctx) = (self.n, self.ctx);
        self.seen += 1;
        if let Some(o) = execute::finished(dir, e) {
            eprintln!(
                "[{}/{n}] {}: done before ({:.4e})",
                i + 1,
                e.id,
                o.test_rel_l2.or(o.step_s).unwrap_or(f64::NAN)
            );
            return with_reference(o, e, dir, ctx, i, n);
        }
        let elapsed = self.started.elapsed().as_secs_f64();
        // The mean of the experiments run in this call times those left: rough, but honest
        // about what it knows.
        let left = (n + 1).saturating_sub(self.seen);
        let eta = (self.done_new > 0)
            .then(|| self.spent_new / self.done_new as f64 * left as f64)
            .map_or("?".into(), clock);
        eprintln!(
            "[{}/{n}] {} ({}) — elapsed {}, ETA {eta}",
            i + 1,
            e.id,
            e.data_note,
            clock(elapsed)
        );
        let t = Instant::now();
        let o = execute::run(e, dir, ctx);
        if ctx.rehearsal && o.status == execute::Status::Done {
            let _ = dir.remove_checkpoints();
        }
        self.spent_new += t.elapsed().as_secs_f64();
        self.done_new += 1;
        match &o.status {
            execute::Status::Done => eprintln!(
                "[{}/{n}] {} finished in {:.0} s",
                i + 1,
                e.id,
                t.elapsed().as_secs_f64()
            ),
            execute::Status::MissingData(m) => eprintln!("[{}/{n}] {}: no data: {m}", i + 1, e.id),
            execute::Status::Failed(m) => eprintln!("[{}/{n}] {} FAILED: {m}", i + 1, e.id),
        }
        with_reference(o, e, dir, ctx, i, n)
    }
}

/// A finished experiment with the reference loop's run beside it, when the call asks for one
/// (its result record rewritten with it).
fn with_reference(
    mut o: execute::Outcome,
    e: &plan::Experiment,
    dir: &RunFolder,
    ctx: &RunContext,
    i: usize,
    n: usize,
) -> execute::Outcome {
    let Some(rl) = &ctx.reference else { return o };
    if o.status != execute::Status::Done {
        return o;
    }
    let t = Instant::now();
    o.reference = execute::reference(e, dir, rl);
    match &o.reference {
        Some(execute::Reference::Done { test_rel_l2, .. }) => eprintln!(
            "[{}/{n}] {}: reference loop {test_rel_l2:.4e} (ours {:.4e}) in {:.0} s",
            i + 1,
            e.id,
            o.test_rel_l2.unwrap_or(f64::NAN),
            t.elapsed().as_secs_f64()
        ),
        Some(execute::Reference::Refused { why }) => {
            eprintln!("[{}/{n}] {}: no reference loop: {why}", i + 1, e.id)
        }
        Some(execute::Reference::Failed { why }) => {
            eprintln!("[{}/{n}] {}: reference loop FAILED: {why}", i + 1, e.id)
        }
        None => {}
    }
    if let Err(err) = dir.write(&o) {
        eprintln!("{err:#}");
    }
    o
}

/// The environment variable naming the neuraloperator files' folder.
pub const NEURALOP_DIR_ENV: &str = "ONO_NEURALOP_DIR";

/// The folder as an absolute path (the experiment files live in the run folders), canonical
/// when it exists.
fn absolute(dir: PathBuf) -> Result<PathBuf> {
    Ok(match dir.canonicalize() {
        Ok(p) => p,
        Err(_) if dir.is_relative() => std::env::current_dir()?.join(dir),
        Err(_) => dir,
    })
}

/// `1h02m03s`, `4m05s`, `12s`.
pub fn clock(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match (s / 3600, s / 60 % 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, s) => format!("{m}m{s:02}s"),
        (h, m, s) => format!("{h}h{m:02}m{s:02}s"),
    }
}

/// The CPU model and core count, and the torch build.
pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{cpu}, {cores} cores, torch {} threads",
        tch::get_num_threads()
    )
}

/// The source commit: `ONO_COMMIT` (set by `cargo xtask reproduce`), else git's HEAD here.
pub(crate) fn commit() -> String {
    if let Ok(c) = std::env::var("ONO_COMMIT") {
        if !c.is_empty() {
            return c;
        }
    }
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The current UTC time, `2026-11-24 13:05:00 UTC`.
pub fn utc_now() -> String {
    utc(std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64)
}

/// `secs` after the Unix epoch as a UTC date and time.
fn utc(secs: i64) -> String {
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_and_date_formats() {
        assert_eq!(clock(5.0), "5s");
        assert_eq!(clock(125.0), "2m05s");
        assert_eq!(clock(3723.0), "1h02m03s");
        // Values from Python's calendar.timegm.
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_795_525_509), "2026-11-24 13:05:09 UTC");
        assert_eq!(utc(951_868_799), "2000-02-29 23:59:59 UTC");
    }
}
