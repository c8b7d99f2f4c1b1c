//! Training losses and evaluation metrics of the reference scripts.
//!
//! - relative L2 per sample, summed over the batch (`TestLoss(size_average=False)`, what ONO
//!   trains on) or averaged;
//! - Darcy's derivative term (ONO `Darcy_example.py`): boundary-zeroed prediction, zero-padded
//!   central differences with step 1/s, α = 0.1;
//! - the Galerkin Transformer's H¹-seminorm terms (`WeightedL2Loss` 1-D and `WeightedL2Loss2d`);
//! - evaluation metrics: mean relative L2 over a set, per-step and whole-rollout errors;
//! - how a run's training loss is formed from these ([`LossSpec`], against a [`Target`]).

use ono_kernels::host;
use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::config::{LossKind, ReductionName, RolloutLoss};
use crate::{Error, Result};

/// The same [`Reduction`], under its older name.
pub use ono_nn::loss::Reduction as LossReduction;
/// The one relative L2 (ono-nn): per sample, no epsilon (an all-zero target must be refused
/// beforehand with [`check_targets`], once per dataset, rather than on every step), optional
/// padding mask.
pub use ono_nn::loss::{relative_l2, Reduction};

/// Relative L2 that refuses an all-zero or non-finite target sample (one host read).
pub fn relative_l2_checked(pred: &Tensor, target: &Tensor, reduction: Reduction) -> Result<Tensor> {
    check_targets(target, "target")?;
    Ok(relative_l2(pred, target, reduction, None)?)
}

/// Refuses a target set with a non-finite value or a sample whose L2 norm is zero (its relative
/// error would be NaN); names the first offending sample. One host read.
///
/// # Shapes
/// - `target`: (S, ...)
pub fn check_targets(target: &Tensor, what: &str) -> Result<()> {
    if target.dim() == 0 || target.size()[0] == 0 {
        return Err(Error::Data(format!("{what}: no samples")));
    }
    let s = target.size()[0];
    let flat = target.f_reshape([s, -1])?.f_to_kind(Kind::Double)?;
    let finite = flat.f_isfinite()?.f_all_dim(1, false)?;
    let norms = flat.f_square()?.f_sum_dim_intlist(1, false, Kind::Double)?;
    // One read: per sample 0 (fine), 1 (all zeros) or 2 (not finite).
    let verdict = norms
        .f_eq(0.0)?
        .f_to_kind(Kind::Int64)?
        .f_masked_fill(&finite.f_logical_not()?, 2)?;
    let verdict = host::to_vec_i64(&verdict)?;
    match verdict.iter().position(|&v| v != 0) {
        None => Ok(()),
        Some(first) => Err(Error::Data(if verdict[first] == 1 {
            format!("{what}: sample {first} is all zeros; its relative L2 error is undefined")
        } else {
            format!("{what}: sample {first} contains NaN or Inf")
        })),
    }
}

pub use ono_data::stencils::central_diff_2d;

/// ONO Darcy's derivative loss: the prediction's boundary ring is set to zero, then
/// Σ_b relL2(∂x pred, ∂x truth) + Σ_b relL2(∂y pred, ∂y truth), differences with step 1/s.
/// The truth is not boundary-zeroed (as the reference). Multiply by α = 0.1 and add to the
/// relative L2 for the full Darcy loss ([`darcy_loss`]).
///
/// # Shapes
/// - `pred`, `truth`: (B, s·s) or (B, s·s, 1), decoded (physical) values
/// - returns: ()
pub fn darcy_derivative_loss(pred: &Tensor, truth: &Tensor, s: i64) -> Result<Tensor> {
    let b = pred.size().first().copied().unwrap_or(0);
    if pred.size() != truth.size() || pred.numel() as i64 != b * s * s || b == 0 {
        return Err(Error::Shape {
            op: "darcy_derivative_loss",
            expected: format!("prediction and truth both (B, {}) for s = {s}", s * s),
            got: truth.size(),
        });
    }
    let inner = pred
        .f_reshape([b, s, s])?
        .f_narrow(1, 1, s - 2)?
        .f_narrow(2, 1, s - 2)?
        .f_constant_pad_nd([1, 1, 1, 1])?;
    let h = 1.0 / s as f64;
    let (px, py) = central_diff_2d(&inner, s, h)?;
    let (tx, ty) = central_diff_2d(truth, s, h)?;
    Ok(
        relative_l2(&px, &tx, Reduction::Sum, None)?.f_add(&relative_l2(
            &py,
            &ty,
            Reduction::Sum,
            None,
        )?)?,
    )
}

/// The full ONO Darcy training loss: Σ_b relL2 + α · derivative loss.
pub fn darcy_loss(pred: &Tensor, truth: &Tensor, s: i64, alpha: f64) -> Result<Tensor> {
    let b = pred.size()[0];
    let l2 = relative_l2(
        &pred.f_reshape([b, -1])?,
        &truth.f_reshape([b, -1])?,
        Reduction::Sum,
        None,
    )?;
    if alpha == 0.0 {
        return Ok(l2);
    }
    Ok(l2.f_add(&darcy_derivative_loss(pred, truth, s)?.f_mul_scalar(alpha)?)?)
}

/// The Galerkin Transformer's 1-D loss (`WeightedL2Loss(regularizer=True)`, `libs/ft.py`):
///
/// mean_b √(Σ(û−u)² / Σu²) + mean_b √(γh · Σ_interior(u′ − D̂û)² / Σu′²),
///
/// with D̂û_i = (û_{i+1} − û_{i−1})/(2h) on the interior points and u′ the target derivative
/// precomputed on the finest grid (the denominator sums u′ over every point). Without `du` (or
/// with γ = 0) only the first term (the reference's metric).
///
/// # Shapes
/// - `pred`, `u`, `du`: (B, n); `h` = 1/n, the step of the subsampled grid
pub fn galerkin_h1_loss_1d(
    pred: &Tensor,
    u: &Tensor,
    du: Option<&Tensor>,
    h: f64,
    gamma: f64,
) -> Result<Tensor> {
    let sz = pred.size();
    let du_ok = du.is_none_or(|d| d.size() == sz);
    if sz.len() != 2 || u.size() != sz || !du_ok || sz[1] < 3 {
        return Err(Error::Shape {
            op: "galerkin_h1_loss_1d",
            expected: "pred, u, du all (B, n) with n ≥ 3".into(),
            got: u.size(),
        });
    }
    let (n, k) = (sz[1], pred.kind());
    let sum_b = |t: &Tensor| t.f_sum_dim_intlist(1, false, k);
    let l2 = sum_b(&pred.f_sub(u)?.f_square()?)?
        .f_div(&sum_b(&u.f_square()?)?)?
        .f_sqrt()?
        .f_mean(k)?;
    let du = match du {
        Some(du) if gamma > 0.0 => du,
        _ => return Ok(l2),
    };
    let dpred = pred
        .f_narrow(1, 2, n - 2)?
        .f_sub(&pred.f_narrow(1, 0, n - 2)?)?
        .f_div_scalar(2.0 * h)?;
    let h1 = sum_b(&du.f_narrow(1, 1, n - 2)?.f_sub(&dpred)?.f_square()?)?
        .f_mul_scalar(gamma * h)?
        .f_div(&sum_b(&du.f_square()?)?)?
        .f_sqrt()?
        .f_mean(k)?;
    Ok(l2.f_add(&h1)?)
}

/// The target derivatives and the coefficient of the 2-D H¹ term.
pub struct DarcyH1Target<'a> {
    /// (B, n, n, 2): ∂u along the rows (axis 1) then along the columns (axis 2), precomputed on
    /// the finest grid.
    pub grad_u: &'a Tensor,
    /// (B, n, n): the raw (un-normalized) coefficient K.
    pub coeff: &'a Tensor,
}

/// The Galerkin Transformer's 2-D loss (`WeightedL2Loss2d(regularizer=True)`, `libs/ft.py`) on
/// an n×n grid, every mean as coded:
///
/// mean_b √(mean(û−u)² / (mean u² + ε)) +
/// mean_b √(γh · mean_{interior, 2 channels}[(K(∇u − ∇ₕû))²] / (2·mean_{n×n, 2 channels}(K·(∇u)²) + ε)),
///
/// ε = 1e-10, ∇ₕû the central differences on the interior (channel 0 along the rows). K appears
/// squared in the numerator and linearly in the normaliser, as coded. Without `h1` (or γ = 0)
/// only the first term (the reference's metric).
///
/// # Shapes
/// - `pred`, `u`: (B, n, n)
pub fn galerkin_h1_loss_2d(
    pred: &Tensor,
    u: &Tensor,
    h1: Option<DarcyH1Target<'_>>,
    h: f64,
    gamma: f64,
) -> Result<Tensor> {
    const EPS: f64 = 1e-10;
    let sz = pred.size();
    let h1_ok = h1
        .as_ref()
        .is_none_or(|t| t.coeff.size() == sz && t.grad_u.size() == [sz[0], sz[1], sz[2], 2]);
    if sz.len() != 3 || sz[1] < 3 || sz[2] < 3 || u.size() != sz || !h1_ok {
        return Err(Error::Shape {
            op: "galerkin_h1_loss_2d",
            expected: "pred, u, coeff (B, n1, n2) and grad_u (B, n1, n2, 2), n1, n2 ≥ 3".into(),
            got: pred.size(),
        });
    }
    let (n1, n2, k) = (sz[1], sz[2], pred.kind());
    let mean_b = |t: &Tensor| t.f_mean_dim(&[1i64, 2][..], false, k);
    let l2 = mean_b(&pred.f_sub(u)?.f_square()?)?
        .f_div(&mean_b(&u.f_square()?)?.f_add_scalar(EPS)?)?
        .f_sqrt()?
        .f_mean(k)?;
    let t = match h1 {
        Some(t) if gamma > 0.0 => t,
        _ => return Ok(l2),
    };
    let inner =
        |t: &Tensor| -> Result<Tensor> { Ok(t.f_narrow(1, 1, n1 - 2)?.f_narrow(2, 1, n2 - 2)?) };
    let d_rows = pred
        .f_narrow(1, 2, n1 - 2)?
        .f_narrow(2, 1, n2 - 2)?
        .f_sub(&pred.f_narrow(1, 0, n1 - 2)?.f_narrow(2, 1, n2 - 2)?)?;
    let d_cols = pred
        .f_narrow(1, 1, n1 - 2)?
        .f_narrow(2, 2, n2 - 2)?
        .f_sub(&pred.f_narrow(1, 1, n1 - 2)?.f_narrow(2, 0, n2 - 2)?)?;
    let grad_pred = Tensor::f_stack(&[d_rows, d_cols], 3)?.f_div_scalar(2.0 * h)?;
    let coeff = t.coeff.f_unsqueeze(3)?;
    let mean_all = |t: &Tensor| t.f_mean_dim(&[1i64, 2, 3][..], false, k);
    let norm = mean_all(&coeff.f_mul(&t.grad_u.f_square()?)?)?
        .f_mul_scalar(2.0)?
        .f_add_scalar(EPS)?;
    let num = mean_all(
        &inner(&coeff)?
            .f_mul(&inner(t.grad_u)?.f_sub(&grad_pred)?)?
            .f_square()?,
    )?;
    let h1 = num
        .f_mul_scalar(gamma * h)?
        .f_div(&norm)?
        .f_sqrt()?
        .f_mean(k)?;
    Ok(l2.f_add(&h1)?)
}

/// GNOT's training loss (`WeightedLpRelLoss(p=2)`, `data_utils.py`): for each sample and each
/// channel √(Σ_n (ŷ−y)² / Σ_n y²) over the sample's real points, averaged over samples ×
/// channels. A channel that is 0 in a sample gives NaN, as the reference (its issue #10).
///
/// # Shapes
/// - `pred`, `y`: (B, N, C); `mask`: (B, N) bool, optional
pub fn channel_relative_l2(pred: &Tensor, y: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    let sz = pred.size();
    let mask_ok = mask.is_none_or(|m| m.size() == sz[..2.min(sz.len())]);
    if sz.len() != 3 || y.size() != sz || !mask_ok {
        return Err(Error::Shape {
            op: "channel_relative_l2",
            expected: "pred and y (B, N, C), mask (B, N)".into(),
            got: y.size(),
        });
    }
    let k = pred.kind();
    let (mut err, mut norm) = (pred.f_sub(y)?.f_square()?, y.f_square()?);
    if let Some(m) = mask {
        let m = m.f_to_kind(k)?.f_unsqueeze(2)?;
        err = err.f_mul(&m)?;
        norm = norm.f_mul(&m)?;
    }
    let per = err
        .f_sum_dim_intlist(1, false, k)?
        .f_div(&norm.f_sum_dim_intlist(1, false, k)?)?
        .f_sqrt()?;
    Ok(per.f_mean(k)?)
}

/// How a time series is scored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct RolloutErrors {
    /// Mean over samples of the relative L2 of each step.
    pub per_step: Vec<f64>,
    /// Mean over samples of the relative L2 of the whole rollout, flattened (the reference's
    /// `test_full_loss`).
    pub full: f64,
}

/// Accumulates relative L2 errors over a test set on the device; one host read at the end.
pub struct MetricSum {
    sum: Option<Tensor>,
    per_step: Option<Tensor>,
    count: i64,
}

impl Default for MetricSum {
    fn default() -> Self {
        Self::new()
    }
}

impl MetricSum {
    /// An empty accumulator.
    pub fn new() -> Self {
        Self {
            sum: None,
            per_step: None,
            count: 0,
        }
    }

    /// Adds a batch: Σ_b relL2 over the whole sample (its real points, with `mask`).
    ///
    /// # Shapes
    /// - `pred`, `truth`: (B, ...); `mask`: (B, N)
    pub fn add(&mut self, pred: &Tensor, truth: &Tensor, mask: Option<&Tensor>) -> Result<()> {
        let s = relative_l2(pred, truth, Reduction::Sum, mask)?
            .f_detach()?
            .f_to_kind(Kind::Double)?;
        self.sum = Some(match self.sum.take() {
            Some(a) => a.f_add(&s)?,
            None => s,
        });
        self.count += pred.size()[0];
        Ok(())
    }

    /// Adds a batch of rollouts: the whole-rollout error and each step's.
    ///
    /// # Shapes
    /// - `pred`, `truth`: (B, N, C, T) or (B, N, T) with time last
    pub fn add_rollout(&mut self, pred: &Tensor, truth: &Tensor) -> Result<()> {
        let t = *pred.size().last().unwrap_or(&0);
        let steps = (0..t)
            .map(|i| {
                Ok(relative_l2(
                    &pred.f_select(-1, i)?,
                    &truth.f_select(-1, i)?,
                    Reduction::Sum,
                    None,
                )?)
            })
            .collect::<Result<Vec<_>>>()?;
        let steps = Tensor::f_stack(&steps, 0)?
            .f_detach()?
            .f_to_kind(Kind::Double)?;
        self.per_step = Some(match self.per_step.take() {
            Some(a) => a.f_add(&steps)?,
            None => steps,
        });
        self.add(pred, truth, None)
    }

    /// [`finish`](Self::finish) over several processes' sums: `sum_over` adds a tensor over
    /// them in place (the error sums, the per-step sums of `steps` steps and the counts); a
    /// process that saw no sample takes part with zeros.
    pub(crate) fn finish_summed(
        &self,
        steps: i64,
        device: tch::Device,
        sum_over: impl Fn(&Tensor) -> Result<()>,
    ) -> Result<RolloutErrors> {
        let opts = (Kind::Double, device);
        let full = match &self.sum {
            Some(s) => s.f_reshape([1])?.f_to_kind(Kind::Double)?,
            None => Tensor::f_zeros([1], opts)?,
        };
        let per_step = match &self.per_step {
            Some(p) => p.f_to_kind(Kind::Double)?,
            None => Tensor::f_zeros([steps], opts)?,
        };
        let count = Tensor::f_full([1], self.count as f64, opts)?;
        let all = Tensor::f_cat(&[full, count, per_step], 0)?;
        sum_over(&all)?;
        let values = host::to_vec_f64(&all)?;
        let n = values[1];
        if n == 0.0 {
            return Err(Error::Data("no evaluation samples".into()));
        }
        Ok(RolloutErrors {
            per_step: values[2..].iter().map(|v| v / n).collect(),
            full: values[0] / n,
        })
    }

    /// Samples seen.
    pub fn count(&self) -> i64 {
        self.count
    }

    /// The mean relative L2 (and per-step means for rollouts).
    pub fn finish(&self) -> Result<RolloutErrors> {
        let Some(sum) = &self.sum else {
            return Err(Error::Data("no evaluation samples".into()));
        };
        let n = self.count as f64;
        // One read: the full error first, then the per-step ones.
        let mut all = vec![sum.f_reshape([1])?.f_to_kind(Kind::Double)?];
        all.extend(self.per_step.iter().map(Tensor::shallow_clone));
        let values = host::to_vec_f64(&Tensor::f_cat(&all, 0)?)?;
        Ok(RolloutErrors {
            per_step: values[1..].iter().map(|v| v / n).collect(),
            full: values[0] / n,
        })
    }
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
            LossKind::Gnot => return channel_relative_l2(pred, y, t.mask),
            LossKind::RelL2 => {}
        }
        let sum = match (grid, self.alpha > 0.0) {
            (Some(g), true) => darcy_loss(pred, y, g[0], self.alpha)?,
            _ => relative_l2(pred, y, Reduction::Sum, t.mask)?,
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
                galerkin_h1_loss_1d(&p, &u, du.as_ref(), 1.0 / n as f64, self.h1_gamma)
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
                galerkin_h1_loss_2d(&p, &u, target, 1.0 / n1 as f64, self.h1_gamma)
            }
            _ => Err(Error::Data(
                "the galerkin_h1 loss needs targets on a 1-D or 2-D grid".into(),
            )),
        }
    }
}
