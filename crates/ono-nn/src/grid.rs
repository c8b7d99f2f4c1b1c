//! Regular grids: where a model's points lie ([`Geometry`]), the index-grid channels the FNO
//! family appends to its input, and moving point features (B, N, C) onto a row-major grid
//! (B, C, n_1, …, n_D) and back.

use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// Where a model's N points lie (NSL's `geotype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Geometry {
    /// `structured_{dims}D`: the points are a row-major grid of `dims` ∈ 1 ..= 3 axes; its shape
    /// comes with each input (NSL's `shapelist`, fixed at construction there).
    Structured { dims: usize },
    /// `unstructured`: a point cloud (NSL's irregular mesh).
    Unstructured,
}

/// The coordinates of a row-major grid of `shape` with `linspace(0, 1, n_j)` along axis j,
/// computed in float64 and then cast to `kind` (as the reference scripts build it with numpy:
/// float32 `linspace` differs by an ulp at some points).
///
/// # Shapes
/// - returns: (n_1·…·n_D, D), point i_1·n_2·…·n_D + … + i_D at (x_1(i_1), …, x_D(i_D))
pub fn index_grid(shape: &[i64], kind: Kind, device: Device) -> Result<Tensor> {
    if shape.is_empty() || shape.iter().any(|&n| n < 1) {
        return Err(Error::Shape {
            op: "index_grid",
            expected: "a grid shape of positive sizes".into(),
            got: shape.to_vec(),
        });
    }
    let axes = shape
        .iter()
        .map(|&n| Tensor::f_linspace(0.0, 1.0, n, (Kind::Double, device)))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    let mesh = Tensor::f_meshgrid_indexing(&axes, "ij")?;
    let n: i64 = shape.iter().product();
    let flat = mesh
        .iter()
        .map(|m| m.f_reshape([n]))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Tensor::f_stack(&flat, -1)?.f_to_kind(kind)?)
}

/// Point features onto the grid, channels first.
///
/// # Shapes
/// - `x`: (B, N, C) with N = n_1·…·n_D, row-major
/// - returns: (B, C, n_1, …, n_D)
pub fn points_to_grid(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let size = x.size();
    let n: i64 = shape.iter().product();
    if size.len() != 3 || size[1] != n {
        return Err(Error::Shape {
            op: "points_to_grid",
            expected: format!("(B, {n}, C) for the grid {shape:?}"),
            got: size,
        });
    }
    let (b, c) = (size[0], size[2]);
    let mut full = vec![b];
    full.extend_from_slice(shape);
    full.push(c);
    let d = shape.len() as i64;
    let mut perm = vec![0, d + 1];
    perm.extend(1..=d);
    Ok(x.f_reshape(&full)?.f_permute(&perm)?)
}

/// The inverse of [`points_to_grid`].
///
/// # Shapes
/// - `x`: (B, C, n_1, …, n_D)
/// - returns: (B, N, C)
pub fn grid_to_points(x: &Tensor) -> Result<Tensor> {
    let size = x.size();
    if size.len() < 3 {
        return Err(Error::Shape {
            op: "grid_to_points",
            expected: "(B, C, n_1, …, n_D)".into(),
            got: size,
        });
    }
    let d = size.len() as i64 - 2;
    let mut perm = vec![0];
    perm.extend(2..d + 2);
    perm.push(1);
    let n: i64 = size[2..].iter().product();
    Ok(x.f_permute(&perm)?.f_reshape([size[0], n, size[1]])?)
}

/// Zeros appended at the end of each spatial axis (`F.pad(x, [0, p_D, …, 0, p_1])`).
///
/// # Shapes
/// - `x`: (B, C, n_1, …, n_D), `pad`: D sizes
/// - returns: (B, C, n_1 + p_1, …, n_D + p_D)
pub fn pad_end(x: &Tensor, pad: &[i64]) -> Result<Tensor> {
    if pad.iter().all(|&p| p == 0) {
        return Ok(x.shallow_clone());
    }
    let mut spec = Vec::with_capacity(2 * pad.len());
    for &p in pad.iter().rev() {
        spec.extend([0, p]);
    }
    Ok(x.f_constant_pad_nd(&spec)?)
}

/// The first `shape` cells of each spatial axis (the crop after [`pad_end`]).
///
/// # Shapes
/// - `x`: (B, C, m_1, …, m_D) with m_j ≥ n_j
/// - returns: (B, C, n_1, …, n_D)
pub fn crop(x: &Tensor, shape: &[i64]) -> Result<Tensor> {
    let mut out = x.shallow_clone();
    for (j, &n) in shape.iter().enumerate() {
        out = out.f_narrow(2 + j as i64, 0, n)?;
    }
    Ok(out)
}

/// The unified position embedding of the Neural-Solver-Library (`layers/Embedding.py`
/// `unified_pos_embedding`): the Euclidean distance of every grid point to every point of a
/// `reference`^D grid, both grids `linspace(0, 1, ·)` per axis in float64 cast to `kind` (numpy
/// doubles cast to `torch.float` in the reference); the differences, squares, their sum over the
/// D coordinates and the square root are taken in `kind`, with the same ops as the reference so
/// float32 rounds alike.
///
/// # Shapes
/// - returns: (n_1·…·n_D, reference^D); row i_1·n_2·…·n_D + … + i_D is the grid point at
///   (x_1(i_1), …, x_D(i_D)) (the first coordinate along the first axis), column
///   a_1·ref^(D−1) + … + a_D the reference point (l(a_1), …, l(a_D))
pub fn unified_pos_embedding(
    shape: &[i64],
    reference: i64,
    kind: Kind,
    device: Device,
) -> Result<Tensor> {
    if reference < 1 {
        return Err(Error::Config(format!(
            "unified position embedding: ref = {reference} must be positive"
        )));
    }
    let grid = index_grid(shape, kind, device)?; // (N, D)
    let refs = index_grid(&vec![reference; shape.len()], kind, device)?; // (R, D)
    Ok(grid
        .f_unsqueeze(1)?
        .f_sub(&refs.f_unsqueeze(0)?)?
        .f_pow_tensor_scalar(2)?
        .f_sum_dim_intlist(-1, false, None::<Kind>)?
        .f_sqrt()?)
}
