//! The files of a run inside its `output_dir`.

use std::path::{Path, PathBuf};

use crate::checkpoint::EpochRecord;
use crate::{Error, Result};

/// Files of a run inside `output_dir`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunPaths {
    /// `checkpoints/`.
    pub checkpoints: PathBuf,
    /// `metrics.jsonl`.
    pub metrics: PathBuf,
    /// `curves.png`, drawn by an [`EpochObserver`](crate::EpochObserver) (the `ono` binary's).
    pub curves: PathBuf,
    /// `panels.png`, likewise.
    pub panels: PathBuf,
}

impl RunPaths {
    /// The layout under `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            checkpoints: dir.join("checkpoints"),
            metrics: dir.join("metrics.jsonl"),
            curves: dir.join("curves.png"),
            panels: dir.join("panels.png"),
        }
    }

    /// `checkpoints/last.safetensors`, the checkpoint a resumed run starts from.
    pub fn last_checkpoint(&self) -> PathBuf {
        self.checkpoints.join("last.safetensors")
    }

    /// Rewrites `metrics.jsonl`, one line per epoch record, atomically.
    pub fn write_metrics(&self, history: &[EpochRecord]) -> Result<()> {
        let mut text = String::new();
        for r in history {
            text.push_str(&serde_json::to_string(r).map_err(|e| Error::Data(e.to_string()))?);
            text.push('\n');
        }
        ono_io::atomic::write_atomic(&self.metrics, text.as_bytes())?;
        Ok(())
    }
}
