//! `ono bench-step`: time full training steps of an architecture at a benchmark's shapes.

use anyhow::{Context, Result};
use ono_models::ono::OnoPreset;
use ono_models::ModelConfig;
use ono_train::bench_step::{bench_step, StepRecipe, StepReport, StepShapes};
use ono_train::bench_train::BatchReport;
use ono_train::Precision;

use crate::device;

/// Times `steps` steps of `arch`'s `preset` at the shapes of `shapes` (an ONO preset name;
/// default: `preset` when it names one), `batch` samples per step (default: the shapes'), with
/// `recipe`'s optimisation (default: the FNO scripts' for the FNO family, else ONO's), the
/// products in `precision` (`f32`, `bf16`, `f16`), the step as a graph under `graphs`.
#[allow(clippy::too_many_arguments)]
pub fn run(
    arch: &str,
    preset: &str,
    shapes: Option<&str>,
    batch: Option<i64>,
    recipe: Option<&str>,
    steps: usize,
    warmup: usize,
    threads: Option<i32>,
    dev: &str,
    recompute: ono_models::Recompute,
    overrides: Option<&str>,
    precision: &str,
    graphs: ono_train::graphs::Graphs,
) -> Result<StepReport> {
    let precision: Precision = precision.parse().context("--precision")?;
    let mut config = ModelConfig::preset(arch, preset)?;
    if let Some(text) = overrides {
        let table: toml::Table = text
            .parse()
            .map_err(|e| anyhow::anyhow!("--overrides is not TOML key = value lines: {e}"))?;
        config = ono_train::config::with_overrides(&config, &table, "--overrides")?;
        config.validate().context("--overrides")?;
    }
    let shapes: OnoPreset = match shapes {
        Some(s) => s.parse().context("--shapes")?,
        None => preset.parse().with_context(|| {
            format!("--preset {preset} names no benchmark; choose the shapes with --shapes (darcy, ns2d, airfoil, pipe, elasticity, plasticity, super_resolution, time_extrapolation)")
        })?,
    };
    if let Some(t) = threads {
        anyhow::ensure!(t > 0, "--threads must be positive");
        tch::set_num_threads(t);
    }
    let mut shapes = StepShapes::of(shapes);
    if let Some(b) = batch {
        anyhow::ensure!(b > 0, "--batch must be positive");
        shapes.batch = b;
    }
    let recipe: StepRecipe = match recipe {
        Some(r) => r.parse()?,
        None if arch.starts_with("fno") => StepRecipe::Fno,
        None => StepRecipe::Ono,
    };
    Ok(bench_step(
        &config,
        preset,
        shapes,
        recipe,
        steps,
        warmup,
        device(dev)?,
        recompute,
        precision,
        graphs,
    )?)
}

/// Times `steps` batches of the run in `config` after `warmup` (on `device` and with `threads`
/// when given, else the file's).
pub fn run_train(
    config: &std::path::Path,
    steps: usize,
    warmup: usize,
    dev: Option<String>,
    threads: Option<i32>,
) -> Result<BatchReport> {
    let mut cfg = ono_train::config::TrainConfig::from_file(config)?;
    if let Some(d) = dev {
        device(&d)?;
        cfg.device = d;
    }
    if let Some(t) = threads {
        anyhow::ensure!(t > 0, "--threads must be positive");
        cfg.threads = t;
    }
    ono_train::bench_train::bench_train(cfg, warmup, steps)
        .with_context(|| format!("in {}", config.display()))
}
