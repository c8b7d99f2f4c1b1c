//! ONO's in-file `LinearAttention(attn_type='galerkin', use_ln=True)` (`ONOmodel2.py` L142–211).

use tch::nn::Path;
use tch::Tensor;

use super::{
    check_cross_input, check_masked_input, merge_heads, qkv_heads, qkv_heads_cross, AttentionConfig,
};
use crate::linear::{Linear, LinearConfig};
use crate::norm::LayerNorm;
use crate::Result;

/// `to_qkv`: Linear(dim, 3·H·d) without bias; `k_norm`, `v_norm`: LayerNorm(d) shared by the
/// heads; `to_out.0`: Linear(H·d, dim). out = q (k̃ᵀ ṽ) / N.
#[derive(Debug)]
pub struct OnoGalerkinAttention {
    to_qkv: Linear,
    k_norm: LayerNorm,
    v_norm: LayerNorm,
    to_out: Linear,
    heads: i64,
    dim: i64,
}

impl OnoGalerkinAttention {
    pub fn new(path: &Path, cfg: &AttentionConfig) -> Self {
        let d = cfg.head_dim();
        let inner = cfg.heads * d;
        Self {
            to_qkv: LinearConfig::no_bias().init(&(path / "to_qkv"), cfg.dim, 3 * inner),
            k_norm: LayerNorm::new(&(path / "k_norm"), d),
            v_norm: LayerNorm::new(&(path / "v_norm"), d),
            to_out: LinearConfig::default().init(&(path / "to_out" / 0), inner, cfg.dim),
            heads: cfg.heads,
            dim: cfg.dim,
        }
    }

    /// With a padding `mask` the sum runs over each sample's real points and is divided by
    /// their number.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        check_masked_input("OnoGalerkinAttention", x, self.dim, mask)?;
        let (q, k, v) = qkv_heads(&self.to_qkv, x, self.heads)?;
        let k = self.k_norm.forward(&k)?;
        let v = self.v_norm.forward(&v)?;
        let out = ono_kernels::attention::galerkin(&q, &k, &v, mask)?;
        self.to_out.forward(&merge_heads(&out)?)
    }

    /// Queries from `x`, keys and values from `context`. The sum over the N context points is
    /// divided by N, or by each sample's real context points under `context_mask` (the
    /// quadrature weight of the points integrated over; the reference's self form divides by
    /// the query length, which is the same number there).
    ///
    /// # Shapes
    /// - `x`: (B, M, dim), `context`: (B, N, dim), `context_mask`: (B, N)
    /// - returns: (B, M, dim)
    pub fn forward_cross(
        &self,
        x: &Tensor,
        context: &Tensor,
        context_mask: Option<&Tensor>,
    ) -> Result<Tensor> {
        check_cross_input(
            ("OnoGalerkinAttention", "OnoGalerkinAttention (context)"),
            x,
            context,
            self.dim,
            context_mask,
        )?;
        let (m, n) = (x.size()[1], context.size()[1]);
        let (q, k, v) = qkv_heads_cross(&self.to_qkv, x, context, self.heads)?;
        let k = self.k_norm.forward(&k)?;
        let v = self.v_norm.forward(&v)?;
        let out = ono_kernels::attention::galerkin(&q, &k, &v, context_mask)?;
        // Unmasked, the kernel divides by the query length M; rescale to 1/N. Masked, it
        // divides by the real keys already.
        let out = match context_mask {
            None => out.f_mul_scalar(m as f64 / n as f64)?,
            Some(_) => out,
        };
        self.to_out.forward(&merge_heads(&out)?)
    }
}
