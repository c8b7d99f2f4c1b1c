//! The reference's `SimpleTransformer` as the fixture cases describe it (`fixtures/galerkin`):
//! which cases are ours, their configuration from the constructor's keyword arguments, and the
//! forward signature `model(node, edge, pos, grid)['preds']`.

use serde_json::Value;
use tch::Tensor;

use super::config::AttentionDropout;
use super::{FfnActivation, GalerkinAttentionKind, GalerkinConfig, GalerkinTransformer};
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::weights::NamedTensors;

/// Cases of family `galerkin` whose class is `SimpleTransformer`.
pub(super) fn claims(json: &Value) -> bool {
    json["family"].as_str() == Some("galerkin")
        && json["model_class"].as_str() == Some("SimpleTransformer")
}

fn unsupported(what: String) -> Error {
    Error::Config(format!(
        "galerkin: the reference option {what} is not ported"
    ))
}

/// The configuration `SimpleTransformer(**kwargs)` builds, with the reference's defaults for
/// absent keys (`default(...)` in `model.py` and `layers.py`). Options this port does not have
/// (graph feature extractors, post-LayerNorms, the pointwise decoder, …) are errors.
pub(super) fn config(json: &Value) -> Result<GalerkinConfig> {
    let kw = &json["constructor_kwargs"];
    let int = |k: &str| {
        kw[k]
            .as_i64()
            .ok_or_else(|| Error::Config(format!("constructor_kwargs.{k} is missing")))
    };
    let opt_f = |k: &str, default: f64| kw[k].as_f64().unwrap_or(default);
    let flag = |k: &str| kw[k].as_bool().unwrap_or(false);
    let text = |k: &str| kw[k].as_str();
    // Options with one supported value.
    if kw["num_feat_layers"].as_i64().unwrap_or(0) > 0 {
        return Err(unsupported(
            "num_feat_layers > 0 (GCN/GAT feature extractors)".into(),
        ));
    }
    for k in [
        "layer_norm",
        "batch_norm",
        "spacial_residual",
        "symmetric_init",
        "spacial_fc",
        "bulk_regression",
    ] {
        if flag(k) {
            return Err(unsupported(format!("{k} = true")));
        }
    }
    if kw["n_freq_targets"].as_i64().unwrap_or(0) > 0 {
        return Err(unsupported("n_freq_targets > 0".into()));
    }
    match text("decoder_type") {
        Some("ifft") => {}
        other => return Err(unsupported(format!("decoder_type {other:?}"))),
    }
    if !matches!(text("residual_type"), None | Some("add" | "plus")) {
        return Err(unsupported("residual_type minus".into()));
    }
    if !matches!(text("norm_type"), None | Some("layer")) {
        return Err(unsupported("norm_type instance".into()));
    }
    if !matches!(text("regressor_activation"), None | Some("silu")) {
        return Err(unsupported("regressor_activation other than SiLU".into()));
    }
    let attention_type = text("attention_type")
        .and_then(GalerkinAttentionKind::from_reference)
        .ok_or_else(|| unsupported(format!("attention_type {:?}", kw["attention_type"])))?;
    let ffn_activation = match text("attn_activation") {
        None | Some("relu") => FfnActivation::Relu,
        Some("silu") => FfnActivation::Silu,
        Some("gelu") => FfnActivation::Gelu,
        Some(other) => return Err(unsupported(format!("attn_activation {other:?}"))),
    };
    let pos_dim = int("pos_dim")?;
    if kw["spacial_dim"].as_i64().is_some_and(|s| s != pos_dim) {
        return Err(unsupported("spacial_dim different from pos_dim".into()));
    }
    let n_hidden = int("n_hidden")?;
    // SimpleTransformerEncoderLayer: dropout = default(encoder_dropout, 0.05), forced to 0.1 for
    // linear and softmax attention; ffn_dropout defaults to it.
    let encoder_dropout = match attention_type {
        GalerkinAttentionKind::Linear | GalerkinAttentionKind::Softmax => 0.1,
        _ => opt_f("encoder_dropout", 0.05),
    };
    Ok(GalerkinConfig {
        space_dim: pos_dim,
        fun_dim: int("node_feats")?,
        out_dim: int("n_targets")?,
        n_hidden,
        n_head: int("n_head")?,
        num_encoder_layers: int("num_encoder_layers")? as usize,
        dim_feedforward: kw["dim_feedforward"].as_i64().unwrap_or(2 * n_hidden),
        attention_type,
        xavier_init: kw["xavier_init"]
            .as_f64()
            .ok_or_else(|| Error::Config("constructor_kwargs.xavier_init is missing".into()))?,
        diagonal_weight: opt_f("diagonal_weight", 1e-2),
        // SimpleTransformer does not pass norm_eps to its layers.
        norm_eps: 1e-5,
        ffn_activation,
        freq_dim: int("freq_dim")?,
        fourier_modes: int("fourier_modes")?,
        num_regressor_layers: kw["num_regressor_layers"].as_i64().unwrap_or(2) as usize,
        dropout: opt_f("dropout", 0.05),
        encoder_dropout,
        ffn_dropout: opt_f("ffn_dropout", encoder_dropout),
        decoder_dropout: opt_f("decoder_dropout", 0.1),
        // The fixtures are made with the defective call removed (their README).
        attention_dropout: AttentionDropout::Training,
    })
}

/// `model(node, None, pos, None)['preds']`: node (B, n, node_feats), pos (B, n, pos_dim) in the
/// grid's row-major order.
pub(super) fn forward(
    model: &GalerkinTransformer,
    inputs: &NamedTensors,
    train: bool,
) -> Result<Tensor> {
    let get = |k: &str| {
        inputs
            .get(k)
            .ok_or_else(|| Error::Config(format!("the fixture has no input.{k}")))
    };
    let (node, pos) = (get("node")?, get("pos")?);
    NeuralOperator::forward(model, &ModelInput::new(pos, node), train)
}
