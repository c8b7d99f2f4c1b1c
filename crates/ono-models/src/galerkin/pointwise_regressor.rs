//! The reference's `PointwiseRegressor` (`libs/model.py` L472–529 @ f9e7d6a), the decoder of the
//! inverse problem (ex3) with `spacial_fc`: the point's coordinates are concatenated to its
//! features and lifted by `fc` (no activation after it), then `num_layers` × (Linear →
//! activation → dropout) and a last Linear. Kept in the galerkin folder: the order (no
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
    /// Coordinate channels concatenated after the features (`spacial_dim`).
    pub coord_dim: i64,
    /// Width of the lift and the hidden layers (the reference passes n_hidden).
    pub hidden: i64,
    pub out_dim: i64,
    /// Hidden layers `ff.{i}` (`num_regressor_layers`).
    pub layers: usize,
    pub activation: RegressorActivation,
    /// After each hidden layer, in training (`decoder_dropout`).
    pub dropout: f64,
}

impl PointwiseRegressorConfig {
    /// Registers `fc` (in + coord → hidden), `ff.{i}.0` (hidden → hidden) and `out`
    /// (hidden → out), all with PyTorch's default init (`FourierTransformer2D` applies none of
    /// its own).
    pub fn init(&self, path: &Path) -> Result<PointwiseRegressor> {
        if self.in_dim < 1
            || self.coord_dim < 0
            || self.hidden < 1
            || self.out_dim < 1
            || self.layers < 1
            || !(0.0..=1.0).contains(&self.dropout)
        {
            return Err(Error::Config(format!(
                "galerkin: pointwise regressor {self:?}"
            )));
        }
        Ok(PointwiseRegressor {
            fc: torch_linear(
                &(path / "fc"),
                self.in_dim + self.coord_dim,
                self.hidden,
                true,
            ),
            ff: (0..self.layers)
                .map(|i| torch_linear(&(path / "ff" / i / 0), self.hidden, self.hidden, true))
                .collect(),
            out: torch_linear(&(path / "out"), self.hidden, self.out_dim, true),
            cfg: *self,
        })
    }
}

/// See [`PointwiseRegressorConfig`].
#[derive(Debug)]
pub(super) struct PointwiseRegressor {
    fc: Linear,
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
    /// - `x`: (..., in_dim), `coords`: (..., coord_dim) on the same points
    /// - returns: (..., out_dim)
    pub fn forward(&self, x: &Tensor, coords: &Tensor, train: bool) -> Result<Tensor> {
        let c = &self.cfg;
        let (xs, ps) = (x.size(), coords.size());
        if xs.last() != Some(&c.in_dim)
            || ps.last() != Some(&c.coord_dim)
            || xs[..xs.len() - 1] != ps[..ps.len().saturating_sub(1)]
        {
            return Err(Error::Shape {
                op: "PointwiseRegressor::forward",
                expected: format!(
                    "features (..., {}) and coordinates (..., {}) on the same points {:?}",
                    c.in_dim,
                    c.coord_dim,
                    &xs[..xs.len().saturating_sub(1)]
                ),
                got: ps,
            });
        }
        let mut h = self
            .fc
            .forward(&Tensor::f_cat(&[x, &coords.f_to_kind(x.kind())?], -1)?)?;
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
            coord_dim: 2,
            hidden: 5,
            out_dim: 3,
            layers: 2,
            activation: RegressorActivation::Relu,
            dropout: 0.5,
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
        let a = reg.forward(&x, &p, false).unwrap();
        assert_eq!(a.size(), [2, 4, 4, 3]);
        assert!(a.equal(&reg.forward(&x, &p, false).unwrap()));
        tch::manual_seed(0);
        assert!(!a.equal(&reg.forward(&x, &p, true).unwrap()));
        let short = p.narrow(2, 0, 3);
        assert!(matches!(
            reg.forward(&x, &short, false),
            Err(Error::Shape { .. })
        ));
        let wide = Tensor::rand([2, 4, 4, 3], opts);
        assert!(matches!(
            reg.forward(&x, &wide, false),
            Err(Error::Shape { .. })
        ));
    }
}
