//! GNOT's normalized linear attention (thu-ml/GNOT @ 5ee2e69, `models/mmgpt.py` and
//! `models/cgpt.py`: `LinearAttention` and `LinearCrossAttention` with `attn_type = 'l1'`), the
//! kernels of [`ono_kernels::attention::gnot_linear`] and [`gnot_cross`] between the reference's
//! projections:
//!
//! ```text
//! q̃ = softmax(query(x)) over each head's features, k̃ = softmax(key(y)) likewise
//! self:  z = q̃ + (q̃ (k̃ᵀ v)) / (q̃ · Σ_n k̃_n)                  → attn_drop → proj
//! cross: z = q̃ + Σ_l (q̃ (k̃_lᵀ v_l)) / (q̃ · Σ_i k̃_l,i)         → proj (no dropout)
//! ```
//!
//! The `+ q̃` skip is inside the attention, and the cross form sums the input functions'
//! contributions without averaging, as the reference. The reference never masks: zero-padded
//! rows enter k̃ᵀv and Σk̃. The optional masks here remove padded keys from both (a deviation the
//! model opts into); padded query rows get an output like any other.

use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::attention::{check_input, merge_heads, split_heads};
use crate::linear::torch_linear;
use crate::linear::Linear;
use crate::{Error, Result};
use ono_kernels::attention::{gnot_cross, gnot_linear};

/// Settings of [`GnotSelfAttention`] and [`GnotCrossAttention`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct GnotAttentionConfig {
    /// Model width d (every projection is `Linear(d, d)`).
    pub dim: i64,
    /// Heads H; each works on d/H features.
    pub heads: i64,
    /// `attn_pdrop`: dropout on the self-attention's z (training only); the cross-attention has
    /// none, as the reference.
    pub dropout: f64,
}

impl GnotAttentionConfig {
    fn validate(&self) -> Result<()> {
        if self.dim < 1 || self.heads < 1 || self.dim % self.heads != 0 {
            return Err(Error::Config(format!(
                "GNOT attention: width {} must be a positive multiple of the heads {}",
                self.dim, self.heads
            )));
        }
        if !(0.0..=1.0).contains(&self.dropout) {
            return Err(Error::Config(format!(
                "GNOT attention: dropout {} must lie in [0, 1]",
                self.dropout
            )));
        }
        Ok(())
    }

    /// `LinearAttention`: registers `key`, `query`, `value`, `proj` (the reference's order),
    /// PyTorch's default init.
    pub fn init_self(&self, path: &Path) -> Result<GnotSelfAttention> {
        self.validate()?;
        let d = self.dim;
        let lin = |name: &str| torch_linear(&(path / name), d, d, true);
        let (key, query, value, proj) = (lin("key"), lin("query"), lin("value"), lin("proj"));
        Ok(GnotSelfAttention {
            cfg: *self,
            key,
            query,
            value,
            proj,
        })
    }

    /// `LinearCrossAttention` over `inputs` input functions: registers `query`, `keys.<l>`,
    /// `values.<l>`, `proj`. With no input it is `proj(q̃)`.
    pub fn init_cross(&self, path: &Path, inputs: usize) -> Result<GnotCrossAttention> {
        self.validate()?;
        let d = self.dim;
        let query = torch_linear(&(path / "query"), d, d, true);
        let per_input = |name: &str| -> Vec<Linear> {
            (0..inputs)
                .map(|l| torch_linear(&(path / name / l), d, d, true))
                .collect()
        };
        let keys = per_input("keys");
        let values = per_input("values");
        let proj = torch_linear(&(path / "proj"), d, d, true);
        Ok(GnotCrossAttention {
            heads: self.heads,
            query,
            keys,
            values,
            proj,
        })
    }
}

/// Checks a padding mask (B, N) against (B, N, ·).
fn check_mask(op: &'static str, mask: Option<&Tensor>, x: &Tensor) -> Result<()> {
    let s = x.size();
    match mask {
        Some(m) if m.size() != s[..2] => Err(Error::Shape {
            op,
            expected: format!("a mask ({}, {})", s[0], s[1]),
            got: m.size(),
        }),
        _ => Ok(()),
    }
}

/// `LinearAttention` (`selfattn`); see the module documentation.
#[derive(Debug)]
pub struct GnotSelfAttention {
    cfg: GnotAttentionConfig,
    key: Linear,
    query: Linear,
    value: Linear,
    proj: Linear,
}

impl GnotSelfAttention {
    /// Self-attention of the points; `mask` (true = real) removes padded points from the keys
    /// and values.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim)
    /// - `mask`: (B, N) bool, optional
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, mask: Option<&Tensor>, train: bool) -> Result<Tensor> {
        const OP: &str = "GnotSelfAttention::forward";
        check_input(OP, x, self.cfg.dim)?;
        check_mask(OP, mask, x)?;
        let h = self.cfg.heads;
        let q = split_heads(&self.query.forward(x)?, h)?;
        let k = split_heads(&self.key.forward(x)?, h)?;
        let v = split_heads(&self.value.forward(x)?, h)?;
        let z = gnot_linear(&q, &k, &v, mask)?;
        let p = self.cfg.dropout;
        let z = z.f_dropout(p, train && p > 0.0)?;
        self.proj.forward(&merge_heads(&z)?)
    }
}

/// `LinearCrossAttention` (`crossattn`); see the module documentation.
#[derive(Debug)]
pub struct GnotCrossAttention {
    heads: i64,
    query: Linear,
    keys: Vec<Linear>,
    values: Vec<Linear>,
    proj: Linear,
}

impl GnotCrossAttention {
    /// The number of input functions.
    pub fn inputs(&self) -> usize {
        self.keys.len()
    }

    /// Queries from `x`, one key/value set per input function (each with an optional padding
    /// mask, true = real), contributions summed.
    ///
    /// # Shapes
    /// - `x`: (B, N, dim)
    /// - `inputs`: [(y_l (B, N_l, dim), mask_l (B, N_l) bool or None)], as many as the layer has
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, inputs: &[(&Tensor, Option<&Tensor>)]) -> Result<Tensor> {
        const OP: &str = "GnotCrossAttention::forward";
        let dim = self.query.out_dim();
        check_input(OP, x, dim)?;
        if inputs.len() != self.inputs() {
            return Err(Error::Config(format!(
                "{OP}: {} input functions given, the layer has {}",
                inputs.len(),
                self.inputs()
            )));
        }
        let b = x.size()[0];
        let h = self.heads;
        let q = split_heads(&self.query.forward(x)?, h)?;
        if inputs.is_empty() {
            // The `+ q̃` term alone (CGPT without input functions).
            return self
                .proj
                .forward(&merge_heads(&q.f_softmax(-1, q.kind())?)?);
        }
        let mut sets = Vec::with_capacity(inputs.len());
        for (l, &(y, mask)) in inputs.iter().enumerate() {
            check_input(OP, y, dim)?;
            if y.size()[0] != b {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("input function {l} with the batch {b}"),
                    got: y.size(),
                });
            }
            check_mask(OP, mask, y)?;
            let k = split_heads(&self.keys[l].forward(y)?, h)?;
            let v = split_heads(&self.values[l].forward(y)?, h)?;
            sets.push((k, v, mask));
        }
        let refs: Vec<_> = sets.iter().map(|(k, v, m)| (k, v, *m)).collect();
        self.proj.forward(&merge_heads(&gnot_cross(&q, &refs)?)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    const OPTS: (Kind, Device) = (Kind::Double, Device::Cpu);

    fn config() -> GnotAttentionConfig {
        GnotAttentionConfig {
            dim: 6,
            heads: 2,
            dropout: 0.0,
        }
    }

    /// One head of the reference's formula on plain tensors: q̃ + Σ_sets (q̃ k̃ᵀ v) / (q̃ · Σ k̃).
    fn head(q: &Tensor, sets: &[(Tensor, Tensor)]) -> Tensor {
        let q = q.softmax(-1, Kind::Double);
        let mut z = q.copy();
        for (k, v) in sets {
            let k = k.softmax(-1, Kind::Double);
            let scores = q.matmul(&k.transpose(-2, -1)); // (B, N, M)
            let norm = scores.sum_dim_intlist(&[-1i64][..], true, Kind::Double);
            z += scores.matmul(v) / norm;
        }
        z
    }

    /// The reference's computation head by head, from the layer's own weights.
    fn oracle(
        x: &Tensor,
        query: &Linear,
        kv: &[(&Linear, &Linear, &Tensor)],
        proj: &Linear,
    ) -> Tensor {
        let (d, h) = (config().dim, config().heads);
        let dk = d / h;
        let q = query.forward(x).unwrap();
        let kv: Vec<(Tensor, Tensor)> = kv
            .iter()
            .map(|(k, v, y)| (k.forward(y).unwrap(), v.forward(y).unwrap()))
            .collect();
        let heads: Vec<Tensor> = (0..h)
            .map(|i| {
                let s = |t: &Tensor| t.narrow(-1, i * dk, dk);
                let sets: Vec<_> = kv.iter().map(|(k, v)| (s(k), s(v))).collect();
                head(&s(&q), &sets)
            })
            .collect();
        proj.forward(&Tensor::cat(&heads, -1)).unwrap()
    }

    fn close(a: &Tensor, b: &Tensor) -> f64 {
        (a - b).abs().max().double_value(&[])
    }

    #[test]
    fn self_attention_is_the_reference_formula() {
        tch::manual_seed(0);
        let mut vs = VarStore::new(Device::Cpu);
        let a = config().init_self(&vs.root()).unwrap();
        vs.set_kind(Kind::Double);
        let x = Tensor::randn([2, 5, 6], OPTS);
        let got = a.forward(&x, None, true).unwrap();
        let want = oracle(&x, &a.query, &[(&a.key, &a.value, &x)], &a.proj);
        assert!(close(&got, &want) < 1e-12);
        let names: Vec<String> = vs.variables().into_keys().collect();
        for n in ["key.weight", "query.bias", "value.weight", "proj.bias"] {
            assert!(names.iter().any(|v| v == n), "{n} in {names:?}");
        }
    }

    #[test]
    fn cross_attention_sums_the_inputs_and_reduces_to_q_without_any() {
        tch::manual_seed(1);
        let mut vs = VarStore::new(Device::Cpu);
        let a = config().init_cross(&vs.root(), 2).unwrap();
        vs.set_kind(Kind::Double);
        let x = Tensor::randn([2, 5, 6], OPTS);
        let (y0, y1) = (
            Tensor::randn([2, 4, 6], OPTS),
            Tensor::randn([2, 3, 6], OPTS),
        );
        let got = a.forward(&x, &[(&y0, None), (&y1, None)]).unwrap();
        let want = oracle(
            &x,
            &a.query,
            &[
                (&a.keys[0], &a.values[0], &y0),
                (&a.keys[1], &a.values[1], &y1),
            ],
            &a.proj,
        );
        assert!(close(&got, &want) < 1e-12);
        assert!(vs.variables().contains_key("values.1.weight"));
        // One input given to a two-input layer.
        assert!(a.forward(&x, &[(&y0, None)]).is_err());

        let mut vs = VarStore::new(Device::Cpu);
        let none = config().init_cross(&vs.root(), 0).unwrap();
        vs.set_kind(Kind::Double);
        let got = none.forward(&x, &[]).unwrap();
        let want = oracle(&x, &none.query, &[], &none.proj);
        assert!(close(&got, &want) < 1e-12);
        assert_eq!(vs.variables().len(), 4);
    }

    /// A masked padded row is the same as no row: a sample padded with garbage and masked gives
    /// its unpadded output, in the self and the cross form.
    #[test]
    fn masked_rows_equal_removed_rows() {
        tch::manual_seed(2);
        let mut vs = VarStore::new(Device::Cpu);
        let s = config().init_self(&(vs.root() / "s")).unwrap();
        let c = config().init_cross(&(vs.root() / "c"), 1).unwrap();
        vs.set_kind(Kind::Double);
        let x = Tensor::randn([1, 4, 6], OPTS);
        let y = Tensor::randn([1, 3, 6], OPTS);
        let pad = |t: &Tensor| Tensor::cat(&[t, &Tensor::randn([1, 2, 6], OPTS)], 1);
        let mask = |n: i64| {
            Tensor::cat(
                &[
                    Tensor::ones([1, n], (Kind::Bool, Device::Cpu)),
                    Tensor::zeros([1, 2], (Kind::Bool, Device::Cpu)),
                ],
                1,
            )
        };
        let (xp, yp, mx, my) = (pad(&x), pad(&y), mask(4), mask(3));
        let alone = s.forward(&x, None, false).unwrap();
        let padded = s.forward(&xp, Some(&mx), false).unwrap().narrow(1, 0, 4);
        assert!(close(&alone, &padded) < 1e-12);
        let unmasked = s.forward(&xp, None, false).unwrap().narrow(1, 0, 4);
        assert!(close(&alone, &unmasked) > 1e-6);
        let alone = c.forward(&x, &[(&y, None)]).unwrap();
        let padded = c.forward(&x, &[(&yp, Some(&my))]).unwrap();
        assert!(close(&alone, &padded) < 1e-12);
        // Masks of the wrong shape.
        assert!(s.forward(&xp, Some(&my), false).is_err());
        assert!(c.forward(&x, &[(&yp, Some(&mx))]).is_err());
    }

    #[test]
    fn bad_configurations_and_inputs_are_errors() {
        let vs = VarStore::new(Device::Cpu);
        let bad = GnotAttentionConfig {
            heads: 4,
            ..config()
        };
        assert!(bad.init_self(&vs.root()).is_err());
        let a = config().init_self(&vs.root()).unwrap();
        let x = Tensor::zeros([2, 5, 5], (Kind::Float, Device::Cpu));
        assert!(a.forward(&x, None, false).is_err());
    }

    #[test]
    fn dropout_is_training_only() {
        tch::manual_seed(3);
        let vs = VarStore::new(Device::Cpu);
        let a = GnotAttentionConfig {
            dropout: 0.5,
            ..config()
        }
        .init_self(&vs.root())
        .unwrap();
        let x = Tensor::randn([1, 6, 6], (Kind::Float, Device::Cpu));
        let eval = a.forward(&x, None, false).unwrap();
        assert!(eval.equal(&a.forward(&x, None, false).unwrap()));
        assert!(!eval.equal(&a.forward(&x, None, true).unwrap()));
    }
}
