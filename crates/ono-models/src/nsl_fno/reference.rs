//! NSL's `models/FNO.py` as the fixture cases describe it (`fixtures/geofno`
//! `nsl_fno_irregular_small`): the `args` overrides, `s1`, `s2`, and `Model.forward(x, fx)`.

use serde_json::Value;
use tch::Tensor;

use super::{Geotype, NslFno, NslFnoConfig};
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::weights::NamedTensors;

/// NSL's `models.FNO.Model`, in any fixture family.
pub(super) fn claims(json: &Value) -> bool {
    json["model_class"]
        .as_str()
        .is_some_and(|c| c.starts_with("models.FNO.Model"))
}

/// The `args` object of the constructor arguments (its key describes it: `args (…)`).
fn args(json: &Value) -> Result<&Value> {
    json["constructor_kwargs"]
        .as_object()
        .and_then(|kw| kw.iter().find(|(k, _)| k.starts_with("args")))
        .map(|(_, v)| v)
        .ok_or_else(|| Error::Config("constructor_kwargs has no args".into()))
}

pub(super) fn config(json: &Value) -> Result<NslFnoConfig> {
    let a = args(json)?;
    let int = |v: &Value, k: &str| {
        v[k].as_i64()
            .ok_or_else(|| Error::Config(format!("the NSL args lack {k}")))
    };
    let flag = |k: &str| a[k].as_bool().or_else(|| a[k].as_i64().map(|v| v != 0));
    let geotype = match a["geotype"].as_str() {
        Some("unstructured") => Geotype::Unstructured,
        Some(g) if g.starts_with("structured") => Geotype::Structured,
        g => return Err(Error::Config(format!("NSL geotype {g:?}"))),
    };
    let shapelist = a["shapelist"].as_array().map(Vec::len).unwrap_or(2);
    let kw = &json["constructor_kwargs"];
    let base = NslFnoConfig::default();
    Ok(NslFnoConfig {
        space_dim: int(a, "space_dim")?,
        fun_dim: int(a, "fun_dim")?,
        out_dim: int(a, "out_dim")?,
        time_input: flag("time_input").unwrap_or(false),
        geotype,
        grid_dims: if geotype == Geotype::Structured {
            shapelist
        } else {
            2
        },
        latent: [
            kw["s1"].as_i64().unwrap_or(96),
            kw["s2"].as_i64().unwrap_or(96),
        ],
        n_hidden: int(a, "n_hidden")?,
        modes: int(a, "modes")?,
        unified_pos: flag("unified_pos").unwrap_or(false),
        reference: a["ref"].as_i64().unwrap_or(base.reference),
    })
}

/// `Model.forward(x, fx)`: x (B, N, space_dim), fx (B, N, fun_dim) or absent. Only point-cloud
/// cases exist for this model; a structured one would need `args.shapelist`, which the stored
/// inputs do not carry.
pub(super) fn forward(model: &NslFno, inputs: &NamedTensors, train: bool) -> Result<Tensor> {
    if model.config().geotype != Geotype::Unstructured {
        return Err(Error::Config(
            "nsl_fno: reference cases on structured grids are not supported (none exists)".into(),
        ));
    }
    let x = inputs
        .get("x")
        .ok_or_else(|| Error::Config("the fixture has no input.x".into()))?;
    let input = match inputs.get("fx") {
        Some(fx) => ModelInput::new(x, fx),
        None => ModelInput::positions(x),
    };
    let time: Option<&Tensor> = inputs.get("T").or_else(|| inputs.get("time"));
    NeuralOperator::forward(model, &input.with_time(time), train)
}
