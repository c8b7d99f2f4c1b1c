//! The layout of imported samples: a grid the arrays give, a grid found among shared
//! positions (its points reordered row-major, the order kept to put predictions back,
//! [`ImportLayout::to_file_order`]), or point clouds.

use tch::Tensor;

use super::{ImportLayout, RawSample};
use crate::{Error, Result};

impl ImportLayout {
    /// A sample's `rows` (n, c) in the dataset's point order, put back in its file's order: the
    /// inverse of the row-major reordering of a grid found among scattered points; the rows as
    /// they are for every other layout.
    pub fn to_file_order(&self, rows: &Tensor) -> Result<Tensor> {
        let ImportLayout::Grid {
            order: Some(order), ..
        } = self
        else {
            return Ok(rows.shallow_clone());
        };
        if rows.dim() == 0 || rows.size()[0] != order.len() as i64 {
            return Err(Error::Shape {
                op: "ImportLayout::to_file_order",
                expected: format!("rows of the grid's {} points", order.len()),
                got: rows.size(),
            });
        }
        let order: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let index = Tensor::f_from_slice(&order)?.f_to_device(rows.device())?;
        // Node k of the grid is the file's point order[k].
        Ok(rows.f_zeros_like()?.f_index_copy(0, &index, rows)?)
    }
}

/// The layout of the samples: a grid given by the arrays, a grid found in shared positions, or
/// point clouds. A found grid reorders every sample's points row-major.
pub(super) fn lay_out(
    mut raw: Vec<RawSample>,
    grid: Option<Vec<usize>>,
    inferred: &mut Vec<String>,
) -> Result<(ImportLayout, Vec<RawSample>)> {
    if let Some(g) = grid {
        let shape: Vec<i64> = g.iter().map(|&s| s as i64).collect();
        inferred.push(format!("layout: a grid {shape:?}"));
        return Ok((ImportLayout::Grid { shape, order: None }, raw));
    }
    let n0 = raw[0].source.points;
    let shared = raw
        .iter()
        .all(|r| r.source.points == n0 && r.pos == raw[0].pos);
    if shared {
        if let Some((shape, order)) = tensor_grid(&raw[0].pos, n0) {
            let identity = order.iter().enumerate().all(|(k, &i)| k == i);
            for r in &mut raw {
                let d = r.pos.len() / n0;
                let cf = r.fx.len() / n0;
                let cy = r.y.len() / n0;
                let permute = |v: &[f64], c: usize| -> Vec<f64> {
                    order
                        .iter()
                        .flat_map(|&i| v[i * c..(i + 1) * c].iter().copied())
                        .collect()
                };
                if !identity {
                    r.pos = permute(&r.pos, d);
                    r.fx = permute(&r.fx, cf);
                    r.y = permute(&r.y, cy);
                }
            }
            inferred.push(format!(
                "layout: a grid {shape:?} (every sample has the same points, and they form one){}",
                if identity { "" } else { "; the points are reordered row-major and put back in the files' order on output" }
            ));
            return Ok((
                ImportLayout::Grid {
                    shape,
                    order: (!identity).then_some(order),
                },
                raw,
            ));
        }
    }
    let ragged = raw.iter().any(|r| r.source.points != n0);
    let (lo, hi) = raw.iter().fold((usize::MAX, 0), |(lo, hi), r| {
        (lo.min(r.source.points), hi.max(r.source.points))
    });
    inferred.push(if ragged {
        format!("layout: point clouds of {lo} to {hi} points (padded, with each sample's length)")
    } else if shared {
        format!("layout: point clouds of {n0} points, the same in every sample but not a grid")
    } else {
        format!("layout: point clouds of {n0} points, positions per sample")
    });
    Ok((ImportLayout::PointCloud { ragged }, raw))
}

/// Whether `pos` ((n, d) row-major) are the nodes of a tensor-product grid of at least 2 nodes
/// per axis: its shape (axis k along channel d − 1 − k, as the arrays' unit grid) and, for each grid
/// node in row-major order, the index of its point.
fn tensor_grid(pos: &[f64], n: usize) -> Option<(Vec<i64>, Vec<usize>)> {
    let d = pos.len() / n;
    let (lo, hi) = pos
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let tol = 1e-9 * (hi - lo).abs().max(1.0);
    // The distinct values of each channel, within the tolerance.
    let mut levels: Vec<Vec<f64>> = Vec::with_capacity(d);
    for c in 0..d {
        let mut v: Vec<f64> = (0..n).map(|i| pos[i * d + c]).collect();
        v.sort_by(f64::total_cmp);
        v.dedup_by(|a, b| (*a - *b).abs() <= tol);
        if v.len() < 2 {
            return None;
        }
        levels.push(v);
    }
    let count: usize = levels.iter().map(Vec::len).product();
    if count != n {
        return None;
    }
    let level = |c: usize, x: f64| -> Option<usize> {
        let l = &levels[c];
        let i = l.partition_point(|&v| v < x - tol);
        (i < l.len() && (l[i] - x).abs() <= tol).then_some(i)
    };
    let mut order = vec![usize::MAX; n];
    for i in 0..n {
        let mut k = 0usize;
        // Grid axis 0 is channel d − 1 (rows), the last axis channel 0 (columns).
        for c in (0..d).rev() {
            k = k * levels[c].len() + level(c, pos[i * d + c])?;
        }
        if order[k] != usize::MAX {
            return None;
        }
        order[k] = i;
    }
    let shape = (0..d).rev().map(|c| levels[c].len() as i64).collect();
    Some((shape, order))
}
