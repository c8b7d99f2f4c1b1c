//! GNOT's geometric gating and dense mixture of experts (thu-ml/GNOT @ 5ee2e69,
//! `models/mmgpt.py`, `MIOECrossAttentionBlock`):
//!
//! ```text
//! gate   = softmax(gatenet(pos))                 gatenet: Linear(p, m)-GELU-Linear(m, m)-GELU-Linear(m, E)
//! mix(x) = Σ_e gate_e · expert_e(x)              expert:  Linear(d, m)-GELU-Linear(m, d)
//! ```
//!
//! The gate reads only the query coordinates, so the mixture is a soft partition of the domain.
//! It is dense (every expert on every point, no top-k, no load-balancing term) and pointwise: no
//! point's output depends on another point. The block normalises the mixture's output
//! (`x + LN(mix(x))`); the expert input is not normalised.

use tch::nn::Path;
use tch::Tensor;

use crate::mlp::SequentialMlp;
use crate::{Error, Result};

/// `gatenet`: the softmax weights of the experts from the coordinates.
#[derive(Debug)]
pub struct GeometricGate {
    net: SequentialMlp,
    space_dim: i64,
}

impl GeometricGate {
    /// Registers `0`, `2`, `4` (Linear(space_dim, hidden), Linear(hidden, hidden),
    /// Linear(hidden, experts)) on `path`.
    pub fn new(path: &Path, space_dim: i64, hidden: i64, experts: i64) -> Result<Self> {
        Ok(Self {
            net: SequentialMlp::new(path, &[space_dim, hidden, hidden, experts])?,
            space_dim,
        })
    }

    /// # Shapes
    /// - `pos`: (..., space_dim)
    /// - returns: (..., experts), each row summing to 1
    pub fn forward(&self, pos: &Tensor) -> Result<Tensor> {
        if pos.size().last() != Some(&self.space_dim) {
            return Err(Error::Shape {
                op: "GeometricGate::forward",
                expected: format!("coordinates (..., {})", self.space_dim),
                got: pos.size(),
            });
        }
        let scores = self.net.forward(pos)?;
        Ok(scores.f_softmax(-1, scores.kind())?)
    }
}

/// `moe_mlp1` / `moe_mlp2`: E experts `<e>.0`, `<e>.2`, mixed by a gate.
#[derive(Debug)]
pub struct DenseMixture {
    experts: Vec<SequentialMlp>,
}

impl DenseMixture {
    /// Registers `experts` feed-forward networks Linear(dim, hidden)-GELU-Linear(hidden, dim) at
    /// `<e>.0`, `<e>.2` on `path`.
    pub fn new(path: &Path, dim: i64, hidden: i64, experts: i64) -> Result<Self> {
        if experts < 1 {
            return Err(Error::Config(format!(
                "a mixture needs at least one expert, got {experts}"
            )));
        }
        let experts = (0..experts)
            .map(|e| SequentialMlp::new(&(path / e), &[dim, hidden, dim]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { experts })
    }

    pub fn experts(&self) -> usize {
        self.experts.len()
    }

    /// Σ_e gate_e · expert_e(x).
    ///
    /// # Shapes
    /// - `x`: (B, N, dim)
    /// - `gate`: (B, N, experts), from [`GeometricGate::forward`]
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, gate: &Tensor) -> Result<Tensor> {
        let xs = x.size();
        let e = self.experts.len() as i64;
        if xs.len() != 3 || gate.size() != [xs[0], xs[1], e] {
            return Err(Error::Shape {
                op: "DenseMixture::forward",
                expected: format!("x (B, N, dim) and a gate (B, N, {e}); x is {xs:?}"),
                got: gate.size(),
            });
        }
        // Stacked and reduced as the reference (`stack(…, -1)`, `(gate · x).sum(-1)`), so the
        // float32 rounding is the reference's.
        let outs = self
            .experts
            .iter()
            .map(|expert| expert.forward(x))
            .collect::<Result<Vec<_>>>()?;
        let stacked = Tensor::f_stack(&outs, -1)?; // (B, N, dim, E)
        Ok(stacked.f_mul(&gate.f_unsqueeze(2)?)?.f_sum_dim_intlist(
            &[-1i64][..],
            false,
            stacked.kind(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    const OPTS: (Kind, Device) = (Kind::Double, Device::Cpu);

    /// x Wᵀ + b from the store's variables.
    fn lin(vs: &VarStore, name: &str, x: &Tensor) -> Tensor {
        let v = vs.variables();
        x.matmul(&v[&format!("{name}.weight")].tr()) + &v[&format!("{name}.bias")]
    }

    fn gelu(x: &Tensor) -> Tensor {
        x * 0.5 * (1 + (x / std::f64::consts::SQRT_2).erf())
    }

    #[test]
    fn gate_and_mixture_are_the_reference_formulas() {
        tch::manual_seed(0);
        let mut vs = VarStore::new(Device::Cpu);
        let gate = GeometricGate::new(&(vs.root() / "gatenet"), 2, 8, 3).unwrap();
        let moe = DenseMixture::new(&(vs.root() / "moe_mlp1"), 4, 8, 3).unwrap();
        vs.set_kind(Kind::Double);
        let pos = Tensor::randn([2, 5, 2], OPTS);
        let x = Tensor::randn([2, 5, 4], OPTS);
        let g = gate.forward(&pos).unwrap();
        let h = gelu(&lin(&vs, "gatenet.0", &pos));
        let h = gelu(&lin(&vs, "gatenet.2", &h));
        let want_g = lin(&vs, "gatenet.4", &h).softmax(-1, Kind::Double);
        assert!((&g - &want_g).abs().max().double_value(&[]) < 1e-14);
        let sums = g.sum_dim_intlist(&[-1i64][..], false, Kind::Double);
        assert!((sums - 1.0).abs().max().double_value(&[]) < 1e-14);

        let got = moe.forward(&x, &g).unwrap();
        let mut want = x.zeros_like();
        for e in 0..3 {
            let h = gelu(&lin(&vs, &format!("moe_mlp1.{e}.0"), &x));
            want += lin(&vs, &format!("moe_mlp1.{e}.2"), &h) * g.narrow(-1, e, 1);
        }
        assert!((got - want).abs().max().double_value(&[]) < 1e-13);
        assert_eq!(moe.experts(), 3);
    }

    #[test]
    fn bad_shapes_are_errors() {
        let vs = VarStore::new(Device::Cpu);
        let gate = GeometricGate::new(&vs.root(), 2, 8, 3).unwrap();
        let moe = DenseMixture::new(&vs.root(), 4, 8, 3).unwrap();
        let f = (Kind::Float, Device::Cpu);
        assert!(gate.forward(&Tensor::zeros([1, 5, 3], f)).is_err());
        let x = Tensor::zeros([1, 5, 4], f);
        assert!(moe.forward(&x, &Tensor::zeros([1, 5, 2], f)).is_err());
        assert!(DenseMixture::new(&vs.root(), 4, 8, 0).is_err());
    }
}
