//! Plain scaled dot-product attention, for the NN-block ablation (no reference module: ONO offers
//! none; this follows the Nyström module's projection layout).

use tch::nn::Path;
use tch::Tensor;

use super::{
    check_cross_input, check_masked_input, merge_heads, qkv_heads, qkv_heads_cross, AttentionConfig,
};
use crate::linear::{Linear, LinearConfig};
use crate::Result;

/// `to_qkv`: Linear(dim, 3·H·d) without bias; `to_out.0`: Linear(H·d, dim).
#[derive(Debug)]
pub struct SoftmaxAttention {
    to_qkv: Linear,
    to_out: Linear,
    heads: i64,
    dim: i64,
}

impl SoftmaxAttention {
    pub fn new(path: &Path, cfg: &AttentionConfig) -> Self {
        let inner = cfg.heads * cfg.head_dim();
        Self {
            to_qkv: LinearConfig::no_bias().init(&(path / "to_qkv"), cfg.dim, 3 * inner),
            to_out: LinearConfig::default().init(&(path / "to_out" / 0), inner, cfg.dim),
            heads: cfg.heads,
            dim: cfg.dim,
        }
    }

    /// Quadratic in N: for ablations and small meshes. Padded keys get no weight.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        needs_every_key()?;
        check_masked_input("SoftmaxAttention", x, self.dim, mask)?;
        let (q, k, v) = qkv_heads(&self.to_qkv, x, self.heads)?;
        let out = ono_kernels::attention::softmax(&q, &k, &v, mask)?;
        self.to_out.forward(&merge_heads(&out)?)
    }

    /// Queries from `x`, keys and values from `context`.
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
        needs_every_key()?;
        check_cross_input(
            ("SoftmaxAttention", "SoftmaxAttention (context)"),
            x,
            context,
            self.dim,
            context_mask,
        )?;
        let (q, k, v) = qkv_heads_cross(&self.to_qkv, x, context, self.heads)?;
        let out = ono_kernels::attention::softmax(&q, &k, &v, context_mask)?;
        self.to_out.forward(&merge_heads(&out)?)
    }
}

/// Refuses split points ([`ono_kernels::points`]): a query's softmax weights are normalized over
/// every key of the sample.
fn needs_every_key() -> Result<()> {
    Ok(ono_kernels::points::refuse(
        "softmax attention over points",
        "each query's weights are normalized over every key",
    )?)
}
