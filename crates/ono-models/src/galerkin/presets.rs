//! The reference's configurations (`config.yml` @ f9e7d6a with the example scripts' argparse
//! overrides). Parameter counts are checked against `fixtures/galerkin/reference_param_counts.json`
//! by the tests.

use super::config::{AttentionDropout, FfnActivation, GalerkinAttentionKind, GalerkinConfig};
use crate::arch::normalize_preset_name;
use crate::{Error, Result};

/// The preset names.
pub const NAMES: [&str; 2] = ["burgers", "burgers_fourier"];

/// `ex1_burgers` with Galerkin attention: d = 96, H = 1, 4 layers, d_ff 192, freq_dim 48, 16
/// modes, every dropout 0 (530,305 parameters). η = 0.01: `ex1_burgers.py`'s `--xavier-init`
/// default, which overrides the config file's 1e-3 (the README's Galerkin commands pass 0.01).
pub(crate) fn base() -> GalerkinConfig {
    GalerkinConfig {
        space_dim: 1,
        fun_dim: 1,
        out_dim: 1,
        n_hidden: 96,
        n_head: 1,
        num_encoder_layers: 4,
        dim_feedforward: 192,
        attention_type: GalerkinAttentionKind::Galerkin,
        xavier_init: 0.01,
        diagonal_weight: 0.01,
        norm_eps: 1e-5,
        ffn_activation: FfnActivation::Relu,
        freq_dim: 48,
        fourier_modes: 16,
        num_regressor_layers: 2,
        dropout: 0.0,
        encoder_dropout: 0.0,
        ffn_dropout: 0.0,
        decoder_dropout: 0.0,
        attention_dropout: AttentionDropout::Training,
    }
}

/// A preset by name (case-insensitive).
pub(crate) fn by_name(name: &str) -> Result<GalerkinConfig> {
    match normalize_preset_name(name).as_str() {
        "burgers" => Ok(base()),
        // config.yml's own attention for ex1; the README's Fourier commands pass
        // --xavier-init 0.001.
        "burgers_fourier" => Ok(GalerkinConfig {
            attention_type: GalerkinAttentionKind::Fourier,
            xavier_init: 1e-3,
            ..base()
        }),
        _ => Err(Error::Config(format!(
            "unknown galerkin preset {name:?}; known: {}",
            NAMES.join(", ")
        ))),
    }
}
