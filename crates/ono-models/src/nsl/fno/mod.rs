//! The FNO of the Neural-Solver-Library (`models/FNO.py`, thuml/Neural-Solver-Library `db942b7`):
//! `arch = "nsl_fno"`. NSL's frame ([`ono_nn::nsl_frame`]: the `preprocess` MLP lifting, the
//! unified position embedding, padding to multiples of 16, or the Geo-FNO projection on point
//! clouds) around four Fourier layers.
//!
//! ```text
//! frame.enter → 3 × (SpectralConv + 1×1 conv w, GELU) → SpectralConv + w → frame.leave
//!   → fc1 (H → H) → GELU → fc2 (H → out)
//! ```
//!
//! NSL's FNO always has four layers (`args.n_layers` is ignored) and no index-grid channels; a
//! point cloud goes through `fftproject_in`/`fftproject_out` with `IPHI()` (width 32, no
//! geometry code). Fixture: `fixtures/geofno/nsl_fno_irregular_small`.

mod config;
pub mod presets;
mod reference;

pub use config::NslFnoConfig;

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
use ono_nn::Linear;

/// Fourier layers of NSL's FNO, whatever `n_layers` says.
pub const N_LAYERS: usize = 4;

/// See the module documentation. Variables under NSL's names: the frame's (`preprocess.*`,
/// `time_fc.*`, `fftproject_in/out.*`, `iphi.*`), `conv{l}.weights{k}`, `w{l}.*`, `fc1`, `fc2`.
#[derive(Debug)]
pub struct NslFno {
    cfg: NslFnoConfig,
    frame: NslFrame,
    convs: Vec<SpectralConv>,
    ws: Vec<Conv>,
    fc1: Linear,
    fc2: Linear,
}

impl NslFno {
    /// Builds the layers in NSL's construction order with its initialisation (PyTorch defaults;
    /// spectral weights `U[0, 1/H²)`).
    pub fn new(path: &Path, cfg: &NslFnoConfig) -> Result<Self> {
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
        Ok(Self {
            cfg: cfg.clone(),
            frame,
            convs,
            ws,
            fc1: torch_linear(&(path / "fc1"), h, h, true),
            fc2: torch_linear(&(path / "fc2"), h, cfg.out_dim, true),
        })
    }

    pub fn config(&self) -> &NslFnoConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim) (structured with `unified_pos`: only B, N are read);
    ///   `input.fx`: (B, N, fun_dim) (absent when fun_dim = 0); `input.time`: (B, 1) with
    ///   `time_input`; `input.grid`: the grid shape (structured; optional in 1-D)
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        let (mut x, ctx) = enter_frame(NslFnoConfig::ARCH, &self.frame, input)?;
        for (l, (conv, w)) in self.convs.iter().zip(&self.ws).enumerate() {
            x = conv.forward(&x)?.f_add(&w.forward(&x)?)?;
            if l + 1 < self.convs.len() {
                x = gelu(&x)?;
            }
        }
        let h = self.frame.leave(&x, &ctx)?;
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(&h)?)?)?)
    }
}

crate::nsl::nsl_arch!(NslFnoConfig, NslFno, "nsl_fno", "models.FNO.Model");

impl crate::nsl::NslPort for NslFno {
    fn port_forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let _ = train;
        NslFno::forward(self, input)
    }

    fn structured_dims(&self) -> Option<usize> {
        self.cfg.structured_dims()
    }
}
