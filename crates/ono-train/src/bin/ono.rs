//! `ono`: the user-facing command line of the toolkit.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ono_data::dataset::TensorDataset;
use ono_models::Preset;
use ono_train::config::{parse_device, Regime, TrainConfig};
use ono_train::progress::Progress;
use ono_train::trainer::{self, Predictor, Trainer};
use tch::{Device, Kind, Tensor};

#[derive(Parser)]
#[command(
    name = "ono",
    version,
    about = "Neural operators on libtorch",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the libtorch build this binary runs on and the devices it sees, and run a small
    /// matrix product on each device as a smoke test.
    Info,
    /// Train a model from an experiment file (TOML): checkpoints, metrics.jsonl, curves.png and
    /// panels.png go to its `output_dir`.
    Train {
        /// The experiment file.
        config: PathBuf,
        /// Continue the run in `output_dir` from its last checkpoint.
        #[arg(long)]
        resume: bool,
        /// Print nothing while training (the summary line is still printed).
        #[arg(long)]
        quiet: bool,
    },
    /// Evaluate a training checkpoint on the test split of a dataset; prints one JSON line.
    Eval {
        /// A checkpoint written by `ono train` (`checkpoints/last.safetensors` or `best`).
        checkpoint: PathBuf,
        /// The dataset file (default: the one the run was trained on).
        #[arg(long)]
        data: Option<PathBuf>,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Samples per forward pass.
        #[arg(long, default_value_t = 8)]
        batch: i64,
    },
    /// Predict with a training checkpoint: reads `fx` (S, N, Cf) and `pos` (1 or S, N, d) from a
    /// safetensors file, writes `pred` to another.
    Predict {
        /// A checkpoint written by `ono train`.
        checkpoint: PathBuf,
        /// Input safetensors file with `fx` and `pos` (raw, un-normalized values).
        #[arg(long)]
        input: PathBuf,
        /// Output safetensors file; gets `pred` (S, N, C) or (S, N, C, T).
        #[arg(long)]
        output: PathBuf,
        /// Time steps to predict for a time-series model.
        #[arg(long, default_value_t = 10)]
        steps: i64,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
    },
    /// Make datasets.
    #[command(subcommand)]
    Data(DataCmd),
    /// Time full training steps (forward, loss, backward, clipping, AdamW) on random data at a
    /// preset's shapes and batch size; prints one JSON line.
    BenchStep {
        /// darcy, ns2d, airfoil, pipe, elasticity, plasticity, super_resolution, time_extrapolation.
        #[arg(long)]
        preset: String,
        /// Timed steps.
        #[arg(long, default_value_t = 5)]
        steps: usize,
        /// Untimed warm-up steps.
        #[arg(long, default_value_t = 1)]
        warmup: usize,
        /// Torch intra-op threads (default: libtorch's).
        #[arg(long)]
        threads: Option<i32>,
        /// cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// Recompute each block's activations in the backward pass (less memory, ~1 more
        /// forward per step).
        #[arg(long)]
        recompute: bool,
    },
}

#[derive(Subcommand)]
enum DataCmd {
    /// Darcy flow (FNO's process: GRF coefficient thresholded to 12/3, −∇·(a∇u) = 1 solved with
    /// the reference finite differences) at a chosen resolution, as a dataset file for
    /// `ono train`.
    Darcy {
        /// Training samples.
        #[arg(long, default_value_t = 1000)]
        n_train: usize,
        /// Test samples.
        #[arg(long, default_value_t = 200)]
        n_test: usize,
        /// Grid size K (K×K cell centres; 421 in the published data).
        #[arg(long, default_value_t = 85)]
        res: usize,
        /// Keep every r-th cell of the K×K solution in each direction (the ONO scripts use r = 5
        /// on 421); coarse data are best made this way.
        #[arg(long, default_value_t = 1)]
        stride: usize,
        /// Seed; sample i depends only on (seed, i).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output file (safetensors).
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() -> Result<()> {
    tune_allocator();
    match Cli::parse().command {
        Cmd::Info => info(),
        Cmd::Train {
            config,
            resume,
            quiet,
        } => train(config, resume, quiet),
        Cmd::Eval {
            checkpoint,
            data,
            device,
            batch,
        } => eval(checkpoint, data, &device, batch),
        Cmd::Predict {
            checkpoint,
            input,
            output,
            steps,
            device,
        } => predict(checkpoint, input, output, steps, &device),
        Cmd::Data(DataCmd::Darcy {
            n_train,
            n_test,
            res,
            stride,
            seed,
            out,
        }) => {
            let cfg = ono_data::darcy::DarcyConfig {
                resolution: res,
                ..Default::default()
            };
            let start = std::time::Instant::now();
            cfg.dataset(n_train, n_test, seed, stride)?.write(&out)?;
            let k = res.div_ceil(stride);
            eprintln!(
                "wrote {n_train} + {n_test} Darcy samples at {k}×{k} (solved at {res}×{res}) to {} in {:.1} s",
                out.display(),
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        Cmd::BenchStep {
            preset,
            steps,
            warmup,
            threads,
            device,
            recompute,
        } => bench_step(&preset, steps, warmup, threads, &device, recompute),
    }
}

fn device(s: &str) -> Result<Device> {
    parse_device(s).map_err(|m| anyhow::anyhow!("--device: {m}"))
}

fn train(config: PathBuf, resume: bool, quiet: bool) -> Result<()> {
    let cfg = TrainConfig::from_file(&config)?;
    let mut trainer = Trainer::new(cfg, resume)?;
    let total = trainer.steps_per_epoch() * trainer.config().epochs;
    let progress = if quiet {
        Progress::Quiet
    } else {
        Progress::auto(total, trainer.state().global_step)
    };
    let summary = trainer.run(&progress)?;
    println!(
        "{}",
        serde_json::json!({
            "steps": summary.steps,
            "resumed_at": summary.resumed_at,
            "final_test_rel_l2": summary.final_test,
            "best": summary.best,
            "checkpoint": summary.last_checkpoint,
        })
    );
    Ok(())
}

fn eval(checkpoint: PathBuf, data: Option<PathBuf>, dev: &str, batch: i64) -> Result<()> {
    let dev = device(dev)?;
    let (p, state) = Predictor::from_checkpoint(&checkpoint, dev)?;
    let data_path = match data {
        Some(d) => d,
        None => serde_json::from_value(state.config["data"]["path"].clone())
            .context("the checkpoint does not name its dataset; pass --data")?,
    };
    let ds = TensorDataset::read(&data_path)?;
    let ysz = ds.test.y.size();
    let steps = if ysz.len() == 4 { ysz[3] } else { 0 };
    let split = trainer::normalized(&ds.test, &p.x_norm, dev, p.kind)?;
    let errs = trainer::evaluate(
        &p.model, &p.y_norm, &split, p.regime, batch, steps, dev, p.kind,
    )?;
    println!(
        "{}",
        serde_json::json!({
            "checkpoint": checkpoint,
            "data": data_path,
            "samples": split.len(),
            "test_rel_l2": errs.full,
            "per_step": errs.per_step,
            "trained_steps": state.global_step,
        })
    );
    Ok(())
}

fn predict(
    checkpoint: PathBuf,
    input: PathBuf,
    output: PathBuf,
    steps: i64,
    dev: &str,
) -> Result<()> {
    let dev = device(dev)?;
    let (p, _) = Predictor::from_checkpoint(&checkpoint, dev)?;
    let named: std::collections::HashMap<String, Tensor> = Tensor::read_safetensors(&input)
        .with_context(|| format!("{}: not a readable safetensors file", input.display()))?
        .into_iter()
        .collect();
    let get = |k: &str| {
        named
            .get(k)
            .with_context(|| format!("{}: no array `{k}`", input.display()))
            .and_then(|t| Ok(t.f_to_device(dev)?.f_to_kind(p.kind)?))
    };
    let fx = get("fx")?;
    let mut pos = get("pos")?;
    if pos.dim() == 3 && pos.size()[0] == 1 && fx.dim() == 3 {
        pos = pos.expand([fx.size()[0], -1, -1], false);
    }
    let steps = if p.regime == Regime::Steady { 0 } else { steps };
    let pred = p.predict(&pos, &fx, steps)?;
    ono_data::dataset::write_tensors_atomic(
        &output,
        &[(
            "pred".to_string(),
            pred.f_to_device(Device::Cpu)?.f_contiguous()?,
        )],
    )?;
    eprintln!("wrote pred {:?} to {}", pred.size(), output.display());
    Ok(())
}

fn bench_step(
    preset: &str,
    steps: usize,
    warmup: usize,
    threads: Option<i32>,
    dev: &str,
    recompute: bool,
) -> Result<()> {
    let preset: Preset = preset.parse()?;
    if let Some(t) = threads {
        anyhow::ensure!(t > 0, "--threads must be positive");
        tch::set_num_threads(t);
    }
    let report = ono_train::bench_step::bench_step(preset, steps, warmup, device(dev)?, recompute)?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn info() -> Result<()> {
    println!("ono {}", env!("CARGO_PKG_VERSION"));
    println!(
        "torch threads: {} (interop {})",
        tch::get_num_threads(),
        tch::get_num_interop_threads()
    );
    println!(
        "MKL: {}, LAPACK: {}, OpenMP: {}",
        tch::utils::has_mkl(),
        tch::utils::has_lapack(),
        tch::utils::has_openmp()
    );
    let cuda = tch::Cuda::is_available();
    println!(
        "CUDA available: {cuda} (devices: {}, cuDNN: {})",
        tch::Cuda::device_count(),
        tch::Cuda::cudnn_is_available()
    );
    let mut devices = vec![Device::Cpu];
    if cuda {
        devices.extend((0..tch::Cuda::device_count() as usize).map(Device::Cuda));
    }
    for dev in devices {
        let a = Tensor::f_ones([64, 64], (Kind::Float, dev))?;
        let s = a.f_matmul(&a)?.f_sum(Kind::Float)?.f_double_value(&[])?;
        anyhow::ensure!(
            s == 64.0 * 64.0 * 64.0,
            "wrong matmul result {s} on {dev:?}"
        );
        println!("{dev:?}: 64×64 matmul ok");
    }
    Ok(())
}

/// Keeps freed tensor memory in the process instead of returning it to the kernel after every
/// step. With glibc's defaults every (B, N, h) activation (15–35 MB) is a fresh mmap, zeroed by
/// page faults on first touch, and unmapped again when the step ends: the Elasticity training
/// step measured 8.1 s with this tuning against 21.7 s without (docs/benchmarks.md). Blocks up
/// to 32 MiB then come from the heap, which is trimmed only above 2 GiB of free space.
/// `ONO_MALLOC_DEFAULTS=1` keeps glibc's behaviour.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("ONO_MALLOC_DEFAULTS").is_none() {
        // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
            libc::mallopt(libc::M_TOP_PAD, 256 << 20);
        }
    }
}
