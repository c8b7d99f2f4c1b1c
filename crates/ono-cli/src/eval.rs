//! `ono eval`: a checkpoint's test error on its own data or on another dataset file.

use std::path::PathBuf;

use anyhow::Result;
use ono_train::evaluate::{evaluate_checkpoint, EvalData};

use crate::device;

/// Evaluates `checkpoint` on the test split; prints one JSON line
/// ([`ono_train::evaluate::Evaluation`]). `r` re-reads the run's own benchmark at another
/// subsampling stride (another resolution, e.g. Burgers at 8192 points).
pub fn run(
    checkpoint: PathBuf,
    data: Option<PathBuf>,
    r: Option<usize>,
    dev: &str,
    batch: i64,
) -> Result<()> {
    let data = match (data, r) {
        (Some(_), Some(_)) => {
            anyhow::bail!(
                "--r re-reads the run's own benchmark; a --data file has its own resolution"
            )
        }
        (Some(d), None) => EvalData::File(d),
        (None, r) => EvalData::Own { r },
    };
    let e = evaluate_checkpoint(&checkpoint, &data, device(dev)?, batch)?;
    println!("{}", serde_json::to_string(&e)?);
    Ok(())
}
