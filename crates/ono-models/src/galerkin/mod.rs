//! Cao's Galerkin / Fourier Transformer (scaomath/galerkin-transformer @ f9e7d6a, `libs/model.py`
//! `SimpleTransformer` and `FourierTransformer2D`, `libs/layers.py`): `arch = "galerkin"`, the
//! model chosen by [`GalerkinConfig::model`].
//!
//! ```text
//! SimpleTransformer:    fx → feat_extract.id → L × [x + Attn(x, pos); x + FFN(x)]
//!                          → (B, grid…, d) → spectral or pointwise decoder
//! FourierTransformer2D: fx on the fine grid → downscaler → L × encoder layer on the coarse grid
//!                          → upscaler to the output grid → [x, output coordinates] → regressor.fc
//!                          → spectral or pointwise decoder → Dirichlet ring (optional)
//! spectral decoder:     num_regressor_layers × SiLU(K_ortho(x) + Linear(x)) → Linear → SiLU → Linear
//! pointwise decoder:    num_regressor_layers × Dropout(act(Linear(x))) → Linear
//! ```
//!
//! The output grid is the upscaler's last size: the fine input grid in the forward problem
//! (ex2), the coarse grid in the inverse one (ex3), whose output points are then the query.
//!
//! The attention is [`ono_nn::attention::simple_attention`] (per-head LayerNorms, the coordinates in front
//! of every head, no softmax); the decoder's spectral layers are
//! [`ono_nn::residual_spectral_conv`] on the points' grid (1-D: the N points in order); the 2-D
//! scalers are [`ono_nn::interp_scaler`]. The reference's attention dropout is active in
//! evaluation; [`AttentionDropout`] chooses between that and training-only dropout (default).
//! Over split points (`ono_kernels::points`) only `simple_transformer` with the pointwise
//! decoder runs: its Galerkin attention's sums are global, everything else is per point; the
//! spectral decoder and the 2-D scalers are refused by name.
//! Fixtures: `fixtures/galerkin` (`gt1d_small`, `ft1d_small`, `gt2d_small`, `inv2d_small`).

mod config;
mod pointwise_regressor;
pub mod presets;
mod reference;
pub mod scaler_sizes;

pub use config::{
    AttentionDropout, FfnActivation, GalerkinAttentionKind, GalerkinConfig, GalerkinDecoder,
    GalerkinModel, OutputGrid, RegressorActivation, ScalerActivation, ScalerGrids,
};
pub use scaler_sizes::{get_scaler_sizes, ScalerSizes};

use ono_kernels::{health, points};
use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::attention::simple_attention::{SimpleAttention, SimpleAttentionConfig};
use ono_nn::interp_scaler::{InterpDownscaler, InterpUpscaler};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::norm::LayerNorm;
use ono_nn::residual_spectral_conv::{ResidualSpectralConv, ResidualSpectralConvConfig};
use ono_nn::Linear;
use pointwise_regressor::{PointwiseRegressor, PointwiseRegressorConfig};

const ARCH: &str = "galerkin";

/// Dropout with probability `p` in training only.
fn dropout(x: &Tensor, p: f64, train: bool) -> Result<Tensor> {
    if train && p > 0.0 {
        Ok(x.f_dropout(p, true)?)
    } else {
        Ok(x.shallow_clone())
    }
}

/// `SimpleTransformerEncoderLayer`: `encoder_layers.{i}.attn`, `encoder_layers.{i}.ff.lr1`,
/// `.ff.lr2`, and with `layer_norm` the post-LayerNorms `layer_norm1`, `layer_norm2`.
#[derive(Debug)]
struct EncoderLayer {
    attn: SimpleAttention,
    lr1: Linear,
    lr2: Linear,
    post_norms: Option<(LayerNorm, LayerNorm)>,
}

impl EncoderLayer {
    fn new(path: &Path, cfg: &GalerkinConfig) -> Result<Self> {
        let attn = SimpleAttentionConfig {
            dim: cfg.n_hidden,
            heads: cfg.n_head,
            pos_dim: cfg.space_dim,
            kind: cfg.attention_type,
            norm: cfg.attn_norm,
            eps: cfg.norm_eps,
            xavier_init: cfg.xavier_init,
            diagonal_weight: cfg.diagonal_weight,
            dropout: cfg.encoder_dropout,
            dropout_mode: cfg.attention_dropout,
        }
        .init(&(path / "attn"))?;
        // The reference's construction order: the attention, the LayerNorms, then the FFN
        // (LayerNorms draw no random numbers, so only the names matter).
        let post_norms = cfg.layer_norm.then(|| {
            let norm = |name: &str| LayerNorm::with_eps(&(path / name), cfg.n_hidden, cfg.norm_eps);
            (norm("layer_norm1"), norm("layer_norm2"))
        });
        let ff = path / "ff";
        Ok(Self {
            attn,
            lr1: torch_linear(&(&ff / "lr1"), cfg.n_hidden, cfg.dim_feedforward, true),
            lr2: torch_linear(&(&ff / "lr2"), cfg.dim_feedforward, cfg.n_hidden, true),
            post_norms,
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
        let x = match &self.post_norms {
            Some((n1, _)) => n1.forward(&x)?,
            None => x,
        };
        let h = self.lr1.forward(&x)?;
        let h = match cfg.ffn_activation {
            FfnActivation::Relu => h.f_relu()?,
            FfnActivation::Silu => h.f_silu()?,
            FfnActivation::Gelu => gelu(&h)?,
        };
        let h = self.lr2.forward(&dropout(&h, cfg.ffn_dropout, train)?)?;
        let x = x.f_add(&dropout(&h, p, train)?)?;
        match &self.post_norms {
            Some((_, n2)) => Ok(n2.forward(&x)?),
            None => Ok(x),
        }
    }
}

/// The decoder after the upscaler (or the encoder, 1-D).
#[derive(Debug)]
enum Regressor {
    /// `SpectralRegressor`: `fc` (2-D: [x, coordinates] → freq_dim), the spectral layers and the
    /// head `regressor.{0, 2}`.
    Spectral {
        fc: Option<Linear>,
        layers: Vec<ResidualSpectralConv>,
        head0: Linear,
        head2: Linear,
    },
    Pointwise(PointwiseRegressor),
}

/// See the module documentation. Variables under the reference names: `feat_extract.id`
/// (`SimpleTransformer`) or `downscaler.downsample.conv{0..3}.conv.0` and
/// `upscaler.upsample.conv.0.conv.0` (`FourierTransformer2D`),
/// `encoder_layers.{i}.attn.{linears.{0,1,2}, norm_K.{h}, norm_V.{h} | norm_Q.{h}, fc}`,
/// `encoder_layers.{i}.ff.{lr1, lr2}`, and the decoder: `regressor.fc` (2-D model),
/// `regressor.spectral_conv.{j}.{linear, fourier_weight[.0, .1]}`, `regressor.regressor.{0, 2}`
/// (spectral) or `regressor.ff.{j}.0`, `regressor.out` (pointwise).
#[derive(Debug)]
pub struct GalerkinTransformer {
    cfg: GalerkinConfig,
    feat: Option<Linear>,
    /// The 2-D model's scalers with their sizes (from `scaler_grids` or the explicit sizes).
    scalers: Option<(InterpDownscaler, InterpUpscaler, ScalerSizes)>,
    layers: Vec<EncoderLayer>,
    decoder: Regressor,
}

impl GalerkinTransformer {
    /// Builds the layers in the reference's construction order, with its initialisation.
    pub fn new(path: &Path, cfg: &GalerkinConfig) -> Result<Self> {
        cfg.validate()?;
        let two_d = cfg.model == GalerkinModel::FourierTransformer2d;
        let (mut feat, mut scalers) = (None, None);
        if two_d {
            let sizes = cfg.scaler_sizes()?;
            let down = InterpDownscaler::new(
                &(path / "downscaler" / "downsample"),
                cfg.fun_dim,
                cfg.n_hidden,
                sizes.down,
                cfg.downscaler_activation,
                cfg.downscaler_dropout,
            )?;
            let up = InterpUpscaler::new(
                &(path / "upscaler" / "upsample"),
                cfg.n_hidden,
                sizes.up,
                cfg.upscaler_activation,
                cfg.upscaler_dropout,
            )?;
            scalers = Some((down, up, sizes));
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
        let decoder = match cfg.decoder {
            GalerkinDecoder::Pointwise => Regressor::Pointwise(
                PointwiseRegressorConfig {
                    in_dim: cfg.n_hidden,
                    coord_dim: two_d.then_some(cfg.space_dim),
                    hidden: cfg.n_hidden,
                    out_dim: cfg.out_dim,
                    layers: cfg.num_regressor_layers,
                    activation: cfg.regressor_activation,
                    dropout: cfg.decoder_dropout,
                    // SimpleTransformer._initialize_layer(self.regressor).
                    xavier_gain: (!two_d).then_some(1e-2),
                }
                .init(&reg)?,
            ),
            GalerkinDecoder::Spectral => Self::spectral_decoder(&reg, cfg)?,
        };
        Ok(Self {
            cfg: cfg.clone(),
            feat,
            scalers,
            layers,
            decoder,
        })
    }

    /// The `SpectralRegressor`.
    fn spectral_decoder(reg: &Path, cfg: &GalerkinConfig) -> Result<Regressor> {
        let two_d = cfg.model == GalerkinModel::FourierTransformer2d;
        // FourierTransformer2D's SpectralRegressor: spacial_fc (the output grid's coordinates in,
        // to freq_dim channels) and the default dim_feedforward 2·spacial_dim·freq_dim;
        // SimpleTransformer's: no fc, dim_feedforward = freq_dim.
        let fc = two_d.then(|| {
            torch_linear(
                &(reg / "fc"),
                cfg.n_hidden + cfg.space_dim,
                cfg.freq_dim,
                true,
            )
        });
        let first_in = if two_d { cfg.freq_dim } else { cfg.n_hidden };
        let modes = vec![cfg.fourier_modes; cfg.grid_dims()];
        let layers = (0..cfg.num_regressor_layers)
            .map(|j| {
                ResidualSpectralConvConfig {
                    in_channels: if j == 0 { first_in } else { cfg.freq_dim },
                    out_channels: cfg.freq_dim,
                    modes: modes.clone(),
                    dropout: cfg.decoder_dropout,
                }
                .init(&(reg / "spectral_conv" / j))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let hidden = if two_d {
            2 * cfg.grid_dims() as i64 * cfg.freq_dim
        } else {
            cfg.freq_dim
        };
        let head = reg / "regressor";
        Ok(Regressor::Spectral {
            fc,
            layers,
            head0: torch_linear(&(&head / 0), cfg.freq_dim, hidden, true),
            head2: torch_linear(&(&head / 2), hidden, cfg.out_dim, true),
        })
    }

    pub fn config(&self) -> &GalerkinConfig {
        &self.cfg
    }

    /// The points' grid: `input.grid`, or the N points as one axis in 1-D. The 1-D model's
    /// spectral decoder runs over it, so it must leave room for the modes; the 2-D model takes
    /// any 2-D grid (the downscaler interpolates it to explicit sizes), the fine grid of
    /// `scaler_grids` when the sizes come from it.
    fn grid_shape(&self, input: &ModelInput<'_>, n: i64) -> Result<Vec<i64>> {
        let d = self.cfg.grid_dims();
        let shape = match input.grid {
            Some(g) => g.to_vec(),
            None if d == 1 => vec![n],
            None => {
                return Err(Error::Config(format!(
                    "{ARCH}: a {d}-D model needs the points as a regular grid; pass its shape \
                     (ModelInput::with_grid)"
                )))
            }
        };
        let mut fits =
            shape.len() == d && shape.iter().all(|&s| s > 0) && shape.iter().product::<i64>() == n;
        let mut expected = format!("a {d}-D grid of the {n} points");
        if self.scalers.is_none() && self.cfg.decoder == GalerkinDecoder::Spectral {
            let m = self.cfg.fourier_modes;
            fits &= shape
                .iter()
                .enumerate()
                .all(|(j, &s)| m <= if j + 1 == d { s / 2 + 1 } else { s });
            expected.push_str(&format!(" with room for {m} Fourier modes per axis"));
        }
        if let Some(g) = self.cfg.scaler_grids {
            fits &= shape == [g.fine, g.fine];
            expected = format!("the fine grid [{0}, {0}] of scaler_grids", g.fine);
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

    /// The 2-D model's output points: none (the input points) when the output grid is the input
    /// grid, else the query, which must hold the output grid's points.
    fn output_points<'a>(
        &self,
        input: &ModelInput<'a>,
        shape: &[i64],
        sizes: &ScalerSizes,
        b: i64,
    ) -> Result<Option<&'a Tensor>> {
        const OP: &str = "GalerkinTransformer::forward";
        let out = sizes.output_grid();
        let m = out[0] * out[1];
        let p = self.cfg.space_dim;
        if shape == out {
            input.refuse(ARCH, &[InputPart::Query])?;
            return Ok(None);
        }
        if input.query_mask.is_some() {
            return Err(Error::Unsupported {
                arch: ARCH,
                what: "a query mask (the query is the output grid's points, all real)",
            });
        }
        match input.query {
            Some(q) if q.size() == [b, m, p] => Ok(Some(q)),
            Some(q) => Err(Error::Shape {
                op: OP,
                expected: format!(
                    "query ({b}, {m}, {p}): the {m} points of the output grid {out:?} \
                     (upscaler_size[1]) in row-major order"
                ),
                got: q.size(),
            }),
            None => Err(Error::Shape {
                op: OP,
                expected: format!(
                    "the input grid {out:?}, or a query: the output grid {out:?} \
                     (upscaler_size[1]) differs from the input grid, so pass its points as \
                     (B, {m}, {p}) with ModelInput::with_query"
                ),
                got: shape.to_vec(),
            }),
        }
    }

    /// The parameters' dtype.
    fn param_kind(&self) -> Kind {
        match &self.decoder {
            Regressor::Spectral { head0, .. } => head0.weight.kind(),
            Regressor::Pointwise(p) => p.kind(),
        }
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim), the points' coordinates (the attention's, or with
    ///   `FourierTransformer2D` the input grid's, interpolated bilinearly to the coarse grid for
    ///   the attention); `input.fx`: (B, N, fun_dim); `input.grid`: the grid shape (optional
    ///   in 1-D)
    /// - `input.query`: (B, M, space_dim), 2-D model only and only when its output grid (the
    ///   upscaler's last size) is not the input grid: the output grid's M points in row-major
    ///   order, whose coordinates the decoder reads (the inverse problem: the coarse grid)
    /// - returns: (B, N, out_dim) in the points' order, or (B, M, out_dim) in the query's
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        const OP: &str = "GalerkinTransformer::forward";
        input.refuse(
            ARCH,
            &[InputPart::Mask, InputPart::Functions, InputPart::Time],
        )?;
        if self.scalers.is_none() {
            input.refuse(ARCH, &[InputPart::Query])?;
        }
        let c = &self.cfg;
        let ps = input.pos.size();
        let (b, n) = match ps[..] {
            // A process's share of split points may be empty (ono_kernels::points).
            [b, n, p] if b > 0 && (n > 0 || points::split()) && p == c.space_dim => (b, n),
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
        if self.scalers.is_some() {
            points::refuse(
                "fourier_transformer2d's down- and upscaler",
                "interpolations and convolutions over the whole grid",
            )?;
        }
        let pointwise = self.scalers.is_none() && c.decoder == GalerkinDecoder::Pointwise;
        if !pointwise {
            points::refuse(
                "the Galerkin Transformer's spectral decoder",
                "a Fourier transform over the whole grid",
            )?;
        }
        // The point model's pointwise decoder reads no grid: the points stay a list.
        let shape = if pointwise {
            vec![n]
        } else {
            self.grid_shape(input, n)?
        };
        let query = match &self.scalers {
            Some((_, _, sizes)) => self.output_points(input, &shape, sizes, b)?,
            None => None,
        };
        let kind = self.param_kind();
        let (pos, fx) = (input.pos.f_to_kind(kind)?, fx.f_to_kind(kind)?);
        let query = query.map(|q| q.f_to_kind(kind)).transpose()?;
        for (t, what) in [
            (Some(&pos), "pos"),
            (Some(&fx), "fx"),
            (query.as_ref(), "query"),
        ] {
            if let Some(t) = t {
                health::require_finite("GalerkinTransformer::forward: input", t, move || {
                    Error::NonFinite { op: OP, what }
                })?;
            }
        }
        let on_grid = |t: &Tensor, grid: &[i64]| -> Result<Tensor> {
            let mut s = vec![b];
            s.extend_from_slice(grid);
            s.push(t.size()[2]);
            Ok(t.f_reshape(s.as_slice())?)
        };
        let out = match &self.scalers {
            Some((_, _, sizes)) => {
                let fine = on_grid(&pos, &shape)?;
                let coarse = self.coarse_positions(&fine, sizes.coarse_grid())?;
                let grid = match &query {
                    Some(q) => on_grid(q, &sizes.output_grid())?,
                    None => fine,
                };
                let out = self.forward_2d(&on_grid(&fx, &shape)?, &coarse, &grid, train)?;
                self.boundary(&out)?
            }
            None => self.forward_points(&fx, &pos, &shape, train)?,
        };
        Ok(out.f_reshape([b, -1, c.out_dim])?)
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
        self.decode(&x.f_reshape(grid_shape.as_slice())?, None, train)
    }

    /// The coarse grid's coordinates, interpolated bilinearly (corners aligned) from the input
    /// grid's: on a uniform grid the reference's coarse meshgrid, in the data's own convention.
    /// (B, n1, n2, p) → (B, n_c1·n_c2, p).
    fn coarse_positions(&self, fine: &Tensor, size: [i64; 2]) -> Result<Tensor> {
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
    /// - `node`: (B, n1, n2, fun_dim) on the input grid; `coarse`: (B, n_c1·n_c2, p), the
    ///   attention's coordinates; `grid`: (B, o1, o2, p), the output grid's coordinates (the
    ///   reference's `grid`, read by the decoder)
    /// - returns: (B, o1, o2, out_dim)
    fn forward_2d(
        &self,
        node: &Tensor,
        coarse: &Tensor,
        grid: &Tensor,
        train: bool,
    ) -> Result<Tensor> {
        let c = &self.cfg;
        let Some((down, up, _)) = &self.scalers else {
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
        if grid.size().get(..3) != x.size().get(..3) {
            return Err(Error::Shape {
                op: "GalerkinTransformer::forward_2d",
                expected: format!("the output grid's coordinates {:?}", &x.size()[..3]),
                got: grid.size(),
            });
        }
        self.decode(&x, Some(grid), train)
    }

    /// The decoder: (B, grid…, C) with the grid's coordinates (B, grid…, p) where it reads them
    /// (the 2-D model) → (B, grid…, out_dim).
    fn decode(&self, x: &Tensor, coords: Option<&Tensor>, train: bool) -> Result<Tensor> {
        match &self.decoder {
            Regressor::Pointwise(reg) => reg.forward(x, coords, train),
            Regressor::Spectral {
                fc,
                layers,
                head0,
                head2,
            } => {
                let mut x = match (fc, coords) {
                    (Some(fc), Some(p)) => {
                        fc.forward(&Tensor::f_cat(&[x, &p.f_to_kind(x.kind())?], -1)?)?
                    }
                    (None, None) => x.shallow_clone(),
                    _ => {
                        return Err(Error::Config(format!(
                            "{ARCH}: the spectral decoder's regressor.fc and the coordinates go \
                             together"
                        )))
                    }
                };
                for layer in layers {
                    x = layer.forward(&x, train)?;
                }
                Ok(head2.forward(&head0.forward(&x)?.f_silu()?)?)
            }
        }
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
