//! Configuration of NSL's F-FNO (`ffno`).

use serde::{Deserialize, Serialize};

use crate::nsl_fno::Geotype;
use crate::{Error, Result};
use ono_nn::nsl_frame::{NslFrameConfig, NslGeometry};

/// `models/F_FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FfnoConfig {
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
    /// Latent channels (`n_hidden`).
    pub n_hidden: i64,
    /// Residual factorised Fourier layers (`n_layers`).
    pub n_layers: usize,
    /// Fourier modes per axis (`modes`; also the projections').
    pub modes: i64,
    /// The unified position embedding replaces the positions (structured only).
    pub unified_pos: bool,
    /// Reference points per axis of the unified position embedding (`ref`).
    #[serde(rename = "ref")]
    pub reference: i64,
}

impl Default for FfnoConfig {
    fn default() -> Self {
        super::presets::by_name("darcy").expect("the darcy preset exists")
    }
}

impl FfnoConfig {
    /// The frame's settings.
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

    /// Spatial axes of the latent grid the Fourier layers run on.
    pub fn latent_dims(&self) -> usize {
        self.frame().latent_dims()
    }

    pub(crate) fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("ffno: {msg}")));
        if self.modes < 1 || self.out_dim < 1 || self.n_layers < 1 {
            return bad(format!(
                "modes {}, out_dim {} and n_layers {} must be positive",
                self.modes, self.out_dim, self.n_layers
            ));
        }
        self.frame().check().or_else(|e| bad(e.to_string()))
    }
}
