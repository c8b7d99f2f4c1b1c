//! NSL's `models/U_FNO.py` as the fixture cases describe it (`fixtures/ufno`): the `args`
//! overrides (the shared NSL reader, [`crate::nsl::reference`]), the U-Net norm from `task`, and
//! `Model.forward(x, fx)`.

use serde_json::Value;

use super::UfnoConfig;
use crate::nsl::reference::NslArgs;
use crate::Result;
use ono_nn::unet::UNetNorm;

pub(super) fn config(json: &Value) -> Result<UfnoConfig> {
    let a = NslArgs::of(json)?;
    Ok(UfnoConfig {
        nsl: a.settings()?,
        unet_norm: UNetNorm::of_task(a.str("task")),
    })
}
