//! `ono predict`: a checkpoint's predictions for the inputs of a safetensors file.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result};
use ono_train::{Predictor, Regime};
use tch::{Device, Kind, Tensor};

use crate::device;

/// Reads `fx` (S, N, Cf), `pos` (1 or S, N, d) and optionally `grid` from `input`, writes `pred`
/// to `output`.
pub fn run(
    checkpoint: PathBuf,
    input: PathBuf,
    output: PathBuf,
    steps: i64,
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
    let mut pos = get("pos")?;
    if pos.dim() == 3 && pos.size()[0] == 1 && fx.dim() == 3 {
        pos = pos.expand([fx.size()[0], -1, -1], false);
    }
    // The inputs' grid: given in the file, else the training grid when the point counts agree.
    let grid: Option<Vec<i64>> = match named.get("grid") {
        Some(g) => Some(
            Vec::<i64>::try_from(g.f_to_kind(Kind::Int64)?.f_reshape([-1])?)
                .with_context(|| format!("{}: `grid` is not a list of sizes", input.display()))?,
        ),
        None => p
            .grid
            .clone()
            .filter(|g| fx.dim() == 3 && g.iter().product::<i64>() == fx.size()[1]),
    };
    let steps = if p.regime == Regime::Steady { 0 } else { steps };
    let pred = p.predict(&pos, &fx, steps, grid.as_deref())?;
    ono_data::dataset::write_tensors_atomic(
        &output,
        &[(
            "pred".to_string(),
            pred.f_to_device(Device::Cpu)?.f_contiguous()?,
        )],
    )?;
    eprintln!("wrote pred {:?} to {}", pred.size(), output.display());
    Ok(())
}
