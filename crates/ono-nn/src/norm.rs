//! LayerNorm, BatchNorm (`nn.BatchNorm1d/2d/3d`) and affine InstanceNorm
//! (`nn.InstanceNorm1d/2d/3d(affine = True)`) with PyTorch's defaults and parameter names.
//!
//! Under mixed precision each normalizes a 16-bit input in float32, with its float32 parameters
//! and statistics, and answers in the input's kind ([`crate::precision::widened`]).

use tch::nn::{Init, Path};
use tch::{Kind, Tensor};

use crate::precision::widened;
use crate::{Error, Result};

/// PyTorch's default eps of both norms.
pub const EPS: f64 = 1e-5;

/// LayerNorm over the last dimension: `weight` (1s) and `bias` (0s) of size `dim`, eps 1e-5.
#[derive(Debug)]
pub struct LayerNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    dim: i64,
    eps: f64,
}

impl LayerNorm {
    pub fn new(path: &Path, dim: i64) -> Self {
        Self::with_eps(path, dim, EPS)
    }

    /// `nn.LayerNorm(dim, eps = eps)`.
    pub fn with_eps(path: &Path, dim: i64, eps: f64) -> Self {
        Self {
            weight: path.var("weight", &[dim], Init::Const(1.0)),
            bias: path.var("bias", &[dim], Init::Const(0.0)),
            dim,
            eps,
        }
    }

    /// # Shapes
    /// - `x`: (..., dim)
    /// - returns: (..., dim)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        widened(x, self.weight.kind(), |x| {
            Ok(x.f_layer_norm(
                [self.dim],
                Some(&self.weight),
                Some(&self.bias),
                self.eps,
                true,
            )?)
        })
    }
}

/// BatchNorm over the channels of (B, C, …) (PyTorch's `BatchNorm1d/2d/3d`) with running statistics (`running_mean`, `running_var`,
/// `num_batches_tracked`, all non-trainable, saved with the model). Momentum 0.1, eps 1e-5; the
/// running variance is updated with the unbiased batch variance, as PyTorch does.
#[derive(Debug)]
pub struct BatchNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    pub running_mean: Tensor,
    pub running_var: Tensor,
    pub num_batches_tracked: Tensor,
    channels: i64,
    momentum: f64,
    eps: f64,
}

impl BatchNorm {
    pub fn new(path: &Path, channels: i64) -> Self {
        let dev = path.device();
        Self {
            weight: path.var("weight", &[channels], Init::Const(1.0)),
            bias: path.var("bias", &[channels], Init::Const(0.0)),
            running_mean: path.add(
                "running_mean",
                Tensor::zeros([channels], (path.kind(), dev)),
                false,
            ),
            running_var: path.add(
                "running_var",
                Tensor::ones([channels], (path.kind(), dev)),
                false,
            ),
            num_batches_tracked: path.add(
                "num_batches_tracked",
                Tensor::zeros([], (Kind::Int64, dev)),
                false,
            ),
            channels,
            momentum: 0.1,
            eps: EPS,
        }
    }

    fn check(&self, size: &[i64]) -> Result<()> {
        if size.len() < 2 || size[1] != self.channels {
            return Err(Error::Shape {
                op: "BatchNorm",
                expected: format!("(B, {}, …)", self.channels),
                got: size.to_vec(),
            });
        }
        Ok(())
    }

    /// PyTorch's `reset_running_stats`: mean 0, variance 1, no batches tracked.
    pub fn reset_running_stats(&self) -> Result<()> {
        let _guard = tch::no_grad_guard();
        let _ = self.running_mean.shallow_clone().f_zero_()?;
        let _ = self.running_var.shallow_clone().f_fill_(1.0)?;
        let _ = self.num_batches_tracked.shallow_clone().f_zero_()?;
        Ok(())
    }

    /// Training mode normalizes with the batch statistics over every axis but C and updates the running ones
    /// in place; eval mode uses the running statistics.
    ///
    /// # Shapes
    /// - `x`: (B, C, …)
    /// - returns: the shape of `x`
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let size = x.size();
        self.check(&size)?;
        if train {
            let _ = tch::no_grad(|| self.num_batches_tracked.shallow_clone().f_add_scalar_(1))?;
        }
        self.normalize(x, Some((&self.running_mean, &self.running_var)), train)
    }

    /// Training-mode normalization with the batch's statistics, leaving the running statistics
    /// and `num_batches_tracked` unchanged.
    ///
    /// # Shapes
    /// - `x`: (B, C, …)
    /// - returns: the shape of `x`
    pub fn forward_batch_statistics(&self, x: &Tensor) -> Result<Tensor> {
        let size = x.size();
        self.check(&size)?;
        self.normalize(x, None, true)
    }

    /// [`Self::forward`] on a padded batch: the training statistics are taken over the real
    /// points only (`update`: and folded into the running ones, counting the real points for
    /// the unbiased variance, as `batch_norm` counts every point); evaluation uses the running
    /// statistics, point by point.
    ///
    /// # Shapes
    /// - `x`: (B, C, N), `mask`: (B, N)
    /// - returns: (B, C, N)
    pub fn forward_masked(
        &self,
        x: &Tensor,
        mask: &Tensor,
        train: bool,
        update: bool,
    ) -> Result<Tensor> {
        let size = x.size();
        self.check(&size)?;
        let [b, _, n] = size[..] else {
            return Err(Error::Shape {
                op: "BatchNorm (masked)",
                expected: format!("(B, {}, N)", self.channels),
                got: size,
            });
        };
        crate::padding::check_mask("BatchNorm (masked)", mask, b, n)?;
        if !train {
            return self.normalize(x, Some((&self.running_mean, &self.running_var)), false);
        }
        widened(x, self.weight.kind(), |x| {
            let kind = x.kind();
            let w = mask.f_to_kind(kind)?.f_unsqueeze(1)?; // (B, 1, N)
            let count = w.f_sum(kind)?;
            let dims = [0i64, 2];
            let mean = x
                .f_mul(&w)?
                .f_sum_dim_intlist(&dims[..], true, kind)?
                .f_div(&count)?; // (1, C, 1)
            let centred = x.f_sub(&mean)?;
            let var = centred
                .f_square()?
                .f_mul(&w)?
                .f_sum_dim_intlist(&dims[..], true, kind)?
                .f_div(&count)?;
            if update {
                let _guard = tch::no_grad_guard();
                let m = self.momentum;
                let unbiased = var.f_mul(&count)?.f_div(&count.f_sub_scalar(1.0)?)?;
                for (running, batch) in
                    [(&self.running_mean, &mean), (&self.running_var, &unbiased)]
                {
                    let new = running
                        .f_mul_scalar(1.0 - m)?
                        .f_add(&batch.f_reshape([-1])?.f_mul_scalar(m)?)?;
                    running.shallow_clone().f_copy_(&new)?;
                }
                let _ = self.num_batches_tracked.shallow_clone().f_add_scalar_(1)?;
            }
            let scale = self.weight.f_view([1, -1, 1])?;
            let shift = self.bias.f_view([1, -1, 1])?;
            Ok(centred
                .f_mul(&var.f_add_scalar(self.eps)?.f_rsqrt()?)?
                .f_mul(&scale)?
                .f_add(&shift)?)
        })
    }

    /// `batch_norm` with (or without) the running statistics, widened under mixed precision.
    fn normalize(
        &self,
        x: &Tensor,
        running: Option<(&Tensor, &Tensor)>,
        train: bool,
    ) -> Result<Tensor> {
        let (mean, var) = running.unzip();
        widened(x, self.weight.kind(), |x| {
            Ok(x.f_batch_norm(
                Some(&self.weight),
                Some(&self.bias),
                mean,
                var,
                train,
                self.momentum,
                self.eps,
                true,
            )?)
        })
    }
}

/// InstanceNorm over the spatial axes of (B, C, …), each sample and channel on its own, with a
/// per-channel affine map: PyTorch's `InstanceNorm1d/2d/3d(C, affine = True)` with its default
/// `track_running_stats = False`, so training and evaluation are the same (biased variance,
/// eps 1e-5). `weight` 1s and `bias` 0s.
#[derive(Debug)]
pub struct InstanceNorm {
    pub weight: Tensor,
    pub bias: Tensor,
    channels: i64,
    eps: f64,
}

impl InstanceNorm {
    pub fn new(path: &Path, channels: i64) -> Self {
        Self {
            weight: path.var("weight", &[channels], Init::Const(1.0)),
            bias: path.var("bias", &[channels], Init::Const(0.0)),
            channels,
            eps: EPS,
        }
    }

    /// # Shapes
    /// - `x`: (B, C, n_1, …) with at least one spatial axis
    /// - returns: the shape of `x`
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let size = x.size();
        if size.len() < 3 || size[1] != self.channels {
            return Err(Error::Shape {
                op: "InstanceNorm",
                expected: format!("(B, {}, n_1, …)", self.channels),
                got: size,
            });
        }
        widened(x, self.weight.kind(), |x| {
            Ok(x.f_instance_norm(
                Some(&self.weight),
                Some(&self.bias),
                None::<&Tensor>,
                None::<&Tensor>,
                true,
                0.1,
                self.eps,
                true,
            )?)
        })
    }
}
