//! `ono eval`: a checkpoint's test error on its own data or on another dataset file.

use std::path::PathBuf;

use anyhow::Result;
use ono_train::evaluate::{evaluate_checkpoint, EvalData};

use crate::device;

/// Evaluates `checkpoint` on the test split; prints one JSON line
/// ([`ono_train::evaluate::Evaluation`]). `r` re-reads the run's own benchmark at another
/// subsampling stride (another resolution, e.g. Burgers at 8192 points), `test_resolution`
/// with its test set at another resolution (`neuralop_darcy` at 32²).
pub fn run(
    checkpoint: PathBuf,
    data: Option<PathBuf>,
    r: Option<usize>,
    test_resolution: Option<usize>,
    dev: &str,
    batch: i64,
) -> Result<()> {
    let data = match data {
        Some(_) if r.is_some() || test_resolution.is_some() => {
            anyhow::bail!(
                "--r and --test-resolution re-read the run's own benchmark; a --data file has its \
                 own resolution"
            )
        }
        Some(d) => EvalData::File(d),
        None => EvalData::Own { r, test_resolution },
    };
    let e = evaluate_checkpoint(&checkpoint, &data, device(dev)?, batch)?;
    println!("{}", serde_json::to_string(&e)?);
    Ok(())
}
