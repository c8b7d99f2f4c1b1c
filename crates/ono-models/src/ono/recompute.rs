//! Activation recomputation (gradient checkpointing) for ONO training steps.
//!
//! tch has no custom autograd functions, so the checkpointing is done at the step level: a
//! gradient-free pass keeps only each block's two input streams; the loss is differentiated with
//! respect to the last block's output; then, from the last block to the first, each block is run
//! again with gradients and back-propagated with the incoming gradient (∑ out ⊙ g), which
//! accumulates its parameters' gradients and yields the gradient of its inputs. Peak memory holds
//! one block's activations instead of all of them, for one extra forward pass per block.
//!
//! Training-mode statistics (EMA covariance, BatchNorm running statistics) are updated in the
//! first pass only: the recomputation runs with them frozen, so a step changes the buffers
//! exactly as [`Ono::forward`] does. Outputs are bit-identical to the plain path; gradients equal
//! it up to the order of floating-point accumulation.

use tch::Tensor;

use crate::ono::Ono;
use crate::{Error, Result};

impl Ono {
    /// One training forward and backward with per-block recomputation. `loss` maps the model's
    /// output (B, N, out_dim) to a scalar; its value is returned detached, and every parameter's
    /// `.grad` holds d loss / d parameter (added to what was there, as `backward` does).
    ///
    /// # Shapes
    /// - `pos`: (B, N, space_dim), `fx`: (B, N, fun_dim), `t`: (B, 1) when `time_input`
    /// - returns: ()
    pub fn forward_backward_recompute(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
        t: Option<&Tensor>,
        loss: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let (x0, f0) = tch::with_grad(|| self.encode(pos, fx, mask, t))?;
        let blocks = self.blocks();

        // Pass 1: no graph, statistics updated; keep every block's inputs.
        let mut inputs = Vec::with_capacity(blocks.len());
        let out = tch::no_grad(|| -> Result<Tensor> {
            let (mut x, mut f) = (x0.f_detach()?, f0.f_detach()?);
            for block in blocks {
                let (nx, nf) = block.forward(&x, &f, mask, true)?;
                inputs.push((x, f));
                (x, f) = (nx, nf);
            }
            Ok(ono_nn::padding::zero_padding(&f, mask)?)
        })?;

        // The loss on the output, differentiated down to the output only.
        let out = out.f_detach()?.f_set_requires_grad(true)?;
        let value = scalar_loss_backward(&out, loss)?;
        let mut grad_f = ono_nn::padding::zero_padding(&out.grad(), mask)?;
        let mut grad_x: Option<Tensor> = None;

        // Pass 2: last block first, recomputed with a graph and frozen statistics.
        for (block, (x, f)) in blocks.iter().zip(inputs).rev() {
            let x = x.f_set_requires_grad(true)?;
            let f = f.f_set_requires_grad(true)?;
            block.set_statistics_frozen(true);
            let result = tch::with_grad(|| -> Result<()> {
                let (nx, nf) = block.forward(&x, &f, mask, true)?;
                let mut s = nf.f_mul(&grad_f)?.f_sum(nf.kind())?;
                if let Some(gx) = &grad_x {
                    s = s.f_add(&nx.f_mul(gx)?.f_sum(nx.kind())?)?;
                }
                s.f_backward()?;
                Ok(())
            });
            block.set_statistics_frozen(false);
            result?;
            grad_f = f.grad();
            let gx = x.grad();
            grad_x = gx.defined().then_some(gx);
        }

        // Finally the encoder, which kept its graph.
        encoder_backward(&x0, &f0, grad_x.as_ref(), &grad_f)?;
        Ok(value)
    }
}

impl Ono {
    /// One training forward and backward with selective recomputation
    /// ([`OrthogonalBlock::forward_saving`](ono_nn::orthogonal::OrthogonalBlock::forward_saving)):
    /// each block keeps its matrix products' outputs and recomputes the element-wise operations in
    /// a hand-written backward pass. Statistics are updated once, as by [`Ono::forward`]; the
    /// output equals the plain path's and the gradients equal it up to the order of
    /// floating-point accumulation. Returns the loss, detached.
    ///
    /// # Shapes
    /// - `pos`: (B, N, space_dim), `fx`: (B, N, fun_dim), `t`: (B, 1) when `time_input`
    /// - returns: ()
    pub fn forward_backward_selective(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
        t: Option<&Tensor>,
        loss: impl FnOnce(&Tensor) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let (x0, f0) = tch::with_grad(|| self.encode(pos, fx, mask, t))?;
        let blocks = self.blocks();
        let mut saved = Vec::with_capacity(blocks.len());
        let (mut x, mut f) = (x0.f_detach()?, f0.f_detach()?);
        for block in blocks {
            let (nx, nf, s) = block.forward_saving(&x, &f, mask)?;
            saved.push(s);
            (x, f) = (nx, nf);
        }
        drop(x);
        let out = ono_nn::padding::zero_padding(&f, mask)?
            .f_detach()?
            .f_set_requires_grad(true)?;
        let value = scalar_loss_backward(&out, loss)?;
        // The output's padded rows were zeroed: nothing flows back through them.
        let mut grad_f = ono_nn::padding::zero_padding(&out.grad(), mask)?;
        let mut grad_x: Option<Tensor> = None;
        for (block, s) in blocks.iter().zip(saved).rev() {
            let (gx, gf) = block.backward_saved(s, grad_x.as_ref(), &grad_f)?;
            (grad_x, grad_f) = (Some(gx), gf);
        }
        encoder_backward(&x0, &f0, grad_x.as_ref(), &grad_f)?;
        Ok(value)
    }

    /// Whether every block can run [`Self::forward_backward_selective`].
    pub fn supports_selective(&self) -> bool {
        self.blocks().iter().all(|b| b.supports_selective())
    }
}

/// The loss of `out` (a leaf), differentiated down to `out` only; returns it detached.
fn scalar_loss_backward(
    out: &Tensor,
    loss: impl FnOnce(&Tensor) -> Result<Tensor>,
) -> Result<Tensor> {
    tch::with_grad(|| -> Result<Tensor> {
        let l = loss(out)?;
        if l.numel() != 1 {
            return Err(Error::Shape {
                op: "forward_backward",
                expected: "a scalar loss".into(),
                got: l.size(),
            });
        }
        l.f_backward()?;
        Ok(l.f_detach()?)
    })
}

/// Back-propagates the two streams' gradients into the encoder, which kept its graph.
fn encoder_backward(x0: &Tensor, f0: &Tensor, gx: Option<&Tensor>, gf: &Tensor) -> Result<()> {
    tch::with_grad(|| -> Result<()> {
        let mut s = f0.f_mul(gf)?.f_sum(f0.kind())?;
        if let Some(gx) = gx {
            s = s.f_add(&x0.f_mul(gx)?.f_sum(x0.kind())?)?;
        }
        s.f_backward()?;
        Ok(())
    })
}
