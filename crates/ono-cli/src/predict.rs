//! `ono predict`: a checkpoint's predictions for the inputs of a safetensors file.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use ono_train::{Predictor, Regime};
use tch::{Device, Kind, Tensor};

use crate::device;

/// Reads `fx` (S, N, Cf), `pos` (1 or S, N, d) and optionally `grid`, `query` (1 or S, M, d,
/// the output points of a model trained with query points) and `query_grid` from `input`,
/// writes `pred` to `output`. Samples of different sizes (`lengths` (S,), rows beyond them
/// padding), global parameters `theta` (S, n_θ) and input functions on their own points (`f0`,
/// `f1`, … (S, L_j, c_j) with optional `f0.lengths`, …) are predicted `batch` samples per pass,
/// as the model was trained (an unmasked GNOT depends on its batches).
pub fn run(
    checkpoint: PathBuf,
    input: PathBuf,
    output: PathBuf,
    steps: i64,
    batch: i64,
    dev: &str,
) -> Result<()> {
    let dev = device(dev)?;
    let (p, _) = Predictor::from_checkpoint(&checkpoint, dev)?;
    let named: HashMap<String, Tensor> = Tensor::read_safetensors(&input)
        .with_context(|| format!("{}: not a readable safetensors file", input.display()))?
        .into_iter()
        .collect();
    let get = |k: &str| {
        named
            .get(k)
            .with_context(|| format!("{}: no array `{k}`", input.display()))
            .and_then(|t| Ok(t.f_to_device(dev)?.f_to_kind(p.kind())?))
    };
    let fx = get("fx")?;
    // Samples of different sizes, θ or input functions on their own points (GNOT's data).
    let ragged = ["lengths", "theta", "f0"]
        .iter()
        .any(|k| named.contains_key(*k));
    if ragged {
        let sizes = |k: &str| -> Result<Option<Vec<i64>>> {
            named
                .get(k)
                .map(|t| {
                    Vec::<i64>::try_from(t.f_to_kind(Kind::Int64)?.f_reshape([-1])?).with_context(
                        || format!("{}: `{k}` is not a list of lengths", input.display()),
                    )
                })
                .transpose()
        };
        let s = fx.size();
        anyhow::ensure!(
            s.len() == 3,
            "{}: fx must be (S, N, C), got {s:?}",
            input.display()
        );
        let mut split = ono_data::dataset::Split::new(
            fx.shallow_clone(),
            Tensor::zeros([s[0], s[1], 1], (p.kind(), Device::Cpu)),
            get("pos")?,
        );
        split.lengths = sizes("lengths")?;
        split.theta = named.get("theta").map(|_| get("theta")).transpose()?;
        for j in 0.. {
            let k = format!("f{j}");
            if !named.contains_key(&k) {
                break;
            }
            split.functions.push(ono_data::dataset::FunctionSplit {
                values: get(&k)?,
                lengths: sizes(&format!("{k}.lengths"))?,
            });
        }
        split
            .validate("input")
            .with_context(|| format!("{}: not a valid set of samples", input.display()))?;
        let pred = p.predict_samples(&split, batch)?;
        return write_pred(&output, &pred);
    }
    let mut pos = get("pos")?;
    if pos.dim() == 3 && pos.size()[0] == 1 && fx.dim() == 3 {
        pos = pos.expand([fx.size()[0], -1, -1], false);
    }
    let shape = |k: &str| -> Result<Option<Vec<i64>>> {
        named
            .get(k)
            .map(|g| {
                Vec::<i64>::try_from(g.f_to_kind(Kind::Int64)?.f_reshape([-1])?)
                    .with_context(|| format!("{}: `{k}` is not a list of sizes", input.display()))
            })
            .transpose()
    };
    let points = |t: &Option<Vec<i64>>, n: i64| {
        t.clone()
            .filter(|g| fx.dim() == 3 && g.iter().product::<i64>() == n)
    };
    // The inputs' grid: given in the file, else the training grid when the point counts agree.
    let grid = match shape("grid")? {
        Some(g) => Some(g),
        None => points(&p.grid, fx.size().get(1).copied().unwrap_or(0)),
    };
    let query = match named.get("query") {
        Some(_) => {
            let mut q = get("query")?;
            if q.dim() == 3 && q.size()[0] == 1 && fx.dim() == 3 {
                q = q.expand([fx.size()[0], -1, -1], false);
            }
            Some(q)
        }
        None => None,
    };
    let query_grid = match (&query, shape("query_grid")?) {
        (Some(_), Some(g)) => Some(g),
        (Some(q), None) => points(&p.query_grid, q.size().get(1).copied().unwrap_or(0)),
        (None, _) => None,
    };
    let steps = if p.regime == Regime::Steady { 0 } else { steps };
    let pred = p.predict(
        &pos,
        &fx,
        steps,
        grid.as_deref(),
        query.as_ref().map(|q| (q, query_grid.as_deref())),
    )?;
    write_pred(&output, &pred)
}

/// Writes `pred` to `output` (safetensors, atomically).
fn write_pred(output: &std::path::Path, pred: &Tensor) -> Result<()> {
    ono_data::dataset::write_tensors_atomic(
        output,
        &[(
            "pred".to_string(),
            pred.f_to_device(Device::Cpu)?.f_contiguous()?,
        )],
    )?;
    eprintln!("wrote pred {:?} to {}", pred.size(), output.display());
    Ok(())
}
