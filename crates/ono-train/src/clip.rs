//! Global-norm gradient clipping, as `torch.nn.utils.clip_grad_norm_`, without a host read.

use tch::Tensor;

use crate::{Error, Result};

/// min(1, max_norm / (total + 1e-6)) on the device: PyTorch always multiplies by the clamped
/// coefficient instead of branching on the norm, which is what keeps this sync-free.
pub fn coefficient(total_norm: &Tensor, max_norm: f64) -> Result<Tensor> {
    if !(max_norm.is_finite() && max_norm > 0.0) {
        return Err(Error::config(
            "optimizer.max_grad_norm",
            format!("must be finite and positive, got {max_norm}"),
        ));
    }
    Ok(total_norm
        .f_add_scalar(1e-6)?
        .f_reciprocal()?
        .f_mul_scalar(max_norm)?
        .f_clamp_max(1.0)?)
}

/// Scales `grads` in place so that their global L2 norm is at most `max_norm` and returns the
/// norm before clipping (a 0-d tensor on the gradients' device).
pub fn clip_grad_norm_(grads: &mut [Tensor], max_norm: f64) -> Result<Tensor> {
    if grads.is_empty() {
        return Err(Error::Data("clip_grad_norm_: no gradients".into()));
    }
    let norms = grads
        .iter()
        .map(|g| g.f_norm())
        .collect::<Result<Vec<_>, _>>()?;
    let total = Tensor::f_stack(&norms, 0)?.f_norm()?;
    let coef = coefficient(&total, max_norm)?;
    let _guard = tch::no_grad_guard();
    for g in grads.iter_mut() {
        let _ = g.f_mul_(&coef)?;
    }
    Ok(total)
}
