//! Configuration of NSL's FNO (`nsl_fno`).

use serde::{Deserialize, Serialize};

use crate::{Error, Result};
use ono_nn::nsl_frame::{NslFrameConfig, NslGeometry};

/// NSL's `geotype`, as far as the FNO takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Geotype {
    /// `structured_{grid_dims}D`: the points are a row-major grid (its shape comes with the
    /// input).
    Structured,
    /// A 2-D point cloud on the Geo-FNO projection (`pos` = the points' coordinates).
    Unstructured,
}

/// `models/FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NslFnoConfig {
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
    /// Fourier modes per axis (`modes`; also the projections').
    pub modes: i64,
    /// The unified position embedding replaces the positions (structured only).
    pub unified_pos: bool,
    /// Reference points per axis of the unified position embedding (`ref`).
    #[serde(rename = "ref")]
    pub reference: i64,
}

impl Default for NslFnoConfig {
    fn default() -> Self {
        super::presets::by_name("darcy").expect("the darcy preset exists")
    }
}

impl NslFnoConfig {
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

    /// Spatial axes of the latent grid the Fourier layers run on.
    pub fn latent_dims(&self) -> usize {
        self.frame().latent_dims()
    }

    pub(crate) fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("nsl_fno: {msg}")));
        if self.modes < 1 || self.out_dim < 1 {
            return bad(format!(
                "modes {} and out_dim {} must be positive",
                self.modes, self.out_dim
            ));
        }
        self.frame().check().or_else(|e| bad(e.to_string()))
    }
}
