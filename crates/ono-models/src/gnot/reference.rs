//! The reference's `GNOT` and `CGPTNO` as the fixture cases describe them (`fixtures/gnot`): which
//! cases are ours, their configuration from the constructor's keyword arguments, and the forward
//! signature `model(g, u_p, inputs)` on the padded query coordinates.

use ono_kernels::host;
use serde_json::Value;
use tch::Tensor;

use super::{BlockOrder, Gnot, GnotConfig, GnotModel};
use crate::arch::FromReference;
use crate::operator::{InputFunction, ModelInput};
use crate::{Error, Result};
use ono_nn::weights::NamedTensors;

fn unsupported(what: String) -> Error {
    Error::Config(format!("gnot: the reference option {what} is not ported"))
}

/// `model(g, u_p, inputs)`: `x` (B, T, ·) the zero-padded query rows (coordinates first, as
/// `pad_sequence` builds them), `theta` (B, θ), `f0`, `f1`, … the padded input functions,
/// `num_nodes` (B) the real query counts. The output drops the padded rows and concatenates the
/// samples: (Σ_b num_nodes_b, out_dim). No mask is passed (the fixtures carry no input-function
/// lengths), so the padding is never masked: the reference's behaviour.
pub(super) fn forward(model: &Gnot, inputs: &NamedTensors, train: bool) -> Result<Tensor> {
    let get = |k: &str| {
        inputs
            .get(k)
            .ok_or_else(|| Error::Config(format!("the fixture has no input.{k}")))
    };
    let x = get("x")?;
    let s = x.size();
    let p = model.cfg.space_dim;
    let [b, t, width] = s[..] else {
        return Err(Error::Shape {
            op: "gnot reference forward",
            expected: "x (B, T, input_dim)".into(),
            got: s,
        });
    };
    let pos = x.f_narrow(-1, 0, p.min(width))?;
    let mut features = vec![x.f_narrow(-1, p.min(width), (width - p).max(0))?];
    if let Some(theta) = inputs.get("theta") {
        let th = theta.size().last().copied().unwrap_or(0);
        features.push(theta.f_unsqueeze(1)?.f_expand([b, t, th], false)?);
    }
    let fx = Tensor::f_cat(&features, -1)?;
    let functions: Vec<&Tensor> = (0..).map_while(|l| inputs.get(&format!("f{l}"))).collect();
    let functions: Vec<InputFunction<'_>> = functions
        .into_iter()
        .map(|values| InputFunction { values, mask: None })
        .collect();
    let counts = host::to_vec_i64(get("num_nodes")?)?;
    if counts.len() as i64 != b || counts.iter().any(|&n| n < 1 || n > t) {
        return Err(Error::Config(format!(
            "input.num_nodes {counts:?}: one count in 1..={t} per sample of {b}"
        )));
    }
    let input = ModelInput::new(&pos, &fx).with_functions(&functions);
    let out = model.forward(&input, train)?;
    let rows = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| out.f_select(0, i as i64)?.f_narrow(0, 0, n))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(Tensor::f_cat(&rows, 0)?)
}

impl FromReference for GnotConfig {
    /// Cases of family `gnot` whose class is `GNOT` or `CGPTNO`.
    fn claims_reference(json: &Value) -> bool {
        json["family"].as_str() == Some("gnot")
            && matches!(json["model_class"].as_str(), Some("GNOT" | "CGPTNO"))
    }

    /// The configuration `GNOT(**kwargs)` or `CGPTNO(**kwargs)` builds, with the classes' defaults
    /// for absent keys. `CGPTNO` takes no `space_dim` (it has no gate); the case's `data.space_dim`
    /// splits its `trunk_size` into coordinates and θ.
    fn from_reference(json: &Value) -> Result<Self> {
        let kw = &json["constructor_kwargs"];
        let model = match json["model_class"].as_str() {
            Some("GNOT") => GnotModel::Gnot,
            Some("CGPTNO") => GnotModel::Cgpt,
            other => return Err(unsupported(format!("model class {other:?}"))),
        };
        let int = |k: &str, default: Option<i64>| {
            kw[k]
                .as_i64()
                .or(default)
                .ok_or_else(|| Error::Config(format!("constructor_kwargs.{k} is missing")))
        };
        if !matches!(kw["attn_type"].as_str(), None | Some("linear")) {
            return Err(unsupported(format!("attn_type {}", kw["attn_type"])));
        }
        // The output MLP is always GELU (MLP's default), so only `gelu` is ported.
        if !matches!(kw["act"].as_str(), None | Some("gelu")) {
            return Err(unsupported(format!("act {}", kw["act"])));
        }
        if int("horiz_fourier_dim", Some(0))? != 0 {
            return Err(unsupported("horiz_fourier_dim > 0".into()));
        }
        let function_dims = match &kw["branch_sizes"] {
            Value::Null if model == GnotModel::Cgpt => Vec::new(),
            Value::Array(a) => a
                .iter()
                .map(Value::as_i64)
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| {
                    Error::Config("constructor_kwargs.branch_sizes: not integers".into())
                })?,
            other => {
                return Err(Error::Config(format!(
                    "constructor_kwargs.branch_sizes {other} (GNOT needs a list)"
                )))
            }
        };
        let space_dim = match model {
            GnotModel::Gnot => int("space_dim", Some(2))?,
            GnotModel::Cgpt => json["data"]["space_dim"]
                .as_i64()
                .ok_or_else(|| Error::Config("data.space_dim is missing".into()))?,
        };
        let (n_experts, n_inner) = match model {
            GnotModel::Gnot => (int("n_experts", Some(2))?, int("n_inner", Some(4))?),
            GnotModel::Cgpt => (1, 4),
        };
        let dropout = |k: &str| kw[k].as_f64().unwrap_or(0.0);
        Ok(GnotConfig {
            model,
            space_dim,
            fun_dim: int("trunk_size", None)? - space_dim,
            out_dim: int("output_size", Some(3))?,
            function_dims,
            n_hidden: int("n_hidden", Some(64))?,
            n_layers: int("n_layers", Some(2))? as usize,
            n_head: int("n_head", Some(1))?,
            n_experts,
            n_inner,
            mlp_layers: int("mlp_layers", Some(2))? as usize,
            ffn_dropout: dropout("ffn_dropout"),
            attn_dropout: dropout("attn_dropout"),
            mask_padding: false,
            block_order: BlockOrder::CrossSelf,
        })
    }
}
