//! U-FNO as the Neural-Solver-Library builds it (`models/U_FNO.py` with `models/U_Net.py` and
//! `layers/UNet_Blocks.py`, thuml/Neural-Solver-Library `db942b7`): `arch = "ufno"`. NSL's frame
//! ([`ono_nn::nsl_frame`]) around four FNO layers, the last two with a U-Net branch.
//!
//! ```text
//! frame.enter → x = GELU(conv0(x) + w0(x)) → x = GELU(conv1(x) + w1(x))
//!   → x = GELU(conv2(x) + w2(x) + u_net2(x)) → x = conv3(x) + w3(x) + u_net3(x)
//!   → frame.leave → fc1 (H → H) → GELU → fc2 (H → out)
//! ```
//!
//! `conv{l}` is the FNO `SpectralConv` (NSL's `layers/FNO_Layers.py`), `w{l}` a 1×1 convolution,
//! `u_net{2,3}` the `multiscale` path of a whole NSL `U_Net` model ([`ono_nn::unet`]). U-FNO
//! only calls `multiscale`, but each embedded `U_Net` also builds its own `preprocess`,
//! `time_fc` (with a time input), `fc1`, `fc2` and, on point clouds, `fftproject_in/out` and
//! `iphi`: they are registered here too (never used, no gradient) so that NSL's state_dicts load
//! strictly and the parameter counts are NSL's. Fixtures: `fixtures/ufno`.

mod config;
pub mod presets;
mod reference;

pub use config::UfnoConfig;

use tch::nn::Path;
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::nsl::settings::enter_frame;
use crate::operator::ModelInput;
use crate::Result;
use ono_nn::conv::{Conv, ConvConfig};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::nsl_frame::NslFrame;
use ono_nn::spectral_conv::{SpectralConv, SpectralConvConfig};
use ono_nn::unet::{UNet, UNetConfig};
use ono_nn::Linear;

/// FNO layers of U-FNO (`conv0` … `conv3`); the last [`UNET_LAYERS`] add a U-Net branch.
pub const N_LAYERS: usize = 4;
/// The layers with a U-Net branch (`u_net2`, `u_net3`).
const UNET_LAYERS: [usize; 2] = [2, 3];

/// See the module documentation. Variables under NSL's names: the frame's, `conv{l}.weights{k}`,
/// `w{l}.*`, `u_net{2,3}.*` (the multiscale modules and the unused parts), `fc1`, `fc2`.
#[derive(Debug)]
pub struct Ufno {
    cfg: UfnoConfig,
    frame: NslFrame,
    convs: Vec<SpectralConv>,
    ws: Vec<Conv>,
    unets: Vec<UNet>,
    fc1: Linear,
    fc2: Linear,
}

impl Ufno {
    /// Builds the layers with NSL's initialisation (PyTorch defaults for linear layers,
    /// convolutions and norms; spectral weights `U[0, 1/H²)`).
    pub fn new(path: &Path, cfg: &UfnoConfig) -> Result<Self> {
        cfg.check()?;
        let frame = cfg.frame().init(path)?;
        let (h, d) = (cfg.n_hidden, cfg.latent_dims());
        let convs = (0..N_LAYERS)
            .map(|l| {
                SpectralConvConfig {
                    in_channels: h,
                    out_channels: h,
                    modes: vec![cfg.modes; d],
                }
                .init(&(path / format!("conv{l}")))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let ws = (0..N_LAYERS)
            .map(|l| ConvConfig::pointwise(d, h, h).init(&(path / format!("w{l}"))))
            .collect::<std::result::Result<Vec<_>, _>>()?;
        let unets = UNET_LAYERS
            .iter()
            .map(|l| embedded_u_net(&(path / format!("u_net{l}")), cfg))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            frame,
            convs,
            ws,
            unets,
            fc1: torch_linear(&(path / "fc1"), h, h, true),
            fc2: torch_linear(&(path / "fc2"), h, cfg.out_dim, true),
        })
    }

    pub fn config(&self) -> &UfnoConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim) (structured with `unified_pos`: only B, N are read);
    ///   `input.fx`: (B, N, fun_dim) (absent when fun_dim = 0); `input.time`: (B, 1) with
    ///   `time_input`; `input.grid`: the grid shape (structured; optional in 1-D, where its
    ///   length must be a multiple of 16 for the U-Nets)
    /// - `train`: the U-Nets' BatchNorms use and update batch statistics
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let (mut x, ctx) = enter_frame(UfnoConfig::ARCH, &self.frame, input)?;
        for (l, (conv, w)) in self.convs.iter().zip(&self.ws).enumerate() {
            let mut y = conv.forward(&x)?.f_add(&w.forward(&x)?)?;
            if let Some(k) = UNET_LAYERS.iter().position(|&u| u == l) {
                y = y.f_add(&self.unets[k].forward(&x, train)?)?;
            }
            x = if l + 1 < N_LAYERS { gelu(&y)? } else { y };
        }
        let h = self.frame.leave(&x, &ctx)?;
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(&h)?)?)?)
    }
}

/// An NSL `U_Net(args)` inside U-FNO: its multiscale modules, returned, and the parts U-FNO
/// never calls (the frame's `preprocess`, `time_fc`, projections and IPHI, and `fc1`, `fc2`),
/// registered under `path` for the state_dict and the parameter count and then dropped.
fn embedded_u_net(path: &Path, cfg: &UfnoConfig) -> Result<UNet> {
    let h = cfg.n_hidden;
    let _unused_frame = cfg.frame().init(path)?;
    let _unused_fc1 = torch_linear(&(path / "fc1"), h, h, true);
    let _unused_fc2 = torch_linear(&(path / "fc2"), h, cfg.out_dim, true);
    Ok(UNetConfig {
        dims: cfg.latent_dims(),
        channels: h,
        norm: cfg.unet_norm,
    }
    .init(path)?)
}

crate::nsl::nsl_arch!(UfnoConfig, Ufno, "ufno", "models.U_FNO.Model");

impl crate::nsl::NslPort for Ufno {
    fn port_forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        Ufno::forward(self, input, train)
    }

    fn structured_dims(&self) -> Option<usize> {
        self.cfg.structured_dims()
    }

    fn reset(&self) -> Result<()> {
        for u in &self.unets {
            u.reset_statistics()?;
        }
        Ok(())
    }
}
