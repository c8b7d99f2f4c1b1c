//! The "linear transformer" attention that ONO uses by default (lucidrains
//! linear-attention-transformer 0.19.1, `linear_attn` L204–221).

use tch::{Kind, Tensor};

use super::{check_qkv, key_weight};
use crate::{points, Result};

/// q̂ = softmax(q) over features · d^-1/2, k̂ = softmax(k) over the sequence, out = q̂ (k̂ᵀ v).
///
/// With a key `mask` (1 = real point) padded keys get −max logits before the sequence softmax and
/// zero values, as the reference does when given a `kv_mask`. With the points split across
/// processes ([`points`]) the softmax over the sequence spans every process's points.
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
    let ctx = if points::split() {
        split_context(&k, &v)?
    } else {
        let k = k.f_softmax(-2, k.kind())?;
        k.f_transpose(-2, -1)?.f_matmul(&v)?
    };
    Ok(q.f_matmul(&ctx)?)
}

/// softmax(k over the points)ᵀ v when the points are split across processes ([`points`]):
/// with m the maximum over every process's points (a shift that cancels, so it carries no
/// gradient) and e = exp(k − m), the context is Σ eᵀv / Σ e, both sums over every process.
///
/// # Shapes
/// - `k`: (B, H, Nk, d); `v`: (B, H, Nk, dv); Nk may be 0 on a process
/// - returns: (B, H, d, dv)
pub fn split_context(k: &Tensor, v: &Tensor) -> Result<Tensor> {
    let s = k.size();
    let local_max = if s[2] == 0 {
        Tensor::f_full(
            [s[0], s[1], 1, s[3]],
            lowest_value(k.kind()),
            (k.kind(), k.device()),
        )?
    } else {
        k.f_detach()?.f_amax(&[2i64][..], true)?
    };
    let m = points::max(&local_max)?;
    let e = k.f_sub(&m)?.f_exp()?;
    let z = points::sum(&e.f_sum_dim_intlist(&[2i64][..], true, k.kind())?)?; // (B, H, 1, d)
    let ev = points::sum(&e.f_transpose(-2, -1)?.f_matmul(v)?)?; // (B, H, d, dv)
    Ok(ev.f_div(&z.f_transpose(-2, -1)?)?)
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
