//! The samples split into the dataset's training and test splits: which samples go where
//! ([`indices`]: by fraction and seed) and the samples of a split as tensors ([`build`]: stacked
//! on a grid, padded point clouds otherwise).

use tch::{Kind, Tensor};

use super::{Field, ImportLayout, RawSample};
use crate::dataset::{epoch_order, Split};
use crate::point_cloud::{PointCloudSplit, PointSample};
use crate::{Error, Result};

/// Test and train indices: the first `round(S × fraction)` (at least one, and one left to train
/// on) of the permutation [`epoch_order`]`(S, seed, 0)` are the test samples; both lists in
/// file order.
pub(super) fn indices(s: usize, fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    if s < 2 {
        return Err(Error::Config {
            what: "import".into(),
            msg: format!("{s} sample: a training and a test split need at least 2"),
        });
    }
    let k = ((s as f64 * fraction).round() as usize).clamp(1, s - 1);
    let order = epoch_order(s as i64, seed, 0);
    let mut test: Vec<usize> = order[..k].iter().map(|&i| i as usize).collect();
    let mut train: Vec<usize> = order[k..].iter().map(|&i| i as usize).collect();
    test.sort_unstable();
    train.sort_unstable();
    Ok((train, test))
}

/// The samples `idx` of `raw` as a split of `kind`: on a grid, stacked (S, N, C) with the shared
/// positions (1, N, d); else padded point clouds with their lengths
/// ([`PointCloudSplit::to_split`]). `fields`: the inputs' and targets' fields.
pub(super) fn build(
    raw: &[RawSample],
    idx: &[usize],
    layout: &ImportLayout,
    (inputs, targets): (&[Field], &[Field]),
    kind: Kind,
) -> Result<Split> {
    let d = raw[0].pos.len() / raw[0].source.points.max(1);
    let cf: usize = inputs.iter().map(|f| f.components).sum();
    let cy: usize = targets.iter().map(|f| f.components).sum();
    match &layout {
        ImportLayout::Grid { .. } => {
            let n = raw[0].source.points as i64;
            let stack = |f: &dyn Fn(&RawSample) -> &Vec<f64>, c: usize| -> Result<Tensor> {
                let mut all = Vec::with_capacity(idx.len() * n as usize * c);
                for &i in idx {
                    all.extend_from_slice(f(&raw[i]));
                }
                Ok(Tensor::from_slice(&all)
                    .f_reshape([idx.len() as i64, n, c as i64])?
                    .f_to_kind(kind)?)
            };
            let pos = Tensor::from_slice(&raw[0].pos)
                .f_reshape([1, n, d as i64])?
                .f_to_kind(kind)?;
            Ok(Split::new(
                stack(&|r| &r.fx, cf)?,
                stack(&|r| &r.y, cy)?,
                pos,
            ))
        }
        ImportLayout::PointCloud { .. } => {
            let mut split = PointCloudSplit::default();
            for &i in idx {
                let r = &raw[i];
                let n = r.source.points as i64;
                let t = |v: &[f64], c: usize| -> Result<Tensor> {
                    Ok(Tensor::from_slice(v)
                        .f_reshape([n, c as i64])?
                        .f_to_kind(kind)?)
                };
                split.samples.push(PointSample {
                    pos: t(&r.pos, d)?,
                    fx: t(&r.fx, cf)?,
                    y: t(&r.y, cy)?,
                    theta: None,
                    funcs: Vec::new(),
                });
            }
            split.to_split()
        }
    }
}
