//! Many `reproduce` processes on one results folder. Each experiment is trained under its lock
//! (`<experiment>/.lock`, [`ono_io::lock`]): processes started at once, the workers of `--jobs`
//! and `--devices` on one machine or the tasks of a cluster job array on a shared file system,
//! never train the same experiment twice, and a killed process holds nothing. A process that
//! finds an experiment locked goes on with the others and comes back to wait for it at the end,
//! so that every process ends knowing every result. `--shard I/N` splits the plan into fixed
//! parts instead.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context as _, Result};

use super::plan::{Experiment, Work};

/// `--shard I/N`: the experiments whose position in the plan is I − 1 modulo N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// 1..=count.
    pub index: usize,
    pub count: usize,
}

impl std::str::FromStr for Shard {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        let parsed = s
            .split_once('/')
            .and_then(|(i, n)| Some((i.trim().parse().ok()?, n.trim().parse().ok()?)));
        match parsed {
            Some((index, count)) if count >= 1 && (1..=count).contains(&index) => {
                Ok(Shard { index, count })
            }
            _ => bail!("--shard: `{s}` is not I/N with 1 ≤ I ≤ N (such as 3/8)"),
        }
    }
}

impl Shard {
    /// Whether the experiment at `position` (0-based, in plan order) is this shard's.
    pub fn takes(self, position: usize) -> bool {
        position % self.count == self.index - 1
    }
}

/// One worker process of `--jobs` or `--devices`.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// `job 2 of 4`, `cuda:1`: the prefix of its lines.
    pub label: String,
    pub device: String,
    pub threads: i32,
}

/// The workers `--jobs N` (on `device`) or `--devices a,b,…` (one each) ask for, with the torch
/// threads (`threads`, else the machine's cores) split evenly between them; none when neither
/// is given.
pub fn plan_jobs(
    jobs: Option<usize>,
    devices: Option<&str>,
    device: &str,
    threads: Option<i32>,
) -> Result<Vec<Job>> {
    let total = match threads {
        Some(n) => n,
        None => std::thread::available_parallelism().map_or(1, |n| n.get() as i32),
    };
    let split = |n: usize| (total / n as i32).max(1);
    match (jobs, devices) {
        (Some(_), Some(_)) => bail!("--jobs and --devices: give one of them"),
        (None, None) => Ok(Vec::new()),
        (Some(n), None) => {
            ensure!(n >= 1, "--jobs must be at least 1");
            Ok((1..=n)
                .map(|k| Job {
                    label: format!("job {k} of {n}"),
                    device: device.to_string(),
                    threads: split(n),
                })
                .collect())
        }
        (None, Some(list)) => {
            let list: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .collect();
            ensure!(!list.is_empty(), "--devices: no device in the list");
            for (i, d) in list.iter().enumerate() {
                crate::device(d).with_context(|| format!("--devices: `{d}`"))?;
                ensure!(
                    !list[..i].contains(d),
                    "--devices: `{d}` is listed twice (use --jobs for several processes on one device)"
                );
            }
            Ok(list
                .iter()
                .map(|d| Job {
                    label: d.to_string(),
                    device: d.to_string(),
                    threads: split(list.len()),
                })
                .collect())
        }
    }
}

/// Runs `args` (a `reproduce` call of this binary) once per job, each with `--worker <label>
/// --device <d> --threads <t>` added, all at once, and waits for them. Their output comes back
/// line by line, each line led by its job's label. A worker that fails is reported, not fatal:
/// whatever it left undone is trained by the caller's own pass.
pub fn run_workers(exe: &Path, args: &[OsString], jobs: &[Job]) -> Result<()> {
    let mut children = Vec::with_capacity(jobs.len());
    for job in jobs {
        let mut cmd = Command::new(exe);
        cmd.arg("reproduce")
            .args(args)
            .args(["--worker", &job.label, "--device", &job.device])
            .args(["--threads", &job.threads.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {} ({})", exe.display(), job.label))?;
        let relays = [
            relay(child.stdout.take(), job.label.clone()),
            relay(child.stderr.take(), job.label.clone()),
        ];
        eprintln!(
            "[{}] started: {} threads on {}",
            job.label, job.threads, job.device
        );
        children.push((job, child, relays));
    }
    for (job, mut child, relays) in children {
        let status = child
            .wait()
            .with_context(|| format!("waiting for {}", job.label))?;
        for r in relays.into_iter().flatten() {
            let _ = r.join();
        }
        if !status.success() {
            eprintln!("[{}] ended with {status}", job.label);
        }
    }
    Ok(())
}

/// Copies a child's stream to our stderr, one line at a time, each led by `[label]`.
fn relay(
    stream: Option<impl std::io::Read + Send + 'static>,
    label: String,
) -> Option<std::thread::JoinHandle<()>> {
    let stream = stream?;
    Some(std::thread::spawn(move || {
        for line in BufReader::new(stream).lines() {
            match line {
                Ok(line) => eprintln!("[{label}] {line}"),
                Err(_) => break,
            }
        }
    }))
}

/// The plan's experiments, longest first (ties in plan order), as positions. An experiment's
/// length is its hours in `measured` (a budget of `--plan-only --measure` in the results folder),
/// else its [`cost`] converted to hours at the median hours per cost of the measured ones, else
/// its cost.
pub fn longest_first(experiments: &[Experiment], measured: &HashMap<String, f64>) -> Vec<usize> {
    let mut per_cost: Vec<f64> = experiments
        .iter()
        .filter_map(|e| {
            let (hours, cost) = (measured.get(&e.id)?, cost(e));
            (cost > 0.0).then(|| hours / cost)
        })
        .collect();
    per_cost.sort_by(f64::total_cmp);
    let scale = per_cost.get(per_cost.len() / 2).copied().unwrap_or(1.0);
    let length: Vec<f64> = experiments
        .iter()
        .map(|e| {
            measured
                .get(&e.id)
                .copied()
                .unwrap_or_else(|| cost(e) * scale)
        })
        .collect();
    let mut order: Vec<usize> = (0..experiments.len()).collect();
    order.sort_by(|&a, &b| length[b].total_cmp(&length[a]));
    order
}

/// A rough measure of an experiment's work, to start the long ones first: epochs × training
/// samples × points per sample. Models differ in cost per point, which this leaves out; a timed
/// step (`ono bench-step`) counts as nothing.
pub fn cost(e: &Experiment) -> f64 {
    let Work::Train { config, .. } = &e.work else {
        return 0.0;
    };
    let d = &config.data;
    let default = d.benchmark.map_or(1000, |b| b.default_split(d.layout).0);
    let samples = d.ntrain.map_or(default, |n| n as usize) as f64;
    let Some(benchmark) = d.benchmark else {
        return config.epochs as f64 * samples * 1000.0;
    };
    use ono_data::benchmarks::Benchmark as B;
    // The stride the loader subsamples each axis by, when the benchmark subsamples.
    let stride = match benchmark {
        B::Darcy | B::DarcyInverse => d.r.unwrap_or(5),
        B::Ns2d => d.r.unwrap_or(1),
        B::Burgers => d.r.unwrap_or(8),
        _ => 1,
    };
    let extent = benchmark.published_extent();
    let side = |full: usize| ((full as f64 - 1.0) / stride as f64).floor() + 1.0;
    let grid: f64 = extent.grid.iter().map(|&n| side(n)).product();
    // NS2d predicts the 10 steps after its 10 inputs; Plasticity every step.
    let steps = match benchmark {
        B::Ns2d => extent.time_steps as f64 / 2.0,
        _ => extent.time_steps as f64,
    };
    let points = grid * steps;
    config.epochs as f64 * samples * points
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_split_the_plan_without_overlap() {
        let s: Shard = "2/3".parse().unwrap();
        assert_eq!(s, Shard { index: 2, count: 3 });
        let taken: Vec<usize> = (0..7).filter(|&p| s.takes(p)).collect();
        assert_eq!(taken, [1, 4]);
        let all: Vec<Shard> = (1..=3).map(|i| format!("{i}/3").parse().unwrap()).collect();
        for p in 0..20 {
            assert_eq!(all.iter().filter(|s| s.takes(p)).count(), 1, "{p}");
        }
        for bad in ["0/3", "4/3", "1/0", "3", "a/b", "1/-2", ""] {
            let e = bad.parse::<Shard>().unwrap_err().to_string();
            assert!(e.contains("--shard"), "{bad}: {e}");
        }
    }

    /// Measured hours order the experiments they cover; the others are placed by their cost at
    /// the measured hours per cost.
    #[test]
    fn measured_hours_order_the_work() {
        let data = super::super::plan::DataPaths {
            published: "/data".into(),
            neuralop: "/neuralop".into(),
            generated: "/out/data".into(),
        };
        let plan = super::super::plan::plan(super::super::plan::Profile::Paper, &data).unwrap();
        let e = &plan.experiments;
        let trained: Vec<usize> = (0..e.len()).filter(|&i| cost(&e[i]) > 0.0).collect();
        let by_cost = longest_first(e, &HashMap::new());
        // Without a budget: by cost, the timed steps (cost 0) last.
        assert!(by_cost.windows(2).all(|w| cost(&e[w[0]]) >= cost(&e[w[1]])));
        // Measured hours that reverse the costs reverse the order (the timed steps stay last).
        let measured: HashMap<String, f64> = trained
            .iter()
            .map(|&i| (e[i].id.clone(), 1.0 / cost(&e[i])))
            .collect();
        let order = longest_first(e, &measured);
        assert!(order[..trained.len()]
            .windows(2)
            .all(|w| cost(&e[w[0]]) <= cost(&e[w[1]])));
        assert!(order[trained.len()..].iter().all(|&i| cost(&e[i]) == 0.0));
        // One experiment measured at twice its cost: the others are scaled by the same ratio, so
        // the order is the costs' again.
        let one = trained[trained.len() / 2];
        let measured = HashMap::from([(e[one].id.clone(), 2.0 * cost(&e[one]))]);
        assert_eq!(longest_first(e, &measured), by_cost);
    }

    #[test]
    fn jobs_split_the_threads_and_devices_are_checked() {
        let j = plan_jobs(Some(2), None, "cpu", Some(4)).unwrap();
        assert_eq!(j.len(), 2);
        assert!(j.iter().all(|j| j.threads == 2 && j.device == "cpu"));
        assert_eq!(j[1].label, "job 2 of 2");
        let j = plan_jobs(Some(3), None, "cpu", Some(2)).unwrap();
        assert!(j.iter().all(|j| j.threads == 1), "at least one thread each");
        let j = plan_jobs(None, Some("cuda:0, cuda:1"), "cpu", Some(16)).unwrap();
        assert_eq!(
            j.iter()
                .map(|j| (j.device.as_str(), j.threads))
                .collect::<Vec<_>>(),
            [("cuda:0", 8), ("cuda:1", 8)]
        );
        assert!(plan_jobs(None, None, "cpu", None).unwrap().is_empty());
        for (jobs, devices, want) in [
            (Some(2), Some("cpu"), "give one"),
            (Some(0), None, "at least 1"),
            (None, Some("cuda:0,cuda:0"), "twice"),
            (None, Some("tpu:0"), "tpu:0"),
            (None, Some(" , "), "no device"),
        ] {
            let e = format!("{:#}", plan_jobs(jobs, devices, "cpu", None).unwrap_err());
            assert!(e.contains(want), "{jobs:?} {devices:?}: {e}");
        }
    }
}
