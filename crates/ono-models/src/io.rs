//! Saving and loading a whole model of any architecture in one safetensors file: every parameter
//! and buffer (EMA covariances with their counters, BatchNorm statistics) plus the configuration
//! as JSON metadata, so a file alone rebuilds the model.
//!
//! The configuration is stored under `model_config` with its `arch`. The file's format version
//! ([`FORMAT`]) tells older layouts, which [`migrate`] brings to the current one.

use std::collections::HashMap;
use std::path::Path;

use tch::nn::VarStore;
use tch::Device;

use crate::model::Model;
use crate::registry::ModelConfig;
use crate::{Error, Result};
use ono_io::format::FileFormat;
use ono_nn::weights;

/// Metadata key of the format tag.
pub const FORMAT_KEY: &str = "format";
/// The format and its current version.
pub const FORMAT: FileFormat = FileFormat {
    name: "ono-model",
    current: 2,
};
/// Metadata key of the JSON configuration (with its `arch`).
pub const CONFIG_KEY: &str = "model_config";

/// Brings the metadata of a model file of format version `from` to the current layout: the
/// history of the format, one step per version.
pub fn migrate(meta: &mut HashMap<String, String>, from: u32) -> std::result::Result<(), String> {
    if from < 2 {
        // v1: up to 2026-11. The files written before the registry (ONO the one architecture)
        // held ONO's configuration under `ono_config`, without `arch`.
        if let Some(old) = meta
            .remove("ono_config")
            .filter(|_| !meta.contains_key(CONFIG_KEY))
        {
            let mut cfg: serde_json::Value =
                serde_json::from_str(&old).map_err(|e| format!("ono_config: {e}"))?;
            let fields = cfg
                .as_object_mut()
                .ok_or("ono_config: not a configuration table")?;
            fields.insert("arch".into(), crate::registry::DEFAULT_ARCH.into());
            meta.insert(CONFIG_KEY.into(), cfg.to_string());
        }
    }
    Ok(())
}

/// Writes the variables of `vs` and their configuration, atomically.
pub fn save(path: &Path, vs: &VarStore, cfg: &ModelConfig) -> Result<()> {
    let vars = vs.variables();
    let config = serde_json::to_string(cfg).map_err(|e| Error::Config(e.to_string()))?;
    let meta = HashMap::from([
        (FORMAT_KEY.to_string(), FORMAT.tag()),
        (CONFIG_KEY.to_string(), config),
    ]);
    weights::save_safetensors(path, vars.iter().map(|(n, t)| (n.as_str(), t)), meta)?;
    Ok(())
}

/// Rebuilds a model saved by [`save`] on `device`, in the floating kind it was saved in.
pub fn load(path: &Path, device: Device) -> Result<Model> {
    let (tensors, mut meta) = weights::read_safetensors(path)?;
    let bad = |msg: String| {
        Error::Nn(ono_nn::Error::Weights {
            path: path.display().to_string(),
            msg,
        })
    };
    let version = FORMAT
        .version(meta.get(FORMAT_KEY).map(String::as_str))
        .map_err(|e| {
            bad(format!(
                "not an ONO model file ({e}); reference state_dicts load with \
                 Model::load_reference_file"
            ))
        })?;
    migrate(&mut meta, version).map_err(bad)?;
    let text = meta
        .get(CONFIG_KEY)
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
