//! Cost and accuracy of the Navier–Stokes generator on the CPU.
//!
//! ```text
//! cargo run --release -p ono-data --example ns_timing -- timing [FULL_STEPS] [REDUCED_STEPS]
//! cargo run --release -p ono-data --example ns_timing -- deviation [T] [SAMPLES] [PROFILE ...]
//! cargo run --release -p ono-data --example ns_timing -- dump FILE.npz
//! ```
//!
//! * `timing` (the default): seconds per sample per simulated time unit of the full profile (256²,
//!   Δt = 1e-4, batch 4, FULL_STEPS = 200 steps, extrapolated to 10 000 steps per time unit) and of
//!   the reduced profile (64², batch 20, REDUCED_STEPS = 2000 steps), float32, with the
//!   library's default threads.
//! * `deviation`: relative L2 difference, per snapshot t = 1 … T, between the full profile and
//!   coarser profiles solved from the same initial conditions (samples 0 … SAMPLES−1 of seed 0,
//!   drawn at 256²; a coarse solver gets them Fourier-truncated). PROFILE is `RES:STRIDE:DT`
//!   (default `64:1:1e-4 128:2:1e-4 64:1:2e-4 64:1:5e-4`); the reference is `256:4:1e-4`. Also
//!   prints the float32-vs-float64 difference of the full profile, the floor set by chaos alone.
//! * Threads: `NS_THREADS` (default 1). On a loaded 2-core machine libtorch's two OpenMP threads
//!   spin against other processes and every op ran about 10 times slower than on one thread.
//! * `dump`: a small float64 case (64², ν = 1e-3, Δt = 1e-3, T = 2, stride 2, forcing on) written
//!   as `w0`, `u` to an `.npz`, to compare with a literal port of `ns_2d.py`.

use std::time::Instant;

use ono_data::navier_stokes::{fourier_resample, NsConfig, NsSolver};
use tch::{Device, Kind, Tensor};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let threads = std::env::var("NS_THREADS")
        .ok()
        .and_then(|t| t.parse().ok())
        .unwrap_or(1);
    tch::set_num_threads(threads);
    let r = match args.first().map(String::as_str) {
        None | Some("timing") => timing(&args[args.len().min(1)..]),
        Some("deviation") => deviation(&args[1..]),
        Some("dump") => dump(&args[1..]),
        Some(other) => Err(format!("unknown mode `{other}` (timing, deviation, dump)").into()),
    };
    if let Err(e) = r {
        eprintln!("ns_timing: {e}");
        std::process::exit(1);
    }
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Res<T> {
    match args.get(i) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| format!("cannot parse argument `{s}`").into()),
    }
}

/// Seconds per step of `cfg` on a batch drawn from seed 0 (after a few warm-up steps).
fn seconds_per_step(cfg: &NsConfig, batch: usize, steps: usize) -> Res<f64> {
    let solver = NsSolver::new(cfg)?;
    let w0 = cfg.grf.sample(cfg.resolution, 0, 0, batch)?;
    let mut w_hat = solver.to_spectral(&w0)?;
    for _ in 0..5 {
        w_hat = solver.step(&w_hat)?;
    }
    let t = Instant::now();
    for _ in 0..steps {
        w_hat = solver.step(&w_hat)?;
    }
    // Reading a value waits for the device (a no-op on the CPU).
    let _ = f64::try_from(w_hat.f_abs()?.f_sum(Kind::Double)?)?;
    Ok(t.elapsed().as_secs_f64() / steps as f64)
}

fn timing(args: &[String]) -> Res<()> {
    let full_steps: usize = arg(args, 0, 200)?;
    let reduced_steps: usize = arg(args, 1, 2000)?;
    println!("libtorch threads: {}, CPU, float32", tch::get_num_threads());
    let full = NsConfig::default();
    let reduced = NsConfig::reduced();
    for (name, cfg, batch, steps) in [
        ("full 256², Δt 1e-4", full, 4usize, full_steps),
        ("reduced 64², Δt 1e-4", reduced, 20, reduced_steps),
    ] {
        let sps = seconds_per_step(&cfg, batch, steps)?;
        let per_unit = sps * cfg.steps_per_frame() as f64 / cfg.record_every_time;
        let per_sample_unit = per_unit / batch as f64;
        println!(
            "{name}: batch {batch}, {steps} steps measured, {:.3} ms/step → {:.2} s per sample per \
             time unit ({} steps, extrapolated) → {:.1} min per sample for T = {}",
            sps * 1e3,
            per_sample_unit,
            cfg.steps_per_frame(),
            per_sample_unit * cfg.t_final / 60.0,
            cfg.t_final,
        );
    }
    // End-to-end check of the reduced pipeline (GRF at 256², truncation, solve, striding) on a
    // short horizon, to see that the per-step figure carries over.
    let short = NsConfig {
        t_final: 0.2,
        record_every_time: 0.1,
        ..NsConfig::reduced()
    };
    let t = Instant::now();
    let (a, u) = short.generate(20, 0)?;
    let secs = t.elapsed().as_secs_f64();
    println!(
        "reduced generate(20) to T = 0.2: {:.2} s → {:.2} s per sample per time unit \
         (a {:?}, u {:?})",
        secs,
        secs / 20.0 / 0.2,
        a.size(),
        u.size()
    );
    Ok(())
}

/// `RES:STRIDE:DT`.
fn parse_profile(p: &str) -> Res<(usize, usize, f64)> {
    let parts: Vec<&str> = p.split(':').collect();
    if parts.len() != 3 {
        return Err(format!("profile `{p}` is not RES:STRIDE:DT").into());
    }
    Ok((parts[0].parse()?, parts[1].parse()?, parts[2].parse()?))
}

/// Mean over samples of ‖x − y‖₂/‖y‖₂ per frame.
///
/// # Shapes
/// - `x`, `y`: (B, H, W, F); returns F values
fn rel_l2_per_frame(x: &Tensor, y: &Tensor) -> Res<Vec<f64>> {
    let d = x
        .f_sub(y)?
        .f_square()?
        .f_sum_dim_intlist([1, 2].as_slice(), false, Kind::Double)?;
    let n = y
        .f_square()?
        .f_sum_dim_intlist([1, 2].as_slice(), false, Kind::Double)?;
    let r = d
        .f_div(&n)?
        .f_sqrt()?
        .f_mean_dim([0].as_slice(), false, Kind::Double)?;
    Ok(Vec::<f64>::try_from(&r)?)
}

fn fmt(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.3e}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn deviation(args: &[String]) -> Res<()> {
    let t_final: f64 = arg(args, 0, 2.0)?;
    let samples: usize = arg(args, 1, 4)?;
    let profiles: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        ["64:1:1e-4", "128:2:1e-4", "64:1:2e-4", "64:1:5e-4"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let full = NsConfig {
        t_final,
        batch_size: samples,
        ..NsConfig::default()
    };
    let w0 = full.grf.sample(256, 0, 0, samples)?;
    let t = Instant::now();
    let reference = full.solve(&w0.f_to_kind(Kind::Float)?)?;
    println!(
        "full 256:4:1e-4 float32, {samples} samples, T = {t_final}: {:.0} s",
        t.elapsed().as_secs_f64()
    );
    let norms = reference
        .f_square()?
        .f_mean_dim([0, 1, 2].as_slice(), false, Kind::Double)?
        .f_sqrt()?;
    println!(
        "  rms vorticity per frame: {}",
        fmt(&Vec::<f64>::try_from(&norms)?)
    );
    // Frame-to-frame change, a scale for the differences below.
    let frames = reference.size()[3];
    if frames > 1 {
        let a = reference.f_narrow(3, 1, frames - 1)?;
        let b = reference.f_narrow(3, 0, frames - 1)?;
        println!(
            "  ‖u(t+1) − u(t)‖/‖u(t)‖ of the full profile: {}",
            fmt(&rel_l2_per_frame(&a, &b)?)
        );
    }
    let t = Instant::now();
    let double = NsConfig {
        kind: Kind::Double,
        ..full
    }
    .solve(&w0)?;
    println!(
        "full float64 vs float32 ({:.0} s): {}",
        t.elapsed().as_secs_f64(),
        fmt(&rel_l2_per_frame(
            &double.f_to_kind(Kind::Float)?,
            &reference
        )?)
    );
    for p in profiles {
        let (res, stride, dt) = parse_profile(&p)?;
        let cfg = NsConfig {
            resolution: res,
            stride,
            dt,
            t_final,
            batch_size: samples,
            ..NsConfig::default()
        };
        let w = fourier_resample(&w0, res)?.f_to_kind(Kind::Float)?;
        let t = Instant::now();
        match cfg.solve(&w) {
            Ok(out) => println!(
                "{p} ({:.0} s): {}",
                t.elapsed().as_secs_f64(),
                fmt(&rel_l2_per_frame(&out, &reference)?)
            ),
            Err(e) => println!("{p}: {e}"),
        }
    }
    Ok(())
}

fn dump(args: &[String]) -> Res<()> {
    let path = args.first().ok_or("dump needs an output .npz path")?;
    let cfg = NsConfig {
        resolution: 64,
        nu: 1e-3,
        dt: 1e-3,
        t_final: 2.0,
        record_every_time: 0.5,
        stride: 2,
        batch_size: 2,
        kind: Kind::Double,
        device: Device::Cpu,
        ..NsConfig::default()
    };
    let w0 = cfg.grf.sample(64, 7, 0, 2)?;
    let u = cfg.solve(&w0)?;
    Tensor::write_npz(&[("w0", &w0), ("u", &u)], path)?;
    println!("wrote {path}: w0 {:?}, u {:?}", w0.size(), u.size());
    Ok(())
}
