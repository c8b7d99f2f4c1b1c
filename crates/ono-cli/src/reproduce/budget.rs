//! `ono reproduce --plan-only --measure`: a plan you can budget. Every trained experiment of the
//! plan is built at its real size and trained for a few batches, as its run would train them (its
//! model, batch, regime, loss and optimizer; `ono bench-train` in a process of its own), on files
//! of the published shapes written once into `<out>/measure-data`. Each gives parameters, seconds
//! per batch, peak memory and the bytes its data take on the device, and from those the hours of
//! the whole run, so that a cell that runs out of memory, and the GPU-hours of the whole plan, are
//! known before anything is trained.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result};
use serde::{Deserialize, Serialize};

use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::run_folder::{Record, RecordFile, RunFolder};

use crate::message::{self, Ended, Message};

use super::plan::{Plan, Work};
use super::{execute, RunContext};

/// Untimed batches before the timed ones (the first pays for allocation and kernel choice).
const WARMUP: usize = 1;
/// Timed batches; the median is reported.
const TIMED: usize = 2;
/// Test samples each measured run loads (it trains only; the loader wants a test split). Two,
/// and two training samples at least, so that positions shared by all samples are told from
/// per-sample ones by their leading size.
const TEST_SAMPLES: usize = 2;
/// GPU memory sizes a cell is checked against, in GiB.
const GPU_GIB: [f64; 3] = [24.0, 40.0, 80.0];

/// The budget of a plan on one device: `budget.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Budget {
    /// The device measured on (`cpu`, `cuda:0`).
    pub device: String,
    pub machine: String,
    pub commit: String,
    /// Torch threads of the measured processes (`None`: libtorch's default).
    pub threads: Option<i32>,
    /// Where peak memory comes from on this device.
    pub memory: MemorySource,
    pub experiments: Vec<Row>,
    /// The sum of the measured experiments' hours.
    pub total_hours: f64,
}

impl Record for Budget {
    const FILE: RecordFile = RecordFile::Budget;
}

/// Which memory the peak is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// The process's peak resident set (VmHWM), file reading included.
    CpuPeakRss,
    /// The largest GPU memory `nvidia-smi` showed for the process (sampled every 100 ms): the
    /// caching allocator's reservation plus the CUDA context.
    GpuNvidiaSmi,
}

/// One experiment of the budget.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Row {
    pub id: String,
    pub model: String,
    #[serde(flatten)]
    pub status: Measurement,
}

/// What measuring an experiment gave.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Measurement {
    Measured(Estimate),
    /// The measured run failed (out of memory, a model that refuses the shapes): its last
    /// lines of output.
    Failed {
        reason: String,
    },
    /// Not a training run, or none that this measures.
    Skipped {
        reason: String,
    },
}

/// A measured experiment and the estimate of its whole run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Estimate {
    pub params: i64,
    /// Samples per batch.
    pub batch: i64,
    /// Optimizer steps per batch (Plasticity's regime: one per time step).
    pub steps_per_batch: i64,
    /// Median seconds per batch.
    pub s_per_batch: f64,
    pub batches_per_epoch: u64,
    pub epochs: u64,
    /// s_per_batch × batches_per_epoch × epochs, in hours: training alone (the evaluations
    /// after each epoch are not counted).
    pub hours: f64,
    /// Peak memory of the measured process, MB (see [`Budget::memory`]); `None` where the
    /// system does not report it.
    pub peak_mb: Option<f64>,
    /// The whole run's training and test splits, as the trainer holds them on the device, MB
    /// (the measured process held one batch and two test samples of them).
    pub data_mb: f64,
    /// Measured by an earlier call (its file unchanged), not this one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier: bool,
}

impl Estimate {
    /// The memory the whole run needs, estimated: the measured peak plus the rest of its data.
    pub fn run_mb(&self) -> Option<f64> {
        self.peak_mb.map(|p| p + self.data_mb)
    }
}

/// Measures every experiment of `plan` (in order, one process at a time: the device is the
/// measured process's alone) on `ctx`'s device and threads, writing `budget.json` and
/// `budget.md` after each; experiments an earlier call measured on this device are kept.
pub fn measure(plan: &Plan, out: &Path, ctx: &RunContext) -> Result<Budget> {
    let data = out.join("measure-data");
    let benchmarks: Vec<Benchmark> = Benchmark::PAPER
        .into_iter()
        .filter(|b| {
            plan.experiments.iter().any(|e| match &e.work {
                Work::Train { config, .. } => published(config) == Some(*b),
                Work::Measure(_) | Work::TimeRun { .. } => false,
            })
        })
        .collect();
    let samples = plan
        .experiments
        .iter()
        .filter_map(|e| match &e.work {
            Work::Train { config, .. } => Some(config.batch_size.max(1) as usize),
            Work::Measure(_) | Work::TimeRun { .. } => None,
        })
        .max()
        .unwrap_or(1)
        .max(2)
        + TEST_SAMPLES;
    super::write_once(
        &data,
        "published shapes",
        &format!("write_published {}", miniature::sizes_label(false, samples)),
        &benchmarks,
        |b, dir| miniature::write_published(b, dir, samples),
    )?;
    let memory = if ctx.device.starts_with("cuda") {
        MemorySource::GpuNvidiaSmi
    } else {
        MemorySource::CpuPeakRss
    };
    // What an earlier call measured on this device and machine: an experiment whose measured
    // file is unchanged keeps its row (a call that stopped part-way goes on where it stopped).
    let earlier: Vec<Row> = RunFolder::new(out)
        .read::<Budget>()
        .filter(|b| b.device == ctx.device && b.machine == ctx.machine && b.threads == ctx.threads)
        .map(|b| b.experiments)
        .unwrap_or_default();
    let mut budget = Budget {
        device: ctx.device.clone(),
        machine: ctx.machine.clone(),
        commit: ctx.commit.clone(),
        threads: ctx.threads,
        memory,
        experiments: Vec::with_capacity(plan.experiments.len()),
        total_hours: 0.0,
    };
    let n = plan.experiments.len();
    for (i, e) in plan.experiments.iter().enumerate() {
        let status = match &e.work {
            Work::Measure(_) | Work::TimeRun { .. } => Measurement::Skipped {
                reason: "a timed step of its own (seconds)".into(),
            },
            Work::Train { config, .. } => match published(config) {
                None => Measurement::Skipped {
                    reason: "not one of the six published benchmarks (their shapes are what is measured)".into(),
                },
                Some(_) => {
                    let before = earlier.iter().find_map(|r| match &r.status {
                        Measurement::Measured(m) if r.id == e.id => Some(m),
                        _ => None,
                    });
                    let dir = out.join(&e.id);
                    measure_one(config, &dir, &data, memory, ctx, before).unwrap_or_else(|err| {
                        Measurement::Failed {
                            reason: format!("{err:#}"),
                        }
                    })
                }
            },
        };
        if !ctx.quiet {
            eprintln!("[{}/{n}] {}: {}", i + 1, e.id, summary(&status));
        }
        if let Measurement::Measured(m) = &status {
            budget.total_hours += m.hours;
        }
        budget.experiments.push(Row {
            id: e.id.clone(),
            model: e.model.clone(),
            status,
        });
        // Written after every experiment: an interrupted call loses at most the one it was on.
        write(out, &budget)?;
    }
    if budget.experiments.is_empty() {
        write(out, &budget)?;
    }
    Ok(budget)
}

/// The published benchmark `config` trains on: one of the six the paper plan reads, whose
/// shapes `miniature::write_published` writes (the reduced profiles' generated and neuraloperator
/// data have none to measure at).
fn published(config: &TrainConfig) -> Option<Benchmark> {
    let b = config.data.benchmark?;
    Benchmark::PAPER.contains(&b).then_some(b)
}

/// One line of progress.
fn summary(s: &Measurement) -> String {
    match s {
        Measurement::Measured(m) => format!(
            "{:.3} s / batch, {:.2} h, peak {}{}",
            m.s_per_batch,
            m.hours,
            m.peak_mb.map_or("?".into(), |p| format!("{p:.0} MB")),
            if m.earlier {
                " (measured by an earlier call)"
            } else {
                ""
            }
        ),
        Measurement::Failed { reason } => format!("FAILED: {reason}"),
        Measurement::Skipped { reason } => format!("skipped: {reason}"),
    }
}

/// Writes `<dir>/measure.toml` (the experiment on the published-shape files: one batch of
/// training samples, two test samples) and times it in a process of its own.
fn measure_one(
    config: &TrainConfig,
    dir: &Path,
    data: &Path,
    memory: MemorySource,
    ctx: &RunContext,
    earlier: Option<&Estimate>,
) -> Result<Measurement> {
    let mut cfg = execute::as_run(config, ctx);
    let batch = cfg.batch_size.max(1);
    let benchmark: Benchmark = cfg.data.benchmark.context("no benchmark")?;
    let (default_train, default_test) = benchmark.default_split(cfg.data.layout);
    let ntrain = cfg.data.ntrain.map_or(default_train, |n| n as usize);
    let ntest = cfg.data.ntest.map_or(default_test, |n| n as usize);
    cfg.data.data_dir = Some(data.to_path_buf());
    cfg.data.ntrain = Some(batch.max(2));
    cfg.data.ntest = Some(TEST_SAMPLES as i64);
    // Enough epochs for the learning-rate schedule to reach every timed batch.
    cfg.epochs = (WARMUP + TIMED) as u64;
    let folder = ono_train::RunFolder::new(dir);
    cfg.output_dir = folder.measure().dir().to_path_buf();
    let (file, text) = execute::run_file(&folder.measure_file(), &cfg, |file| {
        format!("time it with `ono bench-train {}`", file.display())
    })?;
    if let Some(m) = earlier {
        if std::fs::read_to_string(&file).ok().as_deref() == Some(text.as_str()) {
            return Ok(Measurement::Measured(Estimate {
                earlier: true,
                ..m.clone()
            }));
        }
    }
    ono_io::atomic::write_atomic(&file, text.as_bytes())?;

    let mut cmd = Command::new(&ctx.exe);
    cmd.arg("bench-train")
        .arg(&file)
        .args(["--steps", &TIMED.to_string()])
        .args(["--warmup", &WARMUP.to_string()])
        // The error alone, not its backtrace (which `RUST_BACKTRACE` may ask for).
        .env("RUST_LIB_BACKTRACE", "0");
    let mut gpu_peak_mb: Option<f64> = None;
    let ended = message::run(cmd, |pid| {
        if memory == MemorySource::GpuNvidiaSmi {
            if let Some(mb) = gpu_memory_mb(pid) {
                gpu_peak_mb = Some(gpu_peak_mb.map_or(mb, |p| p.max(mb)));
            }
        }
    })?;
    let r = match ended {
        Ended::Said(Message::BatchTimes(r)) => r,
        other => {
            return Ok(Measurement::Failed {
                reason: other.describe(),
            })
        }
    };
    let batches_per_epoch = ntrain.div_ceil(r.batch.max(1) as usize) as u64;
    let hours = r.median_s * (batches_per_epoch * config.epochs) as f64 / 3600.0;
    let data_mb = (r.train_shared_bytes as f64
        + r.train_sample_bytes as f64 * ntrain as f64
        + r.test_shared_bytes as f64
        + r.test_sample_bytes as f64 * ntest as f64)
        / (1u64 << 20) as f64;
    Ok(Measurement::Measured(Estimate {
        params: r.params,
        batch: r.batch,
        steps_per_batch: r.steps_per_batch,
        s_per_batch: r.median_s,
        batches_per_epoch,
        epochs: config.epochs,
        hours,
        peak_mb: match memory {
            MemorySource::CpuPeakRss => r.peak_rss_mb,
            MemorySource::GpuNvidiaSmi => gpu_peak_mb,
        },
        data_mb,
        earlier: false,
    }))
}

/// The GPU memory of process `pid` now, MB, as `nvidia-smi` lists it (`None` without
/// `nvidia-smi` or before the process holds any).
fn gpu_memory_mb(pid: u32) -> Option<f64> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-compute-apps=pid,used_memory",
            "--format=csv,noheader,nounits",
        ])
        .output()
        .ok()?;
    compute_apps_mb(&String::from_utf8_lossy(&out.stdout), pid)
}

/// The memory of `pid` in `nvidia-smi --query-compute-apps=pid,used_memory` CSV (MiB, summed
/// over the GPUs it uses).
fn compute_apps_mb(csv: &str, pid: u32) -> Option<f64> {
    let used: Vec<f64> = csv
        .lines()
        .filter_map(|l| {
            let (p, mb) = l.split_once(',')?;
            (p.trim().parse::<u32>().ok()? == pid)
                .then(|| mb.trim().parse::<f64>().ok())
                .flatten()
        })
        .collect();
    (!used.is_empty()).then(|| used.iter().sum())
}

/// `budget.md`: the table, per experiment, and the total.
pub fn markdown(b: &Budget) -> String {
    let memory = match b.memory {
        MemorySource::CpuPeakRss => {
            "peak resident memory of the process (CPU; file reading included)"
        }
        MemorySource::GpuNvidiaSmi => {
            "peak GPU memory of the process (`nvidia-smi`, sampled every 100 ms)"
        }
    };
    let mut s = format!(
        "# Budget of the plan\n\nMeasured by `ono reproduce --plan-only --measure` on {} ({}), commit {}, {}. \
         Each experiment trained {TIMED} batches after {WARMUP} of warm-up at its real size and batch, \
         on files of the published shapes; hours = s / batch × batches per epoch × epochs (training \
         alone). Peak: {memory}. Data: the run's whole training and test splits, which the trainer \
         keeps on the device; needs = peak + data.\n\n\
         | experiment | model | params | batch | s / batch | batches × epochs | hours | peak MB | data MB | needs |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        b.device,
        b.machine,
        b.commit,
        b.threads.map_or("libtorch's threads".into(), |t| format!("{t} threads")),
    );
    let mut failed = 0;
    for r in &b.experiments {
        match &r.status {
            Measurement::Measured(m) => {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {}{} | {:.3} | {} × {} | {:.2} | {} | {:.0} | {} |",
                    r.id,
                    r.model,
                    m.params,
                    m.batch,
                    if m.steps_per_batch > 1 {
                        format!(" ({} steps)", m.steps_per_batch)
                    } else {
                        String::new()
                    },
                    m.s_per_batch,
                    m.batches_per_epoch,
                    m.epochs,
                    m.hours,
                    m.peak_mb.map_or("?".into(), |p| format!("{p:.0}")),
                    m.data_mb,
                    m.run_mb().map_or("?".into(), fits),
                );
            }
            Measurement::Failed { reason } => {
                failed += 1;
                let _ = writeln!(
                    s,
                    "| {} | {} | failed: {} | | | | | | | |",
                    r.id,
                    r.model,
                    reason.replace('|', "\\|")
                );
            }
            Measurement::Skipped { reason } => {
                let _ = writeln!(s, "| {} | {} | {reason} | | | | | | | |", r.id, r.model);
            }
        }
    }
    let measured = b
        .experiments
        .iter()
        .filter(|r| matches!(r.status, Measurement::Measured(_)))
        .count();
    let _ = writeln!(
        s,
        "\n**Total: {:.1} hours** of training for the {measured} measured experiments on this device{}.",
        b.total_hours,
        if failed > 0 {
            format!("; {failed} failed (see above)")
        } else {
            String::new()
        }
    );
    s
}

/// The smallest of the usual GPU memory sizes that holds `mb`.
fn fits(mb: f64) -> String {
    let gib = mb / 1024.0;
    match GPU_GIB.iter().find(|&&g| gib <= g) {
        Some(g) => format!("{gib:.1} GiB (≤ {g:.0})"),
        None => format!("{gib:.1} GiB (> {:.0})", GPU_GIB[GPU_GIB.len() - 1]),
    }
}

/// The hours of the experiments measured in `out`'s `budget.json`, by id (none without one):
/// the workers of `--jobs` and `--devices` start the longest first.
pub fn measured_hours(out: &Path) -> std::collections::HashMap<String, f64> {
    RunFolder::new(out)
        .read::<Budget>()
        .map(|b| {
            b.experiments
                .into_iter()
                .filter_map(|r| match r.status {
                    Measurement::Measured(m) => Some((r.id, m.hours)),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Writes `budget.json` and `budget.md` into `out`.
pub fn write(out: &Path, b: &Budget) -> Result<()> {
    RunFolder::new(out).write(b)?;
    ono_io::atomic::write_atomic(&out.join("budget.md"), markdown(b).as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nvidia_smi_lines_give_the_process_memory() {
        let csv = "1234, 5120\n99, 100\n1234, 2048\n";
        assert_eq!(compute_apps_mb(csv, 1234), Some(7168.0));
        assert_eq!(compute_apps_mb(csv, 99), Some(100.0));
        assert_eq!(compute_apps_mb(csv, 7), None);
        assert_eq!(compute_apps_mb("No running processes found\n", 7), None);
        assert_eq!(compute_apps_mb("", 7), None);
    }

    #[test]
    fn memory_is_placed_in_the_smallest_gpu_that_holds_it() {
        assert_eq!(fits(1024.0), "1.0 GiB (≤ 24)");
        assert_eq!(fits(24.0 * 1024.0), "24.0 GiB (≤ 24)");
        assert_eq!(fits(30.0 * 1024.0), "30.0 GiB (≤ 40)");
        assert_eq!(fits(100.0 * 1024.0), "100.0 GiB (> 80)");
    }
}
