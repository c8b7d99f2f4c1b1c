//! The reference's `SimpleTransformer` and `FourierTransformer2D` as the fixture cases describe
//! them (`fixtures/galerkin`): which cases are ours, their configuration from the constructor's
//! keyword arguments, and the forward signature `model(node, edge, pos, grid)['preds']`.

use serde_json::Value;
use tch::Tensor;

use super::config::{
    AttentionDropout, GalerkinDecoder, GalerkinModel, RegressorActivation, ScalerActivation,
};
use super::{FfnActivation, GalerkinAttentionKind, GalerkinConfig, GalerkinTransformer};
use crate::arch::FromReference;
use crate::operator::{ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::weights::NamedTensors;

/// An explicit interpolation size pair `((h, w), (h, w))`; scale factors are refused.
fn sizes(kw: &Value, key: &str) -> Result<[[i64; 2]; 2]> {
    let pair = |v: &Value| -> Option<[i64; 2]> {
        let a = v.as_array()?;
        match a[..] {
            [ref h, ref w] => Some([h.as_i64()?, w.as_i64()?]),
            _ => None,
        }
    };
    kw[key]
        .as_array()
        .and_then(|a| match a[..] {
            [ref x, ref y] => Some([pair(x)?, pair(y)?]),
            _ => None,
        })
        .ok_or_else(|| {
            unsupported(format!(
                "{key} {} (explicit integer sizes only, not scale factors)",
                kw[key]
            ))
        })
}

fn activation(kw: &Value, key: &str) -> Result<ScalerActivation> {
    match kw[key].as_str() {
        None | Some("silu") => Ok(ScalerActivation::Silu),
        Some("relu") => Ok(ScalerActivation::Relu),
        Some(other) => Err(unsupported(format!("{key} {other:?}"))),
    }
}

fn unsupported(what: String) -> Error {
    Error::Config(format!(
        "galerkin: the reference option {what} is not ported"
    ))
}

/// `model(node, None, pos, grid)['preds']`. 1-D: node (B, n, node_feats), pos (B, n, pos_dim).
/// 2-D: node (B, n_f, n_f, node_feats), pos (B, n_c², 2) the coarse grid, grid (B, o, o, 2) the
/// output grid (the fine grid, or the coarse one in the inverse problem), and the y-normaliser
/// (`normalizer_y.mean`, `.std`, (o, o, 1)) the reference applies inside the model,
/// x·(std + 1e-5) + mean, before the boundary condition.
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
    if model.config().model == GalerkinModel::SimpleTransformer {
        return NeuralOperator::forward(model, &ModelInput::new(pos, node), train);
    }
    let out = model.forward_2d(node, pos, get("grid")?, train)?;
    let (mean, std) = (get("normalizer_y.mean")?, get("normalizer_y.std")?);
    let out = out.f_mul(&std.f_add_scalar(1e-5)?)?.f_add(mean)?;
    model.boundary(&out)
}

impl FromReference for GalerkinConfig {
    /// Cases of family `galerkin` whose class is `SimpleTransformer` or `FourierTransformer2D`.
    fn claims_reference(json: &Value) -> bool {
        json["family"].as_str() == Some("galerkin")
            && matches!(
                json["model_class"].as_str(),
                Some("SimpleTransformer" | "FourierTransformer2D")
            )
    }

    /// The configuration `SimpleTransformer(**kwargs)` builds, with the reference's defaults for
    /// absent keys (`default(...)` in `model.py` and `layers.py`). Options this port does not have
    /// (graph feature extractors, post-LayerNorms, the pointwise decoder of `SimpleTransformer`, …)
    /// are errors.
    fn from_reference(json: &Value) -> Result<Self> {
        let kw = &json["constructor_kwargs"];
        let base = GalerkinConfig::default();
        let two_d = json["model_class"].as_str() == Some("FourierTransformer2D");
        let int = |k: &str| {
            kw[k]
                .as_i64()
                .ok_or_else(|| Error::Config(format!("constructor_kwargs.{k} is missing")))
        };
        let opt_f = |k: &str, default: f64| kw[k].as_f64().unwrap_or(default);
        let text = |k: &str| kw[k].as_str();
        let decoder = supported_decoder(kw, two_d)?;
        // SpectralRegressor: default(activation, 'silu'), and SiLU is all this port has for it.
        // PointwiseRegressor: `SiLU() if activation == 'silu' else ReLU()` with no default, so an
        // unset regressor_activation is ReLU there.
        let regressor_activation = match (decoder, text("regressor_activation")) {
            (_, Some("silu")) | (GalerkinDecoder::Spectral, None) => RegressorActivation::Silu,
            (GalerkinDecoder::Pointwise, _) => RegressorActivation::Relu,
            (GalerkinDecoder::Spectral, Some(_)) => {
                return Err(unsupported(
                    "regressor_activation other than SiLU for the spectral decoder".into(),
                ))
            }
        };
        let attention_type = text("attention_type")
            .and_then(GalerkinAttentionKind::from_reference)
            .ok_or_else(|| unsupported(format!("attention_type {:?}", kw["attention_type"])))?;
        let ffn_activation = match text("attn_activation") {
            None | Some("relu") => FfnActivation::Relu,
            Some("silu") => FfnActivation::Silu,
            Some("gelu") => FfnActivation::Gelu,
            Some(other) => return Err(unsupported(format!("attn_activation {other:?}"))),
        };
        // SimpleTransformerEncoderLayer: attn_norm = default(attn_norm, not layer_norm), and on
        // when both are off.
        let layer_norm = kw["layer_norm"].as_bool().unwrap_or(false);
        let attn_norm = kw["attn_norm"].as_bool().unwrap_or(!layer_norm) || !layer_norm;
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
        let boundary = text("boundary_condition");
        if !matches!(boundary, None | Some("dirichlet" | "free")) {
            return Err(unsupported(format!("boundary_condition {boundary:?}")));
        }
        let (downscaler_size, upscaler_size) = if two_d {
            (
                Some(sizes(kw, "downscaler_size")?),
                Some(sizes(kw, "upscaler_size")?),
            )
        } else {
            (None, None)
        };
        Ok(GalerkinConfig {
            model: if two_d {
                GalerkinModel::FourierTransformer2d
            } else {
                GalerkinModel::SimpleTransformer
            },
            space_dim: pos_dim,
            fun_dim: int("node_feats")?,
            out_dim: int("n_targets")?,
            n_hidden,
            n_head: int("n_head")?,
            num_encoder_layers: int("num_encoder_layers")? as usize,
            dim_feedforward: kw["dim_feedforward"].as_i64().unwrap_or(2 * n_hidden),
            attention_type,
            layer_norm,
            attn_norm,
            xavier_init: kw["xavier_init"]
                .as_f64()
                .ok_or_else(|| Error::Config("constructor_kwargs.xavier_init is missing".into()))?,
            diagonal_weight: opt_f("diagonal_weight", 1e-2),
            // SimpleTransformer does not pass norm_eps to its layers; FourierTransformer2D does.
            norm_eps: if two_d { opt_f("norm_eps", 1e-5) } else { 1e-5 },
            ffn_activation,
            decoder,
            regressor_activation,
            // The pointwise decoder reads neither (ex3 sets neither); the defaults stand in.
            freq_dim: match decoder {
                GalerkinDecoder::Spectral => int("freq_dim")?,
                GalerkinDecoder::Pointwise => kw["freq_dim"].as_i64().unwrap_or(base.freq_dim),
            },
            fourier_modes: match decoder {
                GalerkinDecoder::Spectral => int("fourier_modes")?,
                GalerkinDecoder::Pointwise => {
                    kw["fourier_modes"].as_i64().unwrap_or(base.fourier_modes)
                }
            },
            num_regressor_layers: kw["num_regressor_layers"].as_i64().unwrap_or(2) as usize,
            dropout: opt_f("dropout", 0.05),
            encoder_dropout,
            ffn_dropout: opt_f("ffn_dropout", encoder_dropout),
            decoder_dropout: opt_f("decoder_dropout", 0.1),
            // The fixtures are made with the defective call removed (their README).
            attention_dropout: AttentionDropout::Training,
            scaler_grids: None,
            downscaler_size,
            upscaler_size,
            downscaler_activation: activation(kw, "downscaler_activation")?,
            upscaler_activation: activation(kw, "upscaler_activation")?,
            downscaler_dropout: opt_f("downscaler_dropout", 0.1),
            upscaler_dropout: opt_f("upscaler_dropout", 0.1),
            dirichlet: boundary == Some("dirichlet"),
        })
    }
}

/// The decoder the reference's kwargs `kw` ask for, after refusing every option this port does
/// not have (each with one supported value, named in the error).
fn supported_decoder(kw: &Value, two_d: bool) -> Result<GalerkinDecoder> {
    let flag = |k: &str| kw[k].as_bool().unwrap_or(false);
    let text = |k: &str| kw[k].as_str();
    // Options with one supported value.
    if kw["num_feat_layers"].as_i64().unwrap_or(0) > 0 {
        return Err(unsupported(
            "num_feat_layers > 0 (GCN/GAT feature extractors)".into(),
        ));
    }
    for k in [
        "batch_norm",
        "spacial_residual",
        "symmetric_init",
        "bulk_regression",
        "return_latent",
    ] {
        if flag(k) {
            return Err(unsupported(format!("{k} = true")));
        }
    }
    // SimpleTransformer's decoder without the coordinates, FourierTransformer2D's with them.
    if flag("spacial_fc") != two_d {
        return Err(unsupported(format!("spacial_fc = {}", flag("spacial_fc"))));
    }
    let decoder = match (text("decoder_type"), two_d) {
        (Some("ifft"), false) | (Some("ifft2"), true) => GalerkinDecoder::Spectral,
        (Some("pointwise"), _) => GalerkinDecoder::Pointwise,
        (other, _) => return Err(unsupported(format!("decoder_type {other:?}"))),
    };
    if two_d {
        for k in ["downsample_mode", "upsample_mode"] {
            if text(k) != Some("interp") {
                return Err(unsupported(format!("{k} {:?}", kw[k])));
            }
        }
        if kw["last_activation"].as_bool() == Some(false) && decoder == GalerkinDecoder::Spectral {
            return Err(unsupported("last_activation = false".into()));
        }
    }
    if kw["n_freq_targets"].as_i64().unwrap_or(0) > 0 {
        return Err(unsupported("n_freq_targets > 0".into()));
    }
    if !matches!(text("residual_type"), None | Some("add" | "plus")) {
        return Err(unsupported("residual_type minus".into()));
    }
    if !matches!(text("norm_type"), None | Some("layer")) {
        return Err(unsupported("norm_type instance".into()));
    }
    Ok(decoder)
}
