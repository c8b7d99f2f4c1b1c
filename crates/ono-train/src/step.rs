//! One optimizer step: the loss of the reference scripts on decoded outputs, the model's
//! forward-and-backward hook, clipping and AdamW (under float16, with the loss scaled and steps
//! with overflowing gradients skipped); the loss stays on the device until the epoch loop reads a
//! batch of them back.

use ono_data::normalizer::Normalizer;
use ono_models::{LossError, Model, ModelInput};
use tch::Tensor;

use crate::adamw::AdamW;
use crate::config::{LossKind, ReductionName, RolloutLoss};
use crate::decoder::Decoder;
use crate::loss::{self, DarcyH1Target, Reduction};
use crate::scaler::LossScaler;
use crate::{Error, Result};

/// A loss not yet read back to the host.
pub(crate) struct PendingLoss {
    pub loss: Tensor,
    pub step: u64,
    /// The batch size (a mean-reduced loss is scaled back to a sum with it).
    pub batch: i64,
    /// Samples this loss adds to the epoch's count (0 for the 2nd.. time step of a batch).
    pub new_samples: i64,
}

/// What a training output is scored against.
#[derive(Clone, Copy)]
pub(crate) struct Target<'a> {
    /// (B, M, C) or (B, M, C, T), raw.
    pub y: &'a Tensor,
    /// (B, M, Ca): loss-only channels.
    pub aux: Option<&'a Tensor>,
    /// (B, M) bool: the real points of a ragged batch.
    pub mask: Option<&'a Tensor>,
}

impl<'a> Target<'a> {
    pub fn plain(y: &'a Tensor) -> Self {
        Self {
            y,
            aux: None,
            mask: None,
        }
    }
}

/// How the training loss is formed from the model's output: the experiment's `[loss]` with the
/// benchmark recipe's values for what it leaves unset.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LossSpec {
    /// The batch reduction (a mean for the Galerkin losses, whatever was configured).
    pub reduction: ReductionName,
    /// Darcy's derivative weight (needs a square grid).
    pub alpha: f64,
    /// Which loss.
    pub kind: LossKind,
    /// γ of the Galerkin H¹ term.
    pub h1_gamma: f64,
    /// How an autoregressive rollout's frames add up.
    pub rollout: RolloutLoss,
}

impl LossSpec {
    /// The configured batch reduction of a Σ_b loss.
    pub(crate) fn reduce(&self, sum: Tensor, b: i64) -> Result<Tensor> {
        Ok(match self.reduction {
            ReductionName::Sum => sum,
            ReductionName::Mean => sum.f_div_scalar(b as f64)?,
        })
    }

    /// The loss of predictions on the targets' grid `grid`: relative L2 (+ α · Darcy's
    /// derivative term), reduced; the Galerkin Transformer's loss with the targets' derivatives
    /// (and coefficient) from `aux`; or GNOT's per-channel loss. `pred` and `t.y` are decoded
    /// values, except for GNOT's loss, which the reference computes on normalized ones.
    ///
    /// # Shapes
    /// - `pred`, `t.y`: (B, M, C); `t.aux`: (B, M, Ca); `t.mask`: (B, M)
    pub(crate) fn of(&self, pred: &Tensor, t: &Target<'_>, grid: Option<&[i64]>) -> Result<Tensor> {
        let (y, b) = (t.y, pred.size()[0]);
        match self.kind {
            LossKind::GalerkinH1 => return self.galerkin(pred, y, grid, t.aux),
            LossKind::Gnot => return loss::channel_relative_l2(pred, y, t.mask),
            LossKind::RelL2 => {}
        }
        let sum = match (grid, self.alpha > 0.0) {
            (Some(g), true) => loss::darcy_loss(pred, y, g[0], self.alpha)?,
            _ => loss::relative_l2(pred, y, Reduction::Sum, t.mask)?,
        };
        self.reduce(sum, b)
    }

    /// `WeightedL2Loss` on a 1-D grid, `WeightedL2Loss2d` on a 2-D one; h = 1/n (the first
    /// axis in 2-D, as the reference's square grids). The trainer has checked the shapes.
    fn galerkin(
        &self,
        pred: &Tensor,
        y: &Tensor,
        grid: Option<&[i64]>,
        aux: Option<&Tensor>,
    ) -> Result<Tensor> {
        let b = pred.size()[0];
        let with_h1 = self.h1_gamma > 0.0;
        let missing = || {
            Error::Data("the galerkin_h1 loss with h1_gamma > 0 needs the targets' derivatives as aux (the Galerkin layout of the data)".into())
        };
        match grid {
            Some(&[n]) => {
                let du = match (with_h1, aux) {
                    (true, Some(a)) => Some(a.f_reshape([b, n])?),
                    (true, None) => return Err(missing()),
                    (false, _) => None,
                };
                let (p, u) = (pred.f_reshape([b, n])?, y.f_reshape([b, n])?);
                loss::galerkin_h1_loss_1d(&p, &u, du.as_ref(), 1.0 / n as f64, self.h1_gamma)
            }
            Some(&[n1, n2]) => {
                let (grad, coeff) = match (with_h1, aux) {
                    (true, Some(a)) => (
                        Some(a.f_narrow(2, 0, 2)?.f_reshape([b, n1, n2, 2])?),
                        Some(a.f_select(2, 2)?.f_reshape([b, n1, n2])?),
                    ),
                    (true, None) => return Err(missing()),
                    (false, _) => (None, None),
                };
                let target = match (&grad, &coeff) {
                    (Some(g), Some(c)) => Some(DarcyH1Target {
                        grad_u: g,
                        coeff: c,
                    }),
                    _ => None,
                };
                let (p, u) = (pred.f_reshape([b, n1, n2])?, y.f_reshape([b, n1, n2])?);
                loss::galerkin_h1_loss_2d(&p, &u, target, 1.0 / n1 as f64, self.h1_gamma)
            }
            _ => Err(Error::Data(
                "the galerkin_h1 loss needs targets on a 1-D or 2-D grid".into(),
            )),
        }
    }
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
    pub pending: &'a mut Vec<PendingLoss>,
}

impl StepRunner<'_> {
    pub fn decoder(&self) -> Decoder<'_> {
        Decoder {
            model: self.model,
            y_norm: self.y_norm,
            grid: self.grid,
        }
    }

    /// One optimizer step on the decoded loss of one forward pass, through the model's
    /// forward-and-backward hook (activation recomputation when configured). The queued loss is
    /// divided by `report_div` (per-time-step losses are reported per step).
    pub fn forward_backward_step(
        &mut self,
        input: &ModelInput<'_>,
        target: &Target<'_>,
        new_samples: i64,
        report_div: i64,
    ) -> Result<()> {
        self.forward_backward_step_as(input, target, new_samples, report_div, &|o| {
            Ok(o.shallow_clone())
        })
    }

    /// [`forward_backward_step`](Self::forward_backward_step) with the model's output brought
    /// into the target's layout by `layout` before it is decoded (the space-time regime).
    pub fn forward_backward_step_as(
        &mut self,
        input: &ModelInput<'_>,
        target: &Target<'_>,
        new_samples: i64,
        report_div: i64,
        layout: &dyn Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        let (y_norm, grid, spec) = (self.y_norm, self.target_grid, self.loss);
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
            Ok(match scaler {
                Some(s) => s.scale(&loss)?,
                None => loss,
            })
        };
        self.opt.zero_grad();
        let loss = self
            .model
            .forward_backward(input, &mut loss_of, self.recompute)?;
        let loss = match self.scaler.as_deref() {
            Some(s) => s.unscale_value(&loss)?,
            None => loss,
        };
        self.optimizer_step()?;
        let loss = if report_div > 1 {
            loss.f_div_scalar(report_div as f64)?
        } else {
            loss
        };
        self.queue(loss, target.y.size()[0], new_samples);
        Ok(())
    }

    /// One optimizer step on a Σ_b loss computed by the caller (the rollout).
    /// Logs `reported` (a Σ_b loss too, reduced alike) instead of the optimized loss where
    /// given: a weighted rollout reports its plain Σ over frames.
    pub fn backward_step(&mut self, sum: Tensor, reported: Option<Tensor>, b: i64) -> Result<()> {
        let loss = self.loss.reduce(sum, b)?;
        self.opt.zero_grad();
        match self.scaler.as_deref() {
            Some(s) => s.scale(&loss)?.f_backward()?,
            None => loss.f_backward()?,
        }
        self.optimizer_step()?;
        let report = match reported {
            Some(r) => self.loss.reduce(r, b)?.f_detach()?,
            None => loss.f_detach()?,
        };
        self.queue(report, b, b);
        Ok(())
    }

    /// Clipping and AdamW on the gradients of the last backward pass (through the loss scaler
    /// when there is one).
    fn optimizer_step(&mut self) -> Result<()> {
        match self.scaler.as_deref_mut() {
            Some(s) => s.step(self.opt, self.clip),
            None => self.opt.step(self.clip).map(|_| ()),
        }
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
