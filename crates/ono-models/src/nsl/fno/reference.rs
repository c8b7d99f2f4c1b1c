//! NSL's `models/FNO.py` as the fixture cases describe it (`fixtures/geofno`
//! `nsl_fno_irregular_small`), read with the shared NSL fixture reader
//! ([`crate::nsl::reference`]).

use serde_json::Value;

use super::NslFnoConfig;
use crate::nsl::reference::NslArgs;
use crate::Result;

pub(super) fn config(json: &Value) -> Result<NslFnoConfig> {
    Ok(NslFnoConfig {
        nsl: NslArgs::of(json)?.settings()?,
    })
}
