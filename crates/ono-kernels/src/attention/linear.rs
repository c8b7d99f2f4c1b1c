//! The "linear transformer" attention that ONO uses by default (lucidrains
//! linear-attention-transformer 0.19.1, `linear_attn` L204–221).

use tch::{Kind, Tensor};

use super::{check_qkv, key_weight};
use crate::Result;

/// q̂ = softmax(q) over features · d^-1/2, k̂ = softmax(k) over the sequence, out = q̂ (k̂ᵀ v).
///
/// With a key `mask` (1 = real point) padded keys get −max logits before the sequence softmax and
/// zero values, as the reference does when given a `kv_mask`.
///
/// # Shapes
/// - `q`: (B, H, Nq, d); `k`: (B, H, Nk, d); `v`: (B, H, Nk, dv)
/// - `mask`: (B, Nk), optional
/// - returns: (B, H, Nq, dv)
pub fn linear_transformer(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
) -> Result<Tensor> {
    const OP: &str = "linear_transformer";
    let s = check_qkv(OP, q, k, v)?;
    let (k, v) = match mask {
        None => (k.shallow_clone(), v.shallow_clone()),
        Some(mask) => {
            let keep = key_weight(OP, mask, s, k)?.f_to_kind(Kind::Bool)?;
            let drop = keep.f_logical_not()?;
            let lowest = lowest_value(k.kind());
            (
                k.f_masked_fill(&drop, lowest)?,
                v.f_masked_fill(&drop, 0.0)?,
            )
        }
    };
    let q = q
        .f_softmax(-1, q.kind())?
        .f_mul_scalar((s.d as f64).powf(-0.5))?;
    let k = k.f_softmax(-2, k.kind())?;
    let ctx = k.f_transpose(-2, -1)?.f_matmul(&v)?;
    Ok(q.f_matmul(&ctx)?)
}

/// `-torch.finfo(dtype).max`, the reference's fill value for masked logits.
pub fn lowest_value(kind: Kind) -> f64 {
    match kind {
        Kind::Double => f64::MIN,
        Kind::Half => -65504.0,
        Kind::BFloat16 => -3.389_531_389_251_535_5e38,
        _ => f32::MIN as f64,
    }
}
