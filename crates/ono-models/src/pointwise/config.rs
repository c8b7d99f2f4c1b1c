//! Configuration of the pointwise MLP operator.

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::PointwiseMlp;
use crate::arch::{ArchConfig, DataDims, FromReference};
use crate::operator::NeuralOperator;
use crate::{Error, Result};
use ono_nn::mlp::MlpConfig;

/// The pointwise MLP's settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PointwiseMlpConfig {
    /// Coordinate channels of `pos` (from the data).
    pub space_dim: i64,
    /// Channels of the input function (from the data).
    pub fun_dim: i64,
    /// Output channels (from the data).
    pub out_dim: i64,
    /// Hidden width.
    pub width: i64,
    /// Residual hidden layers between the first and the last linear layer.
    pub n_layers: usize,
    /// A time value (B, 1) is appended to every point's features (from the data).
    pub time_input: bool,
}

impl PointwiseMlpConfig {
    /// Input features per point.
    pub fn in_dim(&self) -> i64 {
        self.space_dim + self.fun_dim + self.time_input as i64
    }
}

impl ArchConfig for PointwiseMlpConfig {
    const ARCH: &'static str = "mlp";

    fn validate(&self) -> Result<()> {
        if self.space_dim < 0 || self.fun_dim < 0 || self.in_dim() == 0 {
            return Err(Error::Config(format!(
                "mlp: space_dim {} and fun_dim {} must be ≥ 0 with at least one input channel",
                self.space_dim, self.fun_dim
            )));
        }
        if self.out_dim <= 0 || self.width <= 0 {
            return Err(Error::Config(format!(
                "mlp: out_dim {} and width {} must be positive",
                self.out_dim, self.width
            )));
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
        self.time_input = dims.time_input;
    }

    /// Registers `mlp.linear_pre.0`, `mlp.linears.<i>.0`, `mlp.linear_post` with the reference
    /// `Linear` initialisation of ono-nn (trunc-normal 0.02 weights, zero biases).
    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        self.validate()?;
        let mlp = MlpConfig {
            n_layers: self.n_layers,
            residual: true,
            ..MlpConfig::new(self.in_dim(), self.width, self.out_dim)
        }
        .init(&(path / "mlp"));
        Ok(Box::new(PointwiseMlp::new(self.clone(), mlp)))
    }
}

/// No reference implementation to check against.
impl FromReference for PointwiseMlpConfig {}
