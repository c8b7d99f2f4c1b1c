//! Import and export of reference PyTorch `state_dict`s (`ONO2` of `ONOmodel2.py`).
//!
//! The modules of this crate register every parameter and buffer under its reference name, so the
//! name map is the identity except for this table:
//!
//! | name here | reference `state_dict` |
//! |---|---|
//! | `blocks.<i>.feature_cov_count` | none: set to 1 on import when `feature_cov` is present, 0 when absent |
//! | `blocks.<i>.feature_cov` | optional on import: the reference registers it as `None` until the first training forward |
//! | `blocks.<i>.ln_psi.*` | none: the LayerNorm ablation has no reference counterpart |
//!
//! Export writes the reference names only, and omits a `feature_cov` that was never updated (the
//! reference's `None` buffer).

use std::path::Path;

use ono_kernels::host;
use serde_json::Value;
use tch::nn::VarStore;
use tch::Tensor;

use super::config::{NnBlock, OnoConfig};
use crate::arch::{ArchConfig, FromReference};
use crate::{Error, Result};
use ono_nn::orthogonal::Orthogonalization;
use ono_nn::weights::{self, NamedTensors};

const COUNT_SUFFIX: &str = "feature_cov_count";
const COV_SUFFIX: &str = "feature_cov";

/// The reference name of one of our variables, or `None` where the reference has no counterpart.
pub fn reference_name(ours: &str) -> Option<&str> {
    if ours.ends_with(COUNT_SUFFIX) || ours.contains(".ln_psi.") {
        None
    } else {
        Some(ours)
    }
}

/// Copies a reference `state_dict` (keys `prefix` + reference name) into `vs`. Strict: every
/// parameter must be present with its shape; reference keys under `prefix` that the model lacks
/// are errors too, so loading weights of a different configuration fails loudly.
pub fn import_reference(
    vs: &VarStore,
    tensors: &NamedTensors,
    prefix: &str,
    origin: &Path,
) -> Result<()> {
    let vars = vs.variables();
    let mut ours = NamedTensors::new();
    for (name, var) in &vars {
        let Some(reference) = reference_name(name) else {
            continue;
        };
        match tensors.get(&format!("{prefix}{reference}")) {
            Some(t) => {
                ours.insert(name.clone(), t.shallow_clone());
            }
            // A never-updated reference buffer: keep the untrained state (zeros, count 0).
            None if name.ends_with(COV_SUFFIX) => {
                ours.insert(name.clone(), var.f_zeros_like()?);
            }
            None => {} // reported as missing by copy_into
        }
    }
    for name in vars.keys().filter(|n| n.ends_with(COUNT_SUFFIX)) {
        let cov = name.trim_end_matches("_count");
        let present = tensors.contains_key(&format!("{prefix}{cov}"));
        ours.insert(name.clone(), Tensor::from(present as i64));
    }
    // Reference keys under the prefix that map to nothing here.
    for key in tensors.keys().filter(|k| k.starts_with(prefix)) {
        let bare = &key[prefix.len()..];
        if !vars.contains_key(bare) {
            ours.insert(bare.to_string(), tensors[key].shallow_clone());
        }
    }
    weights::copy_into(vs, &ours, false, origin)?;
    Ok(())
}

/// Reads a reference `state_dict` file (`.safetensors`, or a `torch.save` zip such as `.pt`) and
/// imports it (no key prefix).
pub fn load_reference_file(vs: &VarStore, path: &Path) -> Result<()> {
    let tensors = weights::read_any(path)?;
    import_reference(vs, &tensors, "", path)
}

/// The model's tensors under the reference names, as `ONO2.state_dict()` would hold them.
pub fn export_reference(vs: &VarStore) -> Result<NamedTensors> {
    let vars = vs.variables();
    let mut out = NamedTensors::new();
    for (name, var) in &vars {
        let Some(reference) = reference_name(name) else {
            continue;
        };
        if name.ends_with(COV_SUFFIX) {
            let count = &vars[&format!("{name}_count")];
            if host::read_i64(count)? == 0 {
                continue;
            }
        }
        out.insert(reference.to_string(), var.f_detach_copy()?);
    }
    Ok(out)
}

/// Writes [`export_reference`] to a safetensors file (atomically), loadable in PyTorch with
/// `model.load_state_dict(safetensors.torch.load_file(path), strict=False)` after assigning the
/// `feature_cov` buffers (see the fixtures README).
pub fn save_reference_file(vs: &VarStore, path: &Path) -> Result<()> {
    let tensors = export_reference(vs)?;
    weights::save_safetensors(
        path,
        tensors.iter().map(|(n, t)| (n.as_str(), t)),
        [("format".to_string(), "pt".to_string())].into(),
    )?;
    Ok(())
}

/// Maps the reference constructor arguments (`ONO2(**config)`) onto [`OnoConfig`].
pub fn config_from_reference(config: &Value) -> Result<OnoConfig> {
    let bad = |m: String| Error::Config(format!("reference config: {m}"));
    let int = |key: &str| -> Result<i64> {
        config[key]
            .as_i64()
            .ok_or_else(|| bad(format!("{key} missing or not an integer")))
    };
    let nn_block = match &config["attn_type"] {
        Value::Null => NnBlock::LinearTransformer,
        Value::String(s) if s == "nystrom" => NnBlock::Nystrom,
        Value::String(s) if s == "galerkin" => NnBlock::Galerkin,
        other => return Err(bad(format!("attn_type {other} is not supported"))),
    };
    let orthogonalization = match int("orth")? {
        1 => Orthogonalization::Orthonormal,
        0 => Orthogonalization::BatchNorm,
        o => return Err(bad(format!("orth {o}"))),
    };
    for key in ["dropout", "attn_dropout"] {
        if config[key].as_f64().unwrap_or(0.0) != 0.0 {
            return Err(bad(format!("{key} must be 0 (dropout is not ported)")));
        }
    }
    if config["act"].as_str().unwrap_or("gelu") != "gelu" {
        return Err(bad(format!("act {} (only gelu)", config["act"])));
    }
    Ok(OnoConfig {
        space_dim: int("space_dim")?,
        fun_dim: int("fun_dim")?,
        out_dim: int("out_dim")?,
        n_layers: int("n_layers")? as usize,
        n_hidden: int("n_hidden")?,
        n_head: int("n_head")?,
        psi_dim: int("psi_dim")?,
        mlp_ratio: int("mlp_ratio")?,
        nn_block,
        orthogonalization,
        momentum: config["momentum"].as_f64().unwrap_or(0.9),
        time_input: config["Time_Input"].as_bool().unwrap_or(false),
        ..OnoConfig::default()
    })
}

impl FromReference for OnoConfig {
    /// The ONO fixtures name no family.
    fn claims_reference(json: &Value) -> bool {
        matches!(json.get("family"), None | Some(Value::Null))
            || json["family"].as_str() == Some(OnoConfig::ARCH)
    }

    fn from_reference(json: &Value) -> Result<Self> {
        config_from_reference(&json["config"])
    }
}
