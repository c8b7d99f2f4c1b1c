//! The one owner of a run's folder: every file a run, `ono reproduce` or `ono compare` keeps
//! there is named here and read or written through [`RunFolder`], in the manner of burn's
//! `FileCheckpointer`.
//!
//! The contract:
//! - a file's name appears in this module and nowhere else; callers ask for a file by what it
//!   is (the last checkpoint, the metrics, the result record), never by its name;
//! - every write is atomic ([`ono_io::atomic`]), so a kill leaves the old file or the new one;
//! - the run state is read from the checkpoint itself ([`RunFolder::last_state`] reads the
//!   safetensors header): the JSON sidecar beside each checkpoint is written for people only;
//! - a typed record ([`Record`]: a result, the time spent, a timing, a budget) is read back as
//!   `None` when it is absent or cannot be read as its type, which callers treat as "not done
//!   yet": a record of an older format is redone, never misread;
//! - processes that share a folder take its lock ([`RunFolder::lock`]) before they write in it.
//!
//! The layout, for people and scripts:
//!
//! ```text
//! experiment.toml        the run's configuration, as `ono train` reads it
//! checkpoints/last.*     the last epoch's checkpoint (.safetensors) and its state (.json)
//! checkpoints/best.*     the best epoch's, with `checkpoint.keep_best`
//! metrics.jsonl          one line per epoch
//! curves.png panels.png  figures drawn by the `ono` binary's observer
//! result.json            a finished experiment's outcome (reproduce, compare)
//! wall.json              the time unfinished attempts spent
//! bench.json budget.json compare's timing and the epochs it granted
//! summary.json           in a results folder (reproduce's and compare's output folder): the
//!                        call's results; reproduce's budget.json there is the plan's budget
//! timing/                compare's timed batches, a run folder of its own
//! measure.toml measure/  reproduce's budget measurement and its run
//! reference/             the hand-off to the reference loop (`handoff`)
//! .lock                  held by the process working in the folder
//! ```

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::checkpoint::{Checkpoint, EpochRecord, TrainState};
use crate::{Error, Result};

/// Which checkpoint of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The last epoch's: what a resumed run starts from.
    Last,
    /// The best evaluated epoch's (`checkpoint.keep_best`).
    Best,
}

impl Slot {
    fn stem(self) -> &'static str {
        match self {
            Slot::Last => "last",
            Slot::Best => "best",
        }
    }
}

/// The JSON records a run folder keeps beside the training files (see [`Record`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFile {
    /// A finished experiment's outcome.
    Result,
    /// The wall time attempts that did not finish spent.
    Wall,
    /// A model's timed batches before training (compare).
    Bench,
    /// The epochs a run was granted (compare); in a results folder, the plan's budget
    /// (reproduce).
    Budget,
    /// A results folder's results (reproduce's tables, compare's comparison).
    Summary,
}

impl RecordFile {
    fn name(self) -> &'static str {
        match self {
            RecordFile::Result => "result.json",
            RecordFile::Wall => "wall.json",
            RecordFile::Bench => "bench.json",
            RecordFile::Budget => "budget.json",
            RecordFile::Summary => "summary.json",
        }
    }
}

/// A typed JSON record of a run folder: the type says which file it lives in.
pub trait Record: Serialize + DeserializeOwned {
    /// Its file.
    const FILE: RecordFile;
}

/// A run's folder (its `output_dir`), or a results folder, which holds records only. Cheap to
/// make: nothing is touched until asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunFolder {
    dir: PathBuf,
}

impl RunFolder {
    /// The run folder `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self { dir: dir.into() }
    }

    /// The folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the folder (and its parents) when it is not there.
    pub fn create(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| Error::io(&self.dir, e))
    }

    /// Creates the folder and takes its lock, waiting for another holder to let go (or die).
    pub fn lock(&self) -> Result<ono_io::lock::FileLock> {
        self.create()?;
        Ok(ono_io::lock::FileLock::acquire(
            &self.lock_path(),
            &ono_io::lock::this_process(),
        )?)
    }

    /// Takes the folder's lock if no one holds it, else `Ok(None)` at once.
    pub fn try_lock(&self) -> Result<Option<ono_io::lock::FileLock>> {
        Ok(ono_io::lock::FileLock::try_acquire(
            &self.lock_path(),
            &ono_io::lock::this_process(),
        )?)
    }

    /// Who last held the folder's lock, if anyone did (for messages).
    pub fn lock_holder(&self) -> Option<String> {
        ono_io::lock::FileLock::holder(&self.lock_path())
    }

    fn lock_path(&self) -> PathBuf {
        ono_io::lock::folder_lock(&self.dir)
    }

    /// The experiment file `ono train` runs in this folder.
    pub fn experiment_file(&self) -> PathBuf {
        self.dir.join("experiment.toml")
    }

    /// The experiment file of reproduce's budget measurement (its run is [`Self::measure`]).
    pub fn measure_file(&self) -> PathBuf {
        self.dir.join("measure.toml")
    }

    /// The run folder of reproduce's budget measurement.
    pub fn measure(&self) -> RunFolder {
        RunFolder::new(self.dir.join("measure"))
    }

    /// The run folder of compare's timed batches (its own experiment file and checkpoints).
    pub fn timing(&self) -> RunFolder {
        RunFolder::new(self.dir.join("timing"))
    }

    /// The folder of the hand-off to the reference loop ([`crate::handoff`]).
    pub fn reference(&self) -> PathBuf {
        self.dir.join("reference")
    }

    /// The folder of the checkpoints.
    pub fn checkpoints(&self) -> PathBuf {
        self.dir.join("checkpoints")
    }

    /// The checkpoint file of `slot` (its JSON sidecar is [`crate::checkpoint::sidecar`]).
    pub fn checkpoint(&self, slot: Slot) -> PathBuf {
        self.checkpoints()
            .join(format!("{}.safetensors", slot.stem()))
    }

    /// Whether a run was started here (its last checkpoint is there).
    pub fn has_checkpoint(&self) -> bool {
        self.checkpoint(Slot::Last).is_file()
    }

    /// The state of the last checkpoint, read from the checkpoint's header; `None` when there
    /// is none, an error when it is there and cannot be read.
    pub fn last_state(&self) -> Result<Option<TrainState>> {
        let path = self.checkpoint(Slot::Last);
        if !path.exists() {
            return Ok(None);
        }
        Checkpoint::read_state(&path).map(Some)
    }

    /// `metrics.jsonl`: one line per epoch.
    pub fn metrics(&self) -> PathBuf {
        self.dir.join("metrics.jsonl")
    }

    /// Rewrites the metrics, one line per epoch record, atomically.
    pub fn write_metrics(&self, history: &[EpochRecord]) -> Result<()> {
        let mut text = String::new();
        for r in history {
            text.push_str(&serde_json::to_string(r).map_err(|e| Error::Data(e.to_string()))?);
            text.push('\n');
        }
        ono_io::atomic::write_atomic(&self.metrics(), text.as_bytes())?;
        Ok(())
    }

    /// The records of `metrics.jsonl`.
    pub fn read_metrics(&self) -> Result<Vec<EpochRecord>> {
        let path = self.metrics();
        let text = std::fs::read_to_string(&path).map_err(|e| Error::io(&path, e))?;
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                serde_json::from_str(l).map_err(|e| Error::Data(format!("{}: {e}", path.display())))
            })
            .collect()
    }

    /// The training curves figure.
    pub fn curves(&self) -> PathBuf {
        self.dir.join("curves.png")
    }

    /// The field panels figure.
    pub fn panels(&self) -> PathBuf {
        self.dir.join("panels.png")
    }

    /// Removes what training wrote (checkpoints, metrics), so that the run starts again; what
    /// is not there is no error.
    pub fn clear_training(&self) -> Result<()> {
        self.remove_checkpoints()?;
        remove_file(&self.metrics())
    }

    /// Removes the checkpoints alone (a rehearsal keeps no weights).
    pub fn remove_checkpoints(&self) -> Result<()> {
        let dir = self.checkpoints();
        match std::fs::remove_dir_all(&dir) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(&dir, e)),
            _ => Ok(()),
        }
    }

    /// The record `R`, or `None` when it is absent or is not an `R` (an older format, a file
    /// cut short: both are redone, see the module documentation).
    pub fn read<R: Record>(&self) -> Option<R> {
        let text = std::fs::read_to_string(self.record_path(R::FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the record `R` atomically (creating the folder).
    pub fn write<R: Record>(&self, record: &R) -> Result<()> {
        self.create()?;
        let text = serde_json::to_string_pretty(record).map_err(|e| Error::Data(e.to_string()))?;
        ono_io::atomic::write_atomic(&self.record_path(R::FILE), text.as_bytes())?;
        Ok(())
    }

    /// Removes the record `R` (no error when it is not there).
    pub fn remove<R: Record>(&self) -> Result<()> {
        remove_file(&self.record_path(R::FILE))
    }

    fn record_path(&self, file: RecordFile) -> PathBuf {
        self.dir.join(file.name())
    }
}

fn remove_file(path: &Path) -> Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Spent {
        wall_s: f64,
    }
    impl Record for Spent {
        const FILE: RecordFile = RecordFile::Wall;
    }

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Other {
        epochs: u64,
    }
    impl Record for Other {
        const FILE: RecordFile = RecordFile::Wall;
    }

    fn scratch(name: &str) -> RunFolder {
        let dir =
            std::env::temp_dir().join(format!("ono-run-folder-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        RunFolder::new(dir)
    }

    #[test]
    fn records_round_trip_and_a_foreign_one_reads_as_absent() {
        let f = scratch("records");
        assert_eq!(f.read::<Spent>(), None);
        f.write(&Spent { wall_s: 2.5 }).unwrap();
        assert_eq!(f.read::<Spent>(), Some(Spent { wall_s: 2.5 }));
        // The same file read as another type: not done, never misread.
        assert_eq!(f.read::<Other>(), None);
        f.remove::<Spent>().unwrap();
        f.remove::<Spent>().unwrap();
        assert_eq!(f.read::<Spent>(), None);
        let _ = std::fs::remove_dir_all(f.dir());
    }

    #[test]
    fn no_checkpoint_is_no_state_and_a_foreign_one_is_an_error() {
        let f = scratch("state");
        assert!(!f.has_checkpoint());
        assert!(f.last_state().unwrap().is_none());
        std::fs::create_dir_all(f.checkpoints()).unwrap();
        std::fs::write(f.checkpoint(Slot::Last), b"not a checkpoint").unwrap();
        assert!(f.has_checkpoint());
        assert!(f.last_state().is_err());
        f.clear_training().unwrap();
        assert!(!f.checkpoints().exists());
        f.clear_training().unwrap();
        let _ = std::fs::remove_dir_all(f.dir());
    }

    #[test]
    fn the_lock_is_held_once() {
        let f = scratch("lock");
        let held = f.lock().unwrap();
        assert!(f.try_lock().unwrap().is_none());
        assert!(f.lock_holder().is_some());
        drop(held);
        assert!(f.try_lock().unwrap().is_some());
        let _ = std::fs::remove_dir_all(f.dir());
    }
}
