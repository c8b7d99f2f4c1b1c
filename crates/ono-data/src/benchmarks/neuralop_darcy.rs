//! Darcy flow from the `neuraloperator` 0.3.0 wheel (`neuralop/datasets/data/`), as its
//! `load_darcy_flow_small` / `load_darcy_pt` read it: `darcy_train_16.pt` (1000 samples) for
//! training, `darcy_test_16.pt` or `darcy_test_32.pt` (the same 50 test problems at 16² and 32²)
//! for testing, each a dict of `x` (the two-phase coefficient, bool, (N, n, n)) and `y` (the
//! solution, float32, (N, n, n)), stored with column-major strides. `x` becomes a float input
//! channel at the points as in the `darcy` benchmark's ONO layout (neuraloperator casts it to
//! float32 the same way), `y` the target, the first `ntrain` / `ntest` samples of each file.
//!
//! Positions are neuraloperator's `PositionalEmbedding2D` on [0, 1]²: `linspace(0, 1, n + 1)[:-1]`
//! along each axis, so the 16² points are every other point of the 32² grid (on which the test
//! values agree: `darcy_test_16` is `darcy_test_32[:, ::2, ::2]`); `pos[..., 0]` is the column
//! coordinate and `pos[..., 1]` the row coordinate, as in `darcy`. neuraloperator appends them
//! as two channels (row first); here they are the positions the models take.
//!
//! Both the ONO and the FNO layout read the same data (the training recipe differs, as on
//! `darcy`). The resolution is the file's: `r` does not apply; `test_resolution` (16 or 32)
//! picks the test file, and a test set at another resolution than the training set carries its
//! own grid ([`TensorDataset::test_grid`]).

use std::path::Path;

use tch::{Kind, Tensor};

use super::{
    find_file, take, tensor_of, tensor_of_dtype, Benchmark, Layout, LoadOptions, Loaded, Take,
    NEURALOP_DATA,
};
use crate::dataset::{grid_positions_of_axes, Split, TensorDataset};
use crate::readers::any::read_any;
use crate::{Error, Result};

/// The training file.
pub(super) const TRAIN_FILE: &str = "darcy_train_16.pt";
/// The test file at a resolution (16 or 32).
pub(super) fn test_file(resolution: usize) -> String {
    format!("darcy_test_{resolution}.pt")
}

/// The resolutions the wheel has test files for.
const TEST_RESOLUTIONS: [usize; 2] = [16, 32];

/// neuraloperator's positions of an n-point axis of [0, 1): `linspace(0, 1, n + 1)[:-1]`.
pub(super) fn periodic_axis(n: i64) -> Result<Tensor> {
    Ok(Tensor::f_linspace(0.0, 1.0, n + 1, (Kind::Float, tch::Device::Cpu))?.f_narrow(0, 0, n)?)
}

/// `x` and `y` of one file: float32 (S, n², 1) each, the grid side n, and the samples in the file.
fn read_file(path: &Path, take_n: Take, what: &str) -> Result<(Tensor, Tensor, i64, usize)> {
    let mut arrays = read_any(path, None)?;
    let x = take(&mut arrays, "x", path)?;
    let y = take(&mut arrays, "y", path)?;
    // torch's bool reads as uint8 (0 / 1); neuraloperator casts it to float32.
    let xt = tensor_of_dtype(
        &x,
        path,
        &[None, None, None],
        &["uint8", "float32", "float64"],
    )?;
    let yt = tensor_of(
        &y,
        path,
        &[Some(x.shape[0]), Some(x.shape[1]), Some(x.shape[2])],
    )?;
    let n = x.shape[1] as i64;
    if x.shape[2] as i64 != n || n < 2 {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!("`x` is not a square grid of at least 2×2: {:?}", x.shape),
        });
    }
    let points = |t: &Tensor| -> Result<Tensor> {
        Ok(take_n
            .apply(t, what)?
            .f_reshape([-1, n * n, 1])?
            .f_contiguous()?)
    };
    Ok((points(&xt)?, points(&yt)?, n, x.shape[0]))
}

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::NeuralopDarcy;
    if opts.layout == Layout::Galerkin {
        return Err(Error::Config {
            what: "layout".into(),
            msg: "neuralop_darcy has the ono and fno layouts; the Galerkin layout needs the \
                  derivatives of the darcy files' fine grid"
                .into(),
        });
    }
    if let Some(r) = opts.r.filter(|&r| r != 1) {
        return Err(Error::Config {
            what: "r".into(),
            msg: format!(
                "neuralop_darcy is stored at its resolutions (16² training, 16² or 32² test): \
                 choose test_resolution instead of subsampling (r = {r})"
            ),
        });
    }
    let resolution = opts.test_resolution.unwrap_or(16);
    if !TEST_RESOLUTIONS.contains(&resolution) {
        return Err(Error::Config {
            what: "test_resolution".into(),
            msg: format!("neuralop_darcy has test sets at 16 and 32, not {resolution}"),
        });
    }
    let test_name = test_file(resolution);
    let train_path = find_file(dir, b, &[TRAIN_FILE], NEURALOP_DATA)?;
    let test_path = find_file(dir, b, &[test_name.as_str()], NEURALOP_DATA)?;
    let (ntrain0, ntest0) = Benchmark::NeuralopDarcy.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::First(ntest));
    let (x_train, y_train, n, total_train) = read_file(&train_path, tr, "ntrain")?;
    let (x_test, y_test, m, total_test) = read_file(&test_path, te, "ntest")?;
    // The test file of the training resolution must be at the training resolution.
    if resolution == 16 && m != n {
        return Err(Error::Format {
            path: test_path,
            msg: format!("holds a {m}×{m} grid, the training file {n}×{n}"),
        });
    }
    let pos = |k: i64| -> Result<Tensor> {
        let axis = periodic_axis(k)?;
        grid_positions_of_axes(&axis, &axis)
    };
    let values = super::darcy::distinct_values(&x_train.f_narrow(0, 0, 1)?, 8)?;
    let notes = vec![
        format!(
            "resolution: train {n}×{n}, test {m}×{m}{}; positions linspace(0, 1, n + 1)[:-1] \
             per axis (neuraloperator's)",
            if m == n { "" } else { " (zero-shot)" }
        ),
        super::darcy::split_note((&train_path, tr, total_train), (&test_path, te, total_test)),
        format!("coefficient `x` (bool in the files, read as 0 / 1) in train sample 0: {values:?}"),
        format!("source: {}", super::neuralop_source()),
    ];
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: Split::new(x_train, y_train, pos(n)?),
            test: Split::new(x_test, y_test, pos(m)?),
            grid: Some(vec![n, n]),
            query_grid: None,
            test_grid: (m != n).then(|| vec![m, m]),
        },
        files: vec![train_path, test_path],
        notes,
    })
}
