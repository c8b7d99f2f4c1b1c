//! ONO's configuration: the reference's `ONO2(...)` constructor arguments, validation, and the
//! assembly of the model from ono-nn's blocks under the reference parameter names.

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::presets::{self, Preset};
use super::Ono;
use crate::operator::NeuralOperator;
use crate::registry::{ArchConfig, DataDims};
use crate::{Error, Result};
use ono_nn::attention::{AttentionConfig, AttentionKind};
use ono_nn::mlp::MlpConfig;
use ono_nn::orthogonal::{OrthogonalBlockConfig, Orthogonalization, Whitening};
use ono_nn::time_embedding::TimeMlp;
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
    pub orthogonalization: Orthogonalization,
    pub whitening: Whitening,
    /// EMA momentum of the covariance buffers.
    pub momentum: f64,
    /// A time input T (B, 1), embedded and added to the eigenfunction stream (Plasticity).
    pub time_input: bool,
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
            orthogonalization: Orthogonalization::Orthonormal,
            whitening: Whitening::ExplicitInverse,
            momentum: ono_kernels::ema::DEFAULT_MOMENTUM,
            time_input: false,
        }
    }
}

impl OnoConfig {
    pub fn validate(&self) -> Result<()> {
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
        if !(0.0..=1.0).contains(&self.momentum) {
            return bad(format!(
                "momentum must lie in [0, 1], got {}",
                self.momentum
            ));
        }
        Ok(())
    }

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
        }
    }

    /// Builds the model on `path` under the reference's parameter names (`preprocess.*`,
    /// `time_fc.*`, `blocks.<i>.*`), initialised as the reference (trunc-normal 0.02 linears, zero
    /// biases, unit norms, μ = 0).
    pub fn init(&self, path: &Path) -> Result<Ono> {
        self.validate()?;
        let h = self.n_hidden;
        let blocks = (0..self.n_layers)
            .map(|i| {
                self.block_config(i + 1 == self.n_layers)
                    .init(&(path / "blocks" / i))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Ono {
            cfg: *self,
            preprocess: MlpConfig::new(self.space_dim + self.fun_dim, 2 * h, 2 * h)
                .init(&(path / "preprocess")),
            time_fc: self
                .time_input
                .then(|| TimeMlp::new(&(path / "time_fc"), h)),
            blocks,
        })
    }
}

impl ArchConfig for OnoConfig {
    const ARCH: &'static str = "ono";

    fn preset_names() -> &'static [&'static str] {
        &presets::NAMES
    }

    fn preset(name: &str) -> Result<Self> {
        Ok(name.parse::<Preset>()?.config())
    }

    fn validate(&self) -> Result<()> {
        OnoConfig::validate(self)
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        self.space_dim = dims.space_dim;
        self.fun_dim = dims.fun_dim;
        self.out_dim = dims.out_dim;
        self.time_input = dims.time_input;
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(self.init(path)?))
    }

    fn from_reference(json: &serde_json::Value) -> Result<Self> {
        super::reference::config_from_reference(&json["config"])
    }
}
