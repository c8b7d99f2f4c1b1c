//! Training checkpoints: one safetensors file holding the model's variables (parameters and
//! statistics buffers), the optimizer's moments and the normalizers, with the run state (step,
//! epoch, position in the epoch's order, history, configuration) as JSON in its metadata; plus a
//! human-readable copy of that JSON beside it ([`sidecar`]). Both are written atomically, the
//! safetensors first: it alone is read back ([`Checkpoint::read_state`] reads just its header),
//! so a kill between the two writes loses nothing.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use ono_models::ModelConfig;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use ono_io::format::FileFormat;

use crate::adamw::AdamWState;
use crate::config::Fingerprint;
use crate::normalizers::{NormalizerKinds, Normalizers};
use crate::{Error, Result};

/// The format of a checkpoint (its `format` metadata) and its current version.
pub const FORMAT: FileFormat = FileFormat {
    name: "ono-train-checkpoint",
    current: 2,
};

/// One epoch's record (also a line of `metrics.jsonl`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpochRecord {
    /// 0-based epoch.
    pub epoch: u64,
    /// Batches done at the end of the epoch.
    pub step: u64,
    /// Mean training loss per sample over the epoch.
    pub train_loss: f64,
    /// Mean relative L2 on the test split, when evaluated (NaN when the predictions were not
    /// finite: written as the string "NaN", see [`nonfinite`]).
    #[serde(with = "nonfinite::option")]
    pub test_rel_l2: Option<f64>,
    /// Per-step test errors of a time series.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "nonfinite::vec"
    )]
    pub test_per_step: Vec<f64>,
    /// The learning rate of the epoch's last step.
    pub lr: f64,
    /// Wall-clock seconds of the epoch (training and evaluation).
    pub seconds: f64,
}

/// Test errors that are not finite (an evaluation whose predictions overflowed, as float16 can
/// early in training): JSON has no such numbers (serde_json would write `null`, which then does
/// not read back as a float), so they are written as the strings "NaN", "inf" and "-inf" and read
/// back as those floats. Finite values are plain numbers, as they always were.
pub mod nonfinite {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Number(f64),
        Name(String),
    }

    fn repr(v: f64) -> Repr {
        match v {
            v if v.is_finite() => Repr::Number(v),
            v if v.is_nan() => Repr::Name("NaN".into()),
            v if v > 0.0 => Repr::Name("inf".into()),
            _ => Repr::Name("-inf".into()),
        }
    }

    fn value<E: serde::de::Error>(r: Repr) -> Result<f64, E> {
        match r {
            Repr::Number(v) => Ok(v),
            Repr::Name(s) => match s.as_str() {
                "NaN" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                _ => Err(E::custom(format!(
                    "{s:?} is not a number, NaN, inf or -inf"
                ))),
            },
        }
    }

    /// For `Option<f64>` fields.
    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
            v.map(repr).serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
            Option::<Repr>::deserialize(d)?.map(value).transpose()
        }
    }

    /// For `Vec<f64>` fields.
    pub mod vec {
        use super::*;

        pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
            s.collect_seq(v.iter().map(|&x| repr(x)))
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
            Vec::<Repr>::deserialize(d)?
                .into_iter()
                .map(value)
                .collect()
        }
    }
}

/// Everything besides tensors that a resumed run needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Batches (schedule steps) done.
    pub global_step: u64,
    /// The epoch in progress (0-based); equals the configured epochs when the run is over.
    pub epoch: u64,
    /// Batches of `epoch` done, in the order given by (seed, epoch).
    pub batch_in_epoch: u64,
    /// Σ of the per-batch training losses of `epoch` so far.
    pub epoch_loss_sum: f64,
    /// Samples those losses cover.
    pub epoch_samples: u64,
    /// Seconds spent in `epoch` so far.
    pub epoch_seconds: f64,
    /// (epoch, test error) of the best evaluated epoch.
    pub best: Option<(u64, f64)>,
    /// One record per finished epoch.
    pub history: Vec<EpochRecord>,
    /// The configuration's fingerprint ([`crate::config::TrainConfig::fingerprint`]).
    pub config: Fingerprint,
    /// The model configuration, with its `arch`.
    pub model: ModelConfig,
    /// The grid shape of the training data, when its points were a grid.
    #[serde(default)]
    pub grid: Option<Vec<i64>>,
    /// The grid of the targets' query points, when they had their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_grid: Option<Vec<i64>>,
    /// How samples were fed.
    pub regime: crate::regime::Regime,
    /// The kinds of the normalizers (`normalize_x`, `normalize_y`, `normalize_pos`,
    /// `normalize_theta` in the JSON).
    #[serde(flatten)]
    pub normalizers: NormalizerKinds,
    /// The optimizer's host-side state.
    pub optimizer: AdamWState,
    /// Micro-batches per optimizer step, over all processes (`accumulate_steps` × world size):
    /// what a resumed run must keep to continue exactly. Left out when 1.
    #[serde(default = "one_micro_batch", skip_serializing_if = "is_one")]
    pub micro_batches: u64,
}

fn one_micro_batch() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

/// A checkpoint in memory.
pub struct Checkpoint {
    /// `model.*`, `optim.*`, `scaler.*` and the normalizers' `norm.*`.
    pub tensors: BTreeMap<String, Tensor>,
    /// The run state.
    pub state: TrainState,
}

impl Checkpoint {
    /// Writes the checkpoint to `path` (a `.safetensors` file), then its state as pretty JSON
    /// beside it ([`sidecar`]), each atomically. [`RunFolder`](crate::run_folder::RunFolder)
    /// names the paths.
    pub fn save(&self, path: &Path) -> Result<()> {
        let fail = |msg: String| Error::Checkpoint {
            path: path.to_path_buf(),
            msg,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| fail(format!("cannot create the folder: {e}")))?;
        }
        let json = serde_json::to_string(&self.state).map_err(|e| fail(e.to_string()))?;
        let meta = HashMap::from([
            ("format".to_string(), FORMAT.tag()),
            ("state".to_string(), json),
        ]);
        let file = |p: &Path, e: Error| Error::CheckpointFile {
            path: p.to_path_buf(),
            source: Box::new(e),
        };
        ono_nn::weights::save_safetensors(
            path,
            self.tensors.iter().map(|(k, v)| (k.as_str(), v)),
            meta,
        )
        .map_err(|e| file(path, e.into()))?;
        let pretty = serde_json::to_vec_pretty(&self.state).map_err(|e| fail(e.to_string()))?;
        let side = sidecar(path);
        ono_io::atomic::write_atomic(&side, &pretty).map_err(|e| file(&side, e.into()))?;
        Ok(())
    }

    /// The run state of the checkpoint at `path`, from the file's header alone (no tensor is
    /// read): what resuming, skipping and curves need. The JSON sidecar is never read back.
    pub fn read_state(path: &Path) -> Result<TrainState> {
        let meta = ono_io::safetensors::read_metadata(path).map_err(|e| Error::CheckpointFile {
            path: path.to_path_buf(),
            source: Box::new(e.into()),
        })?;
        state_of(path, &meta, None)
    }

    /// Reads a checkpoint written by [`Checkpoint::save`]; a truncated file is an
    /// [`Error::CheckpointFile`], a foreign one an [`Error::Checkpoint`].
    pub fn load(path: &Path) -> Result<Self> {
        let (mut tensors, meta) =
            ono_nn::weights::read_safetensors(path).map_err(|e| Error::CheckpointFile {
                path: path.to_path_buf(),
                source: Box::new(e.into()),
            })?;
        let state = state_of(path, &meta, Some(&mut tensors))?;
        Ok(Self { tensors, state })
    }

    /// The normalizers saved in the checkpoint.
    pub fn normalizers(&self) -> Result<Normalizers> {
        Normalizers::from_tensors(self.state.normalizers, &self.tensors)
    }

    /// The tensors under `prefix`, with the prefix removed.
    pub fn section(&self, prefix: &str) -> BTreeMap<String, Tensor> {
        self.tensors
            .iter()
            .filter_map(|(k, v)| {
                k.strip_prefix(prefix)
                    .map(|rest| (rest.to_string(), v.shallow_clone()))
            })
            .collect()
    }
}

/// The human-readable copy of the state of the checkpoint at `path` (`last.json` beside
/// `last.safetensors`): for people and scripts; ono reads the checkpoint itself.
pub fn sidecar(path: &Path) -> PathBuf {
    path.with_extension("json")
}

/// The run state in a checkpoint's metadata, after checking its format and bringing an older
/// layout to the current one ([`migrate`]). `tensors`, when the tensors are read, are migrated
/// with it.
fn state_of(
    path: &Path,
    meta: &HashMap<String, String>,
    tensors: Option<&mut BTreeMap<String, Tensor>>,
) -> Result<TrainState> {
    let fail = |msg: String| Error::Checkpoint {
        path: path.to_path_buf(),
        msg,
    };
    let version = FORMAT
        .version(meta.get("format").map(String::as_str))
        .map_err(|e| fail(format!("not an ono training checkpoint: {e}")))?;
    let text = meta
        .get("state")
        .ok_or_else(|| fail("no run state in the metadata".into()))?;
    let mut state: serde_json::Value =
        serde_json::from_str(text).map_err(|e| fail(format!("unreadable run state: {e}")))?;
    migrate(&mut state, tensors, version).map_err(|e| fail(format!("run state: {e}")))?;
    serde_json::from_value(state).map_err(|e| fail(format!("unreadable run state: {e}")))
}

/// Brings the run state (and, when read, the tensors) of a checkpoint of format version `from`
/// to the current layout: the history of the format, one step per version.
pub fn migrate(
    state: &mut serde_json::Value,
    tensors: Option<&mut BTreeMap<String, Tensor>>,
    from: u32,
) -> std::result::Result<(), String> {
    let state = state.as_object_mut().ok_or("not a table")?;
    if from < 2 {
        // v1: up to 2026-11.
        // Before the registry, ONO was the one architecture and its configuration had no
        // `arch`.
        if let Some(model) = state.get_mut("model").and_then(|m| m.as_object_mut()) {
            if !model.contains_key("arch") {
                model.insert("arch".into(), ono_models::DEFAULT_ARCH.into());
            }
        }
        // Before the positions' and θ's normalizers, and while identities were not saved,
        // an identity normalizer had no tensors: they are zero mean and unit spread.
        if let Some(tensors) = tensors {
            let kinds: NormalizerKinds = serde_json::from_value(state.clone().into())
                .map_err(|e| format!("normalizers: {e}"))?;
            Normalizers::add_missing_identities(kinds, tensors)
                .map_err(|e| format!("normalizers: {e}"))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod nonfinite_tests {
    use super::EpochRecord;

    /// A record with NaN and infinite test errors reads back as it was written; finite errors
    /// are written as plain numbers, so older records read unchanged.
    #[test]
    fn non_finite_test_errors_round_trip_through_json() {
        let r = EpochRecord {
            epoch: 0,
            step: 2,
            train_loss: 0.5,
            test_rel_l2: Some(f64::NAN),
            test_per_step: vec![0.25, f64::INFINITY, f64::NEG_INFINITY, f64::NAN],
            lr: 1e-3,
            seconds: 1.0,
        };
        let text = serde_json::to_string(&r).unwrap();
        assert!(text.contains(r#""test_rel_l2":"NaN""#), "{text}");
        assert!(text.contains(r#"[0.25,"inf","-inf","NaN"]"#), "{text}");
        let back: EpochRecord = serde_json::from_str(&text).unwrap();
        assert!(back.test_rel_l2.unwrap().is_nan());
        assert_eq!(back.test_per_step[..3], r.test_per_step[..3]);
        assert!(back.test_per_step[3].is_nan());
        let old =
            r#"{"epoch":1,"step":4,"train_loss":0.5,"test_rel_l2":0.125,"lr":0.001,"seconds":2.0}"#;
        let read: EpochRecord = serde_json::from_str(old).unwrap();
        assert_eq!(read.test_rel_l2, Some(0.125));
        assert_eq!(serde_json::to_string(&read).unwrap(), old);
        let none =
            r#"{"epoch":1,"step":4,"train_loss":0.5,"test_rel_l2":null,"lr":0.001,"seconds":2.0}"#;
        assert_eq!(
            serde_json::from_str::<EpochRecord>(none)
                .unwrap()
                .test_rel_l2,
            None
        );
        assert!(serde_json::from_str::<EpochRecord>(&none.replace("null", "\"big\"")).is_err());
    }
}
