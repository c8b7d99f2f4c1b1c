//! Fourier-type attention (Cao 2021, `libs/layers.py` `attention`).

use tch::Tensor;

use super::{check_qkv, key_weight};
use crate::{points, Result};

/// out = (Q̃ K̃ᵀ / √d / n) V, quadratic in the number of points.
///
/// Q̃, K̃ are expected already layer-normalized per head. The 1/√d is the reference's extra factor
/// (the paper's formula has only 1/n); n is the key length. With a key `mask` padded keys get zero
/// weight and n is each sample's number of real keys.
///
/// # Shapes
/// - `q`: (B, H, Nq, d); `k`: (B, H, Nk, d); `v`: (B, H, Nk, dv)
/// - `mask`: (B, Nk), optional
/// - returns: (B, H, Nq, dv)
pub fn fourier(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "fourier";
    points::refuse(
        "Fourier-type attention",
        "its N × N product pairs every query with every key",
    )?;
    let s = check_qkv(OP, q, k, v)?;
    let scores = q
        .f_matmul(&k.f_transpose(-2, -1)?)?
        .f_div_scalar((s.d as f64).sqrt())?;
    match mask {
        None => Ok(scores.f_div_scalar(s.nk as f64)?.f_matmul(v)?),
        Some(mask) => {
            let w = key_weight(OP, mask, s, k)?; // (B, 1, Nk, 1)
            let n = w.f_sum_dim_intlist(&[2i64][..], true, k.kind())?;
            let scores = scores.f_mul(&w.f_transpose(-2, -1)?)?.f_div(&n)?;
            Ok(scores.f_matmul(v)?)
        }
    }
}
