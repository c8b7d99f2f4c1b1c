//! Configuration of the grid FNO (`fno1d`, `fno2d`, `fno3d`).

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::Fno;
use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};

/// The configuration of `fno{D}d`: the [`FnoSettings`] (serialized as they are), checked
/// against the dimension D. A newtype because serde derives nothing for const generics.
#[derive(Debug, Clone, PartialEq)]
pub struct FnoConfig<const D: usize>(pub FnoSettings);

impl<const D: usize> std::ops::Deref for FnoConfig<D> {
    type Target = FnoSettings;
    fn deref(&self) -> &FnoSettings {
        &self.0
    }
}

impl<const D: usize> std::ops::DerefMut for FnoConfig<D> {
    fn deref_mut(&mut self) -> &mut FnoSettings {
        &mut self.0
    }
}

impl<const D: usize> Serialize for FnoConfig<D> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, const D: usize> Deserialize<'de> for FnoConfig<D> {
    /// Missing fields take the dimension's first preset.
    fn deserialize<De: serde::Deserializer<'de>>(d: De) -> std::result::Result<Self, De::Error> {
        let base = serde_json::to_value(Self::default().0).map_err(serde::de::Error::custom)?;
        let mut fields = serde_json::Value::deserialize(d)?;
        if let (Some(obj), serde_json::Value::Object(defaults)) = (fields.as_object_mut(), base) {
            for (k, v) in defaults {
                obj.entry(k).or_insert(v);
            }
        }
        serde_json::from_value(fields)
            .map(Self)
            .map_err(serde::de::Error::custom)
    }
}

/// The settings of an FNO on a D-dimensional regular grid, as the reference scripts'
/// `FNO{D}d` constructors and their hard-coded constants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FnoSettings {
    /// Coordinate channels of the points (from the data); read only with `pos_input`.
    pub space_dim: i64,
    /// Channels of the input function (from the data): a(x) for Darcy and Burgers, the last 10
    /// frames for NS, 0 for the Geo-FNO meshes.
    pub fun_dim: i64,
    /// Output channels (from the data).
    pub out_dim: i64,
    /// Retained Fourier modes per axis (`modes1`, `modes2`, `modes3`); the last axis is the
    /// halved one of the rFFT.
    pub modes: Vec<i64>,
    /// Channels of the Fourier layers (`width`).
    pub width: i64,
    /// Fourier layers (4 in every script).
    pub n_layers: usize,
    /// Zeros appended at the end of each axis before the Fourier layers and cropped after them
    /// (`fourier_2d.py`: 9 on both axes; `fourier_3d.py`: 6 on t only; Geo-FNO 8 or 5).
    pub padding: Vec<i64>,
    /// Geo-FNO on a structured mesh: the points' physical coordinates enter `fc0` (before the
    /// input function and the index grid), so the FNO runs on the computational grid of the
    /// mesh (Airfoil, Pipe).
    pub pos_input: bool,
    /// Hidden width of the projection `fc1` (128 in every script).
    pub proj_hidden: i64,
    /// `bn0 … bn{n_layers−1}`: the BatchNorms `fourier_2d_time.py`, `fourier_3d.py` and
    /// `plasticity_3d.py` construct but never call. They hold parameters and buffers, so a
    /// reference `state_dict` only loads with them (and parameter counts include them).
    pub unused_batchnorms: bool,
}

impl<const D: usize> FnoConfig<D> {
    /// Channels entering `fc0`: [physical coordinates], input function, index grid.
    pub fn in_channels(&self) -> i64 {
        self.pos_input as i64 * self.space_dim + self.fun_dim + D as i64
    }
}

impl<const D: usize> Default for FnoConfig<D> {
    /// The first preset of the dimension (Burgers, Darcy, NS-3D).
    fn default() -> Self {
        super::presets::base()
    }
}

impl<const D: usize> ArchConfig for FnoConfig<D> {
    const ARCH: &'static str = match D {
        1 => "fno1d",
        2 => "fno2d",
        _ => "fno3d",
    };

    fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{}: {msg}", Self::ARCH)));
        if self.modes.len() != D || self.modes.iter().any(|&m| m < 1) {
            return bad(format!(
                "modes must be {D} positive numbers, got {:?}",
                self.modes
            ));
        }
        if self.padding.len() != D || self.padding.iter().any(|&p| p < 0) {
            return bad(format!(
                "padding must be {D} numbers ≥ 0, got {:?}",
                self.padding
            ));
        }
        if self.width < 1 || self.proj_hidden < 1 || self.out_dim < 1 || self.n_layers < 1 {
            return bad(format!(
                "width {}, proj_hidden {}, out_dim {} and n_layers {} must be positive",
                self.width, self.proj_hidden, self.out_dim, self.n_layers
            ));
        }
        if self.fun_dim < 0 || self.space_dim < 0 {
            return bad(format!(
                "fun_dim {} and space_dim {} must be ≥ 0",
                self.fun_dim, self.space_dim
            ));
        }
        if self.pos_input && self.space_dim == 0 {
            return bad("pos_input needs coordinates (space_dim > 0)".into());
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(Fno::new(path, self)?))
    }
}
