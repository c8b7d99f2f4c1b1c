//! Multi-head attention modules around the ono-kernels attentions, each with the projections of the
//! reference module it ports (parameter names included, so reference `state_dict`s load as is).
//!
//! | kind | reference module | parameters |
//! |---|---|---|
//! | [`AttentionKind::LinearTransformer`] | lucidrains linear-attention-transformer 0.19.1 `SelfAttention` | `to_q`, `to_k`, `to_v` (no bias), `to_out` |
//! | [`AttentionKind::Nystrom`] | lucidrains nystrom-attention 0.0.11 `NystromAttention` | `to_qkv` (no bias), `to_out.0`, `res_conv` (33-tap depthwise) |
//! | [`AttentionKind::Galerkin`] | ONO's in-file `LinearAttention(attn_type='galerkin', use_ln=True)` | `to_qkv` (no bias), `k_norm`, `v_norm`, `to_out.0` |
//! | [`AttentionKind::Softmax`] | none (an ablation): scaled dot-product attention | `to_qkv` (no bias), `to_out.0` |
//!
//! The other models' attentions live here too, each in a module named by its source:
//! [`simple_attention`] (the Galerkin Transformer's `SimpleAttention`), [`gnot`] (GNOT's
//! normalized linear self- and cross-attention) and [`physics`] (Transolver's
//! Physics-Attention).

pub mod gnot;
mod landmarks;
mod linear_transformer;
mod nystrom;
mod ono_galerkin;
pub mod physics;
pub mod simple_attention;
mod softmax;

pub use landmarks::{Landmarks, NystromPlan, AUTO_LANDMARKS};
pub use linear_transformer::LinearTransformerAttention;
pub use nystrom::NystromAttention;
pub use ono_galerkin::OnoGalerkinAttention;
pub use softmax::SoftmaxAttention;

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::precision::to_compute;
use crate::{Error, Result};

/// Which attention an NN block uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionKind {
    /// ONO's default block (`attn_type=None`).
    #[default]
    LinearTransformer,
    Nystrom,
    Galerkin,
    Softmax,
}

/// Settings of [`MultiHeadAttention`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct AttentionConfig {
    pub kind: AttentionKind,
    /// Model width h (input and output channels).
    pub dim: i64,
    pub heads: i64,
    /// Channels per head; 0 means dim / heads (what every ONO configuration uses).
    pub dim_head: i64,
    /// Nyström landmarks (reference 256), or `auto` ([`Landmarks`]).
    pub landmarks: Landmarks,
    /// Nyström pseudo-inverse iterations (reference 6).
    pub pinv_iterations: usize,
    /// Taps of Nyström's depthwise residual convolution (reference 33).
    pub residual_conv_kernel: i64,
}

impl Default for AttentionConfig {
    fn default() -> Self {
        Self {
            kind: AttentionKind::default(),
            dim: 128,
            heads: 8,
            dim_head: 0,
            landmarks: Landmarks::Fixed(256),
            pinv_iterations: 6,
            residual_conv_kernel: 33,
        }
    }
}

impl AttentionConfig {
    /// Channels per head after resolving the `0 = dim / heads` default.
    pub fn head_dim(&self) -> i64 {
        if self.dim_head > 0 {
            self.dim_head
        } else {
            self.dim / self.heads.max(1)
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.dim <= 0 || self.heads <= 0 {
            return Err(Error::Config(format!(
                "attention needs dim > 0 and heads > 0, got dim {} heads {}",
                self.dim, self.heads
            )));
        }
        if self.dim_head == 0 && self.dim % self.heads != 0 {
            return Err(Error::Config(format!(
                "attention: {} heads do not divide the width {}",
                self.heads, self.dim
            )));
        }
        if self.dim_head < 0 || self.residual_conv_kernel % 2 == 0 {
            return Err(Error::Config(format!(
                "attention: dim_head {} must be ≥ 0 and the residual convolution {} odd",
                self.dim_head, self.residual_conv_kernel
            )));
        }
        self.landmarks.validate()?;
        Ok(())
    }

    pub fn init(&self, path: &Path) -> Result<MultiHeadAttention> {
        self.validate()?;
        Ok(match self.kind {
            AttentionKind::LinearTransformer => {
                MultiHeadAttention::LinearTransformer(LinearTransformerAttention::new(path, self))
            }
            AttentionKind::Nystrom => {
                MultiHeadAttention::Nystrom(NystromAttention::new(path, self))
            }
            AttentionKind::Galerkin => {
                MultiHeadAttention::Galerkin(OnoGalerkinAttention::new(path, self))
            }
            AttentionKind::Softmax => {
                MultiHeadAttention::Softmax(SoftmaxAttention::new(path, self))
            }
        })
    }
}

/// One of the attention modules, behind one `forward`.
#[derive(Debug)]
pub enum MultiHeadAttention {
    LinearTransformer(LinearTransformerAttention),
    Nystrom(NystromAttention),
    Galerkin(OnoGalerkinAttention),
    Softmax(SoftmaxAttention),
}

impl MultiHeadAttention {
    /// Self-attention over the points. With a padding `mask` (1 = real point; see
    /// [`crate::padding`]) the real points attend to real points only, exactly as each sample
    /// would without padding; padded rows get finite values that reach no real point.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim), `mask`: (B, N)
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
        match self {
            Self::LinearTransformer(a) => a.forward(x, mask),
            Self::Nystrom(a) => a.forward(x, mask),
            Self::Galerkin(a) => a.forward(x, mask),
            Self::Softmax(a) => a.forward(x, mask),
        }
    }

    /// Cross-attention: queries from `x`, keys and values from `context` (its padding marked by
    /// `context_mask`), with the same weights as [`Self::forward`] (so `context = x` gives the
    /// self-attention output). Nyström is self-attention only (its landmarks are segments of one
    /// sequence) and is refused.
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
        match self {
            Self::LinearTransformer(a) => a.forward_cross(x, context, context_mask),
            Self::Nystrom(_) => Err(Error::Config(
                "Nyström attention has no cross form; use linear_transformer, galerkin or softmax"
                    .into(),
            )),
            Self::Galerkin(a) => a.forward_cross(x, context, context_mask),
            Self::Softmax(a) => a.forward_cross(x, context, context_mask),
        }
    }
}

/// (B, N, H·d) → (B, H, N, d), channels split as (head, d) like einops `b n (h d) -> b h n d`.
pub(crate) fn split_heads(t: &Tensor, heads: i64) -> Result<Tensor> {
    let s = t.size();
    Ok(t.f_view([s[0], s[1], heads, s[2] / heads])?
        .f_permute([0, 2, 1, 3])?)
}

/// (B, H, N, d) → (B, N, H·d).
pub(crate) fn merge_heads(t: &Tensor) -> Result<Tensor> {
    let s = t.size();
    Ok(t.f_permute([0, 2, 1, 3])?
        .f_contiguous()?
        .f_view([s[0], s[2], s[1] * s[3]])?)
}

/// Checks (B, N, dim).
pub(crate) fn check_input(op: &'static str, x: &Tensor, dim: i64) -> Result<()> {
    match x.size()[..] {
        [_, _, c] if c == dim => Ok(()),
        _ => Err(Error::Shape {
            op,
            expected: format!("(B, N, {dim})"),
            got: x.size(),
        }),
    }
}

/// Checks (B, N, dim) and a padding mask of its (B, N).
pub(crate) fn check_masked_input(
    op: &'static str,
    x: &Tensor,
    dim: i64,
    mask: Option<&Tensor>,
) -> Result<()> {
    check_input(op, x, dim)?;
    if let Some(mask) = mask {
        let s = x.size();
        crate::padding::check_mask(op, mask, s[0], s[1])?;
    }
    Ok(())
}

/// Checks a cross form's queries `x` (B, M, dim) and its `context` (B, N, dim) with the
/// context's padding mask; `op` names the layer in errors, `context_op` its context.
pub(crate) fn check_cross_input(
    (op, context_op): (&'static str, &'static str),
    x: &Tensor,
    context: &Tensor,
    dim: i64,
    context_mask: Option<&Tensor>,
) -> Result<()> {
    check_input(op, x, dim)?;
    check_masked_input(context_op, context, dim, context_mask)
}

/// q from `x` and k, v from `context` through one fused `to_qkv` weight (rows [q; k; v]), in the
/// compute kind as [`crate::Linear`].
pub(crate) fn qkv_heads_cross(
    to_qkv: &crate::Linear,
    x: &Tensor,
    context: &Tensor,
    heads: i64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let inner = to_qkv.out_dim() / 3;
    let w = to_compute(&to_qkv.weight)?;
    let q = to_compute(x)?.f_linear(&w.f_narrow(0, 0, inner)?, None::<&Tensor>)?;
    let kv = to_compute(context)?
        .f_linear(&w.f_narrow(0, inner, 2 * inner)?, None::<&Tensor>)?
        .f_chunk(2, -1)?;
    Ok((
        split_heads(&q, heads)?,
        split_heads(&kv[0], heads)?,
        split_heads(&kv[1], heads)?,
    ))
}

/// `to_qkv(x).chunk(3, -1)`, each split into heads.
pub(crate) fn qkv_heads(
    to_qkv: &crate::Linear,
    x: &Tensor,
    heads: i64,
) -> Result<(Tensor, Tensor, Tensor)> {
    let qkv = to_qkv.forward(x)?.f_chunk(3, -1)?;
    Ok((
        split_heads(&qkv[0], heads)?,
        split_heads(&qkv[1], heads)?,
        split_heads(&qkv[2], heads)?,
    ))
}
