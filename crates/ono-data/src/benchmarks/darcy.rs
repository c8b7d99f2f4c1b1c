//! Darcy flow (`piececonst_r421_N1024_smooth1.mat` / `..._smooth2.mat`, variables `coeff` and
//! `sol`, each (1024, 421, 421)), as ONO's `Darcy_example.py`: r = 5, `[::r, ::r][:s, :s]` with
//! s = (421 − 1)/r + 1 = 85, train = smooth1[:1000], test = smooth2[:200], positions on the s×s
//! grid of [0, 1]² (row-major, `pos[..., 0]` the column coordinate), fx = coeff, y = sol,
//! UnitTransformer on both, derivative loss α = 0.1. FNO layout: test = smooth2[:100],
//! UnitGaussianNormalizer on both, no derivative loss. Galerkin layout (`ex2_darcy.py`): the
//! fine grid `[::r, ::r]` with r = 3 (141), train = smooth1[:1024], test = smooth2[-100:],
//! and `aux` = (∂u/∂row, ∂u/∂column, raw coefficient) at the fine points, the derivatives taken
//! on the full 421 grid (zero-padded central differences, h = 1/421) before subsampling, for the
//! H¹ term of `WeightedL2Loss2d`.

use std::path::{Path, PathBuf};

use tch::Kind;

use super::{
    find_file, split, take, tensor_of, Benchmark, Layout, LoadOptions, Loaded, Take, FNO_DATA,
};
use crate::dataset::{grid_positions_2d, Split, TensorDataset};
use crate::readers::any::read_any;
use crate::stencils::central_diff_2d;
use crate::{Error, Result};

/// The two files of the benchmark, (train, test).
pub(super) fn files(dir: &Path, b: Benchmark) -> Result<(PathBuf, PathBuf)> {
    Ok((
        find_file(dir, b, &["piececonst_r421_N1024_smooth1.mat"], FNO_DATA)?,
        find_file(dir, b, &["piececonst_r421_N1024_smooth2.mat"], FNO_DATA)?,
    ))
}

/// The samples `take_n` of one file at full resolution.
pub(super) struct Full {
    /// (S, k, k), as stored (float64 in the published files).
    pub coeff: tch::Tensor,
    /// (S, k, k).
    pub sol: tch::Tensor,
    /// The grid size k (421 published).
    pub k: i64,
    /// Samples in the file.
    pub total: usize,
}

/// Reads `coeff` and `sol` of one file, checks their shapes, and keeps the samples `take_n`.
pub(super) fn read_full(path: &Path, take_n: Take, what: &str) -> Result<Full> {
    let mut arrays = read_any(path, Some(&["coeff", "sol"]))?;
    let coeff = take(&mut arrays, "coeff", path)?;
    let sol = take(&mut arrays, "sol", path)?;
    let c = tensor_of(&coeff, path, &[None, None, None])?;
    let u = tensor_of(
        &sol,
        path,
        &[
            Some(coeff.shape[0]),
            Some(coeff.shape[1]),
            Some(coeff.shape[2]),
        ],
    )?;
    let k = coeff.shape[1] as i64;
    if coeff.shape[2] as i64 != k {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!("`coeff` is not square: {:?}", coeff.shape),
        });
    }
    Ok(Full {
        coeff: take_n.apply(&c, what)?,
        sol: take_n.apply(&u, what)?,
        k,
        total: coeff.shape[0],
    })
}

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Darcy;
    if opts.layout == Layout::Galerkin {
        return load_galerkin(dir, opts);
    }
    let (train_path, test_path) = files(dir, b)?;
    let r = opts.r.unwrap_or(5);
    if r == 0 {
        return Err(Error::Config {
            what: "r".into(),
            msg: "the subsampling stride must be ≥ 1".into(),
        });
    }
    let (ntrain0, ntest0) = Benchmark::Darcy.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let mut notes = Vec::new();
    let read =
        |path: &Path, take_n: Take, what: &str| -> Result<(tch::Tensor, tch::Tensor, i64, usize)> {
            let full = read_full(path, take_n, what)?;
            let k = full.k;
            let s = (k - 1) / r as i64 + 1;
            let sub = |t: &tch::Tensor| -> Result<tch::Tensor> {
                Ok(t.f_slice(1, 0, k, r as i64)?
                    .f_slice(2, 0, k, r as i64)?
                    .f_narrow(1, 0, s)?
                    .f_narrow(2, 0, s)?
                    .f_reshape([-1, s * s, 1])?
                    .f_to_kind(Kind::Float)?)
            };
            Ok((sub(&full.coeff)?, sub(&full.sol)?, s, full.total))
        };
    let (a_train, u_train, s, total_train) = read(&train_path, Take::First(ntrain), "ntrain")?;
    let (a_test, u_test, _, total_test) = read(&test_path, Take::First(ntest), "ntest")?;
    notes.push(format!(
        "resolution: r = {r}, s = {s} ({} points per sample)",
        s * s
    ));
    notes.push(split_note(
        (&train_path, Take::First(ntrain), total_train),
        (&test_path, Take::First(ntest), total_test),
    ));
    // The papers use 12 / 3; the public demo.m draws 12 / 4. Report what the files hold.
    let values = distinct_values(&a_train.f_narrow(0, 0, 1)?, 8)?;
    let expected = values == [3.0, 12.0];
    notes.push(format!(
        "coefficient values in train sample 0: {values:?}{}",
        if expected {
            " (12 / 3, as the papers)"
        } else {
            " — NOT the papers' {3, 12}; check the file (demo.m draws 12 / 4)"
        }
    ));
    let pos = grid_positions_2d(s, s)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(a_train, u_train, pos.shallow_clone()),
            test: split(a_test, u_test, pos),
            grid: Some(vec![s, s]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![train_path, test_path],
        notes,
    })
}

/// Up to `cap` distinct values of `t`, sorted (one host read).
pub(super) fn distinct_values(t: &tch::Tensor, cap: usize) -> Result<Vec<f64>> {
    let (u, _, _) = t
        .f_reshape([-1])?
        .f_to_kind(Kind::Double)?
        .f_unique_dim(0, true, false, false)?;
    let v = Vec::<f64>::try_from(u.f_narrow(0, 0, (u.size()[0]).min(cap as i64))?)?;
    Ok(v)
}

/// The Galerkin Transformer's forward-problem layout (see the module documentation).
fn load_galerkin(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Darcy;
    let (train_path, test_path) = files(dir, b)?;
    let r = opts.r.unwrap_or(3).max(1) as i64;
    let (ntrain0, ntest0) = Benchmark::Darcy.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    let part = |path: &Path, take_n: Take, what: &str| -> Result<(Split, i64, usize)> {
        let full = read_full(path, take_n, what)?;
        let k = full.k;
        let (d_cols, d_rows) =
            central_diff_2d(&full.sol.f_reshape([-1, k * k])?, k, 1.0 / k as f64)?;
        let sub = |t: &tch::Tensor| -> Result<tch::Tensor> {
            Ok(t.f_slice(1, 0, k, r)?.f_slice(2, 0, k, r)?)
        };
        let a = sub(&full.coeff)?;
        let n = a.size()[1];
        let points = |t: &tch::Tensor| -> Result<tch::Tensor> {
            Ok(t.f_reshape([-1, n * n, 1])?.f_to_kind(Kind::Float)?)
        };
        let aux = tch::Tensor::f_cat(
            &[
                points(&sub(&d_rows)?)?,
                points(&sub(&d_cols)?)?,
                points(&a)?,
            ],
            2,
        )?;
        let mut split = Split::new(
            points(&a)?,
            points(&sub(&full.sol)?)?,
            grid_positions_2d(n, n)?,
        );
        split.aux = Some(aux);
        Ok((split, n, full.total))
    };
    let (train, n, total_train) = part(&train_path, tr, "ntrain")?;
    let (test, _, total_test) = part(&test_path, te, "ntest")?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train,
            test,
            grid: Some(vec![n, n]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![train_path.clone(), test_path.clone()],
        notes: vec![
            format!("Galerkin layout: fine grid {n}×{n} (r = {r})"),
            split_note((&train_path, tr, total_train), (&test_path, te, total_test)),
            "aux: ∂u/∂row, ∂u/∂column (on the full grid, then subsampled), raw coefficient".into(),
        ],
    })
}

/// Which samples of which file each split holds, for `ono data info`.
pub(super) fn split_note(train: (&Path, Take, usize), test: (&Path, Take, usize)) -> String {
    let name = |p: &Path| {
        p.file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .to_string()
    };
    format!(
        "train: {} {} of {}; test: {} {} of {}",
        name(train.0),
        train.1.describe(train.2),
        train.2,
        name(test.0),
        test.1.describe(test.2),
        test.2
    )
}
