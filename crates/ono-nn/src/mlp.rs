//! The reference `MLP` (ONO `ONOmodel2.py` L92–119, shared with Transolver-style code):
//! `linear_pre = Sequential(Linear(in, hidden), GELU)`, optional residual hidden layers,
//! `linear_post = Linear(hidden, out)`. ONO only uses it with no hidden layers; NSL's grid models
//! use it as their lifting (`preprocess`) with PyTorch's default initialisation. GNOT's `MLP`
//! (`models/mlp.py`) computes the same with plain `nn.Linear`s ([`MlpNames::Plain`]).
//!
//! [`SequentialMlp`]: `nn.Sequential(Linear, GELU, Linear, …)` without residuals (GNOT's experts,
//! gate network and CGPT's feed-forward layers).

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::linear::torch_linear;
use crate::linear::{Linear, LinearInit};
use crate::{Error, Result};

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
    /// The parameter names of the reference's module.
    #[serde(default)]
    pub names: MlpNames,
}

/// How the reference names the linear layers of its MLP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MlpNames {
    /// ONO's `nn.Sequential(Linear, GELU)` blocks: `linear_pre.0`, `linears.<i>.0`,
    /// `linear_post`.
    #[default]
    Sequential,
    /// GNOT's plain `nn.Linear`s: `linear_pre`, `linears.<i>`, `linear_post`.
    Plain,
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
            names: MlpNames::Sequential,
        }
    }

    /// The same MLP with its linear layers drawn by `init`.
    pub fn with_init(self, init: LinearInit) -> Self {
        Self { init, ..self }
    }

    /// Registers `linear_pre`, `linears.<i>` and `linear_post` under the names of
    /// [`Self::names`], in the reference's construction order.
    pub fn init(&self, path: &Path) -> Mlp {
        let lin = self.init;
        let hidden = |path: &Path| -> Vec<Linear> {
            (0..self.n_layers)
                .map(|i| {
                    let p = path / "linears" / i;
                    match self.names {
                        MlpNames::Sequential => lin.init(&(&p / 0), self.hidden, self.hidden),
                        MlpNames::Plain => lin.init(&p, self.hidden, self.hidden),
                    }
                })
                .collect()
        };
        let post = |path: &Path| lin.init(&(path / "linear_post"), self.hidden, self.out_dim);
        let (pre, hidden, post) = match self.names {
            MlpNames::Sequential => {
                let pre = lin.init(&(path / "linear_pre" / 0), self.in_dim, self.hidden);
                (pre, hidden(path), post(path))
            }
            // mlp.py builds linear_pre, linear_post, then the hidden layers.
            MlpNames::Plain => {
                let pre = lin.init(&(path / "linear_pre"), self.in_dim, self.hidden);
                let post = post(path);
                (pre, hidden(path), post)
            }
        };
        Mlp {
            pre,
            hidden,
            post,
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

    /// The two linears of a plain `Linear → GELU → Linear` (no hidden layers), else None.
    pub(crate) fn two_layers(&self) -> Option<(&Linear, &Linear)> {
        self.hidden.is_empty().then_some((&self.pre, &self.post))
    }
}

/// `nn.Sequential(Linear(w₀, w₁), GELU, Linear(w₁, w₂), GELU, …)`: the linear layers at the even
/// indices `0, 2, 4, …` (the GELUs have no parameters), PyTorch's default initialisation.
#[derive(Debug)]
pub struct SequentialMlp {
    layers: Vec<Linear>,
}

impl SequentialMlp {
    /// Registers `<2i>.weight`, `<2i>.bias` for each consecutive pair of `widths` (at least two
    /// widths, all positive).
    pub fn new(path: &Path, widths: &[i64]) -> Result<Self> {
        if widths.len() < 2 || widths.iter().any(|&w| w < 1) {
            return Err(Error::Config(format!(
                "a sequential MLP needs two or more positive widths, got {widths:?}"
            )));
        }
        let layers = widths
            .windows(2)
            .enumerate()
            .map(|(i, w)| torch_linear(&(path / (2 * i)), w[0], w[1], true))
            .collect();
        Ok(Self { layers })
    }

    /// # Shapes
    /// - `x`: (..., w₀)
    /// - returns: (..., w_last)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let mut h = x.shallow_clone();
        for (i, layer) in self.layers.iter().enumerate() {
            if i > 0 {
                h = gelu(&h)?;
            }
            h = layer.forward(&h)?;
        }
        Ok(h)
    }
}

/// `nn.GELU()`: the exact erf form, not the tanh approximation.
pub fn gelu(x: &Tensor) -> Result<Tensor> {
    Ok(x.f_gelu("none")?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    /// The two naming schemes register the same layers under the references' names and compute
    /// the same function from the same weights.
    #[test]
    fn plain_names_are_gnots_and_compute_the_same() {
        let cfg = MlpConfig {
            n_layers: 2,
            ..MlpConfig::new(3, 5, 2).with_init(LinearInit::Torch)
        };
        let (a_vs, b_vs) = (VarStore::new(Device::Cpu), VarStore::new(Device::Cpu));
        let a = cfg.init(&a_vs.root());
        let b = MlpConfig {
            names: MlpNames::Plain,
            ..cfg
        }
        .init(&b_vs.root());
        let mut names: Vec<String> = b_vs.variables().into_keys().collect();
        names.sort();
        assert_eq!(
            names,
            [
                "linear_post.bias",
                "linear_post.weight",
                "linear_pre.bias",
                "linear_pre.weight",
                "linears.0.bias",
                "linears.0.weight",
                "linears.1.bias",
                "linears.1.weight"
            ]
        );
        let a_vars = a_vs.variables();
        tch::no_grad(|| {
            for (name, mut var) in b_vs.variables() {
                let theirs = name
                    .replace("linear_pre.", "linear_pre.0.")
                    .replace("linears.0.", "linears.0.0.")
                    .replace("linears.1.", "linears.1.0.");
                var.copy_(&a_vars[&theirs]);
            }
        });
        let x = Tensor::randn([4, 3], (Kind::Float, Device::Cpu));
        assert!(a.forward(&x).unwrap().equal(&b.forward(&x).unwrap()));
    }

    #[test]
    fn a_sequential_mlp_needs_two_positive_widths() {
        let vs = VarStore::new(Device::Cpu);
        assert!(SequentialMlp::new(&vs.root(), &[3]).is_err());
        assert!(SequentialMlp::new(&vs.root(), &[3, 0]).is_err());
        let m = SequentialMlp::new(&vs.root(), &[3, 4, 2]).unwrap();
        assert!(vs.variables().contains_key("2.weight"));
        let x = Tensor::randn([5, 3], (Kind::Float, Device::Cpu));
        assert_eq!(m.forward(&x).unwrap().size(), [5, 2]);
    }
}
