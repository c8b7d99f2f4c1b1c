//! The architectures this crate builds, and [`ModelConfig`], the configuration of any of them.
//!
//! Adding an architecture is one line in [`registry!`](registry) below once its folder has a
//! configuration implementing [`ArchConfig`] (see docs/architecture.md, "Adding a model").
//!
//! [`ModelConfig`] is serialized as the architecture's own configuration with an `arch` field
//! (`{"arch": "ono", "n_layers": 8, …}`); a configuration without `arch` is ONO's, so model
//! files and checkpoints written before the registry existed still load.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use tch::nn::Path;

use crate::operator::NeuralOperator;
use crate::{Error, Result};

/// The dimensions a model takes from its data: set by the trainer before building, so a preset
/// fits any data set of its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataDims {
    /// Coordinate channels of the positions.
    pub space_dim: i64,
    /// Channels of the input function at the points.
    pub fun_dim: i64,
    /// Output channels.
    pub out_dim: i64,
    /// Whether each sample comes with a time value (B, 1).
    pub time_input: bool,
}

/// What a configuration of one architecture provides. The associated functions (`Sized`) give
/// its presets; the rest is what [`ModelConfig`] dispatches to.
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

macro_rules! registry {
    ($($variant:ident($config:ty)),* $(,)?) => {
        /// The configuration of a model of any registered architecture.
        #[derive(Debug, Clone, PartialEq)]
        pub enum ModelConfig {
            $($variant($config)),*
        }

        /// The registered architectures' names.
        pub const ARCHS: &[&str] = &[$(<$config as ArchConfig>::ARCH),*];

        impl ModelConfig {
            /// The architecture's name.
            pub fn arch(&self) -> &'static str {
                match self {
                    $(Self::$variant(_) => <$config as ArchConfig>::ARCH),*
                }
            }

            /// A preset of architecture `arch`.
            pub fn preset(arch: &str, name: &str) -> Result<Self> {
                $(if arch == <$config as ArchConfig>::ARCH {
                    return Ok(Self::$variant(<$config as ArchConfig>::preset(name)?));
                })*
                Err(unknown_arch(arch))
            }

            /// The presets of architecture `arch`.
            pub fn preset_names(arch: &str) -> Result<&'static [&'static str]> {
                $(if arch == <$config as ArchConfig>::ARCH {
                    return Ok(<$config as ArchConfig>::preset_names());
                })*
                Err(unknown_arch(arch))
            }

            /// The configuration of architecture `arch` from its fields (no `arch` key).
            pub fn from_fields(arch: &str, fields: serde_json::Value) -> Result<Self> {
                $(if arch == <$config as ArchConfig>::ARCH {
                    return serde_json::from_value::<$config>(fields)
                        .map(Self::$variant)
                        .map_err(|e| Error::Config(format!("{arch} configuration: {e}")));
                })*
                Err(unknown_arch(arch))
            }

            /// The configuration of a reference fixture whose family is `arch`.
            pub fn from_reference(arch: &str, json: &serde_json::Value) -> Result<Self> {
                $(if arch == <$config as ArchConfig>::ARCH {
                    return <$config as ArchConfig>::from_reference(json).map(Self::$variant);
                })*
                Err(unknown_arch(arch))
            }

            /// The fields without `arch`.
            pub fn fields(&self) -> Result<serde_json::Value> {
                match self {
                    $(Self::$variant(c) => serde_json::to_value(c)),*
                }
                .map_err(|e| Error::Config(e.to_string()))
            }

            /// Checks every field.
            pub fn validate(&self) -> Result<()> {
                match self {
                    $(Self::$variant(c) => c.validate()),*
                }
            }

            /// Takes the data's dimensions.
            pub fn set_data_dims(&mut self, dims: DataDims) {
                match self {
                    $(Self::$variant(c) => c.set_data_dims(dims)),*
                }
            }

            /// Builds the operator on `path` (after [`validate`](Self::validate)).
            pub fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
                self.validate()?;
                match self {
                    $(Self::$variant(c) => c.build(path)),*
                }
            }
        }

        $(impl From<$config> for ModelConfig {
            fn from(c: $config) -> Self {
                Self::$variant(c)
            }
        })*
    };
}

// One line per architecture.
registry! {
    Ono(crate::ono::OnoConfig),
    Mlp(crate::pointwise::PointwiseMlpConfig),
}

fn unknown_arch(arch: &str) -> Error {
    Error::Config(format!(
        "unknown architecture `{arch}` (known: {})",
        ARCHS.join(", ")
    ))
}

/// The architecture a configuration without `arch` belongs to.
pub const DEFAULT_ARCH: &str = "ono";

impl Serialize for ModelConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let mut fields = self.fields().map_err(serde::ser::Error::custom)?;
        let mut obj = serde_json::Map::new();
        obj.insert("arch".into(), self.arch().into());
        if let Some(f) = fields.as_object_mut() {
            obj.append(f);
        }
        serde_json::Value::Object(obj).serialize(s)
    }
}

impl<'de> Deserialize<'de> for ModelConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut value = serde_json::Value::deserialize(d)?;
        let obj = value
            .as_object_mut()
            .ok_or_else(|| serde::de::Error::custom("a model configuration must be a table"))?;
        let arch = match obj.remove("arch") {
            None => DEFAULT_ARCH.to_string(),
            Some(serde_json::Value::String(s)) => s,
            Some(other) => {
                return Err(serde::de::Error::custom(format!(
                    "`arch` must be a string, got {other}"
                )))
            }
        };
        ModelConfig::from_fields(&arch, value).map_err(serde::de::Error::custom)
    }
}
