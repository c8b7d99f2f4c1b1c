//! The reference `MLP` (ONO `ONOmodel2.py` L92–119, shared with Transolver-style code):
//! `linear_pre = Sequential(Linear(in, hidden), GELU)`, optional residual hidden layers,
//! `linear_post = Linear(hidden, out)`. ONO only uses it with no hidden layers; NSL's grid models
//! use it as their lifting (`preprocess`) with PyTorch's default initialisation.

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::linear::{Linear, LinearInit};
use crate::Result;

/// Settings of [`Mlp`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MlpConfig {
    pub in_dim: i64,
    pub hidden: i64,
    pub out_dim: i64,
    /// Residual hidden layers `linears.<i>` (Linear(hidden, hidden) → GELU), 0 in ONO.
    pub n_layers: usize,
    /// Whether the hidden layers are residual (reference `res`, true by default).
    pub residual: bool,
    /// How the linear layers are drawn: trunc-normal(0.02) as ONO and Transolver-style models
    /// (the default), or PyTorch's default where the model applies no init of its own.
    #[serde(default)]
    pub init: LinearInit,
}

impl MlpConfig {
    pub fn new(in_dim: i64, hidden: i64, out_dim: i64) -> Self {
        Self {
            in_dim,
            hidden,
            out_dim,
            n_layers: 0,
            residual: true,
            init: LinearInit::TruncNormal,
        }
    }

    /// The same MLP with its linear layers drawn by `init`.
    pub fn with_init(self, init: LinearInit) -> Self {
        Self { init, ..self }
    }

    /// Registers `linear_pre.0`, `linears.<i>.0` and `linear_post` (the reference's names).
    pub fn init(&self, path: &Path) -> Mlp {
        let lin = self.init;
        Mlp {
            pre: lin.init(&(path / "linear_pre" / 0), self.in_dim, self.hidden),
            hidden: (0..self.n_layers)
                .map(|i| lin.init(&(path / "linears" / i / 0), self.hidden, self.hidden))
                .collect(),
            post: lin.init(&(path / "linear_post"), self.hidden, self.out_dim),
            residual: self.residual,
        }
    }
}

/// Linear → GELU (exact erf) → [hidden layers] → Linear.
#[derive(Debug)]
pub struct Mlp {
    pre: Linear,
    hidden: Vec<Linear>,
    post: Linear,
    residual: bool,
}

impl Mlp {
    /// # Shapes
    /// - `x`: (..., in_dim)
    /// - returns: (..., out_dim)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = gelu(&self.pre.forward(x)?)?;
        for layer in &self.hidden {
            let y = gelu(&layer.forward(&h)?)?;
            h = if self.residual { y.f_add(&h)? } else { y };
        }
        self.post.forward(&h)
    }

    /// The floating kind of the parameters.
    pub fn kind(&self) -> tch::Kind {
        self.pre.weight.kind()
    }
}

/// `nn.GELU()`: the exact erf form, not the tanh approximation.
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    Ok(x.f_gelu("none")?)
}
