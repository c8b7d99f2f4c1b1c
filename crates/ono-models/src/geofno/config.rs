//! Configuration of Geo-FNO on point clouds (`geofno`).

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::GeoFno;
use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};

/// `FNO2d(modes1, modes2, width, in_channels=2, out_channels, is_mesh=True, s1, s2)` and
/// `IPHI(width)` of `elasticity/elas_geofno.py`. Missing fields take the `elasticity` preset's
/// values.
///
/// Where the inputs come from, by the data's dimensions (see the module documentation of
/// [`geofno`](super)): the mesh is `pos` when space_dim = 2, else the first two channels of
/// `fx`; the remaining fx channels are the geometry code (0 or 42 of them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GeoFnoConfig {
    /// Coordinate channels of `pos` (from the data).
    pub space_dim: i64,
    /// Channels of `fx` (from the data): [the mesh coordinates, when not in pos], then the
    /// geometry code.
    pub fun_dim: i64,
    /// Output channels (from the data; `out_channels`).
    pub out_dim: i64,
    /// (modes1, modes2): Fourier modes along the latent grid's axes (each sign of k1, k2 ≥ 0).
    pub modes: [i64; 2],
    /// Channels of the Fourier layers (`width`).
    pub width: i64,
    /// (s1, s2): the latent regular grid.
    pub latent: [i64; 2],
    /// Width of the deformation network `IPHI`.
    pub iphi_width: i64,
    /// Hidden width of `fc1` (128 in the script).
    pub proj_hidden: i64,
}

impl Default for GeoFnoConfig {
    fn default() -> Self {
        <Self as crate::arch::Presets>::by_name("elasticity").expect("the elasticity preset exists")
    }
}

impl GeoFnoConfig {
    /// Whether the mesh coordinates are `pos` (else the first two fx channels).
    pub fn mesh_in_pos(&self) -> bool {
        self.space_dim == 2
    }

    /// Channels of the geometry code at the end of `fx` (0 or 42 in a usable layout; the
    /// parameters do not depend on it, so any data dimensions build and the forward refuses a
    /// layout it cannot read).
    pub fn code_dim(&self) -> i64 {
        self.fun_dim - if self.mesh_in_pos() { 0 } else { 2 }
    }
}

impl ArchConfig for GeoFnoConfig {
    const ARCH: &'static str = "geofno";

    fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("geofno: {msg}")));
        let [m1, m2] = self.modes;
        let [s1, s2] = self.latent;
        if m1 < 1 || m2 < 1 || 2 * m1 > s1 || m2 > s2 / 2 + 1 {
            return bad(format!(
                "modes {:?} must be positive and fit the latent grid {s1} × {s2} (2·m1 ≤ s1, \
                 m2 ≤ s2/2 + 1)",
                self.modes
            ));
        }
        if self.width < 1 || self.proj_hidden < 1 || self.out_dim < 1 {
            return bad(format!(
                "width {}, proj_hidden {} and out_dim {} must be positive",
                self.width, self.proj_hidden, self.out_dim
            ));
        }
        if self.iphi_width < 4 || self.iphi_width % 4 != 0 {
            return bad(format!(
                "iphi_width {} must be a positive multiple of 4",
                self.iphi_width
            ));
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(GeoFno::new(path, self)?))
    }
}
