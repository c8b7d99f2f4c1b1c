//! Configuration of NSL's Latent Spectral Model (`lsm`): the NSL settings, the heads of its
//! Neural Spectral Blocks and the norm of its U-Net blocks.

use serde::{Deserialize, Serialize};

use crate::nsl::settings::{Geotype, NslSettings};
use crate::{Error, Result};
use ono_nn::unet::UNetNorm;

/// Latent tokens per head of every Neural Spectral Block (`Model(…, num_token = 4)`; NSL never
/// passes another value).
pub const NUM_TOKENS: i64 = 4;
/// Frequencies of the blocks' transition (`Model(…, num_basis = 12)`): 24 basis functions.
pub const NUM_BASIS: i64 = 12;

/// `models/LSM.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values. `modes` only sizes the point-cloud projection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LsmConfig {
    #[serde(flatten)]
    pub nsl: NslSettings,
    /// Heads of the Neural Spectral Blocks (`n_heads`); must divide `n_hidden`.
    pub n_heads: i64,
    /// The norm of the U-Net blocks (NSL: from `task`).
    pub unet_norm: UNetNorm,
}

impl LsmConfig {
    pub(crate) fn check(&self) -> Result<()> {
        let bad = |msg: String| Err(Error::Config(format!("lsm: {msg}")));
        if self.n_heads < 1 || self.n_hidden % self.n_heads != 0 {
            return bad(format!(
                "n_heads {} must divide n_hidden {} (every level's width c, 2c, 4c, 8c splits \
                 into the heads)",
                self.n_heads, self.n_hidden
            ));
        }
        // The blocks cut each level into patches of size ⌈s/16⌉; only multiples of 16 divide
        // evenly at all five levels. NSL pads structured grids to them, but not the latent grid
        // of a point cloud.
        if self.geotype == Geotype::Unstructured
            && self.latent.iter().any(|&s| s < 16 || s % 16 != 0)
        {
            return bad(format!(
                "the point-cloud latent grid {:?} must be multiples of 16",
                self.latent
            ));
        }
        self.nsl.check("lsm")
    }
}
