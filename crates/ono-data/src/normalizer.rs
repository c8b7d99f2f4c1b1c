//! Normalizers fitted on the training split: ONO's `UnitTransformer` (mean and unbiased std + 1e-8
//! over samples and points, per channel) and FNO's pointwise `UnitGaussianNormalizer` (eps 1e-5).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::{Error, Result};

/// Which statistics a normalizer keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NormalizerKind {
    /// Identity.
    #[default]
    None,
    /// ONO's / GNOT's `UnitTransformer`: mean and std over samples and points (dims 0 and 1,
    /// kept), i.e. one pair per channel; std unbiased, + 1e-8.
    Unit,
    /// FNO's `UnitGaussianNormalizer`: mean and std per point and channel over samples (dim 0),
    /// std unbiased, eps 1e-5 added to the std.
    Gaussian,
}

/// A fitted normalizer: x ↦ (x − mean) / std and back.
#[derive(Debug)]
pub struct Normalizer {
    kind: NormalizerKind,
    mean: Tensor,
    std: Tensor,
}

impl Normalizer {
    /// Fits `kind` on `train` (S, N, C[, T]).
    pub fn fit(kind: NormalizerKind, train: &Tensor) -> Result<Self> {
        let k = train.kind();
        let sz = train.size();
        if sz.len() < 3 {
            return Err(Error::Shape {
                op: "Normalizer::fit",
                expected: "(S, N, C) or (S, N, C, T)".into(),
                got: sz,
            });
        }
        let (mean, std) = match kind {
            NormalizerKind::None => (
                Tensor::f_zeros([1], (k, train.device()))?,
                Tensor::f_ones([1], (k, train.device()))?,
            ),
            NormalizerKind::Unit => (
                train.f_mean_dim(&[0i64, 1][..], true, k)?,
                train
                    .f_std_dim(&[0i64, 1][..], true, true)?
                    .f_add_scalar(1e-8)?,
            ),
            NormalizerKind::Gaussian => (
                train.f_mean_dim(&[0i64][..], true, k)?,
                train
                    .f_std_dim(&[0i64][..], true, true)?
                    .f_add_scalar(1e-5)?,
            ),
        };
        if std.f_gt(0.0)?.f_all()?.f_int64_value(&[])? == 0 {
            return Err(Error::Invalid(
                "normalizer: a standard deviation is zero or NaN".into(),
            ));
        }
        Ok(Self { kind, mean, std })
    }

    /// A normalizer from statistics computed elsewhere — for ragged point clouds, whose points
    /// cannot be stacked into the (S, N, C) tensor [`Normalizer::fit`] takes. `mean` and `std`
    /// must have one shape (broadcastable against the data, e.g. (C,)); every std must be > 0.
    pub fn from_stats(kind: NormalizerKind, mean: Tensor, std: Tensor) -> Result<Self> {
        if mean.size() != std.size() {
            return Err(Error::Shape {
                op: "Normalizer::from_stats",
                expected: format!("std of the mean's shape {:?}", mean.size()),
                got: std.size(),
            });
        }
        if std.f_gt(0.0)?.f_all()?.f_int64_value(&[])? == 0 {
            return Err(Error::Invalid(
                "normalizer: a standard deviation is zero or NaN".into(),
            ));
        }
        Ok(Self { kind, mean, std })
    }

    /// The kind.
    pub fn kind(&self) -> NormalizerKind {
        self.kind
    }

    /// (x − mean) / std, on x's device and kind.
    pub fn encode(&self, x: &Tensor) -> Result<Tensor> {
        if self.kind == NormalizerKind::None {
            return Ok(x.shallow_clone());
        }
        let (m, s) = self.on(x)?;
        Ok(x.f_sub(&m)?.f_div(&s)?)
    }

    /// x · std + mean.
    pub fn decode(&self, x: &Tensor) -> Result<Tensor> {
        if self.kind == NormalizerKind::None {
            return Ok(x.shallow_clone());
        }
        let (m, s) = self.on(x)?;
        Ok(x.f_mul(&s)?.f_add(&m)?)
    }

    fn on(&self, x: &Tensor) -> Result<(Tensor, Tensor)> {
        let to = |t: &Tensor| t.f_to_device(x.device())?.f_to_kind(x.kind());
        Ok((to(&self.mean)?, to(&self.std)?))
    }

    /// The statistics as named tensors (`<prefix>mean`, `<prefix>std`) for a checkpoint.
    pub fn tensors(&self, prefix: &str) -> BTreeMap<String, Tensor> {
        BTreeMap::from([
            (format!("{prefix}mean"), self.mean.shallow_clone()),
            (format!("{prefix}std"), self.std.shallow_clone()),
        ])
    }

    /// Rebuilds a normalizer saved by [`Normalizer::tensors`].
    pub fn from_tensors(
        kind: NormalizerKind,
        prefix: &str,
        tensors: &BTreeMap<String, Tensor>,
    ) -> Result<Self> {
        let get = |k: &str| {
            tensors
                .get(&format!("{prefix}{k}"))
                .map(|t| t.shallow_clone())
                .ok_or_else(|| Error::Invalid(format!("normalizer statistics {prefix}{k} missing")))
        };
        Ok(Self {
            kind,
            mean: get("mean")?,
            std: get("std")?,
        })
    }

    /// The statistics to print (`ono data info`): the mean and std when they are scalars.
    pub fn scalar_stats(&self) -> Option<(f64, f64)> {
        (self.mean.numel() == 1).then(|| {
            (
                self.mean.to_kind(Kind::Double).double_value(&[0]),
                self.std.to_kind(Kind::Double).double_value(&[0]),
            )
        })
    }
}
