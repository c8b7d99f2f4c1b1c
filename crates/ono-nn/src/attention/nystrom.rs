//! lucidrains nystrom-attention 0.0.11 `NystromAttention` (residual convolution on).

use tch::nn::{Init, Path};
use tch::Tensor;

use super::{check_input, merge_heads, qkv_heads, AttentionConfig};
use crate::linear::{Linear, LinearConfig};
use crate::precision::to_compute;
use crate::Result;
use ono_kernels::attention::{nystrom_front_pad, nystrom_with_pinv, NystromConfig};

/// `to_qkv`: Linear(dim, 3·H·d) without bias; `to_out.0`: Linear(H·d, dim);
/// `res_conv`: Conv2d(H, H, (33, 1), groups H, no bias), PyTorch's default init.
#[derive(Debug)]
pub struct NystromAttention {
    to_qkv: Linear,
    to_out: Linear,
    res_conv: Tensor,
    heads: i64,
    dim: i64,
    kernel: NystromConfig,
    conv_padding: i64,
}

impl NystromAttention {
    pub fn new(path: &Path, cfg: &AttentionConfig) -> Self {
        let inner = cfg.heads * cfg.head_dim();
        let taps = cfg.residual_conv_kernel;
        // kaiming_uniform(a=√5) of a depthwise conv: U(±1/√fan_in), fan_in = 1·taps·1.
        let bound = 1.0 / (taps as f64).sqrt();
        Self {
            to_qkv: LinearConfig::no_bias().init(&(path / "to_qkv"), cfg.dim, 3 * inner),
            to_out: LinearConfig::default().init(&(path / "to_out" / 0), inner, cfg.dim),
            res_conv: (path / "res_conv").var(
                "weight",
                &[cfg.heads, 1, taps, 1],
                Init::Uniform {
                    lo: -bound,
                    up: bound,
                },
            ),
            heads: cfg.heads,
            dim: cfg.dim,
            kernel: NystromConfig {
                landmarks: cfg.landmarks,
                pinv_iterations: cfg.pinv_iterations,
                ..NystromConfig::default()
            },
            conv_padding: taps / 2,
        }
    }

    /// The Newton–Schulz iterations of the pseudo-inverse.
    pub fn pinv_iterations(&self) -> usize {
        self.kernel.pinv_iterations
    }

    /// # Shapes
    /// - `x`: (B, N, dim)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let iterations = self.kernel.pinv_iterations;
        self.forward_with_pinv(x, &mut |a| {
            ono_kernels::attention::moore_penrose_pinv(a, iterations)
        })
    }

    /// [`Self::forward`] with the landmark attention's pseudo-inverse computed by `pinv` (see
    /// [`nystrom_with_pinv`]).
    ///
    /// # Shapes
    /// - `x`: (B, N, dim); `pinv` maps (B, H, m, m) to (B, H, m, m)
    /// - returns: (B, N, dim)
    pub fn forward_with_pinv(
        &self,
        x: &Tensor,
        pinv: &mut dyn FnMut(&Tensor) -> ono_kernels::Result<Tensor>,
    ) -> Result<Tensor> {
        check_input("NystromAttention", x, self.dim)?;
        let n = x.size()[1];
        let (q, k, v) = qkv_heads(&self.to_qkv, x, self.heads)?;
        let attn = nystrom_with_pinv(&q, &k, &v, &self.kernel, None, pinv)?;
        // The residual convolution runs over the front-padded sequence, so the first real tokens see
        // the padding's zeros, as in the reference; keep its last N rows.
        let padded = nystrom_front_pad(&v, self.kernel.landmarks)?;
        let conv = padded.f_conv2d(
            &to_compute(&self.res_conv)?,
            None::<&Tensor>,
            [1, 1],
            [self.conv_padding, 0],
            [1, 1],
            self.heads,
        )?;
        let total = conv.size()[2];
        let out = attn.f_add(&conv.f_narrow(2, total - n, n)?)?;
        self.to_out.forward(&merge_heads(&out)?)
    }
}
