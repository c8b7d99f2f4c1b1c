//! Dynamic loss scaling for float16 training: `torch.amp.GradScaler` with its defaults, on the
//! device, through the same two libtorch kernels (`_amp_foreach_non_finite_check_and_unscale_`,
//! `_amp_update_scale_`).
//!
//! The loss is multiplied by the scale before the backward pass, so that float16 gradients of
//! small values do not flush to zero; the float32 gradients are divided by it again before
//! clipping and the optimizer. A step whose gradients hold Inf or NaN is skipped
//! ([`AdamW::step_unless`]) and the scale halved; 2000 clean steps in a row double it. Nothing is
//! read back to the host: whether a step was skipped is a device tensor.

use std::collections::BTreeMap;

use tch::{Device, Kind, Tensor};

use crate::adamw::{AdamW, FlatGrads, StepPlan};
use crate::{Error, Result};

/// GradScaler's initial scale, 2¹⁶.
pub const INIT_SCALE: f64 = 65536.0;
/// Factor of the scale after `GROWTH_INTERVAL` clean steps.
pub const GROWTH_FACTOR: f64 = 2.0;
/// Factor of the scale after a step with non-finite gradients.
pub const BACKOFF_FACTOR: f64 = 0.5;
/// Clean steps in a row before the scale grows.
pub const GROWTH_INTERVAL: i64 = 2000;

/// The scaler's state, all on the device.
#[derive(Debug)]
pub struct LossScaler {
    /// (1,) float32.
    scale: Tensor,
    /// (1,) int32: clean steps since the scale last changed.
    growth_tracker: Tensor,
    /// (1,) float32: 1 when the last unscaled gradients held Inf or NaN.
    found_inf: Tensor,
}

impl LossScaler {
    /// A scaler at [`INIT_SCALE`] on `device`.
    pub fn new(device: Device) -> Result<Self> {
        Ok(Self {
            scale: Tensor::f_full([1], INIT_SCALE, (Kind::Float, device))?,
            growth_tracker: Tensor::f_zeros([1], (Kind::Int, device))?,
            found_inf: Tensor::f_zeros([1], (Kind::Float, device))?,
        })
    }

    /// `loss · scale`, to back-propagate.
    pub fn scale(&self, loss: &Tensor) -> Result<Tensor> {
        Ok(loss.f_mul(&self.scale.f_to_kind(loss.kind())?.f_reshape([])?)?)
    }

    /// `scaled / scale`: a scaled loss back to its value (exact: the scale is a power of two).
    pub fn unscale_value(&self, scaled: &Tensor) -> Result<Tensor> {
        Ok(scaled.f_div(&self.scale.f_to_kind(scaled.kind())?.f_reshape([])?)?)
    }

    /// Optimizer step of a scaled backward pass: the gradients divided by the scale (and checked
    /// for Inf/NaN), clipped to `max_grad_norm`, the AdamW step unless they were not finite, and
    /// the scale updated.
    pub fn step(&mut self, opt: &mut AdamW, max_grad_norm: Option<f64>) -> Result<()> {
        let grads = opt.gather_grads()?;
        self.step_with(opt, grads, max_grad_norm)
    }

    /// [`LossScaler::step`] on gradients already gathered (and, in a data-parallel run, summed
    /// over the processes: every process then finds the same overflow and skips alike).
    pub fn step_with(
        &mut self,
        opt: &mut AdamW,
        grads: FlatGrads,
        max_grad_norm: Option<f64>,
    ) -> Result<()> {
        let plan = opt.plan(&grads, true)?;
        self.step_planned(opt, &plan, grads, max_grad_norm)
    }

    /// [`LossScaler::step_with`] with the optimizer's host half done ([`AdamW::plan`], which a
    /// captured step makes before its replay): nothing here reads or writes the host.
    pub fn step_planned(
        &mut self,
        opt: &AdamW,
        plan: &StepPlan,
        mut grads: FlatGrads,
        max_grad_norm: Option<f64>,
    ) -> Result<()> {
        let _ = self.found_inf.f_zero_()?;
        let inv_scale = self.scale.f_reciprocal()?;
        for g in grads.tensors_mut() {
            g.f_internal_amp_non_finite_check_and_unscale(&mut self.found_inf, &inv_scale)?;
        }
        if let Some(m) = max_grad_norm {
            // A non-finite norm makes the clipped gradients NaN; the step is skipped anyway.
            let _ = grads.clip_norm_(m)?;
        }
        opt.apply(plan, &grads, Some(&self.found_inf))?;
        let _ = self.scale.f_internal_amp_update_scale_(
            &self.growth_tracker,
            &self.found_inf,
            GROWTH_FACTOR,
            BACKOFF_FACTOR,
            GROWTH_INTERVAL,
        )?;
        Ok(())
    }

    /// Whether the last [`LossScaler::step`] was skipped: a (1,) float32 tensor, 1 if so.
    pub fn found_inf(&self) -> &Tensor {
        &self.found_inf
    }

    /// The current scale. Reads the device: for tests and reports.
    pub fn current_scale(&self) -> Result<f64> {
        Ok(ono_kernels::host::read_f64(&self.scale.f_reshape([])?)?)
    }

    /// The state for a checkpoint: `<prefix>scale`, `<prefix>growth_tracker`.
    pub fn tensors(&self, prefix: &str) -> Result<BTreeMap<String, Tensor>> {
        Ok(BTreeMap::from([
            (format!("{prefix}scale"), self.scale.f_detach_copy()?),
            (
                format!("{prefix}growth_tracker"),
                self.growth_tracker.f_detach_copy()?,
            ),
        ]))
    }

    /// Restores [`LossScaler::tensors`]; both must be present.
    pub fn load(&mut self, prefix: &str, tensors: &BTreeMap<String, Tensor>) -> Result<()> {
        let _guard = tch::no_grad_guard();
        for (name, dst) in [
            ("scale", &mut self.scale),
            ("growth_tracker", &mut self.growth_tracker),
        ] {
            let key = format!("{prefix}{name}");
            let src = tensors.get(&key).ok_or_else(|| {
                Error::Data(format!(
                    "the checkpoint has no loss-scaler state {key} (float16 runs save it)"
                ))
            })?;
            if src.numel() != 1 {
                return Err(Error::Shape {
                    op: "LossScaler::load",
                    expected: format!("{key} of one element"),
                    got: src.size(),
                });
            }
            dst.f_copy_(&src.f_reshape([1])?.f_to_kind(dst.kind())?)?;
        }
        Ok(())
    }
}
