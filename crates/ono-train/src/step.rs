//! One optimizer step: the loss ([`LossSpec`](crate::loss::LossSpec)) on decoded outputs, the
//! model's forward-and-backward hook once per micro-batch (gradients accumulating), in a data-parallel run
//! the gradients summed over the processes, then clipping and AdamW (under float16, with the loss
//! scaled and steps with overflowing gradients skipped); the losses stay on the device until the
//! epoch loop reads a batch of them back.

use ono_data::dataset::{mix, Batch};
use ono_data::normalizer::Normalizer;
use ono_kernels::ema;
use ono_models::{LossError, Model, ModelInput};
use tch::Tensor;

use crate::adamw::{AdamW, PlanShape, StepPlan};
use crate::config::{LossKind, ReductionName};
use crate::decoder::Decoder;
use crate::graphs::{StepBody, StepGraphs};
use crate::loss::{LossSpec, Target};
use crate::parallel::DataParallel;
use crate::scaler::LossScaler;
use crate::Result;

/// A loss not yet read back to the host.
pub(crate) struct PendingLoss {
    pub loss: Tensor,
    pub step: u64,
    /// The batch size (a mean-reduced loss is scaled back to a sum with it).
    pub batch: i64,
    /// Samples this loss adds to the epoch's count (0 for the 2nd.. time step of a batch).
    pub new_samples: i64,
}

/// One micro-batch of an optimizer step ([`TrainConfig::accumulate_steps`]).
///
/// [`TrainConfig::accumulate_steps`]: crate::config::TrainConfig::accumulate_steps
pub(crate) struct MicroBatch {
    pub batch: Batch,
    /// Its first sample's position in the step's batch.
    pub first: i64,
    /// Its index among the step's micro-batches (over all processes), which seeds its
    /// randomness.
    pub index: u64,
    /// The factor of its loss in the step's: its share of the step's samples for a mean-reduced
    /// loss; `None` (1) for a summed loss or a step of one micro-batch, whose loss is the step's.
    pub weight: Option<f64>,
}

/// The micro-batches of one optimizer step that this process trains.
pub(crate) struct StepBatch {
    /// This process's micro-batches, in step order (none when the step's batch is smaller than
    /// the micro-batches and this process's share is empty).
    pub micros: Vec<MicroBatch>,
    /// Samples in the whole step's batch, over all micro-batches and processes.
    pub samples: i64,
}

/// The contiguous ranges `[start, end)` of a batch of `n` samples cut into `m` micro-batches:
/// the first `n mod m` one sample longer than the rest, empty ones last when `n < m`.
pub(crate) fn micro_ranges(n: usize, m: usize) -> Vec<std::ops::Range<usize>> {
    let m = m.max(1);
    let (base, extra) = (n / m, n % m);
    let mut start = 0;
    (0..m)
        .map(|j| {
            let len = base + usize::from(j < extra);
            start += len;
            start - len..start
        })
        .collect()
}

/// Everything one training batch needs, borrowed from the trainer.
pub(crate) struct StepRunner<'a> {
    pub model: &'a Model,
    pub opt: &'a mut AdamW,
    /// The loss scaler of float16 training.
    pub scaler: Option<&'a mut LossScaler>,
    pub y_norm: &'a Normalizer,
    pub grid: Option<&'a [i64]>,
    /// The targets' grid (the query's when there is one).
    pub target_grid: Option<&'a [i64]>,
    pub clip: Option<f64>,
    pub loss: LossSpec,
    pub recompute: ono_models::Recompute,
    pub teacher_forcing: bool,
    /// Time steps of the batch's targets.
    pub time_steps: i64,
    /// T of the time values linspace(0, 1, T) (the test targets' steps: more than
    /// `time_steps` when training sees only the first steps).
    pub time_axis: i64,
    pub seed: u64,
    /// The global step of this batch.
    pub step: u64,
    /// Micro-batches per optimizer step over all processes.
    pub micro_batches: u64,
    /// The other processes of a data-parallel run.
    pub parallel: Option<&'a DataParallel>,
    /// The processes holding the other shares of the points (`parallel = "points"`): every
    /// process trains every micro-batch on its share, inside `ono_kernels::points::scope`.
    pub points: Option<&'a DataParallel>,
    /// Per process, its micro-batches with samples in this step.
    pub shares: &'a [usize],
    /// Training forwards per micro-batch and optimizer step (a rollout's frames, else 1).
    pub forwards: usize,
    /// This step's EMA updates, recorded for the processes to fold alike (data parallel only).
    pub capture: Option<ema::Capture>,
    /// `pending`'s length when the step began (a data-parallel step merges its losses).
    pub step_start: usize,
    pub pending: &'a mut Vec<PendingLoss>,
    /// The run's graphs (`graphs` on or emulated): [`optimizer_step`](Self::optimizer_step)
    /// runs its body through them.
    pub graphs: Option<&'a mut StepGraphs>,
    /// The optimizer's host half of this step, made before it (a captured step's): finish_step
    /// applies it instead of planning.
    pub planned: Option<StepPlan>,
    /// The parameters with gradients and the plan's shape of the last finished step (what the
    /// graphs record).
    pub last_plan: Option<(Vec<Vec<bool>>, PlanShape)>,
    /// This step's one micro-batch was seeded before the step
    /// ([`optimizer_step`](Self::optimizer_step)).
    pub seeded: bool,
}

impl StepRunner<'_> {
    pub fn decoder(&self) -> Decoder<'_> {
        Decoder {
            model: self.model,
            y_norm: self.y_norm,
            grid: self.grid,
        }
    }

    /// One optimizer step of `batch` (and the regime's `extras`, tensors the step reads) through
    /// `body`, which begins the step, trains its micro-batches and finishes it: plainly, or
    /// through the run's graphs (`graphs.rs`). `(variant, pass)`: `variant` tells apart steps of
    /// the same shapes whose host code differs (the per-time-step regime's first time step
    /// counts its samples); `pass` is the forward pass of the batch the step is (a time step's
    /// index, else 0), which seeds its micro-batches' randomness. Everything `body` reads that
    /// changes from step to step must come from `batch`, `extras` or the runner's device state,
    /// not from the caller's host values.
    ///
    /// A process that trains one micro-batch of a step of several (a data-parallel process)
    /// seeds torch's generator for it here, before the step, rather than in
    /// [`begin_micro`](Self::begin_micro): the same seed, set before the step's kernels, where a
    /// graph's replay reads it.
    pub fn optimizer_step(
        &mut self,
        batch: &StepBatch,
        extras: &[Tensor],
        (variant, pass): (u64, u64),
        body: &mut StepBody<'_>,
    ) -> Result<()> {
        self.seeded = false;
        if let [m] = batch.micros.as_slice() {
            self.begin_micro(m, pass);
            self.seeded = self.micro_batches > 1;
        }
        match self.graphs.take() {
            None => body(self, batch, extras),
            Some(g) => {
                let r = g.run(self, batch, extras, (variant, pass), body);
                self.graphs = Some(g);
                r
            }
        }
    }

    /// Starts an optimizer step: gradients to zero and, in a data-parallel run, the model's EMA
    /// updates recorded rather than folded.
    pub fn begin_step(&mut self) -> Result<()> {
        self.opt.zero_grad();
        self.step_start = self.pending.len();
        if self.parallel.is_some() && !self.model.ema_statistics().is_empty() {
            self.capture = Some(ema::capture()?);
        }
        Ok(())
    }

    /// Before micro-batch `m`'s `pass`-th forward (per-time-step training makes T of them): a
    /// step of several micro-batches seeds torch's generator from (step seed, pass, micro-batch)
    /// so that each micro-batch draws the same numbers in whichever process trains it; a step of
    /// one keeps the step's seed (the trainer's) running on, as before there were micro-batches.
    pub fn begin_micro(&self, m: &MicroBatch, pass: u64) {
        if self.micro_batches > 1 && !self.seeded {
            let base = mix(self.seed, self.step.wrapping_add(1 << 40));
            tch::manual_seed(mix(base, pass * self.micro_batches + m.index) as i64);
        }
    }

    /// Adds one forward pass's gradients, through the model's forward-and-backward hook
    /// (activation recomputation when configured), its loss scaled by `weight`. The queued loss
    /// is the unweighted one divided by `report_div` (per-time-step losses are reported per
    /// step).
    pub fn accumulate(
        &mut self,
        input: &ModelInput<'_>,
        target: &Target<'_>,
        weight: Option<f64>,
        new_samples: i64,
        report_div: i64,
    ) -> Result<()> {
        self.accumulate_as(input, target, weight, new_samples, report_div, &|o| {
            Ok(o.shallow_clone())
        })
    }

    /// [`accumulate`](Self::accumulate) with the model's output brought into the target's
    /// layout by `layout` before it is decoded (the space-time regime).
    pub fn accumulate_as(
        &mut self,
        input: &ModelInput<'_>,
        target: &Target<'_>,
        weight: Option<f64>,
        new_samples: i64,
        report_div: i64,
        layout: &dyn Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        let (y_norm, grid, spec) = (self.y_norm, self.target_grid, self.loss);
        let optimized_weight = self.point_weight(weight);
        // GNOT's loss compares normalized values: the target is encoded instead of the output
        // decoded.
        let encoded = match spec.kind {
            LossKind::Gnot => Some(y_norm.encode(target.y)?),
            _ => None,
        };
        let scaler = self.scaler.as_deref();
        let mut loss_of = |out: &Tensor| -> std::result::Result<Tensor, LossError> {
            let out = layout(out)?;
            let loss = match &encoded {
                Some(y) => spec.of(&out, &Target { y, ..*target }, grid)?,
                None => {
                    let pred = y_norm.decode(&out).map_err(crate::Error::from)?;
                    spec.of(&pred, target, grid)?
                }
            };
            let loss = match optimized_weight {
                Some(w) => loss.f_mul_scalar(w)?,
                None => loss,
            };
            Ok(match scaler {
                Some(s) => s.scale(&loss)?,
                None => loss,
            })
        };
        let loss = self
            .model
            .forward_backward(input, &mut loss_of, self.recompute)?;
        let loss = match self.scaler.as_deref() {
            Some(s) => s.unscale_value(&loss)?,
            None => loss,
        };
        let div = optimized_weight.unwrap_or(1.0) * report_div as f64;
        let loss = if div != 1.0 {
            loss.f_div_scalar(div)?
        } else {
            loss
        };
        self.queue(loss, target.y.size()[0], new_samples);
        Ok(())
    }

    /// Adds the gradients of a Σ_b loss computed by the caller (the rollout), reduced and scaled
    /// by `weight`. Logs `reported` (a Σ_b loss too, reduced alike) instead of the optimized
    /// loss where given: a weighted rollout reports its plain Σ over frames.
    pub fn accumulate_sum(
        &mut self,
        sum: Tensor,
        reported: Option<Tensor>,
        b: i64,
        weight: Option<f64>,
    ) -> Result<()> {
        let loss = self.loss.reduce(sum, b)?;
        let optimized = match self.point_weight(weight) {
            Some(w) => loss.f_mul_scalar(w)?,
            None => loss.shallow_clone(),
        };
        match self.scaler.as_deref() {
            Some(s) => s.scale(&optimized)?.f_backward()?,
            None => optimized.f_backward()?,
        }
        let report = match reported {
            Some(r) => self.loss.reduce(r, b)?.f_detach()?,
            None => loss.f_detach()?,
        };
        self.queue(report, b, b);
        Ok(())
    }

    /// Ends an optimizer step: in a data-parallel run the gradients summed over the processes
    /// and the recorded EMA updates folded in step order; then clipping (on the global norm)
    /// and AdamW (through the loss scaler when there is one).
    pub fn finish_step(&mut self) -> Result<()> {
        let mut grads = self.opt.gather_grads()?;
        if let Some(p) = self.points {
            // Every process holds the whole loss; each one's gradients are its points' share.
            self.merge_step_losses()?;
            p.sum_gradients(self.opt, &mut grads)?;
        }
        if let Some(p) = self.parallel {
            self.merge_step_losses()?;
            p.sum_gradients(self.opt, &mut grads)?;
            let records = self.capture.take().map(ema::Capture::finish);
            p.fold_statistics(
                self.model,
                records.unwrap_or_default(),
                self.shares,
                self.forwards,
            )?;
        }
        let plan = match self.planned.take() {
            Some(p) => p,
            None => self.opt.plan(&grads, self.scaler.is_some())?,
        };
        self.last_plan = Some((grads.present().to_vec(), plan.shape()));
        match self.scaler.as_deref_mut() {
            Some(s) => s.step_planned(self.opt, &plan, grads, self.clip),
            None => {
                if let Some(m) = self.clip {
                    let _ = grads.clip_norm_(m)?;
                }
                self.opt.apply(&plan, &grads, None)
            }
        }
    }

    /// The factor of a micro-batch's optimized loss: `weight`, and with the points split over
    /// P processes 1/P, since every process back-propagates the whole loss and the gradients
    /// are summed over them (the contract of `ono_kernels::points`).
    fn point_weight(&self, weight: Option<f64>) -> Option<f64> {
        match self.points {
            Some(p) if p.world() > 1 => Some(weight.unwrap_or(1.0) / p.world() as f64),
            _ => weight,
        }
    }

    /// A data-parallel step's losses as one entry, whatever this process's share of the step
    /// (none at all included): the loss in sum form (Σ over its samples, a mean-reduced loss
    /// multiplied back by its batch) in float64, with `batch` 1 and its new samples, so that
    /// every process queues as many entries as there are steps and the trainer can sum them
    /// over the processes entry by entry.
    fn merge_step_losses(&mut self) -> Result<()> {
        let mine: Vec<PendingLoss> = self.pending.drain(self.step_start..).collect();
        let mut sum = Tensor::f_zeros([], (tch::Kind::Double, self.opt_device()))?;
        let mut new_samples = 0;
        for p in &mine {
            let v = p.loss.f_to_kind(tch::Kind::Double)?;
            let v = match self.loss.reduction {
                ReductionName::Sum => v,
                ReductionName::Mean => v.f_mul_scalar(p.batch as f64)?,
            };
            sum = sum.f_add(&v.f_reshape([])?)?;
            new_samples += p.new_samples;
        }
        self.pending.push(PendingLoss {
            loss: sum,
            step: self.step,
            batch: 1,
            new_samples,
        });
        Ok(())
    }

    fn opt_device(&self) -> tch::Device {
        self.model.device()
    }

    fn queue(&mut self, loss: Tensor, batch: i64, new_samples: i64) {
        self.pending.push(PendingLoss {
            loss,
            step: self.step,
            batch,
            new_samples,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::micro_ranges;

    /// Contiguous, covering, in order; the first `n mod m` one longer; empty ones last.
    #[test]
    fn micro_batches_cut_a_batch_evenly_and_in_order() {
        assert_eq!(micro_ranges(10, 1), vec![0..10]);
        assert_eq!(micro_ranges(10, 4), vec![0..3, 3..6, 6..8, 8..10]);
        assert_eq!(micro_ranges(2, 4), vec![0..1, 1..2, 2..2, 2..2]);
        for n in 0..20 {
            for m in 1..7 {
                let r = micro_ranges(n, m);
                assert_eq!(r.len(), m);
                assert_eq!(r.first().unwrap().start, 0);
                assert_eq!(r.last().unwrap().end, n);
                assert!(r.windows(2).all(|w| w[0].end == w[1].start));
                let lens: Vec<usize> = r.iter().map(|x| x.len()).collect();
                assert!(lens.windows(2).all(|w| w[0] >= w[1] && w[0] - w[1] <= 1));
            }
        }
    }
}
