//! The reference's configurations (`train.py` / `args.py` @ 5ee2e69 with the README's width).
//! Parameter counts are checked against `fixtures/gnot/reference_param_counts.json` by the tests,
//! at the data dimensions given here (the trainer replaces space_dim, fun_dim and out_dim with the
//! data's; function_dims stays the preset's unless overridden).

use super::config::{BlockOrder, GnotConfig, GnotModel};
use crate::arch::Presets;

/// The preset names.
pub const NAMES: [&str; 4] = ["gnot", "gnot_e3", "gnot_d256_e3", "cgpt"];

/// `GNOT` with `args.py`'s defaults (3 layers, 1 head, 1 expert, n_inner 4, mlp_layers 3, no
/// dropout) at the README's n_hidden 128, for 2-D query points with θ ∈ ℝ¹¹ (trunk_size 13), one
/// input function of 2 channels and 3 outputs: 2,185,222 parameters.
pub(crate) fn base() -> GnotConfig {
    GnotConfig {
        model: GnotModel::Gnot,
        space_dim: 2,
        fun_dim: 11,
        out_dim: 3,
        function_dims: vec![2],
        n_hidden: 128,
        n_layers: 3,
        n_head: 1,
        n_experts: 1,
        n_inner: 4,
        mlp_layers: 3,
        ffn_dropout: 0.0,
        attn_dropout: 0.0,
        mask_padding: false,
        block_order: BlockOrder::CrossSelf,
    }
}

impl Presets for GnotConfig {
    const NAMES: &'static [&'static str] = &NAMES;

    fn by_name(name: &str) -> Option<Self> {
        match name {
            "gnot" => Some(base()),
            // Three experts, the paper's best count on Heat (Table 3): 3,768,844 parameters.
            "gnot_e3" => Some(GnotConfig {
                n_experts: 3,
                ..base()
            }),
            // The same at width 256, the largest of the paper's search: 15,008,780 parameters.
            "gnot_d256_e3" => Some(GnotConfig {
                n_hidden: 256,
                n_experts: 3,
                ..base()
            }),
            // The README's command (`--model-name CGPT --n-hidden 128 --n-layers 3`, ns2d_4ball):
            // CGPTNO on 2-D query points with θ ∈ ℝ¹² (trunk_size 14), no input functions, 3
            // outputs: 1,224,963 parameters.
            "cgpt" => Some(GnotConfig {
                model: GnotModel::Cgpt,
                fun_dim: 12,
                function_dims: Vec::new(),
                ..base()
            }),
            _ => None,
        }
    }
}
