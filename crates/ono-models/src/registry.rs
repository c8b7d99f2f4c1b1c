//! The architectures this crate builds, and [`ModelConfig`], the configuration of any of them.
//!
//! Adding an architecture is one line in `registry!` below once its folder has a configuration
//! implementing [`ArchConfig`] (`arch.rs`; see docs/architecture.md, "Adding a model").
//!
//! [`ModelConfig`] is serialized as the architecture's own configuration with an `arch` field
//! (`{"arch": "ono", "n_layers": 8, …}`); a configuration without `arch` is ONO's, as in an
//! experiment file's model section.

use serde::{Deserialize, Serialize};
use tch::nn::Path;

pub use crate::arch::{ArchConfig, DataDims, FromReference, Presets};
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

        /// The registered architectures' associated functions, in the order of [`ARCHS`].
        const ENTRIES: &[Entry] = &[$(Entry::of::<$config>()),*];

        impl ModelConfig {
            /// The architecture's configuration.
            fn inner(&self) -> &dyn AnyConfig {
                match self {
                    $(Self::$variant(c) => c),*
                }
            }

            /// The architecture's configuration, to change.
            fn inner_mut(&mut self) -> &mut dyn AnyConfig {
                match self {
                    $(Self::$variant(c) => c),*
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
    NslFno(crate::nsl::fno::NslFnoConfig),
    Ffno(crate::nsl::ffno::FfnoConfig),
    Ufno(crate::nsl::ufno::UfnoConfig),
    Lsm(crate::nsl::lsm::LsmConfig),
    Transolver(crate::nsl::transolver::TransolverConfig),
    Galerkin(crate::galerkin::GalerkinConfig),
    Gnot(crate::gnot::GnotConfig),
}

/// An architecture's associated functions ([`ArchConfig`]'s `Sized` part), producing
/// [`ModelConfig`]s: what the registry looks up by name.
struct Entry {
    arch: &'static str,
    preset_names: &'static [&'static str],
    preset: fn(&str) -> Result<ModelConfig>,
    from_fields: fn(serde_json::Value) -> Result<ModelConfig>,
    claims_reference: fn(&serde_json::Value) -> bool,
    from_reference: fn(&serde_json::Value) -> Result<ModelConfig>,
}

impl Entry {
    const fn of<C: ArchConfig>() -> Self
    where
        ModelConfig: From<C>,
    {
        Self {
            arch: C::ARCH,
            preset_names: C::NAMES,
            preset: |name| C::preset(name).map(ModelConfig::from),
            from_fields: |fields| C::from_fields(fields).map(ModelConfig::from),
            claims_reference: C::claims_reference,
            from_reference: |json| C::from_reference(json).map(ModelConfig::from),
        }
    }

    /// The entry of architecture `arch`.
    fn named(arch: &str) -> Result<&'static Entry> {
        ENTRIES
            .iter()
            .find(|e| e.arch == arch)
            .ok_or_else(|| unknown_arch(arch))
    }
}

/// An architecture's configuration as a value ([`ArchConfig`]'s methods that need no `Sized`).
trait AnyConfig {
    fn arch(&self) -> &'static str;
    fn fields(&self) -> serde_json::Result<serde_json::Value>;
    fn validate(&self) -> Result<()>;
    fn set_data_dims(&mut self, dims: DataDims);
    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>>;
}

impl<C: ArchConfig> AnyConfig for C {
    fn arch(&self) -> &'static str {
        C::ARCH
    }

    fn fields(&self) -> serde_json::Result<serde_json::Value> {
        serde_json::to_value(self)
    }

    fn validate(&self) -> Result<()> {
        ArchConfig::validate(self)
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        ArchConfig::set_data_dims(self, dims)
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        ArchConfig::build(self, path)
    }
}

impl ModelConfig {
    /// The architecture's name.
    pub fn arch(&self) -> &'static str {
        self.inner().arch()
    }

    /// A preset of architecture `arch`.
    pub fn preset(arch: &str, name: &str) -> Result<Self> {
        (Entry::named(arch)?.preset)(name)
    }

    /// The presets of architecture `arch`.
    pub fn preset_names(arch: &str) -> Result<&'static [&'static str]> {
        Ok(Entry::named(arch)?.preset_names)
    }

    /// The configuration of architecture `arch` from its fields (no `arch` key).
    pub fn from_fields(arch: &str, fields: serde_json::Value) -> Result<Self> {
        (Entry::named(arch)?.from_fields)(fields)
    }

    /// The architecture that claims a reference fixture (its JSON sidecar), if any.
    pub fn reference_arch(json: &serde_json::Value) -> Option<&'static str> {
        ENTRIES
            .iter()
            .find(|e| (e.claims_reference)(json))
            .map(|e| e.arch)
    }

    /// The configuration of a reference fixture of architecture `arch`.
    pub fn from_reference(arch: &str, json: &serde_json::Value) -> Result<Self> {
        (Entry::named(arch)?.from_reference)(json)
    }

    /// The fields without `arch`.
    pub fn fields(&self) -> Result<serde_json::Value> {
        self.inner()
            .fields()
            .map_err(|e| Error::Config(e.to_string()))
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<()> {
        self.inner().validate()
    }

    /// Takes the data's dimensions.
    pub fn set_data_dims(&mut self, dims: DataDims) {
        self.inner_mut().set_data_dims(dims)
    }

    /// Builds the operator on `path` (after [`validate`](Self::validate)).
    pub fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        self.validate()?;
        self.inner().build(path)
    }
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
