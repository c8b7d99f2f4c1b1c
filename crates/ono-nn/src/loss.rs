//! The relative L2 loss of the reference (`testloss.py`, `TestLoss.rel`).

use tch::Tensor;

use crate::{Error, Result};

/// How per-sample losses are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// Σ over the batch (`size_average=False`: what ONO trains on).
    Sum,
    /// Mean over the batch.
    Mean,
    /// One value per sample.
    None,
}

/// ‖pred_b − target_b‖₂ / ‖target_b‖₂ per sample over the flattened tensor, with no epsilon
/// (a zero target gives Inf/NaN, as the reference).
///
/// # Shapes
/// - `pred`, `target`: (B, ...) of equal shape
/// - returns: () for `Sum`/`Mean`, (B) for `None`
pub fn relative_l2(pred: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    if pred.size() != target.size() || pred.dim() == 0 {
        return Err(Error::Shape {
            op: "relative_l2",
            expected: format!("a target of the prediction's shape {:?}", pred.size()),
            got: target.size(),
        });
    }
    let b = pred.size()[0];
    let p = pred.f_reshape([b, -1])?;
    let t = target.f_reshape([b, -1])?;
    let dim = &[1i64][..];
    let num = p.f_sub(&t)?.f_norm_scalaropt_dim(2, dim, false)?;
    let den = t.f_norm_scalaropt_dim(2, dim, false)?;
    let per = num.f_div(&den)?;
    Ok(match reduction {
        Reduction::Sum => per.f_sum(per.kind())?,
        Reduction::Mean => per.f_mean(per.kind())?,
        Reduction::None => per,
    })
}
