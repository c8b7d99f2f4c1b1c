//! Activation recomputation for FNO training steps (`recompute = true`), the scheme of
//! `ono/recompute.rs`: tch has no custom autograd functions, so checkpointing happens at the step
//! level. A gradient-free pass keeps each Fourier layer's input; the pointwise head, whose
//! (B, N, 128) activations are the largest of the network, runs in chunks of points twice (once
//! for the loss, once with a graph per chunk); then each layer is recomputed with a graph from
//! the last to the first and back-propagated with the incoming gradient. Peak memory holds the
//! layer inputs, one layer's activations and one chunk of the head, for one more forward pass.
//! FNO has no running statistics, so the result equals the plain step up to the order of
//! floating-point accumulation.

use tch::Tensor;

use super::Fno;
use crate::operator::{LossFn, ModelInput};
use crate::{Error, Result};

/// The head runs on this many chunks of points.
const HEAD_CHUNKS: i64 = 8;

/// Σ y ⊙ g, whose backward sends the gradient `g` into `y`'s graph.
fn contract(y: &Tensor, g: &Tensor) -> Result<Tensor> {
    Ok(y.f_mul(g)?.f_sum(y.kind())?)
}

impl<const D: usize> Fno<D> {
    /// One training forward and backward with recomputation; returns the loss, detached.
    pub fn forward_backward_recompute(
        &self,
        input: &ModelInput<'_>,
        loss: &mut LossFn<'_>,
    ) -> Result<Tensor> {
        let (h0, shape) = tch::with_grad(|| self.lift(input))?;

        // Pass 1: no graph; keep every layer's input.
        let mut inputs = Vec::with_capacity(self.convs.len());
        let last = tch::no_grad(|| -> Result<Tensor> {
            let mut h = h0.f_detach()?;
            for l in 0..self.convs.len() {
                let next = self.layer(l, &h)?;
                inputs.push(h);
                h = next;
            }
            Ok(h)
        })?;
        let points = tch::no_grad(|| self.to_points(&last, &shape))?;
        let n = points.size()[1];
        let chunk = (n + HEAD_CHUNKS - 1) / HEAD_CHUNKS;
        let spans: Vec<(i64, i64)> = (0..n)
            .step_by(chunk.max(1) as usize)
            .map(|s| (s, chunk.min(n - s)))
            .collect();

        // The loss on the prediction (the head without a graph, chunk by chunk).
        let pred = tch::no_grad(|| -> Result<Tensor> {
            let parts = spans
                .iter()
                .map(|&(s, len)| self.head(&points.f_narrow(1, s, len)?))
                .collect::<Result<Vec<_>>>()?;
            Ok(Tensor::f_cat(&parts, 1)?)
        })?;
        let pred = pred.f_set_requires_grad(true)?;
        let value = tch::with_grad(|| -> Result<Tensor> {
            let l = loss(&pred).map_err(Error::Loss)?;
            if l.numel() != 1 {
                return Err(Error::Shape {
                    op: "Fno::forward_backward_recompute",
                    expected: "a scalar loss".into(),
                    got: l.size(),
                });
            }
            l.f_backward()?;
            Ok(l.f_detach()?)
        })?;
        let grad_pred = pred.grad();
        if !grad_pred.defined() {
            return Err(Error::Config(
                "the loss does not depend on the model's output".into(),
            ));
        }

        // The head with a graph, chunk by chunk: its parameters' gradients and d loss / d points.
        let grad_points = points.f_zeros_like()?;
        for &(s, len) in &spans {
            let part = points.f_narrow(1, s, len)?.f_set_requires_grad(true)?;
            tch::with_grad(|| -> Result<()> {
                let out = self.head(&part)?;
                contract(&out, &grad_pred.f_narrow(1, s, len)?)?.f_backward()?;
                Ok(())
            })?;
            grad_points.f_narrow(1, s, len)?.f_copy_(&part.grad())?;
        }

        // Crop and layers, last first.
        let mut grad = tch::with_grad(|| -> Result<Tensor> {
            let h = last.f_detach()?.f_set_requires_grad(true)?;
            contract(&self.to_points(&h, &shape)?, &grad_points)?.f_backward()?;
            Ok(h.grad())
        })?;
        for (l, h) in inputs.into_iter().enumerate().rev() {
            let h = h.f_set_requires_grad(true)?;
            tch::with_grad(|| -> Result<()> {
                contract(&self.layer(l, &h)?, &grad)?.f_backward()?;
                Ok(())
            })?;
            grad = h.grad();
        }

        // The lift kept its graph.
        tch::with_grad(|| -> Result<()> {
            contract(&h0, &grad)?.f_backward().map_err(Error::from)
        })?;
        Ok(value)
    }
}
