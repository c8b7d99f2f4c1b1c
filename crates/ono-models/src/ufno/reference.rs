//! NSL's `models/U_FNO.py` as the fixture cases describe it (`fixtures/ufno`): the `args`
//! overrides (the shared NSL reader, [`crate::nsl_reference`]), the U-Net norm from `task`, and
//! `Model.forward(x, fx)`.

use serde_json::Value;

use super::{UfnoConfig, UnetNorm};
use crate::nsl_fno::Geotype;
use crate::nsl_reference::NslArgs;
use crate::Result;

pub(super) fn config(json: &Value) -> Result<UfnoConfig> {
    let a = NslArgs::of(json)?;
    let geotype = a.geotype()?;
    Ok(UfnoConfig {
        space_dim: a.int("space_dim")?,
        fun_dim: a.int("fun_dim")?,
        out_dim: a.int("out_dim")?,
        time_input: a.flag("time_input"),
        geotype,
        grid_dims: if geotype == Geotype::Structured {
            a.grid_dims()
        } else {
            2
        },
        latent: a.latent(),
        n_hidden: a.int("n_hidden")?,
        modes: a.int("modes")?,
        unified_pos: a.flag("unified_pos"),
        reference: a.int("ref")?,
        // models/U_Net.py: normtype 'bn' if args.task == 'steady' else 'in'.
        unet_norm: if a.str("task") == Some("steady") {
            UnetNorm::Batch
        } else {
            UnetNorm::Instance
        },
    })
}
