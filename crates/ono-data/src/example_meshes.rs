//! The worked example of docs/data.md, "Your own data": steady 2-D grid data (our Darcy
//! solutions) sampled on a random triangulation of the unit square per sample and written as
//! VTU files, one per sample, the way a finite-element solver would leave them: every sample
//! has its own points, and their number varies.

use std::path::{Path, PathBuf};

use rand::{Rng, SeedableRng};
use tch::Kind;

use crate::dataset::{mix, TensorDataset};
use crate::readers::vtk::{write_triangles, MeshArray};
use crate::{Error, Result};

/// What [`write_vtu_samples`] wrote.
#[derive(Debug)]
pub struct MeshExample {
    /// The files, in sample order (training samples first).
    pub files: Vec<PathBuf>,
    /// The fewest and most points of a sample.
    pub points: (usize, usize),
}

/// Writes every sample of `ds` (training then test; steady, on a 2-D grid of positions in the
/// unit square as [`crate::dataset::grid_positions_2d`] lays them out) as
/// `dir/sample_<i>.vtu`. Sample i gets N_i points, uniform in [`min_points`, `max_points`] and
/// drawn from (`seed`, i): the four corners, about √N_i points on each edge, the rest inside;
/// its triangles are their Delaunay triangulation; its point arrays `a` (the input channels)
/// and `u` (the targets) are the grid's values interpolated bilinearly at the points.
pub fn write_vtu_samples(
    ds: &TensorDataset,
    dir: &Path,
    min_points: usize,
    max_points: usize,
    seed: u64,
) -> Result<MeshExample> {
    let grid = match ds.grid.as_deref() {
        Some([h, w]) if *h >= 2 && *w >= 2 => (*h as usize, *w as usize),
        other => {
            return Err(Error::Invalid(format!(
                "the example meshes sample a 2-D grid, not {other:?}"
            )))
        }
    };
    if min_points < 8 || max_points < min_points {
        return Err(Error::Config {
            what: "points".into(),
            msg: format!("{min_points} to {max_points}: at least 8, and the least first"),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    let mut range = (usize::MAX, 0);
    let mut i = 0u64;
    for split in [&ds.train, &ds.test] {
        if split.y.dim() != 3 {
            return Err(Error::Invalid(format!(
                "the example meshes take steady data, not targets {:?}",
                split.y.size()
            )));
        }
        let values = |t: &tch::Tensor| -> Result<Vec<f64>> {
            Ok(Vec::<f64>::try_from(
                t.f_to_kind(Kind::Double)?.f_reshape([-1])?,
            )?)
        };
        let (cf, cy) = (split.fx.size()[2] as usize, split.y.size()[2] as usize);
        let (fx, y) = (values(&split.fx)?, values(&split.y)?);
        let per = grid.0 * grid.1;
        for s in 0..split.len() as usize {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(seed, i));
            let n = rng.gen_range(min_points..=max_points);
            let pts = points(n, &mut rng);
            let tri = delaunator::triangulate(
                &pts.iter()
                    .map(|p| delaunator::Point { x: p[0], y: p[1] })
                    .collect::<Vec<_>>(),
            );
            let triangles: Vec<[usize; 3]> = tri
                .triangles
                .chunks_exact(3)
                .map(|t| [t[0], t[1], t[2]])
                .collect();
            if triangles.is_empty() {
                return Err(Error::Invalid(format!(
                    "sample {i}: its {n} points have no triangulation"
                )));
            }
            let at = |v: &[f64], c: usize| -> MeshArray {
                let field = &v[s * per * c..(s + 1) * per * c];
                MeshArray {
                    name: String::new(),
                    components: c,
                    values: pts
                        .iter()
                        .flat_map(|p| bilinear(field, grid, c, p[0], p[1]))
                        .collect(),
                }
            };
            let arrays = [
                MeshArray {
                    name: "a".into(),
                    ..at(&fx, cf)
                },
                MeshArray {
                    name: "u".into(),
                    ..at(&y, cy)
                },
            ];
            let xyz: Vec<f64> = pts.iter().flat_map(|p| [p[0], p[1], 0.0]).collect();
            let file = dir.join(format!("sample_{i:04}.vtu"));
            write_triangles(&file, &xyz, &triangles, &arrays)?;
            files.push(file);
            range = (range.0.min(n), range.1.max(n));
            i += 1;
        }
    }
    Ok(MeshExample {
        files,
        points: range,
    })
}

/// `n` points of the unit square: the corners, about √n on the edges, the rest inside.
fn points(n: usize, rng: &mut impl Rng) -> Vec<[f64; 2]> {
    let mut pts = vec![[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]];
    let edge = ((n as f64).sqrt() as usize).min((n - 4) / 4);
    for k in 0..4 * edge {
        let t: f64 = rng.gen_range(0.01..0.99);
        pts.push(match k % 4 {
            0 => [t, 0.0],
            1 => [1.0, t],
            2 => [t, 1.0],
            _ => [0.0, t],
        });
    }
    while pts.len() < n {
        pts.push([rng.gen_range(0.0..1.0), rng.gen_range(0.0..1.0)]);
    }
    pts
}

/// The `c` channels of `field` (an (h, w) row-major grid of [0, 1]², x along the columns)
/// interpolated bilinearly at (x, y).
fn bilinear(field: &[f64], (h, w): (usize, usize), c: usize, x: f64, y: f64) -> Vec<f64> {
    let (fx, fy) = (
        x.clamp(0.0, 1.0) * (w - 1) as f64,
        y.clamp(0.0, 1.0) * (h - 1) as f64,
    );
    let (j0, i0) = ((fx as usize).min(w - 2), (fy as usize).min(h - 2));
    let (tx, ty) = (fx - j0 as f64, fy - i0 as f64);
    let v = |i: usize, j: usize, k: usize| field[(i * w + j) * c + k];
    (0..c)
        .map(|k| {
            (1.0 - ty) * ((1.0 - tx) * v(i0, j0, k) + tx * v(i0, j0 + 1, k))
                + ty * ((1.0 - tx) * v(i0 + 1, j0, k) + tx * v(i0 + 1, j0 + 1, k))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bilinear interpolation reproduces a bilinear function exactly, at nodes and between.
    #[test]
    fn bilinear_is_exact_on_bilinear_fields() {
        let (h, w) = (4usize, 5usize);
        let f = |x: f64, y: f64| 1.0 + 2.0 * x - 3.0 * y + 4.0 * x * y;
        let field: Vec<f64> = (0..h * w)
            .flat_map(|k| {
                let (x, y) = (
                    (k % w) as f64 / (w - 1) as f64,
                    (k / w) as f64 / (h - 1) as f64,
                );
                [f(x, y), -f(x, y)]
            })
            .collect();
        for (x, y) in [
            (0.0, 0.0),
            (1.0, 1.0),
            (0.37, 0.81),
            (0.99, 0.02),
            (0.5, 1.0),
        ] {
            let v = bilinear(&field, (h, w), 2, x, y);
            assert!((v[0] - f(x, y)).abs() < 1e-12 && (v[1] + f(x, y)).abs() < 1e-12);
        }
    }
}
