//! Seconds per Darcy sample (GRF + spline + MG-PCG solve + spline) on one thread, and the
//! statistics of the solution. `cargo run --release -p ono-pde --example darcy_timing [K ...]`.

use std::time::Instant;

use ono_pde::darcy_flow::{sample_rng, DarcyConfig};

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs: Vec<(usize, usize)> = if args.is_empty() {
        vec![(85, 20), (421, 4)]
    } else {
        args.chunks(2)
            .map(|c| (c[0], *c.get(1).unwrap_or(&4)))
            .collect()
    };
    for (k, n) in runs {
        let cfg = DarcyConfig {
            resolution: k,
            ..DarcyConfig::default()
        };
        let sampler = match cfg.grf.sampler(k) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("K = {k}: {e}");
                continue;
            }
        };
        let (mut t_grf, mut t_solve) = (0.0, 0.0);
        let (mut sum, mut sum2, mut count) = (0.0, 0.0, 0usize);
        let (mut iters, mut failures, mut min_a) = (Vec::new(), 0, f64::INFINITY);
        let mut neg_samples = 0;
        let mut min_inner = f64::INFINITY;
        for i in 0..n {
            let t0 = Instant::now();
            let coeff =
                match sampler.sample_coefficient(cfg.hi, cfg.lo, &mut sample_rng(0, i as u64)) {
                    Ok(c) => c,
                    Err(e) => {
                        eprintln!("{e}");
                        continue;
                    }
                };
            let t1 = Instant::now();
            match cfg.solve_detailed(&coeff) {
                Ok(sol) => {
                    t_solve += t1.elapsed().as_secs_f64();
                    iters.push(sol.stats.iterations);
                    // The coefficients the stencil uses: every node but the four corners.
                    let a = &sol.a_nodes;
                    let m = a
                        .indexed_iter()
                        .filter(|((i, j), _)| {
                            !((*i == 0 || *i == k - 1) && (*j == 0 || *j == k - 1))
                        })
                        .map(|(_, v)| *v)
                        .fold(f64::INFINITY, f64::min);
                    min_a = min_a.min(m);
                    let inner = a
                        .slice(ndarray::s![1..k - 1, 1..k - 1])
                        .iter()
                        .copied()
                        .fold(f64::INFINITY, f64::min);
                    min_inner = min_inner.min(inner);
                    if m <= 0.0 {
                        neg_samples += 1;
                    }
                    for v in sol.sol.iter() {
                        sum += v;
                        sum2 += v * v;
                        count += 1;
                    }
                }
                Err(e) => {
                    failures += 1;
                    eprintln!("K = {k}, sample {i}: {e}");
                }
            }
            t_grf += (t1 - t0).as_secs_f64();
        }
        let mean = sum / count.max(1) as f64;
        let std = (sum2 / count.max(1) as f64 - mean * mean).max(0.0).sqrt();
        println!(
            "K = {k}: {n} samples, {:.4} s/sample (GRF {:.4} s, solve pipeline {:.4} s), \
             MG-PCG iterations {iters:?}, failures {failures}, \
             min node coefficient (corners excluded) {min_a:.3} ({neg_samples} samples with one ≤ 0; interior nodes only: {min_inner:.3}), \
             u mean {mean:.6e} std {std:.6e}",
            (t_grf + t_solve) / n as f64,
            t_grf / n as f64,
            t_solve / n as f64,
        );
    }
    // Whole-batch throughput of `generate` with all cores.
    let cfg = DarcyConfig {
        resolution: 85,
        ..DarcyConfig::default()
    };
    let t = Instant::now();
    match cfg.generate(20, 0) {
        Ok(_) => println!(
            "generate(20) at K = 85 on {} threads: {:.4} s/sample",
            std::thread::available_parallelism().map_or(1, |p| p.get()),
            t.elapsed().as_secs_f64() / 20.0
        ),
        Err(e) => println!("generate failed: {e}"),
    }
}
