//! The Factorized FNO as the Neural-Solver-Library builds it (`models/F_FNO.py`,
//! `layers/FFNO_Layers.py`, thuml/Neural-Solver-Library `db942b7`): `arch = "ffno"`. NSL's frame
//! ([`ono_nn::nsl_frame`]) around `n_layers` residual factorised Fourier layers.
//!
//! ```text
//! frame.enter → n_layers × (x ← x + Σ_axes irfft(W_axis · rfft_axis(x))) → frame.leave
//!   → fc1 (H → H) → GELU → fc2 (H → out)
//! ```
//!
//! NSL's variant is stripped down from the paper's (Tran et al. 2023): no feed-forward after
//! the spectral sum, no weight sharing, no activation anywhere in the latent part (it is linear
//! in x). On 1-D grids NSL's `SpectralConv1d` is the plain FNO layer (`weights1`, default
//! normalisation, `U[0, 1/H²)` init), and so is this port's. Fixtures: `fixtures/ffno`.

mod config;
pub mod presets;
mod reference;

pub use config::FfnoConfig;

use tch::nn::Path;
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::nsl::settings::enter_frame;
use crate::operator::ModelInput;
use crate::Result;
use ono_nn::factorized_spectral_conv::{FactorizedSpectralConv, FactorizedSpectralConvConfig};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::nsl_frame::NslFrame;
use ono_nn::spectral_conv::{SpectralConv, SpectralConvConfig};
use ono_nn::Linear;

/// One latent layer: factorised on 2-D and 3-D grids, NSL's plain FNO `SpectralConv1d` in 1-D.
#[derive(Debug)]
enum Layer {
    Fno(SpectralConv),
    Factorized(FactorizedSpectralConv),
}

impl Layer {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        Ok(match self {
            Layer::Fno(conv) => conv.forward(x)?,
            Layer::Factorized(conv) => conv.forward(x)?,
        })
    }
}

/// See the module documentation. Variables under NSL's names: the frame's (`preprocess.*`,
/// `time_fc.*`, `fftproject_in/out.*`, `iphi.*`), `spectral_layers.{l}.fourier_weight.{axis}`
/// (1-D: `spectral_layers.{l}.weights1`), `fc1`, `fc2`.
#[derive(Debug)]
pub struct Ffno {
    cfg: FfnoConfig,
    frame: NslFrame,
    layers: Vec<Layer>,
    fc1: Linear,
    fc2: Linear,
}

impl Ffno {
    /// Builds the layers with NSL's initialisation (PyTorch defaults for the linear layers,
    /// xavier-normal factorised weights).
    pub fn new(path: &Path, cfg: &FfnoConfig) -> Result<Self> {
        cfg.check()?;
        let frame = cfg.frame().init(path)?;
        let (h, d) = (cfg.n_hidden, cfg.latent_dims());
        let layers = (0..cfg.n_layers)
            .map(|l| -> Result<Layer> {
                let p = path / "spectral_layers" / l;
                Ok(if d == 1 {
                    Layer::Fno(
                        SpectralConvConfig {
                            in_channels: h,
                            out_channels: h,
                            modes: vec![cfg.modes],
                        }
                        .init(&p)?,
                    )
                } else {
                    Layer::Factorized(
                        FactorizedSpectralConvConfig {
                            in_channels: h,
                            out_channels: h,
                            modes: vec![cfg.modes; d],
                        }
                        .init(&p)?,
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            frame,
            layers,
            fc1: torch_linear(&(path / "fc1"), h, h, true),
            fc2: torch_linear(&(path / "fc2"), h, cfg.out_dim, true),
        })
    }

    pub fn config(&self) -> &FfnoConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim) (structured with `unified_pos`: only B, N are read);
    ///   `input.fx`: (B, N, fun_dim) (absent when fun_dim = 0); `input.time`: (B, 1) with
    ///   `time_input`; `input.grid`: the grid shape (structured; optional in 1-D)
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        let (mut x, ctx) = enter_frame(FfnoConfig::ARCH, &self.frame, input)?;
        for layer in &self.layers {
            x = x.f_add(&layer.forward(&x)?)?;
        }
        let h = self.frame.leave(&x, &ctx)?;
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(&h)?)?)?)
    }
}

crate::nsl::nsl_arch!(FfnoConfig, Ffno, "ffno", "models.F_FNO.Model");

impl crate::nsl::NslPort for Ffno {
    fn port_forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let _ = train;
        Ffno::forward(self, input)
    }

    fn structured_dims(&self) -> Option<usize> {
        self.cfg.structured_dims()
    }
}
