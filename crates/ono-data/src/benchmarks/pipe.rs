//! Pipe (`Pipe_X.npy`, `Pipe_Y.npy`: (N, 129, 129) mesh coordinates; `Pipe_Q.npy`: (N, 3, 129,
//! 129), channel 0 the horizontal velocity), as ONO's `pipe_example.py`: of the first 1200,
//! train [0, 1000) and test [1000, 1200); positions are the point index linspace(0, 1, 16641)
//! (space_dim 1), fx the mesh (X, Y) with a UnitTransformer per coordinate, y with a
//! UnitTransformer (decoded before the loss). Geo-FNO: no normalization.

use std::path::Path;

use tch::Tensor;

use super::{
    find_file, index_positions, split, take, tensor_of, Benchmark, LoadOptions, Loaded, Take,
    GEOFNO_DATA,
};
use crate::dataset::TensorDataset;
use crate::readers::any::read_any;
use crate::Result;

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Pipe;
    let px = find_file(dir, b, &["Pipe_X.npy", "pipe/Pipe_X.npy"], GEOFNO_DATA)?;
    let py = find_file(dir, b, &["Pipe_Y.npy", "pipe/Pipe_Y.npy"], GEOFNO_DATA)?;
    let pq = find_file(dir, b, &["Pipe_Q.npy", "pipe/Pipe_Q.npy"], GEOFNO_DATA)?;
    let one = |p: &Path| -> Result<crate::array::NamedArray> {
        let mut a = read_any(p, None)?;
        let name = a.first().map(|a| a.name.clone()).unwrap_or_default();
        take(&mut a, &name, p)
    };
    let (xa, ya, qa) = (one(&px)?, one(&py)?, one(&pq)?);
    let x = tensor_of(&xa, &px, &[None, None, None])?;
    let (total, h, w) = (xa.shape[0], xa.shape[1], xa.shape[2]);
    let y = tensor_of(&ya, &py, &[Some(total), Some(h), Some(w)])?;
    let q = tensor_of(&qa, &pq, &[Some(total), None, Some(h), Some(w)])?;
    let n = (h * w) as i64;
    let (ntrain0, ntest0) = Benchmark::Pipe.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Range(ntrain, ntest));
    let make = |k: Take, what: &str| -> Result<(Tensor, Tensor)> {
        let xy = Tensor::f_stack(&[k.apply(&x, what)?, k.apply(&y, what)?], -1)?;
        let s = xy.size()[0];
        let u = k.apply(&q, what)?.f_select(1, 0)?;
        Ok((xy.f_reshape([s, n, 2])?, u.f_reshape([s, n, 1])?))
    };
    let (fx_tr, y_tr) = make(tr, "ntrain")?;
    let (fx_te, y_te) = make(te, "ntest")?;
    let pos = index_positions(n)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: Some(vec![h as i64, w as i64]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![px, py, pq],
        notes: vec![
            format!(
                "mesh {h}×{w} = {n} points, positions = point index (space_dim 1); y = Q[:, 0]"
            ),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}
