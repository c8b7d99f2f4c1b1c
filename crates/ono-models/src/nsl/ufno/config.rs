//! Configuration of NSL's U-FNO (`ufno`).

use serde::{Deserialize, Serialize};

use crate::nsl::settings::NslSettings;
use crate::Result;
use ono_nn::unet::UNetNorm;

/// `models/U_FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UfnoConfig {
    /// Also the U-Nets' base width (`n_hidden`) and their unused frames' settings.
    #[serde(flatten)]
    pub nsl: NslSettings,
    /// The norm of the U-Net branches (NSL: from `task`).
    pub unet_norm: UNetNorm,
}

impl UfnoConfig {
    pub(crate) fn check(&self) -> Result<()> {
        self.nsl.check("ufno")
    }
}
