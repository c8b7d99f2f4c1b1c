//! The figures a run draws after every epoch: training curves, and input / truth / prediction
//! panels of a few test samples when the points are a 2-D grid (and the targets on them).

use ono_kernels::host;
use tch::{Device, Kind, Tensor};

use crate::decoder::Decoder;
use crate::trainer::Trainer;
use crate::{plots, Result};

impl Trainer {
    /// `curves.png` and, on 2-D grids, `panels.png`.
    pub(crate) fn write_figures(&self) -> Result<()> {
        let h = &self.state.history;
        let train: Vec<(f64, f64)> = h
            .iter()
            .map(|r| ((r.epoch + 1) as f64, r.train_loss))
            .collect();
        let test: Vec<(f64, f64)> = h
            .iter()
            .filter_map(|r| r.test_rel_l2.map(|e| ((r.epoch + 1) as f64, e)))
            .collect();
        let mut series = vec![plots::Series {
            name: "train loss / sample".into(),
            points: train,
        }];
        if !test.is_empty() {
            series.push(plots::Series {
                name: "test relative L2".into(),
                points: test,
            });
        }
        plots::training_curves(&self.paths.curves, "training", "epoch", "error", &series)?;
        // The panels draw input, truth and prediction on one grid: not for query points, ragged
        // samples, or data without an input function at the points.
        let one_grid =
            self.test.query.is_none() && self.test.lengths.is_none() && self.test.fx.size()[2] > 0;
        if let (Some(g), true) = (&self.grid, self.cfg.log.panels > 0 && one_grid) {
            if g.len() == 2 {
                self.write_panels(g[0], g[1])?;
            }
        }
        Ok(())
    }

    fn write_panels(&self, h: i64, w: i64) -> Result<()> {
        let k = (self.cfg.log.panels as i64).min(self.test.len());
        let idx: Vec<i64> = (0..k).collect();
        let batch = self.test.batch(&idx, self.device, self.kind)?;
        let pred = {
            let _g = tch::no_grad_guard();
            let d = Decoder {
                model: &self.model,
                y_norm: &self.normalizers.y,
                grid: self.grid.as_deref(),
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
            .normalizers
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
        let panels: Vec<plots::Panel<'_>> = (0..k as usize)
            .map(|i| plots::Panel {
                input: &input[i * n..(i + 1) * n],
                truth: &truth[i * n..(i + 1) * n],
                prediction: &pred[i * n..(i + 1) * n],
            })
            .collect();
        plots::field_panels(&self.paths.panels, h as usize, w as usize, &panels)
    }
}
