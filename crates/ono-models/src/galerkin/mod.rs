//! Cao's Galerkin / Fourier Transformer (scaomath/galerkin-transformer @ f9e7d6a, `libs/model.py`
//! `SimpleTransformer` and `FourierTransformer2D`, `libs/layers.py`): `arch = "galerkin"`, the
//! model chosen by [`GalerkinConfig::model`].
//!
//! ```text
//! SimpleTransformer:    fx → feat_extract.id → L × [x + Attn(x, pos); x + FFN(x)]
//!                          → (B, grid…, d) → spectral decoder
//! FourierTransformer2D: fx on the fine grid → downscaler → L × encoder layer on the coarse grid
//!                          → upscaler → [x, fine coordinates] → regressor.fc → spectral decoder
//!                          → Dirichlet ring (optional)
//! spectral decoder:     num_regressor_layers × SiLU(K_ortho(x) + Linear(x)) → Linear → SiLU → Linear
//! ```
//!
//! The attention is [`ono_nn::galerkin_attention`] (per-head LayerNorms, the coordinates in front
//! of every head, no softmax); the decoder's spectral layers are
//! [`ono_nn::residual_spectral_conv`] on the points' grid (1-D: the N points in order); the 2-D
//! scalers are [`ono_nn::interp_scaler`]. The reference's attention dropout is active in
//! evaluation; [`AttentionDropout`] chooses between that and training-only dropout (default).
//! Fixtures: `fixtures/galerkin` (`gt1d_small`, `ft1d_small`, `gt2d_small`).

mod config;
pub mod presets;
mod reference;

pub use config::{
    AttentionDropout, FfnActivation, GalerkinAttentionKind, GalerkinConfig, GalerkinModel,
    ScalerActivation,
};

use tch::nn::Path;
use tch::Tensor;

use crate::arch::{ArchConfig, DataDims};
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::conv::torch_linear;
use ono_nn::galerkin_attention::{GalerkinAttention, GalerkinAttentionConfig};
use ono_nn::interp_scaler::{InterpDownscaler, InterpUpscaler};
use ono_nn::mlp::gelu;
use ono_nn::residual_spectral_conv::{ResidualSpectralConv, ResidualSpectralConvConfig};
use ono_nn::Linear;

const ARCH: &str = "galerkin";

/// Dropout with probability `p` in training only.
fn dropout(x: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if train && p > 0.0 {
        Ok(x.f_dropout(p, true)?)
    } else {
        Ok(x.shallow_clone())
    }
}

/// `SimpleTransformerEncoderLayer` without post-LayerNorms (`layer_norm = False`, the attention's
/// own norms on): `encoder_layers.{i}.attn`, `encoder_layers.{i}.ff.lr1`, `.ff.lr2`.
#[derive(Debug)]
struct EncoderLayer {
    attn: GalerkinAttention,
    lr1: Linear,
    lr2: Linear,
}

impl EncoderLayer {
    fn new(path: &Path, cfg: &GalerkinConfig) -> Result<Self> {
        let attn = GalerkinAttentionConfig {
            dim: cfg.n_hidden,
            heads: cfg.n_head,
            pos_dim: cfg.space_dim,
            kind: cfg.attention_type,
            eps: cfg.norm_eps,
            xavier_init: cfg.xavier_init,
            diagonal_weight: cfg.diagonal_weight,
            dropout: cfg.encoder_dropout,
            dropout_mode: cfg.attention_dropout,
        }
        .init(&(path / "attn"))?;
        let ff = path / "ff";
        Ok(Self {
            attn,
            lr1: torch_linear(&(&ff / "lr1"), cfg.n_hidden, cfg.dim_feedforward, true),
            lr2: torch_linear(&(&ff / "lr2"), cfg.dim_feedforward, cfg.n_hidden, true),
        })
    }

    /// # Shapes
    /// - `x`: (B, N, d), `pos`: (B, N, p); returns (B, N, d)
    fn forward(
        &self,
        x: &Tensor,
        pos: &Tensor,
        cfg: &GalerkinConfig,
        train: bool,
    ) -> Result<Tensor> {
        let p = cfg.encoder_dropout;
        let x = x.f_add(&dropout(
            &self.attn.forward(x, Some(pos), train)?,
            p,
            train,
        )?)?;
        let h = self.lr1.forward(&x)?;
        let h = match cfg.ffn_activation {
            FfnActivation::Relu => h.f_relu()?,
            FfnActivation::Silu => h.f_silu()?,
            FfnActivation::Gelu => gelu(&h)?,
        };
        let h = self.lr2.forward(&dropout(&h, cfg.ffn_dropout, train)?)?;
        Ok(x.f_add(&dropout(&h, p, train)?)?)
    }
}

/// See the module documentation. Variables under the reference names: `feat_extract.id`
/// (`SimpleTransformer`) or `downscaler.downsample.conv{0..3}.conv.0` and
/// `upscaler.upsample.conv.0.conv.0` (`FourierTransformer2D`),
/// `encoder_layers.{i}.attn.{linears.{0,1,2}, norm_K.{h}, norm_V.{h} | norm_Q.{h}, fc}`,
/// `encoder_layers.{i}.ff.{lr1, lr2}`, `regressor.fc` (2-D model),
/// `regressor.spectral_conv.{j}.{linear, fourier_weight[.0, .1]}`, `regressor.regressor.{0, 2}`.
#[derive(Debug)]
pub struct GalerkinTransformer {
    cfg: GalerkinConfig,
    feat: Option<Linear>,
    down: Option<InterpDownscaler>,
    up: Option<InterpUpscaler>,
    layers: Vec<EncoderLayer>,
    fc: Option<Linear>,
    spectral: Vec<ResidualSpectralConv>,
    head0: Linear,
    head2: Linear,
}

impl GalerkinTransformer {
    /// Builds the layers in the reference's construction order, with its initialisation.
    pub fn new(path: &Path, cfg: &GalerkinConfig) -> Result<Self> {
        cfg.check(ARCH)?;
        let two_d = cfg.model == GalerkinModel::FourierTransformer2d;
        let (mut feat, mut down, mut up) = (None, None, None);
        if let (true, Some(down_size), Some(up_size)) =
            (two_d, cfg.downscaler_size, cfg.upscaler_size)
        {
            down = Some(InterpDownscaler::new(
                &(path / "downscaler" / "downsample"),
                cfg.fun_dim,
                cfg.n_hidden,
                down_size,
                cfg.downscaler_activation,
                cfg.downscaler_dropout,
            )?);
            up = Some(InterpUpscaler::new(
                &(path / "upscaler" / "upsample"),
                cfg.n_hidden,
                up_size,
                cfg.upscaler_activation,
                cfg.upscaler_dropout,
            )?);
        } else {
            feat = Some(torch_linear(
                &(path / "feat_extract" / "id"),
                cfg.fun_dim,
                cfg.n_hidden,
                true,
            ));
        }
        let layers = (0..cfg.num_encoder_layers)
            .map(|i| EncoderLayer::new(&(path / "encoder_layers" / i), cfg))
            .collect::<Result<Vec<_>>>()?;
        let reg = path / "regressor";
        // FourierTransformer2D's SpectralRegressor: spacial_fc (the fine grid's coordinates in,
        // to freq_dim channels) and the default dim_feedforward 2·spacial_dim·freq_dim;
        // SimpleTransformer's: no fc, dim_feedforward = freq_dim.
        let fc = two_d.then(|| {
            torch_linear(
                &(&reg / "fc"),
                cfg.n_hidden + cfg.space_dim,
                cfg.freq_dim,
                true,
            )
        });
        let first_in = if two_d { cfg.freq_dim } else { cfg.n_hidden };
        let modes = vec![cfg.fourier_modes; cfg.grid_dims()];
        let spectral = (0..cfg.num_regressor_layers)
            .map(|j| {
                ResidualSpectralConvConfig {
                    in_channels: if j == 0 { first_in } else { cfg.freq_dim },
                    out_channels: cfg.freq_dim,
                    modes: modes.clone(),
                    dropout: cfg.decoder_dropout,
                }
                .init(&(&reg / "spectral_conv" / j))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let hidden = if two_d {
            2 * cfg.grid_dims() as i64 * cfg.freq_dim
        } else {
            cfg.freq_dim
        };
        let head = &reg / "regressor";
        let head0 = torch_linear(&(&head / 0), cfg.freq_dim, hidden, true);
        let head2 = torch_linear(&(&head / 2), hidden, cfg.out_dim, true);
        Ok(Self {
            cfg: cfg.clone(),
            feat,
            down,
            up,
            layers,
            fc,
            spectral,
            head0,
            head2,
        })
    }

    pub fn config(&self) -> &GalerkinConfig {
        &self.cfg
    }

    /// The grid of the points: `input.grid`, or the N points as one axis in 1-D.
    fn grid_shape(&self, input: &ModelInput<'_>, n: i64) -> Result<Vec<i64>> {
        let d = self.cfg.grid_dims();
        let shape = match input.grid {
            Some(g) => g.to_vec(),
            None if d == 1 => vec![n],
            None => {
                return Err(Error::Config(format!(
                    "{ARCH}: the spectral decoder needs the points as a regular grid; pass its \
                     shape (ModelInput::with_grid)"
                )))
            }
        };
        let m = self.cfg.fourier_modes;
        let mut fits = shape.len() == d
            && shape.iter().product::<i64>() == n
            && shape
                .iter()
                .enumerate()
                .all(|(j, &s)| m <= if j + 1 == d { s / 2 + 1 } else { s });
        let mut expected =
            format!("a {d}-D grid of the {n} points with room for {m} Fourier modes per axis");
        if let Some(up) = self.cfg.upscaler_size.filter(|_| self.up.is_some()) {
            fits &= shape == up[1];
            expected = format!("the fine grid {:?} of the upscaler", up[1]);
        }
        if !fits {
            return Err(Error::Shape {
                op: ARCH,
                expected,
                got: shape,
            });
        }
        Ok(shape)
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim), the points' coordinates (the attention's, or with
    ///   `FourierTransformer2D` the fine grid's, interpolated bilinearly to the coarse grid for
    ///   the attention); `input.fx`: (B, N, fun_dim); `input.grid`: the grid shape (optional
    ///   in 1-D)
    /// - returns: (B, N, out_dim), in the points' order
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        const OP: &str = "GalerkinTransformer::forward";
        input.refuse(
            ARCH,
            &[
                InputPart::Mask,
                InputPart::Functions,
                InputPart::Query,
                InputPart::Time,
            ],
        )?;
        let c = &self.cfg;
        let ps = input.pos.size();
        let (b, n) = match ps[..] {
            [b, n, p] if b > 0 && n > 0 && p == c.space_dim => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, N, {}) with B, N > 0", c.space_dim),
                    got: ps,
                })
            }
        };
        let fx = match input.fx {
            Some(fx) if fx.size() == [b, n, c.fun_dim] => fx,
            fx => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("fx ({b}, {n}, {})", c.fun_dim),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        };
        let shape = self.grid_shape(input, n)?;
        let kind = self.head0.weight.kind();
        let (pos, fx) = (input.pos.f_to_kind(kind)?, fx.f_to_kind(kind)?);
        for (t, what) in [(&pos, "pos"), (&fx, "fx")] {
            if !bool::try_from(&t.f_isfinite()?.f_all()?)? {
                return Err(Error::NonFinite { op: OP, what });
            }
        }
        let on_grid = |t: &Tensor| -> Result<Tensor> {
            let mut s = vec![b];
            s.extend_from_slice(&shape);
            s.push(t.size()[2]);
            Ok(t.f_reshape(s.as_slice())?)
        };
        let out = match &self.down {
            Some(_) => {
                let fine = on_grid(&pos)?;
                let coarse = self.coarse_positions(&fine)?;
                let out = self.forward_2d(&on_grid(&fx)?, &coarse, &fine, train)?;
                self.boundary(&out)?
            }
            None => self.forward_points(&fx, &pos, &shape, train)?,
        };
        Ok(out.f_reshape([b, n, c.out_dim])?)
    }

    /// `SimpleTransformer`: (B, N, fun_dim), (B, N, p) → (B, grid…, out_dim).
    fn forward_points(
        &self,
        fx: &Tensor,
        pos: &Tensor,
        shape: &[i64],
        train: bool,
    ) -> Result<Tensor> {
        let c = &self.cfg;
        let feat = self
            .feat
            .as_ref()
            .ok_or_else(|| Error::Config(format!("{ARCH}: the point model has no feature lift")))?;
        let mut x = feat.forward(fx)?;
        for layer in &self.layers {
            x = layer.forward(&x, pos, c, train)?;
        }
        let x = dropout(&x, c.dropout, train)?;
        let mut grid_shape = vec![fx.size()[0]];
        grid_shape.extend_from_slice(shape);
        grid_shape.push(c.n_hidden);
        self.decoder(&x.f_reshape(grid_shape.as_slice())?, train)
    }

    /// The coarse grid's coordinates, interpolated bilinearly (corners aligned) from the fine
    /// grid's: on a uniform grid the reference's coarse meshgrid, in the data's own convention.
    /// (B, n1, n2, p) → (B, n_c1·n_c2, p).
    fn coarse_positions(&self, fine: &Tensor) -> Result<Tensor> {
        let size = self.cfg.downscaler_size.map(|s| s[1]).unwrap_or_default();
        let b = fine.size()[0];
        Ok(fine
            .f_permute([0, 3, 1, 2])?
            .f_upsample_bilinear2d(size, true, None, None)?
            .f_permute([0, 2, 3, 1])?
            .f_reshape([b, size[0] * size[1], self.cfg.space_dim])?)
    }

    /// `FourierTransformer2D` up to its output before the normaliser and the boundary condition.
    ///
    /// # Shapes
    /// - `node`: (B, n1, n2, fun_dim); `coarse`: (B, n_c1·n_c2, 2); `fine`: (B, n1, n2, 2)
    /// - returns: (B, n1, n2, out_dim)
    fn forward_2d(
        &self,
        node: &Tensor,
        coarse: &Tensor,
        fine: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let c = &self.cfg;
        let (Some(down), Some(up)) = (&self.down, &self.up) else {
            return Err(Error::Config(format!(
                "{ARCH}: the point model has no down- and upscaler"
            )));
        };
        let b = node.size()[0];
        let x = down.forward(&node.f_permute([0, 3, 1, 2])?, train)?;
        let (nc1, nc2) = (x.size()[2], x.size()[3]);
        let mut x = dropout(
            &x.f_permute([0, 2, 3, 1])?
                .f_reshape([b, nc1 * nc2, c.n_hidden])?,
            c.dropout,
            train,
        )?;
        for layer in &self.layers {
            x = layer.forward(&x, coarse, c, train)?;
        }
        let x = x
            .f_reshape([b, nc1, nc2, c.n_hidden])?
            .f_permute([0, 3, 1, 2])?;
        let x = up.forward(&x, train)?.f_permute([0, 2, 3, 1])?;
        let x = dropout(&x, c.dropout, train)?;
        let fc = self
            .fc
            .as_ref()
            .ok_or_else(|| Error::Config(format!("{ARCH}: no regressor.fc")))?;
        let x = fc.forward(&Tensor::f_cat(&[&x, &fine.f_to_kind(x.kind())?], -1)?)?;
        self.decoder(&x, train)
    }

    /// The spectral layers and the pointwise head: (B, grid…, C) → (B, grid…, out_dim).
    fn decoder(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let mut x = x.shallow_clone();
        for layer in &self.spectral {
            x = layer.forward(&x, train)?;
        }
        Ok(self.head2.forward(&self.head0.forward(&x)?.f_silu()?)?)
    }

    /// The Dirichlet condition (`x[:, 1:-1, 1:-1]` kept, the outer ring 0) when configured.
    /// (B, n1, n2, C) → the same.
    fn boundary(&self, x: &Tensor) -> Result<Tensor> {
        if !self.cfg.dirichlet {
            return Ok(x.shallow_clone());
        }
        let s = x.size();
        Ok(x.f_narrow(1, 1, (s[1] - 2).max(0))?
            .f_narrow(2, 1, (s[2] - 2).max(0))?
            .f_constant_pad_nd([0, 0, 1, 1, 1, 1])?)
    }
}

impl ArchConfig for GalerkinConfig {
    const ARCH: &'static str = ARCH;

    fn preset_names() -> &'static [&'static str] {
        &presets::NAMES
    }

    fn preset(name: &str) -> Result<Self> {
        presets::by_name(name)
    }

    fn validate(&self) -> Result<()> {
        self.check(ARCH)
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        self.space_dim = dims.space_dim;
        self.fun_dim = dims.fun_dim;
        self.out_dim = dims.out_dim;
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(GalerkinTransformer::new(path, self)?))
    }

    fn claims_reference(json: &serde_json::Value) -> bool {
        reference::claims(json)
    }

    fn from_reference(json: &serde_json::Value) -> Result<Self> {
        reference::config(json)
    }
}

impl NeuralOperator for GalerkinTransformer {
    fn arch(&self) -> &'static str {
        ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        GalerkinTransformer::forward(self, input, train)
    }

    fn reference_forward(
        &self,
        inputs: &ono_nn::weights::NamedTensors,
        train: bool,
    ) -> Result<Tensor> {
        reference::forward(self, inputs, train)
    }
}
