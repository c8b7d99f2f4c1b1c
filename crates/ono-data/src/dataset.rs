//! In-memory datasets of point features, and the batches the trainers consume.
//!
//! A [`Split`] holds every sample of one split as tensors: input functions `fx` (S, N, Cf),
//! targets `y` (S, N, Cy) — or (S, N, Cy, T) for a time series — and positions `pos`, either
//! shared by every sample (1, N, d) or per sample (S, N, d). Where the targets live on other
//! points than the inputs (an inverse problem: the solution in on a fine grid, the coefficient
//! out on a coarse one), `query` holds their positions (1 or S, M, d) and `y` is (S, M, Cy).
//! `aux` (S, M, Ca) carries what a reference loss needs beside the target (the Galerkin
//! Transformer's target derivatives computed on the finest grid, the raw coefficient).
//! [`TensorDataset`] pairs a train and a test split and is stored as one safetensors file
//! (`train.fx`, `train.y`, `train.pos`, optionally `train.query`, `train.aux`, `test.*`, `grid`
//! when the points are a row-major grid and `query_grid` when the query points are).

use std::path::Path;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// One split, in memory.
#[derive(Debug)]
pub struct Split {
    /// Input functions, (S, N, Cf).
    pub fx: Tensor,
    /// Targets, (S, N, Cy) or (S, N, Cy, T).
    pub y: Tensor,
    /// Positions, (1, N, d) shared or (S, N, d).
    pub pos: Tensor,
    /// Positions of the targets when they are not the input points, (1, M, d) or (S, M, d).
    pub query: Option<Tensor>,
    /// Loss-only channels at the target points, (S, M, Ca).
    pub aux: Option<Tensor>,
    /// Global parameters of each sample (GNOT's θ), (S, n_θ).
    pub theta: Option<Tensor>,
    /// Input functions on their own points (GNOT's branches), each zero-padded.
    pub functions: Vec<FunctionSplit>,
    /// Real points of each sample when samples differ in size: the first `lengths[s]` rows of
    /// `pos`, `fx`, `y` and `aux` are real, the rest zero padding. `None`: all N are real.
    pub lengths: Option<Vec<i64>>,
}

/// One input function of a split, on its own points.
#[derive(Debug)]
pub struct FunctionSplit {
    /// (S, L, c): each row is a point's features (GNOT's (x_i, f(x_i))), zero-padded.
    pub values: Tensor,
    /// Real rows of each sample (the first `lengths[s]`); `None`: all L.
    pub lengths: Option<Vec<i64>>,
}

/// One input function of a batch.
#[derive(Debug)]
pub struct FunctionBatch {
    /// (B, L_b, c), padded to the batch's longest sample.
    pub values: Tensor,
    /// (B, L_b) bool, true on real rows; `None` when every row is real.
    pub mask: Option<Tensor>,
}

/// A batch on the training device.
#[derive(Debug)]
pub struct Batch {
    /// (B, N, d)
    pub pos: Tensor,
    /// (B, N, Cf)
    pub fx: Tensor,
    /// (B, M, Cy) or (B, M, Cy, T); M = N without a query
    pub y: Tensor,
    /// (B, M, d)
    pub query: Option<Tensor>,
    /// (B, M, Ca)
    pub aux: Option<Tensor>,
    /// (B, N) bool, true on each sample's real points, when the samples differ in size (the
    /// batch is then padded to its longest sample, as GNOT's `pad_sequence`).
    pub mask: Option<Tensor>,
    /// (B, n_θ)
    pub theta: Option<Tensor>,
    /// The input functions on their own points.
    pub functions: Vec<FunctionBatch>,
}

impl Batch {
    /// Every tensor slot of the batch in a fixed order (pos, fx, y, query, aux, mask, theta,
    /// then each input function's values and mask), `None` where an optional one is absent: two
    /// batches with the same slots filled at the same shapes feed a model the same way.
    pub fn tensors(&self) -> Vec<Option<&Tensor>> {
        // Destructured whole, so that a field added to Batch must be listed here.
        let Batch {
            pos,
            fx,
            y,
            query,
            aux,
            mask,
            theta,
            functions,
        } = self;
        let mut out = vec![
            Some(pos),
            Some(fx),
            Some(y),
            query.as_ref(),
            aux.as_ref(),
            mask.as_ref(),
            theta.as_ref(),
        ];
        for FunctionBatch { values, mask } in functions {
            out.push(Some(values));
            out.push(mask.as_ref());
        }
        out
    }

    /// The batch whose [`tensors`](Self::tensors) are `slots` (its inverse): seven slots, then
    /// two per input function.
    pub fn from_tensors(slots: Vec<Option<Tensor>>) -> Result<Batch> {
        if slots.len() < 7 || !(slots.len() - 7).is_multiple_of(2) {
            return Err(Error::Invalid(format!(
                "a batch has 7 tensor slots and 2 per input function, not {}",
                slots.len()
            )));
        }
        let mut it = slots.into_iter();
        let mut required = |name: &str| {
            it.next()
                .flatten()
                .ok_or_else(|| Error::Invalid(format!("a batch needs its {name}")))
        };
        let (pos, fx, y) = (required("pos")?, required("fx")?, required("y")?);
        let mut next = || it.next().flatten();
        let (query, aux, mask, theta) = (next(), next(), next(), next());
        let mut functions = Vec::new();
        while let Some(values) = it.next() {
            let values = values
                .ok_or_else(|| Error::Invalid("an input function needs its values".into()))?;
            functions.push(FunctionBatch {
                values,
                mask: it.next().flatten(),
            });
        }
        Ok(Batch {
            pos,
            fx,
            y,
            query,
            aux,
            mask,
            theta,
            functions,
        })
    }

    /// The batch with every tensor replaced by `f` of it (the same slots filled).
    pub fn try_map<E: From<Error>>(
        &self,
        mut f: impl FnMut(&Tensor) -> std::result::Result<Tensor, E>,
    ) -> std::result::Result<Batch, E> {
        let slots = self
            .tensors()
            .into_iter()
            .map(|t| t.map(&mut f).transpose())
            .collect::<std::result::Result<Vec<_>, E>>()?;
        Ok(Batch::from_tensors(slots)?)
    }
}

/// The mask of the first `lengths[b]` of `n` rows, (B, n) bool on `device`; `None` when all
/// rows of every sample are real.
pub fn length_mask(lengths: &[i64], n: i64, device: Device) -> Result<Option<Tensor>> {
    if lengths.iter().all(|&l| l == n) {
        return Ok(None);
    }
    let flags: Vec<bool> = lengths
        .iter()
        .flat_map(|&l| (0..n).map(move |i| i < l))
        .collect();
    Ok(Some(
        Tensor::from_slice(&flags)
            .f_reshape([lengths.len() as i64, n])?
            .f_to_device(device)?,
    ))
}

/// Process `rank`'s contiguous share of `n` points split over `world` processes, as
/// `(start, len)`: the first `n mod world` processes hold one point more than the others, so a
/// process may hold none when `n < world`.
pub fn point_share(n: i64, rank: usize, world: usize) -> (i64, i64) {
    let (world, rank) = (world.max(1) as i64, rank as i64);
    let (base, extra) = (n / world, n % world);
    let start = rank * base + rank.min(extra);
    (start, base + i64::from(rank < extra))
}

/// Checks per-sample lengths against a padded axis of size `n` for `s` samples.
fn check_lengths(lengths: &[i64], s: i64, n: i64, what: &str) -> std::result::Result<(), String> {
    if lengths.len() as i64 != s || lengths.iter().any(|&l| l < 0 || l > n) {
        return Err(format!(
            "{what}: {} lengths for {s} samples, each in [0, {n}] (got {:?}…)",
            lengths.len(),
            &lengths[..lengths.len().min(4)]
        ));
    }
    Ok(())
}

impl Split {
    /// A split whose targets live on the input points, with no loss-only channels.
    pub fn new(fx: Tensor, y: Tensor, pos: Tensor) -> Self {
        Self {
            fx,
            y,
            pos,
            query: None,
            aux: None,
            theta: None,
            functions: Vec::new(),
            lengths: None,
        }
    }

    /// Checks shapes and finiteness (one host read per tensor).
    pub fn validate(&self, what: &str) -> Result<()> {
        let (fx, y, pos) = (self.fx.size(), self.y.size(), self.pos.size());
        let bad = |m: String| Err(Error::Invalid(format!("{what}: {m}")));
        if fx.len() != 3 || fx[0] == 0 || fx[1] == 0 {
            return bad(format!("fx must be (S, N, C) with S, N > 0, got {fx:?}"));
        }
        if pos.len() != 3 || !(pos[0] == 1 || pos[0] == fx[0]) || pos[1] != fx[1] {
            return bad(format!(
                "pos must be (1, N, d) or (S, N, d) with N = {}, got {pos:?}",
                fx[1]
            ));
        }
        let m = match &self.query {
            None => fx[1],
            Some(q) => {
                let q = q.size();
                if q.len() != 3 || !(q[0] == 1 || q[0] == fx[0]) || q[1] == 0 || q[2] != pos[2] {
                    return bad(format!(
                        "query must be (1, M, {d}) or ({s}, M, {d}) with M > 0, got {q:?}",
                        d = pos[2],
                        s = fx[0]
                    ));
                }
                q[1]
            }
        };
        let target_points = if self.query.is_some() {
            "the query's M"
        } else {
            "fx's N"
        };
        if !(y.len() == 3 || y.len() == 4) || y[0] != fx[0] || y[1] != m {
            return bad(format!(
                "y must be (S, M, C) or (S, M, C, T) with fx's S = {} and {target_points} = {m}, got {y:?}",
                fx[0]
            ));
        }
        if let Some(a) = &self.aux {
            let a = a.size();
            if a.len() != 3 || a[0] != fx[0] || a[1] != m || a[2] == 0 {
                return bad(format!(
                    "aux must be ({}, {m}, Ca) with Ca > 0 (at the target points), got {a:?}",
                    fx[0]
                ));
            }
        }
        if let Some(l) = &self.lengths {
            if self.query.is_some() || y.len() != 3 {
                return bad("samples of different sizes take steady targets on their own points (no query, no time axis)".into());
            }
            check_lengths(l, fx[0], fx[1], "lengths").or_else(bad)?;
            if l.contains(&0) {
                return bad("a sample without points".into());
            }
        }
        if let Some(t) = &self.theta {
            if t.dim() != 2 || t.size()[0] != fx[0] {
                return bad(format!(
                    "theta must be ({}, n_θ), got {:?}",
                    fx[0],
                    t.size()
                ));
            }
        }
        for (j, f) in self.functions.iter().enumerate() {
            let v = f.values.size();
            if v.len() != 3 || v[0] != fx[0] || v[2] == 0 {
                return bad(format!(
                    "input function {j} must be ({}, L, c) with c > 0, got {v:?}",
                    fx[0]
                ));
            }
            if let Some(l) = &f.lengths {
                check_lengths(l, v[0], v[1], &format!("input function {j}")).or_else(bad)?;
            }
        }
        let extra = self
            .query
            .iter()
            .map(|q| ("query", q))
            .chain(self.aux.iter().map(|a| ("aux", a)))
            .chain(self.theta.iter().map(|t| ("theta", t)))
            .chain(
                self.functions
                    .iter()
                    .map(|f| ("an input function", &f.values)),
            );
        for (name, t) in [("fx", &self.fx), ("y", &self.y), ("pos", &self.pos)]
            .into_iter()
            .chain(extra)
        {
            if !matches!(t.kind(), Kind::Float | Kind::Double) {
                return bad(format!(
                    "{name} must be float32 or float64, got {:?}",
                    t.kind()
                ));
            }
            if t.f_isfinite()?.f_all()?.f_int64_value(&[])? == 0 {
                return bad(format!("{name} contains NaN or Inf"));
            }
        }
        Ok(())
    }

    /// Number of samples.
    pub fn len(&self) -> i64 {
        self.fx.size()[0]
    }

    /// Whether the split has no samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Points per sample.
    pub fn points(&self) -> i64 {
        self.fx.size()[1]
    }

    /// The first `n` samples (a view).
    pub fn take(&self, n: i64) -> Result<Split> {
        if n > self.len() || n <= 0 {
            return Err(Error::Config {
                what: "split size".into(),
                msg: format!("asked for {n} samples, the split has {}", self.len()),
            });
        }
        let first = |t: &Tensor| -> Result<Tensor> {
            Ok(if t.size()[0] == 1 {
                t.shallow_clone()
            } else {
                t.f_narrow(0, 0, n)?
            })
        };
        Ok(Split {
            fx: self.fx.f_narrow(0, 0, n)?,
            y: self.y.f_narrow(0, 0, n)?,
            pos: first(&self.pos)?,
            query: self.query.as_ref().map(first).transpose()?,
            aux: self.aux.as_ref().map(|a| a.f_narrow(0, 0, n)).transpose()?,
            theta: self
                .theta
                .as_ref()
                .map(|t| t.f_narrow(0, 0, n))
                .transpose()?,
            functions: self
                .functions
                .iter()
                .map(|f| {
                    Ok(FunctionSplit {
                        values: f.values.f_narrow(0, 0, n)?,
                        lengths: f.lengths.as_ref().map(|l| l[..n as usize].to_vec()),
                    })
                })
                .collect::<Result<Vec<_>>>()?,
            lengths: self.lengths.as_ref().map(|l| l[..n as usize].to_vec()),
        })
    }

    /// The points `[start, start + len)` of every sample (point sharding: this process's
    /// share): positions, inputs, targets, loss-only channels and the real points' counts,
    /// copied so that the whole split can be freed. Targets at query points of their own and
    /// input functions on their own points are refused: they are not split.
    pub fn point_share(&self, start: i64, len: i64) -> Result<Split> {
        let n = self.points();
        if self.query.is_some() || !self.functions.is_empty() {
            return Err(Error::Config {
                what: "point share".into(),
                msg: "targets at query points and input functions on their own points are not split over points".into(),
            });
        }
        if start < 0 || len < 0 || start + len > n {
            return Err(Error::Config {
                what: "point share".into(),
                msg: format!("points [{start}, {}) of {n}", start + len),
            });
        }
        let share =
            |t: &Tensor| -> Result<Tensor> { Ok(t.f_narrow(1, start, len)?.f_detach_copy()?) };
        Ok(Split {
            fx: share(&self.fx)?,
            y: share(&self.y)?,
            pos: share(&self.pos)?,
            query: None,
            aux: self.aux.as_ref().map(share).transpose()?,
            theta: self.theta.as_ref().map(Tensor::shallow_clone),
            functions: Vec::new(),
            lengths: self
                .lengths
                .as_ref()
                .map(|l| l.iter().map(|&l| (l - start).clamp(0, len)).collect()),
        })
    }

    /// The samples at `indices`, moved to `device` and cast to `kind`.
    pub fn batch(&self, indices: &[i64], device: Device, kind: Kind) -> Result<Batch> {
        // The split may already live on the training device (normalized splits do).
        let idx = Tensor::from_slice(indices).f_to_device(self.fx.device())?;
        self.batch_at(indices, &idx, device, kind)
    }

    /// [`Split::batch`] with the indices also given as an int64 tensor on the split's device:
    /// a caller that uploads an epoch's order once spares every batch an upload, which on a GPU
    /// waits for the queued work.
    pub fn batch_at(
        &self,
        indices: &[i64],
        idx: &Tensor,
        device: Device,
        kind: Kind,
    ) -> Result<Batch> {
        let b = indices.len() as i64;
        let pick = |t: &Tensor| -> Result<Tensor> {
            Ok(t.f_index_select(0, idx)?
                .f_to_device(device)?
                .f_to_kind(kind)?)
        };
        // Positions shared by every sample are expanded, not copied.
        let points = |t: &Tensor| -> Result<Tensor> {
            if t.size()[0] == 1 {
                let p = t.f_to_device(device)?.f_to_kind(kind)?;
                Ok(p.f_expand([b, -1, -1], false)?)
            } else {
                pick(t)
            }
        };
        // Samples of different sizes: padded to the longest of this batch, as GNOT's collate.
        let picked_lengths = |l: &Option<Vec<i64>>, n: i64| -> Vec<i64> {
            match l {
                Some(l) => indices.iter().map(|&i| l[i as usize]).collect(),
                None => vec![n; indices.len()],
            }
        };
        let n = self.fx.size()[1];
        let lengths = picked_lengths(&self.lengths, n);
        let nb = lengths.iter().copied().max().unwrap_or(n);
        let trim =
            |t: Tensor| -> Result<Tensor> { Ok(if nb < n { t.f_narrow(1, 0, nb)? } else { t }) };
        let functions = self
            .functions
            .iter()
            .map(|f| {
                let l = f.values.size()[1];
                let lens = picked_lengths(&f.lengths, l);
                // At least one row: a function empty in every sample of the batch gets one row
                // of padding (GNOT's pad_sequence gives zero rows, and its attention divides by
                // zero there).
                let lb = lens.iter().copied().max().unwrap_or(l).max(1).min(l);
                let values = pick(&f.values)?;
                Ok(FunctionBatch {
                    values: if lb < l {
                        values.f_narrow(1, 0, lb)?
                    } else {
                        values
                    },
                    mask: length_mask(&lens, lb, device)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Batch {
            pos: trim(points(&self.pos)?)?,
            fx: trim(pick(&self.fx)?)?,
            y: if self.lengths.is_some() {
                trim(pick(&self.y)?)?
            } else {
                pick(&self.y)?
            },
            query: self.query.as_ref().map(points).transpose()?,
            aux: self
                .aux
                .as_ref()
                .map(|a| {
                    if self.lengths.is_some() {
                        trim(pick(a)?)
                    } else {
                        pick(a)
                    }
                })
                .transpose()?,
            mask: length_mask(&lengths, nb, device)?,
            theta: self.theta.as_ref().map(pick).transpose()?,
            functions,
        })
    }
}

/// A train and a test split, and the grid shape when the points are a row-major grid.
#[derive(Debug)]
pub struct TensorDataset {
    /// Training samples.
    pub train: Split,
    /// Test samples.
    pub test: Split,
    /// (H, W) (or any rank) with Π = N when the points are a row-major grid.
    pub grid: Option<Vec<i64>>,
    /// The same for the query points (Π = M), when the splits have a query.
    pub query_grid: Option<Vec<i64>>,
    /// The test split's own grid, of the same rank as `grid`, when the test samples are at
    /// another resolution than the training samples (a zero-shot test: `neuralop_darcy` trained
    /// at 16² and tested at 32²); `None`: the test points are on `grid`. Not with query points.
    pub test_grid: Option<Vec<i64>>,
}

impl TensorDataset {
    /// Checks both splits and that they agree on channels and grid. The time axes of time
    /// series may differ: `data.train_steps` trains on the first steps and tests on all.
    pub fn validate(&self) -> Result<()> {
        self.train.validate("train")?;
        self.test.validate("test")?;
        let (a, b) = (self.train.fx.size(), self.test.fx.size());
        let (ya, yb) = (self.train.y.size(), self.test.y.size());
        if a[2] != b[2]
            || ya.len() != yb.len()
            || ya[2] != yb[2]
            || self.train.pos.size()[2] != self.test.pos.size()[2]
        {
            return Err(Error::Invalid(format!(
                "train and test disagree on channels: fx {a:?} / {b:?}, y {ya:?} / {yb:?}"
            )));
        }
        if let Some(g) = &self.grid {
            let n: i64 = g.iter().product();
            if n != self.train.points() || g.iter().any(|&d| d <= 0) {
                return Err(Error::Invalid(format!(
                    "grid {g:?} does not have the {} points of a sample",
                    self.train.points()
                )));
            }
        }
        if let Some(t) = &self.test_grid {
            let bad = |m: String| Err(Error::Invalid(format!("test_grid {t:?}: {m}")));
            match &self.grid {
                None => return bad("given without a grid of the training samples".into()),
                Some(g) if g.len() != t.len() => {
                    return bad(format!("has another rank than the grid {g:?}"))
                }
                Some(_) => {}
            }
            if self.train.query.is_some() {
                return bad("a test grid of its own is not supported with query points".into());
            }
            if t.iter().product::<i64>() != self.test.points() || t.iter().any(|&d| d <= 0) {
                return bad(format!(
                    "does not have the {} points of a test sample",
                    self.test.points()
                ));
            }
        } else if let Some(g) = &self.grid {
            if g.iter().product::<i64>() != self.test.points() {
                return Err(Error::Invalid(format!(
                    "grid {g:?} does not have the {} points of a test sample (a test set at \
                     another resolution needs its own test_grid)",
                    self.test.points()
                )));
            }
        }
        let (qa, qb) = (self.train.query.is_some(), self.test.query.is_some());
        let (aa, ab) = (
            self.train.aux.as_ref().map(|a| a.size()[2]),
            self.test.aux.as_ref().map(|a| a.size()[2]),
        );
        if qa != qb || aa != ab {
            return Err(Error::Invalid(format!(
                "train and test disagree on query points ({qa} / {qb}) or aux channels ({aa:?} / {ab:?})"
            )));
        }
        let widths = |s: &Split| -> (Option<i64>, Vec<i64>) {
            (
                s.theta.as_ref().map(|t| t.size()[1]),
                s.functions.iter().map(|f| f.values.size()[2]).collect(),
            )
        };
        let (wa, wb) = (widths(&self.train), widths(&self.test));
        if wa != wb {
            return Err(Error::Invalid(format!(
                "train and test disagree on θ or the input functions' widths: {wa:?} / {wb:?}"
            )));
        }
        if self.grid.is_some() && (self.train.lengths.is_some() || self.test.lengths.is_some()) {
            return Err(Error::Invalid(
                "samples of different sizes are not a grid".into(),
            ));
        }
        match (&self.query_grid, qa) {
            (Some(g), true) => {
                let m: i64 = g.iter().product();
                if m != self.train.y.size()[1] || g.iter().any(|&d| d <= 0) {
                    return Err(Error::Invalid(format!(
                        "query_grid {g:?} does not have the {} query points of a sample",
                        self.train.y.size()[1]
                    )));
                }
            }
            (Some(g), false) => {
                return Err(Error::Invalid(format!(
                    "query_grid {g:?} given without query points"
                )))
            }
            (None, _) => {}
        }
        Ok(())
    }

    /// The grid of the targets: the query grid when there is a query, else the points' grid.
    pub fn target_grid(&self) -> Option<&[i64]> {
        if self.train.query.is_some() {
            self.query_grid.as_deref()
        } else {
            self.grid.as_deref()
        }
    }

    /// The grid of the test split's points: its own [`test_grid`](Self::test_grid), else `grid`.
    pub fn effective_test_grid(&self) -> Option<&[i64]> {
        self.test_grid.as_deref().or(self.grid.as_deref())
    }

    /// The grid of the test targets: the query grid when there is a query, else
    /// [`effective_test_grid`](Self::effective_test_grid).
    pub fn test_target_grid(&self) -> Option<&[i64]> {
        if self.test.query.is_some() {
            self.query_grid.as_deref()
        } else {
            self.effective_test_grid()
        }
    }

    /// Reads a dataset file written by [`TensorDataset::write`]. A missing file or array is an
    /// error naming it.
    pub fn read(path: &Path) -> Result<Self> {
        if !path.is_file() {
            return Err(Error::Io {
                path: path.to_path_buf(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "dataset file not found"),
            });
        }
        let named = Tensor::read_safetensors(path).map_err(|e| Error::Format {
            path: path.to_path_buf(),
            msg: format!("not a readable safetensors dataset: {e}"),
        })?;
        let mut map: std::collections::HashMap<String, Tensor> = named.into_iter().collect();
        let mut take = |k: &str| {
            map.remove(k).ok_or_else(|| Error::Format {
                path: path.to_path_buf(),
                msg: format!("has no array `{k}`"),
            })
        };
        let split = |take: &mut dyn FnMut(&str) -> Result<Tensor>, s: &str| -> Result<Split> {
            Ok(Split {
                fx: take(&format!("{s}.fx"))?,
                y: take(&format!("{s}.y"))?,
                pos: take(&format!("{s}.pos"))?,
                query: None,
                aux: None,
                theta: None,
                functions: Vec::new(),
                lengths: None,
            })
        };
        let mut train = split(&mut take, "train")?;
        let mut test = split(&mut take, "test")?;
        let lengths = |t: Tensor| -> Result<Vec<i64>> {
            Ok(Vec::<i64>::try_from(
                t.f_to_kind(Kind::Int64)?.f_reshape([-1])?,
            )?)
        };
        for (s, split) in [("train", &mut train), ("test", &mut test)] {
            split.query = map.remove(&format!("{s}.query"));
            split.aux = map.remove(&format!("{s}.aux"));
            split.theta = map.remove(&format!("{s}.theta"));
            split.lengths = map
                .remove(&format!("{s}.lengths"))
                .map(lengths)
                .transpose()?;
            for j in 0.. {
                let Some(values) = map.remove(&format!("{s}.f{j}")) else {
                    break;
                };
                let lens = map.remove(&format!("{s}.f{j}.lengths"));
                split.functions.push(FunctionSplit {
                    values,
                    lengths: lens.map(lengths).transpose()?,
                });
            }
        }
        let mut shape = |k: &str| -> Result<Option<Vec<i64>>> {
            match map.remove(k) {
                Some(g) => Ok(Some(Vec::<i64>::try_from(
                    g.f_to_kind(Kind::Int64)?.f_reshape([-1])?,
                )?)),
                None => Ok(None),
            }
        };
        let grid = shape("grid")?;
        let query_grid = shape("query_grid")?;
        let test_grid = shape("test_grid")?;
        let ds = Self {
            train,
            test,
            grid,
            query_grid,
            test_grid,
        };
        ds.validate().map_err(|e| Error::Format {
            path: path.to_path_buf(),
            msg: e.to_string(),
        })?;
        Ok(ds)
    }

    /// Writes the dataset atomically ([`write_tensors_atomic`]).
    pub fn write(&self, path: &Path) -> Result<()> {
        self.write_with_metadata(path, &Default::default())
    }

    /// Writes the dataset atomically with string `metadata` in the file's header (what
    /// [`ono_io::safetensors::read_metadata`] returns).
    pub fn write_with_metadata(
        &self,
        path: &Path,
        metadata: &std::collections::HashMap<String, String>,
    ) -> Result<()> {
        self.validate()?;
        let mut named: Vec<(String, Tensor)> = Vec::new();
        for (s, split) in [("train", &self.train), ("test", &self.test)] {
            named.push((format!("{s}.fx"), split.fx.f_contiguous()?));
            named.push((format!("{s}.y"), split.y.f_contiguous()?));
            named.push((format!("{s}.pos"), split.pos.f_contiguous()?));
            for (k, t) in [
                ("query", &split.query),
                ("aux", &split.aux),
                ("theta", &split.theta),
            ] {
                if let Some(t) = t {
                    named.push((format!("{s}.{k}"), t.f_contiguous()?));
                }
            }
            if let Some(l) = &split.lengths {
                named.push((format!("{s}.lengths"), Tensor::from_slice(l)));
            }
            for (j, f) in split.functions.iter().enumerate() {
                named.push((format!("{s}.f{j}"), f.values.f_contiguous()?));
                if let Some(l) = &f.lengths {
                    named.push((format!("{s}.f{j}.lengths"), Tensor::from_slice(l)));
                }
            }
        }
        for (k, g) in [
            ("grid", &self.grid),
            ("query_grid", &self.query_grid),
            ("test_grid", &self.test_grid),
        ] {
            if let Some(g) = g {
                named.push((k.into(), Tensor::from_slice(g)));
            }
        }
        let refs = named.iter().map(|(n, t)| (n.as_str(), t));
        Ok(ono_io::safetensors::write(path, refs, metadata)?)
    }
}

/// Writes named tensors to a safetensors file atomically, through the one safetensors writer
/// ([`ono_io::safetensors`]).
pub fn write_tensors_atomic(path: &Path, named: &[(String, Tensor)]) -> Result<()> {
    let refs = named.iter().map(|(n, t)| (n.as_str(), t));
    Ok(ono_io::safetensors::write(path, refs, &Default::default())?)
}

/// The sample order of one epoch: a permutation of 0..n determined by (seed, epoch) alone, so a
/// resumed run replays the order of the run it continues.
pub fn epoch_order(n: i64, seed: u64, epoch: u64) -> Vec<i64> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(seed, epoch));
    let mut order: Vec<i64> = (0..n).collect();
    order.shuffle(&mut rng);
    order
}

/// A seed for stream `k` of a run seeded with `seed` (SplitMix64 finaliser).
pub fn mix(seed: u64, k: u64) -> u64 {
    let mut z = seed ^ k.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Positions of an h×w grid on [0, 1]², flattened row-major as the ONO scripts' `np.meshgrid`:
/// `pos[..., 0]` is the column coordinate, `pos[..., 1]` the row coordinate.
///
/// # Shapes
/// - returns: (1, h·w, 2), float32
pub fn grid_positions_2d(h: i64, w: i64) -> Result<Tensor> {
    if h < 2 || w < 2 {
        return Err(Error::Config {
            what: "grid".into(),
            msg: format!("needs at least 2×2 points, got {h}×{w}"),
        });
    }
    let opts = (Kind::Float, Device::Cpu);
    grid_positions_of_axes(
        &Tensor::f_linspace(0.0, 1.0, h, opts)?,
        &Tensor::f_linspace(0.0, 1.0, w, opts)?,
    )
}

/// Positions of the grid of the coordinates `rows` (h) × `cols` (w), flattened row-major as
/// [`grid_positions_2d`]: `pos[..., 0]` the column coordinate, `pos[..., 1]` the row coordinate.
///
/// # Shapes
/// - `rows`: (h), `cols`: (w)
/// - returns: (1, h·w, 2), in the axes' kind
pub fn grid_positions_of_axes(rows: &Tensor, cols: &Tensor) -> Result<Tensor> {
    let (h, w) = (rows.size()[0], cols.size()[0]);
    let gx = cols.f_view([1, w])?.f_expand([h, w], false)?;
    let gy = rows.f_view([h, 1])?.f_expand([h, w], false)?;
    Ok(Tensor::f_stack(&[gx, gy], -1)?.f_reshape([1, h * w, 2])?)
}

/// The coordinates of a row-major grid of points along each of its axes: for axis a, the
/// position channel that varies most along the line of nodes from the first node in that
/// direction, at those nodes. What
/// [`Normalizer::regridded_at`](crate::normalizer::Normalizer::regridded_at) interpolates
/// between.
///
/// # Shapes
/// - `pos`: (1 or S, Π grid, d), the first sample's positions are read
/// - returns: one (grid[a]) float64 tensor per axis
pub fn grid_axes(pos: &Tensor, grid: &[i64]) -> Result<Vec<Tensor>> {
    let sz = pos.size();
    if sz.len() != 3 || sz[1] != grid.iter().product::<i64>() || sz[0] == 0 {
        return Err(Error::Invalid(format!(
            "positions {sz:?} are not the points of the grid {grid:?}"
        )));
    }
    let mut shape = grid.to_vec();
    shape.push(sz[2]);
    let p = pos
        .f_select(0, 0)?
        .f_to_kind(Kind::Double)?
        .f_reshape(&shape)?;
    (0..grid.len())
        .map(|a| {
            // The nodes along axis a: index 0 on every other axis.
            let mut line = p.shallow_clone();
            for b in (0..grid.len()).rev() {
                if b != a {
                    line = line.f_select(b as i64, 0)?;
                }
            }
            // (grid[a], d): the channel with the widest range along the line.
            let range = line
                .f_amax(&[0i64][..], false)?
                .f_sub(&line.f_amin(&[0i64][..], false)?)?;
            let c = range.f_argmax(0, false)?.f_int64_value(&[])?;
            Ok(line.f_select(1, c)?.f_contiguous()?)
        })
        .collect()
}

/// `field`, given on the nodes of a row-major grid whose axes have the coordinates `from`,
/// interpolated linearly per axis at the nodes of the grid whose axes have the coordinates `to`
/// (one increasing 1-D tensor per axis each, [`grid_axes`]), held at the end values beyond the
/// first grid: a training set's statistics at a test set's points.
///
/// # Shapes
/// - `field`: (B, Π from, rest…)
/// - returns: (B, Π to, rest…), in `field`'s kind
pub fn interpolate_on_axes(field: &Tensor, from: &[Tensor], to: &[Tensor]) -> Result<Tensor> {
    let from_n: Vec<i64> = from.iter().map(|a| a.size()[0]).collect();
    let size = field.size();
    if from.is_empty() || from.len() != to.len() || size.get(1) != Some(&from_n.iter().product()) {
        return Err(Error::Invalid(format!(
            "a field {size:?} is not on the grid of axes {from_n:?} (or the target grid has \
             another rank)"
        )));
    }
    let weights = from
        .iter()
        .zip(to)
        .map(|(f, t)| interpolation_matrix(f, t))
        .collect::<Result<Vec<_>>>()?;
    // (B, n_1, …, n_D, rest) with the rest flattened; axis d of the grid is dimension d + 1.
    let mut shape = vec![size[0]];
    shape.extend_from_slice(&from_n);
    shape.push(size[2..].iter().product());
    let mut g = field.f_to_kind(Kind::Double)?.f_reshape(&shape)?;
    for (d, w) in weights.iter().enumerate() {
        let axis = d as i64 + 1;
        // (m_d, n_d) · that axis: the new axis comes first, then goes back in its place.
        g = w
            .f_tensordot(&g, [1], [axis])?
            .f_movedim(&[0i64][..], &[axis][..])?;
    }
    let mut out_shape = vec![size[0], to.iter().map(|a| a.size()[0]).product()];
    out_shape.extend_from_slice(&size[2..]);
    Ok(g.f_reshape(&out_shape)?.f_to_kind(field.kind())?)
}

/// The (m, n) matrix of linear interpolation from the nodes `from` (n, increasing) to the points
/// `to` (m), constant beyond the end nodes.
fn interpolation_matrix(from: &Tensor, to: &Tensor) -> Result<Tensor> {
    let f = Vec::<f64>::try_from(from.f_to_kind(Kind::Double)?.f_reshape([-1])?)?;
    let t = Vec::<f64>::try_from(to.f_to_kind(Kind::Double)?.f_reshape([-1])?)?;
    if f.is_empty() || !f.windows(2).all(|w| w[0] < w[1]) || t.iter().any(|x| !x.is_finite()) {
        return Err(Error::Invalid(format!(
            "interpolation needs increasing grid coordinates, got {f:?} → {t:?}"
        )));
    }
    let n = f.len();
    let mut w = vec![0f64; t.len() * n];
    for (i, &x) in t.iter().enumerate() {
        let row = &mut w[i * n..(i + 1) * n];
        // The first node above x (n when none is).
        let k = f.partition_point(|&c| c <= x);
        if k == 0 {
            row[0] = 1.0;
        } else if k == n {
            row[n - 1] = 1.0;
        } else {
            let a = (x - f[k - 1]) / (f[k] - f[k - 1]);
            row[k - 1] = 1.0 - a;
            row[k] = a;
        }
    }
    Ok(Tensor::from_slice(&w).f_reshape([t.len() as i64, n as i64])?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A batch's slots come back as the batch (optional ones and input functions included);
    /// a wrong number of slots or a missing required one is an error, not a panic.
    #[test]
    fn a_batch_round_trips_through_its_slots() {
        let t = |v: f64| Tensor::from_slice(&[v]);
        let b = Batch {
            pos: t(1.0),
            fx: t(2.0),
            y: t(3.0),
            query: None,
            aux: Some(t(4.0)),
            mask: None,
            theta: Some(t(5.0)),
            functions: vec![
                FunctionBatch {
                    values: t(6.0),
                    mask: Some(t(7.0)),
                },
                FunctionBatch {
                    values: t(8.0),
                    mask: None,
                },
            ],
        };
        let slots: Vec<Option<Tensor>> = b
            .tensors()
            .into_iter()
            .map(|o| o.map(Tensor::shallow_clone))
            .collect();
        assert_eq!(slots.len(), 11);
        let back = Batch::from_tensors(slots).unwrap();
        let values = |b: &Batch| -> Vec<Option<f64>> {
            b.tensors()
                .into_iter()
                .map(|o| o.map(|x| x.double_value(&[0])))
                .collect()
        };
        assert_eq!(values(&back), values(&b));
        let doubled = b.try_map(|x| Ok::<_, Error>(x.f_mul_scalar(2.0)?)).unwrap();
        assert_eq!(values(&doubled)[9], Some(16.0));
        assert_eq!(values(&doubled)[10], None);
        assert_eq!(values(&doubled)[3], None);
        assert!(Batch::from_tensors((0..8).map(|_| Some(t(1.0))).collect()).is_err());
        let mut missing: Vec<Option<Tensor>> = (0..7).map(|_| Some(t(0.0))).collect();
        missing[2] = None;
        assert!(Batch::from_tensors(missing)
            .unwrap_err()
            .to_string()
            .contains("y"));
    }

    /// Shares are contiguous, cover every point once, differ by at most one (the longer
    /// first), and may be empty; a split's share holds exactly those rows, its lengths clamped.
    #[test]
    fn point_shares_cover_the_points_once() {
        for n in 0..12 {
            for world in 1..6 {
                let shares: Vec<(i64, i64)> =
                    (0..world).map(|r| point_share(n, r, world)).collect();
                assert_eq!(shares[0].0, 0);
                assert!(shares.windows(2).all(|w| w[0].0 + w[0].1 == w[1].0));
                assert_eq!(shares.iter().map(|s| s.1).sum::<i64>(), n);
                assert!(shares
                    .windows(2)
                    .all(|w| w[0].1 >= w[1].1 && w[0].1 - w[1].1 <= 1));
            }
        }
        assert_eq!(point_share(7, 2, 3), (5, 2));
        let opts = (Kind::Double, Device::Cpu);
        let fx = Tensor::arange(2 * 7, opts).view([2, 7, 1]);
        let mut split = Split::new(fx.shallow_clone(), &fx * 2.0, Tensor::rand([1, 7, 2], opts));
        split.lengths = Some(vec![7, 4]);
        let part = split.point_share(3, 3).unwrap();
        assert!(part.fx.equal(&fx.narrow(1, 3, 3)));
        assert!(part.y.equal(&(&fx * 2.0).narrow(1, 3, 3)));
        assert!(part.pos.equal(&split.pos.narrow(1, 3, 3)));
        assert_eq!(part.lengths, Some(vec![3, 1]));
        assert_eq!(split.point_share(6, 1).unwrap().lengths, Some(vec![1, 0]));
        assert!(split.point_share(5, 3).is_err());
    }

    fn dataset(m: i64, aux: i64) -> TensorDataset {
        let split = |s: i64| {
            let mut sp = Split::new(
                Tensor::randn([s, 9, 1], (Kind::Float, Device::Cpu)),
                Tensor::randn([s, m, 1], (Kind::Float, Device::Cpu)),
                grid_positions_2d(3, 3).unwrap(),
            );
            sp.query = Some(grid_positions_2d(2, 2).unwrap());
            sp.aux = Some(Tensor::randn([s, m, aux], (Kind::Float, Device::Cpu)));
            sp
        };
        TensorDataset {
            train: split(3),
            test: split(2),
            grid: Some(vec![3, 3]),
            query_grid: Some(vec![2, 2]),
            test_grid: None,
        }
    }

    /// Time series trained on their first steps (`data.train_steps`) keep fewer steps in the
    /// training split than in the test split, and write and read back so; other channels must
    /// agree.
    #[test]
    fn time_axes_may_differ_channels_may_not() {
        let opts = (Kind::Float, Device::Cpu);
        let split = |s: i64, c: i64, t: i64| {
            Split::new(
                Tensor::randn([s, 4, 3], opts),
                Tensor::randn([s, 4, c, t], opts) + 3.0,
                grid_positions_2d(2, 2).unwrap(),
            )
        };
        let ds = TensorDataset {
            train: split(3, 1, 2),
            test: split(2, 1, 5),
            grid: Some(vec![2, 2]),
            query_grid: None,
            test_grid: None,
        };
        ds.validate().unwrap();
        let path =
            std::env::temp_dir().join(format!("ono-steps-{}.safetensors", std::process::id()));
        ds.write(&path).unwrap();
        let back = TensorDataset::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(back.train.y.size(), [3, 4, 1, 2]);
        assert_eq!(back.test.y.size(), [2, 4, 1, 5]);
        let bad = TensorDataset {
            test: split(2, 2, 5),
            ..ds
        };
        let err = bad.validate().unwrap_err().to_string();
        assert!(err.contains("disagree on channels"), "{err}");
    }

    /// Query points and aux channels survive the file, batches and `take`; targets on the
    /// query grid and aux channels at the target points are checked.
    #[test]
    fn query_and_aux_round_trip_and_are_checked() {
        let ds = dataset(4, 2);
        ds.validate().unwrap();
        assert_eq!(ds.target_grid(), Some(&[2i64, 2][..]));
        let path =
            std::env::temp_dir().join(format!("ono-query-{}.safetensors", std::process::id()));
        ds.write(&path).unwrap();
        let back = TensorDataset::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(back.query_grid, Some(vec![2, 2]));
        assert!(back
            .test
            .aux
            .as_ref()
            .unwrap()
            .equal(ds.test.aux.as_ref().unwrap()));
        assert!(back
            .train
            .query
            .as_ref()
            .unwrap()
            .equal(ds.train.query.as_ref().unwrap()));
        let b = back
            .train
            .batch(&[2, 0], Device::Cpu, Kind::Double)
            .unwrap();
        assert_eq!(b.query.as_ref().unwrap().size(), vec![2, 4, 2]);
        assert!(b.aux.as_ref().unwrap().equal(
            &ds.train
                .aux
                .as_ref()
                .unwrap()
                .index_select(0, &Tensor::from_slice(&[2i64, 0]))
                .to_kind(Kind::Double)
        ));
        assert_eq!(
            back.train.take(2).unwrap().aux.unwrap().size(),
            vec![2, 4, 2]
        );

        // Targets on the input points while a query is given, aux on the wrong points, a
        // query grid that does not hold the query points, a query grid without a query.
        let wrong_y = dataset(9, 2);
        assert!(wrong_y
            .validate()
            .unwrap_err()
            .to_string()
            .contains("query"));
        let mut wrong_aux = dataset(4, 2);
        wrong_aux.train.aux = Some(Tensor::zeros([3, 9, 2], (Kind::Float, Device::Cpu)));
        assert!(wrong_aux
            .validate()
            .unwrap_err()
            .to_string()
            .contains("aux"));
        let mut wrong_grid = dataset(4, 1);
        wrong_grid.query_grid = Some(vec![3, 3]);
        assert!(wrong_grid
            .validate()
            .unwrap_err()
            .to_string()
            .contains("query_grid"));
        let mut no_query = dataset(4, 1);
        no_query.train.query = None;
        assert!(no_query.validate().is_err());
        let mut nan = dataset(4, 1);
        let _ = nan.test.aux.as_mut().unwrap().get(0).fill_(f64::NAN);
        assert!(nan.validate().unwrap_err().to_string().contains("aux"));
    }

    /// The axes of a 2-D grid of positions: rows along `pos[.., 1]`, columns along `pos[.., 0]`.
    #[test]
    fn grid_axes_read_rows_and_columns_off_the_positions() {
        let axes = grid_axes(&grid_positions_2d(3, 5).unwrap(), &[3, 5]).unwrap();
        assert_eq!(Vec::<f64>::try_from(&axes[0]).unwrap(), [0.0, 0.5, 1.0]);
        assert_eq!(
            Vec::<f64>::try_from(&axes[1]).unwrap(),
            [0.0, 0.25, 0.5, 0.75, 1.0]
        );
        let line = Tensor::from_slice(&[0.5f32, 0.75, 1.5]).view([1, 3, 1]);
        let axes = grid_axes(&line, &[3]).unwrap();
        assert_eq!(Vec::<f64>::try_from(&axes[0]).unwrap(), [0.5, 0.75, 1.5]);
        assert!(grid_axes(&line, &[2, 2]).is_err());
    }

    /// A test split at another resolution survives the file with its own grid, and every
    /// inconsistent grid is refused.
    #[test]
    fn a_test_grid_of_its_own_is_checked_and_survives_the_file() {
        let opts = (Kind::Float, Device::Cpu);
        let split = |s: i64, n: i64| {
            Split::new(
                Tensor::randn([s, n * n, 1], opts),
                Tensor::randn([s, n * n, 1], opts),
                grid_positions_2d(n, n).unwrap(),
            )
        };
        let ds = TensorDataset {
            train: split(3, 2),
            test: split(2, 4),
            grid: Some(vec![2, 2]),
            query_grid: None,
            test_grid: Some(vec![4, 4]),
        };
        ds.validate().unwrap();
        assert_eq!(ds.effective_test_grid(), Some(&[4, 4][..]));
        assert_eq!(ds.test_target_grid(), Some(&[4, 4][..]));
        let path =
            std::env::temp_dir().join(format!("ono-test-grid-{}.safetensors", std::process::id()));
        ds.write(&path).unwrap();
        let back = TensorDataset::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(back.test_grid, Some(vec![4, 4]));
        assert_eq!(back.grid, Some(vec![2, 2]));
        assert!(back.test.y.equal(&ds.test.y));

        let refused = |train: Split, test: Split, grid: Option<Vec<i64>>, tg: Option<Vec<i64>>| {
            TensorDataset {
                train,
                test,
                grid,
                query_grid: None,
                test_grid: tg,
            }
            .validate()
            .unwrap_err()
            .to_string()
        };
        // The test points off the training grid, without a test grid of their own.
        let e = refused(split(3, 2), split(2, 4), Some(vec![2, 2]), None);
        assert!(e.contains("test_grid"), "{e}");
        // A test grid of the wrong size, of another rank, or without a training grid.
        let e = refused(split(3, 2), split(2, 4), Some(vec![2, 2]), Some(vec![4, 3]));
        assert!(e.contains("16 points"), "{e}");
        let e = refused(split(3, 2), split(2, 4), Some(vec![2, 2]), Some(vec![16]));
        assert!(e.contains("rank"), "{e}");
        let e = refused(split(3, 2), split(2, 4), None, Some(vec![4, 4]));
        assert!(e.contains("without a grid"), "{e}");
        // Not with query points.
        let mut train = split(3, 2);
        let mut test = split(2, 4);
        train.query = Some(grid_positions_2d(2, 2).unwrap());
        test.query = Some(grid_positions_2d(2, 2).unwrap());
        let mut ds = TensorDataset {
            train,
            test,
            grid: Some(vec![2, 2]),
            query_grid: Some(vec![2, 2]),
            test_grid: Some(vec![4, 4]),
        };
        ds.train.y = Tensor::randn([3, 4, 1], opts);
        ds.test.y = Tensor::randn([2, 4, 1], opts);
        let e = ds.validate().unwrap_err().to_string();
        assert!(e.contains("query"), "{e}");
    }

    /// Samples of different sizes are batched as GNOT's collate: padded to the batch's longest
    /// sample (not the split's), with a mask of the real points, for the points and for each
    /// input function separately; θ is picked per sample; all survive the file.
    #[test]
    fn ragged_batches_are_padded_to_their_own_longest_sample() {
        let opts = (Kind::Double, Device::Cpu);
        let mut sp = Split::new(
            Tensor::arange(3 * 5, opts).reshape([3, 5, 1]),
            Tensor::ones([3, 5, 2], opts),
            Tensor::zeros([3, 5, 2], opts),
        );
        sp.lengths = Some(vec![5, 2, 3]);
        sp.theta = Some(Tensor::arange(6, opts).reshape([3, 2]));
        sp.functions.push(FunctionSplit {
            values: Tensor::ones([3, 4, 3], opts),
            lengths: Some(vec![1, 4, 2]),
        });
        sp.validate("ragged").unwrap();
        let b = sp.batch(&[2, 1], Device::Cpu, Kind::Float).unwrap();
        assert_eq!(b.fx.size(), vec![2, 3, 1]);
        assert_eq!(b.y.size(), vec![2, 3, 2]);
        let mask = Vec::<bool>::try_from(b.mask.unwrap().reshape([-1])).unwrap();
        assert_eq!(mask, [true, true, true, true, true, false]);
        assert_eq!(
            Vec::<f32>::try_from(b.theta.unwrap().reshape([-1])).unwrap(),
            [4., 5., 2., 3.]
        );
        let f = &b.functions[0];
        assert_eq!(f.values.size(), vec![2, 4, 3]);
        let fm = Vec::<bool>::try_from(f.mask.as_ref().unwrap().reshape([-1])).unwrap();
        assert_eq!(fm, [true, true, false, false, true, true, true, true]);
        // A batch of the longest sample alone has no padding and no mask.
        let one = sp.batch(&[0], Device::Cpu, Kind::Float).unwrap();
        assert!(one.mask.is_none() && one.fx.size() == [1, 5, 1]);

        let ds = TensorDataset {
            train: sp,
            test: Split {
                lengths: Some(vec![1]),
                theta: Some(Tensor::zeros([1, 2], opts)),
                functions: vec![FunctionSplit {
                    values: Tensor::ones([1, 2, 3], opts),
                    lengths: None,
                }],
                ..Split::new(
                    Tensor::ones([1, 2, 1], opts),
                    Tensor::ones([1, 2, 2], opts),
                    Tensor::zeros([1, 2, 2], opts),
                )
            },
            grid: None,
            query_grid: None,
            test_grid: None,
        };
        let path =
            std::env::temp_dir().join(format!("ono-ragged-{}.safetensors", std::process::id()));
        ds.write(&path).unwrap();
        let back = TensorDataset::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(back.train.lengths, Some(vec![5, 2, 3]));
        assert_eq!(back.train.functions[0].lengths, Some(vec![1, 4, 2]));
        assert!(back.test.functions[0].lengths.is_none());
        assert!(back
            .train
            .theta
            .unwrap()
            .equal(ds.train.theta.as_ref().unwrap()));

        // Lengths beyond the padded size, or an empty sample, are refused.
        let mut bad = Split::new(
            Tensor::ones([2, 3, 1], opts),
            Tensor::ones([2, 3, 1], opts),
            Tensor::zeros([2, 3, 1], opts),
        );
        bad.lengths = Some(vec![4, 1]);
        assert!(bad.validate("bad").is_err());
        bad.lengths = Some(vec![0, 1]);
        assert!(bad.validate("bad").is_err());
    }
}
