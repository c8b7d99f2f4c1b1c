//! The Latent Spectral Model (Wu et al. 2023) as the Neural-Solver-Library builds it
//! (`models/LSM.py`, `layers/Neural_Spectral_Block.py`, `layers/UNet_Blocks.py`,
//! thuml/Neural-Solver-Library `db942b7`): `arch = "lsm"`. NSL's frame ([`ono_nn::nsl_frame`])
//! around a U-Net whose five levels each pass through a Neural Spectral Block
//! ([`ono_nn::neural_spectral_block`]) on their way up.
//!
//! ```text
//! frame.enter → x1 = inc(x), x2 = down1(x1), …, x5 = down4(x4)      widths c, 2c, 4c, 8c, 8c
//!   → h = up1(process5(x5), process4(x4)) → h = up2(h, process3(x3))
//!   → h = up3(h, process2(x2)) → h = up4(h, process1(x1)) → outc(h)
//!   → frame.leave → fc1 (c → 2c) → GELU → fc2 (2c → out)
//! ```
//!
//! The U-Net blocks are NSL's (BatchNorm for steady tasks, InstanceNorm otherwise); the latent
//! grid's axes are multiples of 16 (structured grids are padded to them by the frame; a point
//! cloud's `latent` grid and a 1-D grid must be), and every block cuts its level into patches of
//! size (axis length / 16), the same at all five levels, so level k holds (16/2^(k−1))^D
//! patches per sample and the bottleneck one. Fixtures: `fixtures/lsm`.

mod config;
pub mod presets;
mod reference;

pub use config::{LsmConfig, NUM_BASIS, NUM_TOKENS};

use tch::nn::Path;
use tch::Tensor;

use crate::arch::ArchConfig;
use crate::nsl::settings::enter_frame;
use crate::operator::ModelInput;
use crate::{Error, Result};
use ono_nn::linear::torch_linear;
use ono_nn::mlp::gelu;
use ono_nn::neural_spectral_block::{NeuralSpectralBlock, NeuralSpectralBlockConfig};
use ono_nn::nsl_frame::NslFrame;
use ono_nn::unet::{UNet, UNetConfig};
use ono_nn::Linear;

/// Levels of the U-Net, one Neural Spectral Block each (`process1` … `process5`).
pub const LEVELS: usize = 5;

/// See the module documentation. Variables under NSL's names: the frame's (`preprocess.*`,
/// `time_fc.*`, `fftproject_in/out.*`, `iphi.*`), the U-Net's (`inc.*`, `down{1..4}.*`,
/// `up{1..4}.*`, `outc.*`), `process{1..5}.*`, `fc1`, `fc2`.
#[derive(Debug)]
pub struct Lsm {
    cfg: LsmConfig,
    frame: NslFrame,
    unet: UNet,
    blocks: Vec<NeuralSpectralBlock>,
    fc1: Linear,
    fc2: Linear,
}

impl Lsm {
    /// Builds the layers in NSL's construction order with its initialisation (PyTorch defaults
    /// for linear layers, convolutions and norms; the blocks' `weights` and `latent` uniform in
    /// [0, 1/width)).
    pub fn new(path: &Path, cfg: &LsmConfig) -> Result<Self> {
        cfg.check()?;
        let frame = cfg.frame().init(path)?;
        let (c, d) = (cfg.n_hidden, cfg.latent_dims());
        let unet = UNetConfig {
            dims: d,
            channels: c,
            norm: cfg.unet_norm,
        }
        .init(path)?;
        // The U-Net's level widths (bilinear: down4 keeps 8c).
        let blocks = [c, 2 * c, 4 * c, 8 * c, 8 * c]
            .iter()
            .enumerate()
            .map(|(k, &width)| {
                NeuralSpectralBlockConfig {
                    dims: d,
                    width,
                    num_basis: NUM_BASIS,
                    num_tokens: NUM_TOKENS,
                    n_heads: cfg.n_heads,
                }
                .init(&(path / format!("process{}", k + 1)))
            })
            .collect::<std::result::Result<Vec<_>, _>>()?;
        Ok(Self {
            cfg: cfg.clone(),
            frame,
            unet,
            blocks,
            fc1: torch_linear(&(path / "fc1"), c, 2 * c, true),
            fc2: torch_linear(&(path / "fc2"), 2 * c, cfg.out_dim, true),
        })
    }

    pub fn config(&self) -> &LsmConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, N, space_dim) (structured with `unified_pos`: only B, N are read);
    ///   `input.fx`: (B, N, fun_dim) (absent when fun_dim = 0); `input.time`: (B, 1) with
    ///   `time_input`; `input.grid`: the grid shape (structured; optional in 1-D, where N must
    ///   be a multiple of 16)
    /// - `train`: BatchNorm (steady tasks) uses and updates batch statistics
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        let (x, ctx) = enter_frame(LsmConfig::ARCH, &self.frame, input)?;
        let size = x.size();
        if size[2..].iter().any(|&s| s < 16 || s % 16 != 0) {
            return Err(Error::Shape {
                op: "LSM",
                expected: "a latent grid of multiples of 16 per axis (NSL does not pad 1-D \
                           grids: their length must be one)"
                    .into(),
                got: size,
            });
        }
        let patch: Vec<i64> = size[2..].iter().map(|s| s / 16).collect();
        let h = self.unet.forward_through(&x, train, &mut |level, t| {
            self.blocks[level].forward(t, &patch)
        })?;
        let h = self.frame.leave(&h, &ctx)?;
        Ok(self.fc2.forward(&gelu(&self.fc1.forward(&h)?)?)?)
    }
}

crate::nsl::nsl_arch!(LsmConfig, Lsm, "lsm", "models.LSM.Model");

impl crate::nsl::NslPort for Lsm {
    fn port_forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        Lsm::forward(self, input, train)
    }

    fn structured_dims(&self) -> Option<usize> {
        self.cfg.structured_dims()
    }

    fn reset(&self) -> Result<()> {
        Ok(self.unet.reset_statistics()?)
    }
}
