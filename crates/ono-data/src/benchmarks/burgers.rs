//! Burgers 1-D, ν = 0.1 (`burgers_data_R10.mat`, variables `a` and `u`, each (2048, 8192)), as the
//! FNO-1D script: sub = 2³ → 1024 points, train the first 1000, test the last 100 (the paper
//! reports 200: set `ntest`), positions linspace(0, 1, n), no normalization. Not one of ONO's
//! benchmarks; the ONO layout is the FNO one. Galerkin layout (`ex1_burgers.py`): sub = 4 → 2048
//! points (the stride must be even or 1), train the first 1024 (half the file), test the last
//! 100, and `aux` = u′, the periodic central difference of u on the full 8192 grid (h = 1/8192)
//! subsampled, for the H¹ term of `WeightedL2Loss`.

use std::path::Path;

use super::{
    find_file, index_positions, split, take, tensor_of, Benchmark, Layout, LoadOptions, Loaded,
    Take, FNO_DATA,
};
use crate::dataset::TensorDataset;
use crate::readers::any::read_any;
use crate::stencils::central_diff_periodic_1d;
use crate::{Error, Result};

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Burgers;
    let path = find_file(dir, b, &["burgers_data_R10.mat"], FNO_DATA)?;
    let mut arrays = read_any(&path, Some(&["a", "u"]))?;
    let a_arr = take(&mut arrays, "a", &path)?;
    let u_arr = take(&mut arrays, "u", &path)?;
    let a = tensor_of(&a_arr, &path, &[None, None])?;
    let u = tensor_of(&u_arr, &path, &[Some(a_arr.shape[0]), Some(a_arr.shape[1])])?;
    let (total, n_full) = (a_arr.shape[0], a_arr.shape[1] as i64);
    let galerkin = opts.layout == Layout::Galerkin;
    let r = opts.r.unwrap_or(if galerkin { 4 } else { 8 }).max(1) as i64;
    if galerkin && r > 1 && r % 2 == 1 {
        return Err(Error::Config {
            what: "r".into(),
            msg: format!("the Galerkin layout subsamples by an even stride or 1 (BurgersDataset asserts it), got {r}"),
        });
    }
    let (ntrain0, ntest0) = Benchmark::Burgers.default_split(opts.layout);
    let ntrain = opts
        .ntrain
        .unwrap_or(if galerkin { total / 2 } else { ntrain0 });
    let ntest = opts.ntest.unwrap_or(ntest0);
    let sub = |t: &tch::Tensor, k: Take, what: &str| -> Result<tch::Tensor> {
        Ok(k.apply(t, what)?
            .f_slice(1, 0, n_full, r)?
            .f_unsqueeze(-1)?
            .f_contiguous()?)
    };
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    let fx_tr = sub(&a, tr, "ntrain")?;
    let n = fx_tr.size()[1];
    let pos = index_positions(n)?;
    let mut train = split(fx_tr, sub(&u, tr, "ntrain")?, pos.shallow_clone());
    let mut test = split(sub(&a, te, "ntest")?, sub(&u, te, "ntest")?, pos);
    if galerkin {
        let du = central_diff_periodic_1d(&u, 1.0 / n_full as f64)?;
        train.aux = Some(sub(&du, tr, "ntrain")?);
        test.aux = Some(sub(&du, te, "ntest")?);
    }
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train,
            test,
            grid: Some(vec![n]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![path],
        notes: vec![
            format!("{n} points (sub = {r} of {n_full})"),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}
