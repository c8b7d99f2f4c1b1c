//! The rehearsal of the paper profile (`ono reproduce --rehearse`): every experiment of the paper
//! plan with its paper model and recipe, trained for one epoch of a few steps and evaluated, on
//! miniatures of the published files (`ono_data::benchmarks::miniature::write_rehearsal`: the
//! files' names, formats and layouts, six samples each). It proves that each cell builds, reads
//! its file, trains, evaluates and writes its result, which a 500-epoch job would otherwise find
//! out hours in.

use std::path::Path;

use anyhow::Result;

use ono_data::benchmarks::miniature::Miniature;
use ono_models::ModelConfig;

use super::{reduced::galerkin_grids, Plan, Work};

/// The rehearsal's batch size at most: two or more optimizer steps per experiment.
pub const BATCH: i64 = 2;

/// The side of the rehearsal's Darcy files (`write_rehearsal`).
pub const DARCY_SIDE: usize = 211;

/// `plan` (the paper plan) as a rehearsal on the miniatures in `miniatures`, whose training and
/// test splits are `split`'s.
pub fn rehearse(mut plan: Plan, miniatures: &Path, split: Miniature) -> Result<Plan> {
    for e in &mut plan.experiments {
        let config = match &mut e.work {
            Work::Train { config, .. } => config,
            // A timed run of its own reads the data like a trained one; one batch is enough.
            Work::TimeRun { config, steps } => {
                *steps = 1;
                config
            }
            // Tables 2 and 8 time a step at the paper's own shapes (random data): one is enough.
            Work::Measure(m) => {
                m.steps = 1;
                continue;
            }
        };
        let cfg = config.as_mut();
        cfg.epochs = 1;
        cfg.batch_size = cfg.batch_size.min(BATCH);
        let d = &mut cfg.data;
        if d.benchmark.is_none() {
            continue;
        }
        d.data_dir = Some(miniatures.to_path_buf());
        d.ntrain = Some(split.ntrain as i64);
        d.ntest = Some(split.ntest as i64);
        use ono_data::benchmarks::Benchmark;
        let side = |r: usize| ((DARCY_SIDE - 1) / r + 1) as i64;
        if d.benchmark == Some(Benchmark::Darcy) {
            // The Galerkin Transformer interpolates between two fixed grids, the fine one the
            // training grid: on the rehearsal's Darcy it is that file's, strided.
            let side = side(d.r.unwrap_or(5));
            cfg.model.edit(|m| {
                if let ModelConfig::Galerkin(c) = m {
                    if c.scaler_grids.is_some() {
                        c.scaler_grids = Some(galerkin_grids(side));
                    }
                }
            })?;
        }
        if d.benchmark == Some(Benchmark::DarcyInverse) {
            // The inverse problem's two grids, the input's and the coefficient's, strided
            // alike on the rehearsal's Darcy file.
            let (fine, coarse) = (side(d.r.unwrap_or(3)), side(d.coarse_r.unwrap_or(12)));
            cfg.model.edit(|m| {
                if let ModelConfig::Galerkin(c) = m {
                    if let Some(g) = c.scaler_grids.as_mut() {
                        g.fine = fine;
                        g.coarse = coarse;
                        // The reference's scale-factor path misses most other grids.
                        g.scale_factor = false;
                    }
                }
            })?;
        }
        e.data_note = format!("rehearsal: a miniature of the {}", e.data_note);
    }
    Ok(plan)
}
