//! Ragged batches: a (B, N) mask marks the real points of samples padded to a common N.
//!
//! The contract every masked layer of this crate keeps: **the real points of a padded batch get
//! exactly what they would get laid out without padding**. Point-wise layers need nothing; a layer
//! that reads other points (attention keys, ψ̃ᵀf, the covariance and BatchNorm statistics) reads
//! real points only. Padded rows carry finite values that reach no real point, so their
//! gradients are zero once the loss ignores them (a model zeroes its padded output rows).
//!
//! The data loaders put each sample's real points first (`ono_data::dataset::length_mask`);
//! [`prefix_lengths`] relies on it and checks it.

use tch::{Kind, Tensor};

use crate::{Error, Result};
use ono_kernels::host;

/// Checks that `mask` is (B, N) and bool or floating.
pub fn check_mask(op: &'static str, mask: &Tensor, b: i64, n: i64) -> Result<()> {
    let ok_kind = mask.kind() == Kind::Bool || mask.is_floating_point();
    if mask.size() != [b, n] || !ok_kind {
        return Err(Error::Shape {
            op,
            expected: format!("a bool or floating padding mask of shape ({b}, {n})"),
            got: mask.size(),
        });
    }
    Ok(())
}

/// 1 at real points, 0 at padding, as (B, N, 1) in `kind`: the weight that zeroes padded rows.
pub fn point_weights(mask: &Tensor, kind: Kind) -> Result<Tensor> {
    Ok(mask.f_to_kind(kind)?.f_unsqueeze(-1)?)
}

/// Each sample's number of real points, (B, 1, 1) in `kind`.
pub fn point_counts(mask: &Tensor, kind: Kind) -> Result<Tensor> {
    Ok(mask
        .f_to_kind(kind)?
        .f_sum_dim_intlist(&[1i64][..], false, kind)?
        .f_view([-1, 1, 1])?)
}

/// Zeroes the padded rows of `t` (B, N, C); `None` leaves it as it is.
pub fn zero_padding(t: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    match mask {
        None => Ok(t.shallow_clone()),
        Some(m) => Ok(t.f_mul(&point_weights(m, t.kind())?)?),
    }
}

/// Each sample's number of real points, read to the host (one read), after checking that every
/// sample's real points come first and that it has at least one. For the layers whose
/// computation depends on each sample's length itself (Nyström's landmark segments).
pub fn prefix_lengths(op: &'static str, mask: &Tensor) -> Result<Vec<i64>> {
    let [b, n] = mask.size()[..] else {
        return Err(Error::Shape {
            op,
            expected: "a padding mask (B, N)".into(),
            got: mask.size(),
        });
    };
    let real = mask.f_to_kind(Kind::Bool)?;
    let lengths = real.f_sum_dim_intlist(&[1i64][..], false, Kind::Int64)?; // (B,)
    let prefix = Tensor::f_arange(n, (Kind::Int64, mask.device()))?
        .f_unsqueeze(0)?
        .f_lt_tensor(&lengths.f_unsqueeze(1)?)?;
    let is_prefix = prefix.f_eq_tensor(&real)?.f_all()?.f_to_kind(Kind::Int64)?;
    // Lengths and the verdict in one read.
    let read = host::to_vec_i64(&Tensor::f_cat(&[lengths, is_prefix.f_view([1])?], 0)?)?;
    let (lengths, verdict) = read.split_at(b as usize);
    if verdict[0] == 0 {
        return Err(Error::Config(format!(
            "{op}: the padding mask must mark each sample's real points first (padding at the end)"
        )));
    }
    if let Some(i) = lengths.iter().position(|&l| l == 0) {
        return Err(Error::Config(format!(
            "{op}: sample {i} of the batch has no real point"
        )));
    }
    Ok(lengths.to_vec())
}
