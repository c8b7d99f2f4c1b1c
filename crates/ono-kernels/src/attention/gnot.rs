//! GNOT's normalized linear attention (`models/mmgpt.py`, `LinearAttention` L42–101 and
//! `LinearCrossAttention` L105–152).

use tch::Tensor;

use super::{check_qkv, key_weight};
use crate::{points, Error, Result};

/// Self form: z = q̃ + (q̃ (k̃ᵀ v)) / (q̃ · Σ_n k̃_n), with q̃, k̃ = softmax over features.
///
/// Identical to [`gnot_cross`] with one key/value set; kept as its own entry point because the
/// reference has two modules. The reference's `attn_drop` (applied to z) belongs to the layer.
///
/// # Shapes
/// - `q`: (B, H, Nq, d); `k`: (B, H, Nk, d); `v`: (B, H, Nk, d)
/// - `mask`: (B, Nk), optional (the reference never masks; padded keys then count)
/// - returns: (B, H, Nq, d)
pub fn gnot_linear(q: &Tensor, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    gnot_cross(q, &[(k, v, mask)])
}

/// Heterogeneous cross form over L key/value sets:
/// z = q̃ + Σ_l (q̃ (k̃_lᵀ v_l)) / (q̃ · Σ_i k̃_l,i) — summed over the sets, not averaged, as the
/// reference does.
///
/// # Shapes
/// - `q`: (B, H, Nq, d)
/// - each set: `k_l` (B, H, N_l, d), `v_l` (B, H, N_l, d), optional mask (B, N_l); a sample
///   with no real key in a set gets no contribution from it
/// - returns: (B, H, Nq, d)
pub fn gnot_cross(q: &Tensor, sets: &[(&Tensor, &Tensor, Option<&Tensor>)]) -> Result<Tensor> {
    const OP: &str = "gnot_cross";
    if sets.is_empty() {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: "needs at least one key/value set".into(),
        });
    }
    let q = q.f_softmax(-1, q.kind())?;
    let mut out = q.shallow_clone();
    for &(k, v, mask) in sets {
        let s = check_qkv(OP, &q, k, v)?;
        if s.dv != s.d {
            return Err(Error::Shape {
                op: OP,
                expected: format!("v with the head width of q ({})", s.d),
                got: v.size(),
            });
        }
        let mut k = k.f_softmax(-1, k.kind())?;
        if let Some(mask) = mask {
            k = k.f_mul(&key_weight(OP, mask, s, &k)?)?;
        }
        // k is zero on padded rows, so padded values drop out of kᵀv as well.
        // Σ over the points: over every process's when the points are split ([`points`]).
        let k_sum = points::sum(&k.f_sum_dim_intlist(&[2i64][..], true, k.kind())?)?; // (B, H, 1, d)
        let mut denom = q
            .f_mul(&k_sum)?
            .f_sum_dim_intlist(&[-1i64][..], true, q.kind())?; // (B, H, Nq, 1)
        if mask.is_some() {
            // A sample whose keys are all padded (an empty input function) contributes nothing:
            // its numerator is exactly 0, and 0/1 keeps the 0/0 NaN out of the output and the
            // gradients. Softmax rows are positive, so an unmasked denominator is never 0.
            denom = denom.f_where_scalarother(&denom.f_ne(0.0)?, 1.0)?;
        }
        let ctx = points::sum(&k.f_transpose(-2, -1)?.f_matmul(v)?)?;
        // × 1/denominator, as the reference (`D_inv`), for its float32 rounding.
        out = out.f_add(&q.f_matmul(&ctx)?.f_mul(&denom.f_reciprocal()?)?)?;
    }
    Ok(out)
}
