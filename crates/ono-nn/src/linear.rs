//! Linear layer with the initialisation the reference models use.

use serde::{Deserialize, Serialize};
use tch::nn::{Init, Path};
use tch::Tensor;

use crate::precision::{to_compute, to_compute_opt};
use crate::Result;

/// `timm.trunc_normal_(std=0.02)` as ONO (and NSL's GNOT) apply it to every `nn.Linear`. Its bounds are
/// ±2 in absolute value, i.e. ±100σ, so it never truncates in practice and is drawn as N(0, 0.02²).
pub const REFERENCE_STD: f64 = 0.02;

/// PyTorch's default init bound for a layer with `fan_in` inputs: `kaiming_uniform_(a = √5)` on
/// the weight and U(−1/√fan_in, 1/√fan_in) on the bias reduce to the same bound 1/√fan_in.
pub fn default_bound(fan_in: i64) -> f64 {
    if fan_in > 0 {
        1.0 / (fan_in as f64).sqrt()
    } else {
        0.0
    }
}

/// `nn.Linear(in_dim, out_dim, bias)` with PyTorch's default initialisation (weight and bias
/// uniform in ±1/√in_dim), under the names `weight` and `bias`.
pub fn torch_linear(path: &Path, in_dim: i64, out_dim: i64, bias: bool) -> Linear {
    let b = default_bound(in_dim);
    let init = Init::Uniform { lo: -b, up: b };
    Linear {
        weight: path.var("weight", &[out_dim, in_dim], init),
        bias: bias.then(|| path.var("bias", &[out_dim], init)),
    }
}

/// How a block draws the parameters of its linear layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinearInit {
    /// [`LinearConfig::default`]: N(0, 0.02²) weights, zero bias (ONO, Transolver, GNOT, which
    /// apply `trunc_normal_(std=0.02)` to every `nn.Linear`).
    #[default]
    TruncNormal,
    /// PyTorch's `nn.Linear` default, weight and bias U(±1/√in) ([`torch_linear`]):
    /// the models that leave their layers as built (the FNO family, NSL's FNO/F-FNO/U-FNO/LSM).
    Torch,
}

impl LinearInit {
    /// Registers `weight` (out, in) and `bias` (out) on `path`.
    pub fn init(self, path: &Path, in_dim: i64, out_dim: i64) -> Linear {
        match self {
            LinearInit::TruncNormal => LinearConfig::default().init(path, in_dim, out_dim),
            LinearInit::Torch => torch_linear(path, in_dim, out_dim, true),
        }
    }
}

/// Settings of [`Linear`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LinearConfig {
    /// Whether the layer has a bias (initialised to zero).
    pub bias: bool,
    /// Standard deviation of the (untruncated) normal weight init.
    pub std: f64,
}

impl Default for LinearConfig {
    fn default() -> Self {
        Self {
            bias: true,
            std: REFERENCE_STD,
        }
    }
}

impl LinearConfig {
    pub fn no_bias() -> Self {
        Self {
            bias: false,
            ..Self::default()
        }
    }

    /// Registers `weight` (out, in) and, if configured, `bias` (out) on `path`.
    pub fn init(&self, path: &Path, in_dim: i64, out_dim: i64) -> Linear {
        let weight = path.var(
            "weight",
            &[out_dim, in_dim],
            Init::Randn {
                mean: 0.0,
                stdev: self.std,
            },
        );
        let bias = self
            .bias
            .then(|| path.var("bias", &[out_dim], Init::Const(0.0)));
        Linear { weight, bias }
    }
}

/// y = x Wᵀ + b, on the last dimension; in the compute kind of a mixed-precision scope
/// ([`crate::precision`]), the float32 weight and bias cast to it.
#[derive(Debug)]
pub struct Linear {
    pub weight: Tensor,
    pub bias: Option<Tensor>,
}

impl Linear {
    /// # Shapes
    /// - `x`: (..., in)
    /// - returns: (..., out)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let bias = to_compute_opt(self.bias.as_ref())?;
        Ok(to_compute(x)?.f_linear(&to_compute(&self.weight)?, bias.as_ref())?)
    }

    pub fn in_dim(&self) -> i64 {
        self.weight.size()[1]
    }

    pub fn out_dim(&self) -> i64 {
        self.weight.size()[0]
    }
}
