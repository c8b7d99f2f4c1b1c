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
use tch::{Kind, Tensor};

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::mlp::Mlp;

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

impl NeuralOperator for PointwiseMlp {
    fn arch(&self) -> &'static str {
        PointwiseMlpConfig::ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, _train: bool) -> Result<Tensor> {
        PointwiseMlp::forward(self, input)
    }
}
