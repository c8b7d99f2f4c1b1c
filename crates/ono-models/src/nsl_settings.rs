//! The settings every Neural-Solver-Library port shares: NSL's `args` fields that build its model
//! frame (`ono_nn::nsl_frame`), the geometry of its six StandardBench benchmarks, and reading a
//! configuration over its preset. Each NSL architecture's configuration is these settings
//! (flattened, so its fields stay top-level keys) plus its own.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use tch::Tensor;

use crate::arch::DataDims;
use crate::operator::{InputPart, ModelInput};
use crate::{Error, Result};
use ono_nn::nsl_frame::{FrameContext, FrameInput, NslFrame, NslFrameConfig, NslGeometry};
use ono_nn::unet::UNetNorm;

/// NSL's `geotype`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Geotype {
    /// `structured_{grid_dims}D`: the points are a row-major grid (its shape comes with the
    /// input).
    Structured,
    /// A 2-D point cloud on the Geo-FNO projection (`pos` = the points' coordinates).
    Unstructured,
}

/// The norm of NSL's U-Net blocks (U-FNO's branches, LSM's multiscale path): BatchNorm for
/// `task = steady`, InstanceNorm(affine) for the time-dependent tasks (`models/U_Net.py`,
/// `models/LSM.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnetNorm {
    Batch,
    Instance,
}

impl UnetNorm {
    /// NSL's choice from `args.task`: `normtype = 'bn' if args.task == 'steady' else 'in'`.
    pub fn of_task(task: Option<&str>) -> Self {
        if task == Some("steady") {
            Self::Batch
        } else {
            Self::Instance
        }
    }

    /// The norm of a StandardBench benchmark: its scripts run NS autoregressively and
    /// Plasticity conditioned on time (InstanceNorm), the rest steady (BatchNorm).
    pub(crate) fn of_bench(name: &str) -> Self {
        match name {
            "ns" | "plasticity" => Self::Instance,
            _ => Self::Batch,
        }
    }
}

impl From<UnetNorm> for UNetNorm {
    fn from(n: UnetNorm) -> Self {
        match n {
            UnetNorm::Batch => UNetNorm::Batch,
            UnetNorm::Instance => UNetNorm::Instance,
        }
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

/// NSL's StandardBench benchmarks, the presets of every NSL port.
pub(crate) const BENCHMARKS: &[&str] =
    &["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"];

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
            "ns" => grid(10, 1),
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

    /// Spatial axes of the latent grid the layers run on.
    pub fn latent_dims(&self) -> usize {
        self.frame().latent_dims()
    }

    /// Takes the data's dimensions.
    pub fn set_data_dims(&mut self, dims: DataDims) {
        self.space_dim = dims.space_dim;
        self.fun_dim = dims.fun_dim;
        self.out_dim = dims.out_dim;
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
    Ok(frame.enter(&FrameInput {
        pos: input.pos,
        fx: input.fx,
        time: input.time,
        grid: input.grid,
    })?)
}

/// What every NSL port's configuration shares, implemented in the port's module (which has
/// `presets::{NAMES, by_name}`, `reference::config`, the configuration's `check` and its
/// `nsl` settings): `Default` (the `darcy` preset), `Deref`/`DerefMut` to the settings, and
/// [`ArchConfig`](crate::ArchConfig): presets, `validate` = `check`, the data's dimensions
/// into the settings, fields read over the `darcy` preset ([`fields_over`]), `build` =
/// `$model::new`, and the fixtures whose model class is `$class`.
macro_rules! nsl_arch {
    ($config:ident, $model:ident, $arch:literal, $class:literal) => {
        impl Default for $config {
            fn default() -> Self {
                presets::by_name("darcy").expect("the darcy preset exists")
            }
        }

        impl std::ops::Deref for $config {
            type Target = $crate::nsl_settings::NslSettings;
            fn deref(&self) -> &Self::Target {
                &self.nsl
            }
        }

        impl std::ops::DerefMut for $config {
            fn deref_mut(&mut self) -> &mut Self::Target {
                &mut self.nsl
            }
        }

        impl $crate::arch::ArchConfig for $config {
            const ARCH: &'static str = $arch;

            fn preset_names() -> &'static [&'static str] {
                presets::NAMES
            }

            fn preset(name: &str) -> $crate::Result<Self> {
                presets::by_name(name)
            }

            fn validate(&self) -> $crate::Result<()> {
                self.check()
            }

            fn set_data_dims(&mut self, dims: $crate::arch::DataDims) {
                self.nsl.set_data_dims(dims);
            }

            /// Over the `darcy` preset, unknown fields refused
            /// ([`fields_over`](crate::nsl_settings::fields_over)).
            fn from_fields(fields: serde_json::Value) -> $crate::Result<Self> {
                $crate::nsl_settings::fields_over(Self::ARCH, fields, &Self::default())
            }

            fn build(
                &self,
                path: &tch::nn::Path,
            ) -> $crate::Result<Box<dyn $crate::operator::NeuralOperator>> {
                Ok(Box::new($model::new(path, self)?))
            }

            fn claims_reference(json: &serde_json::Value) -> bool {
                $crate::nsl_reference::claims(json, $class)
            }

            fn from_reference(json: &serde_json::Value) -> $crate::Result<Self> {
                reference::config(json)
            }
        }
    };
}
pub(crate) use nsl_arch;
