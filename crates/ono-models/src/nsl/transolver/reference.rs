//! NSL's `models/Transolver.py` as the fixture cases describe it (`fixtures/transolver`), read
//! with the shared NSL fixture reader ([`crate::nsl::reference`]).

use serde_json::Value;

use super::TransolverConfig;
use crate::nsl::reference::NslArgs;
use crate::{Error, Result};

pub(super) fn config(json: &Value) -> Result<TransolverConfig> {
    let a = NslArgs::of(json)?;
    Ok(TransolverConfig {
        nsl: a.settings()?,
        n_layers: usize::try_from(a.int("n_layers")?)
            .map_err(|_| Error::Config("the NSL args' n_layers is negative".into()))?,
        n_heads: a.int("n_heads")?,
        mlp_ratio: a.int("mlp_ratio")?,
        slice_num: a.int("slice_num")?,
    })
}
