//! Evaluation: mean relative L2 of a model on a split, in evaluation mode, batch by batch, with
//! one host read at the end.

use ono_data::dataset::Split;
use ono_data::normalizer::Normalizer;
use ono_models::Model;
use tch::{Device, Kind};

use crate::decoder::Decoder;
use crate::loss::{MetricSum, RolloutErrors};
use crate::regime::Regime;
use crate::Result;

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
    let _g = tch::no_grad_guard();
    let ops = regime.ops();
    let d = Decoder {
        model,
        y_norm,
        grid,
    };
    let mut sum = MetricSum::new();
    let idx: Vec<i64> = (0..split.len()).collect();
    for chunk in idx.chunks(batch_size.max(1) as usize) {
        let batch = split.batch(chunk, model.device(), model.kind())?;
        let pred = ops.predict(d, &batch.pos, &batch.fx, batch.query.as_ref(), time_steps)?;
        ops.score(&mut sum, &pred, &batch.y)?;
    }
    sum.finish()
}

/// A split with its inputs normalized, on `device` in `kind`, ready for [`evaluate`].
pub fn normalized(split: &Split, x_norm: &Normalizer, device: Device, kind: Kind) -> Result<Split> {
    let on_device =
        |t: &tch::Tensor| -> Result<tch::Tensor> { Ok(t.f_to_device(device)?.f_to_kind(kind)?) };
    Ok(Split {
        fx: x_norm
            .encode(&split.fx)?
            .f_to_device(device)?
            .f_to_kind(kind)?,
        y: split.y.f_to_device(device)?.f_to_kind(kind)?,
        pos: split.pos.f_to_device(device)?.f_to_kind(kind)?,
        query: split.query.as_ref().map(&on_device).transpose()?,
        aux: split.aux.as_ref().map(&on_device).transpose()?,
    })
}
