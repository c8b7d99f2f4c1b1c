//! Sinusoidal time embedding (ONO `timestep_embedding`, L121–139) and the `time_fc` MLP.

use tch::nn::Path;
use tch::Tensor;

use crate::linear::{Linear, LinearInit};
use crate::{Error, Result};

/// The reference's max period.
pub const MAX_PERIOD: f64 = 10000.0;

/// `[cos(t·f), sin(t·f)]` with f_i = exp(−ln(10000)·i/half), i < half = dim/2, cos first; an odd
/// `dim` gets a trailing zero column, as the reference. Computed in the dtype of `t`.
///
/// # Shapes
/// - `t`: (B, 1) — one time per sample, as the Plasticity script passes it
/// - returns: (B, 1, dim)
pub fn sinusoidal(t: &Tensor, dim: i64) -> Result<Tensor> {
    let size = t.size();
    if size.len() != 2 || size[1] != 1 || !t.is_floating_point() {
        return Err(Error::Shape {
            op: "sinusoidal time embedding",
            expected: "floating (B, 1)".into(),
            got: size,
        });
    }
    let half = dim / 2;
    let freqs = Tensor::f_arange(half, (t.kind(), t.device()))?
        .f_mul_scalar(-MAX_PERIOD.ln())?
        .f_div_scalar(half as f64)?
        .f_exp()?;
    let args = t.f_unsqueeze(-1)?.f_mul(&freqs)?; // (B, 1, half)
    let mut emb = Tensor::f_cat(&[args.f_cos()?, args.f_sin()?], -1)?;
    if dim % 2 == 1 {
        emb = Tensor::f_cat(&[&emb, &emb.f_narrow(-1, 0, 1)?.f_zeros_like()?], -1)?;
    }
    Ok(emb)
}

/// `time_fc = Sequential(Linear(h, h), SiLU, Linear(h, h))` on the embedding (names `0`, `2`).
#[derive(Debug)]
pub struct TimeMlp {
    fc1: Linear,
    fc2: Linear,
    dim: i64,
}

impl TimeMlp {
    /// With ONO's trunc-normal(0.02) linear layers.
    pub fn new(path: &Path, dim: i64) -> Self {
        Self::with_init(path, dim, LinearInit::TruncNormal)
    }

    /// With the linear layers drawn by `lin` (NSL's grid models: PyTorch defaults).
    pub fn with_init(path: &Path, dim: i64, lin: LinearInit) -> Self {
        Self {
            fc1: lin.init(&(path / 0), dim, dim),
            fc2: lin.init(&(path / 2), dim, dim),
            dim,
        }
    }

    /// Embeds `t`, then Linear → SiLU → Linear.
    ///
    /// # Shapes
    /// - `t`: (B, 1)
    /// - returns: (B, 1, dim), to be broadcast over the points
    pub fn forward(&self, t: &Tensor) -> Result<Tensor> {
        let emb = sinusoidal(&t.f_to_kind(self.fc1.weight.kind())?, self.dim)?;
        self.fc2.forward(&self.fc1.forward(&emb)?.f_silu()?)
    }
}
