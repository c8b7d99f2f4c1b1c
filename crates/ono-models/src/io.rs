//! Saving and loading a whole ONO model in one safetensors file: every parameter and buffer (EMA
//! covariances with their counters, BatchNorm statistics) plus the configuration as JSON metadata,
//! so a file alone rebuilds the model.

use std::collections::HashMap;
use std::path::Path;

use tch::nn::VarStore;
use tch::{Device, Kind};

use crate::ono::{Ono, OnoConfig};
use crate::{Error, Result};
use ono_nn::weights;

/// Metadata key of the format tag.
pub const FORMAT_KEY: &str = "format";
/// Value of the format tag.
pub const FORMAT: &str = "ono-model-v1";
/// Metadata key of the JSON configuration.
pub const CONFIG_KEY: &str = "ono_config";

/// Writes the model (all of `vs`) and its configuration, atomically.
pub fn save(path: &Path, vs: &VarStore, cfg: &OnoConfig) -> Result<()> {
    let vars = vs.variables();
    let config = serde_json::to_string(cfg).map_err(|e| Error::Config(e.to_string()))?;
    let meta = HashMap::from([
        (FORMAT_KEY.to_string(), FORMAT.to_string()),
        (CONFIG_KEY.to_string(), config),
    ]);
    weights::save_safetensors(path, vars.iter().map(|(n, t)| (n.as_str(), t)), meta)?;
    Ok(())
}

/// Rebuilds a model saved by [`save`] on `device`, in the floating kind it was saved in.
pub fn load(path: &Path, device: Device) -> Result<(VarStore, Ono)> {
    let (tensors, meta) = weights::read_safetensors(path)?;
    let bad = |msg: String| {
        Error::Nn(ono_nn::Error::Weights {
            path: path.display().to_string(),
            msg,
        })
    };
    if meta.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT) {
        return Err(bad(format!(
            "not an ONO model file (metadata {FORMAT_KEY} = {:?}, expected {FORMAT:?}); \
             reference state_dicts load with reference::load_reference_file",
            meta.get(FORMAT_KEY)
        )));
    }
    let cfg: OnoConfig = serde_json::from_str(
        meta.get(CONFIG_KEY)
            .ok_or_else(|| bad(format!("no {CONFIG_KEY} metadata")))?,
    )
    .map_err(|e| bad(format!("configuration: {e}")))?;
    let mut vs = VarStore::new(device);
    let model = cfg.init(&vs.root())?;
    let kind = tensors
        .get("preprocess.linear_post.weight")
        .map(|t| t.kind())
        .unwrap_or(Kind::Float);
    if kind == Kind::Double {
        vs.double();
    }
    weights::copy_into(&vs, &tensors, false, path)?;
    Ok((vs, model))
}
