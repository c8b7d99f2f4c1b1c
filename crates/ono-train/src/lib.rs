//! Training, evaluation and checkpoints for any architecture of ono-models: losses, AdamW,
//! OneCycle, gradient clipping and the training loop of the ONO paper.
//!
//! A run, by job: `config.rs` (the experiment file), `data_source.rs` + `recipe.rs` (the data and
//! the reference's settings for it), `run.rs` (the experiment resolved and checked, once: what
//! the trainer consumes), `normalizers.rs` (the run's normalizers as one object), `trainer.rs`
//! (setup and the epoch loop), `regime.rs` (how
//! samples are fed: steady, autoregressive, per time step — the one place a regime is dispatched
//! on), `step.rs` (one optimizer step), `decoder.rs` (a model with its output normalizer), `evaluate.rs`, `checkpoint.rs`, `run_folder.rs` (the files
//! of a run), `observer.rs` (what a run hands out after every epoch: the data of its figures, which
//! the `ono` binary draws with ono-plot; this crate draws nothing), `predictor.rs` (a trained model
//! ready to predict), `bench_step.rs`, `scaler.rs` (float16's dynamic loss scaling).

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
pub mod handoff;
pub mod loss;
pub mod normalizers;
pub mod observer;
pub mod one_cycle;
pub mod parallel;
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
