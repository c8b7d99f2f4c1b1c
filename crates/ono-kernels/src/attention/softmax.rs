//! Plain scaled dot-product softmax attention (ablations and tests).

use tch::{Kind, Tensor};

use super::linear::lowest_value;
use super::{check_qkv, key_weight};
use crate::Result;

/// out = softmax(Q Kᵀ / √d) V over the keys; padded keys (mask 0) get zero weight. The keys are
/// all there are: a layer that attends over a sample's points refuses split points itself
/// (Transolver's slice tokens, replicated on every process, are not points).
///
/// # Shapes
/// - `q`: (B, H, Nq, d); `k`: (B, H, Nk, d); `v`: (B, H, Nk, dv)
/// - `mask`: (B, Nk), optional
/// - returns: (B, H, Nq, dv)
pub fn softmax(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "softmax";
    let s = check_qkv(OP, q, k, v)?;
    let mut scores = q
        .f_matmul(&k.f_transpose(-2, -1)?)?
        .f_div_scalar((s.d as f64).sqrt())?;
    if let Some(mask) = mask {
        let drop = key_weight(OP, mask, s, k)?
            .f_to_kind(Kind::Bool)?
            .f_logical_not()?
            .f_transpose(-2, -1)?; // (B, 1, 1, Nk)
        scores = scores.f_masked_fill(&drop, lowest_value(q.kind()))?;
    }
    Ok(scores.f_softmax(-1, q.kind())?.f_matmul(v)?)
}
