//! `ono bench-step`: time full training steps of an architecture at a benchmark's shapes.

use anyhow::{Context, Result};
use ono_models::{ModelConfig, Preset};
use ono_train::bench_step::{bench_step, StepShapes};

use crate::device;

/// Times `steps` steps of `arch`'s `preset` at the shapes of `shapes` (an ONO preset name;
/// default: `preset` when it names one); prints one JSON line.
#[allow(clippy::too_many_arguments)]
pub fn run(
    arch: &str,
    preset: &str,
    shapes: Option<&str>,
    steps: usize,
    warmup: usize,
    threads: Option<i32>,
    dev: &str,
    recompute: bool,
) -> Result<()> {
    let config = ModelConfig::preset(arch, preset)?;
    let shapes: Preset = match shapes {
        Some(s) => s.parse().context("--shapes")?,
        None => preset.parse().with_context(|| {
            format!("--preset {preset} names no benchmark; choose the shapes with --shapes (darcy, ns2d, airfoil, pipe, elasticity, plasticity, super_resolution, time_extrapolation)")
        })?,
    };
    if let Some(t) = threads {
        anyhow::ensure!(t > 0, "--threads must be positive");
        tch::set_num_threads(t);
    }
    let report = bench_step(
        &config,
        preset,
        StepShapes::of(shapes),
        steps,
        warmup,
        device(dev)?,
        recompute,
    )?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}
