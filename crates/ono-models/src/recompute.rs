//! How a training step trades memory for compute.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Error;

/// The activation-memory mode of a training step.
///
/// In configuration files it is a string (`"auto"`, `"none"`, `"blocks"`, `"selective"`); the
/// booleans of earlier files still read (`false` = none, `true` = blocks) and `none` and
/// `blocks` are written back as those booleans, so the configurations of earlier runs compare
/// unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Recompute {
    /// The architecture's default, chosen from measurements (docs/benchmarks.md): `selective`
    /// for ONO, `none` for the others.
    #[default]
    Auto,
    /// Autograd keeps every activation.
    None,
    /// Each block's activations are recomputed in the backward pass: about one block's
    /// activations in memory, one more forward pass.
    Blocks,
    /// The matrix products' outputs are kept and the element-wise operations recomputed in a
    /// hand-written backward pass: less memory than `none` at nearly its speed.
    Selective,
}

impl Recompute {
    pub const NAMES: [&'static str; 4] = ["auto", "none", "blocks", "selective"];

    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::None => "none",
            Self::Blocks => "blocks",
            Self::Selective => "selective",
        }
    }
}

impl std::fmt::Display for Recompute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Recompute {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "auto" => Ok(Self::Auto),
            "none" | "false" => Ok(Self::None),
            "blocks" | "true" => Ok(Self::Blocks),
            "selective" => Ok(Self::Selective),
            _ => Err(Error::Config(format!(
                "unknown recompute mode {s:?}; known: {}",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

impl Serialize for Recompute {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::None => s.serialize_bool(false),
            Self::Blocks => s.serialize_bool(true),
            other => s.serialize_str(other.name()),
        }
    }
}

impl<'de> Deserialize<'de> for Recompute {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Either {
            Bool(bool),
            Name(String),
        }
        match Either::deserialize(d)? {
            Either::Bool(false) => Ok(Self::None),
            Either::Bool(true) => Ok(Self::Blocks),
            Either::Name(n) => n.parse().map_err(serde::de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_names_and_the_old_booleans_and_writes_them_back() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct C {
            r: Recompute,
        }
        for (text, mode) in [
            ("r = false", Recompute::None),
            ("r = true", Recompute::Blocks),
            ("r = \"selective\"", Recompute::Selective),
            ("r = \"auto\"", Recompute::Auto),
            ("r = \"none\"", Recompute::None),
        ] {
            let c: C = toml::from_str(text).unwrap();
            assert_eq!(c.r, mode, "{text}");
            let back: C = toml::from_str(&toml::to_string(&c).unwrap()).unwrap();
            assert_eq!(back, c);
        }
        assert_eq!(
            toml::to_string(&C { r: Recompute::None }).unwrap().trim(),
            "r = false"
        );
        let err = toml::from_str::<C>("r = \"fast\"").unwrap_err().to_string();
        assert!(err.contains("selective"), "{err}");
    }
}
