//! The reference's `PointwiseRegressor` (`libs/model.py` L472–529 @ f9e7d6a). In the inverse
//! problem (ex3, `FourierTransformer2D`, `spacial_fc`) the point's coordinates are concatenated
//! to its features and lifted by `fc` (no activation after it); `SimpleTransformer` builds it
//! without `fc` and re-initialises it (`_initialize_layer`: xavier_uniform with gain 0.01 on
//! every weight, zero biases). Then `num_layers` × (Linear → activation → dropout) and a last
//! Linear. Every step is per point, so the decoder runs on a process's share of split points. Kept in the galerkin folder: the order (no
//! activation after the lift, dropout after every activation) and the names are this
//! reference's, not a generic MLP (`ono_nn::mlp` is ONO's).

use tch::nn::Path;
use tch::Tensor;

use super::config::RegressorActivation;
use crate::{Error, Result};
use ono_nn::linear::torch_linear;
use ono_nn::Linear;

/// Settings of [`PointwiseRegressor`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct PointwiseRegressorConfig {
    /// Feature channels in (n_hidden of the encoder).
    pub in_dim: i64,
    /// Coordinate channels concatenated after the features and lifted by `fc` (`spacial_dim`,
    /// with `spacial_fc`); `None`: no `fc`, the features go straight to the hidden layers
    /// (`in_dim` must then be `hidden`).
    pub coord_dim: Option<i64>,
    /// Width of the lift and the hidden layers (the reference passes n_hidden).
    pub hidden: i64,
    pub out_dim: i64,
    /// Hidden layers `ff.{i}` (`num_regressor_layers`).
    pub layers: usize,
    pub activation: RegressorActivation,
    /// After each hidden layer, in training (`decoder_dropout`).
    pub dropout: f64,
    /// `SimpleTransformer`'s re-initialisation: xavier_uniform with this gain on the weights,
    /// zero biases. `None`: PyTorch's default Linear init (`FourierTransformer2D` applies none
    /// of its own).
    pub xavier_gain: Option<f64>,
}

impl PointwiseRegressorConfig {
    /// Registers `fc` (in + coord → hidden, with coordinates), `ff.{i}.0` (hidden → hidden)
    /// and `out` (hidden → out), in the reference's order, then re-initialises them when
    /// `xavier_gain` says so.
    pub fn init(&self, path: &Path) -> Result<PointwiseRegressor> {
        let gain_ok = self.xavier_gain.is_none_or(|g| g.is_finite() && g >= 0.0);
        if self.in_dim < 1
            || self.coord_dim.is_some_and(|p| p < 0)
            || (self.coord_dim.is_none() && self.in_dim != self.hidden)
            || self.hidden < 1
            || self.out_dim < 1
            || self.layers < 1
            || !(0.0..=1.0).contains(&self.dropout)
            || !gain_ok
        {
            return Err(Error::Config(format!(
                "galerkin: pointwise regressor {self:?}"
            )));
        }
        let reg = PointwiseRegressor {
            fc: self
                .coord_dim
                .map(|p| torch_linear(&(path / "fc"), self.in_dim + p, self.hidden, true)),
            ff: (0..self.layers)
                .map(|i| torch_linear(&(path / "ff" / i / 0), self.hidden, self.hidden, true))
                .collect(),
            out: torch_linear(&(path / "out"), self.hidden, self.out_dim, true),
            cfg: *self,
        };
        if let Some(gain) = self.xavier_gain {
            let layers = reg.fc.iter().chain(&reg.ff).chain([&reg.out]);
            tch::no_grad(|| -> Result<()> {
                for l in layers {
                    let s = l.weight.size();
                    let bound = gain * (6.0 / (s[0] + s[1]) as f64).sqrt();
                    let _ = l.weight.shallow_clone().f_uniform_(-bound, bound)?;
                    if let Some(b) = &l.bias {
                        let _ = b.shallow_clone().f_zero_()?;
                    }
                }
                Ok(())
            })?;
        }
        Ok(reg)
    }
}

/// See [`PointwiseRegressorConfig`].
#[derive(Debug)]
pub(super) struct PointwiseRegressor {
    fc: Option<Linear>,
    ff: Vec<Linear>,
    out: Linear,
    cfg: PointwiseRegressorConfig,
}

impl PointwiseRegressor {
    /// The parameters' dtype.
    pub fn kind(&self) -> tch::Kind {
        self.out.weight.kind()
    }

    /// # Shapes
    /// - `x`: (..., in_dim); `coords`: (..., coord_dim) on the same points, with `fc` only
    /// - returns: (..., out_dim)
    pub fn forward(&self, x: &Tensor, coords: Option<&Tensor>, train: bool) -> Result<Tensor> {
        const OP: &str = "PointwiseRegressor::forward";
        let c = &self.cfg;
        let xs = x.size();
        let points = &xs[..xs.len().saturating_sub(1)];
        if xs.last() != Some(&c.in_dim) {
            return Err(Error::Shape {
                op: OP,
                expected: format!("features (..., {})", c.in_dim),
                got: xs,
            });
        }
        let mut h = match (&self.fc, c.coord_dim, coords) {
            (Some(fc), Some(p), Some(coords)) => {
                let ps = coords.size();
                if ps.last() != Some(&p) || points != &ps[..ps.len().saturating_sub(1)] {
                    return Err(Error::Shape {
                        op: OP,
                        expected: format!("coordinates (..., {p}) on the points {points:?}"),
                        got: ps,
                    });
                }
                fc.forward(&Tensor::f_cat(&[x, &coords.f_to_kind(x.kind())?], -1)?)?
            }
            (None, None, None) => x.shallow_clone(),
            _ => {
                return Err(Error::Config(format!(
                    "{OP}: coordinates go with regressor.fc (spacial_fc) and only with it"
                )))
            }
        };
        for layer in &self.ff {
            h = layer.forward(&h)?;
            h = match c.activation {
                RegressorActivation::Silu => h.f_silu()?,
                RegressorActivation::Relu => h.f_relu()?,
            };
            if train && c.dropout > 0.0 {
                h = h.f_dropout(c.dropout, true)?;
            }
        }
        Ok(self.out.forward(&h)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn cfg() -> PointwiseRegressorConfig {
        PointwiseRegressorConfig {
            in_dim: 6,
            coord_dim: Some(2),
            hidden: 5,
            out_dim: 3,
            layers: 2,
            activation: RegressorActivation::Relu,
            dropout: 0.5,
            xavier_gain: None,
        }
    }

    /// The reference's names and shapes: Linear(in + p → hidden), ff.{i}.0, out.
    #[test]
    fn variables_have_the_reference_names() {
        let vs = VarStore::new(Device::Cpu);
        cfg().init(&(vs.root() / "regressor")).unwrap();
        let mut names: Vec<(String, Vec<i64>)> = vs
            .variables()
            .into_iter()
            .map(|(n, t)| (n, t.size()))
            .collect();
        names.sort();
        let want = [
            ("regressor.fc.bias", vec![5]),
            ("regressor.fc.weight", vec![5, 8]),
            ("regressor.ff.0.0.bias", vec![5]),
            ("regressor.ff.0.0.weight", vec![5, 5]),
            ("regressor.ff.1.0.bias", vec![5]),
            ("regressor.ff.1.0.weight", vec![5, 5]),
            ("regressor.out.bias", vec![3]),
            ("regressor.out.weight", vec![3, 5]),
        ];
        let want: Vec<(String, Vec<i64>)> =
            want.into_iter().map(|(n, s)| (n.to_string(), s)).collect();
        assert_eq!(names, want);
    }

    /// Evaluation is deterministic and ignores the dropout; training drops; mismatched points
    /// and widths are shape errors.
    #[test]
    fn dropout_in_training_only_and_shapes_checked() {
        let vs = VarStore::new(Device::Cpu);
        let reg = cfg().init(&vs.root()).unwrap();
        let opts = (Kind::Float, Device::Cpu);
        let x = Tensor::randn([2, 4, 4, 6], opts);
        let p = Tensor::rand([2, 4, 4, 2], opts);
        let a = reg.forward(&x, Some(&p), false).unwrap();
        assert_eq!(a.size(), [2, 4, 4, 3]);
        assert!(a.equal(&reg.forward(&x, Some(&p), false).unwrap()));
        tch::manual_seed(0);
        assert!(!a.equal(&reg.forward(&x, Some(&p), true).unwrap()));
        let short = p.narrow(2, 0, 3);
        assert!(matches!(
            reg.forward(&x, Some(&short), false),
            Err(Error::Shape { .. })
        ));
        let wide = Tensor::rand([2, 4, 4, 3], opts);
        assert!(matches!(
            reg.forward(&x, Some(&wide), false),
            Err(Error::Shape { .. })
        ));
        assert!(matches!(
            reg.forward(&x, None, false),
            Err(Error::Config(_))
        ));
    }

    /// `SimpleTransformer`'s decoder: no `fc`, weights xavier_uniform(gain) within
    /// gain·√(6/(fan_in + fan_out)) and spread over it, zero biases; the forward is the plain
    /// composition ff.0 → act → ff.1 → act → out.
    #[test]
    fn simple_transformer_decoder_is_reinitialised_without_fc() {
        let vs = VarStore::new(Device::Cpu);
        let c = PointwiseRegressorConfig {
            in_dim: 64,
            coord_dim: None,
            hidden: 64,
            out_dim: 3,
            layers: 2,
            activation: RegressorActivation::Silu,
            dropout: 0.1,
            xavier_gain: Some(0.01),
        };
        let reg = c.init(&(vs.root() / "regressor")).unwrap();
        let vars = vs.variables();
        assert!(!vars.contains_key("regressor.fc.weight"));
        for (name, t) in &vars {
            let s = t.size();
            let max = t.abs().max().double_value(&[]);
            if name.ends_with("bias") {
                assert_eq!(max, 0.0, "{name}");
            } else {
                let bound = 0.01 * (6.0 / (s[0] + s[1]) as f64).sqrt();
                assert!(
                    max <= bound && max > 0.8 * bound,
                    "{name}: {max} vs {bound}"
                );
            }
        }
        let x = Tensor::randn([2, 7, 64], (Kind::Float, Device::Cpu));
        let y = reg.forward(&x, None, false).unwrap();
        let lin = |n: &str, h: &Tensor| {
            h.matmul(&vars[&format!("regressor.{n}.weight")].tr())
                + &vars[&format!("regressor.{n}.bias")]
        };
        let want = lin("out", &lin("ff.1.0", &lin("ff.0.0", &x).silu()).silu());
        assert!(y.allclose(&want, 1e-6, 1e-9, false));
        let bad = PointwiseRegressorConfig { hidden: 32, ..c };
        assert!(bad.init(&vs.root()).is_err());
    }
}
