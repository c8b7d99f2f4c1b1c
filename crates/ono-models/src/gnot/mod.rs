//! GNOT, the General Neural Operator Transformer (Hao et al., ICML 2023; thu-ml/GNOT @ 5ee2e69,
//! `models/mmgpt.py` `GNOT`, `models/cgpt.py` `CGPTNO`, `models/mlp.py`): `arch = "gnot"`, the
//! model chosen by [`GnotConfig::model`].
//!
//! ```text
//! x = trunk_mlp([pos, fx])            z_l = branch_mlps.l(f_l), once for all blocks
//! GNOT block (the reference's order; `block_order` swaps or doubles the attentions):
//!              gate = softmax(gatenet(pos))
//!              x += crossattn(ln1 x, [ln2_branch.l z_l]);  x += ln3(Σ_e gate_e moe_mlp1.e(x))
//!              x += selfattn(ln4 x);                        x += ln5(Σ_e gate_e moe_mlp2.e(x))
//! CGPT block:  x += crossattn(ln1 x, [ln2_branch.l z_l]);  x += mlp1(ln3 x)
//!              x += selfattn(ln4 x);                        x += mlp2(ln5 x)
//! out = out_mlp(x)
//! ```
//!
//! The MLPs are [`ono_nn::mlp::Mlp`] with GNOT's names (linear_pre, `mlp_layers` residual GELU
//! layers, linear_post); the attentions [`ono_nn::attention::gnot`] (softmax over each head's
//! features, the `+ q̃` skip, input functions summed); the gate and the experts
//! [`ono_nn::mixture_of_experts`]. PyTorch's default initialisation throughout (the reference's
//! `_init_weights` is commented out). Padded rows are not masked unless `mask_padding`.
//! Fixtures: `fixtures/gnot` (`gnot_small`, `gnot_ragged_small`, `cgpt_small`,
//! `cgpt_noinput_small`).

mod config;
pub mod presets;
mod reference;

pub use config::{BlockOrder, GnotConfig, GnotModel};

use ono_kernels::{health, points};
use tch::nn::Path;
use tch::{Kind, Tensor};

use crate::arch::ArchConfig;
use crate::operator::{InputPart, ModelInput, NeuralOperator};
use crate::{Error, Result};
use ono_nn::attention::gnot::{GnotAttentionConfig, GnotCrossAttention, GnotSelfAttention};
use ono_nn::linear::LinearInit;
use ono_nn::mixture_of_experts::{DenseMixture, GeometricGate};
use ono_nn::mlp::{Mlp, MlpConfig, MlpNames, SequentialMlp};
use ono_nn::norm::LayerNorm;

const ARCH: &str = "gnot";

/// The feed-forward half of a block.
#[derive(Debug)]
enum FeedForward {
    /// GNOT: `moe_mlp1`, `moe_mlp2` and their shared `gatenet`, post-LN (`ln3`, `ln5` on the
    /// mixtures' outputs).
    Experts {
        moe1: DenseMixture,
        moe2: DenseMixture,
        gate: GeometricGate,
    },
    /// CGPT: `mlp1`, `mlp2`, pre-LN.
    Plain {
        mlp1: SequentialMlp,
        mlp2: SequentialMlp,
    },
}

/// One attention layer of a block, with the norms of what it reads beside its own input's.
#[derive(Debug)]
enum Mixer {
    /// From the query points to the input functions, each function normalized by its own
    /// LayerNorm (`ln2_branch.<l>`).
    Cross {
        attn: GnotCrossAttention,
        ln_branch: Vec<LayerNorm>,
    },
    /// Over the query points.
    Points(GnotSelfAttention),
}

impl Mixer {
    /// # Shapes
    /// - `x`: (B, T, d), already normalized; `z`: [(B, N_l, d)]
    /// - returns: (B, T, d)
    fn forward(&self, x: &Tensor, z: &[Tensor], masks: &Masks<'_>, train: bool) -> Result<Tensor> {
        match self {
            Mixer::Cross { attn, ln_branch } => {
                let normed = z
                    .iter()
                    .zip(ln_branch)
                    .map(|(z, ln)| ln.forward(z))
                    .collect::<ono_nn::Result<Vec<_>>>()?;
                let inputs: Vec<(&Tensor, Option<&Tensor>)> =
                    normed.iter().zip(masks.functions.iter().copied()).collect();
                Ok(attn.forward(x, &inputs)?)
            }
            Mixer::Points(attn) => Ok(attn.forward(x, masks.query, train)?),
        }
    }
}

/// `MIOECrossAttentionBlock` (GNOT) or `CrossAttentionBlock` (CGPT): `blocks.<i>`, its two
/// attentions in the order of [`BlockOrder`].
#[derive(Debug)]
struct Block {
    ln1: LayerNorm,
    ln3: LayerNorm,
    ln4: LayerNorm,
    ln5: LayerNorm,
    first: Mixer,
    second: Mixer,
    ff: FeedForward,
    dropout: f64,
}

/// The padding masks a block's attentions apply: none unless `mask_padding`.
struct Masks<'a> {
    query: Option<&'a Tensor>,
    functions: Vec<Option<&'a Tensor>>,
}

impl Block {
    /// Builds in the reference's construction order (ln1, the input functions' norms, ln3–ln5,
    /// the self-attention, the cross-attention, the feed-forward layers); a second
    /// cross-attention's parts follow its first's.
    fn new(path: &Path, cfg: &GnotConfig) -> Result<Self> {
        let d = cfg.n_hidden;
        let nf = cfg.function_dims.len();
        let ln = |name: &str| LayerNorm::new(&(path / name), d);
        let branch_norms = |name: &str| {
            (0..nf)
                .map(|l| LayerNorm::new(&(path / name / l), d))
                .collect::<Vec<_>>()
        };
        let ln1 = ln("ln1");
        let ln2_branch = branch_norms("ln2_branch");
        let cross_cross = cfg.block_order == BlockOrder::CrossCross;
        let ln2_branch2 = if cross_cross {
            branch_norms("ln2_branch2")
        } else {
            Vec::new()
        };
        let (ln3, ln4, ln5) = (ln("ln3"), ln("ln4"), ln("ln5"));
        let attn = GnotAttentionConfig {
            dim: d,
            heads: cfg.n_head,
            dropout: cfg.attn_dropout,
        };
        let own = if cross_cross {
            None
        } else {
            Some(Mixer::Points(attn.init_self(&(path / "selfattn"))?))
        };
        let cross = Mixer::Cross {
            attn: attn.init_cross(&(path / "crossattn"), nf)?,
            ln_branch: ln2_branch,
        };
        let (first, second) = match own {
            Some(own) if cfg.block_order == BlockOrder::SelfCross => (own, cross),
            Some(own) => (cross, own),
            None => {
                let attn = attn.init_cross(&(path / "crossattn2"), nf)?;
                let ln_branch = ln2_branch2;
                (cross, Mixer::Cross { attn, ln_branch })
            }
        };
        let inner = cfg.n_inner * d;
        let ff = match cfg.model {
            GnotModel::Gnot => FeedForward::Experts {
                moe1: DenseMixture::new(&(path / "moe_mlp1"), d, inner, cfg.n_experts)?,
                moe2: DenseMixture::new(&(path / "moe_mlp2"), d, inner, cfg.n_experts)?,
                gate: GeometricGate::new(&(path / "gatenet"), cfg.space_dim, inner, cfg.n_experts)?,
            },
            GnotModel::Cgpt => FeedForward::Plain {
                mlp1: SequentialMlp::new(&(path / "mlp1"), &[d, inner, d])?,
                mlp2: SequentialMlp::new(&(path / "mlp2"), &[d, inner, d])?,
            },
        };
        Ok(Self {
            ln1,
            ln3,
            ln4,
            ln5,
            first,
            second,
            ff,
            dropout: cfg.ffn_dropout,
        })
    }

    /// # Shapes
    /// - `x`: (B, T, d), `pos`: (B, T, space_dim), `z`: [(B, N_l, d)]
    /// - returns: (B, T, d)
    fn forward(
        &self,
        x: &Tensor,
        pos: &Tensor,
        z: &[Tensor],
        masks: &Masks<'_>,
        train: bool,
    ) -> Result<Tensor> {
        let p = self.dropout;
        let drop = |t: Tensor| -> Result<Tensor> { Ok(t.f_dropout(p, train && p > 0.0)?) };
        let y = self.first.forward(&self.ln1.forward(x)?, z, masks, train)?;
        let x = x.f_add(&drop(y)?)?;
        let second = |x: Tensor| -> Result<Tensor> {
            let y = self
                .second
                .forward(&self.ln4.forward(&x)?, z, masks, train)?;
            Ok(x.f_add(&drop(y)?)?)
        };
        match &self.ff {
            FeedForward::Experts { moe1, moe2, gate } => {
                let g = gate.forward(pos)?;
                let x = x.f_add(&self.ln3.forward(&moe1.forward(&x, &g)?)?)?;
                let x = second(x)?;
                Ok(x.f_add(&self.ln5.forward(&moe2.forward(&x, &g)?)?)?)
            }
            FeedForward::Plain { mlp1, mlp2 } => {
                let x = x.f_add(&mlp1.forward(&self.ln3.forward(&x)?)?)?;
                let x = second(x)?;
                Ok(x.f_add(&mlp2.forward(&self.ln5.forward(&x)?)?)?)
            }
        }
    }
}

/// See the module documentation. Variables under the reference names: `trunk_mlp.{linear_pre,
/// linears.<j>, linear_post}`, `branch_mlps.<l>.…`, `blocks.<i>.{ln1, ln2_branch.<l>, ln3, ln4,
/// ln5}`, `blocks.<i>.selfattn.{key, query, value, proj}`, `blocks.<i>.crossattn.{query,
/// keys.<l>, values.<l>, proj}`, `blocks.<i>.moe_mlp{1,2}.<e>.{0,2}` and
/// `blocks.<i>.gatenet.{0,2,4}` (GNOT) or `blocks.<i>.mlp{1,2}.{0,2}` (CGPT), `out_mlp.…`; a
/// `cross_cross` block has `crossattn2` and `ln2_branch2.<l>` in place of `selfattn`.
#[derive(Debug)]
pub struct Gnot {
    cfg: GnotConfig,
    trunk_mlp: Mlp,
    branch_mlps: Vec<Mlp>,
    blocks: Vec<Block>,
    out_mlp: Mlp,
}

impl Gnot {
    /// Builds the layers in the reference's construction order, with PyTorch's default init.
    pub fn new(path: &Path, cfg: &GnotConfig) -> Result<Self> {
        cfg.validate()?;
        let d = cfg.n_hidden;
        let mlp = |path: &Path, in_dim: i64, out_dim: i64| {
            MlpConfig {
                n_layers: cfg.mlp_layers,
                names: MlpNames::Plain,
                ..MlpConfig::new(in_dim, d, out_dim).with_init(LinearInit::Torch)
            }
            .init(path)
        };
        let trunk_mlp = mlp(&(path / "trunk_mlp"), cfg.trunk_size(), d);
        let branch_mlps = cfg
            .function_dims
            .iter()
            .enumerate()
            .map(|(l, &c)| mlp(&(path / "branch_mlps" / l), c, d))
            .collect();
        let blocks = (0..cfg.n_layers)
            .map(|i| Block::new(&(path / "blocks" / i), cfg))
            .collect::<Result<Vec<_>>>()?;
        let out_mlp = mlp(&(path / "out_mlp"), d, cfg.out_dim);
        Ok(Self {
            cfg: cfg.clone(),
            trunk_mlp,
            branch_mlps,
            blocks,
            out_mlp,
        })
    }

    pub fn config(&self) -> &GnotConfig {
        &self.cfg
    }

    /// # Shapes
    /// - `input.pos`: (B, T, space_dim), the query points' normalised coordinates (the gate's
    ///   input); `input.fx`: (B, T, fun_dim), per-point features appended to them in the trunk (θ
    ///   broadcast to every point), required when fun_dim > 0
    /// - `input.mask`: (B, T) bool, the real query points of a ragged batch (used only with
    ///   `mask_padding`; the output rows of padded points are computed and are the caller's to
    ///   drop)
    /// - `input.functions`: one per `function_dims` entry, values (B, N_l, function_dims[l]) with
    ///   an optional mask (B, N_l)
    /// - `input.grid` is accepted and not read (the model works on any point set); `time` and
    ///   `query` are refused
    /// - returns: (B, T, out_dim)
    pub fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        const OP: &str = "Gnot::forward";
        input.refuse(ARCH, &[InputPart::Time, InputPart::Query])?;
        let c = &self.cfg;
        let ps = input.pos.size();
        let (b, t) = match ps[..] {
            // A process's share of split points may be empty (ono_kernels::points).
            [b, t, p] if b > 0 && (t > 0 || points::split()) && p == c.space_dim => (b, t),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, T, {}) with B, T > 0", c.space_dim),
                    got: ps,
                })
            }
        };
        let fx = match input.fx {
            Some(fx) if fx.size() == [b, t, c.fun_dim] => Some(fx),
            None if c.fun_dim == 0 => None,
            fx => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!(
                        "fx ({b}, {t}, {}): θ and the other per-point features of the trunk",
                        c.fun_dim
                    ),
                    got: fx.map(Tensor::size).unwrap_or_default(),
                })
            }
        };
        let mask = |m: Option<&Tensor>, n: i64, what: &str| -> Result<()> {
            match m {
                Some(m) if m.size() != [b, n] => Err(Error::Shape {
                    op: OP,
                    expected: format!("{what} mask ({b}, {n})"),
                    got: m.size(),
                }),
                _ => Ok(()),
            }
        };
        mask(input.mask, t, "the query")?;
        let nf = c.function_dims.len();
        if input.functions.len() != nf {
            return Err(Error::Shape {
                op: OP,
                expected: format!(
                    "{nf} input functions (function_dims {:?}), one per branch",
                    c.function_dims
                ),
                got: input
                    .functions
                    .iter()
                    .map(|f| f.values.size().last().copied().unwrap_or(0))
                    .collect(),
            });
        }
        for (l, (f, &ch)) in input.functions.iter().zip(&c.function_dims).enumerate() {
            let s = f.values.size();
            match s[..] {
                [fb, n, fc] if fb == b && (n > 0 || points::split()) && fc == ch => {
                    mask(f.mask, n, &format!("input function {l}'s"))?
                }
                _ => {
                    return Err(Error::Shape {
                        op: OP,
                        expected: format!("input function {l} ({b}, N > 0, {ch})"),
                        got: s,
                    })
                }
            }
        }

        let kind = self.trunk_mlp.kind();
        let finite = |t: &Tensor, what: &'static str| -> Result<Tensor> {
            let t = t.f_to_kind(kind)?;
            health::require_finite("Gnot::forward: input", &t, move || Error::NonFinite {
                op: OP,
                what,
            })?;
            Ok(t)
        };
        let pos = finite(input.pos, "pos")?;
        let trunk_in = match fx {
            Some(fx) => Tensor::f_cat(&[&pos, &finite(fx, "fx")?], -1)?,
            None => pos.shallow_clone(),
        };
        let values = input
            .functions
            .iter()
            .map(|f| finite(f.values, "an input function"))
            .collect::<Result<Vec<_>>>()?;
        let as_bool = |m: Option<&Tensor>| -> Result<Option<Tensor>> {
            Ok(match m {
                Some(m) if c.mask_padding => Some(m.f_to_kind(Kind::Bool)?),
                _ => None,
            })
        };
        let query_mask = as_bool(input.mask)?;
        let function_masks = input
            .functions
            .iter()
            .map(|f| as_bool(f.mask))
            .collect::<Result<Vec<_>>>()?;
        let masks = Masks {
            query: query_mask.as_ref(),
            functions: function_masks.iter().map(Option::as_ref).collect(),
        };

        let mut x = self.trunk_mlp.forward(&trunk_in)?;
        let z = values
            .iter()
            .zip(&self.branch_mlps)
            .map(|(f, mlp)| mlp.forward(f))
            .collect::<ono_nn::Result<Vec<_>>>()?;
        for block in &self.blocks {
            x = block.forward(&x, &pos, &z, &masks, train)?;
        }
        Ok(self.out_mlp.forward(&x)?)
    }
}

impl NeuralOperator for Gnot {
    fn arch(&self) -> &'static str {
        ARCH
    }

    fn forward(&self, input: &ModelInput<'_>, train: bool) -> Result<Tensor> {
        Gnot::forward(self, input, train)
    }

    fn reference_forward(
        &self,
        inputs: &ono_nn::weights::NamedTensors,
        train: bool,
    ) -> Result<Tensor> {
        reference::forward(self, inputs, train)
    }
}
