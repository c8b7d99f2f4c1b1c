//! NSL's `models/LSM.py` as the fixture cases describe it (`fixtures/lsm`): the `args`
//! overrides (the shared NSL reader, [`crate::nsl::reference`]), `n_heads`, the U-Net norm from
//! `task`, and `Model.forward(x, fx)`. The state_dict names are the port's own.

use serde_json::Value;

use super::LsmConfig;
use crate::nsl::reference::NslArgs;
use crate::Result;
use ono_nn::unet::UNetNorm;

pub(super) fn config(json: &Value) -> Result<LsmConfig> {
    let a = NslArgs::of(json)?;
    Ok(LsmConfig {
        nsl: a.settings()?,
        n_heads: a.int("n_heads")?,
        unet_norm: UNetNorm::of_task(a.str("task")),
    })
}
