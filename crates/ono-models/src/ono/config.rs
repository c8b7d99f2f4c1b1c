//! ONO's configuration: the reference's `ONO2(...)` constructor arguments, their validation, the
//! blocks' settings, and the checks of a forward pass's inputs against them.

use ono_kernels::{health, points};
use serde::{Deserialize, Serialize};
use tch::nn::Path;
use tch::Tensor;

use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};
use ono_nn::attention::{AttentionConfig, AttentionKind, Landmarks};
use ono_nn::orthogonal::{KernelScale, OrthogonalBlockConfig, Orthogonalization, Whitening};
use ono_nn::transformer_block::TransformerBlockConfig;

/// The NN block of the eigenfunction stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NnBlock {
    /// lucidrains linear transformer (the reference default, `attn_type=None`).
    #[default]
    LinearTransformer,
    /// Nyström attention (`attn_type='nystrom'`).
    Nystrom,
    /// Galerkin attention (`attn_type='galerkin'`).
    Galerkin,
    /// Plain softmax attention (ablation; not in the reference).
    Softmax,
    /// No attention sub-layer: only the FFN (ablation).
    None,
}

/// Constructor arguments of ONO, named as the reference's `ONO2(...)` where one exists.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OnoConfig {
    /// Coordinate channels of `pos`.
    pub space_dim: i64,
    /// Channels of the input function `fx`.
    pub fun_dim: i64,
    /// Output channels.
    pub out_dim: i64,
    pub n_layers: usize,
    /// Width h.
    pub n_hidden: i64,
    pub n_head: i64,
    /// Number of eigenfunctions k.
    pub psi_dim: i64,
    pub mlp_ratio: i64,
    pub nn_block: NnBlock,
    /// Landmarks of the Nyström block (the reference's 256), or `"auto"`: exact attention on
    /// up to 256 points, at most half the points beyond ([`Landmarks`]); read by no other
    /// block. Fewer make its pseudo-inverse, cubic in them, affordable on a CPU.
    pub landmarks: Landmarks,
    pub orthogonalization: Orthogonalization,
    pub whitening: Whitening,
    /// EMA momentum of the covariance buffers.
    pub momentum: f64,
    /// A time input T (B, 1), embedded and added to the eigenfunction stream (Plasticity).
    pub time_input: bool,
    /// ψ̃ᵀf summed over the points (`sum`, the reference) or averaged (`mean`: the same
    /// operator on every mesh size).
    pub kernel_scale: KernelScale,
}

impl Default for OnoConfig {
    /// The paper's common setting: h 128, 8 heads, 8 layers, k 16, linear transformer.
    fn default() -> Self {
        Self {
            space_dim: 2,
            fun_dim: 1,
            out_dim: 1,
            n_layers: 8,
            n_hidden: 128,
            n_head: 8,
            psi_dim: 16,
            mlp_ratio: 1,
            nn_block: NnBlock::LinearTransformer,
            landmarks: AttentionConfig::default().landmarks,
            orthogonalization: Orthogonalization::Orthonormal,
            whitening: Whitening::ExplicitInverse,
            momentum: ono_kernels::ema::DEFAULT_MOMENTUM,
            time_input: false,
            kernel_scale: KernelScale::Sum,
        }
    }
}

impl OnoConfig {
    pub(crate) fn block_config(&self, last: bool) -> OrthogonalBlockConfig {
        let kind = match self.nn_block {
            NnBlock::LinearTransformer => Some(AttentionKind::LinearTransformer),
            NnBlock::Nystrom => Some(AttentionKind::Nystrom),
            NnBlock::Galerkin => Some(AttentionKind::Galerkin),
            NnBlock::Softmax => Some(AttentionKind::Softmax),
            NnBlock::None => None,
        };
        OrthogonalBlockConfig {
            nn_block: TransformerBlockConfig {
                attention: kind.map(|kind| AttentionConfig {
                    kind,
                    dim: self.n_hidden,
                    heads: self.n_head,
                    landmarks: self.landmarks,
                    ..AttentionConfig::default()
                }),
                dim: self.n_hidden,
                mlp_ratio: self.mlp_ratio,
            },
            psi_dim: self.psi_dim,
            orthogonalization: self.orthogonalization,
            whitening: self.whitening,
            momentum: self.momentum,
            head_out: last.then_some(self.out_dim),
            query_covariance: false,
            kernel_scale: self.kernel_scale,
        }
    }
}

impl OnoConfig {
    /// Checks (pos, fx, T) against the configuration: shapes, floating kinds, T exactly when
    /// `time_input`, and finiteness (one host read).
    pub(crate) fn check_inputs(
        &self,
        pos: &Tensor,
        fx: &Tensor,
        t: Option<&Tensor>,
    ) -> Result<[i64; 2]> {
        const OP: &str = "Ono::forward";
        let (ps, fs) = (pos.size(), fx.size());
        let [b, n] = match ps[..] {
            // A process's share of split points may be empty (ono_kernels::points).
            [b, n, s] if s == self.space_dim && b > 0 && (n > 0 || points::split()) => [b, n],
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("pos (B, N, {}) with B, N > 0", self.space_dim),
                    got: ps,
                })
            }
        };
        if fs != [b, n, self.fun_dim] {
            return Err(Error::Shape {
                op: OP,
                expected: format!("fx ({b}, {n}, {}) matching pos", self.fun_dim),
                got: fs,
            });
        }
        if !pos.is_floating_point() || !fx.is_floating_point() {
            return Err(Error::Config(format!(
                "{OP}: pos and fx must be floating point, got {:?} and {:?}",
                pos.kind(),
                fx.kind()
            )));
        }
        match (self.time_input, t) {
            (true, Some(t)) if t.numel() as i64 == b && t.is_floating_point() => {}
            (true, Some(t)) => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("floating T of shape ({b}, 1)"),
                    got: t.size(),
                })
            }
            (true, None) => {
                return Err(Error::Config(format!(
                    "{OP}: the model has a time input; pass T of shape ({b}, 1)"
                )))
            }
            (false, Some(_)) => {
                return Err(Error::Config(format!(
                    "{OP}: T was given but the model has no time input (time_input = false)"
                )))
            }
            (false, None) => {}
        }
        // One check for every input: read at once, or deferred inside a training step.
        let mut finite = pos
            .f_isfinite()?
            .f_all()?
            .f_logical_and(&fx.f_isfinite()?.f_all()?)?;
        if let Some(t) = t {
            finite = finite.f_logical_and(&t.f_isfinite()?.f_all()?)?;
        }
        health::require("Ono::forward: input", &finite, || Error::NonFinite {
            op: OP,
            what: "the input (pos, fx or T)",
        })?;
        Ok([b, n])
    }

    /// Checks a padding mask against the batch (B, N): its shape, and a real point in every
    /// sample (read at once, or deferred inside a training step).
    pub(crate) fn check_mask(
        op: &'static str,
        mask: Option<&Tensor>,
        [b, n]: [i64; 2],
    ) -> Result<()> {
        let Some(mask) = mask else {
            return Ok(());
        };
        ono_nn::padding::check_mask(op, mask, b, n)?;
        let every = mask
            .f_to_kind(tch::Kind::Bool)?
            .f_any_dim(1, false)?
            .f_all()?;
        health::require("Ono::forward: padding mask", &every, move || {
            Error::Config(format!(
                "{op}: every sample of a padded batch needs at least one real point"
            ))
        })
    }
}

impl ArchConfig for OnoConfig {
    const ARCH: &'static str = "ono";

    fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::Config(m));
        if self.space_dim < 0 || self.fun_dim < 0 || self.space_dim + self.fun_dim == 0 {
            return bad(format!(
                "space_dim {} and fun_dim {} must be ≥ 0 with at least one input channel",
                self.space_dim, self.fun_dim
            ));
        }
        if self.out_dim <= 0 || self.n_layers == 0 || self.n_hidden <= 0 || self.psi_dim <= 0 {
            return bad(format!(
                "out_dim {}, n_layers {}, n_hidden {} and psi_dim {} must be positive",
                self.out_dim, self.n_layers, self.n_hidden, self.psi_dim
            ));
        }
        if self.n_head <= 0 || self.n_hidden % self.n_head != 0 {
            return bad(format!(
                "n_head {} must be positive and divide n_hidden {}",
                self.n_head, self.n_hidden
            ));
        }
        if self.mlp_ratio <= 0 {
            return bad(format!(
                "mlp_ratio must be positive, got {}",
                self.mlp_ratio
            ));
        }
        if let Landmarks::Fixed(m) = self.landmarks {
            if m <= 0 {
                return bad(format!("landmarks must be positive or \"auto\", got {m}"));
            }
        }
        if !(0.0..=1.0).contains(&self.momentum) {
            return bad(format!(
                "momentum must lie in [0, 1], got {}",
                self.momentum
            ));
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
        self.time_input = dims.time_input;
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(self.init(path)?))
    }
}
