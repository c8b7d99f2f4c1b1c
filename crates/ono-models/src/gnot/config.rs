//! Configuration of GNOT and CGPT (`arch = "gnot"`).

use serde::{Deserialize, Serialize};
use tch::nn::Path;

use super::Gnot;
use crate::arch::{ArchConfig, DataDims};
use crate::operator::NeuralOperator;
use crate::{Error, Result};

/// Which model of the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GnotModel {
    /// `GNOT` (`models/mmgpt.py`): post-LN mixtures of experts weighted by a geometric gate.
    #[default]
    Gnot,
    /// `CGPTNO` (`models/cgpt.py`, what `train.py --model-name CGPT` builds): pre-LN
    /// feed-forward layers, no gate, no experts.
    Cgpt,
}

/// The order of the two attention layers of a block (GNOT's Table 2). Each attention keeps its
/// place's feed-forward half: the first attention is followed by `moe_mlp1` (or `mlp1`), the
/// second by `moe_mlp2` (`mlp2`); `ln1` normalizes the first attention's input, `ln4` the
/// second's. The reference has only `cross_self`; the paper's other two rows are ablations whose
/// code is not published, built here from the same parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockOrder {
    /// A cross-attention to the input functions, then a self-attention over the query points:
    /// the reference (`crossattn`, `selfattn`).
    #[default]
    CrossSelf,
    /// The self-attention first, then the cross-attention (the same variable names).
    SelfCross,
    /// Two cross-attentions and no self-attention: the second is `crossattn2`, with its own
    /// input-function norms `ln2_branch2.<l>`.
    CrossCross,
}

impl BlockOrder {
    /// The paper's label ("cross + self").
    pub fn label(self) -> &'static str {
        match self {
            Self::CrossSelf => "cross + self",
            Self::SelfCross => "self + cross",
            Self::CrossCross => "cross + cross",
        }
    }
}

/// The settings of the reference's `GNOT` and `CGPTNO` constructors, under their names where the
/// reference has one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GnotConfig {
    pub model: GnotModel,
    /// Coordinate channels of the query points (from the data): the gate's input (`space_dim`).
    pub space_dim: i64,
    /// Per-point features appended to the coordinates in the trunk (from the data): θ broadcast to
    /// every point, and any further query features. `trunk_size` = space_dim + fun_dim.
    pub fun_dim: i64,
    /// Output channels (from the data): `output_size`.
    pub out_dim: i64,
    /// Channels of each input function's rows, (x_i, f(x_i)) (`branch_sizes`); the number of
    /// input functions the model takes, each with its own branch MLP and key/value projections.
    pub function_dims: Vec<i64>,
    /// Model width d.
    pub n_hidden: i64,
    pub n_layers: usize,
    /// Attention heads (d/H features each).
    pub n_head: i64,
    /// Experts of each mixture (GNOT only; CGPT has none: 1).
    pub n_experts: i64,
    /// Hidden width of the experts and the gate as a multiple of d (GNOT; CGPT's feed-forward
    /// layers are always 4d: 4).
    pub n_inner: i64,
    /// Residual hidden layers of the trunk, branch and output MLPs (`mlp_layers`; `train.py`'s
    /// default is 3, the classes' 2).
    pub mlp_layers: usize,
    /// `ffn_dropout`: dropout after each attention, before its residual (`resid_pdrop`).
    pub ffn_dropout: f64,
    /// `attn_dropout`: dropout on the self-attention's output before its projection.
    pub attn_dropout: f64,
    /// A deviation from the reference, off by default: padded query rows and padded input-function
    /// rows (the `ModelInput` masks) are left out of every attention sum and normaliser, so a
    /// sample's output does not depend on what it is batched with. Off: padded rows enter the
    /// keys, values and normalisers as in the reference (docs/models.md).
    pub mask_padding: bool,
    /// The order of each block's attentions (not a reference option: `cross_self` is the
    /// reference's only one).
    pub block_order: BlockOrder,
}

impl Default for GnotConfig {
    /// The `gnot` preset.
    fn default() -> Self {
        super::presets::base()
    }
}

impl GnotConfig {
    /// The trunk's input width (`trunk_size`).
    pub fn trunk_size(&self) -> i64 {
        self.space_dim + self.fun_dim
    }
}

impl ArchConfig for GnotConfig {
    const ARCH: &'static str = super::ARCH;

    fn validate(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("{}: {msg}", Self::ARCH)));
        if self.space_dim < 1 || self.fun_dim < 0 || self.out_dim < 1 {
            return bad(format!(
                "space_dim {} and out_dim {} must be positive, fun_dim {} ≥ 0",
                self.space_dim, self.out_dim, self.fun_dim
            ));
        }
        if let Some(c) = self.function_dims.iter().find(|&&c| c < 1) {
            return bad(format!(
                "every input function needs channels: function_dims {:?} has {c}",
                self.function_dims
            ));
        }
        if self.n_hidden < 1 || self.n_head < 1 || self.n_hidden % self.n_head != 0 {
            return bad(format!(
                "n_hidden {} must be a positive multiple of n_head {}",
                self.n_hidden, self.n_head
            ));
        }
        if self.n_layers < 1 || self.n_experts < 1 || self.n_inner < 1 {
            return bad(format!(
                "n_layers {}, n_experts {} and n_inner {} must be positive",
                self.n_layers, self.n_experts, self.n_inner
            ));
        }
        if self.model == GnotModel::Cgpt && (self.n_experts != 1 || self.n_inner != 4) {
            return bad(format!(
                "cgpt has one feed-forward layer of width 4·n_hidden per place (GPTConfig ignores \
                 n_inner): n_experts must be 1 and n_inner 4, got {} and {}",
                self.n_experts, self.n_inner
            ));
        }
        for (name, p) in [
            ("ffn_dropout", self.ffn_dropout),
            ("attn_dropout", self.attn_dropout),
        ] {
            if !(0.0..=1.0).contains(&p) {
                return bad(format!("{name} must lie in [0, 1], got {p}"));
            }
        }
        Ok(())
    }

    fn set_data_dims(&mut self, dims: DataDims) {
        (self.space_dim, self.fun_dim, self.out_dim) = dims.channels();
        self.function_dims = dims.functions;
    }

    fn build(&self, path: &Path) -> Result<Box<dyn NeuralOperator>> {
        Ok(Box::new(Gnot::new(path, self)?))
    }
}
