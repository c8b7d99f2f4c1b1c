//! lucidrains linear-attention-transformer 0.19.1 `SelfAttention` with only global heads (ONO's
//! default NN block; its unused `LocalAttention` has no parameters).

use tch::nn::Path;
use tch::Tensor;

use super::{check_cross_input, merge_heads, split_heads, AttentionConfig};
use crate::linear::{Linear, LinearConfig};
use crate::Result;

/// `to_q`, `to_k`, `to_v`: Linear(dim, H·d) without bias; `to_out`: Linear(H·d, dim) with bias.
#[derive(Debug)]
pub struct LinearTransformerAttention {
    to_q: Linear,
    to_k: Linear,
    to_v: Linear,
    to_out: Linear,
    heads: i64,
    dim: i64,
}

impl LinearTransformerAttention {
    pub fn new(path: &Path, cfg: &AttentionConfig) -> Self {
        let inner = cfg.heads * cfg.head_dim();
        let nb = LinearConfig::no_bias();
        Self {
            to_q: nb.init(&(path / "to_q"), cfg.dim, inner),
            to_k: nb.init(&(path / "to_k"), cfg.dim, inner),
            to_v: nb.init(&(path / "to_v"), cfg.dim, inner),
            to_out: LinearConfig::default().init(&(path / "to_out"), inner, cfg.dim),
            heads: cfg.heads,
            dim: cfg.dim,
        }
    }

    /// `to_q`, `to_k`, `to_v`, `to_out` and the number of heads.
    pub(crate) fn parts(&self) -> ([&Linear; 4], i64) {
        (
            [&self.to_q, &self.to_k, &self.to_v, &self.to_out],
            self.heads,
        )
    }

    /// Padded keys (`mask` 0) get no weight, as the reference's `kv_mask`.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        self.forward_cross(x, x, mask)
    }

    /// Queries from `x`, keys and values from `context` (the reference's `receives_context`).
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
            (
                "LinearTransformerAttention",
                "LinearTransformerAttention (context)",
            ),
            x,
            context,
            self.dim,
            context_mask,
        )?;
        let q = split_heads(&self.to_q.forward(x)?, self.heads)?;
        let k = split_heads(&self.to_k.forward(context)?, self.heads)?;
        let v = split_heads(&self.to_v.forward(context)?, self.heads)?;
        let out = ono_kernels::attention::linear_transformer(&q, &k, &v, context_mask)?;
        self.to_out.forward(&merge_heads(&out)?)
    }
}
