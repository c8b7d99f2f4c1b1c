//! NSL's `models/F_FNO.py` as the fixture cases describe it (`fixtures/ffno`), read with the
//! shared NSL fixture reader ([`crate::nsl_reference`]).

use serde_json::Value;

use super::FfnoConfig;
use crate::nsl_fno::Geotype;
use crate::nsl_reference::NslArgs;
use crate::Result;

pub(super) fn config(json: &Value) -> Result<FfnoConfig> {
    let a = NslArgs::of(json)?;
    let geotype = a.geotype()?;
    Ok(FfnoConfig {
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
        n_layers: a.int("n_layers")? as usize,
        modes: a.int("modes")?,
        unified_pos: a.flag("unified_pos"),
        reference: a.int("ref")?,
    })
}
