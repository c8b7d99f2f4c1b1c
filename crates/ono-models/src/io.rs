//! Saving and loading a whole model of any architecture in one safetensors file: every parameter
//! and buffer (EMA covariances with their counters, BatchNorm statistics) plus the configuration
//! as JSON metadata, so a file alone rebuilds the model.
//!
//! The configuration is stored under `model_config` with its `arch`; files written before the
//! registry existed hold an ONO configuration under `ono_config` and still load.

use std::collections::HashMap;
use std::path::Path;

use tch::nn::VarStore;
use tch::Device;

use crate::model::Model;
use crate::registry::ModelConfig;
use crate::{Error, Result};
use ono_nn::weights;

/// Metadata key of the format tag.
pub const FORMAT_KEY: &str = "format";
/// Value of the format tag.
pub const FORMAT: &str = "ono-model-v1";
/// Metadata key of the JSON configuration (with its `arch`).
pub const CONFIG_KEY: &str = "model_config";
/// Metadata key of the configuration in files written before the registry (ONO only).
pub const LEGACY_CONFIG_KEY: &str = "ono_config";

/// Writes the variables of `vs` and their configuration, atomically.
pub fn save(path: &Path, vs: &VarStore, cfg: &ModelConfig) -> Result<()> {
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
pub fn load(path: &Path, device: Device) -> Result<Model> {
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
             reference state_dicts load with Model::load_reference_file",
            meta.get(FORMAT_KEY)
        )));
    }
    let text = meta
        .get(CONFIG_KEY)
        .or_else(|| meta.get(LEGACY_CONFIG_KEY))
        .ok_or_else(|| bad(format!("no {CONFIG_KEY} metadata")))?;
    let cfg: ModelConfig =
        serde_json::from_str(text).map_err(|e| bad(format!("configuration: {e}")))?;
    Model::from_tensors(&cfg, &tensors, device, path)
}

impl Model {
    /// [`save`]s this model.
    pub fn save(&self, path: &Path) -> Result<()> {
        save(path, self.var_store(), self.config())
    }
}
