//! The architectures this crate builds, and [`ModelConfig`], the configuration of any of them.
//!
//! Adding an architecture is one line in `registry!` below once its folder has a configuration
//! implementing [`ArchConfig`] (`arch.rs`; see docs/architecture.md, "Adding a model").
//!
//! [`ModelConfig`] is serialized as the architecture's own configuration with an `arch` field
//! (`{"arch": "ono", "n_layers": 8, …}`); a configuration without `arch` is ONO's, so model
//! files and checkpoints written before the registry existed still load.

use serde::{Deserialize, Serialize};
use tch::nn::Path;

pub use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};

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
                    return <$config as ArchConfig>::from_fields(fields).map(Self::$variant);
                })*
                Err(unknown_arch(arch))
            }

            /// The architecture that claims a reference fixture (its JSON sidecar), if any.
            pub fn reference_arch(json: &serde_json::Value) -> Option<&'static str> {
                $(if <$config as ArchConfig>::claims_reference(json) {
                    return Some(<$config as ArchConfig>::ARCH);
                })*
                None
            }

            /// The configuration of a reference fixture of architecture `arch`.
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
    Fno1d(crate::fno::FnoConfig<1>),
    Fno2d(crate::fno::FnoConfig<2>),
    Fno3d(crate::fno::FnoConfig<3>),
    GeoFno(crate::geofno::GeoFnoConfig),
    NslFno(crate::nsl_fno::NslFnoConfig),
    Ffno(crate::ffno::FfnoConfig),
    Ufno(crate::ufno::UfnoConfig),
    Lsm(crate::lsm::LsmConfig),
    Transolver(crate::transolver::TransolverConfig),
    Galerkin(crate::galerkin::GalerkinConfig),
    Gnot(crate::gnot::GnotConfig),
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
