//! Configuration of Cao's Galerkin / Fourier Transformer (`arch = "galerkin"`).

use serde::{Deserialize, Serialize};

use crate::{Error, Result};
pub use ono_nn::galerkin_attention::{AttentionDropout, GalerkinAttentionKind};
pub use ono_nn::interp_scaler::ScalerActivation;

/// Which model of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GalerkinModel {
    /// `SimpleTransformer`: feature lift, encoder on the points, spectral decoder on their grid.
    #[default]
    SimpleTransformer,
    /// `FourierTransformer2D`: interpolation-CNN downscaler from the fine grid to a coarse one,
    /// the encoder on the coarse grid, upscaler back, spectral decoder with the fine grid's
    /// coordinates (`spacial_fc`), optionally the Dirichlet ring.
    FourierTransformer2d,
}

/// The activation of the encoder's feed-forward network (`attn_activation`; ReLU when unset, as
/// in every configuration of the reference).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FfnActivation {
    #[default]
    Relu,
    Silu,
    /// The exact (erf) GELU of `nn.GELU()`.
    Gelu,
}

/// The settings of the reference's `SimpleTransformer` (feature lift, encoder, spectral decoder),
/// under the reference's `config.yml` names where there is one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GalerkinConfig {
    pub model: GalerkinModel,
    /// Coordinate channels p (from the data): `pos_dim`, concatenated in every attention head,
    /// and `spacial_dim`, the dimension of the decoder's FFTs (1 or 2).
    pub space_dim: i64,
    /// Channels of the input function (from the data): `node_feats`.
    pub fun_dim: i64,
    /// Output channels (from the data): `n_targets`.
    pub out_dim: i64,
    /// Model width d.
    pub n_hidden: i64,
    /// Attention heads H (d_k = d/H).
    pub n_head: i64,
    pub num_encoder_layers: usize,
    /// Hidden width of the encoder's feed-forward network.
    pub dim_feedforward: i64,
    pub attention_type: GalerkinAttentionKind,
    /// Gain η of the xavier_uniform init of W_Q, W_K, W_V (0: PyTorch's default init).
    pub xavier_init: f64,
    /// δ of the `+ δ·I` of W_Q, W_K, W_V.
    pub diagonal_weight: f64,
    /// eps of the per-head LayerNorms (`SimpleTransformer` never passes `norm_eps` on: 1e-5).
    pub norm_eps: f64,
    pub ffn_activation: FfnActivation,
    /// Channels of the spectral decoder (`freq_dim`).
    pub freq_dim: i64,
    /// Retained Fourier modes of the decoder, per axis (`fourier_modes`).
    pub fourier_modes: i64,
    /// Spectral layers of the decoder (`num_regressor_layers`).
    pub num_regressor_layers: usize,
    /// Dropout between the encoder and the decoder (`dropout`).
    pub dropout: f64,
    /// Dropout of the encoder's two residual branches and of the attention matrix
    /// (`encoder_dropout`).
    pub encoder_dropout: f64,
    /// Dropout inside the feed-forward network (`ffn_dropout`).
    pub ffn_dropout: f64,
    /// Dropout on the input of each spectral layer's FFT (`decoder_dropout`).
    pub decoder_dropout: f64,
    /// `training` (default): the attention matrix is dropped with `encoder_dropout` in training
    /// only. `reference`: the reference's defect, a Bernoulli(½) mask ×2 on every forward,
    /// evaluation included (docs/models.md).
    pub attention_dropout: AttentionDropout,
    /// `FourierTransformer2D`: the downscaler's two interpolation sizes, fine → middle → coarse
    /// (the explicit-size path of the reference, e.g. 141 → 78 → 43).
    pub downscaler_size: Option<[[i64; 2]; 2]>,
    /// `FourierTransformer2D`: the upscaler's two sizes, coarse → middle → fine (the fine grid).
    pub upscaler_size: Option<[[i64; 2]; 2]>,
    pub downscaler_activation: ScalerActivation,
    pub upscaler_activation: ScalerActivation,
    pub downscaler_dropout: f64,
    pub upscaler_dropout: f64,
    /// `boundary_condition = 'dirichlet'` of `FourierTransformer2D`: the outer ring of the output
    /// is set to 0.
    pub dirichlet: bool,
}

impl GalerkinConfig {
    pub(crate) fn check(&self, arch: &str) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{arch}: {msg}")));
        if self.space_dim < 1
            || (self.model == GalerkinModel::SimpleTransformer && self.space_dim > 2)
        {
            return bad(format!(
                "space_dim must be 1 or 2 (the spectral decoder's FFTs over the points' grid; \
                 fourier_transformer2d: any coordinate channels ≥ 1), got {}",
                self.space_dim
            ));
        }
        if self.fun_dim < 1 || self.out_dim < 1 {
            return bad(format!(
                "fun_dim {} and out_dim {} must be positive",
                self.fun_dim, self.out_dim
            ));
        }
        if self.n_hidden < 1 || self.n_head < 1 || self.n_hidden % self.n_head != 0 {
            return bad(format!(
                "n_hidden {} must be a positive multiple of n_head {}",
                self.n_hidden, self.n_head
            ));
        }
        if self.dim_feedforward < 1
            || self.freq_dim < 1
            || self.fourier_modes < 1
            || self.num_regressor_layers < 1
        {
            return bad(format!(
                "dim_feedforward {}, freq_dim {}, fourier_modes {} and num_regressor_layers {} \
                 must be positive",
                self.dim_feedforward, self.freq_dim, self.fourier_modes, self.num_regressor_layers
            ));
        }
        for (name, p) in [
            ("dropout", self.dropout),
            ("encoder_dropout", self.encoder_dropout),
            ("ffn_dropout", self.ffn_dropout),
            ("decoder_dropout", self.decoder_dropout),
            ("downscaler_dropout", self.downscaler_dropout),
            ("upscaler_dropout", self.upscaler_dropout),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} must lie in [0, 1], got {p}"));
            }
        }
        let finite = self.norm_eps.is_finite()
            && self.norm_eps > 0.0
            && self.xavier_init.is_finite()
            && self.xavier_init >= 0.0
            && self.diagonal_weight.is_finite();
        if !finite {
            return bad(format!(
                "norm_eps {} must be positive, xavier_init {} ≥ 0, diagonal_weight {} finite",
                self.norm_eps, self.xavier_init, self.diagonal_weight
            ));
        }
        if self.model == GalerkinModel::FourierTransformer2d {
            match (self.downscaler_size, self.upscaler_size) {
                (Some(down), Some(up)) if down.iter().chain(&up).flatten().all(|&s| s > 0) => {}
                (down, up) => {
                    return bad(format!(
                        "fourier_transformer2d needs positive downscaler_size and upscaler_size, \
                         got {down:?} and {up:?}"
                    ))
                }
            }
            if self.n_hidden < 3 {
                return bad("the downscaler splits n_hidden in three: at least 3".into());
            }
        }
        Ok(())
    }
}

impl GalerkinConfig {
    /// The dimension of the grid the decoder's FFTs run over: 2 for `FourierTransformer2D`
    /// (whatever the coordinate channels), else the coordinates' dimension.
    pub fn grid_dims(&self) -> usize {
        match self.model {
            GalerkinModel::FourierTransformer2d => 2,
            GalerkinModel::SimpleTransformer => self.space_dim.max(0) as usize,
        }
    }
}

impl Default for GalerkinConfig {
    /// The `burgers` preset.
    fn default() -> Self {
        super::presets::base()
    }
}
