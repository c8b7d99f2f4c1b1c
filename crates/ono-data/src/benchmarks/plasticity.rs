//! Plasticity (`plas_N987_T20.mat`: `input` (987, 101) die profile, `output` (987, 101, 31, 20, 4)
//! [sample, x-node, y-node, time, channel]), as ONO's `pla_example.py`: train the first 900, test
//! the last 80 (indices 907–986; 900–906 unused); fx the profile repeated over the 31 y-nodes
//! (x-node major, N = 3131) with a UnitTransformer, positions the point index
//! linspace(0, 1, 3131), y transposed to (S, 3131, 4, 20) (channel before time), time input
//! t = linspace(0, 1, 20) with one optimizer step per time step; targets not normalized.

use std::path::Path;

use super::{
    find_file, index_positions, split, take, tensor_of, Benchmark, LoadOptions, Loaded, Take,
    GEOFNO_DATA,
};
use crate::dataset::TensorDataset;
use crate::readers::any::read_any;
use crate::Result;

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Plasticity;
    let path = find_file(dir, b, &["plas_N987_T20.mat"], GEOFNO_DATA)?;
    let mut arrays = read_any(&path, Some(&["input", "output"]))?;
    let ia = take(&mut arrays, "input", &path)?;
    let oa = take(&mut arrays, "output", &path)?;
    let input = tensor_of(&ia, &path, &[None, None])?;
    let (total, s1) = (ia.shape[0], ia.shape[1]);
    let output = tensor_of(&oa, &path, &[Some(total), Some(s1), None, None, None])?;
    let (s2, t, c) = (oa.shape[2] as i64, oa.shape[3] as i64, oa.shape[4] as i64);
    let n = s1 as i64 * s2;
    let (ntrain0, ntest0) = Benchmark::Plasticity.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    let make = |k: Take, what: &str| -> Result<(tch::Tensor, tch::Tensor)> {
        let inp = k.apply(&input, what)?;
        let s = inp.size()[0];
        let fx = inp
            .f_unsqueeze(-1)?
            .f_expand([s, s1 as i64, s2], false)?
            .f_reshape([s, n, 1])?;
        let y = k
            .apply(&output, what)?
            .f_reshape([s, n, t, c])?
            .f_permute([0, 1, 3, 2])?
            .f_contiguous()?;
        Ok((fx, y))
    };
    let (fx_tr, y_tr) = make(tr, "ntrain")?;
    let (fx_te, y_te) = make(te, "ntest")?;
    let pos = index_positions(n)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: Some(vec![s1 as i64, s2]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![path],
        notes: vec![
            format!("{s1}×{s2} = {n} nodes, {c} channels × {t} time steps (y as (S, N, {c}, {t}))"),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}
