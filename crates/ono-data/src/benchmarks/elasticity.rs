//! Elasticity. Point cloud (`Random_UnitCell_sigma_10.npy` (972, 2000) → transposed to (2000,
//! 972); `Random_UnitCell_XY_10.npy` (972, 2, 2000) → permuted to (2000, 972, 2)), as ONO's
//! `ela_example.py`: train the first 1000, test the last 200; positions are the point index
//! linspace(0, 1, 972) (space_dim 1), fx the raw (x, y) of each sample's own points, y = σ with
//! a UnitTransformer (decoded before the loss); Geo-FNO: no normalization.
//!
//! Interpolated grid (`Random_UnitCell_mask_10_interp.npy`, `Random_UnitCell_sigma_10_interp.npy`,
//! each (41, 41, 2000) → (2000, 41, 41)), as FNO-interp: fx the material mask (1 solid, 0 void),
//! y = σ, positions on the 41×41 grid, the same split, no normalization. The reference scores
//! `prediction × mask`; the trainer does not (yet) — multiply predictions by fx before scoring.

use std::path::Path;

use tch::Tensor;

use super::{
    find_file, index_positions, split, take, tensor_of, Benchmark, LoadOptions, Loaded, Take,
    GEOFNO_DATA,
};
use crate::dataset::{grid_positions_2d, TensorDataset};
use crate::readers::any::read_any;
use crate::Result;

fn one(p: &Path) -> Result<crate::array::NamedArray> {
    let mut a = read_any(p, None)?;
    let name = a.first().map(|a| a.name.clone()).unwrap_or_default();
    take(&mut a, &name, p)
}

pub(super) fn load_points(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Elasticity;
    let ps = find_file(
        dir,
        b,
        &[
            "Random_UnitCell_sigma_10.npy",
            "Meshes/Random_UnitCell_sigma_10.npy",
        ],
        GEOFNO_DATA,
    )?;
    let pxy = find_file(
        dir,
        b,
        &[
            "Random_UnitCell_XY_10.npy",
            "Meshes/Random_UnitCell_XY_10.npy",
        ],
        GEOFNO_DATA,
    )?;
    let (sa, xya) = (one(&ps)?, one(&pxy)?);
    let sigma = tensor_of(&sa, &ps, &[None, None])?.f_transpose(0, 1)?; // (S, N)
    let (n, total) = (sa.shape[0], sa.shape[1]);
    let xy = tensor_of(&xya, &pxy, &[Some(n), Some(2), Some(total)])?.f_permute([2, 0, 1])?; // (S, N, 2)
    let (ntrain0, ntest0) = Benchmark::Elasticity.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    let make = |k: Take, what: &str| -> Result<(Tensor, Tensor)> {
        Ok((
            k.apply(&xy, what)?.f_contiguous()?,
            k.apply(&sigma, what)?.f_unsqueeze(-1)?.f_contiguous()?,
        ))
    };
    let (fx_tr, y_tr) = make(tr, "ntrain")?;
    let (fx_te, y_te) = make(te, "ntest")?;
    let pos = index_positions(n as i64)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: None,
            query_grid: None,
            test_grid: None,
        },
        files: vec![ps, pxy],
        notes: vec![
            format!("{n} points per sample (own coordinates in fx; positions = point index)"),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}

pub(super) fn load_grid(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::ElasticityGrid;
    let pm = find_file(
        dir,
        b,
        &[
            "Random_UnitCell_mask_10_interp.npy",
            "Interp/Random_UnitCell_mask_10_interp.npy",
        ],
        GEOFNO_DATA,
    )?;
    let ps = find_file(
        dir,
        b,
        &[
            "Random_UnitCell_sigma_10_interp.npy",
            "Interp/Random_UnitCell_sigma_10_interp.npy",
        ],
        GEOFNO_DATA,
    )?;
    let (ma, sa) = (one(&pm)?, one(&ps)?);
    let mask = tensor_of(&ma, &pm, &[None, None, None])?.f_permute([2, 0, 1])?;
    let (h, w, total) = (ma.shape[0] as i64, ma.shape[1] as i64, ma.shape[2]);
    let sigma = tensor_of(&sa, &ps, &[Some(h as usize), Some(w as usize), Some(total)])?
        .f_permute([2, 0, 1])?;
    let (ntrain0, ntest0) = Benchmark::ElasticityGrid.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    let make = |k: Take, what: &str| -> Result<(Tensor, Tensor)> {
        let m = k.apply(&mask, what)?;
        let s = m.size()[0];
        Ok((
            m.f_reshape([s, h * w, 1])?,
            k.apply(&sigma, what)?.f_reshape([s, h * w, 1])?,
        ))
    };
    let (fx_tr, y_tr) = make(tr, "ntrain")?;
    let (fx_te, y_te) = make(te, "ntest")?;
    let pos = grid_positions_2d(h, w)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: Some(vec![h, w]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![pm, ps],
        notes: vec![
            format!(
                "grid {h}×{w}; fx = material mask, y = σ; the reference scores prediction × mask"
            ),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}
