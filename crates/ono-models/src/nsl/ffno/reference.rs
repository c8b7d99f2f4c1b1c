//! NSL's `models/F_FNO.py` as the fixture cases describe it (`fixtures/ffno`), read with the
//! shared NSL fixture reader ([`crate::nsl::reference`]).

use serde_json::Value;

use super::FfnoConfig;
use crate::nsl::reference::NslArgs;
use crate::Result;

pub(super) fn config(json: &Value) -> Result<FfnoConfig> {
    let a = NslArgs::of(json)?;
    Ok(FfnoConfig {
        nsl: a.settings()?,
        n_layers: a.int("n_layers")? as usize,
    })
}
