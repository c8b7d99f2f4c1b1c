//! The reference scripts' `FNO{D}d` as fixture cases describe them (`fixtures/fno`,
//! `fixtures/geofno`): which cases are ours, their configuration, and their forward signature
//! `model(x)` with x: (B, n_1, …, n_D, C) channels last.

use serde_json::Value;
use tch::Tensor;

use super::{Fno, FnoConfig, FnoSettings};
use crate::arch::FromReference;
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::grid::index_grid;
use ono_nn::weights::NamedTensors;

fn last_dim(json: &Value, key: &str) -> Result<i64> {
    json["tensors"][key]["shape"]
        .as_array()
        .and_then(|s| s.last())
        .and_then(Value::as_i64)
        .ok_or_else(|| Error::Config(format!("the fixture lists no shape of {key}")))
}

/// `model(x)`: x (B, n_1, …, n_D, C) is the mesh coordinates with `pos_input`, else the input
/// function; the output is (B, N, out_dim) in the reference's row-major order.
pub(super) fn forward<const D: usize>(
    model: &Fno<D>,
    inputs: &NamedTensors,
    train: bool,
) -> Result<Tensor> {
    let x = inputs
        .get("x")
        .ok_or_else(|| Error::Config("the fixture has no input.x".into()))?;
    let size = x.size();
    if size.len() != D + 2 {
        return Err(Error::Shape {
            op: "FNO reference forward",
            expected: format!("x (B, n_1, …, n_{D}, C)"),
            got: size,
        });
    }
    let shape = &size[1..=D];
    let (b, n, c) = (size[0], shape.iter().product::<i64>(), size[D + 1]);
    let x = x.f_reshape([b, n, c])?;
    let grid = index_grid(shape, x.kind(), x.device())?
        .f_unsqueeze(0)?
        .f_expand([b, n, D as i64], false)?;
    let input = if model.config().pos_input {
        ModelInput::positions(&x)
    } else {
        ModelInput::new(&grid, &x)
    };
    NeuralOperator::forward(model, &input.with_grid(Some(shape)), train)
}

impl<const D: usize> FromReference for FnoConfig<D> {
    /// The original FNO scripts (family `fno`) and Geo-FNO's structured-mesh scripts (family
    /// `geofno`) whose model class is `FNO{D}d`.
    fn claims_reference(json: &Value) -> bool {
        matches!(json["family"].as_str(), Some("fno" | "geofno"))
            && json["model_class"].as_str() == Some(&format!("FNO{D}d"))
    }

    /// The constructor arguments (`modes` or `modes1..modes{D}`, `width`) and the constants of the
    /// script the family and class name: padding, input channels, unused BatchNorms.
    fn from_reference(json: &Value) -> Result<Self> {
        let kw = &json["constructor_kwargs"];
        let get = |k: &str| {
            kw[k]
                .as_i64()
                .ok_or_else(|| Error::Config(format!("constructor_kwargs.{k} is missing")))
        };
        let modes = if D == 1 {
            vec![get("modes")?]
        } else {
            (1..=D)
                .map(|j| get(&format!("modes{j}")))
                .collect::<Result<Vec<_>>>()?
        };
        let geo = json["family"].as_str() == Some("geofno");
        let padding = match (geo, D) {
            (false, 1) => vec![0],
            (false, 2) => vec![9, 9],
            (false, _) => vec![0, 0, 6],
            (true, 2) => vec![8, 8],
            (true, _) => vec![5, 5, 5],
        };
        let channels = last_dim(json, "input.x")?;
        // Geo-FNO's 2-D scripts feed the mesh coordinates; its plasticity script the die profile.
        let pos_input = geo && D == 2;
        Ok(FnoConfig(FnoSettings {
            space_dim: if pos_input { channels } else { D as i64 },
            fun_dim: if pos_input { 0 } else { channels },
            out_dim: last_dim(json, "output.eval")?,
            modes,
            width: get("width")?,
            n_layers: 4,
            padding,
            pos_input,
            proj_hidden: 128,
            unused_batchnorms: json.get("buffers").is_some(),
        }))
    }
}
