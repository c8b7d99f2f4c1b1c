//! Times one ONO training step (forward + relative L2 loss + backward, no optimizer) at a preset,
//! or with `--eval` one no-grad eval forward, and reports the process's peak resident memory.
//!
//! ```text
//! cargo build --release -p ono-models --example train_step
//! target/release/examples/train_step [--preset darcy] [--grid 85 | --points N] [--batch B]
//!     [--steps 5] [--warmup 1] [--threads T] [--device cpu|cuda] [--eval]
//! ```
//! 2-D presets take N = grid² points at the meshgrid of linspace(0, 1, grid), flattened row-major
//! with `pos[..., 0]` the column coordinate; 1-D presets take `--points N` on linspace(0, 1, N).
//! fx, the target and (for time-input presets) T are random (`manual_seed(0)`).
//! Peak memory is `VmHWM` of `/proc/self/status`, read once after model and input construction and
//! once after the timed steps.

use std::time::Instant;

use anyhow::{bail, Context};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use ono_models::ono::OnoPreset;
use ono_models::parameter_count;
use ono_nn::loss::{relative_l2, Reduction};

struct Args {
    preset: OnoPreset,
    grid: i64,
    points: Option<i64>,
    batch: Option<i64>,
    steps: usize,
    warmup: usize,
    threads: Option<i32>,
    device: Device,
    eval: bool,
}

const USAGE: &str = "usage: train_step [--preset NAME] [--grid G | --points N] [--batch B] \
[--steps S] [--warmup W] [--threads T] [--device cpu|cuda] [--eval]";

fn parse_args() -> anyhow::Result<Option<Args>> {
    let mut a = Args {
        preset: OnoPreset::Darcy,
        grid: 85,
        points: None,
        batch: None,
        steps: 5,
        warmup: 1,
        threads: None,
        device: Device::Cpu,
        eval: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .with_context(|| format!("{name} needs a value (see --help)"))
        };
        match arg.as_str() {
            "--preset" => a.preset = value("--preset")?.parse()?,
            "--grid" => a.grid = value("--grid")?.parse().context("--grid")?,
            "--points" => a.points = Some(value("--points")?.parse().context("--points")?),
            "--batch" => a.batch = Some(value("--batch")?.parse().context("--batch")?),
            "--steps" => a.steps = value("--steps")?.parse().context("--steps")?,
            "--warmup" => a.warmup = value("--warmup")?.parse().context("--warmup")?,
            "--threads" => a.threads = Some(value("--threads")?.parse().context("--threads")?),
            "--device" => {
                a.device = match value("--device")?.as_str() {
                    "cpu" => Device::Cpu,
                    "cuda" => Device::Cuda(0),
                    other => bail!("--device takes cpu or cuda, got {other:?}"),
                }
            }
            "--eval" => a.eval = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(None);
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    if a.steps == 0 {
        bail!("--steps must be at least 1");
    }
    Ok(Some(a))
}

/// `VmHWM` (peak resident set) of this process in MiB.
fn vm_hwm_mib() -> anyhow::Result<f64> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM in /proc/self/status")?;
    let kib: f64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .context("parsing VmHWM")?;
    Ok(kib / 1024.0)
}

fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

fn main() -> anyhow::Result<()> {
    let Some(args) = parse_args()? else {
        return Ok(());
    };
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get() as i32)
            .unwrap_or(1)
    });
    tch::set_num_threads(threads);
    let device = args.device;
    let cfg = args.preset.config();
    let b = args.batch.unwrap_or_else(|| args.preset.batch_size());

    tch::manual_seed(0);
    let vs = VarStore::new(device);
    let model = cfg.init(&vs.root())?;
    let params = parameter_count(&vs);

    let opts = (Kind::Float, device);
    let pos = match cfg.space_dim {
        2 => {
            let g = args.grid;
            let lin = Tensor::linspace(0.0, 1.0, g, opts);
            // "ij": rows[i, j] = lin[i], cols[i, j] = lin[j]; pos[..., 0] is the column coordinate.
            let mesh = Tensor::meshgrid_indexing(&[&lin, &lin], "ij");
            Tensor::stack(&[&mesh[1], &mesh[0]], -1).reshape([1, g * g, 2])
        }
        1 => {
            let n = args.points.context("1-D presets need --points N")?;
            Tensor::linspace(0.0, 1.0, n, opts).reshape([1, n, 1])
        }
        d => bail!("space_dim {d} is not supported by this binary"),
    };
    let n = pos.size()[1];
    let pos = pos.expand([b, n, cfg.space_dim], false).contiguous();
    let fx = Tensor::randn([b, n, cfg.fun_dim], opts);
    let y = Tensor::randn([b, n, cfg.out_dim], opts);
    let t = cfg.time_input.then(|| Tensor::rand([b, 1], opts));
    sync(device);
    let hwm_before = vm_hwm_mib()?;

    let mode = if args.eval {
        "eval forward (no_grad, train=false)"
    } else {
        "train step (forward train=true + relative_l2 Sum + backward)"
    };
    println!("preset     {}", args.preset.name());
    println!("mode       {mode}");
    println!("B          {b}");
    println!("N          {n}");
    println!("parameters {params}");
    println!(
        "threads    {threads} (torch reports {})",
        tch::get_num_threads()
    );
    println!("device     {device:?}");

    let vars = vs.trainable_variables();
    let step = || -> anyhow::Result<()> {
        if args.eval {
            let out = tch::no_grad(|| model.forward(&pos, &fx, None, t.as_ref(), false))?;
            drop(out);
        } else {
            let pred = model.forward(&pos, &fx, None, t.as_ref(), true)?;
            let loss = relative_l2(&pred, &y, Reduction::Sum, None)?;
            loss.backward();
            for v in &vars {
                let mut g = v.grad();
                if g.defined() {
                    let _ = g.zero_();
                }
            }
        }
        sync(device);
        Ok(())
    };

    for _ in 0..args.warmup {
        step()?;
    }
    let mut times = Vec::with_capacity(args.steps);
    for i in 0..args.steps {
        let start = Instant::now();
        step()?;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        println!("step {i}     {ms:.1} ms");
        times.push(ms);
    }
    let hwm_after = vm_hwm_mib()?;

    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let k = sorted.len();
    let median = if k % 2 == 1 {
        sorted[k / 2]
    } else {
        0.5 * (sorted[k / 2 - 1] + sorted[k / 2])
    };
    println!("median     {median:.1} ms");
    println!("min        {:.1} ms", sorted[0]);
    println!("VmHWM after model + inputs, before the first step: {hwm_before:.0} MiB");
    println!(
        "VmHWM after {} warmup + {} timed steps:            {hwm_after:.0} MiB",
        args.warmup, args.steps
    );
    Ok(())
}
