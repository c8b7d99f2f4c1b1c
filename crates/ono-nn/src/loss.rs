//! The relative L2 loss of the reference (`testloss.py`, `TestLoss.rel`): the one implementation
//! every crate uses (training loss, metrics, reference checks), with an optional padding mask.

use ono_kernels::points;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::{Error, Result};

/// How per-sample losses are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Reduction {
    /// Σ over the batch (`size_average=False`: what ONO trains on).
    Sum,
    /// Mean over the batch.
    Mean,
    /// One value per sample.
    None,
}

/// ‖pred_b − target_b‖₂ / ‖target_b‖₂ per sample over the flattened tensor, with no epsilon
/// (a zero target gives Inf/NaN, as the reference). With `mask`, only the real points of a
/// ragged batch count: padded points (false) are left out of both norms. Over split points
/// (`ono_kernels::points`) both norms are the whole sample's, on every process.
///
/// # Shapes
/// - `pred`, `target`: (B, N, ...) of equal shape
/// - `mask`: (B, N) bool or 0/1, optional
/// - returns: () for `Sum`/`Mean`, (B) for `None`
pub fn relative_l2(
    pred: &Tensor,
    target: &Tensor,
    reduction: Reduction,
    mask: Option<&Tensor>,
) -> Result<Tensor> {
    let ps = pred.size();
    if ps != target.size() || pred.dim() == 0 {
        return Err(Error::Shape {
            op: "relative_l2",
            expected: format!("a target of the prediction's shape {ps:?}"),
            got: target.size(),
        });
    }
    let b = ps[0];
    let (mut p, mut t) = (pred.shallow_clone(), target.shallow_clone());
    if let Some(mask) = mask {
        if ps.len() < 2 || mask.size() != ps[..2] {
            return Err(Error::Shape {
                op: "relative_l2",
                expected: format!("a mask of the first two sizes of the prediction {ps:?}"),
                got: mask.size(),
            });
        }
        // (B, N) → (B, N, 1, …) so it broadcasts over the channels.
        let mut shape = ps[..2].to_vec();
        shape.resize(ps.len(), 1);
        let m = mask
            .f_to_kind(tch::Kind::Bool)?
            .f_to_kind(pred.kind())?
            .f_reshape(shape.as_slice())?;
        p = p.f_mul(&m)?;
        t = t.f_mul(&m)?;
    }
    let dim = &[1i64][..];
    let (num, den) = if points::split() {
        // This process holds a share of each sample's points: the squared norms are summed
        // over the processes (a differentiable all-reduce), so every process holds the whole
        // sample's loss. `flatten`, not `reshape(b, -1)`: a share may hold no points.
        let (p, t) = (p.f_flatten(1, -1)?, t.f_flatten(1, -1)?);
        let norm = |x: &Tensor| -> Result<Tensor> {
            let sq = x.f_square()?.f_sum_dim_intlist(dim, false, x.kind())?;
            Ok(points::sum(&sq)?.f_sqrt()?)
        };
        (norm(&p.f_sub(&t)?)?, norm(&t)?)
    } else {
        let (p, t) = (p.f_reshape([b, -1])?, t.f_reshape([b, -1])?);
        (
            p.f_sub(&t)?.f_norm_scalaropt_dim(2, dim, false)?,
            t.f_norm_scalaropt_dim(2, dim, false)?,
        )
    };
    let per = num.f_div(&den)?;
    Ok(match reduction {
        Reduction::Sum => per.f_sum(per.kind())?,
        Reduction::Mean => per.f_mean(per.kind())?,
        Reduction::None => per,
    })
}
