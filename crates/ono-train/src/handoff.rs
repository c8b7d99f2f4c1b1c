//! The hand-off to the PyTorch reference loop (`benches/pytorch/train_ref.py`): a resolved run
//! written as the files that loop reads, and the result it writes back. The loop trains the
//! reference's own network (the restatements in `benches/pytorch/`) with `torch.optim`, its
//! schedulers and the scripts' normalizers and losses, on the very tensors this run trains on, so
//! that what differs between the two runs is the training code and the random streams, not the
//! data or the recipe.
//!
//! A hand-off folder holds:
//! - `handoff.json`: [`Handoff`], every value explicit (the loop knows no defaults);
//! - `data.safetensors`: the run's [`TensorDataset`] as [`TensorDataset::write`] writes it (raw,
//!   before any normalizer; `ntrain` / `ntest` applied);
//! - `init.safetensors`: the run's initial weights under the reference's names, which the loop
//!   loads only when told to (`--init ours`), to compare two loops from one starting point.

use std::path::{Path, PathBuf};

use ono_models::Model;
use serde::{Deserialize, Serialize};

use crate::config::{BatchOrder, OptimizerKind, ScheduleKind};
use crate::normalizers::NormalizerKinds;
use crate::one_cycle::OneCycleConfig;
use crate::regime::Regime;
use crate::run::{LossSpec, RunSpec};
use crate::{Error, Result};

/// The version of the files; the loop refuses another.
pub const FORMAT: u32 = 1;
/// The run description in a hand-off folder.
pub const SPEC_FILE: &str = "handoff.json";
/// The data in a hand-off folder.
pub const DATA_FILE: &str = "data.safetensors";
/// The initial weights (reference names) in a hand-off folder.
pub const INIT_FILE: &str = "init.safetensors";
/// What the loop writes into the folder.
pub const RESULT_FILE: &str = "result.json";

/// A resolved run, as the reference loop reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Handoff {
    /// [`FORMAT`].
    pub format: u32,
    /// The architecture (`ono_models::ARCHS`).
    pub arch: String,
    /// The model configuration's fields with the data's dimensions set
    /// (`ModelConfig::fields`).
    pub model: serde_json::Value,
    /// Seed of the loop's own torch generator (its initialisation and batch order).
    pub seed: u64,
    pub epochs: u64,
    pub batch_size: i64,
    /// Float64 parameters and data.
    pub double: bool,
    /// Torch threads (0: torch's default).
    pub threads: i32,
    /// `cpu` or `cuda` (`cuda:i` as `cuda`).
    pub device: String,
    /// Shuffled every epoch, or fixed chunks in one shuffled order (GNOT's loader).
    pub batch_order: BatchOrder,
    pub optimizer: HandoffOptimizer,
    pub schedule: HandoffSchedule,
    /// How samples are fed.
    pub regime: Regime,
    /// Autoregressive training on the true previous frames (else on its own predictions).
    pub teacher_forcing: bool,
    /// The normalizers the run fits on its training split.
    pub normalizers: NormalizerKinds,
    /// The training loss.
    pub loss: LossSpec,
    /// Evaluate every this many epochs (and after the last).
    pub eval_every_epochs: u64,
    /// The result is the best evaluated epoch, not the last.
    pub select_best: bool,
}

/// The optimizer, every value explicit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HandoffOptimizer {
    /// `torch.optim.AdamW` or `torch.optim.Adam` (weight decay as an L2 term).
    pub kind: OptimizerKind,
    pub lr: f64,
    pub weight_decay: f64,
    pub betas: (f64, f64),
    pub eps: f64,
    /// `clip_grad_norm_`'s bound; 0: no clipping.
    pub max_grad_norm: f64,
}

/// The learning-rate schedule, as the torch scheduler that runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum HandoffSchedule {
    /// `OneCycleLR`, stepped per batch; `total_steps` = epochs × batches per epoch.
    OneCycle(OneCycleConfig),
    /// No scheduler.
    Constant,
    /// `StepLR(step_size, gamma)`, stepped per epoch.
    Step { step_size: u64, gamma: f64 },
    /// `CosineAnnealingLR(T_max = t_max)`, stepped per epoch.
    Cosine { t_max: u64 },
}

impl Handoff {
    /// The hand-off of `run`.
    pub fn of(run: &RunSpec) -> Result<Self> {
        let cfg = &run.config;
        let n = run.data.train.fx.size()[0];
        let per_epoch = (n as u64).div_ceil(cfg.batch_size.max(1) as u64);
        let schedule = match cfg.schedule.kind {
            ScheduleKind::OneCycle => {
                HandoffSchedule::OneCycle(cfg.one_cycle(cfg.epochs * per_epoch)?)
            }
            ScheduleKind::Constant => HandoffSchedule::Constant,
            ScheduleKind::Step => HandoffSchedule::Step {
                step_size: cfg.schedule.step_size,
                gamma: cfg.schedule.gamma,
            },
            ScheduleKind::Cosine => HandoffSchedule::Cosine { t_max: cfg.epochs },
        };
        let o = &cfg.optimizer;
        Ok(Self {
            format: FORMAT,
            arch: run.model.arch().to_string(),
            model: run.model.fields()?,
            seed: cfg.seed,
            epochs: cfg.epochs,
            batch_size: cfg.batch_size,
            double: cfg.double,
            threads: cfg.threads,
            device: if run.device.is_cuda() { "cuda" } else { "cpu" }.into(),
            batch_order: cfg.data.batch_order,
            optimizer: HandoffOptimizer {
                kind: o.kind,
                lr: o.lr,
                weight_decay: o.weight_decay,
                betas: o.betas,
                eps: o.eps,
                max_grad_norm: o.max_grad_norm.unwrap_or(0.0),
            },
            schedule,
            regime: run.regime,
            teacher_forcing: cfg.data.teacher_forcing,
            normalizers: run.normalizers,
            loss: run.loss,
            eval_every_epochs: cfg.log.eval_every_epochs,
            select_best: cfg.checkpoint.select_best,
        })
    }

    /// Writes `handoff.json` and `data.safetensors` of `run` into `dir` (created), atomically.
    pub fn write(run: &RunSpec, dir: &Path) -> Result<()> {
        let spec = Self::of(run)?;
        let io = |e: std::io::Error| Error::Io {
            path: dir.to_path_buf(),
            source: e,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let text = serde_json::to_string_pretty(&spec)
            .map_err(|e| Error::Data(format!("hand-off: {e}")))?;
        ono_io::atomic::write_atomic(&dir.join(SPEC_FILE), text.as_bytes())?;
        run.data.write(&dir.join(DATA_FILE))?;
        Ok(())
    }

    /// Reads `handoff.json` from `dir`; refuses another [`FORMAT`].
    pub fn read(dir: &Path) -> Result<Self> {
        let (spec, _): (Self, _) = read_json(&dir.join(SPEC_FILE), |s: &Self| s.format)?;
        Ok(spec)
    }
}

/// Writes the model's (initial) weights under the reference's names into `dir`.
pub fn write_init(model: &Model, dir: &Path) -> Result<()> {
    Ok(model.save_reference_file(&dir.join(INIT_FILE))?)
}

/// The reference loop's result (`result.json` in the hand-off folder).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceResult {
    /// [`FORMAT`].
    pub format: u32,
    /// The run's test error: the mean over test samples of the relative L2 error (of the whole
    /// rollout for time series), at the last epoch or, with `select_best`, the best one.
    pub test_rel_l2: f64,
    /// Time series: the error of each rolled-out step at that epoch.
    #[serde(default)]
    pub per_step: Vec<f64>,
    /// One record per epoch.
    pub history: Vec<ReferenceEpoch>,
    /// Seconds of the whole loop from the data on the device to the last evaluation (as ours:
    /// neither reading the files nor building the network counts).
    pub wall_s: f64,
    /// The network's parameter count (complex parameters count twice, as torch's numel of
    /// their real views).
    pub params: i64,
    /// The weights it started from: `reference` (its own seeded init) or `ours`.
    pub init: String,
    /// The restatement that was trained (its module and class).
    pub network: String,
    /// `torch.__version__`.
    pub torch: String,
    /// Torch threads it ran with.
    pub threads: i32,
}

/// One epoch of the reference loop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReferenceEpoch {
    pub epoch: u64,
    /// Mean training loss per sample (the logged sum, as ours).
    pub train_loss: f64,
    /// Evaluated epochs only.
    pub test_rel_l2: Option<f64>,
    /// The learning rate of the epoch's last step.
    pub lr: f64,
    pub seconds: f64,
}

impl ReferenceResult {
    /// Reads `result.json` from `dir`; refuses another [`FORMAT`] or a non-finite error.
    pub fn read(dir: &Path) -> Result<Self> {
        let (r, path) = read_json(&dir.join(RESULT_FILE), |r: &Self| r.format)?;
        if !r.test_rel_l2.is_finite() {
            return Err(Error::Data(format!(
                "{}: the reference loop's test error is {}",
                path.display(),
                r.test_rel_l2
            )));
        }
        Ok(r)
    }
}

/// A hand-off file as a `T` (and its path, for messages); refuses another [`FORMAT`].
fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    format: impl Fn(&T) -> u32,
) -> Result<(T, PathBuf)> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let value: T =
        serde_json::from_str(&text).map_err(|e| Error::Data(format!("{}: {e}", path.display())))?;
    let found = format(&value);
    if found != FORMAT {
        return Err(Error::Data(format!(
            "{}: format {found}, this build reads {FORMAT}",
            path.display()
        )));
    }
    Ok((value, path.to_path_buf()))
}
