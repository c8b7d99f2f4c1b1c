//! Samples per second of the Burgers generator at the R10 settings (8192 points, ν = 0.1, t = 1,
//! dt = 1e-4), on one thread and on all threads, and how much the time step and the solver grid
//! matter. `cargo run --release -p ono-pde --example burgers_timing [N]` (N samples per timing,
//! default 8).

use std::time::Instant;

use ono_pde::burgers_equation::{sample_rng, BurgersConfig};

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(8);
    let cfg = BurgersConfig::default();
    let cores = std::thread::available_parallelism().map_or(1, |p| p.get());
    println!(
        "resolution {}, nu {}, t_final {}, dt {} ({} steps), {n} samples",
        cfg.resolution,
        cfg.nu,
        cfg.t_final,
        cfg.dt,
        cfg.steps().map_or(0, |s| s.0)
    );
    for threads in [1, cores] {
        let t = Instant::now();
        match cfg.generate_with_threads(n, 0, threads) {
            Ok((a, u)) => {
                let secs = t.elapsed().as_secs_f64();
                let std = |x: &ndarray::Array2<f64>| x.std(0.0);
                println!(
                    "{threads} thread(s): {:.3} samples/s ({:.3} s/sample); std of a {:.4}, of u {:.4}",
                    n as f64 / secs,
                    secs / n as f64,
                    std(&a),
                    std(&u)
                );
            }
            Err(e) => println!("{threads} thread(s): {e}"),
        }
    }

    // The time step: differences from the dt = 1e-4 solution of one sample.
    let u0 = match cfg.grf.sample(cfg.resolution, &mut sample_rng(0, 0)) {
        Ok(u0) => u0,
        Err(e) => return println!("{e}"),
    };
    let reference = match cfg.solve(&u0) {
        Ok(u) => u,
        Err(e) => return println!("{e}"),
    };
    for dt in [5e-5, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3] {
        let c = BurgersConfig { dt, ..cfg };
        let t = Instant::now();
        match c.solve(&u0) {
            Ok(u) => println!(
                "dt = {dt:e}: rel L2 difference from dt = 1e-4: {:.3e} ({:.3} s/sample, 1 thread)",
                rel_l2(&u, &reference),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => println!("dt = {dt:e}: {e}"),
        }
    }

    // The grid: solving the subsampled initial condition at the training resolution.
    for sub in [2usize, 8, 32] {
        let coarse: Vec<f64> = u0.iter().step_by(sub).copied().collect();
        let fine: Vec<f64> = reference.iter().step_by(sub).copied().collect();
        let t = Instant::now();
        match cfg.solve(&coarse) {
            Ok(u) => println!(
                "s = {}: rel L2 difference from the 8192-point solution: {:.3e} ({:.4} s/sample)",
                coarse.len(),
                rel_l2(&u, &fine),
                t.elapsed().as_secs_f64()
            ),
            Err(e) => println!("s = {}: {e}", coarse.len()),
        }
    }
}
