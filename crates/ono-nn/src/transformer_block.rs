//! Pre-norm transformer block: x ← Attn(LN₁ x) + x; x ← FFN(LN₂ x) + x (ONO's eigenfunction
//! stream, `ONOBlock` L272–273).

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::attention::{AttentionConfig, MultiHeadAttention};
use crate::mlp::{Mlp, MlpConfig};
use crate::norm::LayerNorm;
use crate::{Error, Result};

/// Settings of [`TransformerBlock`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransformerBlockConfig {
    /// The attention; `None` leaves only the FFN sub-layer (ONO's "no NN block" ablation).
    pub attention: Option<AttentionConfig>,
    /// Width h.
    pub dim: i64,
    /// FFN hidden width = `mlp_ratio`·h.
    pub mlp_ratio: i64,
}

impl TransformerBlockConfig {
    /// Registers `ln_1`, `Attn`, `ln_2` and `mlp` (the reference's names) on `path`.
    pub fn init(&self, path: &Path) -> Result<TransformerBlock> {
        if self.dim <= 0 || self.mlp_ratio <= 0 {
            return Err(Error::Config(format!(
                "transformer block needs dim > 0 and mlp_ratio > 0, got {} and {}",
                self.dim, self.mlp_ratio
            )));
        }
        let attention = match &self.attention {
            Some(cfg) => {
                if cfg.dim != self.dim {
                    return Err(Error::Config(format!(
                        "attention width {} differs from the block width {}",
                        cfg.dim, self.dim
                    )));
                }
                Some((
                    LayerNorm::new(&(path / "ln_1"), self.dim),
                    cfg.init(&(path / "Attn"))?,
                ))
            }
            None => None,
        };
        Ok(TransformerBlock {
            attention,
            ln_2: LayerNorm::new(&(path / "ln_2"), self.dim),
            mlp: MlpConfig::new(self.dim, self.dim * self.mlp_ratio, self.dim)
                .init(&(path / "mlp")),
        })
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct TransformerBlock {
    attention: Option<(LayerNorm, MultiHeadAttention)>,
    ln_2: LayerNorm,
    mlp: Mlp,
}

impl TransformerBlock {
    /// LN₁ and the attention (None in the "no NN block" ablation), LN₂ and the FFN: the parts
    /// the selective recomputation differentiates by hand.
    pub(crate) fn parts(&self) -> (Option<(&LayerNorm, &MultiHeadAttention)>, &LayerNorm, &Mlp) {
        (
            self.attention.as_ref().map(|(ln, a)| (ln, a)),
            &self.ln_2,
            &self.mlp,
        )
    }

    /// `mask` marks the real points of a padded batch (see [`crate::padding`]).
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        let x = match &self.attention {
            Some((ln_1, attn)) => attn.forward(&ln_1.forward(x)?, mask)?.f_add(x)?,
            None => x.shallow_clone(),
        };
        Ok(self.mlp.forward(&self.ln_2.forward(&x)?)?.f_add(&x)?)
    }

    /// The block at query points: x ← Attn(LN₁ x, LN₁ context) + x, then the FFN. With
    /// `context = x` this is [`Self::forward`].
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
        let x = match &self.attention {
            Some((ln_1, attn)) => attn
                .forward_cross(&ln_1.forward(x)?, &ln_1.forward(context)?, context_mask)?
                .f_add(x)?,
            None => x.shallow_clone(),
        };
        Ok(self.mlp.forward(&self.ln_2.forward(&x)?)?.f_add(&x)?)
    }
}
