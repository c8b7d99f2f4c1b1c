//! Evaluation: mean relative L2 of a model on a split, in evaluation mode, batch by batch, with
//! one host read at the end.

use ono_data::dataset::Split;
use ono_data::normalizer::Normalizer;
use ono_models::Model;
use tch::{Device, Kind};

use crate::decoder::{Decoder, Points};
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
        let pred = ops.predict(d, &Points::of(&batch), time_steps)?;
        ops.score(&mut sum, &pred, &batch.y, batch.mask.as_ref())?;
    }
    sum.finish()
}

/// The normalizers of a model's inputs: the input function, the positions (and query points)
/// and the global parameters.
pub struct InputNormalizers {
    pub x: Normalizer,
    pub pos: Normalizer,
    pub theta: Normalizer,
}

/// A split with its inputs normalized, on `device` in `kind`, ready for [`evaluate`]. The padding
/// rows of samples of different sizes stay zero (normalized per sample before padding, as GNOT's
/// pipeline).
pub fn normalized(
    split: &Split,
    norms: &InputNormalizers,
    device: Device,
    kind: Kind,
) -> Result<Split> {
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
