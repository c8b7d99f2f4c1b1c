//! The data of a run: a dataset file or a published benchmark, with the settings the experiment
//! file leaves unset filled from the benchmark's recipe (`recipe.rs`).

use ono_data::benchmarks::{self, LoadOptions};
use ono_data::dataset::{FunctionSplit, Split, TensorDataset};
use ono_data::normalizer::NormalizerKind;

use crate::config::{DataSection, LossKind, LossSection};
use crate::recipe;
use crate::regime::Regime;
use crate::{Error, Result};

/// The data of a run with the settings that come with it.
pub struct ResolvedData {
    /// Train and test splits.
    pub dataset: TensorDataset,
    /// How samples are fed.
    pub regime: Regime,
    /// Input normalizer kind.
    pub normalize_x: NormalizerKind,
    /// Target normalizer kind.
    pub normalize_y: NormalizerKind,
    /// Darcy's derivative-loss weight.
    pub derivative_alpha: f64,
    /// The training loss.
    pub loss: LossKind,
    /// γ of the Galerkin H¹ term.
    pub h1_gamma: f64,
}

/// Reads the dataset file or the benchmark of `cfg.data`, applies `ntrain` / `ntest`, and fills
/// unset settings from the benchmark's reference recipe.
pub fn resolve_data(d: &DataSection, loss: &LossSection) -> Result<ResolvedData> {
    let (dataset, recipe) = match (&d.path, d.benchmark) {
        (Some(path), _) => {
            let data = TensorDataset::read(path).map_err(|e| match e {
                ono_data::Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::Data(format!(
                        "data.path: {} does not exist (make one with `ono data darcy`, or point data.path at a dataset file)",
                        path.display()
                    ))
                }
                e => Error::DataCrate(e),
            })?;
            let train = match d.ntrain {
                Some(n) => data
                    .train
                    .take(n)
                    .map_err(|e| Error::invalid("data.ntrain", e))?,
                None => data.train,
            };
            let test = match d.ntest {
                Some(n) => data
                    .test
                    .take(n)
                    .map_err(|e| Error::invalid("data.ntest", e))?,
                None => data.test,
            };
            (
                TensorDataset {
                    train,
                    test,
                    grid: data.grid,
                    query_grid: data.query_grid,
                    test_grid: data.test_grid,
                },
                None,
            )
        }
        (None, Some(b)) => {
            let opts = LoadOptions {
                ntrain: d.ntrain.map(|n| n as usize),
                ntest: d.ntest.map(|n| n as usize),
                r: d.r,
                layout: d.layout,
                coarse_r: d.coarse_r,
                noise: d.noise,
                test_resolution: d.test_resolution,
            };
            let dir = benchmarks::data_dir(d.data_dir.as_deref());
            let loaded = benchmarks::load(b, &dir, &opts)?;
            (loaded.dataset, Some(recipe::recipe(b, d.layout)))
        }
        (None, None) => match &d.point_clouds {
            Some(files) => {
                let read = |p: &std::path::Path, what: &str| -> Result<Split> {
                    let cloud = ono_data::gnot::read_gnot(p)?;
                    cloud.validate(what)?;
                    Ok(cloud.to_split()?)
                };
                let mut train = read(&files.train, "train")?;
                let mut test = read(&files.test, "test")?;
                if let Some(n) = d.ntrain {
                    train = train
                        .take(n)
                        .map_err(|e| Error::invalid("data.ntrain", e))?;
                }
                if let Some(n) = d.ntest {
                    test = test.take(n).map_err(|e| Error::invalid("data.ntest", e))?;
                }
                let ds = TensorDataset {
                    train,
                    test,
                    grid: None,
                    query_grid: None,
                    test_grid: None,
                };
                ds.validate()?;
                (ds, None)
            }
            None => {
                return Err(Error::config(
                    "data",
                    "needs `path`, `benchmark` or `point_clouds`",
                ))
            }
        },
    };
    let dataset = if d.fx_as_function {
        fx_as_function(dataset)?
    } else {
        dataset
    };
    let regime = d
        .regime
        .or(recipe.as_ref().map(|r| r.regime))
        .unwrap_or_default();
    let normalize_y = d
        .normalize_y
        .or(recipe.as_ref().map(|r| r.normalize_y))
        .unwrap_or_default();
    let dataset = match d.train_steps {
        Some(k) => first_train_steps(dataset, k, regime, normalize_y)?,
        None => dataset,
    };
    Ok(ResolvedData {
        dataset,
        regime,
        normalize_x: d
            .normalize_x
            .or(recipe.as_ref().map(|r| r.normalize_x))
            .unwrap_or_default(),
        normalize_y,
        derivative_alpha: loss
            .derivative_alpha
            .or(recipe.as_ref().map(|r| r.derivative_alpha))
            .unwrap_or(0.0),
        loss: loss
            .kind
            .or(recipe.as_ref().map(|r| r.loss))
            .unwrap_or(LossKind::RelL2),
        h1_gamma: loss
            .h1_gamma
            .or(recipe.as_ref().map(|r| r.h1_gamma))
            .unwrap_or(0.0),
    })
}

/// `data.train_steps`: the training targets cut to their first `k` time steps (the last axis);
/// the test targets keep all T.
fn first_train_steps(
    mut ds: TensorDataset,
    k: i64,
    regime: Regime,
    normalize_y: NormalizerKind,
) -> Result<TensorDataset> {
    let bad = |msg: String| Err(Error::config("data.train_steps", msg));
    let y = ds.train.y.size();
    match regime {
        Regime::Autoregressive | Regime::PerTimeStep => {}
        Regime::Steady => {
            return bad("needs time-series targets and regime (autoregressive or per_time_step); the data are fed as steady".into())
        }
        // FNO-3D's time axis is a grid axis of the volume it maps: a shorter volume in training
        // is another grid, not an earlier horizon.
        Regime::SpaceTime => {
            return bad("space_time maps the whole time axis at once; use autoregressive or per_time_step".into())
        }
    }
    if y.len() != 4 {
        return bad(format!(
            "needs targets with a time axis (S, N, C, T), got {y:?}"
        ));
    }
    if k < 1 || k > y[3] {
        return bad(format!(
            "must be in [1, {}] (the targets' time steps), got {k}",
            y[3]
        ));
    }
    // Per-step target statistics fitted on k steps would not cover the steps after them.
    if normalize_y != NormalizerKind::None {
        return bad(format!(
            "takes no target normalizer (data.normalize_y is {normalize_y:?}): its statistics per time step would be fitted on the first {k} steps only"
        ));
    }
    ds.train.y = ds.train.y.f_narrow(3, 0, k)?;
    Ok(ds)
}

/// `data.fx_as_function`: each split's input function at the points becomes an input function on
/// its own points with rows (x, f(x)), in front of the others; `fx` keeps no channel.
pub fn fx_as_function(mut ds: TensorDataset) -> Result<TensorDataset> {
    for split in [&mut ds.train, &mut ds.test] {
        let s = split.fx.size()[0];
        if split.fx.size()[2] == 0 {
            return Err(Error::config(
                "data.fx_as_function",
                "the data have no input function at the points",
            ));
        }
        let pos = split
            .pos
            .f_expand([s, -1, -1], false)?
            .f_to_kind(split.fx.kind())?;
        let values = tch::Tensor::f_cat(&[&pos, &split.fx], 2)?;
        split.functions.insert(
            0,
            FunctionSplit {
                values,
                lengths: split.lengths.clone(),
            },
        );
        split.fx = split.fx.f_narrow(2, 0, 0)?.f_contiguous()?;
    }
    ds.validate()?;
    Ok(ds)
}
