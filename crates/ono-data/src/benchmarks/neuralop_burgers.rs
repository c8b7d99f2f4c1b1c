//! Burgers 1-D from the `neuraloperator` 0.3.0 wheel (`neuralop/datasets/data/burgers_lowres.pt`):
//! a dict of `input` (the initial conditions, float64 (1200, 16)), `output` (the solutions,
//! float64 (1200, 17, 16): 17 time frames from t = 0, whose first frame is `input`) and `visc`
//! (ν = 0.01, (1, 1)), stored with column-major strides. Read as neuraloperator's
//! `load_burgers_1dtime` (with `config/burgers_config.yaml`) reads its Burgers files: a 2-D
//! problem on the (t, x) grid, T × S = 17 × 16 points, whose input is the initial condition
//! repeated along t (one channel at each point) and whose target is the whole space-time
//! solution (t = 0 included); train the first `ntrain` trajectories (800), test the `ntest` (400)
//! that follow them; no normalizers.
//!
//! Positions are the config's domain, x ∈ [0, 1) periodic (`linspace(0, 1, S + 1)[:-1]`, the
//! endpoint excluded) and t ∈ [0, 1] (`linspace(0, 1, T)`, included), flattened row-major with
//! time along the rows: `pos[..., 0]` = x, `pos[..., 1]` = t, the grid (T, S). neuraloperator
//! appends them as two channels after the input; here they are the positions the models take.

use std::path::Path;

use tch::{Kind, Tensor};

use super::neuralop_darcy::periodic_axis;
use super::{
    check_array, find_file, take, tensor_of, Benchmark, Layout, LoadOptions, Loaded, Take,
    NEURALOP_DATA,
};
use crate::dataset::{grid_positions_of_axes, Split, TensorDataset};
use crate::readers::any::read_any;
use crate::{Error, Result};

/// The file.
pub(super) const FILE: &str = "burgers_lowres.pt";

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::NeuralopBurgers;
    if opts.layout == Layout::Galerkin {
        return Err(Error::Config {
            what: "layout".into(),
            msg: "neuralop_burgers has the ono and fno layouts (the same data), not galerkin"
                .into(),
        });
    }
    if let Some(r) = opts.r.filter(|&r| r != 1) {
        return Err(Error::Config {
            what: "r".into(),
            msg: format!(
                "neuralop_burgers is read at its stored 17 × 16 grid, not subsampled (r = {r})"
            ),
        });
    }
    let path = find_file(dir, b, &[FILE], NEURALOP_DATA)?;
    let mut arrays = read_any(&path, None)?;
    let input = take(&mut arrays, "input", &path)?;
    let output = take(&mut arrays, "output", &path)?;
    let u0 = tensor_of(&input, &path, &[None, None])?;
    let (total, s) = (input.shape[0], input.shape[1] as i64);
    let u = tensor_of(&output, &path, &[Some(total), None, Some(s as usize)])?;
    let t = output.shape[1] as i64;
    if s < 2 || t < 2 {
        return Err(Error::Format {
            path,
            msg: format!(
                "`output` {:?} needs at least 2 time frames of at least 2 points",
                output.shape
            ),
        });
    }
    let visc = match take(&mut arrays, "visc", &path) {
        Ok(v) => {
            check_array(&v, &path, &[Some(1), Some(1)], &["float64", "float32"])?;
            v.data.to_f64().first().copied()
        }
        Err(_) => None,
    };
    let (ntrain0, ntest0) = Benchmark::NeuralopBurgers.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Range(ntrain, ntest));
    // (S, T·S, 1): the initial condition at every (t, x), and the solution.
    let fx = |k: Take, what: &str| -> Result<Tensor> {
        Ok(k.apply(&u0, what)?
            .f_unsqueeze(1)?
            .f_expand([-1, t, s], false)?
            .f_reshape([-1, t * s, 1])?
            .f_contiguous()?)
    };
    let y = |k: Take, what: &str| -> Result<Tensor> {
        Ok(k.apply(&u, what)?
            .f_reshape([-1, t * s, 1])?
            .f_contiguous()?)
    };
    let times = Tensor::f_linspace(0.0, 1.0, t, (Kind::Float, tch::Device::Cpu))?;
    let pos = grid_positions_of_axes(&times, &periodic_axis(s)?)?;
    let first_frame = u
        .f_select(1, 0)?
        .f_sub(&u0)?
        .f_abs()?
        .f_max()?
        .double_value(&[]);
    let notes = vec![
        format!(
            "grid: {t} time frames × {s} points (t ∈ [0, 1] with its endpoint, x ∈ [0, 1) \
             periodic); ν = {}",
            visc.map_or("(no `visc`)".into(), |v| format!("{v}"))
        ),
        format!(
            "train {} of {total}, test {}",
            tr.describe(total),
            te.describe(total)
        ),
        format!(
            "input: the initial condition at every (t, x); target: the solution at every frame; \
             max |output[:, 0] − input| = {first_frame:e}"
        ),
        format!("source: {}", super::neuralop_source()),
    ];
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: Split::new(fx(tr, "ntrain")?, y(tr, "ntrain")?, pos.shallow_clone()),
            test: Split::new(fx(te, "ntest")?, y(te, "ntest")?, pos),
            grid: Some(vec![t, s]),
            query_grid: None,
            test_grid: None,
        },
        files: vec![path],
        notes,
    })
}
