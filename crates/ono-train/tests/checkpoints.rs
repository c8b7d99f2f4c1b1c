//! Checkpoints of earlier releases under the typed run state: the legacy checkpoint of commit
//! e42ceaf (`fixtures/legacy_checkpoint`) and a mid-run checkpoint of commit d099a84, whose
//! state held the configuration as a JSON value (`fixtures/checkpoint_d099a84`), load with their
//! configuration typed, write it back unchanged, and evaluate to the errors those releases
//! printed. And the one check of a configuration: at [`RunSpec::resolve`], by key.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ono_data::normalizer::NormalizerKind;
use ono_models::Recompute;
use ono_train::checkpoint::{Checkpoint, TrainState};
use ono_train::config::TrainConfig;
use ono_train::evaluate::{evaluate_checkpoint, EvalData};
use ono_train::{Error, Precision, RunSpec};
use tch::Device;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The run state exactly as the file's metadata holds it (the safetensors header's JSON).
fn raw_state(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    let state = header["__metadata__"]["state"].as_str().unwrap();
    serde_json::from_str(state).unwrap()
}

/// `checkpoint`'s test error on the 9×9 Darcy file both fixtures were trained on.
fn error_on_darcy9(checkpoint: &Path) -> f64 {
    let data = EvalData::File(fixtures().join("legacy_checkpoint/darcy9.safetensors"));
    let e = evaluate_checkpoint(checkpoint, &data, Device::Cpu, 4).unwrap();
    assert_eq!((e.samples, e.grid.as_deref()), (4, Some(&[9i64, 9][..])));
    e.test_rel_l2
}

/// A float32 evaluation of a stored checkpoint against what the commit that wrote it printed.
/// Equal on the machine that made the fixtures; other kernel paths (MKL's and ATen's, picked by
/// the CPU's instruction set) moved these two errors by at most one float32 ulp (1.0e-7
/// relative; an Intel AVX-512 machine under its own kernels, `ATEN_CPU_CAPABILITY=default|avx2`
/// and `MKL_ENABLE_INSTRUCTIONS=AVX2|SSE4_2`). 1e-6 leaves ten times that; the two checkpoints'
/// errors differ by 6.9e-3.
fn assert_close(got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-6 * want, "{got} vs {want}");
}

#[test]
fn legacy_checkpoint_loads_typed_and_evaluates_the_same() {
    ono_testing::init();
    let path = fixtures().join("legacy_checkpoint/ono_darcy_e42ceaf.safetensors");
    let ckpt = Checkpoint::load(&path).unwrap();
    let c = &ckpt.state.config;
    assert_eq!(
        c.data.path.as_deref(),
        Some(Path::new("darcy9.safetensors"))
    );
    assert_eq!((c.seed, c.epochs, c.batch_size), (7, 2, 4));
    assert_eq!(c.loss.derivative_alpha, Some(0.1));
    assert_eq!(c.model.preset.as_deref(), Some("darcy"));
    assert_eq!(c.model.arch, "ono");
    // Before the recomputation modes the file said `false`; before mixed precision, nothing.
    assert_eq!(
        (c.recompute, c.precision),
        (Recompute::None, Precision::F32)
    );
    let n = ckpt.state.normalizers;
    assert_eq!(
        (n.x, n.y, n.pos, n.theta),
        (
            NormalizerKind::Unit,
            NormalizerKind::Gaussian,
            NormalizerKind::None,
            NormalizerKind::None
        )
    );
    // The configuration writes back as the JSON it was read from.
    let raw = raw_state(&path);
    assert_eq!(serde_json::to_value(c).unwrap(), raw["config"]);
    // What `ono eval` of commit e42ceaf printed (fixtures/legacy_checkpoint/eval_old.json).
    assert_close(error_on_darcy9(&path), 0.30172547698020935);
}

#[test]
fn todays_checkpoint_loads_typed_matches_its_experiment_and_evaluates_the_same() {
    ono_testing::init();
    let dir = fixtures().join("checkpoint_d099a84");
    let path = dir.join("mid.safetensors");
    let ckpt = Checkpoint::load(&path).unwrap();
    let st = &ckpt.state;
    assert_eq!((st.global_step, st.epoch, st.batch_in_epoch), (5, 1, 1));
    // The whole state writes back as the JSON of the release that wrote it, with the fields
    // added since at the values that release used: ONO's Nyström landmarks and kernel scale.
    let mut written = serde_json::to_value(st).unwrap();
    let model = written["model"].as_object_mut().unwrap();
    assert_eq!(model.remove("landmarks"), Some(serde_json::json!(256)));
    assert_eq!(model.remove("kernel_scale"), Some(serde_json::json!("sum")));
    assert_eq!(written, raw_state(&path));
    // The sidecar (`checkpoints/last.json`, which `ono reproduce` reads) is the same state.
    let sidecar: TrainState =
        serde_json::from_str(&std::fs::read_to_string(dir.join("mid.json")).unwrap()).unwrap();
    assert_eq!(&sidecar, st);
    // Its configuration is the experiment's fingerprint: a resumed run compares equal.
    let text = std::fs::read_to_string(dir.join("experiment.toml")).unwrap();
    let cfg = TrainConfig::from_toml(&text).unwrap();
    assert_eq!(st.config, cfg.fingerprint());
    let mut other = cfg.clone();
    other.seed += 1;
    other.optimizer.lr *= 2.0;
    assert_eq!(
        st.config.differing_keys(&other.fingerprint()),
        ["optimizer", "seed"]
    );
    // The positions' normalizer, saved as `norm.pos.*`, comes back as fitted.
    assert_eq!(st.normalizers.pos, NormalizerKind::Unit);
    let norms = ckpt.normalizers().unwrap();
    assert_eq!(norms.pos.kind(), NormalizerKind::Unit);
    // What `ono eval` of commit d099a84 printed (fixtures/checkpoint_d099a84/eval_old.json).
    assert_close(error_on_darcy9(&path), 0.29965347051620483);
}

/// A bad value is refused where the run is resolved, once, naming its key; parsing the file is
/// not checking it. A setting the data cannot serve is refused there too, before any training
/// state exists.
#[test]
fn a_bad_configuration_is_refused_once_by_key() {
    ono_testing::init();
    let data = fixtures().join("legacy_checkpoint/darcy9.safetensors");
    let text = |extra: &str, data_extra: &str| {
        format!(
            "epochs = 1\nbatch_size = 4\n{extra}\noutput_dir = \"{}\"\n[model]\npreset = \"darcy\"\n[data]\npath = \"{}\"\n{data_extra}\n",
            std::env::temp_dir().join("ono-never-written").display(),
            data.display()
        )
    };
    let key_of = |e: Error| match e {
        Error::Config { key, .. } | Error::Invalid { key, .. } => key,
        e => panic!("not a configuration error: {e}"),
    };
    let cases = [
        ("batch_size = 0", "", "batch_size"),
        ("device = \"tpu\"", "", "device"),
        ("", "normalize_pos = \"gaussian\"", "data.normalize_pos"),
        // Darcy's targets are steady (S, N, 1): no time axis to roll out.
        ("", "regime = \"autoregressive\"", "data.regime"),
        ("", "train_steps = 2", "data.train_steps"),
    ];
    for (extra, data_extra, key) in cases {
        // `batch_size = 0` twice would not parse; replace the line instead.
        let t = if extra.starts_with("batch_size") {
            text("", data_extra).replace("batch_size = 4", extra)
        } else {
            text(extra, data_extra)
        };
        let cfg = TrainConfig::from_toml(&t).unwrap_or_else(|e| panic!("{key}: {e}"));
        let err = RunSpec::resolve(cfg).err().expect(key);
        assert_eq!(key_of(err), key);
    }
    // What point sharding cannot split yet is refused by its key, saying why.
    let points = [
        ("loss.kind = \"gnot\"", "loss.kind"),
        ("loss.derivative_alpha = 0.1", "loss.derivative_alpha"),
    ];
    for (extra, key) in points {
        let t = text(&format!("parallel = \"points\"\n{extra}"), "");
        let err = RunSpec::resolve(TrainConfig::from_toml(&t).unwrap())
            .err()
            .expect(key);
        let msg = err.to_string();
        assert!(msg.contains("parallel = \"points\""), "{msg}");
        assert_eq!(key_of(err), key);
        // Without point sharding the same setting resolves.
        RunSpec::resolve(TrainConfig::from_toml(&text(extra, "")).unwrap()).unwrap();
    }
    // And a good one resolves: the data's dimensions are in the model's configuration.
    let run = RunSpec::resolve(TrainConfig::from_toml(&text("", "")).unwrap()).unwrap();
    assert_eq!(run.data.grid, Some(vec![9, 9]));
    let fields = run.model.fields().unwrap();
    assert_eq!(
        (&fields["space_dim"], &fields["fun_dim"], &fields["out_dim"]),
        (&2.into(), &1.into(), &1.into())
    );
}

/// A checkpoint's format version: v1 files are migrated (the two above), the current one is
/// written, and a later one (or another kind of file) is refused by name, header and tensors
/// alike.
#[test]
fn format_versions_are_written_migrated_and_refused_by_name() {
    ono_testing::init();
    let dir = std::env::temp_dir().join(format!("ono-ckpt-format-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = fixtures().join("checkpoint_d099a84/mid.safetensors");
    let (tensors, meta) = ono_nn::weights::read_safetensors(&src).unwrap();
    assert_eq!(meta["format"], "ono-train-checkpoint-v1");
    let ckpt = Checkpoint::load(&src).unwrap();
    let today = dir.join("today.safetensors");
    ckpt.save(&today).unwrap();
    let (_, written) = ono_nn::weights::read_safetensors(&today).unwrap();
    assert_eq!(written["format"], "ono-train-checkpoint-v2");
    assert_eq!(Checkpoint::read_state(&today).unwrap(), ckpt.state);
    for (tag, says) in [
        ("ono-train-checkpoint-v3", "later ono"),
        ("ono-model-v2", "not ono-train-checkpoint"),
    ] {
        let mut m = meta.clone();
        m.insert("format".into(), tag.into());
        let path = dir.join("other.safetensors");
        ono_nn::weights::save_safetensors(&path, tensors.iter().map(|(k, v)| (k.as_str(), v)), m)
            .unwrap();
        for e in [
            Checkpoint::read_state(&path).unwrap_err(),
            Checkpoint::load(&path).err().unwrap(),
        ] {
            let e = e.to_string();
            assert!(e.contains(says) && e.contains(tag), "{tag}: {e}");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
