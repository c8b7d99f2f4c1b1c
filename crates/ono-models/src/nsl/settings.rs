//! The settings every Neural-Solver-Library port shares: NSL's `args` fields that build its model
//! frame (`ono_nn::nsl_frame`), the geometry of its six StandardBench benchmarks, reading a
//! configuration over its preset, and the way into the frame. Each NSL architecture's
//! configuration is these settings (flattened, so its fields stay top-level keys) plus its own.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use tch::Tensor;

use crate::arch::DataDims;
use crate::operator::{InputPart, ModelInput};
use crate::{Error, Result};
use ono_nn::grid::Geometry;
use ono_nn::nsl_frame::{FrameContext, FrameInput, NslFrame, NslFrameConfig};
use ono_nn::unet::UNetNorm;

/// NSL's `geotype` as a configuration stores it. The frame takes it as an
/// [`ono_nn::grid::Geometry`] ([`NslSettings::geometry`]), which carries a structured grid's
/// axes; here they are a key of their own (`grid_dims`, NSL's `len(shapelist)`), kept on point
/// clouds too, so that configurations keep the keys and values they were written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Geotype {
    /// `structured_{grid_dims}D`: the points are a row-major grid (its shape comes with the
    /// input).
    Structured,
    /// A 2-D point cloud on the Geo-FNO projection (`pos` = the points' coordinates).
    Unstructured,
}

/// The norm of NSL's U-Net blocks in a StandardBench script: NSL derives it from the task
/// ([`UNetNorm::of_task`]), and its scripts run NS autoregressively and Plasticity conditioned
/// on time (InstanceNorm), the rest steady (BatchNorm).
pub(crate) fn bench_unet_norm(bench: &str) -> UNetNorm {
    match bench {
        "ns2d" | "plasticity" => UNetNorm::Instance,
        _ => UNetNorm::Batch,
    }
}

/// The frame's part of NSL's `args` and the constructor's `s1`, `s2`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NslSettings {
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

impl NslSettings {
    /// The settings of `scripts/StandardBench/<bench>/*.sh` with `n_hidden` latent channels: the
    /// data each benchmark's loader gives (85² Darcy with unified positions, 10 NS frames, the
    /// Airfoil and Pipe meshes, the Elasticity point cloud, Plasticity with a time input) and
    /// 12 modes. `None` for another name.
    pub(crate) fn bench(name: &str, n_hidden: i64) -> Option<Self> {
        let grid = |fun_dim, out_dim| Self {
            space_dim: 2,
            fun_dim,
            out_dim,
            time_input: false,
            geotype: Geotype::Structured,
            grid_dims: 2,
            latent: [96, 96],
            n_hidden,
            modes: 12,
            unified_pos: false,
            reference: 8,
        };
        Some(match name {
            "darcy" => Self {
                unified_pos: true,
                ..grid(1, 1)
            },
            "ns2d" => grid(10, 1),
            "airfoil" => grid(0, 1),
            "pipe" => grid(2, 1),
            "elasticity" => Self {
                geotype: Geotype::Unstructured,
                ..grid(0, 1)
            },
            "plasticity" => Self {
                time_input: true,
                ..grid(1, 4)
            },
            _ => return None,
        })
    }

    /// Where the points lie.
    pub fn geometry(&self) -> Geometry {
        match self.geotype {
            Geotype::Structured => Geometry::Structured {
                dims: self.grid_dims,
            },
            Geotype::Unstructured => Geometry::Unstructured,
        }
    }

    /// The frame's settings.
    pub fn frame(&self) -> NslFrameConfig {
        NslFrameConfig {
            space_dim: self.space_dim,
            fun_dim: self.fun_dim,
            n_hidden: self.n_hidden,
            unified_pos: self.unified_pos,
            reference: self.reference,
            time_input: self.time_input,
            geometry: self.geometry(),
            latent: self.latent,
            modes: self.modes,
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

    /// Takes the data's dimensions.
    pub fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
        self.time_input = dims.time_input;
    }

    /// Positive modes and outputs, and a frame that can be built; errors name `arch`.
    pub(crate) fn check(&self, arch: &str) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{arch}: {msg}")));
        if self.modes < 1 || self.out_dim < 1 {
            return bad(format!(
                "modes {} and out_dim {} must be positive",
                self.modes, self.out_dim
            ));
        }
        self.frame().check().or_else(|e| bad(e.to_string()))
    }
}

/// A configuration from its fields (`ArchConfig::from_fields`) over `base`: missing fields take
/// `base`'s values and a field `base` does not have is refused by name, which serde's
/// `deny_unknown_fields` cannot do for configurations with flattened settings.
pub(crate) fn fields_over<T: Serialize + DeserializeOwned>(
    arch: &str,
    fields: serde_json::Value,
    base: &T,
) -> Result<T> {
    let bad = |msg: String| Error::Config(format!("{arch} configuration: {msg}"));
    let serde_json::Value::Object(mut merged) =
        serde_json::to_value(base).map_err(|e| bad(e.to_string()))?
    else {
        return Err(bad("not a table".into()));
    };
    let serde_json::Value::Object(given) = fields else {
        return Err(bad(format!("expected a table, got {fields}")));
    };
    for (key, value) in given {
        if !merged.contains_key(&key) {
            let known: Vec<&String> = merged.keys().collect();
            return Err(bad(format!(
                "unknown field `{key}`, expected one of {known:?}"
            )));
        }
        merged.insert(key, value);
    }
    serde_json::from_value(serde_json::Value::Object(merged)).map_err(|e| bad(e.to_string()))
}

/// The way into an NSL port's latent grid: refuses the input parts no NSL model takes (masks,
/// input functions, query points, and a time without `time_input`), then
/// [`NslFrame::enter`].
///
/// # Shapes
/// - as [`NslFrame::enter`]
pub(crate) fn enter_frame(
    arch: &'static str,
    frame: &NslFrame,
    input: &ModelInput<'_>,
) -> Result<(Tensor, FrameContext)> {
    let mut refused = vec![InputPart::Mask, InputPart::Functions, InputPart::Query];
    if !frame.config().time_input {
        refused.push(InputPart::Time);
    }
    input.refuse(arch, &refused)?;
    ono_kernels::points::refuse(
        "the grid models' latent grid (FNO, F-FNO, U-FNO, LSM)",
        "the points are moved onto one whole grid",
    )?;
    Ok(frame.enter(&FrameInput {
        pos: input.pos,
        fx: input.fx,
        time: input.time,
        grid: input.grid,
    })?)
}
