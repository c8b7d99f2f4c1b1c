//! `cargo xtask bench-compare`: the PyTorch original's training step and ours, each in its own
//! process, one after the other, at the same shapes, threads and device; prints their time and
//! memory ratios (docs/benchmarks.md, "Measuring against PyTorch").
//!
//! CPU memory is each process's peak resident set (ours: `VmHWM`; Python: `ru_maxrss`). On CUDA it
//! is the GPU's: tch 0.24 binds no caching-allocator statistics, so both processes are measured
//! alike by sampling `nvidia-smi --query-gpu=memory.used` every 100 ms while they run, less the
//! reading taken just before each starts (what the process added: its CUDA context and what the
//! caching allocator reserved).

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::torch::say;

/// What the PyTorch side imports besides torch and numpy, at the versions the ONO fixtures were
/// made with (`fixtures/ono/README.md`); `axial-positional-embedding` is imported by
/// linear-attention-transformer. Installed with `pip install --no-deps`.
pub const PIP_PACKAGES: &[(&str, &str)] = &[
    ("nystrom-attention", "0.0.11"),
    ("linear-attention-transformer", "0.19.1"),
    ("local-attention", "1.9.3"),
    ("einops", "0.6.1"),
    ("linformer", "0.2.1"),
    ("product-key-memory", "0.1.10"),
    ("axial-positional-embedding", "0.3.12"),
];

/// The goals of issue #19: ours / PyTorch.
pub const TIME_GOAL: f64 = 0.7;
pub const MEMORY_GOAL: f64 = 0.5;

/// A model with a PyTorch reference step under `benches/pytorch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Model {
    Ono,
    Fno,
    Galerkin,
    Gnot,
}

impl Model {
    pub const ALL: [Model; 4] = [Model::Ono, Model::Fno, Model::Galerkin, Model::Gnot];

    pub fn name(self) -> &'static str {
        match self {
            Model::Ono => "ono",
            Model::Fno => "fno",
            Model::Galerkin => "galerkin",
            Model::Gnot => "gnot",
        }
    }

    /// The benchmark shapes its PyTorch script times.
    pub fn presets(self) -> &'static [&'static str] {
        match self {
            Model::Ono | Model::Gnot => &["darcy", "ns2d", "elasticity"],
            Model::Fno | Model::Galerkin => &["darcy"],
        }
    }

    fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .with_context(|| format!("--models: `{s}` is not one of ono, fno, galerkin, gnot"))
    }
}

/// Which of ours' training modes is timed (`ono bench-step --recompute MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Ours' default (`auto`: the model's measured choice): no flag.
    Default,
    /// `--recompute none|blocks|selective`.
    Recompute(&'static str),
}

impl Mode {
    fn parse(s: &str) -> Result<Self> {
        match s {
            "default" | "auto" => Ok(Mode::Default),
            "none" | "plain" => Ok(Mode::Recompute("none")),
            "blocks" | "recompute" => Ok(Mode::Recompute("blocks")),
            "selective" => Ok(Mode::Recompute("selective")),
            _ => bail!("--mode: `{s}` is not default, none, blocks or selective"),
        }
    }

    fn flag(self) -> Option<&'static str> {
        match self {
            Mode::Default => None,
            Mode::Recompute(_) => Some("--recompute"),
        }
    }

    fn args(self) -> Vec<String> {
        match self {
            Mode::Default => Vec::new(),
            Mode::Recompute(m) => vec!["--recompute".into(), m.into()],
        }
    }
}

/// The validated options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    pub models: Vec<Model>,
    /// The (model, preset) pairs to time, in the order given.
    pub cases: Vec<(Model, &'static str)>,
    pub steps: usize,
    pub warmup: usize,
    pub rounds: usize,
    pub threads: usize,
    pub cuda: bool,
    pub mode: Mode,
    pub precision: Option<String>,
    /// Passed to ours as `--graphs` (the step as a CUDA graph); `None`: ours' default.
    pub graphs: Option<String>,
    pub json: Option<PathBuf>,
}

/// The command line as given, before validation.
#[derive(Debug, Clone, Default)]
pub struct RawOptions {
    pub models: Vec<String>,
    pub presets: Option<Vec<String>>,
    pub steps: usize,
    pub warmup: Option<usize>,
    pub rounds: usize,
    pub threads: Option<usize>,
    pub device: String,
    pub mode: String,
    pub precision: Option<String>,
    pub graphs: Option<String>,
    pub json: Option<PathBuf>,
}

impl Options {
    /// Checks the options and expands the models and presets into pairs. Without `--presets`,
    /// every preset of each model; with it, those of the listed presets each model has (a preset
    /// no selected model has is an error).
    pub fn new(raw: RawOptions) -> Result<Self> {
        let mut models = Vec::new();
        for m in &raw.models {
            let m = Model::parse(m.trim())?;
            if !models.contains(&m) {
                models.push(m);
            }
        }
        ensure!(!models.is_empty(), "--models: name at least one model");
        ensure!(raw.steps > 0, "--steps must be at least 1");
        ensure!(raw.rounds > 0, "--rounds must be at least 1");
        let threads = match raw.threads {
            Some(0) => bail!("--threads must be positive"),
            Some(t) => t,
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        };
        let cuda = match raw.device.as_str() {
            "cpu" => false,
            "cuda" => true,
            d => bail!(
                "--device: `{d}` is not cpu or cuda (choose the GPU with CUDA_VISIBLE_DEVICES)"
            ),
        };
        let mut cases = Vec::new();
        match &raw.presets {
            None => {
                for &m in &models {
                    cases.extend(m.presets().iter().map(|&p| (m, p)));
                }
            }
            Some(presets) => {
                ensure!(!presets.is_empty(), "--presets: name at least one preset");
                for p in presets {
                    let p = p.trim();
                    let owners: Vec<Model> = models
                        .iter()
                        .copied()
                        .filter(|m| m.presets().contains(&p))
                        .collect();
                    if owners.is_empty() {
                        let known: Vec<String> = models
                            .iter()
                            .map(|m| format!("{}: {}", m.name(), m.presets().join(", ")))
                            .collect();
                        bail!(
                            "--presets: no selected model has `{p}` (known: {})",
                            known.join("; ")
                        );
                    }
                    for m in owners {
                        let preset = m.presets().iter().find(|&&q| q == p).copied();
                        if let Some(preset) = preset.filter(|q| !cases.contains(&(m, *q))) {
                            cases.push((m, preset));
                        }
                    }
                }
                // Group by model, in the order the models were given.
                cases.sort_by_key(|(m, _)| models.iter().position(|x| x == m));
            }
        }
        if let Some(p) = &raw.precision {
            ensure!(
                ["f32", "bf16", "f16"].contains(&p.as_str()),
                "--precision: `{p}` is not f32, bf16 or f16"
            );
            // fno_step.py's loop has no autocast: a reduced precision would time ours only.
            ensure!(
                p == "f32" || !models.contains(&Model::Fno),
                "--precision {p}: the FNO reference step has no autocast; time fno in f32"
            );
        }
        if let Some(g) = &raw.graphs {
            ensure!(
                ["auto", "on", "off", "emulate"].contains(&g.as_str()),
                "--graphs: `{g}` is not auto, on, off or emulate"
            );
        }
        Ok(Self {
            models,
            cases,
            steps: raw.steps,
            warmup: raw.warmup.unwrap_or(if cuda { 2 } else { 1 }),
            rounds: raw.rounds,
            threads,
            cuda,
            mode: Mode::parse(&raw.mode)?,
            precision: raw.precision,
            graphs: raw.graphs,
            json: raw.json,
        })
    }

    fn device(&self) -> &'static str {
        if self.cuda {
            "cuda"
        } else {
            "cpu"
        }
    }

    /// Ours' `ono bench-step` arguments for a pair (the binary not included).
    pub fn ours_args(&self, model: Model, preset: &str) -> Vec<String> {
        let mut a: Vec<String> = match model {
            Model::Ono => vec!["--arch", "ono", "--preset", preset],
            Model::Fno => vec!["--arch", "fno2d", "--preset", "darcy", "--batch", "20"],
            Model::Galerkin => vec![
                "--arch",
                "galerkin",
                "--preset",
                "darcy",
                "--shapes",
                "darcy",
                "--overrides",
                GALERKIN_GRIDS,
            ],
            Model::Gnot => vec!["--arch", "gnot", "--preset", "gnot", "--shapes", preset],
        }
        .into_iter()
        .map(String::from)
        .collect();
        let mut rest = vec![
            "--steps".to_string(),
            self.steps.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--threads".into(),
            self.threads.to_string(),
            "--device".into(),
            self.device().into(),
        ];
        rest.extend(self.mode.args());
        if let Some(p) = &self.precision {
            rest.extend(["--precision".to_string(), p.clone()]);
        }
        if let Some(g) = &self.graphs {
            rest.extend(["--graphs".to_string(), g.clone()]);
        }
        let mut all = vec!["bench-step".to_string()];
        all.append(&mut a);
        all.append(&mut rest);
        all
    }

    /// The PyTorch script (relative to the workspace root) and its arguments for a pair.
    pub fn pytorch_args(&self, model: Model, preset: &str) -> Vec<String> {
        let common = [
            self.steps.to_string(),
            self.threads.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
        ];
        let mut a: Vec<String> = match model {
            Model::Ono => vec![
                "benches/pytorch/ono_step.py".into(),
                preset.into(),
                self.device().into(),
            ],
            Model::Galerkin => vec![
                "benches/pytorch/galerkin_step.py".into(),
                "darcy".into(),
                self.device().into(),
            ],
            Model::Gnot => vec![
                "benches/pytorch/gnot_step.py".into(),
                preset.into(),
                self.device().into(),
            ],
            // fno_step.py takes the batch before the steps.
            Model::Fno => {
                let mut a: Vec<String> = vec![
                    "benches/pytorch/fno_step.py".into(),
                    self.device().into(),
                    "20".into(),
                ];
                a.extend(common);
                return a;
            }
        };
        a.extend(common);
        if model == Model::Gnot {
            a.extend(["--preset".to_string(), "gnot".into()]);
        }
        // The same mixed precision on the PyTorch side: torch.autocast (steplib.ono_step).
        if let Some(p) = &self.precision {
            a.extend(["--precision".to_string(), p.clone()]);
        }
        a
    }
}

/// Galerkin's `darcy` preset at ONO's Darcy grid: the paper's 85/29 pair (85 → 50 → 29, up 49 → 85).
pub const GALERKIN_GRIDS: &str = "scaler_grids = {fine = 85, coarse = 29}";

/// One process's JSON line.
#[derive(Debug, Clone, PartialEq)]
pub struct StepRecord {
    pub median_s: f64,
    pub min_s: f64,
    pub peak_rss_mb: f64,
    pub params: Option<i64>,
    pub raw: Value,
}

/// The last line of `stdout` that is a JSON object with the step times.
pub fn parse_record(stdout: &str) -> Result<StepRecord> {
    let raw: Value = stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .find(|v| v.get("median_s").is_some())
        .context("no JSON line with median_s in the output")?;
    let num = |k: &str| -> Result<f64> {
        raw.get(k)
            .and_then(Value::as_f64)
            .filter(|v| v.is_finite() && *v >= 0.0)
            .with_context(|| format!("the JSON line has no finite, non-negative `{k}`: {raw}"))
    };
    Ok(StepRecord {
        median_s: num("median_s")?,
        min_s: num("min_s")?,
        peak_rss_mb: num("peak_rss_mb")?,
        params: raw.get("params").and_then(Value::as_i64),
        raw,
    })
}

/// `nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits` for one GPU: MiB.
pub fn parse_gpu_used(out: &str) -> Option<f64> {
    out.lines().next()?.trim().parse::<f64>().ok()
}

/// One process's measurement.
#[derive(Debug, Clone)]
pub struct Measured {
    pub record: StepRecord,
    /// The memory compared: peak RSS (CPU) or the GPU memory the process added (CUDA), MiB.
    pub memory_mb: f64,
    pub command: String,
    pub went_first: bool,
}

/// Both sides of one (model, preset, round).
#[derive(Debug, Clone)]
pub struct Row {
    pub model: Model,
    pub preset: &'static str,
    pub round: usize,
    pub pytorch: Measured,
    pub ours: Measured,
}

impl Row {
    pub fn time_ratio(&self) -> f64 {
        self.ours.record.median_s / self.pytorch.record.median_s
    }

    pub fn min_ratio(&self) -> f64 {
        self.ours.record.min_s / self.pytorch.record.min_s
    }

    pub fn memory_ratio(&self) -> f64 {
        self.ours.memory_mb / self.pytorch.memory_mb
    }
}

fn verdict(ratio: f64, goal: f64) -> &'static str {
    if ratio <= goal {
        "yes"
    } else {
        "no"
    }
}

/// The ratio table (markdown), one row per (model, preset, round).
pub fn table(rows: &[Row], cuda: bool) -> String {
    let mem = if cuda { "GPU MiB" } else { "peak RSS MiB" };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| model | preset | round | PyTorch median s (min) | PyTorch {mem} | ours median s (min) | ours {mem} \
         | time ratio median (min) | memory ratio | time ≤ {TIME_GOAL} | memory ≤ {MEMORY_GOAL} |"
    );
    let _ = writeln!(
        s,
        "|---|---|---:|---:|---:|---:|---:|---:|---:|:---:|:---:|"
    );
    for r in rows {
        let (p, o) = (&r.pytorch, &r.ours);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} ({:.3}) | {:.0} | {:.3} ({:.3}) | {:.0} | {:.2} ({:.2}) | {:.2} | {} | {} |",
            r.model.name(),
            r.preset,
            r.round + 1,
            p.record.median_s,
            p.record.min_s,
            p.memory_mb,
            o.record.median_s,
            o.record.min_s,
            o.memory_mb,
            r.time_ratio(),
            r.min_ratio(),
            r.memory_ratio(),
            verdict(r.time_ratio(), TIME_GOAL),
            verdict(r.memory_ratio(), MEMORY_GOAL),
        );
    }
    for r in rows {
        if let (Some(a), Some(b)) = (r.pytorch.record.params, r.ours.record.params) {
            if a != b {
                let _ = writeln!(
                    s,
                    "warning: {}/{}: PyTorch has {a} parameters, ours {b}: not the same network",
                    r.model.name(),
                    r.preset
                );
            }
        }
    }
    s
}

/// The JSON file of `--json`: the machine, the options, every raw record and the ratios.
pub fn json_report(rows: &[Row], o: &Options, machine: &Value) -> Value {
    let side = |m: &Measured| {
        json!({
            "command": m.command,
            "went_first": m.went_first,
            "memory_mb": m.memory_mb,
            "record": m.record.raw,
        })
    };
    json!({
        "machine": machine,
        "options": {
            "cases": o.cases.iter().map(|(m, p)| format!("{}/{p}", m.name())).collect::<Vec<_>>(),
            "steps": o.steps, "warmup": o.warmup, "rounds": o.rounds, "threads": o.threads,
            "device": o.device(), "mode": format!("{:?}", o.mode).to_lowercase(),
            "precision": o.precision,
            "graphs": o.graphs,
            "memory": if o.cuda { "nvidia-smi memory.used peak less the reading before the process" }
                      else { "peak RSS of the process (VmHWM / ru_maxrss)" },
        },
        "rows": rows.iter().map(|r| json!({
            "model": r.model.name(), "preset": r.preset, "round": r.round + 1,
            "pytorch": side(&r.pytorch), "ours": side(&r.ours),
            "time_ratio_median": r.time_ratio(), "time_ratio_min": r.min_ratio(),
            "memory_ratio": r.memory_ratio(),
            "meets_time": r.time_ratio() <= TIME_GOAL, "meets_memory": r.memory_ratio() <= MEMORY_GOAL,
        })).collect::<Vec<_>>(),
    })
}

/// Writes `bytes` to `path` through a temporary file in the same folder, synced, and a rename.
pub fn write_atomic(path: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let name = path
        .file_name()
        .with_context(|| format!("{}: not a file path", path.display()))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    let write = || -> std::io::Result<()> {
        use std::io::Write;
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes.as_ref())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!("writing {}: {e}", path.display())
    })
}

/// The Python packages missing from `python` or at another version, as `name==version`.
fn missing_packages(python: &Path) -> Result<Vec<String>> {
    let script = "import importlib.metadata as m, json, sys\n\
                  out = {}\n\
                  for n in sys.argv[1:]:\n    \
                      try: out[n] = m.version(n)\n    \
                      except m.PackageNotFoundError: out[n] = None\n\
                  print(json.dumps(out))";
    let out = Command::new(python)
        .arg("-c")
        .arg(script)
        .args(PIP_PACKAGES.iter().map(|(n, _)| n))
        .output()
        .with_context(|| format!("could not run {}", python.display()))?;
    ensure!(
        out.status.success(),
        "{} could not list its packages: {}",
        python.display(),
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let found: Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("unexpected answer from {}", python.display()))?;
    Ok(PIP_PACKAGES
        .iter()
        .filter(|(n, v)| found[*n].as_str() != Some(*v))
        .map(|(n, v)| format!("{n}=={v}"))
        .collect())
}

/// Installs the pinned packages into `python`'s environment when missing, only where `may_install`
/// (the xtask's own venv); elsewhere stops with the command to run.
pub fn ensure_packages(python: &Path, may_install: bool) -> Result<()> {
    let missing = missing_packages(python)?;
    if missing.is_empty() {
        return Ok(());
    }
    let shown = format!(
        "{} -m pip install --no-deps {}",
        python.display(),
        missing.join(" ")
    );
    if !may_install {
        bail!(
            "the PyTorch side needs {}; install them: {shown}",
            missing.join(", ")
        );
    }
    say(format!("installing {}", missing.join(" ")));
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .args(&missing)
        .status()
        .context("could not run pip")?;
    ensure!(status.success(), "`{shown}` failed ({status})");
    let still = missing_packages(python)?;
    ensure!(
        still.is_empty(),
        "pip reported success but {} are still missing",
        still.join(", ")
    );
    Ok(())
}

/// The GPU whose memory is sampled: the first of CUDA_VISIBLE_DEVICES when it is an index.
fn gpu_index() -> String {
    std::env::var("CUDA_VISIBLE_DEVICES")
        .ok()
        .and_then(|v| v.split(',').next().map(|s| s.trim().to_string()))
        .filter(|s| s.parse::<u32>().is_ok())
        .unwrap_or_else(|| "0".into())
}

fn gpu_used_mb(index: &str) -> Option<f64> {
    let out = Command::new("nvidia-smi")
        .args([
            "--query-gpu=memory.used",
            "--format=csv,noheader,nounits",
            "-i",
            index,
        ])
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| parse_gpu_used(&String::from_utf8_lossy(&out.stdout)))
        .flatten()
}

/// Runs `cmd`, collecting its output; on CUDA samples the GPU's used memory every 100 ms and
/// returns the peak less the reading before the start.
fn run_measured(mut cmd: Command, shown: &str, cuda: bool) -> Result<(StepRecord, Option<f64>)> {
    let gpu = gpu_index();
    let baseline = if cuda {
        Some(gpu_used_mb(&gpu).context(
            "--device cuda compares GPU memory, read with `nvidia-smi --query-gpu=memory.used`, \
             which did not answer",
        )?)
    } else {
        None
    };
    say(format!("running {shown}"));
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("could not start {shown}"))?;
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = reader(Box::new(child.stdout.take().context("no stdout")?));
    let err = reader(Box::new(child.stderr.take().context("no stderr")?));
    let mut peak = baseline;
    let status = loop {
        if let Some(status) = child.try_wait()? {
            break status;
        }
        if let (Some(p), Some(now)) = (peak.as_mut(), baseline.and_then(|_| gpu_used_mb(&gpu))) {
            *p = p.max(now);
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if !status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(15).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!("{shown} failed ({status}):\n{}", tail.join("\n"));
    }
    let record = parse_record(&stdout).with_context(|| format!("reading the output of {shown}"))?;
    Ok((record, peak.zip(baseline).map(|(p, b)| p - b)))
}

/// The machine, for the report: CPU model, cores, memory and, on CUDA, the GPU.
pub fn machine(cuda: bool) -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0);
    let gpu = cuda
        .then(|| {
            Command::new("nvidia-smi")
                .args([
                    "--query-gpu=name,driver_version",
                    "--format=csv,noheader",
                    "-i",
                ])
                .arg(gpu_index())
                .output()
                .ok()
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .flatten();
    json!({
        "cpu": cpu,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "memory_gib": mem_gib,
        "gpu": gpu,
    })
}

/// How a command is shown: its thread variables, the program relative to `root`, the arguments
/// (quoted where they hold spaces).
fn shown(root: &Path, program: &Path, args: &[String], threads: usize) -> String {
    let program = program.strip_prefix(root).unwrap_or(program);
    let mut s = format!("OMP_NUM_THREADS={threads} {}", program.display());
    for a in args {
        if a.contains(' ') {
            let _ = write!(s, " '{a}'");
        } else {
            let _ = write!(s, " {a}");
        }
    }
    s
}

/// Stops early when the `ono` binary lacks a flag the options pass to it.
pub fn check_flags(ono_help: &str, o: &Options) -> Result<()> {
    let wanted = o
        .mode
        .flag()
        .into_iter()
        .chain(o.precision.as_ref().map(|_| "--precision"))
        .chain(o.graphs.as_ref().map(|_| "--graphs"));
    for flag in wanted {
        ensure!(
            ono_help.contains(flag),
            "this `ono bench-step` has no {flag} (see `ono bench-step --help`)"
        );
    }
    Ok(())
}

/// Everything needed to start the two sides.
pub struct Runner<'a> {
    pub root: &'a Path,
    pub ono: &'a Path,
    pub python: &'a Path,
    /// Applies the libtorch environment (library path) to a command.
    pub env: &'a dyn Fn(&mut Command),
}

impl Runner<'_> {
    fn command(&self, program: &Path, args: &[String], threads: usize) -> Command {
        let mut cmd = Command::new(program);
        (self.env)(&mut cmd);
        cmd.args(args).current_dir(self.root);
        for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
            cmd.env(var, threads.to_string());
        }
        // Python's deprecation warnings from the attention packages are noise here.
        cmd.env("PYTHONWARNINGS", "ignore");
        cmd
    }

    /// Times every pair, `rounds` times, PyTorch first in odd rounds and ours first in even ones.
    pub fn run(&self, o: &Options) -> Result<Vec<Row>> {
        let mut rows = Vec::new();
        for round in 0..o.rounds {
            for &(model, preset) in &o.cases {
                let py_args = o.pytorch_args(model, preset);
                let ours_args = o.ours_args(model, preset);
                let sides = [(self.python, py_args), (self.ono, ours_args)];
                let order: [usize; 2] = if round % 2 == 0 { [0, 1] } else { [1, 0] };
                let mut measured: [Option<Measured>; 2] = [None, None];
                for (k, &i) in order.iter().enumerate() {
                    let (program, args) = &sides[i];
                    let shown = shown(self.root, program, args, o.threads);
                    let (record, gpu) =
                        run_measured(self.command(program, args, o.threads), &shown, o.cuda)?;
                    let memory_mb = gpu.unwrap_or(record.peak_rss_mb);
                    measured[i] = Some(Measured {
                        record,
                        memory_mb,
                        command: shown,
                        went_first: k == 0,
                    });
                }
                let [Some(pytorch), Some(ours)] = measured else {
                    bail!("internal: a side was not run");
                };
                rows.push(Row {
                    model,
                    preset,
                    round,
                    pytorch,
                    ours,
                });
            }
        }
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(models: &[&str], presets: Option<&[&str]>) -> RawOptions {
        RawOptions {
            models: models.iter().map(|s| s.to_string()).collect(),
            presets: presets.map(|p| p.iter().map(|s| s.to_string()).collect()),
            steps: 3,
            warmup: None,
            rounds: 1,
            threads: Some(2),
            device: "cpu".into(),
            mode: "default".into(),
            precision: None,
            graphs: None,
            json: None,
        }
    }

    fn record(median: f64, min: f64, mb: f64, params: i64) -> StepRecord {
        StepRecord {
            median_s: median,
            min_s: min,
            peak_rss_mb: mb,
            params: Some(params),
            raw: json!({}),
        }
    }

    fn measured(r: StepRecord) -> Measured {
        Measured {
            memory_mb: r.peak_rss_mb,
            record: r,
            command: String::new(),
            went_first: false,
        }
    }

    fn ns2d_row(pytorch: StepRecord, ours: StepRecord) -> Row {
        Row {
            model: Model::Ono,
            preset: "ns2d",
            round: 0,
            pytorch: measured(pytorch),
            ours: measured(ours),
        }
    }

    #[test]
    fn default_presets_are_each_models_own() {
        let o = Options::new(raw(&["ono", "fno", "gnot"], None)).unwrap();
        let names: Vec<String> = o
            .cases
            .iter()
            .map(|(m, p)| format!("{}/{p}", m.name()))
            .collect();
        assert_eq!(
            names,
            [
                "ono/darcy",
                "ono/ns2d",
                "ono/elasticity",
                "fno/darcy",
                "gnot/darcy",
                "gnot/ns2d",
                "gnot/elasticity"
            ]
        );
        assert_eq!(o.warmup, 1);
        assert_eq!(o.threads, 2);
    }

    #[test]
    fn listed_presets_go_to_the_models_that_have_them() {
        let o = Options::new(raw(&["galerkin", "ono"], Some(&["ns2d", "darcy"]))).unwrap();
        let names: Vec<String> = o
            .cases
            .iter()
            .map(|(m, p)| format!("{}/{p}", m.name()))
            .collect();
        assert_eq!(names, ["galerkin/darcy", "ono/ns2d", "ono/darcy"]);
    }

    #[test]
    fn bad_options_are_refused_with_the_flag_named() {
        let err = |r: RawOptions| Options::new(r).unwrap_err().to_string();
        assert!(err(raw(&["onoo"], None)).contains("--models"));
        assert!(err(raw(&["fno"], Some(&["ns2d"]))).contains("no selected model has `ns2d`"));
        assert!(err(raw(&[], None)).contains("--models"));
        let mut r = raw(&["ono"], None);
        r.steps = 0;
        assert!(err(r).contains("--steps"));
        let mut r = raw(&["ono"], None);
        r.rounds = 0;
        assert!(err(r).contains("--rounds"));
        let mut r = raw(&["ono"], None);
        r.threads = Some(0);
        assert!(err(r).contains("--threads"));
        let mut r = raw(&["ono"], None);
        r.device = "cuda:1".into();
        assert!(err(r).contains("--device"));
        let mut r = raw(&["ono"], None);
        r.mode = "fast".into();
        assert!(err(r).contains("--mode"));
        let mut r = raw(&["ono"], None);
        r.precision = Some("--steps".into());
        assert!(err(r).contains("--precision"));
    }

    #[test]
    fn both_sides_get_the_same_steps_warmup_threads_and_device() {
        let mut r = raw(&["gnot"], Some(&["elasticity"]));
        r.device = "cuda".into();
        r.mode = "recompute".into();
        r.precision = Some("bf16".into());
        let o = Options::new(r).unwrap();
        assert_eq!(o.warmup, 2, "two warm-up steps on CUDA");
        assert_eq!(
            o.ours_args(Model::Gnot, "elasticity").join(" "),
            "bench-step --arch gnot --preset gnot --shapes elasticity --steps 3 --warmup 2 \
             --threads 2 --device cuda --recompute blocks --precision bf16"
        );
        assert_eq!(
            o.pytorch_args(Model::Gnot, "elasticity").join(" "),
            "benches/pytorch/gnot_step.py elasticity cuda 3 2 --warmup 2 --preset gnot \
             --precision bf16"
        );
        let o = Options::new(raw(&["fno"], None)).unwrap();
        assert_eq!(
            o.pytorch_args(Model::Fno, "darcy").join(" "),
            "benches/pytorch/fno_step.py cpu 20 3 2 --warmup 1"
        );
        assert!(o
            .ours_args(Model::Fno, "darcy")
            .join(" ")
            .contains("--batch 20"));
        let g = o.ours_args(Model::Galerkin, "darcy");
        assert!(g.contains(&GALERKIN_GRIDS.to_string()));
    }

    #[test]
    fn the_json_line_is_found_among_other_output() {
        let out = "Using Linear Attention\n{\"check\": 1}\n\
                   {\"median_s\": 1.5, \"min_s\": 1.25, \"peak_rss_mb\": 4096.5, \"params\": 1112705}\n";
        let r = parse_record(out).unwrap();
        assert_eq!((r.median_s, r.min_s, r.peak_rss_mb), (1.5, 1.25, 4096.5));
        assert_eq!(r.params, Some(1112705));
        assert!(parse_record("no json here\n").is_err());
        let e =
            parse_record("{\"median_s\": 1.0, \"min_s\": -1.0, \"peak_rss_mb\": 1.0}").unwrap_err();
        assert!(e.to_string().contains("min_s"), "{e}");
        let e = parse_record("{\"median_s\": 1.0, \"min_s\": 1.0}").unwrap_err();
        assert!(e.to_string().contains("peak_rss_mb"), "{e}");
    }

    #[test]
    fn nvidia_smi_answers_parse() {
        assert_eq!(parse_gpu_used("12471\n"), Some(12471.0));
        assert_eq!(parse_gpu_used(" 0 \n1\n"), Some(0.0));
        assert_eq!(parse_gpu_used("[N/A]\n"), None);
        assert_eq!(parse_gpu_used(""), None);
    }

    #[test]
    fn ratios_and_verdicts_in_the_table() {
        let row = ns2d_row(
            record(2.0, 1.6, 6000.0, 1112705),
            record(1.3, 1.2, 2400.0, 1112705),
        );
        assert!((row.time_ratio() - 0.65).abs() < 1e-12);
        assert!((row.min_ratio() - 0.75).abs() < 1e-12);
        assert!((row.memory_ratio() - 0.4).abs() < 1e-12);
        let t = table(std::slice::from_ref(&row), false);
        let line = t.lines().nth(2).unwrap();
        assert_eq!(
            line,
            "| ono | ns2d | 1 | 2.000 (1.600) | 6000 | 1.300 (1.200) | 2400 | 0.65 (0.75) | 0.40 | yes | yes |"
        );
        assert!(t.lines().next().unwrap().contains("peak RSS MiB"));
        assert!(!t.contains("warning"));
        let mut worse = row.clone();
        worse.ours = measured(record(1.5, 1.5, 3100.0, 1));
        let t = table(&[worse], true);
        assert!(t.lines().next().unwrap().contains("GPU MiB"));
        assert!(t
            .lines()
            .nth(2)
            .unwrap()
            .ends_with("| 0.75 (0.94) | 0.52 | no | no |"));
        assert!(t.contains("warning: ono/ns2d: PyTorch has 1112705 parameters, ours 1"));
    }

    #[test]
    fn flags_missing_from_ono_stop_the_run() {
        let mut r = raw(&["ono"], None);
        r.mode = "plain".into();
        let o = Options::new(r).unwrap();
        assert_eq!(o.mode, Mode::Recompute("none"));
        assert!(check_flags("--precision", &o).is_err());
        assert!(check_flags("--recompute <RECOMPUTE>", &o).is_ok());
        let o = Options::new(raw(&["ono"], None)).unwrap();
        assert!(check_flags("", &o).is_ok());
    }

    #[test]
    fn json_report_is_written_whole() {
        let dir = std::env::temp_dir().join(format!("bench-compare-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        let o = Options::new(raw(&["ono"], Some(&["ns2d"]))).unwrap();
        let row = ns2d_row(record(2.0, 1.6, 6000.0, 1), record(1.0, 1.0, 3000.0, 1));
        let v = json_report(&[row], &o, &json!({"cpu": "x"}));
        write_atomic(&path, v.to_string()).unwrap();
        let back: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back["rows"][0]["time_ratio_median"], json!(0.5));
        assert_eq!(back["rows"][0]["meets_memory"], json!(true));
        assert_eq!(back["options"]["cases"], json!(["ono/ns2d"]));
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(write_atomic(&dir.join("missing").join("x.json"), "{}").is_err());
    }
}
