//! Configuration of NSL's F-FNO (`ffno`): the NSL settings and the number of layers.

use serde::{Deserialize, Serialize};

use crate::nsl::settings::NslSettings;
use crate::{Error, Result};

/// `models/F_FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FfnoConfig {
    #[serde(flatten)]
    pub nsl: NslSettings,
    /// Residual factorised Fourier layers (`n_layers`).
    pub n_layers: usize,
}

impl FfnoConfig {
    pub(crate) fn check(&self) -> Result<()> {
        if self.n_layers < 1 {
            return Err(Error::Config(format!(
                "ffno: n_layers {} must be positive",
                self.n_layers
            )));
        }
        self.nsl.check("ffno")
    }
}
