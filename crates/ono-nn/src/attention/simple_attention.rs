//! The attention of Cao's Galerkin Transformer (`SimpleAttention` of scaomath/galerkin-transformer
//! `libs/layers.py` @ f9e7d6a, with `norm = True`, `norm_type = 'layer'`): separate Q, K, V
//! projections, one LayerNorm per head, the coordinates concatenated in front of every head, and
//! the softmax-free Galerkin (Q(KᵀV)/n) or Fourier ((QKᵀ)V/n) products, plus the reference's
//! `linear` and `softmax` variants.
//!
//! The reference applies `F.dropout` with its defaults (p = ½, training) to each head's context
//! or score matrix on every forward, evaluation included ([`AttentionDropout::Reference`]); by
//! default this port drops the matrix with the configured probability in training only.

use ono_kernels::attention::split_context;
use ono_kernels::points;
use serde::{Deserialize, Serialize};
use tch::nn::{Init, Path};
use tch::Tensor;

use crate::linear::torch_linear;
use crate::linear::Linear;
use crate::norm::LayerNorm;
use crate::precision::matmul;
use crate::{Error, Result};

/// The reference's `attention_type`s with a per-head LayerNorm (`instance` norms, `cosine` and
/// `causal` are not ported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GalerkinAttentionKind {
    /// Q(K̃ᵀṼ)/n, LayerNorm on K and V (`galerkin`, alias `global`).
    #[default]
    Galerkin,
    /// (Q̃K̃ᵀ/√(d_k+p))V/n, LayerNorm on Q and K (`fourier`, alias `integral`, `local`).
    Fourier,
    /// Galerkin with softmax(Q) over the features and softmax(K) over the points, after the
    /// norms and the coordinates (`linear`).
    Linear,
    /// softmax(Q̃K̃ᵀ/√(d_k+p))V, LayerNorm on Q and K, no 1/n (`softmax`).
    Softmax,
}

impl GalerkinAttentionKind {
    /// The reference's name, as `attention_type` takes it.
    pub fn from_reference(name: &str) -> Option<Self> {
        match name {
            "galerkin" | "global" => Some(Self::Galerkin),
            "fourier" | "integral" | "local" => Some(Self::Fourier),
            "linear" => Some(Self::Linear),
            "softmax" => Some(Self::Softmax),
            _ => None,
        }
    }

    /// Whether K and V are normalised (else Q and K).
    pub fn normalises_values(self) -> bool {
        matches!(self, Self::Galerkin | Self::Linear)
    }
}

/// How the attention matrix (each head's (d_k+p)² context matrix, or its n×n score matrix) is
/// dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionDropout {
    /// With the configured probability, in training only.
    #[default]
    Training,
    /// As the reference computes it: `F.dropout(p_attn)` with PyTorch's defaults, a Bernoulli(½)
    /// mask scaled by 2, on every forward (evaluation too), whatever the configured probability.
    /// The published numbers and checkpoints were made this way.
    Reference,
}

/// Settings of [`SimpleAttention`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SimpleAttentionConfig {
    /// Model width d (`d_model`); the heads split it into d_k = d/H.
    pub dim: i64,
    pub heads: i64,
    /// Coordinate channels p concatenated in front of every head; 0: none, and no output
    /// projection (as the reference).
    pub pos_dim: i64,
    pub kind: GalerkinAttentionKind,
    /// The per-head LayerNorms (the reference's `norm`); without them Q, K and V are the bare
    /// projections (the encoder's post-LayerNorms normalize instead).
    pub norm: bool,
    /// eps of the per-head LayerNorms.
    pub eps: f64,
    /// Gain η of `xavier_uniform_` on W_Q, W_K, W_V; 0 leaves PyTorch's default init.
    pub xavier_init: f64,
    /// δ of the `+ δ·I` added to W_Q, W_K, W_V after the xavier init.
    pub diagonal_weight: f64,
    /// Probability of [`AttentionDropout::Training`].
    pub dropout: f64,
    pub dropout_mode: AttentionDropout,
}

impl SimpleAttentionConfig {
    /// Registers `linears.{0,1,2}` (Q, K, V), with `norm` `norm_K.{h}` and `norm_V.{h}` (Galerkin, linear) or
    /// `norm_Q.{h}` (Fourier, softmax), and `fc` (d + H·p → d) when p > 0.
    pub fn init(&self, path: &Path) -> Result<SimpleAttention> {
        let (d, h) = (self.dim, self.heads);
        if d < 1 || h < 1 || d % h != 0 || self.pos_dim < 0 {
            return Err(Error::Config(format!(
                "Galerkin attention: width {d} must be a positive multiple of the heads {h}, \
                 pos_dim {} ≥ 0",
                self.pos_dim
            )));
        }
        if !(0.0..=1.0).contains(&self.dropout) || self.eps <= 0.0 || self.xavier_init < 0.0 {
            return Err(Error::Config(format!(
                "Galerkin attention: dropout {} must lie in [0, 1], eps {} be positive, \
                 xavier_init {} ≥ 0",
                self.dropout, self.eps, self.xavier_init
            )));
        }
        let linears = (0..3)
            .map(|i| self.projection(&(path / "linears" / i)))
            .collect::<Result<Vec<_>>>()?;
        let d_k = d / h;
        let norms = |name: &str| -> Vec<LayerNorm> {
            (0..h * i64::from(self.norm))
                .map(|i| LayerNorm::with_eps(&(path / name / i), d_k, self.eps))
                .collect()
        };
        // The reference's construction order: norm_K, then norm_V or norm_Q.
        let norm_k = norms("norm_K");
        let (norm_q, norm_v) = if self.kind.normalises_values() {
            (Vec::new(), norms("norm_V"))
        } else {
            (norms("norm_Q"), Vec::new())
        };
        let fc =
            (self.pos_dim > 0).then(|| torch_linear(&(path / "fc"), d + h * self.pos_dim, d, true));
        Ok(SimpleAttention {
            cfg: *self,
            linears,
            norm_q,
            norm_k,
            norm_v,
            fc,
        })
    }

    /// `nn.Linear(d, d)` with the reference's `_reset_parameters`: xavier_uniform(gain η) + δ·I,
    /// bias 0.
    fn projection(&self, path: &Path) -> Result<Linear> {
        let d = self.dim;
        if self.xavier_init <= 0.0 {
            return Ok(torch_linear(path, d, d, true));
        }
        let bound = self.xavier_init * (6.0 / (2 * d) as f64).sqrt();
        let weight = path.var(
            "weight",
            &[d, d],
            Init::Uniform {
                lo: -bound,
                up: bound,
            },
        );
        if self.diagonal_weight > 0.0 {
            let eye = Tensor::f_eye(d, (weight.kind(), weight.device()))?;
            let mut w = weight.shallow_clone();
            let _ = tch::no_grad(|| w.f_add_(&eye.f_mul_scalar(self.diagonal_weight)?))?;
        }
        let bias = path.var("bias", &[d], Init::Const(0.0));
        Ok(Linear {
            weight,
            bias: Some(bias),
        })
    }
}

/// See [`SimpleAttentionConfig`].
#[derive(Debug)]
pub struct SimpleAttention {
    cfg: SimpleAttentionConfig,
    linears: Vec<Linear>,
    norm_q: Vec<LayerNorm>,
    norm_k: Vec<LayerNorm>,
    norm_v: Vec<LayerNorm>,
    fc: Option<Linear>,
}

/// Each head through its own LayerNorm: (B, H, N, d_k) → (B, H, N, d_k).
fn per_head(norms: &[LayerNorm], x: &Tensor) -> Result<Tensor> {
    if norms.is_empty() {
        return Ok(x.shallow_clone());
    }
    let heads = norms
        .iter()
        .enumerate()
        .map(|(i, n)| n.forward(&x.f_select(1, i as i64)?))
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::f_stack(&heads, 1)?)
}

impl SimpleAttention {
    pub fn config(&self) -> &SimpleAttentionConfig {
        &self.cfg
    }

    /// Self-attention of the points `x` at coordinates `pos`; `train` switches the configured
    /// dropout (the reference mode drops in both).
    ///
    /// # Shapes
    /// - `x`: (B, N, dim)
    /// - `pos`: (B, N, pos_dim), required when pos_dim > 0
    /// - returns: (B, N, dim)
    pub fn forward(&self, x: &Tensor, pos: Option<&Tensor>, train: bool) -> Result<Tensor> {
        const OP: &str = "SimpleAttention::forward";
        let c = &self.cfg;
        let size = x.size();
        let (b, n) = match size[..] {
            // A process's share of split points may be empty (ono_kernels::points).
            [b, n, d] if d == c.dim && (n > 0 || points::split()) => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("x (B, N, {}) with N > 0", c.dim),
                    got: size,
                })
            }
        };
        let (h, d_k) = (c.heads, c.dim / c.heads);
        let heads = |l: &Linear| -> Result<Tensor> {
            Ok(l.forward(x)?.f_view([b, n, h, d_k])?.f_transpose(1, 2)?)
        };
        let q = per_head(&self.norm_q, &heads(&self.linears[0])?)?;
        let k = per_head(&self.norm_k, &heads(&self.linears[1])?)?;
        let v = per_head(&self.norm_v, &heads(&self.linears[2])?)?;
        let (q, k, v) = match (c.pos_dim, pos) {
            (0, _) => (q, k, v),
            (p, Some(pos)) if pos.size() == [b, n, p] => {
                let pos = pos
                    .f_to_kind(q.kind())?
                    .f_unsqueeze(1)?
                    .f_expand([b, h, n, p], false)?;
                let cat = |t: &Tensor| Tensor::f_cat(&[&pos, t], -1);
                (cat(&q)?, cat(&k)?, cat(&v)?)
            }
            (p, pos) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos ({b}, {n}, {p})"),
                    got: pos.map(Tensor::size).unwrap_or_default(),
                })
            }
        };
        let width = d_k + c.pos_dim;
        let out = match c.kind {
            GalerkinAttentionKind::Galerkin | GalerkinAttentionKind::Linear => {
                let linear = c.kind == GalerkinAttentionKind::Linear;
                let q = if linear {
                    q.f_softmax(-1, q.kind())?
                } else {
                    q
                };
                let context = if points::split() {
                    // Kᵀ V and n summed over every process's points; the keys' softmax over the
                    // points with the global maximum and sum.
                    let kv = if linear {
                        split_context(&k, &v)? // already summed over the processes
                    } else {
                        points::sum(&matmul(&k.f_transpose(-2, -1)?, &v)?)?
                    };
                    let count = Tensor::f_full([1], n as f64, (kv.kind(), kv.device()))?;
                    kv.f_div(&points::sum(&count)?)?
                } else {
                    let k = if linear {
                        k.f_softmax(-2, k.kind())?
                    } else {
                        k
                    };
                    matmul(&k.f_transpose(-2, -1)?, &v)?.f_div_scalar(n)?
                };
                matmul(&q, &self.drop(&context, train)?)?
            }
            GalerkinAttentionKind::Fourier | GalerkinAttentionKind::Softmax => {
                match c.kind {
                    GalerkinAttentionKind::Softmax => points::refuse(
                        "softmax attention over points",
                        "each query's weights are normalized over every key",
                    )?,
                    _ => points::refuse(
                        "Fourier-type attention",
                        "its N × N product pairs every query with every key",
                    )?,
                }
                let scores =
                    matmul(&q, &k.f_transpose(-2, -1)?)?.f_div_scalar((width as f64).sqrt())?;
                let scores = if c.kind == GalerkinAttentionKind::Softmax {
                    scores.f_softmax(-1, scores.kind())?
                } else {
                    scores.f_div_scalar(n)?
                };
                matmul(&self.drop(&scores, train)?, &v)?
            }
        };
        let out = out.f_transpose(1, 2)?.f_reshape([b, n, h * width])?;
        match &self.fc {
            Some(fc) => fc.forward(&out),
            None => Ok(out),
        }
    }

    /// The dropout of the context or score matrix (see [`AttentionDropout`]).
    fn drop(&self, m: &Tensor, train: bool) -> Result<Tensor> {
        Ok(match self.cfg.dropout_mode {
            AttentionDropout::Reference => m.f_dropout(0.5, true)?,
            AttentionDropout::Training if train && self.cfg.dropout > 0.0 => {
                m.f_dropout(self.cfg.dropout, true)?
            }
            AttentionDropout::Training => m.shallow_clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    fn config(kind: GalerkinAttentionKind) -> SimpleAttentionConfig {
        SimpleAttentionConfig {
            dim: 8,
            heads: 2,
            pos_dim: 1,
            kind,
            norm: true,
            eps: 1e-5,
            xavier_init: 0.01,
            diagonal_weight: 0.01,
            dropout: 0.0,
            dropout_mode: AttentionDropout::Training,
        }
    }

    /// The plain formulas of the reference, one head at a time, in float64.
    fn oracle(a: &SimpleAttention, x: &Tensor, pos: &Tensor) -> Tensor {
        let c = a.cfg;
        let (d_k, n) = (c.dim / c.heads, x.size()[1]);
        let proj = |i: usize| a.linears[i].forward(x).unwrap();
        let (q, k, v) = (proj(0), proj(1), proj(2));
        let mut heads = Vec::new();
        for h in 0..c.heads {
            let slice = |t: &Tensor| t.narrow(-1, h * d_k, d_k);
            let ln = |norms: &[LayerNorm], t: Tensor| match norms.get(h as usize) {
                Some(norm) => {
                    let mu = t.mean_dim(-1, true, Kind::Double);
                    let var = (&t - &mu).square().mean_dim(-1, true, Kind::Double);
                    (&t - mu) / (var + c.eps).sqrt() * &norm.weight + &norm.bias
                }
                None => t,
            };
            let qh = Tensor::cat(&[pos, &ln(&a.norm_q, slice(&q))], -1);
            let kh = Tensor::cat(&[pos, &ln(&a.norm_k, slice(&k))], -1);
            let vh = Tensor::cat(&[pos, &ln(&a.norm_v, slice(&v))], -1);
            let out = match c.kind {
                GalerkinAttentionKind::Galerkin => {
                    qh.matmul(&(kh.transpose(1, 2).matmul(&vh) / n as f64))
                }
                GalerkinAttentionKind::Linear => {
                    let qs = qh.softmax(-1, Kind::Double);
                    let ks = kh.softmax(-2, Kind::Double);
                    qs.matmul(&(ks.transpose(1, 2).matmul(&vh) / n as f64))
                }
                GalerkinAttentionKind::Fourier => {
                    (qh.matmul(&kh.transpose(1, 2)) / ((d_k + 1) as f64).sqrt() / n as f64)
                        .matmul(&vh)
                }
                GalerkinAttentionKind::Softmax => (qh.matmul(&kh.transpose(1, 2))
                    / ((d_k + 1) as f64).sqrt())
                .softmax(-1, Kind::Double)
                .matmul(&vh),
            };
            heads.push(out);
        }
        a.fc.as_ref()
            .unwrap()
            .forward(&Tensor::cat(&heads, -1))
            .unwrap()
    }

    fn perturbed(vs: &VarStore) {
        // Non-trivial norms, so a wrong head assignment shows.
        tch::no_grad(|| {
            for (name, mut v) in vs.variables() {
                if name.contains("norm_") {
                    let _ = v.f_add_(&(v.randn_like() * 0.3)).unwrap();
                }
            }
        });
    }

    #[test]
    fn every_kind_matches_the_per_head_formulas() {
        tch::manual_seed(0);
        for kind in [
            GalerkinAttentionKind::Galerkin,
            GalerkinAttentionKind::Fourier,
            GalerkinAttentionKind::Linear,
            GalerkinAttentionKind::Softmax,
        ] {
            let mut vs = VarStore::new(Device::Cpu);
            let a = config(kind).init(&vs.root()).unwrap();
            vs.set_kind(Kind::Double);
            perturbed(&vs);
            let x = Tensor::randn([2, 5, 8], (Kind::Double, Device::Cpu));
            let pos = Tensor::rand([2, 5, 1], (Kind::Double, Device::Cpu));
            let got = a.forward(&x, Some(&pos), true).unwrap();
            let want = oracle(&a, &x, &pos);
            let err = (got - want).abs().max().double_value(&[]);
            assert!(err < 1e-12, "{kind:?}: {err}");
        }
    }

    #[test]
    fn init_is_xavier_plus_diagonal_with_zero_bias() {
        tch::manual_seed(1);
        let vs = VarStore::new(Device::Cpu);
        let _a = config(GalerkinAttentionKind::Fourier)
            .init(&vs.root())
            .unwrap();
        let vars = vs.variables();
        let w = &vars["linears.1.weight"];
        let off = w - Tensor::eye(8, (Kind::Float, Device::Cpu)) * 0.01;
        let bound = 0.01 * (6.0f64 / 16.0).sqrt();
        assert!(off.abs().max().double_value(&[]) <= bound + 1e-7);
        assert_eq!(
            vars["linears.2.bias"]
                .abs()
                .sum(Kind::Float)
                .double_value(&[]),
            0.0
        );
        assert!(vars.contains_key("norm_Q.1.weight") && !vars.contains_key("norm_V.0.bias"));
        assert_eq!(vars["fc.weight"].size(), [8, 10]);
    }

    #[test]
    fn dropout_is_training_only_unless_the_reference_defect_is_chosen() {
        tch::manual_seed(2);
        let x = Tensor::randn([1, 6, 8], (Kind::Float, Device::Cpu));
        let pos = Tensor::rand([1, 6, 1], (Kind::Float, Device::Cpu));
        let vs = VarStore::new(Device::Cpu);
        let mut cfg = config(GalerkinAttentionKind::Galerkin);
        cfg.dropout = 0.3;
        let a = cfg.init(&vs.root()).unwrap();
        let eval = |a: &SimpleAttention| a.forward(&x, Some(&pos), false).unwrap();
        assert!(eval(&a).equal(&eval(&a)));
        assert!(!a.forward(&x, Some(&pos), true).unwrap().equal(&eval(&a)));
        cfg.dropout = 0.0;
        cfg.dropout_mode = AttentionDropout::Reference;
        let vs = VarStore::new(Device::Cpu);
        let r = cfg.init(&vs.root()).unwrap();
        assert!(
            !eval(&r).equal(&eval(&r)),
            "the reference drops in evaluation"
        );
    }

    #[test]
    fn bad_shapes_are_errors() {
        let vs = VarStore::new(Device::Cpu);
        let a = config(GalerkinAttentionKind::Galerkin)
            .init(&vs.root())
            .unwrap();
        let x = Tensor::zeros([2, 5, 8], (Kind::Float, Device::Cpu));
        assert!(a.forward(&x, None, false).is_err());
        let pos = Tensor::zeros([2, 4, 1], (Kind::Float, Device::Cpu));
        assert!(a.forward(&x, Some(&pos), false).is_err());
        assert!(a.forward(&x.narrow(2, 0, 7), Some(&pos), false).is_err());
        let mut bad = config(GalerkinAttentionKind::Galerkin);
        bad.heads = 3;
        assert!(bad.init(&vs.root()).is_err());
    }
}
