//! Configuration of Cao's Galerkin / Fourier Transformer (`arch = "galerkin"`).

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::scaler_sizes::{get_scaler_sizes, ScalerSizes};
use super::GalerkinTransformer;
use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};
pub use ono_nn::attention::simple_attention::{AttentionDropout, GalerkinAttentionKind};
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

/// The decoder after the encoder (the reference's `decoder_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GalerkinDecoder {
    /// `SpectralRegressor` (`ifft`, `ifft2`): spectral layers on the output grid, then
    /// Linear → SiLU → Linear.
    #[default]
    Spectral,
    /// `PointwiseRegressor` (`pointwise`): num_layers × (Linear → activation → dropout),
    /// Linear, every step per point. `fourier_transformer2d` (the inverse problem's) lifts
    /// [x, coordinates] by `regressor.fc` first and has `num_regressor_layers` hidden layers;
    /// `simple_transformer` has no `fc`, the reference's two hidden layers, and its
    /// xavier_uniform(0.01) re-initialisation. With it the point model runs on split points
    /// (`ono_kernels::points`).
    Pointwise,
}

/// The activation of the pointwise decoder (`regressor_activation`). The spectral decoder's is
/// SiLU, the only value this port has for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RegressorActivation {
    #[default]
    Silu,
    Relu,
}

/// Which grid the model's output lies on when the interpolation sizes come from
/// [`ScalerGrids`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputGrid {
    /// The input's fine grid (the forward problem): upscaler (n_m, n_m) → (n_f, n_f).
    #[default]
    Fine,
    /// The coarse grid of the attention (the inverse problem, ex3): the upscaler is a conv block
    /// at (n_c, n_c) only, and the output points are passed as the query.
    Coarse,
}

/// The interpolation sizes of `FourierTransformer2D` from the fine and the coarse grid's points
/// per axis, as the reference's example scripts derive them (`DarcyDataset.get_scaler_sizes`,
/// [`get_scaler_sizes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScalerGrids {
    /// n_f, the input grid's points per axis.
    pub fine: i64,
    /// n_c, the attention grid's points per axis.
    pub coarse: i64,
    #[serde(default)]
    pub output: OutputGrid,
    /// The reference's default scale-factor path (true): the downscaler interpolates by the
    /// factor f twice, ⌊n_f f⌋ then ⌊⌊n_f f⌋ f⌋, which must come out at n_c. False: ex2's
    /// `--no-scale-factor` sizes (n_m, n_c).
    #[serde(default = "yes")]
    pub scale_factor: bool,
}

fn yes() -> bool {
    true
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
    /// The paper's "regular" layer normalization (its eq. (7), the reference's `layer_norm`): a
    /// LayerNorm(d) after each residual of every encoder layer, `layer_norm{1,2}`.
    pub layer_norm: bool,
    /// The per-head LayerNorms inside the attention (on K and V, or Q and K: the paper's
    /// Galerkin-type normalization, its eq. (6); the reference's `attn_norm`, by default
    /// `not layer_norm`). At least one of the two is on, as the reference makes it.
    pub attn_norm: bool,
    /// Gain η of the xavier_uniform init of W_Q, W_K, W_V (0: PyTorch's default init).
    pub xavier_init: f64,
    /// δ of the `+ δ·I` of W_Q, W_K, W_V.
    pub diagonal_weight: f64,
    /// eps of the per-head LayerNorms (`SimpleTransformer` never passes `norm_eps` on: 1e-5).
    pub norm_eps: f64,
    pub ffn_activation: FfnActivation,
    /// `spectral` (default) or `pointwise` (`decoder_type`).
    pub decoder: GalerkinDecoder,
    /// The pointwise decoder's activation (`regressor_activation`).
    pub regressor_activation: RegressorActivation,
    /// Channels of the spectral decoder (`freq_dim`).
    pub freq_dim: i64,
    /// Retained Fourier modes of the decoder, per axis (`fourier_modes`).
    pub fourier_modes: i64,
    /// Spectral layers of the spectral decoder, hidden layers of the pointwise one
    /// (`num_regressor_layers`).
    pub num_regressor_layers: usize,
    /// Dropout between the encoder and the decoder (`dropout`).
    pub dropout: f64,
    /// Dropout of the encoder's two residual branches and of the attention matrix
    /// (`encoder_dropout`).
    pub encoder_dropout: f64,
    /// Dropout inside the feed-forward network (`ffn_dropout`).
    pub ffn_dropout: f64,
    /// Dropout on the input of each spectral layer's FFT, or after each hidden layer of the
    /// pointwise decoder (`decoder_dropout`).
    pub decoder_dropout: f64,
    /// `training` (default): the attention matrix is dropped with `encoder_dropout` in training
    /// only. `reference`: the reference's defect, a Bernoulli(½) mask ×2 on every forward,
    /// evaluation included (docs/models.md).
    pub attention_dropout: AttentionDropout,
    /// `FourierTransformer2D`: the interpolation sizes derived from the fine and the coarse grid
    /// (the reference scripts' way); or give both sizes below instead.
    pub scaler_grids: Option<ScalerGrids>,
    /// `FourierTransformer2D`: the downscaler's two interpolation sizes, fine → middle → coarse
    /// (the explicit-size path of the reference, e.g. 141 → 78 → 43).
    pub downscaler_size: Option<[[i64; 2]; 2]>,
    /// `FourierTransformer2D`: the upscaler's two sizes, coarse → middle → output grid (the fine
    /// grid in the forward problem, the coarse one in the inverse problem).
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
    /// The interpolation sizes of `FourierTransformer2D` (from [`ScalerGrids`] or the explicit
    /// sizes), or [`Error::Config`] naming the fix.
    pub fn scaler_sizes(&self) -> Result<ScalerSizes> {
        self.scaler_sizes_in("galerkin")
    }

    fn scaler_sizes_in(&self, arch: &str) -> Result<ScalerSizes> {
        let bad = |msg: String| Err(Error::Config(format!("{arch}: {msg}")));
        match (self.scaler_grids, self.downscaler_size, self.upscaler_size) {
            (Some(g), None, None) => {
                let sizes = get_scaler_sizes(g.fine, g.coarse, g.scale_factor)?;
                if sizes.down[1] != [g.coarse, g.coarse] {
                    return bad(format!(
                        "scaler_grids {g:?}: the scale-factor path interpolates by f = {:?} \
                         twice, {} → {} → {}, which misses the coarse grid {}; give explicit \
                         downscaler_size and upscaler_size (or scale_factor = false) instead",
                        sizes.factor.unwrap_or_default(),
                        g.fine,
                        sizes.down[0][0],
                        sizes.down[1][0],
                        g.coarse
                    ));
                }
                let up = match g.output {
                    OutputGrid::Fine => sizes.up,
                    OutputGrid::Coarse => [[g.coarse, g.coarse]; 2],
                };
                let sizes = ScalerSizes { up, ..sizes };
                if sizes.down.iter().chain(&sizes.up).flatten().any(|&s| s < 1) {
                    return bad(format!(
                        "scaler_grids {g:?} give the sizes {sizes:?}: too small a grid"
                    ));
                }
                Ok(sizes)
            }
            (Some(_), _, _) => bad(
                "give either scaler_grids or explicit downscaler_size and upscaler_size, not both \
                 (the darcy presets set scaler_grids: override scaler_grids, e.g. with \
                 scale_factor = false, or give the explicit sizes without a preset)"
                    .into(),
            ),
            (None, Some(down), Some(up)) if down.iter().chain(&up).flatten().all(|&s| s > 0) => {
                Ok(ScalerSizes {
                    factor: None,
                    down,
                    up,
                })
            }
            (None, down, up) => bad(format!(
                "fourier_transformer2d needs scaler_grids, or positive downscaler_size and \
                 upscaler_size; got {down:?} and {up:?}"
            )),
        }
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

impl ArchConfig for GalerkinConfig {
    const ARCH: &'static str = super::ARCH;

    fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{}: {msg}", Self::ARCH)));
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
        if !self.layer_norm && !self.attn_norm {
            return bad(
                "layer_norm and attn_norm are both false; the reference turns attn_norm on then \
                 (set attn_norm = true)"
                    .into(),
            );
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
        let two_d = self.model == GalerkinModel::FourierTransformer2d;
        // SimpleTransformer never passes num_regressor_layers to its PointwiseRegressor, whose
        // default is 2; any other value would be silently ignored by the reference.
        if self.decoder == GalerkinDecoder::Pointwise && !two_d && self.num_regressor_layers != 2 {
            return bad(format!(
                "num_regressor_layers {} with simple_transformer's pointwise decoder: the \
                 reference builds it with 2 hidden layers whatever num_regressor_layers says",
                self.num_regressor_layers
            ));
        }
        if self.decoder == GalerkinDecoder::Spectral
            && self.regressor_activation != RegressorActivation::Silu
        {
            return bad(format!(
                "regressor_activation {:?} is ported for the pointwise decoder only (the \
                 spectral layers' activation is SiLU)",
                self.regressor_activation
            ));
        }
        let explicit = self.downscaler_size.is_some() || self.upscaler_size.is_some();
        if !two_d {
            if explicit || self.scaler_grids.is_some() {
                return bad("scaler_grids, downscaler_size and upscaler_size belong to \
                     fourier_transformer2d; the simple_transformer has no scalers"
                    .into());
            }
            return Ok(());
        }
        if self.n_hidden < 3 {
            return bad("the downscaler splits n_hidden in three: at least 3".into());
        }
        let sizes = self.scaler_sizes()?;
        // The spectral decoder's rFFT2 runs over the output grid: m rows, m of the n/2 + 1
        // columns.
        let [o1, o2] = sizes.output_grid();
        let m = self.fourier_modes;
        if self.decoder == GalerkinDecoder::Spectral && (m > o1 || m > o2 / 2 + 1) {
            return bad(format!(
                "{m} Fourier modes do not fit the output grid [{o1}, {o2}] (upscaler_size[1]): the \
                 spectral decoder needs modes ≤ the first axis and ≤ half the second + 1"
            ));
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(GalerkinTransformer::new(path, self)?))
    }
}
