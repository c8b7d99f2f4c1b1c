//! Configuration of NSL's U-FNO (`ufno`).

use serde::{Deserialize, Serialize};

use crate::nsl_fno::Geotype;
use crate::{Error, Result};
use ono_nn::nsl_frame::{NslFrameConfig, NslGeometry};
use ono_nn::unet::UNetNorm;

/// The norm of the U-Net branches: NSL picks BatchNorm for `task = steady` and
/// InstanceNorm(affine) for the time-dependent tasks (`models/U_Net.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnetNorm {
    Batch,
    Instance,
}

impl From<UnetNorm> for UNetNorm {
    fn from(n: UnetNorm) -> Self {
        match n {
            UnetNorm::Batch => UNetNorm::Batch,
            UnetNorm::Instance => UNetNorm::Instance,
        }
    }
}

/// `models/U_FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UfnoConfig {
    /// Coordinate channels of `pos` (from the data).
    pub space_dim: i64,
    /// Channels of the input function (from the data; 0: none).
    pub fun_dim: i64,
    /// Output channels (from the data).
    pub out_dim: i64,
    /// A time value per sample (from the data; NSL's plasticity).
    pub time_input: bool,
    pub geotype: Geotype,
    /// Axes of a structured grid (NSL: `len(shapelist)`), 1 ..= 3.
    pub grid_dims: usize,
    /// (s1, s2): the latent grid of the point-cloud projection (NSL: 96 × 96).
    pub latent: [i64; 2],
    /// Latent channels (`n_hidden`), also the U-Nets' base width.
    pub n_hidden: i64,
    /// Fourier modes per axis (`modes`; also the projections').
    pub modes: i64,
    /// The unified position embedding replaces the positions (structured only).
    pub unified_pos: bool,
    /// Reference points per axis of the unified position embedding (`ref`).
    #[serde(rename = "ref")]
    pub reference: i64,
    /// The norm of the U-Net branches (NSL: from `task`).
    pub unet_norm: UnetNorm,
}

impl Default for UfnoConfig {
    fn default() -> Self {
        super::presets::by_name("darcy").expect("the darcy preset exists")
    }
}

impl UfnoConfig {
    /// The frame's settings (also those of the embedded U-Nets' unused frames).
    pub fn frame(&self) -> NslFrameConfig {
        NslFrameConfig {
            space_dim: self.space_dim,
            fun_dim: self.fun_dim,
            n_hidden: self.n_hidden,
            unified_pos: self.unified_pos,
            reference: self.reference,
            time_input: self.time_input,
            geometry: match self.geotype {
                Geotype::Structured => NslGeometry::Structured {
                    dims: self.grid_dims,
                },
                Geotype::Unstructured => NslGeometry::Unstructured {
                    latent: self.latent,
                    modes: self.modes,
                },
            },
        }
    }

    /// The axes of a structured grid; `None` on point clouds.
    pub fn structured_dims(&self) -> Option<usize> {
        (self.geotype == Geotype::Structured).then_some(self.grid_dims)
    }

    /// Spatial axes of the latent grid the layers run on.
    pub fn latent_dims(&self) -> usize {
        self.frame().latent_dims()
    }

    pub(crate) fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("ufno: {msg}")));
        if self.modes < 1 || self.out_dim < 1 {
            return bad(format!(
                "modes {} and out_dim {} must be positive",
                self.modes, self.out_dim
            ));
        }
        self.frame().check().or_else(|e| bad(e.to_string()))
    }
}
