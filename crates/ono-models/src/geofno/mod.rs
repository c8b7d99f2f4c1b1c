//! Geo-FNO on point clouds (Li et al., "Fourier Neural Operator with Learned Deformations for
//! PDEs on General Geometries"): `elasticity/elas_geofno.py` of neuraloperator/Geo-FNO
//! `d499bde`, `arch = "geofno"`. (Geo-FNO on structured meshes, the airfoil, pipe and plasticity
//! scripts, is the grid FNO with the mesh as input: [`fno`](crate::fno).)
//!
//! ```text
//! ξ = IPHI(x, code)                       the learned deformation to the latent grid's coordinates
//! u = fc0(x)                              the mesh is the input function (is_mesh)
//! g = GELU(conv0(u; points → grid at ξ) + b0(grid))                (s1 × s2 latent grid)
//! g = GELU(conv_l(g) + w_l(g) + b_l(grid)),  l = 1, 2, 3          (plain FNO layers)
//! u = conv4(g; grid → points at ξ) + b4(x)
//! out = fc2(GELU(fc1(u)))
//! ```
//!
//! `grid` is the latent grid's `linspace(0, 1, s)` coordinates (first channel along the first
//! axis), `b_l` 1×1 convolutions of it, `b4` a 1×1 convolution of the points' own coordinates.
//! conv0 and conv4 are [`ono_nn::geo_projection`] (with the reference's non-Hermitian conjugate
//! extension, reproduced), IPHI is [`ono_nn::iphi`].
//!
//! **Inputs.** The script's model sees the mesh x (B, N, 2) and the geometry code `rr` (B, 42).
//! Here the mesh is `pos` when the data's space_dim is 2, else the first two channels of `fx`
//! (the ONO layout of the Elasticity loader: pos = point index, fx = (x, y)); the code is the
//! rest of `fx`, the same 42 values at every point (checked), or absent: then IPHI runs without
//! a code (`fc_no_code`, as NSL's projection does). The parameters are the same either way (both
//! `fc_code` and `fc_no_code` always exist), so one preset serves both. Query points (B, M, 2)
//! are taken where the mesh is `pos`: the output is evaluated there (`x_out` of the script).
//!
//! **Training.** The script's loss is `loss_data + 0.000 · loss_reg`: the IPHI regulariser has
//! weight 0 and is not computed here. Variables under the script's names: `model.*` (FNO2d) and
//! `model_iphi.*` (IPHI). Fixture: `fixtures/geofno/elas_geofno_small`.

mod config;
pub mod presets;
mod reference;

pub use config::GeoFnoConfig;

use ono_kernels::health;
use tch::nn::Path;
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::conv::{Conv, ConvConfig};
use ono_nn::geo_projection::{GeoSpectralConv, GeoSpectralConvConfig};
use ono_nn::grid::{index_grid, points_to_grid};
use ono_nn::iphi::{Iphi, IphiConfig, CODE_DIM};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::spectral_conv::{SpectralConv, SpectralConvConfig};
use ono_nn::Linear;

/// Grid-to-grid Fourier layers between the two projections (`conv1` … `conv3`).
const INNER_LAYERS: usize = 3;

/// See the module documentation.
#[derive(Debug)]
pub struct GeoFno {
    cfg: GeoFnoConfig,
    fc0: Linear,
    conv_in: GeoSpectralConv,
    convs: Vec<SpectralConv>,
    conv_out: GeoSpectralConv,
    ws: Vec<Conv>,
    bs: Vec<Conv>,
    b_out: Conv,
    fc1: Linear,
    fc2: Linear,
    iphi: Iphi,
}

impl GeoFno {
    /// Builds the layers in the script's order (`model` first, then `model_iphi`) with its
    /// initialisation (PyTorch defaults; spectral weights `U[0, 1/width²)`).
    pub fn new(path: &Path, cfg: &GeoFnoConfig) -> Result<Self> {
        cfg.validate()?;
        let p = path / "model";
        let w = cfg.width;
        let fc0 = torch_linear(&(&p / "fc0"), 2, w, true);
        let projection = GeoSpectralConvConfig {
            in_channels: w,
            out_channels: w,
            modes: cfg.modes,
            latent: cfg.latent,
        };
        let conv_in = projection.init(&(&p / "conv0"))?;
        let convs = (1..=INNER_LAYERS)
            .map(|l| {
                SpectralConvConfig {
                    in_channels: w,
                    out_channels: w,
                    modes: cfg.modes.to_vec(),
                }
                .init(&(&p / format!("conv{l}")))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let conv_out = projection.init(&(&p / format!("conv{}", INNER_LAYERS + 1)))?;
        let ws = (1..=INNER_LAYERS)
            .map(|l| ConvConfig::pointwise(2, w, w).init(&(&p / format!("w{l}"))))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let bs = (0..=INNER_LAYERS)
            .map(|l| ConvConfig::pointwise(2, 2, w).init(&(&p / format!("b{l}"))))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let b_out =
            ConvConfig::pointwise(1, 2, w).init(&(&p / format!("b{}", INNER_LAYERS + 1)))?;
        let fc1 = torch_linear(&(&p / "fc1"), w, cfg.proj_hidden, true);
        let fc2 = torch_linear(&(&p / "fc2"), cfg.proj_hidden, cfg.out_dim, true);
        let iphi = IphiConfig {
            width: cfg.iphi_width,
        }
        .init(&(path / "model_iphi"))?;
        Ok(Self {
            cfg: cfg.clone(),
            fc0,
            conv_in,
            convs,
            conv_out,
            ws,
            bs,
            b_out,
            fc1,
            fc2,
            iphi,
        })
    }

    pub fn config(&self) -> &GeoFnoConfig {
        &self.cfg
    }

    /// The mesh (B, N, 2) and the code (B, 42), if any, from the input (see the module
    /// documentation).
    fn mesh_and_code(&self, input: &ModelInput<'_>) -> Result<(Tensor, Option<Tensor>)> {
        const OP: &str = "GeoFno::forward";
        let c = &self.cfg;
        let kind = self.fc0.weight.kind();
        let ps = input.pos.size();
        let (b, n) = match ps[..] {
            [b, n, s] if b > 0 && n > 0 && s == c.space_dim => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, N, {}) with B, N > 0", c.space_dim),
                    got: ps,
                })
            }
        };
        let code_dim = c.code_dim();
        if (!c.mesh_in_pos() && c.fun_dim < 2) || (code_dim != 0 && code_dim != CODE_DIM) {
            return Err(Error::Shape {
                op: OP,
                expected: format!(
                    "the mesh as pos (B, N, 2) or as the first two fx channels, then the \
                     geometry code ({CODE_DIM} fx channels) or nothing; the data has space_dim \
                     {} and fun_dim {}",
                    c.space_dim, c.fun_dim
                ),
                got: ps,
            });
        }
        let fx = match (input.fx, c.fun_dim) {
            (Some(fx), f) if fx.size() == [b, n, f] => Some(fx.f_to_kind(kind)?),
            (None, 0) => None,
            (fx, f) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!(
                        "fx ({b}, {n}, {f}): {}the geometry code ({} channels)",
                        if c.mesh_in_pos() {
                            ""
                        } else {
                            "the mesh coordinates (2 channels), then "
                        },
                        c.code_dim()
                    ),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        };
        let (mesh, code) = if c.mesh_in_pos() {
            (input.pos.f_to_kind(kind)?, fx)
        } else {
            let fx = fx.ok_or_else(|| Error::Config("geofno: the mesh is in fx".into()))?;
            let code = (c.code_dim() > 0)
                .then(|| fx.f_narrow(-1, 2, c.code_dim()))
                .transpose()?;
            (fx.f_narrow(-1, 0, 2)?, code)
        };
        health::require_finite("GeoFno::forward: mesh", &mesh, || Error::NonFinite {
            op: OP,
            what: "the mesh coordinates",
        })?;
        let code = match code {
            None => None,
            Some(code) => {
                health::require_finite("GeoFno::forward: code", &code, || Error::NonFinite {
                    op: OP,
                    what: "the geometry code",
                })?;
                let first = code.f_select(1, 0)?;
                health::require(
                    "GeoFno::forward: constant code",
                    &code.f_eq_tensor(&first.f_unsqueeze(1)?)?.f_all()?,
                    || {
                        Error::Config(
                            "geofno: the geometry code must be the same at every point of a sample"
                                .into(),
                        )
                    },
                )?;
                Some(first)
            }
        };
        Ok((mesh, code))
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim); `input.fx`: (B, N, fun_dim) (see the module
    ///   documentation for which is the mesh and where the code is); `input.query`: (B, M, 2)
    ///   output points, where the mesh is pos
    /// - returns: (B, N or M, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        const OP: &str = "GeoFno::forward";
        let c = &self.cfg;
        input.refuse(
            GeoFnoConfig::ARCH,
            &[InputPart::Mask, InputPart::Functions, InputPart::Time],
        )?;
        if input.query_mask.is_some() || (input.query.is_some() && !c.mesh_in_pos()) {
            return Err(Error::Unsupported {
                arch: GeoFnoConfig::ARCH,
                what: "a query mask, or query points when the mesh is not pos",
            });
        }
        let (mesh, code) = self.mesh_and_code(input)?;
        let b = mesh.size()[0];
        let kind = mesh.kind();
        let xi_in = self.iphi.forward(&mesh, code.as_ref())?;
        let x_out = match input.query {
            Some(q) => {
                let qs = q.size();
                if qs.len() != 3 || qs[0] != b || qs[2] != 2 {
                    return Err(Error::Shape {
                        op: OP,
                        expected: format!("query ({b}, M, 2)"),
                        got: qs,
                    });
                }
                let q = q.f_to_kind(kind)?;
                health::require_finite("GeoFno::forward: query", &q, || Error::NonFinite {
                    op: OP,
                    what: "the query points",
                })?;
                q
            }
            None => mesh.shallow_clone(),
        };
        let xi_out = match input.query {
            // The script evaluates IPHI again at x_out; on the same points the values agree.
            Some(_) => self.iphi.forward(&x_out, code.as_ref())?,
            None => xi_in.shallow_clone(),
        };
        // (1, 2, s1, s2): the latent grid's coordinates, the same for every sample.
        let grid = points_to_grid(
            &index_grid(&c.latent, kind, mesh.device())?.f_unsqueeze(0)?,
            &c.latent,
        )?;
        let u = self.fc0.forward(&mesh)?.f_permute([0, 2, 1])?;
        let mut g = gelu(
            &self
                .conv_in
                .points_to_grid(&u, &xi_in)?
                .f_add(&self.bs[0].forward(&grid)?)?,
        )?;
        for (l, (conv, w)) in self.convs.iter().zip(&self.ws).enumerate() {
            g = gelu(
                &conv
                    .forward(&g)?
                    .f_add(&w.forward(&g)?)?
                    .f_add(&self.bs[l + 1].forward(&grid)?)?,
            )?;
        }
        let u = self
            .conv_out
            .grid_to_points(&g, &xi_out)?
            .f_add(&self.b_out.forward(&x_out.f_permute([0, 2, 1])?)?)?
            .f_permute([0, 2, 1])?;
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(&u)?)?)?)
    }
}

impl NeuralOperator for GeoFno {
    fn arch(&self) -> &'static str {
        GeoFnoConfig::ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, _train: bool) -> Result<Tensor> {
        GeoFno::forward(self, input)
    }

    fn reference_forward(
        &self,
        inputs: &ono_nn::weights::NamedTensors,
        train: bool,
    ) -> Result<Tensor> {
        reference::forward(self, inputs, train)
    }
}
