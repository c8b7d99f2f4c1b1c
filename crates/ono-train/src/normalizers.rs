//! The four normalizers of a run (input function, targets, positions, θ) as one object: fitted
//! together on the training split, saved into and restored from a checkpoint together. This is
//! the one place that knows their tensor names in a checkpoint (`norm.x.mean`, …).

use std::collections::BTreeMap;

use ono_data::dataset::{grid_axes, Split, TensorDataset};
use ono_data::normalizer::{Normalizer, NormalizerKind};
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::Result;

/// Which statistics each normalizer keeps. Serialized (in the run state of a checkpoint) under
/// the keys the state has always used; the positions' and θ's are left out when plain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct NormalizerKinds {
    /// The input functions at the points.
    #[serde(rename = "normalize_x")]
    pub x: NormalizerKind,
    /// The targets.
    #[serde(rename = "normalize_y")]
    pub y: NormalizerKind,
    /// The positions (and query points).
    #[serde(rename = "normalize_pos", default, skip_serializing_if = "is_plain")]
    pub pos: NormalizerKind,
    /// The global parameters θ.
    #[serde(rename = "normalize_theta", default, skip_serializing_if = "is_plain")]
    pub theta: NormalizerKind,
}

fn is_plain(k: &NormalizerKind) -> bool {
    *k == NormalizerKind::None
}

/// See the module documentation.
#[derive(Debug)]
pub struct Normalizers {
    /// The input functions at the points.
    pub x: Normalizer,
    /// The targets (the loss and the errors are computed on decoded values).
    pub y: Normalizer,
    /// The positions and query points (per channel).
    pub pos: Normalizer,
    /// The global parameters θ (per channel).
    pub theta: Normalizer,
}

impl Normalizers {
    /// The checkpoint prefix of each normalizer.
    const X: &'static str = "norm.x.";
    const Y: &'static str = "norm.y.";
    const POS: &'static str = "norm.pos.";
    const THETA: &'static str = "norm.theta.";

    /// Fits `kinds` on the real points of the training split (padding rows of samples of
    /// different sizes do not count).
    pub fn fit(kinds: NormalizerKinds, train: &Split) -> Result<Self> {
        let lengths = train.lengths.as_deref();
        let theta = match &train.theta {
            Some(t) => Normalizer::fit(kinds.theta, &t.f_unsqueeze(1)?)?,
            // Nothing to fit: an identity of the kind the run state records.
            None => Normalizer::fit(NormalizerKind::None, &train.fx)?,
        };
        Ok(Self {
            x: Normalizer::fit_points(kinds.x, &train.fx, lengths)?,
            y: Normalizer::fit_points(kinds.y, &train.y, lengths)?,
            pos: Normalizer::fit_points(kinds.pos, &train.pos, lengths)?,
            theta,
        })
    }

    /// The normalizers for the test split of `ds`, these having been fitted on its training
    /// split: when the test split has a grid of its own ([`TensorDataset::test_grid`]), the
    /// pointwise statistics interpolated from the training points to the test points at the
    /// coordinates of their positions ([`Normalizer::regridded_at`]); otherwise, and for
    /// per-channel statistics, the same.
    pub fn for_test_split(&self, ds: &TensorDataset) -> Result<Self> {
        let (from, to) = match (&ds.grid, &ds.test_grid) {
            (Some(g), Some(t)) => (grid_axes(&ds.train.pos, g)?, grid_axes(&ds.test.pos, t)?),
            _ => (Vec::new(), Vec::new()),
        };
        let regrid = |n: &Normalizer| {
            if from.is_empty() {
                n.regridded(&[], &[])
            } else {
                n.regridded_at(&from, &to)
            }
        };
        // Positions and θ have per-channel statistics, which do not depend on the grid.
        Ok(Self {
            x: regrid(&self.x)?,
            y: regrid(&self.y)?,
            pos: self.pos.regridded(&[], &[])?,
            theta: self.theta.regridded(&[], &[])?,
        })
    }

    /// The normalizers of this process's share `[start, start + len)` of the points (point
    /// sharding; [`Normalizer::point_share`]).
    pub fn point_share(&self, start: i64, len: i64) -> Result<Self> {
        Ok(Self {
            x: self.x.point_share(start, len)?,
            y: self.y.point_share(start, len)?,
            pos: self.pos.point_share(start, len)?,
            theta: self.theta.point_share(start, len)?,
        })
    }

    /// The statistics as named tensors, for a checkpoint.
    pub fn tensors(&self) -> BTreeMap<String, Tensor> {
        let mut out = self.x.tensors(Self::X);
        out.extend(self.pos.tensors(Self::POS));
        out.extend(self.theta.tensors(Self::THETA));
        out.extend(self.y.tensors(Self::Y));
        out
    }

    /// Rebuilds the normalizers saved by [`Normalizers::tensors`].
    pub fn from_tensors(
        kinds: NormalizerKinds,
        tensors: &BTreeMap<String, Tensor>,
    ) -> Result<Self> {
        let load = |k, prefix| Normalizer::from_tensors(k, prefix, tensors);
        Ok(Self {
            x: load(kinds.x, Self::X)?,
            y: load(kinds.y, Self::Y)?,
            pos: load(kinds.pos, Self::POS)?,
            theta: load(kinds.theta, Self::THETA)?,
        })
    }

    /// Adds the statistics of an identity normalizer (zero mean, unit spread) where `tensors`
    /// have none: how a checkpoint of format v1 that did not save them is migrated
    /// ([`crate::checkpoint::migrate`]).
    pub(crate) fn add_missing_identities(
        kinds: NormalizerKinds,
        tensors: &mut BTreeMap<String, Tensor>,
    ) -> Result<()> {
        for (kind, prefix) in [
            (kinds.x, Self::X),
            (kinds.y, Self::Y),
            (kinds.pos, Self::POS),
            (kinds.theta, Self::THETA),
        ] {
            let mean = format!("{prefix}mean");
            if kind == NormalizerKind::None && !tensors.contains_key(&mean) {
                let opts = (tch::Kind::Float, tch::Device::Cpu);
                tensors.insert(mean, Tensor::f_zeros([1], opts)?);
                tensors.insert(format!("{prefix}std"), Tensor::f_ones([1], opts)?);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::{Device, Kind};

    /// Saved and restored, every normalizer encodes as before; identities that a v1
    /// checkpoint never saved are migrated to identities.
    #[test]
    fn tensors_round_trip() {
        let opts = (Kind::Double, Device::Cpu);
        let fx = Tensor::from_slice(&[1.0, 2.0, 4.0, 8.0]).view([2, 2, 1]);
        let y = Tensor::from_slice(&[3.0, 5.0, 7.0, 13.0]).view([2, 2, 1]);
        let pos = Tensor::from_slice(&[0.0, 1.0]).view([1, 2, 1]);
        let mut split = Split::new(fx.copy(), y.copy(), pos);
        split.theta = Some(Tensor::from_slice(&[0.5, 1.5]).view([2, 1]));
        let kinds = NormalizerKinds {
            x: NormalizerKind::Unit,
            y: NormalizerKind::Gaussian,
            pos: NormalizerKind::None,
            theta: NormalizerKind::Unit,
        };
        let n = Normalizers::fit(kinds, &split).unwrap();
        let saved = n.tensors();
        let names: Vec<&str> = saved.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            [
                "norm.pos.mean",
                "norm.pos.std",
                "norm.theta.mean",
                "norm.theta.std",
                "norm.x.mean",
                "norm.x.std",
                "norm.y.mean",
                "norm.y.std"
            ]
        );
        let back = Normalizers::from_tensors(kinds, &saved).unwrap();
        // Unit on fx: mean 3.75, unbiased std √(Σ(x − 3.75)² / 3) + 1e-8.
        let std = ((2.75f64.powi(2) + 1.75f64.powi(2) + 0.25f64.powi(2) + 4.25f64.powi(2)) / 3.0)
            .sqrt()
            + 1e-8;
        let want = (&fx - 3.75) / std;
        let got = back.x.encode(&fx).unwrap();
        assert!(got.allclose(&want, 1e-12, 1e-12, false));
        let t = Tensor::ones([2, 2, 1], opts);
        for (a, b) in [
            (&n.y, &back.y),
            (&n.pos, &back.pos),
            (&n.theta, &back.theta),
        ] {
            assert!(a.encode(&t).unwrap().equal(&b.encode(&t).unwrap()));
        }

        let plain = NormalizerKinds {
            x: NormalizerKind::Unit,
            y: NormalizerKind::Gaussian,
            ..Default::default()
        };
        let mut only_xy: BTreeMap<String, Tensor> = saved
            .into_iter()
            .filter(|(k, _)| k.starts_with("norm.x.") || k.starts_with("norm.y."))
            .collect();
        assert!(Normalizers::from_tensors(plain, &only_xy).is_err());
        Normalizers::add_missing_identities(plain, &mut only_xy).unwrap();
        assert_eq!(only_xy.len(), 8);
        let old = Normalizers::from_tensors(plain, &only_xy).unwrap();
        assert!(old.pos.encode(&t).unwrap().equal(&t));
    }

    /// The kinds read and write the run state's keys; the positions' and θ's only when set.
    #[test]
    fn kinds_keep_the_run_state_keys() {
        let k: NormalizerKinds =
            serde_json::from_str(r#"{"normalize_x": "unit", "normalize_y": "gaussian"}"#).unwrap();
        assert_eq!(k.x, NormalizerKind::Unit);
        assert_eq!(k.y, NormalizerKind::Gaussian);
        assert_eq!(k.pos, NormalizerKind::None);
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            r#"{"normalize_x":"unit","normalize_y":"gaussian"}"#
        );
        let k = NormalizerKinds {
            pos: NormalizerKind::Unit,
            ..k
        };
        assert_eq!(
            serde_json::to_string(&k).unwrap(),
            r#"{"normalize_x":"unit","normalize_y":"gaussian","normalize_pos":"unit"}"#
        );
    }
}
