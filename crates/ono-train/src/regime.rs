//! How samples are fed to a model: the three regimes of the reference scripts. Each is one
//! implementation of [`RegimeOps`]; [`Regime::ops`] is the one place a regime is dispatched on.

use ono_data::dataset::mix;
use ono_models::ModelInput;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::config::RolloutLoss;
use crate::decoder::{Decoder, Points};
use crate::loss::Target;
use crate::loss::{self, MetricSum};
use crate::step::{StepBatch, StepRunner};
use crate::{Error, Result};

/// How samples are fed to a model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Regime {
    /// Input function → solution, one forward per batch.
    #[default]
    Steady,
    /// NS2d: the last `t_in` frames in, one frame out, a sliding window over the targets' time
    /// axis; teacher forcing in training (or free-running), free rollout in evaluation.
    Autoregressive,
    /// Plasticity: one forward, backward and optimizer step per time step, in an order shuffled
    /// independently per sample; the schedule steps once per batch.
    PerTimeStep,
    /// FNO-3D (`fourier_3d.py` on NS2d, Geo-FNO's `plasticity_3d.py`): time is a third grid
    /// axis. The input function is repeated along it, the model maps the whole space-time
    /// volume in one forward, and the loss is the relative L2 of each sample's whole trajectory.
    SpaceTime,
}

impl Regime {
    /// The regime's behaviour.
    pub(crate) fn ops(self) -> &'static dyn RegimeOps {
        match self {
            Regime::Steady => &Steady,
            Regime::Autoregressive => &Autoregressive,
            Regime::PerTimeStep => &PerTimeStep,
            Regime::SpaceTime => &SpaceTime,
        }
    }

    /// Whether targets carry a time axis, (S, N, C, T).
    pub fn is_time_series(self) -> bool {
        self != Regime::Steady
    }

    /// Whether the model takes a time value per sample.
    pub fn time_input(self) -> bool {
        self == Regime::PerTimeStep
    }
}

/// What differs between regimes: one training batch, and predictions in evaluation mode.
pub(crate) trait RegimeOps: Sync {
    /// Trains on one batch: one optimizer step (or, per time step, T of them) through `runner`,
    /// each accumulating the gradients of this process's micro-batches of the step.
    fn train_batch(&self, runner: &mut StepRunner<'_>, step: &StepBatch) -> Result<()>;

    /// Predictions in evaluation mode for normalized inputs, decoded. Steady: (B, N, C), or
    /// (B, M, C) at the query points; time series: (B, N, C, T) for `steps` steps.
    fn predict(&self, d: Decoder<'_>, points: &Points<'_>, steps: i64) -> Result<Tensor>;

    /// Adds a batch's errors to `sum`.
    /// `mask`: the real points of a ragged batch (steady regime only).
    fn score(
        &self,
        sum: &mut MetricSum,
        pred: &Tensor,
        truth: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<()> {
        if mask.is_some() {
            return Err(Error::Data(
                "samples of different sizes need the steady regime".into(),
            ));
        }
        sum.add_rollout(pred, truth)
    }
}

struct Steady;

impl RegimeOps for Steady {
    fn train_batch(&self, runner: &mut StepRunner<'_>, step: &StepBatch) -> Result<()> {
        runner.optimizer_step(step, &[], (0, 0), &mut |runner, step, _| {
            runner.begin_step()?;
            for m in &step.micros {
                let batch = &m.batch;
                let b = batch.fx.size()[0];
                let target = Target {
                    y: &batch.y,
                    aux: batch.aux.as_ref(),
                    mask: batch.mask.as_ref(),
                };
                let grid = runner.grid;
                runner.begin_micro(m, 0);
                Points::of(batch).with_input(grid, None, |input| {
                    runner.accumulate(input, &target, m.weight, b, 1)
                })?;
            }
            runner.finish_step()
        })
    }

    fn predict(&self, d: Decoder<'_>, points: &Points<'_>, _steps: i64) -> Result<Tensor> {
        d.forward(points, None, false)
    }

    fn score(
        &self,
        sum: &mut MetricSum,
        pred: &Tensor,
        truth: &Tensor,
        mask: Option<&Tensor>,
    ) -> Result<()> {
        sum.add(pred, truth, mask)
    }
}

struct Autoregressive;

impl RegimeOps for Autoregressive {
    fn train_batch(&self, runner: &mut StepRunner<'_>, step: &StepBatch) -> Result<()> {
        runner.optimizer_step(step, &[], (0, 0), &mut |runner, step, _| {
            runner.begin_step()?;
            for m in &step.micros {
                let batch = &m.batch;
                runner.begin_micro(m, 0);
                let d = runner.decoder();
                let teacher = runner.teacher_forcing;
                let mut losses = FrameLosses::new(runner.loss.rollout);
                rollout(
                    d,
                    &batch.pos,
                    &batch.fx,
                    runner.time_steps,
                    Some((&batch.y, teacher, &mut losses)),
                    true,
                )?;
                let (optimized, reported) = losses.finish()?;
                let b = batch.fx.size()[0];
                runner.accumulate_sum(optimized, reported, b, m.weight)?;
            }
            runner.finish_step()
        })
    }

    fn predict(&self, d: Decoder<'_>, points: &Points<'_>, steps: i64) -> Result<Tensor> {
        points.steady_only()?;
        let frames = rollout(d, points.pos, points.fx, steps, None, false)?;
        Ok(Tensor::f_stack(&frames, -1)?)
    }
}

struct PerTimeStep;

impl RegimeOps for PerTimeStep {
    fn train_batch(&self, runner: &mut StepRunner<'_>, step: &StepBatch) -> Result<()> {
        // An independent permutation of the time steps per sample (the reference collate),
        // drawn for the whole step's batch so that a sample's order does not depend on which
        // micro-batch or process trains it.
        let (t, n) = (runner.time_steps, step.samples);
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(
            runner.seed,
            runner.step.wrapping_add(1 << 41),
        ));
        let perms: Vec<i64> = (0..n)
            .flat_map(|_| {
                let mut p: Vec<i64> = (0..t).collect();
                p.shuffle(&mut rng);
                p
            })
            .collect();
        let Some(first) = step.micros.first() else {
            // No samples here this step: its T optimizer steps still run (and meet the other
            // processes' collectives) with no gradient of their own.
            for _ in 0..t {
                runner.begin_step()?;
                runner.finish_step()?;
            }
            return Ok(());
        };
        let device = first.batch.fx.device();
        let perms = Tensor::from_slice(&perms)
            .f_view([n, t])?
            .f_to_device(device)?;
        let kind = first.batch.fx.kind();
        for k in 0..t {
            // Each sample's time step is the step's input (its graph reads it); whether the
            // samples are counted (at the first time step) is host code: a variant.
            let ks = perms.f_select(1, k)?;
            let counted = k == 0;
            let variant = (u64::from(counted), k as u64);
            runner.optimizer_step(step, &[ks], variant, &mut |runner, step, ks| {
                // The first t of the time values evaluation uses, so that a step means the same
                // time when training sees only the first steps (data.train_steps).
                let times = time_grid(runner.time_axis.max(t), kind, device)?.f_narrow(0, 0, t)?;
                runner.begin_step()?;
                for m in &step.micros {
                    let batch = &m.batch;
                    let b = batch.fx.size()[0];
                    let (n, c) = (batch.y.size()[1], batch.y.size()[2]);
                    let tk = ks[0].f_narrow(0, m.first, b)?;
                    let t_in = times.f_index_select(0, &tk)?.f_reshape([b, 1])?;
                    let gather = tk.f_view([b, 1, 1, 1])?.f_expand([b, n, c, 1], false)?;
                    let target = batch.y.f_gather(3, &gather, false)?.f_squeeze_dim(3)?;
                    let input = ModelInput::new(&batch.pos, &batch.fx)
                        .with_time(Some(&t_in))
                        .with_grid(runner.grid);
                    // Reported per sample and time step; the first step of a batch counts its
                    // samples.
                    let target = Target::plain(&target);
                    runner.begin_micro(m, k as u64);
                    let new = if counted { b } else { 0 };
                    runner.accumulate(&input, &target, m.weight, new, t)?;
                }
                runner.finish_step()
            })?;
        }
        Ok(())
    }

    fn predict(&self, d: Decoder<'_>, points: &Points<'_>, steps: i64) -> Result<Tensor> {
        points.steady_only()?;
        let (pos, fx) = (points.pos, points.fx);
        let b = fx.size()[0];
        let times = time_grid(steps, fx.kind(), fx.device())?;
        let preds = (0..steps)
            .map(|k| {
                let t = times
                    .f_narrow(0, k, 1)?
                    .f_expand([b], false)?
                    .f_reshape([b, 1])?;
                d.forward(&Points::plain(pos, fx), Some(&t), false)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Tensor::f_stack(&preds, -1)?)
    }
}

struct SpaceTime;

/// The inputs of a space-time forward: positions with the time value appended, the input function
/// repeated over the `steps` time points (time the last, fastest axis), the grid with a time axis.
///
/// # Shapes
/// - `pos`: (B, N, d), `fx`: (B, N, C)
/// - returns: (B, N·T, d + 1), (B, N·T, C), [grid…, T]
fn space_time(
    pos: &Tensor,
    fx: &Tensor,
    steps: i64,
    grid: Option<&[i64]>,
) -> Result<(Tensor, Tensor, Vec<i64>)> {
    let (b, n, d, c) = (pos.size()[0], pos.size()[1], pos.size()[2], fx.size()[2]);
    let grid = grid.ok_or_else(|| {
        Error::Data("the space_time regime needs data on a grid (the dataset names none)".into())
    })?;
    let times = time_grid(steps, pos.kind(), pos.device())?
        .f_view([1, 1, steps, 1])?
        .f_expand([b, n, steps, 1], false)?;
    let pos = Tensor::f_cat(
        &[
            pos.f_unsqueeze(2)?.f_expand([b, n, steps, d], false)?,
            times,
        ],
        -1,
    )?
    .f_reshape([b, n * steps, d + 1])?;
    let fx = fx
        .f_unsqueeze(2)?
        .f_expand([b, n, steps, c], false)?
        .f_reshape([b, n * steps, c])?;
    let mut g = grid.to_vec();
    g.push(steps);
    Ok((pos, fx, g))
}

/// (B, N·T, C) → (B, N, C, T).
fn from_space_time(out: &Tensor, steps: i64) -> Result<Tensor> {
    let (b, nt, c) = (out.size()[0], out.size()[1], out.size()[2]);
    Ok(out
        .f_reshape([b, nt / steps, steps, c])?
        .f_permute([0, 1, 3, 2])?)
}

impl RegimeOps for SpaceTime {
    fn train_batch(&self, runner: &mut StepRunner<'_>, step: &StepBatch) -> Result<()> {
        runner.optimizer_step(step, &[], (0, 0), &mut |runner, step, _| {
            runner.begin_step()?;
            for m in &step.micros {
                let batch = &m.batch;
                let steps = runner.time_steps;
                let (pos, fx, grid) = space_time(&batch.pos, &batch.fx, steps, runner.grid)?;
                let input = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
                let b = batch.fx.size()[0];
                let layout = move |out: &Tensor| from_space_time(out, steps);
                runner.begin_micro(m, 0);
                runner.accumulate_as(&input, &Target::plain(&batch.y), m.weight, b, 1, &layout)?;
            }
            runner.finish_step()
        })
    }

    fn predict(&self, d: Decoder<'_>, points: &Points<'_>, steps: i64) -> Result<Tensor> {
        points.steady_only()?;
        let (pos, fx, grid) = space_time(points.pos, points.fx, steps, d.grid)?;
        let input = ModelInput::new(&pos, &fx).with_grid(Some(&grid));
        let out = from_space_time(&d.model.forward(&input, false)?, steps)?;
        Ok(d.y_norm.decode(&out)?)
    }
}

/// The training loss of a rollout, frame by frame: the plain Σ of the frames' losses and the
/// one `loss.rollout` optimizes.
struct FrameLosses {
    weighting: RolloutLoss,
    plain: Option<Tensor>,
    weighted: Option<Tensor>,
}

impl FrameLosses {
    fn new(weighting: RolloutLoss) -> Self {
        Self {
            weighting,
            plain: None,
            weighted: None,
        }
    }

    fn add(&mut self, l: Tensor) -> Result<()> {
        let plain = match self.plain.take() {
            Some(p) => p.f_add(&l)?,
            None => l,
        };
        if self.weighting == RolloutLoss::Cumulative {
            self.weighted = Some(match self.weighted.take() {
                Some(w) => w.f_add(&plain)?,
                None => plain.shallow_clone(),
            });
        }
        self.plain = Some(plain);
        Ok(())
    }

    /// (the optimized loss, the plain Σ over frames to report where that is another one).
    fn finish(self) -> Result<(Tensor, Option<Tensor>)> {
        let plain = self
            .plain
            .ok_or_else(|| Error::Data("a rollout of zero steps".into()))?;
        Ok(match self.weighted {
            Some(w) => (w, Some(plain)),
            None => (plain, None),
        })
    }
}

/// Rollout: `steps` frames, each appended to the sliding window `fx` (teacher forcing from
/// `truth` when given, each frame's Σ_b relL2 added to its `FrameLosses`). Returns the frames,
/// each (B, N, C). The autoregressive regime uses no normalizer, so outputs are fed back as
/// they are.
fn rollout(
    d: Decoder<'_>,
    pos: &Tensor,
    fx: &Tensor,
    steps: i64,
    mut truth: Option<(&Tensor, bool, &mut FrameLosses)>,
    train: bool,
) -> Result<Vec<Tensor>> {
    let mut window = fx.shallow_clone();
    let mut frames = Vec::with_capacity(steps as usize);
    for t in 0..steps {
        let input = ModelInput::new(pos, &window).with_grid(d.grid);
        let pred = d.model.forward(&input, train)?;
        let c = pred.size()[2];
        let next = match &mut truth {
            Some((y, teacher, losses)) => {
                let yt = y.f_select(-1, t)?;
                losses.add(loss::relative_l2(&pred, &yt, loss::Reduction::Sum, None)?)?;
                if *teacher {
                    yt
                } else {
                    pred.shallow_clone()
                }
            }
            None => pred.shallow_clone(),
        };
        let keep = window.size()[2] - c;
        window = Tensor::f_cat(&[window.f_narrow(2, c, keep)?, next], 2)?;
        frames.push(pred);
    }
    Ok(frames)
}

/// t = linspace(0, 1, T), the time values of a per-time-step model.
fn time_grid(steps: i64, kind: Kind, device: Device) -> Result<Tensor> {
    Ok(Tensor::f_linspace(0.0, 1.0, steps, (kind, device))?)
}

#[cfg(test)]
mod frame_loss_tests {
    use super::*;

    /// Frames with losses l = (1, 2, 4, 0.5): `sum` optimizes Σ l = 7.5; `cumulative`
    /// optimizes Σ_k (T − k) l_k = 4 + 6 + 8 + 0.5 = 18.5 (`time_gen.py`'s running sum), and
    /// its gradient weighs frame k by T − k; both report the plain 7.5.
    #[test]
    fn cumulative_weighs_frame_k_by_the_frames_left() {
        let l = [1.0, 2.0, 4.0, 0.5];
        for (weighting, want, grads) in [
            (RolloutLoss::Sum, 7.5, [1.0, 1.0, 1.0, 1.0]),
            (RolloutLoss::Cumulative, 18.5, [4.0, 3.0, 2.0, 1.0]),
        ] {
            let x = Tensor::from_slice(&l).set_requires_grad(true);
            let mut losses = FrameLosses::new(weighting);
            for k in 0..4 {
                losses.add(x.get(k)).unwrap();
            }
            let (optimized, reported) = losses.finish().unwrap();
            assert_eq!(optimized.double_value(&[]), want, "{weighting:?}");
            let plain = reported.as_ref().unwrap_or(&optimized);
            assert_eq!(plain.double_value(&[]), 7.5, "{weighting:?}");
            assert_eq!(reported.is_some(), weighting == RolloutLoss::Cumulative);
            optimized.backward();
            assert_eq!(
                Vec::<f64>::try_from(x.grad()).unwrap(),
                grads,
                "{weighting:?}"
            );
        }
        assert!(FrameLosses::new(RolloutLoss::Sum).finish().is_err());
    }
}

#[cfg(test)]
mod space_time_tests {
    use super::*;

    /// Point n at time t is grid cell (…, t) with time the fastest axis: the input there is
    /// fx[n], the time value t/(T−1), and the output maps back to (B, N, C, T) at [n, :, t].
    #[test]
    fn space_time_layout_repeats_inputs_over_time_and_maps_outputs_back() {
        let (b, n, t) = (2i64, 6i64, 4i64);
        let pos = Tensor::rand([b, n, 2], (Kind::Double, Device::Cpu));
        let fx = Tensor::randn([b, n, 3], (Kind::Double, Device::Cpu));
        let (p3, f3, grid) = space_time(&pos, &fx, t, Some(&[2, 3])).unwrap();
        assert_eq!(grid, [2, 3, t]);
        assert_eq!(p3.size(), [b, n * t, 3]);
        for (bi, ni, ti) in [(0, 0, 0), (1, 5, 3), (0, 2, 1), (1, 3, 2)] {
            let row = ni * t + ti;
            let same = |a: Tensor, e: Tensor| (a - e).abs().max().double_value(&[]) == 0.0;
            assert!(same(f3.get(bi).get(row), fx.get(bi).get(ni)));
            assert!(same(
                p3.get(bi).get(row).narrow(0, 0, 2),
                pos.get(bi).get(ni)
            ));
            let tv = p3.get(bi).get(row).double_value(&[2]);
            assert!((tv - ti as f64 / (t - 1) as f64).abs() < 1e-15);
        }
        // An output holding (n, c, t) at its space-time row maps to [n, c, t].
        let idx = Tensor::arange(n * t, (Kind::Double, Device::Cpu)).reshape([1, n * t, 1]);
        let out = Tensor::cat(&[&idx, &(&idx * 10.0)], 2).expand([b, n * t, 2], false);
        let back = from_space_time(&out, t).unwrap();
        assert_eq!(back.size(), [b, n, 2, t]);
        assert_eq!(back.double_value(&[1, 4, 0, 3]), (4 * t + 3) as f64);
        assert_eq!(back.double_value(&[0, 2, 1, 1]), 10.0 * (2 * t + 1) as f64);
        assert!(space_time(&pos, &fx, t, None).is_err());
    }
}
