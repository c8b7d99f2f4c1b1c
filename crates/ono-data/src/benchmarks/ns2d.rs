//! Navier–Stokes 2-D, ν = 1e-5 (`NavierStokes_V1e-5_N1200_T20.mat`, also accepted as
//! `ns_V1e-5_N1200_T20.mat`; variable `u` (1200, 64, 64, 20), frame k is t = k + 1 — frame 0 is
//! t = 1, not the initial condition `a`), as ONO's `NS_example2.py`: train u[:1000], test
//! u[-200:], fx = frames 0–9 (10 channels), targets frames 10–19 predicted one at a time
//! (autoregressive), positions on the 64×64 grid, no normalization.

use std::path::Path;

use super::{find_file, split, take, tensor_of, Benchmark, LoadOptions, Loaded, Take, FNO_DATA};
use crate::dataset::{grid_positions_2d, TensorDataset};
use crate::readers::any::read_any;
use crate::{Error, Result};

/// Input frames.
const T_IN: i64 = 10;

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Ns2d;
    let path = find_file(
        dir,
        b,
        &["NavierStokes_V1e-5_N1200_T20.mat", "ns_V1e-5_N1200_T20.mat"],
        FNO_DATA,
    )?;
    let mut arrays = read_any(&path, Some(&["u"]))?;
    let u_arr = take(&mut arrays, "u", &path)?;
    let u = tensor_of(&u_arr, &path, &[None, None, None, None])?;
    let (total, h, w, t) = (
        u_arr.shape[0],
        u_arr.shape[1] as i64,
        u_arr.shape[2] as i64,
        u_arr.shape[3] as i64,
    );
    if t <= T_IN {
        return Err(Error::Format {
            path,
            msg: format!("`u` has {t} frames; the benchmark needs more than {T_IN}"),
        });
    }
    let r = opts.r.unwrap_or(1).max(1) as i64;
    let (ntrain0, ntest0) = Benchmark::Ns2d.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let frames = |take_n: Take, what: &str| -> Result<(tch::Tensor, tch::Tensor)> {
        let v = take_n
            .apply(&u, what)?
            .f_slice(1, 0, h, r)?
            .f_slice(2, 0, w, r)?;
        let (s, hh, ww) = (v.size()[0], v.size()[1], v.size()[2]);
        let flat = v.f_reshape([s, hh * ww, t])?;
        let fx = flat.f_narrow(2, 0, T_IN)?.f_contiguous()?;
        let y = flat
            .f_narrow(2, T_IN, t - T_IN)?
            .f_unsqueeze(2)?
            .f_contiguous()?;
        Ok((fx, y))
    };
    let (fx_tr, y_tr) = frames(Take::First(ntrain), "ntrain")?;
    let (fx_te, y_te) = frames(Take::Last(ntest), "ntest")?;
    let (hh, ww) = ((h + r - 1) / r, (w + r - 1) / r);
    let pos = grid_positions_2d(hh, ww)?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: Some(vec![hh, ww]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![path],
        notes: vec![
            format!(
                "grid {hh}×{ww} (r = {r}), {t} frames: frames 0–{} in (t = 1–{T_IN}), {} out",
                T_IN - 1,
                t - T_IN
            ),
            format!(
                "train {} of {total}, test {}",
                Take::First(ntrain).describe(total),
                Take::Last(ntest).describe(total)
            ),
        ],
    })
}
