//! Point clouds whose size varies between samples (GNOT's meshes), batched by zero padding with
//! masks.
//!
//! A [`PointCloudSplit`] keeps every sample as its own tensors: N_i points with positions, node
//! features and targets, optional global parameters θ, and any number of input functions (each
//! with its own point count M_ij). [`PointCloudSplit::batch`] pads a selection to the largest
//! sample — real points first, zeros after, as `torch.nn.utils.rnn.pad_sequence` does in GNOT's
//! collate — and returns float masks (1 = real point) so that losses, metrics and attention can
//! leave the padding out. GNOT itself masks only the loss: its padded rows enter K, V and Σk of
//! every attention (HaoZhongkai/GNOT issue #12); a model that wants that behaviour simply ignores
//! the masks.
//!
//! Normalizer statistics must come from the real points only: [`PointCloudSplit::fit_unit`]
//! computes GNOT's `UnitTransformer` over the concatenated points of all samples. Fitting on a
//! padded tensor would count the zeros of the padding and shift both mean and std.
//!
//! [`scatter_grid`] makes point clouds of another kind from grid data: every sample keeps its
//! own random subset of the grid's cells (same count, different positions), a stand-in for
//! unstructured data such as Elasticity's.

use rand::SeedableRng;
use tch::{Device, Kind, Tensor};

use crate::dataset::{mix, Split, TensorDataset};
use crate::normalizer::{Normalizer, NormalizerKind};
use crate::{Error, Result};

/// One sample of a variable-size point cloud.
#[derive(Debug)]
pub struct PointSample {
    /// Positions (query coordinates), (N, d). GNOT's `X`.
    pub pos: Tensor,
    /// Node features, (N, c); c may be 0 (GNOT's samples have none besides `X`).
    pub fx: Tensor,
    /// Targets, (N, c_y). GNOT's `Y`.
    pub y: Tensor,
    /// Global parameters, (n_θ,). GNOT's θ (concatenated to every query point by the model).
    pub theta: Option<Tensor>,
    /// Input functions, each (M_j, c_j): GNOT's `(x_i, f(x_i))` rows, coordinates and values
    /// concatenated as the file stores them. M_j varies between samples and may be 0.
    pub funcs: Vec<Tensor>,
}

impl PointSample {
    /// Number of points N.
    pub fn points(&self) -> i64 {
        self.pos.size().first().copied().unwrap_or(0)
    }
}

/// All samples of one split, in memory.
#[derive(Debug, Default)]
pub struct PointCloudSplit {
    /// The samples, in file order.
    pub samples: Vec<PointSample>,
}

/// One input function of a batch, padded like the queries.
#[derive(Debug)]
pub struct PaddedFunction {
    /// (B, M_max, c_j), zeros after each sample's M_j rows.
    pub values: Tensor,
    /// (B, M_max), 1 on real rows, 0 on padding (in the batch's float kind).
    pub mask: Tensor,
    /// M_j of each sample, in batch order.
    pub lengths: Vec<i64>,
}

/// A padded batch on the training device.
#[derive(Debug)]
pub struct PaddedBatch {
    /// (B, N_max, d)
    pub pos: Tensor,
    /// (B, N_max, c)
    pub fx: Tensor,
    /// (B, N_max, c_y)
    pub y: Tensor,
    /// (B, N_max): 1 on each sample's N_i real points (the first N_i rows), 0 on padding.
    pub mask: Tensor,
    /// N_i of each sample, in batch order.
    pub lengths: Vec<i64>,
    /// (B, n_θ) when the split has global parameters.
    pub theta: Option<Tensor>,
    /// One entry per input function.
    pub funcs: Vec<PaddedFunction>,
}

/// A per-point (or per-sample, for θ) field of a split, for normalizers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PointField {
    /// [`PointSample::pos`]
    Pos,
    /// [`PointSample::fx`]
    Fx,
    /// [`PointSample::y`]
    Y,
    /// [`PointSample::theta`], one row per sample.
    Theta,
}

/// The column counts every sample of a split shares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointDims {
    /// d, position columns.
    pub pos: i64,
    /// c, node feature columns.
    pub fx: i64,
    /// c_y, target columns.
    pub y: i64,
    /// n_θ when there are global parameters.
    pub theta: Option<i64>,
    /// c_j of each input function.
    pub funcs: Vec<i64>,
}

impl PointCloudSplit {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.samples.len()
    }

    /// Whether the split has no samples.
    pub fn is_empty(&self) -> bool {
        self.samples.is_empty()
    }

    /// The largest N_i (0 for an empty split).
    pub fn max_points(&self) -> i64 {
        self.samples
            .iter()
            .map(PointSample::points)
            .max()
            .unwrap_or(0)
    }

    /// The column counts, read from the first sample (see [`PointCloudSplit::validate`] for the
    /// check that the others agree; a count is −1 where the first sample's tensor has the wrong
    /// rank).
    pub fn dims(&self) -> Result<PointDims> {
        let s = self.samples.first().ok_or_else(|| Error::Config {
            what: "point cloud split".into(),
            msg: "has no samples".into(),
        })?;
        Ok(Self::dims_of(s))
    }

    /// Checks that the split is usable: at least one sample; every `pos`, `fx`, `y` of rank 2
    /// with the same N ≥ 1 in a sample and the same column counts across samples; θ in all
    /// samples or in none, of one length; the same number of input functions everywhere, each of
    /// rank 2 with one width per function; float32/float64 everywhere; no NaN or Inf (one host
    /// read per tensor). `what` names the split in the messages.
    pub fn validate(&self, what: &str) -> Result<()> {
        let first = self.samples.first().ok_or_else(|| Error::Config {
            what: format!("{what}: point cloud split"),
            msg: "has no samples".into(),
        })?;
        let shape = |i: usize, expected: String, got: Vec<i64>| {
            Err(Error::Shape {
                op: "PointCloudSplit::validate",
                expected: format!("{what}, sample {i}: {expected}"),
                got,
            })
        };
        let dims = PointCloudSplit::dims_of(first);
        for (i, s) in self.samples.iter().enumerate() {
            let p = s.pos.size();
            if p.len() != 2 || p[0] < 1 {
                return shape(i, "pos as (N, d) with N ≥ 1".into(), p);
            }
            let n = p[0];
            for (name, t, c) in [
                ("pos", &s.pos, dims.pos),
                ("fx", &s.fx, dims.fx),
                ("y", &s.y, dims.y),
            ] {
                let sz = t.size();
                if sz.len() != 2 || sz[0] != n || sz[1] != c {
                    return shape(
                        i,
                        format!("{name} as (N, C) with N = {n} and sample 0's C = {c}"),
                        sz,
                    );
                }
            }
            match (&s.theta, dims.theta) {
                (None, None) => {}
                (Some(t), Some(k)) if t.size() == [k] => {}
                (Some(t), Some(k)) => {
                    return shape(i, format!("theta as ({k},) like sample 0"), t.size());
                }
                (Some(_), None) | (None, Some(_)) => {
                    return Err(Error::Invalid(format!(
                        "{what}, sample {i}: theta is present in some samples but not in others"
                    )));
                }
            }
            if s.funcs.len() != dims.funcs.len() {
                return Err(Error::Invalid(format!(
                    "{what}, sample {i}: {} input functions, sample 0 has {}",
                    s.funcs.len(),
                    dims.funcs.len()
                )));
            }
            for (j, (f, &c)) in s.funcs.iter().zip(&dims.funcs).enumerate() {
                let sz = f.size();
                if sz.len() != 2 || sz[1] != c {
                    return shape(
                        i,
                        format!("input function {j} as (M, C) with sample 0's C = {c}"),
                        sz,
                    );
                }
            }
            let named = [("pos", &s.pos), ("fx", &s.fx), ("y", &s.y)]
                .into_iter()
                .chain(s.theta.iter().map(|t| ("theta", t)))
                .chain(s.funcs.iter().map(|f| ("an input function", f)));
            for (name, t) in named {
                if !matches!(t.kind(), Kind::Float | Kind::Double) {
                    return Err(Error::Invalid(format!(
                        "{what}, sample {i}: {name} must be float32 or float64, got {:?}",
                        t.kind()
                    )));
                }
                if t.f_isfinite()?.f_all()?.f_int64_value(&[])? == 0 {
                    return Err(Error::Invalid(format!(
                        "{what}, sample {i}: {name} contains NaN or Inf"
                    )));
                }
            }
        }
        Ok(())
    }

    fn dims_of(s: &PointSample) -> PointDims {
        let cols = |t: &Tensor| t.size().get(1).copied().unwrap_or(-1);
        PointDims {
            pos: cols(&s.pos),
            fx: cols(&s.fx),
            y: cols(&s.y),
            theta: s
                .theta
                .as_ref()
                .map(|t| t.size().first().copied().unwrap_or(-1)),
            funcs: s.funcs.iter().map(cols).collect(),
        }
    }

    /// The split as one zero-padded [`Split`](crate::dataset::Split) (CPU, the samples' float
    /// kind), with the per-sample point counts (`lengths`) that let its batches be padded to
    /// their own longest sample, as [`PointCloudSplit::batch`] and GNOT's collate do: the trainer
    /// takes point clouds this way.
    pub fn to_split(&self) -> Result<crate::dataset::Split> {
        use crate::dataset::{FunctionSplit, Split};
        let kind = self
            .samples
            .first()
            .map(|s| s.pos.kind())
            .ok_or_else(|| Error::Config {
                what: "point cloud split".into(),
                msg: "has no samples".into(),
            })?;
        let all: Vec<i64> = (0..self.samples.len() as i64).collect();
        let b = self.batch(&all, Device::Cpu, kind)?;
        let ragged = |l: Vec<i64>| -> Option<Vec<i64>> {
            let max = l.iter().copied().max().unwrap_or(0);
            (l.iter().any(|&n| n != max)).then_some(l)
        };
        let mut split = Split::new(b.fx, b.y, b.pos);
        split.lengths = ragged(b.lengths);
        split.theta = b.theta;
        split.functions = b
            .funcs
            .into_iter()
            .map(|f| FunctionSplit {
                values: f.values,
                lengths: ragged(f.lengths),
            })
            .collect();
        Ok(split)
    }

    /// The samples at `indices` (in that order; repeats allowed), zero-padded to the largest of
    /// them, cast to `kind` (a floating kind) and moved to `device`. Sample b's N_b points are
    /// rows 0..N_b of batch row b; `mask` marks exactly those. Input functions are padded the
    /// same way, each to its own largest M_j.
    pub fn batch(&self, indices: &[i64], device: Device, kind: Kind) -> Result<PaddedBatch> {
        if !matches!(
            kind,
            Kind::Float | Kind::Double | Kind::Half | Kind::BFloat16
        ) {
            return Err(Error::Config {
                what: "batch kind".into(),
                msg: format!("must be a floating kind, got {kind:?}"),
            });
        }
        if indices.is_empty() {
            return Err(Error::Config {
                what: "batch".into(),
                msg: "no sample indices".into(),
            });
        }
        let n = self.samples.len();
        let mut picked = Vec::with_capacity(indices.len());
        for &i in indices {
            match usize::try_from(i).ok().and_then(|u| self.samples.get(u)) {
                Some(s) => picked.push(s),
                None => {
                    return Err(Error::Config {
                        what: "batch".into(),
                        msg: format!("sample index {i} outside the split's 0..{n}"),
                    })
                }
            }
        }
        let pos: Vec<&Tensor> = picked.iter().map(|s| &s.pos).collect();
        let fx: Vec<&Tensor> = picked.iter().map(|s| &s.fx).collect();
        let y: Vec<&Tensor> = picked.iter().map(|s| &s.y).collect();
        let (pos, mask, lengths) = pad_rows("pos", &pos, kind, device)?;
        let (fx, _, fx_len) = pad_rows("fx", &fx, kind, device)?;
        let (y, _, y_len) = pad_rows("y", &y, kind, device)?;
        if fx_len != lengths || y_len != lengths {
            return Err(Error::Invalid(format!(
                "batch: point counts differ between pos {lengths:?}, fx {fx_len:?} and y {y_len:?}"
            )));
        }
        let theta = match picked[0].theta {
            None => {
                if picked.iter().any(|s| s.theta.is_some()) {
                    return Err(Error::Invalid(
                        "batch: theta is present in some samples but not in others".into(),
                    ));
                }
                None
            }
            Some(_) => {
                let mut ts = Vec::with_capacity(picked.len());
                for s in &picked {
                    let t = s.theta.as_ref().ok_or_else(|| {
                        Error::Invalid(
                            "batch: theta is present in some samples but not in others".into(),
                        )
                    })?;
                    ts.push(t.f_to_kind(kind)?.f_to_device(device)?);
                }
                // stack refuses different lengths itself, as a Torch error.
                Some(Tensor::f_stack(&ts, 0)?)
            }
        };
        let k = picked[0].funcs.len();
        if picked.iter().any(|s| s.funcs.len() != k) {
            return Err(Error::Invalid(
                "batch: samples have different numbers of input functions".into(),
            ));
        }
        let mut funcs = Vec::with_capacity(k);
        for j in 0..k {
            let fj: Vec<&Tensor> = picked.iter().map(|s| &s.funcs[j]).collect();
            let (values, mask, lengths) = pad_rows("input function", &fj, kind, device)?;
            funcs.push(PaddedFunction {
                values,
                mask,
                lengths,
            });
        }
        Ok(PaddedBatch {
            pos,
            fx,
            y,
            mask,
            lengths,
            theta,
            funcs,
        })
    }

    /// GNOT's `UnitTransformer` fitted on `field`: per channel, the mean and the unbiased std
    /// (+ 1e-8) over every real point of every sample (over the samples, for θ), computed in
    /// float64 from the concatenation — padding never enters. The statistics are (C,) tensors,
    /// which broadcast against (N, C), (B, N, C) and (B, n_θ) alike.
    pub fn fit_unit(&self, field: PointField) -> Result<Normalizer> {
        let rows = self.field_rows(field)?;
        let all = Tensor::f_cat(&rows, 0)?;
        if all.size()[0] < 2 {
            return Err(Error::Invalid(format!(
                "normalizer: {field:?} has {} row(s) in all, an unbiased std needs 2",
                all.size()[0]
            )));
        }
        let mean = all.f_mean_dim(&[0i64][..], false, Kind::Double)?;
        let std = all
            .f_std_dim(&[0i64][..], true, false)?
            .f_add_scalar(1e-8)?;
        Normalizer::from_stats(NormalizerKind::Unit, mean, std)
    }

    /// Every sample's rows of `field`, as float64 CPU tensors.
    fn field_rows(&self, field: PointField) -> Result<Vec<Tensor>> {
        if self.samples.is_empty() {
            return Err(Error::Config {
                what: "normalizer".into(),
                msg: "cannot be fitted on a split with no samples".into(),
            });
        }
        let mut rows = Vec::with_capacity(self.samples.len());
        for (i, s) in self.samples.iter().enumerate() {
            let t = match field {
                PointField::Pos => s.pos.shallow_clone(),
                PointField::Fx => s.fx.shallow_clone(),
                PointField::Y => s.y.shallow_clone(),
                PointField::Theta => match &s.theta {
                    Some(t) => t.f_reshape([1, -1])?,
                    None => {
                        return Err(Error::Config {
                            what: "normalizer".into(),
                            msg: format!("theta normalizer asked for, but sample {i} has no theta"),
                        })
                    }
                },
            };
            if t.dim() != 2 {
                return Err(Error::Shape {
                    op: "PointCloudSplit::fit_unit",
                    expected: format!("sample {i}: {field:?} as (N, C)"),
                    got: t.size(),
                });
            }
            rows.push(t.f_to_device(Device::Cpu)?.f_to_kind(Kind::Double)?);
        }
        Ok(rows)
    }

    /// A split whose `field` is encoded by `norm` sample by sample (the other fields are shared,
    /// not copied). Normalizing before batching keeps the padding at zero in normalized units,
    /// as in GNOT, where the datasets are normalized before `pad_sequence`.
    pub fn normalized(&self, field: PointField, norm: &Normalizer) -> Result<PointCloudSplit> {
        let mut samples = Vec::with_capacity(self.samples.len());
        for s in &self.samples {
            let enc = |t: &Tensor, f: PointField| -> Result<Tensor> {
                if f == field {
                    norm.encode(t)
                } else {
                    Ok(t.shallow_clone())
                }
            };
            let theta = match &s.theta {
                Some(t) => Some(enc(t, PointField::Theta)?),
                None if field == PointField::Theta => {
                    return Err(Error::Config {
                        what: "normalizer".into(),
                        msg: "theta normalization asked for, but a sample has no theta".into(),
                    })
                }
                None => None,
            };
            samples.push(PointSample {
                pos: enc(&s.pos, PointField::Pos)?,
                fx: enc(&s.fx, PointField::Fx)?,
                y: enc(&s.y, PointField::Y)?,
                theta,
                funcs: s.funcs.iter().map(Tensor::shallow_clone).collect(),
            });
        }
        Ok(PointCloudSplit { samples })
    }
}

/// Pads (M_b, C) tensors into (B, M_max, C) — rows of sample b first, zeros after — with a
/// (B, M_max) mask in `kind` and the lengths M_b. Built where the rows live, then moved to
/// `device` once.
pub fn pad_rows(
    what: &str,
    rows: &[&Tensor],
    kind: Kind,
    device: Device,
) -> Result<(Tensor, Tensor, Vec<i64>)> {
    let first = rows.first().ok_or_else(|| Error::Config {
        what: format!("padding {what}"),
        msg: "no tensors".into(),
    })?;
    let c = match first.size()[..] {
        [_, c] => c,
        _ => {
            return Err(Error::Shape {
                op: "pad_rows",
                expected: format!("{what} as (M, C)"),
                got: first.size(),
            })
        }
    };
    let mut lengths = Vec::with_capacity(rows.len());
    for (b, r) in rows.iter().enumerate() {
        match r.size()[..] {
            [m, cc] if cc == c => lengths.push(m),
            _ => {
                return Err(Error::Shape {
                    op: "pad_rows",
                    expected: format!("{what} of batch row {b} as (M, {c}) like batch row 0"),
                    got: r.size(),
                })
            }
        }
    }
    let b = rows.len() as i64;
    let m_max = lengths.iter().copied().max().unwrap_or(0);
    let home = first.device();
    let out = Tensor::f_zeros([b, m_max, c], (kind, home))?;
    for (i, (r, &m)) in rows.iter().zip(&lengths).enumerate() {
        if m > 0 {
            // copy_ casts to `kind` and crosses devices itself.
            out.f_get(i as i64)?.f_narrow(0, 0, m)?.f_copy_(r)?;
        }
    }
    let len_t = Tensor::from_slice(&lengths).f_to_device(home)?;
    let mask = Tensor::f_arange(m_max, (Kind::Int64, home))?
        .f_unsqueeze(0)?
        .f_lt_tensor(&len_t.f_unsqueeze(1)?)?
        .f_to_kind(kind)?;
    Ok((out.f_to_device(device)?, mask.f_to_device(device)?, lengths))
}

/// Checks (B, N, C) predictions and targets against a (B, N) mask.
fn check_masked(op: &'static str, pred: &Tensor, target: &Tensor, mask: &Tensor) -> Result<()> {
    let (p, t, m) = (pred.size(), target.size(), mask.size());
    if p.len() != 3 {
        return Err(Error::Shape {
            op,
            expected: "pred as (B, N, C)".into(),
            got: p,
        });
    }
    if t != p {
        return Err(Error::Shape {
            op,
            expected: format!("target of pred's shape {p:?}"),
            got: t,
        });
    }
    if m != p[..2] {
        return Err(Error::Shape {
            op,
            expected: format!("mask as (B, N) = {:?}", &p[..2]),
            got: m,
        });
    }
    Ok(())
}

/// Squared error and squared target with the padding zeroed by selection, not multiplication,
/// so that a NaN or Inf predicted on a padded row cannot leak in (0 · NaN = NaN).
fn masked_squares(pred: &Tensor, target: &Tensor, mask: &Tensor) -> Result<(Tensor, Tensor)> {
    let keep = mask.f_gt(0.5)?.f_unsqueeze(-1)?;
    let err = pred
        .f_sub(target)?
        .f_square()?
        .f_where_scalarother(&keep, 0.0)?;
    let tgt = target.f_square()?.f_where_scalarother(&keep, 0.0)?;
    Ok((err, tgt))
}

/// Relative L2 error of each sample of a padded batch, over its real points and all channels:
/// ‖pred − target‖ / ‖target‖ with padded rows left out of both norms (ONO's per-sample metric).
/// A sample whose target is zero on every real point gives Inf or NaN, as in the reference.
///
/// # Shapes
/// - pred, target: (B, N, C); mask: (B, N), 1 = real point
/// - returns: (B,)
pub fn masked_rel_l2(pred: &Tensor, target: &Tensor, mask: &Tensor) -> Result<Tensor> {
    check_masked("masked_rel_l2", pred, target, mask)?;
    let (err, tgt) = masked_squares(pred, target, mask)?;
    let dims = &[1i64, 2][..];
    Ok(err
        .f_sum_dim_intlist(dims, false, None::<Kind>)?
        .f_div(&tgt.f_sum_dim_intlist(dims, false, None::<Kind>)?)?
        .f_sqrt()?)
}

/// Relative L2 error of each sample and channel of a padded batch, over the real points: GNOT's
/// `WeightedLpRelLoss(p=2)` before its mean over batch × channels. A channel that is zero on
/// every real point of a sample gives Inf or NaN (GNOT issue #10).
///
/// # Shapes
/// - pred, target: (B, N, C); mask: (B, N), 1 = real point
/// - returns: (B, C)
pub fn masked_rel_l2_per_channel(pred: &Tensor, target: &Tensor, mask: &Tensor) -> Result<Tensor> {
    check_masked("masked_rel_l2_per_channel", pred, target, mask)?;
    let (err, tgt) = masked_squares(pred, target, mask)?;
    let dims = &[1i64][..];
    Ok(err
        .f_sum_dim_intlist(dims, false, None::<Kind>)?
        .f_div(&tgt.f_sum_dim_intlist(dims, false, None::<Kind>)?)?
        .f_sqrt()?)
}

/// Grid data as point clouds of `points` distinct cells per sample, chosen at random for each
/// sample independently: positions, input functions and targets (any trailing time axis kept) at
/// those cells, positions per sample (S, points, d), no grid. Sample i of the whole set (the
/// training samples first, then the test samples, as `ono_pde`'s generators number them) keeps
/// cells that depend only on (`seed`, i); within a sample they are in the grid's (row-major)
/// order.
///
/// The data must have positions shared by every sample and nothing beside fx, y and pos (no
/// query points, aux channels, θ, input functions on their own points or ragged samples).
pub fn scatter_grid(ds: &TensorDataset, points: i64, seed: u64) -> Result<TensorDataset> {
    let scatter = |split: &Split, first: u64| -> Result<Split> {
        let n = split.points();
        if points < 1 || points > n {
            return Err(Error::Config {
                what: "points".into(),
                msg: format!("must be in [1, {n}] (the cells of a sample), got {points}"),
            });
        }
        let plain = split.query.is_none()
            && split.aux.is_none()
            && split.theta.is_none()
            && split.functions.is_empty()
            && split.lengths.is_none();
        if !plain || split.pos.size()[0] != 1 {
            return Err(Error::Invalid(
                "scatter_grid takes grid data: positions shared by every sample and only fx, y and pos".into(),
            ));
        }
        let s = split.len();
        let mut cells = Vec::with_capacity((s * points) as usize);
        for i in 0..s as u64 {
            // Keyed by mix(seed, i), not seed: independent of the generator's own stream i.
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(seed, first + i));
            let mut pick: Vec<i64> =
                rand::seq::index::sample(&mut rng, n as usize, points as usize)
                    .into_iter()
                    .map(|c| c as i64)
                    .collect();
            pick.sort_unstable();
            cells.extend(pick);
        }
        let cells = Tensor::from_slice(&cells).f_view([s, points])?;
        // (S, points) → the index of `t`'s gather along the point axis.
        let at = |t: &Tensor| -> Result<Tensor> {
            let t = t.f_expand(
                [s].into_iter()
                    .chain(t.size()[1..].iter().copied())
                    .collect::<Vec<_>>(),
                false,
            )?;
            let mut shape = t.size();
            shape[1] = points;
            let mut view = vec![s, points];
            view.resize(shape.len(), 1);
            let idx = cells
                .f_to_device(t.device())?
                .f_view(view.as_slice())?
                .f_expand(shape.as_slice(), false)?;
            Ok(t.f_gather(1, &idx, false)?)
        };
        Ok(Split::new(at(&split.fx)?, at(&split.y)?, at(&split.pos)?))
    };
    let out = TensorDataset {
        train: scatter(&ds.train, 0)?,
        test: scatter(&ds.test, ds.train.len() as u64)?,
        grid: None,
        query_grid: None,
        test_grid: None,
    };
    out.validate()?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::grid_positions_2d;

    /// A 3×4 grid whose cell c holds fx = c and, over two time steps, y = (10c, 10c + 1).
    fn grid_data(n_train: i64, n_test: i64) -> TensorDataset {
        let split = |s: i64| {
            let fx = Tensor::arange(12, (Kind::Double, Device::Cpu))
                .view([1, 12, 1])
                .expand([s, 12, 1], true);
            let y = Tensor::cat(&[&fx * 10.0, &fx * 10.0 + 1.0], 2).unsqueeze(2);
            Split::new(fx, y, grid_positions_2d(3, 4).unwrap())
        };
        TensorDataset {
            train: split(n_train),
            test: split(n_test),
            grid: Some(vec![3, 4]),
            query_grid: None,
            test_grid: None,
        }
    }

    /// The cells of every sample, read back from its positions (column x·3, row y·2 on the
    /// 3×4 grid).
    fn cells(split: &Split) -> Vec<Vec<i64>> {
        let pos = Vec::<f64>::try_from(split.pos.to_kind(Kind::Double).reshape([-1])).unwrap();
        let p = split.points() as usize;
        pos.chunks(2 * p)
            .map(|s| {
                s.chunks(2)
                    .map(|xy| ((xy[1] * 2.0).round() * 4.0 + (xy[0] * 3.0).round()) as i64)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn scatter_grid_keeps_distinct_random_cells_with_their_values() {
        let ds = scatter_grid(&grid_data(5, 3), 5, 7).unwrap();
        assert!(ds.grid.is_none());
        assert_eq!(ds.train.pos.size(), [5, 5, 2]);
        assert_eq!(ds.test.y.size(), [3, 5, 1, 2]);
        let train = cells(&ds.train);
        for (s, c) in train.iter().enumerate() {
            assert!(c.windows(2).all(|w| w[0] < w[1]), "{c:?}");
            assert!(c.iter().all(|&k| (0..12).contains(&k)));
            for (j, &k) in c.iter().enumerate() {
                let (s, j) = (s as i64, j as i64);
                assert_eq!(ds.train.fx.double_value(&[s, j, 0]), k as f64);
                assert_eq!(ds.train.y.double_value(&[s, j, 0, 0]), 10.0 * k as f64);
                assert_eq!(
                    ds.train.y.double_value(&[s, j, 0, 1]),
                    10.0 * k as f64 + 1.0
                );
            }
        }
        assert!(train.iter().any(|c| c != &train[0]), "{train:?}");
        // Sample i's cells depend on (seed, i) alone, not on where the split boundary lies.
        let other = scatter_grid(&grid_data(2, 6), 5, 7).unwrap();
        let all = |d: &TensorDataset| [cells(&d.train), cells(&d.test)].concat();
        assert_eq!(all(&ds), all(&other));
        assert_ne!(
            all(&ds),
            all(&scatter_grid(&grid_data(5, 3), 5, 8).unwrap())
        );
        // Every cell: the grid in its order, in every sample.
        let whole = scatter_grid(&grid_data(2, 1), 12, 0).unwrap();
        assert!(cells(&whole.test)[0].iter().copied().eq(0..12));
    }

    #[test]
    fn scatter_grid_refuses_bad_counts_and_non_grid_data() {
        for p in [0, 13, -1] {
            let e = scatter_grid(&grid_data(2, 1), p, 0)
                .unwrap_err()
                .to_string();
            assert!(e.contains("points") && e.contains("[1, 12]"), "{e}");
        }
        let mut ds = grid_data(2, 1);
        ds.train.pos = ds.train.pos.expand([2, 12, 2], true);
        assert!(scatter_grid(&ds, 3, 0).is_err());
    }
}
