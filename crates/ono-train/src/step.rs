//! One optimizer step: the loss of the reference scripts on decoded outputs, the model's
//! forward-and-backward hook, clipping and AdamW; the loss stays on the device until the epoch
//! loop reads a batch of them back.

use ono_data::normalizer::Normalizer;
use ono_models::{LossError, Model, ModelInput};
use tch::Tensor;

use crate::adamw::AdamW;
use crate::config::ReductionName;
use crate::decoder::Decoder;
use crate::loss::{self, Reduction};
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

/// How the training loss is formed from the model's output.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LossSpec {
    pub reduction: ReductionName,
    /// Darcy's derivative weight (needs a square grid).
    pub alpha: f64,
}

impl LossSpec {
    /// The configured batch reduction of a Σ_b loss.
    pub fn reduce(&self, sum: Tensor, b: i64) -> Result<Tensor> {
        Ok(match self.reduction {
            ReductionName::Sum => sum,
            ReductionName::Mean => sum.f_div_scalar(b as f64)?,
        })
    }

    /// The loss of decoded predictions: relative L2 (+ α · Darcy's derivative term), reduced.
    pub fn of(&self, pred: &Tensor, y: &Tensor, grid: Option<&[i64]>) -> Result<Tensor> {
        let b = pred.size()[0];
        let sum = match (grid, self.alpha > 0.0) {
            (Some(g), true) => loss::darcy_loss(pred, y, g[0], self.alpha)?,
            _ => loss::relative_l2(pred, y, Reduction::Sum, None)?,
        };
        self.reduce(sum, b)
    }
}

/// Everything one training batch needs, borrowed from the trainer.
pub(crate) struct StepRunner<'a> {
    pub model: &'a Model,
    pub opt: &'a mut AdamW,
    pub y_norm: &'a Normalizer,
    pub grid: Option<&'a [i64]>,
    pub clip: Option<f64>,
    pub loss: LossSpec,
    pub recompute: bool,
    pub teacher_forcing: bool,
    pub time_steps: i64,
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
        target: &Tensor,
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
        target: &Tensor,
        new_samples: i64,
        report_div: i64,
        layout: &dyn Fn(&Tensor) -> Result<Tensor>,
    ) -> Result<()> {
        let (y_norm, grid, spec) = (self.y_norm, self.grid, self.loss);
        let mut loss_of = |out: &Tensor| -> std::result::Result<Tensor, LossError> {
            let pred = y_norm.decode(&layout(out)?).map_err(crate::Error::from)?;
            Ok(spec.of(&pred, target, grid)?)
        };
        self.opt.zero_grad();
        let loss = self
            .model
            .forward_backward(input, &mut loss_of, self.recompute)?;
        self.opt.step(self.clip)?;
        let loss = if report_div > 1 {
            loss.f_div_scalar(report_div as f64)?
        } else {
            loss
        };
        self.queue(loss, target.size()[0], new_samples);
        Ok(())
    }

    /// One optimizer step on a Σ_b loss computed by the caller (the rollout).
    pub fn backward_step(&mut self, sum: Tensor, b: i64) -> Result<()> {
        let loss = self.loss.reduce(sum, b)?;
        self.opt.zero_grad();
        loss.f_backward()?;
        self.opt.step(self.clip)?;
        self.queue(loss.f_detach()?, b, b);
        Ok(())
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
