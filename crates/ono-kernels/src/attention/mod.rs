//! Attention kernels on multi-head tensors (B, H, N, d).
//!
//! Self-attention is the cross form with the same tensor for queries and keys; every kernel takes
//! queries of length Nq and keys/values of length Nk. Projections, norms and head splitting belong to
//! the layers of ono-nn; these functions are the mathematics between them.
//!
//! | kernel | cost | reference |
//! |---|---|---|
//! | [`galerkin`] | O(N d²) | Cao 2021, `linear_attention` |
//! | [`fourier`] | O(N² d) | Cao 2021, `attention` |
//! | [`linear_transformer`] | O(N d²) | lucidrains linear-attention-transformer 0.19.1 `linear_attn` |
//! | [`gnot_linear`], [`gnot_cross`] | O(N d²) | GNOT `LinearAttention` / `LinearCrossAttention` |
//! | [`nystrom`] | O(N m d) | lucidrains nystrom-attention 0.0.11 |
//! | [`softmax`] | O(N² d) | scaled dot-product attention |

mod fourier;
mod galerkin;
mod gnot;
mod linear;
mod nystrom;
mod softmax;

pub use fourier::fourier;
pub use galerkin::galerkin;
pub use gnot::{gnot_cross, gnot_linear};
pub use linear::{linear_transformer, lowest_value, split_context};
pub use nystrom::{
    moore_penrose_pinv, nystrom, nystrom_front_pad, nystrom_with_pinv, NystromConfig,
};
pub use softmax::softmax;

use tch::Tensor;

use crate::{Error, Result};

/// Sizes of a checked (q, k, v) triple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Qkv {
    pub b: i64,
    pub h: i64,
    pub nq: i64,
    pub nk: i64,
    pub d: i64,
    pub dv: i64,
}

/// Checks q (B, H, Nq, d), k (B, H, Nk, d), v (B, H, Nk, dv).
pub(crate) fn check_qkv(op: &'static str, q: &Tensor, k: &Tensor, v: &Tensor) -> Result<Qkv> {
    let shape_err = |expected: String, got: Vec<i64>| Error::Shape { op, expected, got };
    let [b, h, nq, d] =
        rank4(q).ok_or_else(|| shape_err("q of shape (B, H, Nq, d)".into(), q.size()))?;
    let [kb, kh, nk, kd] =
        rank4(k).ok_or_else(|| shape_err("k of shape (B, H, Nk, d)".into(), k.size()))?;
    if (kb, kh, kd) != (b, h, d) {
        return Err(shape_err(
            format!("k of shape ({b}, {h}, Nk, {d})"),
            k.size(),
        ));
    }
    let [vb, vh, vn, dv] =
        rank4(v).ok_or_else(|| shape_err("v of shape (B, H, Nk, dv)".into(), v.size()))?;
    if (vb, vh, vn) != (b, h, nk) {
        return Err(shape_err(
            format!("v of shape ({b}, {h}, {nk}, dv)"),
            v.size(),
        ));
    }
    Ok(Qkv {
        b,
        h,
        nq,
        nk,
        d,
        dv,
    })
}

/// Checks a key mask (B, Nk) and returns it as a (B, 1, Nk, 1) float weight of `like`'s kind.
pub(crate) fn key_weight(op: &'static str, mask: &Tensor, s: Qkv, like: &Tensor) -> Result<Tensor> {
    if mask.size() != [s.b, s.nk] {
        return Err(Error::Shape {
            op,
            expected: format!("a key mask of shape ({}, {})", s.b, s.nk),
            got: mask.size(),
        });
    }
    Ok(mask.f_to_kind(like.kind())?.f_view([s.b, 1, s.nk, 1])?)
}

fn rank4(t: &Tensor) -> Option<[i64; 4]> {
    match t.size()[..] {
        [a, b, c, d] => Some([a, b, c, d]),
        _ => None,
    }
}
