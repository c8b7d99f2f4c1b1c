//! Configuration of NSL's Transolver (`transolver`).

use serde::{Deserialize, Serialize};

use crate::nsl::settings::NslSettings;
use crate::{Error, Result};

/// `models/Transolver.py`'s `args` (the fields it reads). Missing fields take the `darcy`
/// preset's values. Of the shared NSL settings, `modes` and `latent` are not read (Transolver
/// has no Fourier layer and no latent grid; NSL's `args.modes` is unused too).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransolverConfig {
    #[serde(flatten)]
    pub nsl: NslSettings,
    /// Transolver blocks (`n_layers`); the last one carries the output head.
    pub n_layers: usize,
    /// Attention heads (`n_heads`); each has `n_hidden / n_heads` channels (rounded down, as
    /// NSL).
    pub n_heads: i64,
    /// Hidden width of each block's MLP in multiples of `n_hidden` (`mlp_ratio`).
    pub mlp_ratio: i64,
    /// Physical slices per head (`slice_num`).
    pub slice_num: i64,
}

impl TransolverConfig {
    /// Channels per head.
    pub fn dim_head(&self) -> i64 {
        if self.n_heads > 0 {
            self.n_hidden / self.n_heads
        } else {
            0
        }
    }

    pub(crate) fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("transolver: {msg}")));
        if self.n_layers < 1 || self.mlp_ratio < 1 || self.slice_num < 1 || self.out_dim < 1 {
            return bad(format!(
                "n_layers {}, mlp_ratio {}, slice_num {} and out_dim {} must be positive",
                self.n_layers, self.mlp_ratio, self.slice_num, self.out_dim
            ));
        }
        if self.n_heads < 1 || self.dim_head() < 1 {
            return bad(format!(
                "{} heads need at least one channel each of n_hidden {}",
                self.n_heads, self.n_hidden
            ));
        }
        self.nsl
            .frame()
            .check_lift()
            .or_else(|e| bad(e.to_string()))
    }
}
