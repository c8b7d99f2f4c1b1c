//! What a run shows between epochs: an [`EpochObserver`] is told after every epoch, with the typed
//! data a figure needs, so that ono-train draws nothing itself. The `ono` binary's observer draws
//! `curves.png` and `panels.png` with ono-plot; a [`Trainer`] without an observer writes no figures.

use ono_kernels::host;
use tch::{Device, Kind, Tensor};

use crate::checkpoint::EpochRecord;
use crate::decoder::Decoder;
use crate::run_folder::RunFolder;
use crate::trainer::Trainer;
use crate::{Error, Result};

/// What an observer reports when it fails; the run stops with it as [`Error::Observer`].
pub type ObserverError = Box<dyn std::error::Error + Send + Sync>;

/// Someone watching a run (see the module documentation).
pub trait EpochObserver: Send {
    /// Called after every epoch, once its checkpoint and `metrics.jsonl` are written. An error
    /// stops the run as [`Error::Observer`]; the epoch's checkpoint is kept, so `resume`
    /// continues with the next epoch.
    fn epoch_finished(&mut self, epoch: &EpochView<'_>) -> std::result::Result<(), ObserverError>;
}

/// A finished epoch, as an [`EpochObserver`] sees it.
#[derive(Debug, Clone, Copy)]
pub struct EpochView<'a> {
    /// The run's folder, figures included ([`RunFolder::curves`], [`RunFolder::panels`]).
    pub folder: &'a RunFolder,
    /// Every epoch so far, the one just finished last (test errors only where evaluated).
    pub history: &'a [EpochRecord],
    /// The first `log.panels` test samples with the model's prediction after this epoch, when
    /// the data are one 2-D grid (no query points, no ragged samples, an input function at the
    /// points) and `log.panels > 0`; else `None`.
    pub fields: Option<&'a Fields>,
}

/// Test samples on a 2-D grid: what `panels.png` draws.
#[derive(Debug, Clone, PartialEq)]
pub struct Fields {
    /// Rows of the grid.
    pub height: usize,
    /// Columns of the grid.
    pub width: usize,
    /// The samples, in the order of the test split.
    pub samples: Vec<FieldSample>,
}

/// One sample of [`Fields`]: the first channel of each field (of a time series, its last time
/// step), raw values (normalizers undone), `height × width` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSample {
    /// The model input.
    pub input: Vec<f32>,
    /// The target.
    pub truth: Vec<f32>,
    /// The model's prediction.
    pub prediction: Vec<f32>,
}

impl Trainer {
    /// Tells the observer, if there is one, that `epoch` (0-based) finished.
    pub(crate) fn notify_observer(&mut self, epoch: u64) -> Result<()> {
        if self.observer.is_none() {
            return Ok(());
        }
        let fields = self.fields()?;
        let Some(observer) = self.observer.as_mut() else {
            return Ok(());
        };
        let view = EpochView {
            folder: &self.folder,
            history: &self.state.history,
            fields: fields.as_ref(),
        };
        observer
            .epoch_finished(&view)
            .map_err(|source| Error::Observer { epoch, source })
    }

    /// [`EpochView::fields`]: input, truth and prediction of the first `log.panels` test samples
    /// as host arrays (one counted read each, [`ono_kernels::host`]).
    fn fields(&self) -> Result<Option<Fields>> {
        // Input, truth and prediction on one grid: not for query points, ragged samples, or
        // data without an input function at the points.
        // Nor with split points: this process holds a share of each sample.
        let one_grid = self.test.query.is_none()
            && self.test.lengths.is_none()
            && self.test.fx.size()[2] > 0
            && self.point_norms.is_none();
        let (h, w) = match self.test_grid.as_deref() {
            Some(&[h, w]) if one_grid && self.cfg.log.panels > 0 && h > 0 && w > 0 => (h, w),
            _ => return Ok(None),
        };
        let k = (self.cfg.log.panels as i64).min(self.test.len());
        if k == 0 {
            return Ok(None);
        }
        let idx: Vec<i64> = (0..k).collect();
        let batch = self.test.batch(&idx, self.device, self.kind)?;
        let pred = {
            let _g = tch::no_grad_guard();
            let d = Decoder {
                model: &self.model,
                y_norm: &self.test_normalizers.y,
                grid: self.test_grid.as_deref(),
            };
            self.regime
                .ops()
                .predict(d, &crate::decoder::Points::of(&batch), self.test_steps)?
        };
        // First channel (and last time step) of each field, raw input values.
        let last = |t: &Tensor| -> Result<Tensor> {
            let t = if t.dim() == 4 {
                t.f_select(3, t.size()[3] - 1)?
            } else {
                t.shallow_clone()
            };
            Ok(t.f_select(2, 0)?
                .f_to_kind(Kind::Float)?
                .f_to_device(Device::Cpu)?
                .f_contiguous()?)
        };
        let input = self
            .test_normalizers
            .x
            .decode(&batch.fx)?
            .f_select(2, 0)?
            .f_to_kind(Kind::Float)?
            .f_to_device(Device::Cpu)?;
        let (input, truth, pred) = (
            host::to_vec_f32(&input)?,
            host::to_vec_f32(&last(&batch.y)?)?,
            host::to_vec_f32(&last(&pred)?)?,
        );
        let n = (h * w) as usize;
        if [&input, &truth, &pred]
            .iter()
            .any(|v| v.len() != k as usize * n)
        {
            return Err(Error::Shape {
                op: "panels",
                expected: format!("{k} samples of {h}×{w} points"),
                got: [&input, &truth, &pred]
                    .iter()
                    .map(|v| v.len() as i64)
                    .collect(),
            });
        }
        let samples = input
            .chunks_exact(n)
            .zip(truth.chunks_exact(n))
            .zip(pred.chunks_exact(n))
            .map(|((input, truth), prediction)| FieldSample {
                input: input.to_vec(),
                truth: truth.to_vec(),
                prediction: prediction.to_vec(),
            })
            .collect();
        Ok(Some(Fields {
            height: h as usize,
            width: w as usize,
            samples,
        }))
    }
}
