//! What one architecture provides to the registry (`registry.rs`): its configuration's
//! [`ArchConfig`] implementation, and the data dimensions every configuration takes.

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

/// What a configuration of one architecture provides. The associated functions (`Sized`) give
/// its presets; the rest is what [`ModelConfig`](crate::ModelConfig) dispatches to.
pub trait ArchConfig: std::fmt::Debug + Serialize + DeserializeOwned + Clone + PartialEq {
    /// The `arch` name.
    const ARCH: &'static str;

    /// The names of the presets.
    fn preset_names() -> &'static [&'static str];

    /// A preset by name (case-insensitive, `-` for `_`), or [`Error::Config`] listing the names.
    fn preset(name: &str) -> Result<Self>;

    /// Checks every field.
    fn validate(&self) -> Result<()>;

    /// Takes the data's dimensions.
    fn set_data_dims(&mut self, dims: DataDims);

    /// Builds the operator on `path`, with the architecture's initialisation.
    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>>;

    /// The configuration from its fields (no `arch` key), as serde reads it by default.
    fn from_fields(fields: serde_json::Value) -> Result<Self> {
        serde_json::from_value(fields)
            .map_err(|e| Error::Config(format!("{} configuration: {e}", Self::ARCH)))
    }

    /// Whether a reference fixture (its JSON sidecar) is a case of this architecture: by default
    /// when its `family` is the `arch` name.
    fn claims_reference(json: &serde_json::Value) -> bool {
        json["family"].as_str() == Some(Self::ARCH)
    }

    /// The configuration from a reference fixture's JSON (its constructor arguments), for
    /// `ono check-reference`.
    fn from_reference(json: &serde_json::Value) -> Result<Self> {
        let _ = json;
        Err(Error::Config(format!(
            "architecture `{}` has no reference implementation to check against",
            Self::ARCH
        )))
    }
}

/// Normalizes a preset name for lookup: lower case, `-` as `_`.
pub fn normalize_preset_name(name: &str) -> String {
    name.to_ascii_lowercase().replace('-', "_")
}
