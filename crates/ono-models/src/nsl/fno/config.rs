//! Configuration of NSL's FNO (`nsl_fno`): the NSL settings alone (`models/FNO.py` always has
//! four Fourier layers and reads nothing else).

use serde::{Deserialize, Serialize};

use crate::nsl::settings::NslSettings;
use crate::Result;

/// `models/FNO.py`'s `args` (the fields it reads) and its `s1`, `s2`. Missing fields take the
/// `darcy` preset's values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NslFnoConfig {
    #[serde(flatten)]
    pub nsl: NslSettings,
}

impl NslFnoConfig {
    pub(crate) fn check(&self) -> Result<()> {
        self.nsl.check("nsl_fno")
    }
}
