//! Cost and accuracy of the Navier–Stokes generator on the CPU.
//!
//! ```text
//! cargo run --release -p ono-pde --example ns_timing -- timing [FULL_STEPS] [REDUCED_STEPS]
//! cargo run --release -p ono-pde --example ns_timing -- deviation [T] [SAMPLES] [--f64] [PROFILE ...]
//! cargo run --release -p ono-pde --example ns_timing -- scheme [T] [SAMPLES] [DT ...]
//! cargo run --release -p ono-pde --example ns_timing -- dump FILE.npz
//! ```
//!
//! * `timing` (the default): seconds per sample per simulated time unit of the full profile (256²,
//!   Δt = 1e-4, batch 4, FULL_STEPS = 200 steps, extrapolated to 10 000 steps per time unit), of
//!   the 64² grid with the same scheme (batch 20, REDUCED_STEPS = 2000 steps) and of the reduced
//!   profile (64², IF-RK4 at Δt = 0.02, REDUCED_STEPS / 50 steps), float32.
//! * `deviation`: relative L2 difference, per snapshot t = 1 … T, between the full profile
//!   (`256:4:1e-4`, float32) and other profiles solved from the same initial conditions (samples
//!   0 … SAMPLES−1 of seed 0, drawn at 256²; a coarser solver gets them Fourier-truncated).
//!   PROFILE is `RES:STRIDE:DT[:f64]` (default `64:1:1e-4 128:2:1e-4 64:1:2e-4 64:1:5e-4`); a
//!   profile given in both precisions is also compared with itself, which measures how much the
//!   flow amplifies round-off at that resolution. `--f64` adds the full profile in float64 (the
//!   same floor at 256², at twice the cost). Also prints rms vorticity per frame and the share of
//!   enstrophy above |k| = 16 at the last frame, where a coarse solve piles it up.
//! * Device: `NS_DEVICE` (`cpu`, the default, or `cuda`/`cuda:N`) for every profile; on CUDA the
//!   per-step figures are taken after a device synchronisation. `NS_BATCH` overrides the full
//!   profile's timing batch (default 4).
//! * Threads: `NS_THREADS` (default 1). On a loaded 2-core machine libtorch's two OpenMP threads
//!   spin against other processes and every op ran about 10 times slower than on one thread.
//! * `scheme`: the reduced profile's grid (64², initial conditions drawn at 256² and truncated)
//!   integrated by `ns_2d.py`'s scheme at Δt = 1e-4 (the reference) and by the integrating-factor
//!   RK4 at each DT (default `0.02 0.01 0.005`), float32, batch SAMPLES (default 8), T (default
//!   20): seconds per sample per time unit of each, and the relative L2 difference from the
//!   reference per frame; for scale, also the reference at Δt = 2e-4 and in float64 against it.
//! * `dump`: a small float64 case (64², ν = 1e-3, Δt = 1e-3, T = 2, stride 2, forcing on) written
//!   as `w0`, `u` to an `.npz`, to compare with a literal port of `ns_2d.py`.

use std::time::Instant;

use ono_pde::navier_stokes::{fourier_resample, NsConfig, NsSolver};
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
        Some("scheme") => scheme(&args[1..]),
        Some(other) => {
            Err(format!("unknown mode `{other}` (timing, deviation, scheme, dump)").into())
        }
    };
    if let Err(e) = r {
        eprintln!("ns_timing: {e}");
        std::process::exit(1);
    }
}

/// `NS_DEVICE`: `cpu` (default), `cuda` or `cuda:N`.
fn device() -> Res<Device> {
    match std::env::var("NS_DEVICE").as_deref() {
        Err(_) | Ok("cpu") => Ok(Device::Cpu),
        Ok("cuda") => Ok(Device::Cuda(0)),
        Ok(d) => match d.strip_prefix("cuda:").and_then(|n| n.parse().ok()) {
            Some(n) => Ok(Device::Cuda(n)),
            None => Err(format!("NS_DEVICE=`{d}` is not cpu, cuda or cuda:N").into()),
        },
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
    // Wait for the warm-up (asynchronous on CUDA) before starting the clock.
    let _ = f64::try_from(w_hat.f_abs()?.f_sum(Kind::Double)?)?;
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
    let dev = device()?;
    let full_batch: usize = std::env::var("NS_BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(4);
    println!(
        "libtorch threads: {}, {dev:?}, float32",
        tch::get_num_threads()
    );
    let full = NsConfig::fno(dev);
    let reduced_cn = NsConfig {
        device: dev,
        ..NsConfig::reduced_reference_scheme()
    };
    let reduced = NsConfig {
        device: dev,
        ..NsConfig::reduced()
    };
    for (name, cfg, batch, steps) in [
        ("full 256², Δt 1e-4", full, full_batch, full_steps),
        (
            "64², ns_2d.py scheme, Δt 1e-4",
            reduced_cn,
            20,
            reduced_steps,
        ),
        (
            "reduced 64², IF-RK4, Δt 0.02",
            reduced,
            20,
            reduced_steps / 50,
        ),
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
        device: dev,
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

/// `RES:STRIDE:DT[:f64]`.
fn parse_profile(p: &str) -> Res<(usize, usize, f64, Kind)> {
    let parts: Vec<&str> = p.split(':').collect();
    let kind = match parts.get(3) {
        None | Some(&"f32") => Kind::Float,
        Some(&"f64") => Kind::Double,
        Some(other) => return Err(format!("profile `{p}`: unknown precision `{other}`").into()),
    };
    if !(3..=4).contains(&parts.len()) {
        return Err(format!("profile `{p}` is not RES:STRIDE:DT[:f64]").into());
    }
    Ok((
        parts[0].parse()?,
        parts[1].parse()?,
        parts[2].parse()?,
        kind,
    ))
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

/// Root mean square per frame.
fn rms_per_frame(x: &Tensor) -> Res<Vec<f64>> {
    let r = x
        .f_to_kind(Kind::Double)?
        .f_square()?
        .f_mean_dim([0, 1, 2].as_slice(), false, Kind::Double)?
        .f_sqrt()?;
    Ok(Vec::<f64>::try_from(&r)?)
}

/// Share of the enstrophy `Σ|ŵ|²` of the stored fields in the modes with `max(|k_x|, |k_y|) > 16`
/// at the last frame: where a coarse solve piles up enstrophy below its cutoff.
fn high_k_share(x: &Tensor) -> Res<f64> {
    let frames = x.size()[3];
    let last = x.f_select(3, frames - 1)?.f_to_kind(Kind::Double)?;
    let m = last.size()[1];
    let p = last
        .f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?
        .f_abs()?
        .f_square()?;
    let total = f64::try_from(p.f_sum(Kind::Double)?)?;
    // Low block: |k_x| ≤ 16 (rows 0..=16 and m−16..m), k_y ≤ 16 (columns 0..=16).
    let cols = p.f_narrow(2, 0, 17)?;
    let low = f64::try_from(cols.f_narrow(1, 0, 17)?.f_sum(Kind::Double)?)?
        + f64::try_from(cols.f_narrow(1, m - 16, 16)?.f_sum(Kind::Double)?)?;
    Ok(1.0 - low / total)
}

fn fmt(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.3e}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn deviation(args: &[String]) -> Res<()> {
    let with_f64 = args.iter().any(|a| a == "--f64");
    let args: Vec<String> = args.iter().filter(|a| *a != "--f64").cloned().collect();
    let t_final: f64 = arg(&args, 0, 2.0)?;
    let samples: usize = arg(&args, 1, 4)?;
    let profiles: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        ["64:1:1e-4", "128:2:1e-4", "64:1:2e-4", "64:1:5e-4"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    };
    let dev = device()?;
    let full = NsConfig {
        t_final,
        batch_size: samples,
        device: dev,
        ..NsConfig::default()
    };
    let w0 = full.grf.sample(256, 0, 0, samples)?;
    let t = Instant::now();
    let reference = full.solve(&w0.f_to_kind(Kind::Float)?)?;
    println!(
        "full 256:4:1e-4 float32, {samples} samples (seed 0), T = {t_final}: {:.0} s",
        t.elapsed().as_secs_f64()
    );
    println!(
        "  rms vorticity per frame: {}",
        fmt(&rms_per_frame(&reference)?)
    );
    println!(
        "  enstrophy share of max(|k_x|,|k_y|) > 16 at t = {t_final}: {:.3e}",
        high_k_share(&reference)?
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
    if with_f64 {
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
    }
    // Runs of the same grid and step in both precisions are also compared with each other: the
    // growth of round-off by the flow's own instability, at that resolution.
    let mut done: Vec<((usize, usize, u64), Tensor)> = Vec::new();
    for p in profiles {
        let (res, stride, dt, kind) = parse_profile(&p)?;
        let cfg = NsConfig {
            resolution: res,
            stride,
            dt,
            t_final,
            batch_size: samples,
            kind,
            device: dev,
            ..NsConfig::default()
        };
        let w = fourier_resample(&w0, res)?.f_to_kind(kind)?;
        let t = Instant::now();
        let out = match cfg.solve(&w) {
            Ok(out) => out.f_to_kind(Kind::Float)?,
            Err(e) => {
                println!("{p}: {e}");
                continue;
            }
        };
        println!(
            "{p} ({:.0} s): vs full {}",
            t.elapsed().as_secs_f64(),
            fmt(&rel_l2_per_frame(&out, &reference)?)
        );
        println!(
            "  rms per frame {}; high-k share at t = {t_final}: {:.3e}",
            fmt(&rms_per_frame(&out)?),
            high_k_share(&out)?
        );
        let key = (res, stride, dt.to_bits());
        if let Some((_, other)) = done.iter().find(|(k, _)| *k == key) {
            println!(
                "  vs the other precision: {}",
                fmt(&rel_l2_per_frame(&out, other)?)
            );
        }
        done.push((key, out));
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

fn scheme(args: &[String]) -> Res<()> {
    use ono_pde::navier_stokes::TimeScheme;
    let t_final: f64 = arg(args, 0, 20.0)?;
    let samples: usize = arg(args, 1, 8)?;
    let dts: Vec<f64> = if args.len() > 2 {
        args[2..]
            .iter()
            .map(|s| s.parse::<f64>())
            .collect::<Result<_, _>>()?
    } else {
        vec![0.02, 0.01, 0.005]
    };
    let dev = device()?;
    let base = NsConfig {
        t_final,
        batch_size: samples,
        device: dev,
        ..NsConfig::reduced()
    };
    let w0 = fourier_resample(&base.grf.sample(256, 0, 0, samples)?, 64)?;
    let run = |cfg: &NsConfig| -> Res<(Tensor, f64)> {
        let t = Instant::now();
        let out = cfg
            .solve(&w0.f_to_kind(cfg.kind)?)?
            .f_to_kind(Kind::Float)?;
        Ok((out, t.elapsed().as_secs_f64() / (samples as f64 * t_final)))
    };
    let reference_cfg = NsConfig {
        scheme: TimeScheme::CrankNicolsonEuler,
        dt: 1e-4,
        ..base
    };
    let (reference, ref_cost) = run(&reference_cfg)?;
    println!(
        "reference (ns_2d.py scheme, Δt = 1e-4, 64², float32, {samples} samples, T = {t_final}): {ref_cost:.3} s per sample per time unit"
    );
    let frames = reference.size()[3];
    if frames > 1 {
        let a = reference.f_narrow(3, 1, frames - 1)?;
        let b = reference.f_narrow(3, 0, frames - 1)?;
        println!(
            "  frame-to-frame change ‖u(t+1) − u(t)‖/‖u(t)‖: {}",
            fmt(&rel_l2_per_frame(&a, &b)?)
        );
    }
    for (label, cfg) in [
        (
            "reference at Δt = 2e-4".to_string(),
            NsConfig {
                dt: 2e-4,
                ..reference_cfg
            },
        ),
        (
            "reference in float64".to_string(),
            NsConfig {
                kind: Kind::Double,
                ..reference_cfg
            },
        ),
    ] {
        let (out, cost) = run(&cfg)?;
        println!(
            "{label} ({cost:.3} s/sample/unit): vs reference {}",
            fmt(&rel_l2_per_frame(&out, &reference)?)
        );
    }
    for dt in dts {
        let cfg = NsConfig {
            scheme: TimeScheme::IfRk4,
            dt,
            ..base
        };
        match run(&cfg) {
            Ok((out, cost)) => println!(
                "IF-RK4 Δt = {dt} ({cost:.3} s/sample/unit, {:.1}× cheaper): vs reference {}",
                ref_cost / cost,
                fmt(&rel_l2_per_frame(&out, &reference)?)
            ),
            Err(e) => println!("IF-RK4 Δt = {dt}: {e}"),
        }
    }
    Ok(())
}
