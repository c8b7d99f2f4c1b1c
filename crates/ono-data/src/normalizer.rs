//! Normalizers fitted on the training split: ONO's `UnitTransformer` (mean and unbiased std + 1e-8
//! over samples and points, per channel), FNO's pointwise `UnitGaussianNormalizer` (eps 1e-5), and
//! the Galerkin Transformer's copy of it, which is fitted on NumPy arrays (population std).

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
    /// The Galerkin Transformer's `UnitGaussianNormalizer` (`libs/ft.py`): as `Gaussian`, but
    /// fitted with NumPy's `x.std(0)`, the population std (ddof 0).
    GaussianPopulation,
}

impl NormalizerKind {
    /// Whether the statistics are kept per point (and so follow the data to another grid).
    pub fn is_pointwise(self) -> bool {
        matches!(
            self,
            NormalizerKind::Gaussian | NormalizerKind::GaussianPopulation
        )
    }
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
            // No channels (an input function moved onto its own points, `fx_as_function`):
            // empty statistics, without libtorch's warning about an empty std's degrees of freedom.
            _ if sz[2] == 0 => {
                let dims: &[i64] = if kind == NormalizerKind::Unit {
                    &[0, 1]
                } else {
                    &[0]
                };
                let mean = train.f_mean_dim(dims, true, k)?;
                let std = mean.f_ones_like()?;
                (mean, std)
            }
            NormalizerKind::Unit => (
                train.f_mean_dim(&[0i64, 1][..], true, k)?,
                train
                    .f_std_dim(&[0i64, 1][..], true, true)?
                    .f_add_scalar(1e-8)?,
            ),
            NormalizerKind::Gaussian | NormalizerKind::GaussianPopulation => (
                train.f_mean_dim(&[0i64][..], true, k)?,
                train
                    .f_std_dim(&[0i64][..], kind == NormalizerKind::Gaussian, true)?
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

    /// [`Normalizer::fit`] on the real points of zero-padded samples: sample s holds
    /// `lengths[s]` real rows, then padding, which must not count (GNOT's `UnitTransformer` is
    /// fitted on the concatenated points of all samples). Pointwise kinds are refused: samples of
    /// different sizes share no points. Without `lengths`, [`Normalizer::fit`].
    ///
    /// # Shapes
    /// - `train`: (S, N, C); `lengths`: S counts ≤ N
    pub fn fit_points(
        kind: NormalizerKind,
        train: &Tensor,
        lengths: Option<&[i64]>,
    ) -> Result<Self> {
        let Some(lengths) = lengths else {
            return Self::fit(kind, train);
        };
        if kind.is_pointwise() {
            return Err(Error::Invalid(format!(
                "normalizer: {kind:?} keeps statistics per point, which samples of different sizes do not share; use unit"
            )));
        }
        let sz = train.size();
        if sz.len() != 3
            || lengths.len() as i64 != sz[0]
            || lengths.iter().any(|&l| l < 1 || l > sz[1])
        {
            return Err(Error::Shape {
                op: "Normalizer::fit_points",
                expected: format!("(S, N, C) with {} lengths in [1, N]", lengths.len()),
                got: sz,
            });
        }
        let rows = lengths
            .iter()
            .enumerate()
            .map(|(s, &l)| train.f_select(0, s as i64)?.f_narrow(0, 0, l))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Self::fit(kind, &Tensor::f_cat(&rows, 0)?.f_unsqueeze(0)?)
    }

    /// The normalizer for data on the grid `to` when it was fitted on the grid `from`: a
    /// pointwise (`gaussian`) normalizer's mean and std fields are interpolated (linear per axis,
    /// grid nodes at both ends as the data's `linspace(0, 1, n)` grids) so that a model trained
    /// at one resolution can be evaluated at another (zero-shot super-resolution). Per-channel
    /// normalizers and equal grids are returned unchanged.
    pub fn regridded(&self, from: &[i64], to: &[i64]) -> Result<Self> {
        let same = Self {
            kind: self.kind,
            mean: self.mean.shallow_clone(),
            std: self.std.shallow_clone(),
        };
        if !self.kind.is_pointwise() || from == to {
            return Ok(same);
        }
        let n: i64 = from.iter().product();
        let size = self.mean.size();
        if from.len() != to.len() || !(1..=3).contains(&from.len()) || size.get(1) != Some(&n) {
            return Err(Error::Shape {
                op: "Normalizer::regridded",
                expected: format!(
                    "statistics (1, {n}, …) fitted on the grid {from:?} and a target grid of the \
                     same dimension (1-3), got target {to:?}"
                ),
                got: size,
            });
        }
        let field = |t: &Tensor| -> Result<Tensor> {
            // (1, N, rest…) → (1, C, n_1, …, n_D) with C the flattened rest.
            let c: i64 = size[2..].iter().product();
            let d = from.len() as i64;
            let mut grid_shape = vec![1];
            grid_shape.extend_from_slice(from);
            grid_shape.push(c);
            let mut perm = vec![0, d + 1];
            perm.extend(1..=d);
            let g = t
                .f_reshape(&grid_shape)?
                .f_permute(&perm)?
                .f_to_kind(Kind::Double)?;
            let up = match to.len() {
                1 => g.f_upsample_linear1d(to, true, None)?,
                2 => g.f_upsample_bilinear2d(to, true, None, None)?,
                _ => g.f_upsample_trilinear3d(to, true, None, None, None)?,
            };
            let mut back = vec![0];
            back.extend(2..d + 2);
            back.push(1);
            let mut out_shape = vec![1, to.iter().product()];
            out_shape.extend_from_slice(&size[2..]);
            Ok(up
                .f_permute(&back)?
                .f_reshape(&out_shape)?
                .f_to_kind(t.kind())?)
        };
        Self::from_stats(self.kind, field(&self.mean)?, field(&self.std)?)
    }

    /// The normalizer for data on the grid whose axes have the coordinates `to` when it was
    /// fitted on the grid whose axes have the coordinates `from` (one increasing 1-D tensor per
    /// axis, in the grid's axis order; [`crate::dataset::grid_axes`] reads them off positions): a
    /// pointwise normalizer's mean and std fields are interpolated linearly per axis at the new
    /// nodes and held at the end values beyond the fitted grid. [`regridded`](Self::regridded)
    /// assumes that both grids span the same interval with nodes at both ends; this one puts the
    /// nodes where the data have them (neuraloperator's `k / n` nodes: every other 32² node is a
    /// 16² node, and the last 32² node lies past the last 16² one). Per-channel normalizers are
    /// returned unchanged.
    pub fn regridded_at(&self, from: &[Tensor], to: &[Tensor]) -> Result<Self> {
        let same = Self {
            kind: self.kind,
            mean: self.mean.shallow_clone(),
            std: self.std.shallow_clone(),
        };
        if !self.kind.is_pointwise() {
            return Ok(same);
        }
        Self::from_stats(
            self.kind,
            crate::dataset::interpolate_on_axes(&self.mean, from, to)?,
            crate::dataset::interpolate_on_axes(&self.std, from, to)?,
        )
    }

    /// The normalizer of a contiguous share `[start, start + len)` of the points (point
    /// sharding): statistics kept per point are narrowed to it (copied, so the whole ones can
    /// be freed), per-channel ones kept whole.
    pub fn point_share(&self, start: i64, len: i64) -> Result<Self> {
        let share = |t: &Tensor| -> Result<Tensor> {
            Ok(if self.kind.is_pointwise() && t.dim() >= 2 {
                t.f_narrow(1, start, len)?.f_detach_copy()?
            } else {
                t.shallow_clone()
            })
        };
        Ok(Self {
            kind: self.kind,
            mean: share(&self.mean)?,
            std: share(&self.std)?,
        })
    }

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

    /// The mean it subtracts (its shape is the fitted statistic's).
    pub fn mean(&self) -> &Tensor {
        &self.mean
    }

    /// The standard deviation it divides by (eps included where the kind adds one).
    pub fn std(&self) -> &Tensor {
        &self.std
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

#[cfg(test)]
mod regrid_tests {
    use super::*;

    /// A field linear in each coordinate, sampled on `shape` (row-major, nodes at 0 and 1).
    fn linear_field(shape: &[i64]) -> Tensor {
        let n: i64 = shape.iter().product();
        let mut out = vec![0f64; n as usize];
        for (i, v) in out.iter_mut().enumerate() {
            let (mut rest, mut acc) = (i as i64, 2.0);
            for (j, &s) in shape.iter().enumerate().rev() {
                let x = (rest % s) as f64 / (s - 1) as f64;
                rest /= s;
                acc += (j as f64 + 1.5) * x;
            }
            *v = acc;
        }
        Tensor::from_slice(&out).reshape([1, n, 1])
    }

    /// At the data's own nodes, interpolation reproduces a field linear per axis at the nodes
    /// inside the fitted grid and holds the end values beyond it; on linspace(0, 1, n) nodes it
    /// is `regridded`; per-channel statistics pass unchanged.
    #[test]
    fn regridded_at_the_nodes_interpolates_inside_and_holds_the_ends() {
        let opts = (Kind::Double, tch::Device::Cpu);
        // neuraloperator's nodes k / n: 2 → 4 rows, 4 → 8 columns.
        let axis = |n: i64| Tensor::arange(n, opts) / n as f64;
        let (from, to) = ([axis(2), axis(4)], [axis(4), axis(8)]);
        // mean(r, c) = 1 + 2 r + 3 c on the fitted nodes.
        let field = |r: &Tensor, c: &Tensor| {
            (r.view([-1, 1]) * 2.0 + c.view([1, -1]) * 3.0 + 1.0).reshape([1, -1, 1])
        };
        let coarse = Normalizer::from_stats(
            NormalizerKind::Gaussian,
            field(&from[0], &from[1]),
            field(&from[0], &from[1]) * 0.5,
        )
        .unwrap();
        let fine = coarse.regridded_at(&from, &to).unwrap();
        // Beyond the last fitted node (row 1/2, column 3/4) the value is held.
        let want = field(&to[0].clamp_max(0.5), &to[1].clamp_max(0.75));
        assert_eq!(fine.mean.size(), vec![1, 32, 1]);
        let err = (&fine.mean - &want).abs().max().double_value(&[]);
        assert!(err < 1e-12, "{err}");
        let err = (&fine.std - &want * 0.5).abs().max().double_value(&[]);
        assert!(err < 1e-12, "{err}");
        // Every other fine node is a coarse node: its statistics are the coarse ones exactly.
        let m = fine.mean.view([4, 8]);
        let c = coarse.mean.view([2, 4]);
        assert!(m.slice(0, 0, 4, 2).slice(1, 0, 8, 2).equal(&c));

        // On linspace(0, 1, n) nodes it is `regridded`.
        let lin = |n: i64| Tensor::linspace(0.0, 1.0, n, opts);
        let stats = linear_field(&[3, 4]);
        let g =
            Normalizer::from_stats(NormalizerKind::Gaussian, stats.copy(), stats + 1.0).unwrap();
        let a = g
            .regridded_at(&[lin(3), lin(4)], &[lin(5), lin(9)])
            .unwrap();
        let b = g.regridded(&[3, 4], &[5, 9]).unwrap();
        assert!(a.mean.allclose(&b.mean, 1e-12, 1e-12, false));
        assert!(a.std.allclose(&b.std, 1e-12, 1e-12, false));

        // Per-channel statistics do not depend on the grid; decreasing nodes are refused.
        let unit = Normalizer::from_stats(
            NormalizerKind::Unit,
            Tensor::ones([1, 1, 1], opts),
            Tensor::ones([1, 1, 1], opts),
        )
        .unwrap();
        let same = unit.regridded_at(&from, &to).unwrap();
        assert!(same.mean.equal(&unit.mean));
        let e = coarse
            .regridded_at(&[axis(2).flip([0]), axis(4)], &to)
            .unwrap_err()
            .to_string();
        assert!(e.contains("increasing"), "{e}");
    }

    /// Linear interpolation reproduces a field linear per axis exactly: a pointwise normalizer
    /// fitted on a coarse grid equals the one fitted on the fine grid.
    #[test]
    fn regridded_gaussian_statistics_interpolate_linear_fields_exactly() {
        for (from, to) in [
            (vec![3], vec![7]),
            (vec![3, 4], vec![5, 9]),
            (vec![2, 3, 3], vec![3, 5, 4]),
        ] {
            let coarse = Normalizer::from_stats(
                NormalizerKind::Gaussian,
                linear_field(&from),
                linear_field(&from) * 0.5,
            )
            .unwrap();
            let fine = coarse.regridded(&from, &to).unwrap();
            let want = linear_field(&to);
            let err = (&fine.mean - &want).abs().max().double_value(&[]);
            assert!(err < 1e-12, "{from:?} → {to:?}: {err}");
            let err = (&fine.std - &want * 0.5).abs().max().double_value(&[]);
            assert!(err < 1e-12, "{from:?} → {to:?}: {err}");
        }
        // Per-channel statistics do not depend on the grid; mismatched dimensions are refused.
        let unit = Normalizer::from_stats(
            NormalizerKind::Unit,
            Tensor::from_slice(&[1.0f64]).reshape([1, 1, 1]),
            Tensor::from_slice(&[2.0f64]).reshape([1, 1, 1]),
        )
        .unwrap();
        assert_eq!(
            unit.regridded(&[3, 3], &[5, 5]).unwrap().mean.size(),
            [1, 1, 1]
        );
        let g = Normalizer::from_stats(
            NormalizerKind::Gaussian,
            linear_field(&[3, 3]),
            linear_field(&[3, 3]),
        )
        .unwrap();
        assert!(g.regridded(&[3, 3], &[5]).is_err());
        assert!(g.regridded(&[4, 3], &[5, 5]).is_err());
    }

    /// The Galerkin Transformer fits its pointwise normalizer on NumPy arrays: population std
    /// (Σ(x − x̄)²/S)^½ + 1e-5, against FNO's unbiased one; checked on a hand-computed sample.
    #[test]
    fn gaussian_population_uses_the_numpy_std() {
        // Two points, three samples: point 0 takes 1, 2, 6; point 1 takes 0, 0, 3.
        let x = Tensor::from_slice(&[1.0f64, 0.0, 2.0, 0.0, 6.0, 3.0]).reshape([3, 2, 1]);
        let pop = Normalizer::fit(NormalizerKind::GaussianPopulation, &x).unwrap();
        let fno = Normalizer::fit(NormalizerKind::Gaussian, &x).unwrap();
        let want_pop = [(14.0f64 / 3.0).sqrt() + 1e-5, 2.0f64.sqrt() + 1e-5];
        let want_fno = [7.0f64.sqrt() + 1e-5, 3.0f64.sqrt() + 1e-5];
        let got_pop = Vec::<f64>::try_from(pop.std.reshape([-1])).unwrap();
        let got_fno = Vec::<f64>::try_from(fno.std.reshape([-1])).unwrap();
        for i in 0..2 {
            assert!((got_pop[i] - want_pop[i]).abs() < 1e-14, "{got_pop:?}");
            assert!((got_fno[i] - want_fno[i]).abs() < 1e-14, "{got_fno:?}");
        }
        assert!(NormalizerKind::GaussianPopulation.is_pointwise());
    }
}
