//! lucidrains nystrom-attention 0.0.11 `NystromAttention` (residual convolution on).

use tch::nn::{Init, Path};
use tch::Tensor;

use super::{check_masked_input, merge_heads, qkv_heads, AttentionConfig, Landmarks, NystromPlan};
use crate::linear::{Linear, LinearConfig};
use crate::padding::prefix_lengths;
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
    landmarks: Landmarks,
    pinv_iterations: usize,
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
            landmarks: cfg.landmarks,
            pinv_iterations: cfg.pinv_iterations,
            conv_padding: taps / 2,
        }
    }

    /// The Newton–Schulz iterations of the pseudo-inverse.
    pub fn pinv_iterations(&self) -> usize {
        self.pinv_iterations
    }

    /// With a padding `mask`, each sample attends over its own real points exactly as it would
    /// alone: the landmarks are segments of one sequence, so a padded row cannot be masked out of
    /// them, and the samples run one after the other (their lengths read to the host once).
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let iterations = self.pinv_iterations;
        self.forward_with_pinv(x, mask, &mut |a| {
            ono_kernels::attention::moore_penrose_pinv(a, iterations)
        })
    }

    /// [`Self::forward`] with the landmark attention's pseudo-inverse computed by `pinv` (see
    /// [`nystrom_with_pinv`]), called once per sequence that takes landmarks: once for an
    /// unpadded batch, once per sample of a padded one, in the samples' order.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N); `pinv` maps (B, H, m, m) to (B, H, m, m)
    /// - returns: (B, N, dim)
    pub fn forward_with_pinv(
        &self,
        x: &Tensor,
        mask: Option<&Tensor>,
        pinv: &mut dyn FnMut(&Tensor) -> ono_kernels::Result<Tensor>,
    ) -> Result<Tensor> {
        const OP: &str = "NystromAttention";
        ono_kernels::points::refuse(
            "Nyström attention",
            "its landmarks are means over segments of the whole sequence",
        )?;
        check_masked_input(OP, x, self.dim, mask)?;
        let (q, k, v) = qkv_heads(&self.to_qkv, x, self.heads)?;
        let out = match mask {
            None => self.attend(&q, &k, &v, pinv)?,
            Some(mask) => {
                let n = x.size()[1];
                let lengths = prefix_lengths(OP, mask)?;
                let mut parts = Vec::with_capacity(lengths.len());
                for (i, &len) in lengths.iter().enumerate() {
                    let take = |t: &Tensor| -> Result<Tensor> {
                        Ok(t.f_narrow(0, i as i64, 1)?.f_narrow(2, 0, len)?)
                    };
                    let o = self.attend(&take(&q)?, &take(&k)?, &take(&v)?, pinv)?;
                    parts.push(o.f_constant_pad_nd([0, 0, 0, n - len])?);
                }
                Tensor::f_cat(&parts, 0)?
            }
        };
        self.to_out.forward(&merge_heads(&out)?)
    }

    /// The attention and the residual convolution on sequences of one length.
    ///
    /// # Shapes
    /// - `q`, `k`, `v`: (B, H, n, d)
    /// - returns: (B, H, n, d)
    fn attend(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        pinv: &mut dyn FnMut(&Tensor) -> ono_kernels::Result<Tensor>,
    ) -> Result<Tensor> {
        let n = q.size()[2];
        let conv = |v: &Tensor| -> Result<Tensor> {
            Ok(v.f_conv2d(
                &to_compute(&self.res_conv)?,
                None::<&Tensor>,
                [1, 1],
                [self.conv_padding, 0],
                [1, 1],
                self.heads,
            )?)
        };
        match self.landmarks.plan(n) {
            NystromPlan::Exact => {
                // The convolution's own zero padding is what the front padding would give.
                Ok(ono_kernels::attention::softmax(q, k, v, None)?.f_add(&conv(v)?)?)
            }
            NystromPlan::Landmarks {
                landmarks,
                mask_padding,
            } => {
                let cfg = NystromConfig {
                    landmarks,
                    pinv_iterations: self.pinv_iterations,
                    mask_padding,
                    ..NystromConfig::default()
                };
                let attn = nystrom_with_pinv(q, k, v, &cfg, None, pinv)?;
                // The residual convolution runs over the front-padded sequence, so the first real
                // tokens see the padding's zeros, as in the reference; keep its last n rows.
                let padded = conv(&nystrom_front_pad(v, landmarks)?)?;
                let total = padded.size()[2];
                Ok(attn.f_add(&padded.f_narrow(2, total - n, n)?)?)
            }
        }
    }
}
