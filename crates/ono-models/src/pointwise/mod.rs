//! The pointwise MLP operator (`arch = "mlp"`): one MLP applied to [position, input function,
//! time] at each point independently. It sees no neighbour, so it is the floor every operator
//! must beat, and the worked example of adding an architecture (docs/architecture.md).
//!
//! ```text
//! [pos, fx, t] → Linear(in → width) → GELU → n_layers × (Linear → GELU, residual) → Linear(width → out)
//! ```

mod config;
pub mod presets;

pub use config::PointwiseMlpConfig;

use ono_kernels::health;
use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::arch::{ArchConfig, DataDims};
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::mlp::{Mlp, MlpConfig};

/// See the module documentation.
#[derive(Debug)]
pub struct PointwiseMlp {
    cfg: PointwiseMlpConfig,
    mlp: Mlp,
}

impl PointwiseMlp {
    pub(crate) fn new(cfg: PointwiseMlpConfig, mlp: Mlp) -> Self {
        Self { cfg, mlp }
    }

    /// Forward pass (no training-mode behaviour: no dropout, no statistics).
    ///
    /// # Shapes
    /// - `input.pos`: (B, N, space_dim); `input.fx`: (B, N, fun_dim), required when
    ///   `fun_dim > 0`; `input.time`: (B, 1) exactly when `time_input`
    /// - `input.mask`: optional (B, N) bool; padded rows of the output are 0
    /// - returns: (B, N, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>) -> Result<Tensor> {
        const OP: &str = "PointwiseMlp::forward";
        input.refuse(
            PointwiseMlpConfig::ARCH,
            &[InputPart::Query, InputPart::Functions],
        )?;
        let c = &self.cfg;
        let ps = input.pos.size();
        let [b, n] = match ps[..] {
            [b, n, d] if d == c.space_dim && b > 0 && n > 0 => [b, n],
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, N, {}) with B, N > 0", c.space_dim),
                    got: ps,
                })
            }
        };
        let kind = self.mlp.kind();
        let mut features = vec![input.pos.f_to_kind(kind)?];
        match (input.fx, c.fun_dim) {
            (Some(fx), _) if fx.size() == [b, n, c.fun_dim] => features.push(fx.f_to_kind(kind)?),
            (None, 0) => {}
            (fx, _) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("fx ({b}, {n}, {}) matching pos", c.fun_dim),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        }
        match (input.time, c.time_input) {
            (Some(t), true) if t.numel() as i64 == b => features.push(
                t.f_reshape([b, 1, 1])?
                    .f_expand([b, n, 1], false)?
                    .f_to_kind(kind)?,
            ),
            (Some(t), true) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("time ({b}, 1)"),
                    got: t.size(),
                })
            }
            (None, true) => {
                return Err(Error::Config(format!(
                    "{OP}: the model has a time input; pass a time of shape ({b}, 1)"
                )))
            }
            (Some(_), false) => {
                return Err(Error::Config(format!(
                    "{OP}: a time was given but the model has no time input (time_input = false)"
                )))
            }
            (None, false) => {}
        }
        let x = Tensor::f_cat(&features, -1)?;
        health::require_finite("PointwiseMlp::forward: input", &x, || Error::NonFinite {
            op: OP,
            what: "the input (pos, fx or time)",
        })?;
        let out = self.mlp.forward(&x)?;
        match input.mask {
            Some(mask) if mask.size() == [b, n] => Ok(out.f_mul(
                &mask
                    .f_to_kind(Kind::Bool)?
                    .f_unsqueeze(-1)?
                    .f_to_kind(out.kind())?,
            )?),
            Some(mask) => Err(Error::Shape {
                op: OP,
                expected: format!("mask ({b}, {n})"),
                got: mask.size(),
            }),
            None => Ok(out),
        }
    }
}

impl ArchConfig for PointwiseMlpConfig {
    const ARCH: &'static str = "mlp";

    fn preset_names() -> &'static [&'static str] {
        &presets::NAMES
    }

    fn preset(name: &str) -> Result<Self> {
        presets::by_name(name)
    }

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
        self.space_dim = dims.space_dim;
        self.fun_dim = dims.fun_dim;
        self.out_dim = dims.out_dim;
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

impl NeuralOperator for PointwiseMlp {
    fn arch(&self) -> &'static str {
        PointwiseMlpConfig::ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, _train: bool) -> Result<Tensor> {
        PointwiseMlp::forward(self, input)
    }
}
