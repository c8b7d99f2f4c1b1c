//! Criterion benchmarks of the ono kernels live in `benches/`, the interleaved measurement
//! programs in `src/bin/`; this library holds their shared plumbing.

use std::time::{Duration, Instant};

use tch::{Device, Kind, Tensor};

/// Waits for queued CUDA work so that a timing covers the kernels, not just their launch.
pub fn sync(dev: Device) {
    if let Device::Cuda(i) = dev {
        tch::Cuda::synchronize(i as i64);
    }
}

/// The device benchmarks run on: CUDA:0 when present, else the CPU.
pub fn bench_device() -> Device {
    Device::cuda_if_available()
}

/// Runs `f` `iters` times between two device syncs and returns the elapsed time.
pub fn timed<T>(dev: Device, iters: u64, mut f: impl FnMut() -> T) -> Duration {
    sync(dev);
    let start = Instant::now();
    for _ in 0..iters {
        drop(f());
    }
    sync(dev);
    start.elapsed()
}

/// The gradients of the sum of `f(leaves)` with respect to every leaf (which must require
/// gradients): one forward and one backward pass.
pub fn forward_backward(f: &dyn Fn(&[Tensor]) -> Tensor, leaves: &[Tensor]) -> Vec<Tensor> {
    let loss = f(leaves).sum(Kind::Float);
    Tensor::run_backward(&[loss], leaves, false, false)
}

/// SplitMix64: a reproducible stream for shuffling the order of measurements.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = (self.next_u64() % (i as u64 + 1)) as usize;
            items.swap(i, j);
        }
    }
}

/// What a timing depends on, as (key, value) pairs: CPU model, last-level cache, logical CPUs,
/// torch threads, memory, the device (and the GPU's name when it is one).
pub fn machine_facts(dev: Device) -> Vec<(&'static str, String)> {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let cpu = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown".into(), |(_, v)| v.trim().to_string());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let memory = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map_or("unknown".into(), |kb| {
            format!("{:.1} GiB", kb / (1024.0 * 1024.0))
        });
    let mut facts = vec![
        ("cpu", cpu),
        ("last_level_cache", last_level_cache()),
        (
            "logical_cpus",
            std::thread::available_parallelism().map_or("unknown".into(), |n| n.to_string()),
        ),
        ("torch_threads", tch::get_num_threads().to_string()),
        ("memory", memory),
        ("device", format!("{dev:?}")),
    ];
    if dev.is_cuda() {
        let name = std::process::Command::new("nvidia-smi")
            .args(["--query-gpu=name,memory.total", "--format=csv,noheader"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        facts.push(("gpu", name.unwrap_or_else(|| "unknown".into())));
    }
    facts
}

/// The highest-level cache of CPU 0 from sysfs: "L3 unified 32768K (shared by CPUs 0-15)".
fn last_level_cache() -> String {
    let base = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let read = |dir: &std::path::Path, f: &str| {
        std::fs::read_to_string(dir.join(f)).map(|s| s.trim().to_string())
    };
    let best = std::fs::read_dir(base)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter_map(|dir| {
            let level: u32 = read(&dir, "level").ok()?.parse().ok()?;
            Some((level, dir))
        })
        .max_by_key(|(level, _)| *level);
    match best {
        Some((level, dir)) => format!(
            "L{level} {} {} (shared by CPUs {})",
            read(&dir, "type").unwrap_or_default().to_lowercase(),
            read(&dir, "size").unwrap_or_default(),
            read(&dir, "shared_cpu_list").unwrap_or_default()
        ),
        None => "unknown (no /sys/devices/system/cpu/cpu0/cache)".into(),
    }
}

/// The flags of the timing binaries: `--rounds R --calls C [--device cpu|cuda|cuda:N]`.
#[derive(Debug, Clone, Copy)]
pub struct TimingFlags {
    pub rounds: usize,
    pub calls: u32,
    pub device: Device,
}

impl TimingFlags {
    /// Waits for the device's queued work, so that a clock read after it covers that work (CUDA
    /// runs asynchronously; the CPU needs nothing).
    pub fn sync(&self) {
        if let Device::Cuda(i) = self.device {
            tch::Cuda::synchronize(i as i64);
        }
    }

    /// "CPU" or "CUDA:N", for the tables' headers.
    pub fn device_name(&self) -> String {
        match self.device {
            Device::Cuda(i) => format!("CUDA:{i}"),
            _ => "CPU".into(),
        }
    }
}

/// Parses the timing flags over `defaults` (rounds, calls; the device defaults to the CPU); a bad
/// flag, or CUDA asked for where there is none, exits with status 2 naming `bin`.
pub fn timing_flags(bin: &str, defaults: (usize, u32)) -> TimingFlags {
    let fail = |msg: String| -> ! {
        eprintln!("{bin}: {msg}");
        std::process::exit(2)
    };
    let (mut rounds, mut calls) = defaults;
    let mut device = Device::Cpu;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let Some(v) = it.next() else {
            fail(format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--rounds" | "--calls" => {
                let n: u64 = v
                    .parse()
                    .unwrap_or_else(|_| fail(format!("{flag} needs a number, not `{v}`")));
                if flag == "--rounds" {
                    rounds = n.max(1) as usize;
                } else {
                    calls = n.max(1) as u32;
                }
            }
            "--device" => {
                device = ono_train::config::parse_device(&v)
                    .unwrap_or_else(|m| fail(format!("--device: {m}")));
                if let Device::Cuda(i) = device {
                    if i >= tch::Cuda::device_count() as usize {
                        fail(format!("--device: no CUDA device {i} here"));
                    }
                }
            }
            _ => fail(format!("unknown flag {flag}")),
        }
    }
    TimingFlags {
        rounds,
        calls,
        device,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffles_are_reproducible_permutations() {
        let mut a: Vec<u32> = (0..10).collect();
        let mut b = a.clone();
        SplitMix(7).shuffle(&mut a);
        SplitMix(7).shuffle(&mut b);
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..10).collect::<Vec<_>>());
        assert_ne!(a, (0..10).collect::<Vec<_>>());
    }
}
