//! Training, evaluation and checkpoints for any architecture of ono-models: losses, AdamW,
//! OneCycle, gradient clipping and the training loop of the ONO paper.
//!
//! A run, by job:
//! - what to run: `config.rs` (the experiment file, and its [`config::Fingerprint`]),
//!   `data_source.rs` + `recipe.rs` (the data and the reference's settings for it), `run.rs` (the
//!   experiment resolved and checked, once: what the trainer consumes);
//! - training: `trainer/` (`setup.rs`: resume, build, rank agreement; `epoch.rs`: the train
//!   epoch and the end of an epoch), `regime.rs` (how samples are fed: steady, autoregressive,
//!   per time step; the one place a regime is dispatched on), `loss.rs` (the loss and what it is
//!   taken on), `step.rs` (one optimizer step over its micro-batches), `adamw.rs`,
//!   `graphs.rs` (the step as a CUDA graph, and the discipline that makes it graph-safe),
//!   `one_cycle.rs`, `clip.rs`, `scaler.rs` (float16's dynamic loss scaling), `parallel.rs`
//!   (what the processes of a data-parallel run exchange), `normalizers.rs` (the run's
//!   normalizers as one object), `decoder.rs` (a model with its output normalizer);
//! - after training: `evaluate.rs`, `predictor.rs` (a trained model ready to predict);
//! - files: `checkpoint.rs` (versioned, with its migration), `run_folder.rs` (every file of a
//!   run), `handoff.rs` (the folder the reference loop reads), `observer.rs` (what a run hands
//!   out after every epoch: the data of its figures, which the `ono` binary draws with ono-plot;
//!   this crate draws nothing);
//! - timing: `bench_step.rs`, `bench_train.rs`, `progress.rs`.

pub mod adamw;
pub mod bench_step;
pub mod bench_train;
pub mod checkpoint;
pub mod clip;
pub mod config;
pub mod data_source;
pub mod decoder;
mod error;
pub mod evaluate;
pub mod graphs;
pub mod handoff;
pub mod loss;
pub mod normalizers;
pub mod observer;
pub mod one_cycle;
pub mod parallel;
pub mod points;
pub mod predictor;
pub mod progress;
pub mod recipe;
pub mod regime;
pub mod run;
pub mod run_folder;
pub mod scaler;
mod step;
pub mod trainer;

pub use error::{Error, Result};
pub use observer::{EpochObserver, EpochView};
/// The `precision` of an experiment (`ono_nn::precision`).
pub use ono_nn::Precision;
pub use predictor::Predictor;
pub use regime::Regime;
pub use run::RunSpec;
pub use run_folder::RunFolder;
pub use trainer::{HostReads, Summary, Trainer};

#[cfg(test)]
mod tests {
    /// The shared link script must give this crate's test binaries libtorch (and its CUDA half).
    #[test]
    fn test_binary_links_libtorch() {
        ono_testing::assert_libtorch_linked();
    }
}
