//! How the linear attention kernels' time grows with N where every working set is beyond the
//! last-level cache (issue #19, item 5): `cargo xtask bench-slopes` builds this in release, runs
//! it and prints the log-log slopes; run alone it prints its measurements as one JSON document.
//!
//! Shapes: B = 1, H = 8, d = 16, f32, N = 64k … 1M points by default (q, k and v of 1M points are
//! 512 MiB each; forward + backward of the largest stays under 24 GiB). Every (kernel, pass) is
//! timed once per size per round; a round visits the sizes in an order shuffled with a fixed seed
//! (so that slow drifts of the machine do not line up with N), and the minimum over the rounds is
//! the figure, the least disturbed sample. Progress goes to stderr.
//!
//! Flags: `--rounds R` (7), `--sizes N,N,…`, `--max-n N` (drops larger sizes), `--kernels
//! galerkin,linear_transformer,gnot_linear`, `--threads T` (torch threads; default libtorch's),
//! `--device cpu|cuda` (default CUDA when present), `--seed S` (19), `--batch B`, `--heads H`,
//! `--dim d`.

use std::time::Instant;

use ono_benches::{bench_device, forward_backward, machine_facts, sync, SplitMix};
use ono_kernels::attention::{galerkin, gnot_linear, linear_transformer};
use serde_json::{json, Value};
use tch::{Device, Kind, Tensor};

type Kernel = fn(&Tensor, &Tensor, &Tensor, Option<&Tensor>) -> ono_kernels::Result<Tensor>;

const KERNELS: [(&str, Kernel); 3] = [
    ("galerkin", galerkin),
    ("linear_transformer", linear_transformer),
    ("gnot_linear", gnot_linear),
];

struct Args {
    rounds: usize,
    sizes: Vec<i64>,
    kernels: Vec<(&'static str, Kernel)>,
    threads: Option<i32>,
    device: Device,
    seed: u64,
    shape: [i64; 3],
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rounds: 7,
        sizes: (16..=20).map(|p| 1i64 << p).collect(),
        kernels: KERNELS.to_vec(),
        threads: None,
        device: bench_device(),
        seed: 19,
        shape: [1, 8, 16],
    };
    let mut max_n = i64::MAX;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let int = |v: &str| v.parse::<i64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--rounds" => a.rounds = int(&value)?.max(1) as usize,
            "--sizes" => a.sizes = value.split(',').map(int).collect::<Result<_, _>>()?,
            "--max-n" => max_n = int(&value)?,
            "--kernels" => {
                a.kernels = value
                    .split(',')
                    .map(|name| {
                        KERNELS
                            .iter()
                            .find(|(k, _)| *k == name)
                            .copied()
                            .ok_or(format!("no linear kernel `{name}`"))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--threads" => a.threads = Some(int(&value)? as i32),
            "--device" => {
                a.device = match value.as_str() {
                    "cpu" => Device::Cpu,
                    "cuda" => Device::Cuda(0),
                    _ => return Err(format!("--device {value}: cpu or cuda")),
                }
            }
            "--seed" => a.seed = int(&value)? as u64,
            "--batch" => a.shape[0] = int(&value)?,
            "--heads" => a.shape[1] = int(&value)?,
            "--dim" => a.shape[2] = int(&value)?,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    a.sizes.retain(|&n| n <= max_n);
    a.sizes.sort_unstable();
    a.sizes.dedup();
    if a.sizes.len() < 2 || a.sizes[0] < 1 || a.shape.iter().any(|&s| s < 1) {
        return Err("need at least two positive sizes and positive shapes".into());
    }
    Ok(a)
}

/// One timed call: the kernel forward (no graph), or forward and backward to every input.
fn sample(kernel: Kernel, qkv: &[Tensor], backward: bool, dev: Device) -> f64 {
    let f = |t: &[Tensor]| kernel(&t[0], &t[1], &t[2], None).expect("valid shapes");
    sync(dev);
    let start = Instant::now();
    if backward {
        drop(forward_backward(&f, qkv));
    } else {
        drop(tch::no_grad(|| f(qkv)));
    }
    sync(dev);
    start.elapsed().as_secs_f64() * 1e9
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("slopes: {e}");
            std::process::exit(2);
        }
    };
    if let Some(t) = args.threads {
        tch::set_num_threads(t);
    }
    let dev = args.device;
    let [b, h, d] = args.shape;
    tch::manual_seed(args.seed as i64);
    // Inputs of every size live through the whole run (allocated once, leaves for the backward).
    let inputs: Vec<Vec<Tensor>> = args
        .sizes
        .iter()
        .map(|&n| {
            (0..3)
                .map(|_| Tensor::randn([b, h, n, d], (Kind::Float, dev)).set_requires_grad(true))
                .collect()
        })
        .collect();
    let passes = [("fwd", false), ("fwd+bwd", true)];
    for (si, &n) in args.sizes.iter().enumerate() {
        eprintln!("warm-up N = {n}");
        for &(_, kernel) in &args.kernels {
            for (_, backward) in passes {
                sample(kernel, &inputs[si], backward, dev);
            }
        }
    }
    // samples[kernel][pass][size]
    let mut samples = vec![vec![vec![Vec::new(); args.sizes.len()]; 2]; args.kernels.len()];
    let mut rng = SplitMix(args.seed);
    let mut order: Vec<usize> = (0..args.sizes.len()).collect();
    for round in 0..args.rounds {
        rng.shuffle(&mut order);
        let names: Vec<i64> = order.iter().map(|&i| args.sizes[i]).collect();
        eprintln!(
            "round {}/{}: N in the order {names:?}",
            round + 1,
            args.rounds
        );
        for &si in &order {
            for (ki, &(_, kernel)) in args.kernels.iter().enumerate() {
                for (pi, (_, backward)) in passes.into_iter().enumerate() {
                    samples[ki][pi][si].push(sample(kernel, &inputs[si], backward, dev));
                }
            }
        }
    }
    let mut results = Vec::new();
    for (ki, (name, _)) in args.kernels.iter().enumerate() {
        for (pi, (pass, _)) in passes.iter().enumerate() {
            for (si, &n) in args.sizes.iter().enumerate() {
                let s = &samples[ki][pi][si];
                results.push(json!({
                    "group": format!("slopes_{pass}"),
                    "kernel": name,
                    "n": n,
                    "min_ns": s.iter().copied().fold(f64::INFINITY, f64::min),
                    "samples_ns": s,
                }));
            }
        }
    }
    let machine: serde_json::Map<String, Value> = machine_facts(dev)
        .into_iter()
        .map(|(k, v)| (k.to_string(), Value::from(v)))
        .collect();
    let report = json!({
        "machine": machine,
        "shape": {"batch": b, "heads": h, "dim": d, "dtype": "f32"},
        "rounds": args.rounds,
        "seed": args.seed,
        "statistic": "minimum over rounds",
        "results": results,
    });
    println!("{report}");
}
