//! The figures of a training run (`ono train`, and every run of `ono reproduce`): after each
//! epoch, `curves.png` (train loss and test relative L2 against epoch) and, when the trainer hands
//! over 2-D fields, `panels.png` (input, truth, prediction, error), drawn with ono-plot.

use ono_plot::{field_panels, training_curves, Panel, Series};
use ono_train::observer::{EpochObserver, EpochView, ObserverError};

/// The [`EpochObserver`] that draws a run's figures into its output folder.
pub struct RunFigures;

impl EpochObserver for RunFigures {
    fn epoch_finished(&mut self, epoch: &EpochView<'_>) -> Result<(), ObserverError> {
        let h = epoch.history;
        let train: Vec<(f64, f64)> = h
            .iter()
            .map(|r| ((r.epoch + 1) as f64, r.train_loss))
            .collect();
        let test: Vec<(f64, f64)> = h
            .iter()
            .filter_map(|r| r.test_rel_l2.map(|e| ((r.epoch + 1) as f64, e)))
            .collect();
        let mut series = vec![Series::new("train loss / sample", train)];
        if !test.is_empty() {
            series.push(Series::new("test relative L2", test));
        }
        training_curves(
            &epoch.folder.curves(),
            "training",
            "epoch",
            "error",
            &series,
        )?;
        if let Some(f) = epoch.fields {
            let panels: Vec<Panel<'_>> = f
                .samples
                .iter()
                .map(|s| Panel {
                    input: &s.input,
                    truth: &s.truth,
                    prediction: &s.prediction,
                })
                .collect();
            field_panels(&epoch.folder.panels(), f.height, f.width, &panels)?;
        }
        Ok(())
    }
}
