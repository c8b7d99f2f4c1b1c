//! A training run: setup (data, normalizers, model, optimizer, schedule, resume) and the epoch
//! loop of the reference scripts, resumable.
//!
//! Per batch: the schedule's lr (and β1) for this step, then the regime's step (`regime.rs`:
//! forward in training mode, the loss on decoded values, backward, global-norm clipping, AdamW).
//! With `precision = "bf16"` or `"f16"` the model's forward passes (training and evaluation) run
//! in mixed precision ([`ono_nn::precision`]); float16 adds a loss scaler (`scaler.rs`) whose
//! state is checkpointed beside the optimizer's.
//! The loss is read back only every `log.every_steps` batches and before any checkpoint (no host
//! sync per step); a non-finite loss stops the run with the step where it first appeared, before
//! anything is saved. The models' own checks (finite inputs, a Cholesky factor that exists) are
//! deferred the same way: each step runs inside a [`health`] scope, so a failed check leaves NaN
//! in the step and its verdict on the device, and the same single read that brings the losses
//! back reports the first failure as [`Error::Step`] with its step and the model's typed error.
//! No host read happens inside a step ([`Trainer::host_reads`] counts them).
//!
//! Determinism: the data order of epoch e is a function of (seed, e); torch's generator is
//! reseeded from (seed, step) before every step; everything else is in the checkpoint. A run
//! resumed from any checkpoint therefore ends bit-identical (on the CPU) to an uninterrupted one.

use std::path::PathBuf;
use std::time::Instant;

use ono_data::dataset::{epoch_order, mix, Split};
use ono_data::normalizer::Normalizer;
use ono_kernels::{health, host};
use ono_models::{Model, Recompute};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::adamw::AdamW;
use crate::checkpoint::{Checkpoint, TrainState};
use crate::config::{BatchOrder, ReductionName, TrainConfig};
use crate::graphs::{InferenceGraphs, StepGraphs};
use crate::loss::LossSpec;
use crate::loss::RolloutErrors;
use crate::normalizers::Normalizers;
use crate::observer::EpochObserver;
use crate::one_cycle::OneCycle;
use crate::parallel::DataParallel;
use crate::progress::Progress;
use crate::regime::Regime;
use crate::run::RunSpec;
use crate::run_folder::{RunFolder, Slot};
use crate::scaler::LossScaler;
use crate::step::{micro_ranges, MicroBatch, PendingLoss, StepBatch, StepRunner};
use crate::{Error, Result};

mod epoch;
mod setup;

/// What a finished run reports: the JSON line `ono train` prints. The fields are in the order of
/// their JSON keys, sorted, as the line has always printed them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// (epoch, error) of the best epoch.
    pub best: Option<(u64, f64)>,
    /// The checkpoint that is the run's result: the last, or with `checkpoint.select_best` the
    /// best epoch's (whose test error `final_test` then reports).
    #[serde(rename = "checkpoint")]
    pub result_checkpoint: PathBuf,
    /// The last epoch's test errors.
    #[serde(rename = "final_test_rel_l2")]
    pub final_test: Option<f64>,
    /// What the step's graphs did (`graphs`; absent for plain steps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs: Option<crate::graphs::GraphStats>,
    /// Where the last checkpoint is.
    pub last_checkpoint: PathBuf,
    /// The step the run resumed at (0 for a fresh run).
    pub resumed_at: u64,
    /// Batches done.
    pub steps: u64,
}

/// Host reads of a run on its training thread, as [`ono_kernels::host`] counts them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HostReads {
    /// Reads inside optimizer steps: 0, the steps never wait for the device.
    pub in_steps: u64,
    /// Checks of the pending losses and deferred verdicts (logging intervals, epoch ends,
    /// checkpoints) that had something to read.
    pub checks: u64,
    /// Reads those checks made: one each.
    pub at_checks: u64,
}

/// A training run.
pub struct Trainer {
    pub(crate) cfg: TrainConfig,
    pub(crate) device: Device,
    pub(crate) kind: Kind,
    pub(crate) train: Split,
    pub(crate) test: Split,
    pub(crate) grid: Option<Vec<i64>>,
    /// The targets' grid: the query grid when the targets live on query points, else `grid`.
    pub(crate) target_grid: Option<Vec<i64>>,
    /// The test points' grid: `grid`, or the test split's own at another resolution.
    pub(crate) test_grid: Option<Vec<i64>>,
    pub(crate) normalizers: Normalizers,
    /// `normalizers` at the test points (the same unless the test split has a grid of its own).
    pub(crate) test_normalizers: Normalizers,
    pub(crate) model: Model,
    opt: AdamW,
    /// Float16's loss scaler.
    scaler: Option<LossScaler>,
    schedule: Option<OneCycle>,
    pub(crate) state: TrainState,
    pub(crate) folder: RunFolder,
    steps_per_epoch: u64,
    /// Time steps of the training targets (0 when steady).
    pub(crate) time_steps: i64,
    /// Time steps of the test targets: more than `time_steps` with `data.train_steps`.
    pub(crate) test_steps: i64,
    pub(crate) regime: Regime,
    loss: LossSpec,
    resumed_at: u64,
    /// Detached losses not yet read back.
    pending: Vec<PendingLoss>,
    /// The verdicts of the models' checks inside the steps, not yet read back.
    health: health::Monitor,
    /// A step ran since the last check.
    unchecked: bool,
    reads: HostReads,
    /// Told after every epoch ([`Trainer::set_observer`]).
    pub(crate) observer: Option<Box<dyn EpochObserver>>,
    /// Micro-batches per optimizer step over all processes.
    micro_batches: u64,
    /// Micro-batches per optimizer step in this process.
    accumulate: u64,
    /// The other processes of a data-parallel or point-sharded run.
    parallel: Option<DataParallel>,
    /// Point sharding (`parallel = "points"` in a launch of several processes): `train` and
    /// `test` hold this process's share of every sample's points, and these normalizers
    /// (training, test) its share of the pointwise statistics, which decode its outputs. The
    /// whole normalizers stay in `normalizers` for the checkpoints.
    pub(crate) point_norms: Option<(Normalizers, Normalizers)>,
    /// Said once when the run starts (how a resumed run keeps its micro-batches).
    notes: Vec<String>,
    /// The step's graphs (`graphs`), when the run captures or emulates them.
    pub(crate) graphs: Option<StepGraphs>,
    /// The evaluation's forward passes as graphs, alike.
    pub(crate) eval_graphs: Option<std::cell::RefCell<InferenceGraphs>>,
}

impl Trainer {
    /// Prepares a checked run ([`RunSpec::resolve`]): fits the normalizers on the training
    /// split, builds the model and optimizer, and — with `resume` — restores
    /// `checkpoints/last`, whose configuration must be the run's. Without `resume`, an output
    /// folder that already holds a checkpoint is refused.
    pub fn new(run: RunSpec, resume: bool) -> Result<Self> {
        Self::with_parallel(run, resume, None)
    }

    /// Whether this process logs and writes: a single process, or rank 0 of several.
    pub fn is_leader(&self) -> bool {
        self.parallel.as_ref().is_none_or(|p| p.rank() == 0)
    }

    /// The process group of a data-parallel run.
    pub fn parallel(&self) -> Option<&DataParallel> {
        self.parallel.as_ref()
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }

    /// The model.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The run state.
    pub fn state(&self) -> &TrainState {
        &self.state
    }

    /// The training split as the steps see it (inputs normalized, on the device; the targets
    /// raw, cut to `data.train_steps` time steps when set).
    pub fn train_split(&self) -> &Split {
        &self.train
    }

    /// The test split, prepared the same way.
    pub fn test_split(&self) -> &Split {
        &self.test
    }

    /// Batches per epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }

    /// Where the run writes.
    pub fn folder(&self) -> &RunFolder {
        &self.folder
    }

    /// Has `observer` told after every epoch, once the epoch's checkpoint and `metrics.jsonl`
    /// are written (replacing an earlier one). Without an observer a run writes no figures:
    /// `curves.png` and `panels.png` are drawn by the `ono` binary's observer (ono-plot), which
    /// keeps plotting and its font out of this crate.
    pub fn set_observer(&mut self, observer: impl EpochObserver + 'static) {
        self.observer = Some(Box::new(observer));
    }

    /// What the step's graphs did so far (`None`: plain steps, `graphs` off or not resolved to
    /// an engine).
    pub fn graph_stats(&self) -> Option<crate::graphs::GraphStats> {
        self.graphs.as_ref().map(StepGraphs::stats)
    }

    /// The host reads of the run so far, inside the steps and at the checks.
    pub fn host_reads(&self) -> HostReads {
        self.reads
    }

    /// Trains to the configured number of epochs.
    pub fn run(&mut self, progress: &Progress) -> Result<Summary> {
        // Rank 0 alone reports (and writes: `save`, the metrics, the observer).
        let progress = if self.is_leader() {
            progress
        } else {
            &Progress::Quiet
        };
        self.announce(progress)?;
        while self.state.epoch < self.cfg.epochs {
            let started = Instant::now();
            let seconds_before = self.state.epoch_seconds;
            let lr = self.train_epoch(progress, started, seconds_before)?;
            self.end_epoch(progress, lr, seconds_before, started)?;
        }
        progress.finish();
        Ok(self.summary())
    }

    /// Times training batches as [`Trainer::run`] trains them (one batch: one or, per time step,
    /// T optimizer steps): `warmup` untimed (at least 2 with graphs), then `timed` timed, all on
    /// the first epoch's first batch, the device synchronized around each. The model and optimizer move on as in
    /// training; nothing is written. Seconds per timed batch, in order.
    pub fn time_batches(&mut self, warmup: usize, timed: usize) -> Result<Vec<f64>> {
        let bs = self.cfg.batch_size as usize;
        let batches = epoch_batches(
            self.cfg.data.batch_order,
            self.train.len(),
            bs,
            self.cfg.seed,
            0,
        );
        let idx = batches
            .into_iter()
            .next()
            .ok_or_else(|| Error::Data("no training samples to time a batch on".into()))?;
        let on_device = Tensor::f_from_slice(&idx)?.f_to_device(self.train.fx.device())?;
        let mut times = Vec::with_capacity(timed);
        // With graphs the first batch records its steps and the second captures them: neither
        // is timed.
        let warmup = if self.graphs.is_some() {
            warmup.max(2)
        } else {
            warmup
        };
        for i in 0..warmup + timed {
            crate::bench_step::sync(self.device);
            let start = Instant::now();
            {
                let _deferred = self.health.enter(self.state.global_step);
                tch::with_grad(|| self.train_batch(&idx, &on_device))?;
            }
            self.unchecked = true;
            self.state.global_step += 1;
            crate::bench_step::sync(self.device);
            if i >= warmup {
                times.push(start.elapsed().as_secs_f64());
            }
        }
        self.flush_losses()?;
        Ok(times)
    }

    /// One batch (one or, per time step, T optimizer steps) of the samples `idx` (also given on
    /// the device). Returns the lr used.
    fn train_batch(&mut self, idx: &[i64], idx_on_device: &Tensor) -> Result<f64> {
        let step = self.state.global_step;
        let (lr, beta1) = match &self.schedule {
            Some(s) => {
                let v = s.at(step)?;
                (v.lr, v.beta1)
            }
            None => {
                let epoch = step / self.steps_per_epoch.max(1);
                let lr = self.cfg.epoch_lr(epoch).unwrap_or(self.cfg.optimizer.lr);
                (lr, None)
            }
        };
        self.opt.set_lr(lr);
        if let Some(b1) = beta1 {
            self.opt.set_beta1(b1);
        }
        tch::manual_seed(mix(self.cfg.seed, step.wrapping_add(1 << 40)) as i64);
        // The step's micro-batches: contiguous shares of its samples, this process's the
        // rank-th `accumulate` of them.
        let n = idx.len();
        let ranges = micro_ranges(n, self.micro_batches as usize);
        let k = self.accumulate as usize;
        // With split points every process trains every micro-batch (on its points).
        let rank = match (&self.parallel, &self.point_norms) {
            (Some(p), None) => p.rank(),
            _ => 0,
        };
        let shares: Vec<usize> = ranges
            .chunks(k)
            .map(|c| c.iter().filter(|r| !r.is_empty()).count())
            .collect();
        let weighted = self.micro_batches > 1 && self.loss.reduction == ReductionName::Mean;
        let micros = ranges
            .iter()
            .enumerate()
            .skip(rank * k)
            .take(k)
            .filter(|(_, r)| !r.is_empty())
            .map(|(j, r)| {
                let len = r.len() as i64;
                let on_device = idx_on_device.f_narrow(0, r.start as i64, len)?;
                Ok(MicroBatch {
                    batch: self.train.batch_at(
                        &idx[r.clone()],
                        &on_device,
                        self.device,
                        self.kind,
                    )?,
                    first: r.start as i64,
                    index: j as u64,
                    weight: weighted.then(|| r.len() as f64 / n as f64),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let step_batch = StepBatch {
            micros,
            samples: n as i64,
        };
        let forwards = match self.regime {
            Regime::Autoregressive => self.time_steps.max(1) as usize,
            _ => 1,
        };
        let (parallel, points) = match self.point_norms {
            Some(_) => (None, self.parallel.as_ref()),
            None => (self.parallel.as_ref(), None),
        };
        // A process's share of the points is no grid: the model and the loss get none (the
        // models and losses that need one are refused over split points).
        let (y_norm, grid, target_grid) = match &self.point_norms {
            Some((train, _)) => (&train.y, None, None),
            None => (
                &self.normalizers.y,
                self.grid.as_deref(),
                self.target_grid.as_deref(),
            ),
        };
        let mut runner = StepRunner {
            model: &self.model,
            opt: &mut self.opt,
            scaler: self.scaler.as_mut(),
            y_norm,
            grid,
            target_grid,
            clip: self.cfg.optimizer.max_grad_norm.filter(|&m| m > 0.0),
            loss: self.loss,
            // Auto is the model's choice in the steady regime; the others train plainly.
            recompute: match (self.cfg.recompute, self.regime) {
                (Recompute::Auto, Regime::Steady) => Recompute::Auto,
                (Recompute::Auto, _) => Recompute::None,
                (mode, _) => mode,
            },
            teacher_forcing: self.cfg.data.teacher_forcing,
            time_steps: self.time_steps,
            time_axis: self.test_steps,
            seed: self.cfg.seed,
            step,
            micro_batches: self.micro_batches,
            parallel,
            points,
            shares: &shares,
            forwards,
            capture: None,
            step_start: 0,
            pending: &mut self.pending,
            graphs: self.graphs.as_mut(),
            planned: None,
            last_plan: None,
            seeded: false,
        };
        let regime = self.regime;
        match points {
            Some(p) => {
                p.with_split_points(|| regime.ops().train_batch(&mut runner, &step_batch))?
            }
            None => regime.ops().train_batch(&mut runner, &step_batch)?,
        }
        Ok(lr)
    }

    /// Reads the pending losses and the deferred checks' verdicts back (one host read), stops at
    /// the earlier of the first non-finite loss and the first failed check (the check at the same
    /// step: it names the cause), and adds the losses to the epoch's sums.
    fn flush_losses(&mut self) -> Result<()> {
        if self.pending.is_empty() && !self.unchecked {
            return Ok(());
        }
        if self.parallel.is_some() {
            return self.flush_parallel();
        }
        let mut parts = self
            .pending
            .iter()
            .map(|p| p.loss.f_to_kind(Kind::Double)?.f_reshape([1]))
            .collect::<Result<Vec<_>, _>>()?;
        let losses = parts.len();
        if let Some(codes) = self.health.codes()? {
            let device = parts.first().map_or(codes.device(), Tensor::device);
            parts.push(codes.f_to_kind(Kind::Double)?.f_to_device(device)?);
        }
        self.unchecked = false;
        if parts.is_empty() {
            return Ok(());
        }
        let before = host::host_reads();
        let vals = host::to_vec_f64(&Tensor::f_cat(&parts, 0)?)?;
        self.reads.checks += 1;
        self.reads.at_checks += host::host_reads() - before;
        let (vals, codes) = vals.split_at(losses);
        // The codes are integers below 2^63 that f64 holds exactly (step · 64 + fault, or 2^62).
        let codes: Vec<i64> = codes.iter().map(|&c| c as i64).collect();
        let failure = self.health.failure(&codes);
        let bad_loss = vals.iter().zip(&self.pending).find(|(v, _)| !v.is_finite());
        let epoch = self.state.epoch;
        match (bad_loss, failure) {
            (Some((&value, p)), f) if f.as_ref().is_none_or(|f| p.step < f.step) => {
                return Err(Error::NonFiniteLoss {
                    step: p.step,
                    epoch,
                    value,
                })
            }
            (_, Some(f)) => {
                return Err(Error::Step {
                    step: f.step,
                    epoch,
                    source: Box::new(Error::deferred(f.error)),
                })
            }
            _ => {}
        }
        for (&v, p) in vals.iter().zip(&self.pending) {
            self.state.epoch_loss_sum += match self.loss.reduction {
                ReductionName::Sum => v,
                ReductionName::Mean => v * p.batch as f64,
            };
            self.state.epoch_samples += p.new_samples as u64;
        }
        self.pending.clear();
        Ok(())
    }

    /// [`flush_losses`](Self::flush_losses) in a data-parallel run, where every process makes it
    /// at the same points with one entry per step: the processes' rows (each step's loss in sum
    /// form and new samples, then the step of this process's earliest failed check) are gathered
    /// in one collective and one read, and every process draws the same conclusion: the epoch's
    /// sums over all processes, or the same error.
    fn flush_parallel(&mut self) -> Result<()> {
        let p = self.parallel.as_ref().expect("a data-parallel run");
        let opts = (Kind::Double, self.device);
        let mut parts = Vec::with_capacity(2 * self.pending.len() + 1);
        for e in &self.pending {
            parts.push(e.loss.f_to_kind(Kind::Double)?.f_reshape([1])?);
            parts.push(Tensor::f_full([1], e.new_samples as f64, opts)?);
        }
        let own_codes = self.health.codes()?;
        parts.push(match &own_codes {
            Some(c) => c
                .f_min()?
                .f_to_kind(Kind::Double)?
                .f_to_device(self.device)?
                .f_reshape([1])?,
            None => Tensor::f_full([1], health::NO_FAILURE as f64, opts)?,
        });
        let row = Tensor::f_cat(&parts, 0)?;
        let before = host::host_reads();
        let rows = p.gather_f64(&row)?;
        self.reads.checks += 1;
        self.reads.at_checks += host::host_reads() - before;
        self.unchecked = false;
        let len = parts.len();
        let world = rows.len() / len;
        // With split points every process holds the same losses: rank 0's are the run's.
        let holders = if self.point_norms.is_some() { 1 } else { world };
        let epoch = self.state.epoch;
        let mut sums = Vec::with_capacity(self.pending.len());
        let mut bad_loss = None;
        for (i, e) in self.pending.iter().enumerate() {
            let x: f64 = (0..holders).map(|r| rows[r * len + 2 * i]).sum();
            let n: f64 = (0..holders).map(|r| rows[r * len + 2 * i + 1]).sum();
            if !x.is_finite() && bad_loss.is_none() {
                bad_loss = Some((e.step, x));
            }
            sums.push((x, n as u64));
        }
        let failure = (0..world)
            .map(|r| (rows[r * len + len - 1], r))
            .filter(|&(c, _)| c < health::NO_FAILURE as f64)
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(c, r)| ((c as i64 / health::FAULT_CODES) as u64, r));
        match (bad_loss, failure) {
            (Some((step, value)), f) if f.is_none_or(|(fs, _)| step < fs) => {
                return Err(Error::NonFiniteLoss { step, epoch, value })
            }
            (_, Some((step, r))) if r == p.rank() => {
                let codes = match &own_codes {
                    Some(c) => host::to_vec_i64(c)?,
                    None => Vec::new(),
                };
                let source = match self.health.failure(&codes) {
                    Some(f) => Error::deferred(f.error),
                    None => Error::Parallel(format!("a check failed at step {step}")),
                };
                return Err(Error::Step {
                    step,
                    epoch,
                    source: Box::new(source),
                });
            }
            (_, Some((step, r))) => {
                return Err(Error::Step {
                    step,
                    epoch,
                    source: Box::new(Error::Parallel(format!(
                        "rank {r} failed a check in this step (its own log names it)"
                    ))),
                })
            }
            _ => {}
        }
        for (x, n) in sums {
            self.state.epoch_loss_sum += x;
            self.state.epoch_samples += n;
        }
        self.pending.clear();
        Ok(())
    }

    /// Mean relative L2 on the test split (decoded predictions against raw targets).
    pub fn evaluate_test(&self) -> Result<RolloutErrors> {
        let mut graphs = self.eval_graphs.as_ref().map(|g| g.borrow_mut());
        let run = |parallel: Option<&DataParallel>,
                   y_norm: &Normalizer,
                   grid: Option<&[i64]>,
                   graphs: Option<&mut InferenceGraphs>| {
            crate::evaluate::evaluate_shared(
                parallel,
                &self.model,
                y_norm,
                &self.test,
                self.regime,
                grid,
                // Samples per forward pass as in training: a model trained a micro-batch at a
                // time (samples of different sizes and no padding mask) is evaluated so too.
                (self.cfg.batch_size.max(1) as u64).div_ceil(self.micro_batches.max(1)) as i64,
                self.test_steps,
                graphs,
            )
        };
        match (&self.parallel, &self.point_norms) {
            // Every process evaluates every batch on its points; the errors are whole-sample.
            (Some(p), Some((_, test))) => p.with_split_points(|| run(None, &test.y, None, None)),
            _ => run(
                self.parallel.as_ref(),
                &self.test_normalizers.y,
                self.test_grid.as_deref(),
                graphs.as_deref_mut(),
            ),
        }
    }

    fn save(&mut self, slot: Slot) -> Result<PathBuf> {
        // Never write a checkpoint over unread (possibly non-finite) losses. In a data-parallel
        // run every process flushes (a collective), and rank 0 alone writes.
        self.flush_losses()?;
        let path = self.folder.checkpoint(slot);
        if !self.is_leader() {
            return Ok(path);
        }
        let (opt_tensors, opt_state) = self.opt.state("optim.")?;
        self.state.optimizer = opt_state;
        let mut tensors: std::collections::BTreeMap<String, Tensor> = self
            .model
            .var_store()
            .variables()
            .into_iter()
            .map(|(k, v)| (format!("model.{k}"), v))
            .collect();
        tensors.extend(opt_tensors);
        if let Some(s) = &self.scaler {
            tensors.extend(s.tensors("scaler.")?);
        }
        tensors.extend(self.normalizers.tensors());
        Checkpoint {
            tensors,
            state: self.state.clone(),
        }
        .save(&path)?;
        Ok(path)
    }
}

/// The batches of one epoch: a fresh permutation of (seed, epoch) cut into batches; or GNOT's
/// `MIODataLoader` order, contiguous chunks of `bs` indices whose order is permuted once (by the
/// seed) and then repeated in every epoch.
fn epoch_batches(order: BatchOrder, n: i64, bs: usize, seed: u64, epoch: u64) -> Vec<Vec<i64>> {
    match order {
        BatchOrder::Shuffled => epoch_order(n, seed, epoch)
            .chunks(bs)
            .map(<[i64]>::to_vec)
            .collect(),
        BatchOrder::FixedChunks => {
            let chunks: Vec<Vec<i64>> = (0..n)
                .collect::<Vec<_>>()
                .chunks(bs)
                .map(<[i64]>::to_vec)
                .collect();
            let k = chunks.len() as i64;
            epoch_order(k, seed, u64::MAX)
                .into_iter()
                .map(|c| chunks[c as usize].clone())
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GNOT's loader: the same contiguous chunks in the same order every epoch, the partial
    /// chunk kept whole; the default: every index once per epoch, another order each epoch.
    #[test]
    fn batch_orders() {
        let a = epoch_batches(BatchOrder::FixedChunks, 10, 4, 7, 0);
        assert_eq!(a, epoch_batches(BatchOrder::FixedChunks, 10, 4, 7, 5));
        let mut sorted = a.clone();
        sorted.sort();
        assert_eq!(sorted, vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7], vec![8, 9]]);
        let s0 = epoch_batches(BatchOrder::Shuffled, 10, 4, 7, 0);
        let s1 = epoch_batches(BatchOrder::Shuffled, 10, 4, 7, 1);
        assert_ne!(s0, s1);
        let mut all: Vec<i64> = s0.concat();
        all.sort();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
    }
}
