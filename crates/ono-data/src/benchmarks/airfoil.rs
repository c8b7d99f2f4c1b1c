//! Airfoil (`NACA_Cylinder_X.npy`, `_Y.npy`: (N, 221, 51) node coordinates of the C-grid;
//! `NACA_Cylinder_Q.npy`: (N, 5, 221, 51), channel 4 the Mach number), as ONO's
//! `airfoil_example.py`: train [0, 1000), test [1000, 1200); positions are the regular *index*
//! grid of [0, 1]² (`pos[..., 0]` along axis 0 of the 221×51 grid, `pos[..., 1]` along axis 1),
//! fx the physical (X, Y), y the Mach number; no normalization (Geo-FNO likewise).

use std::path::Path;

use tch::{Device, Kind, Tensor};

use super::{find_file, split, take, tensor_of, Benchmark, LoadOptions, Loaded, Take, GEOFNO_DATA};
use crate::dataset::TensorDataset;
use crate::readers::any::read_any;
use crate::Result;

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::Airfoil;
    let px = find_file(
        dir,
        b,
        &["NACA_Cylinder_X.npy", "naca/NACA_Cylinder_X.npy"],
        GEOFNO_DATA,
    )?;
    let py = find_file(
        dir,
        b,
        &["NACA_Cylinder_Y.npy", "naca/NACA_Cylinder_Y.npy"],
        GEOFNO_DATA,
    )?;
    let pq = find_file(
        dir,
        b,
        &["NACA_Cylinder_Q.npy", "naca/NACA_Cylinder_Q.npy"],
        GEOFNO_DATA,
    )?;
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
    if qa.shape[1] < 5 {
        return Err(crate::Error::Format {
            path: pq,
            msg: format!(
                "Q has {} channels; the Mach number is channel 4",
                qa.shape[1]
            ),
        });
    }
    let (h, w) = (h as i64, w as i64);
    let (ntrain0, ntest0) = Benchmark::Airfoil.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Range(ntrain, ntest));
    let make = |k: Take, what: &str| -> Result<(Tensor, Tensor)> {
        let xy = Tensor::f_stack(&[k.apply(&x, what)?, k.apply(&y, what)?], -1)?;
        let s = xy.size()[0];
        let mach = k.apply(&q, what)?.f_select(1, 4)?;
        Ok((xy.f_reshape([s, h * w, 2])?, mach.f_reshape([s, h * w, 1])?))
    };
    let (fx_tr, y_tr) = make(tr, "ntrain")?;
    let (fx_te, y_te) = make(te, "ntest")?;
    let opts_f = (Kind::Float, Device::Cpu);
    let gx = Tensor::f_linspace(0.0, 1.0, h, opts_f)?
        .f_view([h, 1])?
        .f_expand([h, w], false)?;
    let gy = Tensor::f_linspace(0.0, 1.0, w, opts_f)?
        .f_view([1, w])?
        .f_expand([h, w], false)?;
    let pos = Tensor::f_stack(&[gx, gy], -1)?.f_reshape([1, h * w, 2])?;
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(fx_tr, y_tr, pos.shallow_clone()),
            test: split(fx_te, y_te, pos),
            grid: Some(vec![h, w]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![px, py, pq],
        notes: vec![
            format!(
                "C-grid {h}×{w} = {} points; fx = (X, Y), y = Q[:, 4] (Mach)",
                h * w
            ),
            format!(
                "train {} of {total}, test {}",
                tr.describe(total),
                te.describe(total)
            ),
        ],
    })
}
