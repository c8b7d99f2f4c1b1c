//! `ono eval`: a checkpoint's test error on its own data or on another dataset file.

use std::path::PathBuf;

use anyhow::{Context, Result};
use ono_data::dataset::TensorDataset;
use ono_train::config::{DataSection, LossSection};
use ono_train::data_source::resolve_data;
use ono_train::evaluate::{evaluate, normalized};
use ono_train::Predictor;

use crate::device;

/// Evaluates `checkpoint` on the test split; prints one JSON line. `r` re-reads the run's own
/// benchmark at another subsampling stride (another resolution, e.g. Burgers at 8192 points).
pub fn run(
    checkpoint: PathBuf,
    data: Option<PathBuf>,
    r: Option<usize>,
    dev: &str,
    batch: i64,
) -> Result<()> {
    println!(
        "{}",
        evaluate_checkpoint(&checkpoint, data, r, device(dev)?, batch)?
    );
    Ok(())
}

/// The JSON line of `ono eval`: `checkpoint`'s test errors on `data` (default: its own data, at
/// stride `r` when given).
pub fn evaluate_checkpoint(
    checkpoint: &std::path::Path,
    data: Option<PathBuf>,
    r: Option<usize>,
    dev: tch::Device,
    batch: i64,
) -> Result<serde_json::Value> {
    let (p, state) = Predictor::from_checkpoint(checkpoint, dev)?;
    let ds = match &data {
        Some(_) if r.is_some() => {
            anyhow::bail!(
                "--r re-reads the run's own benchmark; a --data file has its own resolution"
            )
        }
        Some(d) => TensorDataset::read(d)?,
        None => {
            // The run's own data: its file, or its benchmark with the same split.
            let mut section: DataSection = serde_json::from_value(state.config["data"].clone())
                .context("the checkpoint's data settings are unreadable; pass --data")?;
            if r.is_some() {
                anyhow::ensure!(
                    section.benchmark.is_some(),
                    "--r re-reads the run's benchmark, but the run was trained on a dataset file"
                );
                section.r = r;
            }
            let loss: LossSection = serde_json::from_value(state.config["loss"].clone())
                .context("the checkpoint's loss settings are unreadable; pass --data")?;
            resolve_data(&section, &loss)?.dataset
        }
    };
    let data_path = data.map_or_else(
        || {
            state.config["data"]["path"]
                .as_str()
                .or(state.config["data"]["benchmark"].as_str())
                .unwrap_or("?")
                .to_string()
        },
        |d| d.display().to_string(),
    );
    let ysz = ds.test.y.size();
    let steps = if ysz.len() == 4 { ysz[3] } else { 0 };
    // The grid of the evaluated data: another resolution than the training data's is fine
    // (pointwise normalizers are interpolated onto it).
    let (norms, y_norm) = p.normalizers_for(ds.grid.as_deref(), ds.query_grid.as_deref())?;
    let split = normalized(&ds.test, &norms, dev, p.kind())?;
    let errs = evaluate(
        &p.model,
        &y_norm,
        &split,
        p.regime,
        ds.grid.as_deref(),
        batch,
        steps,
    )?;
    Ok(serde_json::json!({
        "checkpoint": checkpoint,
        "data": data_path,
        "samples": split.len(),
        "grid": ds.target_grid(),
        "test_rel_l2": errs.full,
        "per_step": errs.per_step,
        "trained_steps": state.global_step,
    }))
}
