//! Evaluation: mean relative L2 of a model on a split, in evaluation mode, batch by batch, with
//! one host read at the end; a checkpoint's [`Evaluation`] on its own data or another file.

use std::path::{Path, PathBuf};

use ono_data::dataset::{grid_axes, interpolate_on_axes, length_mask, Batch, Split, TensorDataset};
use ono_data::normalizer::Normalizer;
use ono_kernels::host;
use ono_models::Model;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::data_source::resolve_data;
use crate::decoder::{Decoder, Points};
use crate::graphs::InferenceGraphs;
use crate::loss::{check_targets, relative_l2, MetricSum, Reduction, RolloutErrors};
use crate::normalizers::Normalizers;
use crate::predictor::Predictor;
use crate::regime::Regime;
use crate::{Error, Result};

/// Mean relative L2 of `model` on `split` (inputs already normalized, on the model's device):
/// decoded predictions against raw targets; per-step errors too for a time series.
pub fn evaluate(
    model: &Model,
    y_norm: &Normalizer,
    split: &Split,
    regime: Regime,
    grid: Option<&[i64]>,
    batch_size: i64,
    time_steps: i64,
) -> Result<RolloutErrors> {
    evaluate_shared(
        None, model, y_norm, split, regime, grid, batch_size, time_steps, None,
    )
}

/// [`evaluate`], in a data-parallel run shared by the processes: process r evaluates the
/// batches r, r + W, …, and the error sums are added over the processes before the division,
/// so every process gets the whole split's errors. With `graphs`, each batch's forward passes
/// run through them (`graphs.rs`), and their deferred checks are read once at the end.
#[allow(clippy::too_many_arguments)]
pub(crate) fn evaluate_shared(
    parallel: Option<&crate::parallel::DataParallel>,
    model: &Model,
    y_norm: &Normalizer,
    split: &Split,
    regime: Regime,
    grid: Option<&[i64]>,
    batch_size: i64,
    time_steps: i64,
    mut graphs: Option<&mut InferenceGraphs>,
) -> Result<RolloutErrors> {
    let (rank, world) = parallel.map_or((0, 1), |p| (p.rank(), p.world()));
    let _g = tch::no_grad_guard();
    let ops = regime.ops();
    let d = Decoder {
        model,
        y_norm,
        grid,
    };
    let mut sum = MetricSum::new();
    let idx: Vec<i64> = (0..split.len()).collect();
    for chunk in idx
        .chunks(batch_size.max(1) as usize)
        .skip(rank)
        .step_by(world)
    {
        let batch = split.batch(chunk, model.device(), model.kind())?;
        let pred = match graphs.as_deref_mut() {
            Some(g) => g.run(&batch.tensors(), &mut |slots| {
                let b = Batch::from_tensors(crate::graphs::shallow(slots))?;
                ops.predict(d, &Points::of(&b), time_steps)
            })?,
            None => ops.predict(d, &Points::of(&batch), time_steps)?,
        };
        ops.score(&mut sum, &pred, &batch.y, batch.mask.as_ref())?;
    }
    if let Some(g) = graphs {
        g.check()?;
    }
    match parallel {
        None => sum.finish(),
        Some(p) => {
            let steps = if regime.is_time_series() {
                time_steps
            } else {
                0
            };
            sum.finish_summed(steps, model.device(), |t| p.sum(t))
        }
    }
}

/// A split with its inputs normalized (by `norms.x`, `norms.pos` and `norms.theta`; the targets
/// stay raw), on `device` in `kind`, ready for [`evaluate`]. The padding rows of samples of
/// different sizes stay zero (normalized per sample before padding, as GNOT's pipeline).
pub fn normalized(split: &Split, norms: &Normalizers, device: Device, kind: Kind) -> Result<Split> {
    let on_device =
        |t: &tch::Tensor| -> Result<tch::Tensor> { Ok(t.f_to_device(device)?.f_to_kind(kind)?) };
    // (S, N, 1) in the model's kind: 1 on real rows.
    let real = match &split.lengths {
        Some(l) => ono_data::dataset::length_mask(l, split.fx.size()[1], device)?
            .map(|m| -> Result<tch::Tensor> { Ok(m.f_to_kind(kind)?.f_unsqueeze(2)?) })
            .transpose()?,
        None => None,
    };
    let points = |norm: &Normalizer, t: &tch::Tensor| -> Result<tch::Tensor> {
        let t = on_device(&norm.encode(t)?)?;
        Ok(match &real {
            Some(m) if t.size()[0] == m.size()[0] => t.f_mul(m)?,
            _ => t,
        })
    };
    Ok(Split {
        fx: points(&norms.x, &split.fx)?,
        y: split.y.f_to_device(device)?.f_to_kind(kind)?,
        pos: points(&norms.pos, &split.pos)?,
        query: split
            .query
            .as_ref()
            .map(|q| on_device(&norms.pos.encode(q)?))
            .transpose()?,
        aux: split.aux.as_ref().map(&on_device).transpose()?,
        theta: split
            .theta
            .as_ref()
            .map(|t| on_device(&norms.theta.encode(&t.f_unsqueeze(1)?)?.f_squeeze_dim(1)?))
            .transpose()?,
        functions: split
            .functions
            .iter()
            .map(|f| {
                Ok(ono_data::dataset::FunctionSplit {
                    values: on_device(&f.values)?,
                    lengths: f.lengths.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?,
        lengths: split.lengths.clone(),
    })
}

/// Which data a checkpoint is evaluated on.
#[derive(Debug, Clone, PartialEq)]
pub enum EvalData {
    /// The run's own: its dataset file, or its benchmark with the same split, re-read at
    /// subsampling stride `r` when given (another resolution, e.g. Burgers at 8192 points), or
    /// with its test set at `test_resolution` when given (`neuralop_darcy` trained at 16²,
    /// tested at 32²: the training split stays at the trained resolution).
    Own {
        /// The benchmark's stride (a run on a dataset file has no other).
        r: Option<usize>,
        /// The test set's resolution (`data.test_resolution`; `neuralop_darcy` only).
        test_resolution: Option<usize>,
    },
    /// A dataset file (`ono_data::dataset::TensorDataset`), at its own resolution.
    File(PathBuf),
}

/// A checkpoint's errors on a test split: the JSON line of `ono eval`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Evaluation {
    /// The checkpoint evaluated.
    pub checkpoint: PathBuf,
    /// The data: the file, or the run's dataset file or benchmark.
    pub data: String,
    /// Test samples.
    pub samples: i64,
    /// The grid of the evaluated targets (at the evaluated stride), when they are on one.
    #[serde(default)]
    pub grid: Option<Vec<i64>>,
    /// Mean relative L2 over the test samples (over every time step of a time series).
    pub test_rel_l2: f64,
    /// Per rolled-out time step, for a time series (empty for a steady model).
    #[serde(default)]
    pub per_step: Vec<f64>,
    /// Optimizer steps the checkpoint had trained.
    pub trained_steps: u64,
}

/// Which split of the data a checkpoint is evaluated on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EvalSplit {
    Test,
    /// The training samples, in evaluation mode: set beside the training loss, it shows what
    /// the model's training mode and evaluation mode disagree by (running statistics).
    Train,
}

/// `checkpoint`'s test errors on `data`, on `device`, `batch` samples per forward pass. Another
/// resolution than the training data's is fine: pointwise normalizers are interpolated onto its
/// grid.
pub fn evaluate_checkpoint(
    checkpoint: &Path,
    data: &EvalData,
    device: Device,
    batch: i64,
) -> Result<Evaluation> {
    evaluate_checkpoint_split(checkpoint, data, EvalSplit::Test, device, batch)
}

/// [`evaluate_checkpoint`] on either split (the errors are named `test_*` whichever it is).
pub fn evaluate_checkpoint_split(
    checkpoint: &Path,
    data: &EvalData,
    which: EvalSplit,
    device: Device,
    batch: i64,
) -> Result<Evaluation> {
    let (p, state) = Predictor::from_checkpoint(checkpoint, device)?;
    let own = &state.config.data;
    let (ds, name) = match data {
        EvalData::File(path) => (TensorDataset::read(path)?, path.display().to_string()),
        EvalData::Own { r, test_resolution } => {
            let mut section = own.clone();
            for (flag, set) in [
                ("--r", r.is_some()),
                ("--test-resolution", test_resolution.is_some()),
            ] {
                if set && section.benchmark.is_none() {
                    return Err(Error::config(
                        flag,
                        "re-reads the run's benchmark, but the run was trained on a dataset file",
                    ));
                }
            }
            if r.is_some() {
                section.r = *r;
            }
            if test_resolution.is_some() {
                section.test_resolution = *test_resolution;
            }
            let name = match (&own.path, &own.benchmark, &own.point_clouds) {
                (Some(p), _, _) => p.display().to_string(),
                (None, Some(b), _) => b.name().to_string(),
                (None, None, Some(c)) => c.test.display().to_string(),
                (None, None, None) => "?".into(),
            };
            (resolve_data(&section, &state.config.loss)?.dataset, name)
        }
    };
    let (part, grid) = match which {
        EvalSplit::Test => (&ds.test, ds.effective_test_grid()),
        EvalSplit::Train => (&ds.train, ds.grid.as_deref()),
    };
    let ysz = part.y.size();
    let steps = if ysz.len() == 4 { ysz[3] } else { 0 };
    // A test split at a resolution of its own beside a training split at the trained one: the
    // statistics go from the training points to the test points by their positions.
    let norms = if which == EvalSplit::Test && ds.test_grid.is_some() && ds.grid == p.grid {
        p.normalizers.for_test_split(&ds)?
    } else {
        p.normalizers_for(grid, ds.query_grid.as_deref())?
    };
    let split = normalized(part, &norms, device, p.kind())?;
    let errs = evaluate(&p.model, &norms.y, &split, p.regime, grid, batch, steps)?;
    let target_grid = match which {
        EvalSplit::Test => ds.test_target_grid(),
        EvalSplit::Train if ds.train.query.is_some() => ds.query_grid.as_deref(),
        EvalSplit::Train => ds.grid.as_deref(),
    };
    Ok(Evaluation {
        checkpoint: checkpoint.to_path_buf(),
        data: name,
        samples: split.len(),
        grid: target_grid.map(<[i64]>::to_vec),
        test_rel_l2: errs.full,
        per_step: errs.per_step,
        trained_steps: state.global_step,
    })
}

/// The mean-field baseline: the mean relative L2 on the test split (the one relative L2 of
/// [`crate::loss`], per sample over all points, channels and time steps, raw values, averaged
/// over the test samples) of predicting, for every test sample, the training targets' mean.
///
/// Which mean: where every sample of both splits has its targets at the same points (positions
/// shared, or per sample but equal), the mean over the training samples at each point (a mean
/// field); where the test split has a grid of its own (a test set at another resolution), that
/// mean field interpolated at the test points' coordinates. Otherwise (point clouds whose
/// positions differ between samples, samples of different sizes) a point-wise mean would
/// average unrelated points, so the prediction is the constant field of each channel's (and
/// time step's) mean over all real training points and samples.
/// Padding rows of samples of different sizes count neither in the mean nor in the error.
pub fn mean_field_error(ds: &TensorDataset) -> Result<f64> {
    let (train, test) = (&ds.train, &ds.test);
    let host =
        |t: &Tensor| -> Result<Tensor> { Ok(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?) };
    let (y, truth) = (host(&train.y)?, host(&test.y)?);
    if y.size()[2..] != truth.size()[2..] {
        return Err(Error::Data(format!(
            "mean field: training targets {:?} and test targets {:?} differ in channels or time steps",
            y.size(),
            truth.size()
        )));
    }
    check_targets(&truth, "mean field: test targets")?;
    // (S, M) float, 1 on real target points; `None`: all are real.
    let real = |s: &Split| -> Result<Option<Tensor>> {
        match &s.lengths {
            Some(l) => Ok(length_mask(l, s.y.size()[1], Device::Cpu)?
                .map(|m| m.f_to_kind(Kind::Double))
                .transpose()?),
            None => Ok(None),
        }
    };
    let (train_real, test_real) = (real(train)?, real(test)?);
    let plain = train_real.is_none() && test_real.is_none();
    let mean = if plain && same_target_points(train, test)? {
        y.f_mean_dim(&[0i64][..], true, Kind::Double)?
    } else if let (true, Some(g), Some(t)) = (plain, &ds.grid, &ds.test_grid) {
        interpolate_on_axes(
            &y.f_mean_dim(&[0i64][..], true, Kind::Double)?,
            &grid_axes(&train.pos, g)?,
            &grid_axes(&test.pos, t)?,
        )?
    } else {
        // Σ over samples and points of the real rows, per channel (and time step).
        let (sum, count) = match &train_real {
            Some(m) => {
                let mut shape = m.size();
                shape.resize(y.dim(), 1);
                let m = m.f_view(shape.as_slice())?;
                (
                    y.f_mul(&m)?
                        .f_sum_dim_intlist(&[0i64, 1][..], true, Kind::Double)?,
                    m.f_sum(Kind::Double)?,
                )
            }
            None => (
                y.f_sum_dim_intlist(&[0i64, 1][..], true, Kind::Double)?,
                Tensor::from((y.size()[0] * y.size()[1]) as f64),
            ),
        };
        sum.f_div(&count)?
    };
    let pred = mean.f_expand(truth.size().as_slice(), false)?;
    let bool_mask = test_real.map(|m| m.f_gt(0.5)).transpose()?;
    Ok(host::read_f64(&relative_l2(
        &pred,
        &truth,
        Reduction::Mean,
        bool_mask.as_ref(),
    )?)?)
}

/// The training points a [`local_mean_field_error`] searches at most (a stride through them
/// beyond): its cost is the test points times these.
pub const LOCAL_MEAN_FIELD_POINTS: i64 = 50_000;

/// A stronger floor than [`mean_field_error`]'s constant for point clouds whose samples have
/// points of their own: at each test point, the mean of the training targets at the S nearest
/// training points of all S training samples pooled (about one per sample near the point: the
/// mean field at that position). The mean relative L2 over the test samples, as
/// [`mean_field_error`]; `None` where that one is already a mean field per point (targets at
/// shared points or on a grid), for time series and for targets at query points.
pub fn local_mean_field_error(ds: &TensorDataset) -> Result<Option<f64>> {
    let (train, test) = (&ds.train, &ds.test);
    let steady = train.y.dim() == 3;
    if ds.grid.is_some() || train.query.is_some() || !steady || same_target_points(train, test)? {
        return Ok(None);
    }
    let host =
        |t: &Tensor| -> Result<Tensor> { Ok(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?) };
    // Every real row of a split, (rows, C).
    let rows = |s: &Split, t: &Tensor| -> Result<Tensor> {
        let t = host(t)?;
        let c = t.size()[2];
        Ok(match &s.lengths {
            Some(l) => Tensor::f_cat(
                &l.iter()
                    .enumerate()
                    .map(|(i, &n)| t.f_get(i as i64)?.f_narrow(0, 0, n))
                    .collect::<std::result::Result<Vec<_>, _>>()?,
                0,
            )?,
            None => t.f_reshape([-1, c])?,
        })
    };
    let (mut points, mut values) = (rows(train, &train.pos)?, rows(train, &train.y)?);
    let m = points.size()[0];
    if m > LOCAL_MEAN_FIELD_POINTS {
        let step = (m + LOCAL_MEAN_FIELD_POINTS - 1) / LOCAL_MEAN_FIELD_POINTS;
        let keep = Tensor::f_arange_start_step(0, m, step, (Kind::Int64, Device::Cpu))?;
        points = points.f_index_select(0, &keep)?;
        values = values.f_index_select(0, &keep)?;
    }
    let k = train.len().clamp(1, points.size()[0]);
    let mut errors = Vec::with_capacity(test.len() as usize);
    for i in 0..test.len() {
        let n = test
            .lengths
            .as_ref()
            .map_or(test.pos.size()[1], |l| l[i as usize]);
        let q = host(&test.pos.f_get(i)?)?.f_narrow(0, 0, n)?;
        let truth = host(&test.y.f_get(i)?)?.f_narrow(0, 0, n)?;
        let dist = Tensor::f_cdist(&q, &points, 2.0, None)?; // (n, M)
        let (_, nearest) = dist.f_topk(k, 1, false, false)?; // (n, k)
        let c = values.size()[1];
        let pred = values
            .f_index_select(0, &nearest.f_reshape([-1])?)?
            .f_view([n, k, c])?
            .f_mean_dim(&[1i64][..], false, Kind::Double)?;
        let e = relative_l2(
            &pred.f_unsqueeze(0)?,
            &truth.f_unsqueeze(0)?,
            Reduction::Mean,
            None,
        )?;
        errors.push(host::read_f64(&e)?);
    }
    Ok(Some(
        errors.iter().sum::<f64>() / errors.len().max(1) as f64,
    ))
}

/// Whether every sample of both splits has its targets at the same points (the query points
/// when there are any, else the input points).
fn same_target_points(train: &Split, test: &Split) -> Result<bool> {
    let at = |s: &Split| s.query.as_ref().unwrap_or(&s.pos).f_to_kind(Kind::Double);
    let (a, b) = (at(train)?, at(test)?);
    if a.size()[1..] != b.size()[1..] {
        return Ok(false);
    }
    let first = a.f_narrow(0, 0, 1)?;
    let same = a
        .f_eq_tensor(&first)?
        .f_all()?
        .f_logical_and(&b.f_eq_tensor(&first)?.f_all()?)?;
    Ok(host::read_bool(&same)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(v: &[f64], shape: &[i64]) -> Tensor {
        Tensor::from_slice(v).view(shape)
    }

    fn dataset(train: Split, test: Split) -> TensorDataset {
        TensorDataset {
            train,
            test,
            grid: None,
            query_grid: None,
            test_grid: None,
        }
    }

    /// The lines `ono eval` printed before it printed an [`Evaluation`] read as one (the grid
    /// absent from the oldest), and an evaluation reads back as itself.
    #[test]
    fn evaluation_reads_earlier_lines_and_round_trips() {
        let legacy: Evaluation = serde_json::from_str(include_str!(
            "../../../fixtures/legacy_checkpoint/eval_old.json"
        ))
        .unwrap();
        assert_eq!(legacy.test_rel_l2, 0.30172547698020935);
        assert_eq!((legacy.samples, legacy.trained_steps), (4, 8));
        assert_eq!(legacy.grid, None);
        let today: Evaluation = serde_json::from_str(include_str!(
            "../../../fixtures/checkpoint_d099a84/eval_old.json"
        ))
        .unwrap();
        assert_eq!(today.test_rel_l2, 0.29965347051620483);
        assert_eq!(today.grid, Some(vec![9, 9]));
        assert_eq!(today.data, "darcy9.safetensors");
        assert!(today.per_step.is_empty());
        let series = Evaluation {
            per_step: vec![0.125, 0.25],
            grid: None,
            ..today
        };
        let line = serde_json::to_string(&series).unwrap();
        assert_eq!(serde_json::from_str::<Evaluation>(&line).unwrap(), series);
    }

    /// By hand on 1-D clouds: each test point takes the mean of the targets at the S nearest
    /// training points (S = 2 samples here); padding is neither searched nor scored.
    #[test]
    fn local_mean_field_by_hand() {
        let fx = |s: i64, n: i64| Tensor::ones([s, n, 1], (Kind::Double, Device::Cpu));
        // Training points 0, 1, 2 (sample 0) and 0.1, 5 (sample 1, then a padded row at 0.05).
        let mut train = Split::new(
            fx(2, 3),
            t(&[1.0, 2.0, 3.0, 5.0, 7.0, 99.0], &[2, 3, 1]),
            t(&[0.0, 1.0, 2.0, 0.1, 5.0, 0.05], &[2, 3, 1]),
        );
        train.lengths = Some(vec![3, 2]);
        // Test points 0.04 (nearest 0, 0.1: mean 3) and 4.5 (nearest 5, 2: mean 5).
        let test = Split::new(
            fx(1, 2),
            t(&[3.0, 4.0], &[1, 2, 1]),
            t(&[0.04, 4.5], &[1, 2, 1]),
        );
        let got = local_mean_field_error(&dataset(train, test))
            .unwrap()
            .unwrap();
        let want = 1.0 / 5.0; // |(3, 5) − (3, 4)| / |(3, 4)|
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");
        // Shared points: the per-point mean field already is local.
        let pos = t(&[0.0, 1.0], &[1, 2, 1]);
        let same = Split::new(fx(2, 2), t(&[1.0, 2.0, 3.0, 4.0], &[2, 2, 1]), pos.copy());
        let other = Split::new(fx(1, 2), t(&[1.0, 2.0], &[1, 2, 1]), pos);
        assert_eq!(local_mean_field_error(&dataset(same, other)).unwrap(), None);
    }

    #[test]
    fn mean_field_error_by_hand() {
        let pos = t(&[0.0, 1.0], &[1, 2, 1]);
        let fx = |s: i64| Tensor::ones([s, 2, 1], (Kind::Double, Device::Cpu));
        // Shared points: the mean field (2, 3) against (2, 4) and (1, 1).
        let train = Split::new(fx(2), t(&[1.0, 2.0, 3.0, 4.0], &[2, 2, 1]), pos.copy());
        let test = Split::new(fx(2), t(&[2.0, 4.0, 1.0, 1.0], &[2, 2, 1]), pos.copy());
        let want = (1.0 / 20f64.sqrt() + (5.0f64 / 2.0).sqrt()) / 2.0;
        let got = mean_field_error(&dataset(train, test)).unwrap();
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");

        // Per-sample positions that differ: the constant 2.5 against (2, 4).
        let moved = t(&[0.0, 1.0, 0.5, 0.7], &[2, 2, 1]);
        let train = Split::new(fx(2), t(&[1.0, 2.0, 3.0, 4.0], &[2, 2, 1]), moved);
        let test = Split::new(
            fx(1),
            t(&[2.0, 4.0], &[1, 2, 1]),
            t(&[0.1, 0.2], &[1, 2, 1]),
        );
        let want = (0.25f64 + 2.25).sqrt() / 20f64.sqrt();
        let got = mean_field_error(&dataset(train, test)).unwrap();
        assert!((got - want).abs() < 1e-14, "{got} vs {want}");

        // Samples of different sizes: padding (the 99s) counts neither in the mean (2) nor in
        // the error (|4 − 2| / 4).
        let mut train = Split::new(fx(2), t(&[1.0, 2.0, 3.0, 99.0], &[2, 2, 1]), pos.copy());
        train.lengths = Some(vec![2, 1]);
        let mut test = Split::new(fx(1), t(&[4.0, 99.0], &[1, 2, 1]), pos.copy());
        test.lengths = Some(vec![1]);
        let got = mean_field_error(&dataset(train, test)).unwrap();
        assert!((got - 0.5).abs() < 1e-14, "{got}");

        // A time series on shared points: the mean per point and step; 2 points × 2 steps, one
        // test sample equal to the mean but for one value off by 3 out of a norm of 5.
        let y = t(&[0.0, 2.0, 4.0, 6.0, 0.0, 0.0, 0.0, 0.0], &[2, 2, 1, 2]);
        let train = Split::new(fx(2), y, pos.copy());
        let test = Split::new(fx(1), t(&[3.0, 1.0, 2.0, 3.0], &[1, 2, 1, 2]), pos.copy());
        // mean (0, 1, 2, 3); error (3, 0, 0, 0); norm √(9 + 1 + 4 + 9).
        let got = mean_field_error(&dataset(train, test)).unwrap();
        assert!((got - 3.0 / 23f64.sqrt()).abs() < 1e-14, "{got}");

        // A test set at twice the resolution (nodes k / n): the training mean field (1, 3) on
        // the nodes 0, 1/2, at 0, 1/4, 1/2, 3/4 is (1, 2, 3, 3); the test sample (1, 2, 3, 5)
        // is off by 2 in a norm of √39.
        let train = Split::new(
            fx(2),
            t(&[0.0, 2.0, 2.0, 4.0], &[2, 2, 1]),
            t(&[0.0, 0.5], &[1, 2, 1]),
        );
        let test = Split::new(
            Tensor::ones([1, 4, 1], (Kind::Double, Device::Cpu)),
            t(&[1.0, 2.0, 3.0, 5.0], &[1, 4, 1]),
            t(&[0.0, 0.25, 0.5, 0.75], &[1, 4, 1]),
        );
        let ds = TensorDataset {
            grid: Some(vec![2]),
            test_grid: Some(vec![4]),
            ..dataset(train, test)
        };
        let got = mean_field_error(&ds).unwrap();
        assert!((got - 2.0 / 39f64.sqrt()).abs() < 1e-14, "{got}");

        // An all-zero test sample has no relative error.
        let train = Split::new(fx(1), t(&[1.0, 2.0], &[1, 2, 1]), pos.copy());
        let test = Split::new(fx(1), t(&[0.0, 0.0], &[1, 2, 1]), pos);
        let e = mean_field_error(&dataset(train, test))
            .unwrap_err()
            .to_string();
        assert!(e.contains("all zeros"), "{e}");
    }
}
