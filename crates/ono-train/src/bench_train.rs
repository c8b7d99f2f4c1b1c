//! Timing of whole training batches of a run configuration: its model, data, regime, loss and
//! optimizer, as [`Trainer::run`] trains them. `ono reproduce --plan-only --measure` times every
//! experiment of a plan this way (on files of the published shapes) to budget a run before it
//! starts.

use serde::{Deserialize, Serialize};

use ono_data::dataset::Split;

use crate::bench_step::{median, peak_rss_mb};
use crate::config::TrainConfig;
use crate::parallel::{self, DataParallel};
use crate::run::RunSpec;
use crate::trainer::Trainer;
use crate::{Error, Result};

/// One JSON line of `ono bench-train`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchReport {
    /// The architecture.
    pub arch: String,
    /// Trainable parameters.
    pub params: i64,
    /// Samples per batch.
    pub batch: i64,
    /// Optimizer steps per batch (T per time step with Plasticity's regime, else 1).
    pub steps_per_batch: i64,
    /// Timed batches (after the warm-up).
    pub timed: usize,
    /// Median seconds per batch.
    pub median_s: f64,
    /// Fastest batch.
    pub min_s: f64,
    /// Peak resident set size of the process in MB (VmHWM; CPU memory), where the system
    /// reports it (Linux).
    pub peak_rss_mb: Option<f64>,
    /// Bytes a training sample takes on the device, as the trainer holds the split there
    /// (inputs, targets, positions and loss channels), and those every sample shares (positions
    /// common to all); the same for the test split.
    pub train_sample_bytes: u64,
    pub train_shared_bytes: u64,
    pub test_sample_bytes: u64,
    pub test_shared_bytes: u64,
    /// Torch threads.
    pub threads: i32,
    /// The device.
    pub device: String,
}

/// Times `timed` batches of the run `config` after `warmup` untimed ones
/// ([`Trainer::time_batches`]). The run's output folder is neither read nor written.
pub fn bench_train(config: TrainConfig, warmup: usize, timed: usize) -> Result<BatchReport> {
    if timed == 0 {
        return Err(Error::config("--steps", "must be at least 1"));
    }
    let batch = config.batch_size;
    // Nothing is written, and nothing of an earlier run in the configured folder is read: a
    // folder that holds a run's checkpoints is timed like an empty one.
    let mut config = config;
    config.output_dir = std::env::temp_dir().join(format!(
        "ono-bench-train-{}-never-written",
        std::process::id()
    ));
    // The schedule must reach every timed step: a data set of one batch per epoch times more
    // batches than one epoch has (the learning rate's values do not change the time).
    config.epochs = config.epochs.max((warmup + timed) as u64);
    let run = RunSpec::resolve(config)?;
    // Started by a launcher, the processes time their steps together (data parallel or
    // point-sharded, as `ono train` runs them): each reports its own time and peak memory.
    let parallel = DataParallel::from_env(run.device, parallel::timeout_from_env()?)?;
    let mut trainer = Trainer::with_parallel(run, false, parallel)?;
    let mut times = trainer.time_batches(warmup, timed)?;
    times.sort_by(f64::total_cmp);
    let train = trainer.train_split();
    let steps_per_batch = if trainer.regime.time_input() {
        trainer.time_steps.max(1)
    } else {
        1
    };
    let (train_sample_bytes, train_shared_bytes) = split_bytes(train);
    let (test_sample_bytes, test_shared_bytes) = split_bytes(trainer.test_split());
    Ok(BatchReport {
        arch: trainer.model().arch().into(),
        params: trainer.model().parameter_count(),
        batch: batch.min(train.len()),
        steps_per_batch,
        timed,
        median_s: median(&times),
        min_s: times[0],
        peak_rss_mb: peak_rss_mb(),
        train_sample_bytes,
        train_shared_bytes,
        test_sample_bytes,
        test_shared_bytes,
        threads: tch::get_num_threads(),
        device: format!("{:?}", trainer.model().device()),
    })
}

/// The bytes of a split's tensors: per sample, and shared by all (positions of shape (1, N, d)
/// in a split of more than one sample; with one sample they count as its own).
fn split_bytes(s: &Split) -> (u64, u64) {
    let bytes = |t: &tch::Tensor| (t.numel() * t.kind().elt_size_in_bytes()) as u64;
    let n = s.len().max(1);
    let (mut per_split, mut shared) = (0, 0);
    for t in [
        Some(&s.fx),
        Some(&s.y),
        Some(&s.pos),
        s.query.as_ref(),
        s.aux.as_ref(),
        s.theta.as_ref(),
    ]
    .into_iter()
    .flatten()
    .chain(s.functions.iter().map(|f| &f.values))
    {
        if n > 1 && t.size().first() == Some(&1) {
            shared += bytes(t);
        } else {
            per_split += bytes(t);
        }
    }
    (per_split / n as u64, shared)
}
