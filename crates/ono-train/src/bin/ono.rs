//! `ono`: the user-facing command line of the toolkit.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use ono_data::benchmarks::{Benchmark, Layout, LoadOptions};
use ono_data::dataset::TensorDataset;
use ono_data::normalizer::{Normalizer, NormalizerKind};
use ono_models::Preset;
use ono_train::config::{parse_device, DataSection, LossSection, Regime, TrainConfig};
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
    /// What a benchmark's files hold: the files found, their arrays (shapes, dtypes), the split
    /// sizes, the subsampled resolution, value ranges and the fitted normalizer statistics.
    Info {
        /// darcy, ns2d, burgers, airfoil, pipe, elasticity, elasticity_grid, plasticity.
        benchmark: String,
        /// The folder with the files (default: $ONO_DATA_DIR, else ./data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Training samples (default: the reference split).
        #[arg(long)]
        ntrain: Option<usize>,
        /// Test samples (default: the reference split).
        #[arg(long)]
        ntest: Option<usize>,
        /// Subsampling stride (default: the reference's).
        #[arg(long)]
        r: Option<usize>,
        /// ono or fno.
        #[arg(long, default_value = "ono")]
        layout: String,
    },
    /// Generate a data set by the published process and write it in the original file layout
    /// (MAT v5, as the published files), with a metadata JSON beside it (seed, parameters,
    /// solver, version). Sample i depends only on (seed, i).
    Gen {
        /// darcy, ns2d or burgers.
        kind: String,
        /// Number of samples.
        #[arg(long)]
        n: usize,
        /// Solver grid (Darcy K: 421 published; NS: 256; Burgers: 8192).
        #[arg(long)]
        res: Option<usize>,
        /// Seed.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Output .mat file (for example data/piececonst_r421_N1024_smooth1.mat).
        #[arg(long)]
        out: PathBuf,
        /// NS2d: `full` (256², Δt 1e-4, stored 64²) or `reduced` (64² solve; see docs/data.md).
        #[arg(long, default_value = "full")]
        profile: String,
        /// NS2d: cpu, cuda or cuda:N.
        #[arg(long, default_value = "cpu")]
        device: String,
        /// NS2d: final time (20 published); fewer frames for quick sets.
        #[arg(long)]
        t_final: Option<f64>,
        /// NS2d: samples solved together (20 in the original; 100 or more fill a large GPU).
        /// The samples do not depend on it.
        #[arg(long)]
        batch: Option<usize>,
    },
    /// Write a miniature copy of a benchmark's files (original names, formats and layouts, a few
    /// samples) into a folder, to try the loaders and `ono train` without the real data.
    Miniature {
        /// The benchmark.
        benchmark: String,
        /// Where to write.
        #[arg(long)]
        out: PathBuf,
    },
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
        Cmd::Data(DataCmd::Info {
            benchmark,
            data_dir,
            ntrain,
            ntest,
            r,
            layout,
        }) => data_info(&benchmark, data_dir, ntrain, ntest, r, &layout),
        Cmd::Data(DataCmd::Gen {
            kind,
            n,
            res,
            seed,
            out,
            profile,
            device,
            t_final,
            batch,
        }) => data_gen(&kind, n, res, seed, &out, &profile, &device, t_final, batch),
        Cmd::Data(DataCmd::Miniature { benchmark, out }) => {
            let b: Benchmark = benchmark.parse()?;
            let m = ono_data::benchmarks::miniature::write(b, &out)?;
            eprintln!(
                "wrote a miniature {} ({} samples per file; use ntrain = {}, ntest = {}) to {}",
                b.name(),
                m.samples,
                m.ntrain,
                m.ntest,
                out.display()
            );
            Ok(())
        }
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
    let ds = match &data {
        Some(d) => TensorDataset::read(d)?,
        None => {
            // The run's own data: its file, or its benchmark with the same split.
            let section: DataSection = serde_json::from_value(state.config["data"].clone())
                .context("the checkpoint's data settings are unreadable; pass --data")?;
            let loss: LossSection = serde_json::from_value(state.config["loss"].clone())
                .context("the checkpoint's loss settings are unreadable; pass --data")?;
            trainer::resolve_data(&section, &loss)?.dataset
        }
    };
    let data_path = data.map_or_else(
        || {
            state.config["data"]["path"]
                .as_str()
                .or(state.config["data"]["benchmark"].as_str())
                .unwrap_or("?")
                .to_string()
        },
        |d| d.display().to_string(),
    );
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
/// to 32 MiB then come from the heap, which is trimmed only above 2 GiB of free space and grows
/// by at least 1 GiB at a time: with 256 MiB the recomputed Darcy step (which frees and
/// reallocates one block's activations per block) took 26.5–27.7 s against 17.1–21.1 s, for
/// about 0.3 GiB more peak memory; NS2d and Elasticity did not change (docs/benchmarks.md).
/// `ONO_MALLOC_DEFAULTS=1` keeps glibc's behaviour.
fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("ONO_MALLOC_DEFAULTS").is_none() {
        // SAFETY: mallopt only changes allocator parameters; called before any thread starts.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
            libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
            libc::mallopt(libc::M_TOP_PAD, 1 << 30);
        }
    }
}

fn data_info(
    benchmark: &str,
    data_dir: Option<PathBuf>,
    ntrain: Option<usize>,
    ntest: Option<usize>,
    r: Option<usize>,
    layout: &str,
) -> Result<()> {
    let b: Benchmark = benchmark.parse()?;
    let layout: Layout = serde_json::from_value(serde_json::Value::String(layout.to_string()))
        .map_err(|_| anyhow::anyhow!("--layout: `{layout}` is not ono or fno"))?;
    let dir = ono_data::benchmarks::data_dir(data_dir.as_deref());
    let opts = LoadOptions {
        ntrain,
        ntest,
        r,
        layout,
    };
    let loaded = ono_data::benchmarks::load(b, &dir, &opts)?;
    println!(
        "benchmark {} ({layout:?} layout), data folder {}",
        b.name(),
        dir.display()
    );
    for f in &loaded.files {
        let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        println!("file {} ({:.1} MB)", f.display(), size as f64 / 1e6);
        for v in ono_data::benchmarks::list_file(f)? {
            println!("  {:<28} {:<8} {:?}", v.0, v.1, v.2);
        }
    }
    for n in &loaded.notes {
        println!("{n}");
    }
    let d = &loaded.dataset;
    for (name, s) in [("train", &d.train), ("test", &d.test)] {
        println!(
            "{name}: fx {:?} range [{:.6e}, {:.6e}], y {:?} range [{:.6e}, {:.6e}], pos {:?}",
            s.fx.size(),
            s.fx.min().double_value(&[]),
            s.fx.max().double_value(&[]),
            s.y.size(),
            s.y.min().double_value(&[]),
            s.y.max().double_value(&[]),
            s.pos.size()
        );
    }
    let rcp = &loaded.recipe;
    println!(
        "recipe: regime {:?}, normalize_x {:?}, normalize_y {:?}, derivative_alpha {}, preset {}",
        rcp.regime,
        rcp.normalize_x,
        rcp.normalize_y,
        rcp.derivative_alpha,
        rcp.preset.unwrap_or("(none)")
    );
    for (what, kind, t) in [
        ("x", rcp.normalize_x, &d.train.fx),
        ("y", rcp.normalize_y, &d.train.y),
    ] {
        let n = Normalizer::fit(kind, t)?;
        if kind == NormalizerKind::None {
            continue;
        }
        let stats = n.tensors("");
        let show = |t: &Tensor| -> String {
            let v = Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap_or_default();
            if v.len() <= 8 {
                format!(
                    "{:?}",
                    v.iter().map(|x| format!("{x:.6e}")).collect::<Vec<_>>()
                )
            } else {
                format!(
                    "{} values in [{:.6e}, {:.6e}]",
                    v.len(),
                    v.iter().cloned().fold(f64::MAX, f64::min),
                    v.iter().cloned().fold(f64::MIN, f64::max)
                )
            }
        };
        println!(
            "normalizer {what} ({kind:?}, fitted on train): mean {}, std {}",
            show(&stats["mean"]),
            show(&stats["std"])
        );
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn data_gen(
    kind: &str,
    n: usize,
    res: Option<usize>,
    seed: u64,
    out: &std::path::Path,
    profile: &str,
    dev: &str,
    t_final: Option<f64>,
    batch: Option<usize>,
) -> Result<()> {
    anyhow::ensure!(n > 0, "--n must be at least 1");
    let start = std::time::Instant::now();
    let bar = progress_bar(n as u64, kind);
    let (config, solver): (serde_json::Value, &str) = match kind {
        "darcy" => {
            let cfg = ono_data::darcy::DarcyConfig {
                resolution: res.unwrap_or(421),
                ..Default::default()
            };
            let k = cfg.resolution;
            let mut coeff = ndarray::Array3::<f64>::zeros((n, k, k));
            let mut sol = ndarray::Array3::<f64>::zeros((n, k, k));
            let chunk = 16;
            for from in (0..n).step_by(chunk) {
                let m = chunk.min(n - from);
                let (c, s) = cfg.generate_range(from, m, seed)?;
                coeff
                    .slice_mut(ndarray::s![from..from + m, .., ..])
                    .assign(&c);
                sol.slice_mut(ndarray::s![from..from + m, .., ..])
                    .assign(&s);
                bar.inc(m as u64);
            }
            ono_data::darcy::write_mat(out, &coeff, &sol)?;
            (serde_json::to_value(cfg)?, "GRF (α 2, τ 3, orthonormal inverse DCT) thresholded 12/3; not-a-knot spline to nodes; 5-point FD, multigrid-preconditioned CG; spline back to cell centres")
        }
        "ns2d" => {
            let mut cfg = match profile {
                "full" => ono_data::navier_stokes::NsConfig::fno(device(dev)?),
                "reduced" => ono_data::navier_stokes::NsConfig {
                    device: device(dev)?,
                    ..ono_data::navier_stokes::NsConfig::reduced()
                },
                p => anyhow::bail!("--profile: `{p}` is not full or reduced"),
            };
            if let Some(r) = res {
                cfg.resolution = r;
            }
            if let Some(t) = t_final {
                cfg.t_final = t;
            }
            if let Some(b) = batch {
                cfg.batch_size = b;
            }
            let (a, u) =
                cfg.generate_with_progress(n, seed, |done, _| bar.set_position(done as u64))?;
            cfg.write_mat(out, &a, &u)?;
            (serde_json::to_value(cfg)?, "pseudo-spectral vorticity form, Crank–Nicolson diffusion, forward-Euler advection and forcing, 2/3 dealiasing (FNO ns_2d.py)")
        }
        "burgers" => {
            let cfg = ono_data::burgers::BurgersConfig {
                resolution: res.unwrap_or(8192),
                ..Default::default()
            };
            let (a, u) = cfg.generate(n, seed)?;
            bar.inc(n as u64);
            ono_data::burgers::write_mat(out, &a, &u)?;
            (
                serde_json::to_value(cfg)?,
                "Fourier spectral, ETDRK4 (Kassam–Trefethen contour integrals), as chebfun spin",
            )
        }
        k => anyhow::bail!("unknown generator `{k}` (darcy, ns2d, burgers)"),
    };
    bar.finish();
    let meta = serde_json::json!({
        "generator": kind,
        "ono_version": env!("CARGO_PKG_VERSION"),
        "seed": seed,
        "samples": n,
        "sample_stream": "sample i is drawn from ChaCha8(seed) on stream i",
        "config": config,
        "solver": solver,
        "file": out.file_name().map(|f| f.to_string_lossy().to_string()),
        "seconds": start.elapsed().as_secs_f64(),
    });
    let meta_path = std::path::PathBuf::from(format!("{}.json", out.display()));
    ono_io::atomic::write_atomic(&meta_path, serde_json::to_string_pretty(&meta)?.as_bytes())?;
    eprintln!(
        "wrote {n} {kind} samples to {} (+ {}) in {:.1} s",
        out.display(),
        meta_path.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A progress bar on a terminal, hidden otherwise.
fn progress_bar(n: u64, what: &str) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(n);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} samples {per_sec} ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    bar
}
