//! Galerkin-type attention (Cao 2021, `libs/layers.py` `linear_attention`).

use tch::Tensor;

use super::{check_qkv, key_weight};
use crate::{points, Result};

/// out = Q (K̃ᵀ Ṽ) / n, linear in the number of points.
///
/// K̃ and Ṽ are expected already layer-normalized per head (the norm's affine parameters belong to
/// the nn layer, as in the reference). The reference divides by the **query** length
/// (`seq_len = query.size(-2)`), which equals the key length in self-attention; that is kept here.
/// With a key `mask` (1 = real point) padded keys drop out of K̃ᵀṼ and n is each sample's number of
/// real keys instead (the reference has no masking). With the points split across processes
/// ([`points`]), K̃ᵀṼ and n are summed over them, and n is the number of keys (real keys, with
/// a mask) of the whole sample.
///
/// # Shapes
/// - `q`: (B, H, Nq, d); `k`: (B, H, Nk, d); `v`: (B, H, Nk, dv)
/// - `mask`: (B, Nk), optional
/// - returns: (B, H, Nq, dv)
pub fn galerkin(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "galerkin";
    let s = check_qkv(OP, q, k, v)?;
    if points::split() {
        let (kv, n) = match mask {
            None => (
                k.f_transpose(-2, -1)?.f_matmul(v)?,
                Tensor::f_full([1, 1, 1, 1], s.nk as f64, (k.kind(), k.device()))?,
            ),
            Some(mask) => {
                let w = key_weight(OP, mask, s, k)?;
                (
                    k.f_mul(&w)?.f_transpose(-2, -1)?.f_matmul(v)?,
                    w.f_sum_dim_intlist(&[2i64][..], true, k.kind())?,
                )
            }
        };
        let ctx = points::sum(&kv)?.f_div(&points::sum(&n)?)?;
        return Ok(q.f_matmul(&ctx)?);
    }
    match mask {
        None => {
            let ctx = k
                .f_transpose(-2, -1)?
                .f_matmul(v)?
                .f_div_scalar(s.nq as f64)?;
            Ok(q.f_matmul(&ctx)?)
        }
        Some(mask) => {
            let w = key_weight(OP, mask, s, k)?;
            let n = w.f_sum_dim_intlist(&[2i64][..], true, k.kind())?; // (B, 1, 1, 1)
            let ctx = k.f_mul(&w)?.f_transpose(-2, -1)?.f_matmul(v)?.f_div(&n)?;
            Ok(q.f_matmul(&ctx)?)
        }
    }
}
