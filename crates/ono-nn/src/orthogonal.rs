//! The orthogonal attention block of ONO (`ONOBlock`, `ONOmodel2.py` L214–297).
//!
//! Two streams of width h: `x` (eigenfunction / geometry) and `fx` (solution).
//! ```text
//! x  ← Attn(LN₁ x) + x ;  x ← FFN(LN₂ x) + x            (pre-norm NN block)
//! ψ  = proj(x)                                          (h → k, with bias)
//! ψ̃  = ψ L⁻ᵀ,  L Lᵀ = C                                  (train: C of this batch, EMA updated;
//!                                                         eval: C = EMA buffer)
//! fx ← (ψ̃ ⊙ softplus(μ)) (ψ̃ᵀ fx) + fx                   (sum over the N points, no 1/N;
//!                                                         or the mean: `kernel_scale`)
//! fx ← mlp2(LN₃ fx)                                     (no residual; the last block's mlp2 is
//!                                                         the output head Linear(h → out))
//! ```
//!
//! On a padded batch (a mask of the real points, [`crate::padding`]) the NN block's keys, the
//! covariance (or BatchNorm's statistics) and ψ̃ᵀf read the real points only, so every real point
//! gets what the same points laid out without padding would give. The covariance is pooled over
//! the batch like BatchNorm's statistics: the unpadded equal of a padded batch is the batch of
//! its samples, not each sample alone.
//!
//! Under mixed precision ([`crate::precision`]) the projections and the two kernel products run
//! in the compute kind; ψ is widened to float32 before its second moment, the Cholesky factor
//! and the whitening (the EMA buffer stays float32), and ψ̃ is cast down again for the kernel.

use serde::{Deserialize, Serialize};
use tch::nn::{Init, Path};
use tch::Tensor;

use crate::linear::{Linear, LinearConfig};
use crate::mlp::{Mlp, MlpConfig};
use crate::norm::{BatchNorm, LayerNorm};
use crate::precision::{matmul, widen};
use crate::transformer_block::{TransformerBlock, TransformerBlockConfig};
use crate::{Error, Result};
use ono_kernels::ema::EmaCovariance;
use ono_kernels::orthonormal::{
    cholesky_fault, cholesky_fault_error, psd_safe_cholesky_device, second_moment, whiten,
    whiten_explicit_inverse,
};
use ono_kernels::{health, points};

mod selective;
pub use selective::SavedBlock;

/// How ψ is normalized before the kernel (the ablation of the paper's Table 6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Orthogonalization {
    /// Whitening by the Cholesky factor of the pooled second moment (`--orth 1`).
    #[default]
    Orthonormal,
    /// `BatchNorm1d(k)` over (B, N) (`--orth 0`, the reference scripts' argparse default).
    BatchNorm,
    /// `LayerNorm(k)` per point (parameters `ln_psi`); not in the reference code.
    LayerNorm,
    /// ψ used as it comes.
    None,
}

/// How ψ̃ = ψ L⁻ᵀ is computed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whitening {
    /// `ψ @ L.inverse().T`, as the reference (default: bit-for-bit the reference's rounding path).
    #[default]
    ExplicitInverse,
    /// A triangular solve: the same mathematics, better conditioned.
    TriangularSolve,
}

/// How the kernel's sum over the input points is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelScale {
    /// Σ_n ψ̃ₙ fₙᵀ, as the reference: the output grows with the number of points.
    #[default]
    Sum,
    /// Σ_n ψ̃ₙ fₙᵀ / N over each sample's (real) points: the same operator on every mesh size.
    Mean,
}

/// Settings of [`OrthogonalBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OrthogonalBlockConfig {
    /// The pre-norm NN block of the eigenfunction stream.
    pub nn_block: TransformerBlockConfig,
    /// Number of eigenfunctions k (`psi_dim`).
    pub psi_dim: i64,
    pub orthogonalization: Orthogonalization,
    pub whitening: Whitening,
    /// EMA momentum of the covariance buffer (reference 0.9).
    pub momentum: f64,
    /// `Some(out)`: this is the last block and `mlp2` is the head Linear(h → out).
    pub head_out: Option<i64>,
    /// A second EMA buffer `feature_cov_q` for eigenfunctions evaluated at query points
    /// ([`OrthogonalBlock::forward_cross`], the cross-attention variant of the paper's eq. 20).
    #[serde(default)]
    pub query_covariance: bool,
    /// The scale of ψ̃ᵀf.
    #[serde(default)]
    pub kernel_scale: KernelScale,
}

impl OrthogonalBlockConfig {
    /// Registers the reference's names: `mu`, `bn` (or `ln_psi`), `ln_1`, `Attn`, `ln_2`, `mlp`,
    /// `proj`, `ln_3`, `mlp2`, and the buffer `feature_cov` (+ `feature_cov_count`).
    pub fn init(&self, path: &Path) -> Result<OrthogonalBlock> {
        let h = self.nn_block.dim;
        let k = self.psi_dim;
        if k <= 0 {
            return Err(Error::Config(format!("psi_dim must be positive, got {k}")));
        }
        if let Some(out) = self.head_out {
            if out <= 0 {
                return Err(Error::Config(format!(
                    "out_dim must be positive, got {out}"
                )));
            }
        }
        let nn_block = self.nn_block.init(path)?;
        let norm = match self.orthogonalization {
            Orthogonalization::Orthonormal => PsiNorm::Whiten(EmaCovariance::new(
                path,
                "feature_cov",
                k,
                self.momentum,
                path.kind(),
            )?),
            Orthogonalization::BatchNorm => PsiNorm::Batch(BatchNorm::new(&(path / "bn"), k)),
            Orthogonalization::LayerNorm => PsiNorm::Layer(LayerNorm::new(&(path / "ln_psi"), k)),
            Orthogonalization::None => PsiNorm::None,
        };
        let query_cov = match (self.query_covariance, self.orthogonalization) {
            (false, _) => None,
            (true, Orthogonalization::Orthonormal) => Some(EmaCovariance::new(
                path,
                "feature_cov_q",
                k,
                self.momentum,
                path.kind(),
            )?),
            (true, Orthogonalization::BatchNorm) => {
                return Err(Error::Config(
                    "the cross-attention block supports orthonormal, layer_norm or no \
                     orthogonalization, not batch_norm"
                        .into(),
                ))
            }
            (true, _) => None,
        };
        let mlp2 = match self.head_out {
            Some(out) => Head::Linear(LinearConfig::default().init(&(path / "mlp2"), h, out)),
            None => {
                Head::Mlp(MlpConfig::new(h, h * self.nn_block.mlp_ratio, h).init(&(path / "mlp2")))
            }
        };
        Ok(OrthogonalBlock {
            mu: path.var("mu", &[k], Init::Const(0.0)),
            nn_block,
            proj: LinearConfig::default().init(&(path / "proj"), h, k),
            norm,
            ln_3: LayerNorm::new(&(path / "ln_3"), h),
            mlp2,
            whitening: self.whitening,
            kernel_scale: self.kernel_scale,
            query_cov,
            frozen_statistics: std::cell::Cell::new(false),
        })
    }
}

#[derive(Debug)]
enum PsiNorm {
    Whiten(EmaCovariance),
    Batch(BatchNorm),
    Layer(LayerNorm),
    None,
}

#[derive(Debug)]
enum Head {
    Mlp(Mlp),
    Linear(Linear),
}

/// ψ̃ᵀf = scale · Σ_n wₙ ψ̃ₙ fₙᵀ: `points` zeroes the padding (None: every point counts), `scale`
/// is 1 / (real points) for `kernel_scale = "mean"` (None: the reference's plain sum).
struct KernelWeights {
    /// (B, N, 1)
    points: Option<Tensor>,
    /// (B, 1, 1) or (1, 1, 1)
    scale: Option<Tensor>,
}

impl KernelWeights {
    /// ψ̃ with its padded rows zeroed.
    fn weighted(&self, psi: &Tensor) -> Result<Tensor> {
        Ok(match &self.points {
            Some(w) => psi.f_mul(w)?,
            None => psi.shallow_clone(),
        })
    }

    /// The scale applied to a (B, k, h) sum.
    fn scaled(&self, sum: Tensor) -> Result<Tensor> {
        Ok(match &self.scale {
            Some(c) => sum.f_mul(&c.f_to_kind(sum.kind())?)?,
            None => sum,
        })
    }

    /// ψ̃ᵀf, (B, k, h): the sum over every process's points when they are split
    /// ([`ono_kernels::points`]).
    fn coefficients(&self, psi: &Tensor, fx: &Tensor) -> Result<Tensor> {
        let local = matmul(&self.weighted(psi)?.f_transpose(-2, -1)?, fx)?;
        self.scaled(points::sum(&local)?)
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct OrthogonalBlock {
    mu: Tensor,
    nn_block: TransformerBlock,
    proj: Linear,
    norm: PsiNorm,
    ln_3: LayerNorm,
    mlp2: Head,
    whitening: Whitening,
    kernel_scale: KernelScale,
    query_cov: Option<EmaCovariance>,
    /// Training mode without updating the running statistics: the recomputation pass of
    /// activation checkpointing must not count a batch twice.
    frozen_statistics: std::cell::Cell<bool>,
}

impl OrthogonalBlock {
    /// While frozen, training-mode passes still normalize with the batch's statistics but leave
    /// the EMA covariance and BatchNorm's running statistics untouched.
    pub fn set_statistics_frozen(&self, frozen: bool) {
        self.frozen_statistics.set(frozen);
    }

    /// One block on both streams. `train` selects the batch covariance (and updates the EMA
    /// buffer, or BatchNorm's running statistics) versus the stored statistics. `mask` marks the
    /// real points of a padded batch.
    ///
    /// # Shapes
    /// - `x`: (B, N, h), `fx`: (B, N, h), `mask`: (B, N)
    /// - returns: `x` (B, N, h) and `fx` (B, N, h), or (B, N, out) from the last block
    pub fn forward(
        &self,
        x: &Tensor,
        fx: &Tensor,
        mask: Option<&Tensor>,
        train: bool,
    ) -> Result<(Tensor, Tensor)> {
        let x = self.nn_block.forward(x, mask)?;
        let psi = self.eigenfunctions(&x, mask, train)?;
        let fx = self.kernel(&psi, &psi, fx, mask, true)?;
        let fx = self.head(&fx)?;
        Ok((x, fx))
    }

    /// The first block of the cross-attention variant (paper eq. 20): the eigenfunction stream is
    /// advanced at the input points X (self-attention) and at the query points Y (queries Y,
    /// keys X, the same weights); ψ̃(X) and ψ̃(Y) are whitened with their own covariances
    /// (`feature_cov`, `feature_cov_q`), each over its real points; the solution moves from X to
    /// Y without residual: fx(Y) = mlp2(LN₃((ψ̃(Y) ⊙ softplus μ) ψ̃(X)ᵀ fx(X))).
    ///
    /// # Shapes
    /// - `x`: (B, N, h) and `fx`: (B, N, h) at X, `mask`: (B, N); `x_query`: (B, M, h) at Y,
    ///   `query_mask`: (B, M)
    /// - returns: the eigenfunction stream (B, M, h) and fx (B, M, h or out) at Y
    pub fn forward_cross(
        &self,
        (x, fx, mask): (&Tensor, &Tensor, Option<&Tensor>),
        (x_query, query_mask): (&Tensor, Option<&Tensor>),
        train: bool,
    ) -> Result<(Tensor, Tensor)> {
        let x_query = self.nn_block.forward_cross(x_query, x, mask)?;
        let x = self.nn_block.forward(x, mask)?;
        let psi_in = self.eigenfunctions(&x, mask, train)?;
        let psi_raw = self.proj.forward(&x_query)?;
        let psi_out = match (&self.norm, &self.query_cov) {
            (PsiNorm::Whiten(_), Some(ema)) => {
                self.whiten_with(ema, &psi_raw, query_mask, train)?
            }
            (PsiNorm::Whiten(_), None) => {
                return Err(Error::Config(
                    "forward_cross needs a block built with query_covariance = true".into(),
                ))
            }
            _ => self.normalize(&psi_raw, query_mask, train)?,
        };
        let fx = self.kernel(&psi_out, &psi_in, fx, mask, false)?;
        Ok((x_query, self.head(&fx)?))
    }

    fn whiten_with(
        &self,
        ema: &EmaCovariance,
        psi: &Tensor,
        mask: Option<&Tensor>,
        train: bool,
    ) -> Result<Tensor> {
        // Once here rather than in each of the three kernels below, which would widen it again.
        let psi = &widen(psi)?;
        let cov = if train {
            let cov = second_moment(psi, mask)?;
            if !self.frozen_statistics.get() {
                ema.update(&cov)?;
            }
            cov
        } else {
            ema.value()?
        };
        // Inside a training step the verdict stays on the device (a failed factor is NaN) until
        // the trainer reads it at its logging interval; elsewhere it is read here.
        let (l, status) = psd_safe_cholesky_device(&cov)?;
        let kind = cov.kind();
        health::check(
            "OrthogonalBlock: Cholesky factor of the covariance",
            &cholesky_fault(&status)?,
            move |fault| Error::Kernel(cholesky_fault_error(fault, kind)),
        )?;
        Ok(match self.whitening {
            Whitening::ExplicitInverse => whiten_explicit_inverse(psi, &l)?,
            Whitening::TriangularSolve => whiten(psi, &l)?,
        })
    }

    /// ψ̃ at the points of `x` (already through the NN block): projection then normalization,
    /// its statistics over the real points of `mask`.
    ///
    /// # Shapes
    /// - `x`: (B, N, h), `mask`: (B, N)
    /// - returns: (B, N, k)
    pub fn eigenfunctions(&self, x: &Tensor, mask: Option<&Tensor>, train: bool) -> Result<Tensor> {
        let psi = self.proj.forward(x)?;
        self.normalize(&psi, mask, train)
    }

    /// Normalizes raw ψ (the projection's output) as configured, with the statistics of the real
    /// points of `mask` in training.
    ///
    /// # Shapes
    /// - `psi`: (B, N, k), `mask`: (B, N)
    /// - returns: (B, N, k)
    pub fn normalize(&self, psi: &Tensor, mask: Option<&Tensor>, train: bool) -> Result<Tensor> {
        match &self.norm {
            PsiNorm::Whiten(ema) => self.whiten_with(ema, psi, mask, train),
            PsiNorm::Batch(bn) => {
                points::refuse(
                    "BatchNorm of the eigenfunctions (psi_norm = \"batch\")",
                    "its statistics span every point of the batch",
                )?;
                let x = psi.f_transpose(1, 2)?;
                let frozen = self.frozen_statistics.get();
                let y = match mask {
                    Some(mask) => bn.forward_masked(&x, mask, train, !frozen)?,
                    None if train && frozen => bn.forward_batch_statistics(&x)?,
                    None => bn.forward(&x, train)?,
                };
                Ok(y.f_transpose(1, 2)?)
            }
            PsiNorm::Layer(ln) => ln.forward(psi),
            PsiNorm::None => Ok(psi.shallow_clone()),
        }
    }

    /// (ψ̃_out ⊙ softplus(μ)) (ψ̃_inᵀ fx) [+ fx]: the orthogonal attention, summed over the (real)
    /// input points, with no 1/N unless `kernel_scale` is `mean`. The residual needs the output
    /// points to be the input points. Both products run in the compute kind; the residual sum
    /// takes the wider of the two kinds.
    ///
    /// # Shapes
    /// - `psi_out`: (B, M, k), `psi_in`: (B, N, k), `fx`: (B, N, h), `mask_in`: (B, N)
    /// - returns: (B, M, h)
    pub fn kernel(
        &self,
        psi_out: &Tensor,
        psi_in: &Tensor,
        fx: &Tensor,
        mask_in: Option<&Tensor>,
        residual: bool,
    ) -> Result<Tensor> {
        let w = self.kernel_weights(psi_in, mask_in)?;
        let coeff = w.coefficients(psi_in, fx)?; // (B, k, h)
        let out = matmul(&psi_out.f_mul(&self.mu.f_softplus()?)?, &coeff)?;
        Ok(if residual { out.f_add(fx)? } else { out })
    }

    /// The weights of the input points in ψ̃ᵀf.
    fn kernel_weights(&self, psi_in: &Tensor, mask: Option<&Tensor>) -> Result<KernelWeights> {
        let [b, n] = match psi_in.size()[..] {
            [b, n, _] => [b, n],
            _ => {
                return Err(Error::Shape {
                    op: "OrthogonalBlock::kernel",
                    expected: "psi_in of shape (B, N, k)".into(),
                    got: psi_in.size(),
                })
            }
        };
        let kind = psi_in.kind();
        let points = match mask {
            Some(m) => {
                crate::padding::check_mask("OrthogonalBlock::kernel", m, b, n)?;
                Some(crate::padding::point_weights(m, kind)?)
            }
            None => None,
        };
        let scale = match (self.kernel_scale, mask) {
            (KernelScale::Sum, _) => None,
            (KernelScale::Mean, Some(m)) => {
                Some(points::sum(&crate::padding::point_counts(m, kind)?)?.f_reciprocal()?)
            }
            (KernelScale::Mean, None) if points::split() => {
                let count = Tensor::f_full([1, 1, 1], n as f64, (kind, psi_in.device()))?;
                Some(points::sum(&count)?.f_reciprocal()?)
            }
            (KernelScale::Mean, None) => Some(Tensor::f_full(
                [1, 1, 1],
                1.0 / n as f64,
                (kind, psi_in.device()),
            )?),
        };
        Ok(KernelWeights { points, scale })
    }

    /// LN₃ → mlp2 (no residual).
    ///
    /// # Shapes
    /// - `fx`: (B, N, h)
    /// - returns: (B, N, h) or (B, N, out) for the last block
    pub fn head(&self, fx: &Tensor) -> Result<Tensor> {
        let fx = self.ln_3.forward(fx)?;
        match &self.mlp2 {
            Head::Mlp(m) => m.forward(&fx),
            Head::Linear(l) => l.forward(&fx),
        }
    }

    /// Forgets the running statistics (EMA covariance, BatchNorm statistics); eval then behaves as
    /// before any training step.
    pub fn reset_statistics(&self) -> Result<()> {
        if let Some(ema) = &self.query_cov {
            ema.reset()?;
        }
        match &self.norm {
            PsiNorm::Whiten(ema) => ema.reset()?,
            PsiNorm::Batch(bn) => bn.reset_running_stats()?,
            PsiNorm::Layer(_) | PsiNorm::None => {}
        }
        Ok(())
    }

    /// The pre-norm NN block of the eigenfunction stream.
    pub fn nn_block(&self) -> &TransformerBlock {
        &self.nn_block
    }

    /// The EMA covariance of the query points (cross-attention blocks only).
    pub fn query_covariance(&self) -> Option<&EmaCovariance> {
        self.query_cov.as_ref()
    }

    /// The EMA covariance buffer (orthonormal blocks only).
    pub fn covariance(&self) -> Option<&EmaCovariance> {
        match &self.norm {
            PsiNorm::Whiten(ema) => Some(ema),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ono_kernels::host;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn block(vs: &VarStore) -> OrthogonalBlock {
        OrthogonalBlockConfig {
            nn_block: TransformerBlockConfig {
                attention: None,
                dim: 8,
                mlp_ratio: 2,
            },
            psi_dim: 3,
            orthogonalization: Orthogonalization::Orthonormal,
            whitening: Whitening::ExplicitInverse,
            momentum: 0.9,
            head_out: None,
            query_covariance: false,
            kernel_scale: KernelScale::Sum,
        }
        .init(&vs.root())
        .unwrap()
    }

    #[test]
    fn a_deferred_cholesky_failure_gives_nan_and_the_typed_error_at_the_check() {
        let _rng = ono_testing::torch_rng_lock();
        tch::manual_seed(2);
        let vs = VarStore::new(Device::Cpu);
        let b = block(&vs);
        let x = Tensor::randn([2, 10, 8], (Kind::Float, Device::Cpu));
        let fx = Tensor::randn([2, 10, 8], (Kind::Float, Device::Cpu));

        // A healthy training step gives the same output deferred or not, and reads nothing.
        let (_, at_once) = b.forward(&x, &fx, None, true).unwrap();
        let monitor = health::Monitor::new();
        let reads = host::host_reads();
        let (_, deferred) = {
            let _scope = monitor.enter(0);
            b.forward(&x, &fx, None, true).unwrap()
        };
        assert_eq!(host::host_reads(), reads);
        assert!(deferred.equal(&at_once));
        assert!(monitor.check().unwrap().is_none());

        // A covariance no jitter of the ladder repairs (float: up to 1e3).
        let ema = b.covariance().unwrap();
        let bad = Tensor::eye(3, (Kind::Float, Device::Cpu)) * -1e6;
        tch::no_grad(|| ema.buffer().shallow_clone().copy_(&bad));
        let err = b.forward(&x, &fx, None, false).unwrap_err();
        assert!(
            matches!(err, Error::Kernel(ono_kernels::Error::NotPositiveDefinite { max_jitter, .. }) if (max_jitter - 1e3).abs() < 1e-9),
            "{err}"
        );
        let (_, out) = {
            let _scope = monitor.enter(5);
            b.forward(&x, &fx, None, false).unwrap()
        };
        assert!(out.isnan().all().int64_value(&[]) != 0, "NaN, not garbage");
        let failure = monitor.check().unwrap().expect("the failure");
        assert_eq!(failure.step, 5);
        let typed = failure.error.downcast::<Error>().unwrap();
        assert!(matches!(
            *typed,
            Error::Kernel(ono_kernels::Error::NotPositiveDefinite { .. })
        ));
    }
}
