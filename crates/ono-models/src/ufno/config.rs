//! Configuration of NSL's U-FNO (`ufno`).

use serde::{Deserialize, Serialize};

use crate::nsl_settings::NslSettings;
use crate::Result;
use ono_nn::unet::UNetNorm;

/// The norm of the U-Net branches: NSL picks BatchNorm for `task = steady` and
/// InstanceNorm(affine) for the time-dependent tasks (`models/U_Net.py`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnetNorm {
    Batch,
    Instance,
}

impl From<UnetNorm> for UNetNorm {
    fn from(n: UnetNorm) -> Self {
        match n {
            UnetNorm::Batch => UNetNorm::Batch,
            UnetNorm::Instance => UNetNorm::Instance,
        }
    }
}

/// `models/U_FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UfnoConfig {
    /// Also the U-Nets' base width (`n_hidden`) and their unused frames' settings.
    #[serde(flatten)]
    pub nsl: NslSettings,
    /// The norm of the U-Net branches (NSL: from `task`).
    pub unet_norm: UnetNorm,
}

impl Default for UfnoConfig {
    fn default() -> Self {
        super::presets::by_name("darcy").expect("the darcy preset exists")
    }
}

impl std::ops::Deref for UfnoConfig {
    type Target = NslSettings;
    fn deref(&self) -> &NslSettings {
        &self.nsl
    }
}

impl std::ops::DerefMut for UfnoConfig {
    fn deref_mut(&mut self) -> &mut NslSettings {
        &mut self.nsl
    }
}

impl UfnoConfig {
    pub(crate) fn check(&self) -> Result<()> {
        self.nsl.check("ufno")
    }
}
