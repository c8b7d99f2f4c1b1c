//! What one architecture provides to the registry (`registry.rs`): its configuration's
//! [`ArchConfig`], [`Presets`] and [`FromReference`] implementations, and the data dimensions
//! every configuration takes.

use serde::de::DeserializeOwned;
use serde::Serialize;
use tch::nn::Path;

use crate::operator::NeuralOperator;
use crate::{Error, Result};

/// The dimensions a model takes from its data: set by the trainer before building, so a preset
/// fits any data set of its kind.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DataDims {
    /// Coordinate channels of the positions.
    pub space_dim: i64,
    /// Channels of the input function at the points (global parameters θ included: the trainer
    /// appends them to it at every point).
    pub fun_dim: i64,
    /// Output channels.
    pub out_dim: i64,
    /// Whether each sample comes with a time value (B, 1).
    pub time_input: bool,
    /// Channels of each input function on its own points (GNOT's branches), in order.
    pub functions: Vec<i64>,
}

impl DataDims {
    /// `(space_dim, fun_dim, out_dim)`, the channels every configuration takes.
    pub fn channels(&self) -> (i64, i64, i64) {
        (self.space_dim, self.fun_dim, self.out_dim)
    }
}

/// The presets of an architecture's configuration, implemented in its folder's `presets.rs`.
pub trait Presets: Sized {
    /// The preset names, in their canonical spelling (a benchmark's preset under the benchmark's
    /// own name, as `ono_data` spells it: `ns2d`, not `ns`).
    const NAMES: &'static [&'static str];

    /// The preset of a canonical name (one of [`NAMES`](Self::NAMES)), `None` for any other
    /// name. [`ArchConfig::preset`] reads a user's spelling.
    fn by_name(name: &str) -> Option<Self>;
}

/// How an architecture's reference fixtures describe its configuration, implemented in its
/// folder's `reference.rs`. The defaults suit an architecture with no reference to check against.
pub trait FromReference: Sized {
    /// Whether a reference fixture (its JSON sidecar) is a case of this architecture: by default
    /// when its `family` is the `arch` name.
    fn claims_reference(json: &serde_json::Value) -> bool
    where
        Self: ArchConfig,
    {
        json["family"].as_str() == Some(Self::ARCH)
    }

    /// The configuration from a reference fixture's JSON (its constructor arguments), for
    /// `ono check-reference`.
    fn from_reference(json: &serde_json::Value) -> Result<Self>
    where
        Self: ArchConfig,
    {
        let _ = json;
        Err(Error::Config(format!(
            "architecture `{}` has no reference implementation to check against",
            Self::ARCH
        )))
    }
}

/// What a configuration of one architecture provides to the registry: its presets
/// ([`Presets`], `presets.rs`), its reference fixtures ([`FromReference`], `reference.rs`) and
/// the rest of what [`ModelConfig`](crate::ModelConfig) dispatches to.
pub trait ArchConfig:
    Presets + FromReference + std::fmt::Debug + Serialize + DeserializeOwned + Clone + PartialEq
{
    /// The `arch` name.
    const ARCH: &'static str;

    /// Checks every field.
    fn validate(&self) -> Result<()>;

    /// Takes the data's dimensions.
    fn set_data_dims(&mut self, dims: DataDims);

    /// Builds the operator on `path`, with the architecture's initialisation.
    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>>;

    /// A preset by name, case-insensitive, `-` for `_`, an older spelling for the canonical one
    /// (`ns` for `ns2d`), or [`Error::Config`] listing the names.
    fn preset(name: &str) -> Result<Self> {
        Self::by_name(&preset_key(name)).ok_or_else(|| {
            Error::Config(format!(
                "unknown {} preset {name:?}; known: {}",
                Self::ARCH,
                Self::NAMES.join(", ")
            ))
        })
    }

    /// The configuration from its fields (no `arch` key), as serde reads it by default.
    fn from_fields(fields: serde_json::Value) -> Result<Self> {
        serde_json::from_value(fields)
            .map_err(|e| Error::Config(format!("{} configuration: {e}", Self::ARCH)))
    }
}

/// The six benchmarks of the ONO paper's Table 1 (NSL's StandardBench) under their own names, as
/// `ono_data` spells them: the presets of every NSL port, and ONO's first six.
pub(crate) const BENCHMARKS: [&str; 6] = [
    "darcy",
    "ns2d",
    "airfoil",
    "pipe",
    "elasticity",
    "plasticity",
];

/// Older spellings of preset names, each read as the canonical one: the ports of the NSL and
/// FNO scripts named the Navier–Stokes benchmark `ns`, and experiment files written then still
/// say so.
const PRESET_ALIASES: &[(&str, &str)] = &[("ns", "ns2d")];

/// A preset name as [`Presets::by_name`] takes it: lower case, `-` as `_`, an older spelling
/// ([`PRESET_ALIASES`]) as the canonical one.
pub(crate) fn preset_key(name: &str) -> String {
    let key = name.to_ascii_lowercase().replace('-', "_");
    match PRESET_ALIASES.iter().find(|(old, _)| *old == key) {
        Some((_, canonical)) => canonical.to_string(),
        None => key,
    }
}
