//! Presets, save/load, reference import/export, eval before training, and typed errors.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ono_models::ono::reference::{
    config_from_reference, export_reference, import_reference, load_reference_file,
};
use ono_models::ono::OnoPreset;
use ono_models::{io, parameter_count, Error, ModelConfig, ModelInput, NnBlock, Ono, OnoConfig};
use ono_nn::attention::Landmarks;
use ono_nn::orthogonal::Orthogonalization;
use ono_nn::weights::read_safetensors;
use ono_testing::{assert_close, seeded};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn fixtures() -> PathBuf {
    ono_testing::fixtures_dir().join("ono")
}

fn json(name: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures().join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn small(nn_block: NnBlock, orth: Orthogonalization) -> OnoConfig {
    OnoConfig {
        n_layers: 2,
        n_hidden: 16,
        n_head: 4,
        psi_dim: 4,
        nn_block,
        orthogonalization: orth,
        ..OnoConfig::default()
    }
}

fn inputs(b: i64, n: i64, cfg: &OnoConfig, kind: Kind) -> (Tensor, Tensor) {
    let pos = Tensor::rand([b, n, cfg.space_dim], (kind, Device::Cpu));
    let fx = Tensor::randn([b, n, cfg.fun_dim], (kind, Device::Cpu));
    (pos, fx)
}

fn build(cfg: &OnoConfig) -> (VarStore, Ono) {
    let vs = VarStore::new(Device::Cpu);
    let model = cfg.init(&vs.root()).unwrap();
    (vs, model)
}

#[test]
fn presets_match_the_reference_configurations_and_parameter_counts() {
    seeded(0);
    let files = [
        (OnoPreset::Darcy, "darcy"),
        (OnoPreset::Ns2d, "ns"),
        (OnoPreset::Airfoil, "airfoil"),
        (OnoPreset::Pipe, "pipe"),
        (OnoPreset::Elasticity, "elasticity"),
        (OnoPreset::Plasticity, "plasticity"),
        (OnoPreset::SuperResolution, "space_gen"),
        (OnoPreset::TimeExtrapolation, "time_gen"),
    ];
    for (preset, file) in files {
        let j = json(&format!("{file}_config_params_only.json"));
        assert_eq!(
            preset.config(),
            config_from_reference(&j["config"]).unwrap()
        );
        let (vs, _) = build(&preset.config());
        assert_eq!(
            parameter_count(&vs),
            j["parameter_count"].as_i64().unwrap(),
            "{file}"
        );
        // Every reference parameter exists here under its name with its shape, and nothing else.
        let reference: BTreeMap<String, Vec<i64>> = j["parameters"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let shape = p["shape"].as_array().unwrap();
                (
                    p["name"].as_str().unwrap().to_string(),
                    shape.iter().map(|d| d.as_i64().unwrap()).collect(),
                )
            })
            .collect();
        let ours: BTreeMap<String, Vec<i64>> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad())
            .map(|(n, t)| (n, t.size()))
            .collect();
        assert_eq!(ours, reference, "{file}");
        assert_eq!(preset, preset.name().parse().unwrap());
    }
    assert!("navier".parse::<OnoPreset>().is_err());
}

#[test]
fn save_then_load_is_bit_identical() {
    seeded(1);
    let dir = std::env::temp_dir().join(format!("ono-save-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (i, orth) in [Orthogonalization::Orthonormal, Orthogonalization::BatchNorm]
        .into_iter()
        .enumerate()
    {
        let cfg = small(NnBlock::Nystrom, orth);
        let (vs, model) = build(&cfg);
        let (pos, fx) = inputs(2, 40, &cfg, Kind::Float);
        // Buffers hold trained statistics, not their initial values.
        for _ in 0..3 {
            let _ = tch::no_grad(|| model.forward(&pos, &fx, None, None, true)).unwrap();
        }
        let path = dir.join(format!("model{i}.safetensors"));
        io::save(&path, &vs, &cfg.into()).unwrap();
        let model2 = io::load(&path, Device::Cpu).unwrap();
        assert_eq!(model2.config(), &ModelConfig::from(cfg));
        let (a, b) = (vs.variables(), model2.var_store().variables());
        assert_eq!(
            a.keys().collect::<Vec<_>>().len(),
            b.keys().collect::<Vec<_>>().len()
        );
        for (name, t) in &a {
            assert_eq!(t.kind(), b[name].kind(), "{name}");
            assert!(t.equal(&b[name]), "{name} differs after load");
        }
        let out1 = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
        let out2 = tch::no_grad(|| model2.forward(&ModelInput::new(&pos, &fx), false)).unwrap();
        assert!(out1.equal(&out2));
    }
    // f64 models come back in f64.
    let cfg = small(NnBlock::LinearTransformer, Orthogonalization::Orthonormal);
    let (mut vs, _) = build(&cfg);
    vs.double();
    let path = dir.join("model_f64.safetensors");
    io::save(&path, &vs, &cfg.into()).unwrap();
    let model2 = io::load(&path, Device::Cpu).unwrap();
    assert_eq!(
        model2.var_store().variables()["blocks.0.mu"].kind(),
        Kind::Double
    );
    // No temporary files are left behind by the atomic writes.
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncated_and_foreign_files_are_errors() {
    seeded(2);
    let dir = std::env::temp_dir().join(format!("ono-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = small(NnBlock::LinearTransformer, Orthogonalization::Orthonormal);
    let (vs, _) = build(&cfg);
    let path = dir.join("m.safetensors");
    io::save(&path, &vs, &cfg.into()).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let cut = dir.join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    assert!(matches!(io::load(&cut, Device::Cpu), Err(Error::Nn(_))));
    // A reference fixture is not a model file: the error says so.
    let err = io::load(&fixtures().join("linear_small.safetensors"), Device::Cpu).unwrap_err();
    assert!(err.to_string().contains("not an ONO model file"), "{err}");
    assert!(io::load(&dir.join("missing.safetensors"), Device::Cpu).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reference_state_dicts_import_and_export_by_the_name_map() {
    seeded(3);
    let (tensors, _) = read_safetensors(&fixtures().join("linear_small.safetensors")).unwrap();
    let cfg = config_from_reference(&json("linear_small.json")["config"]).unwrap();
    let (vs, model) = build(&cfg);
    import_reference(&vs, &tensors, "param.", &fixtures()).unwrap();
    assert_eq!(model.blocks()[0].covariance().unwrap().count().unwrap(), 1);
    // Export gives back exactly the reference state_dict.
    let exported = export_reference(&vs).unwrap();
    let reference: BTreeMap<&str, &Tensor> = tensors
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("param.").map(|k| (k, v)))
        .collect();
    assert_eq!(
        exported.keys().map(String::as_str).collect::<Vec<_>>(),
        reference.keys().copied().collect::<Vec<_>>()
    );
    for (name, t) in &exported {
        assert!(t.equal(reference[name.as_str()]), "{name}");
    }
    // torch.save(state_dict) (.pt, written by fixtures/make_state_dict_pt.py) loads the same.
    let (vs_pt, _) = build(&cfg);
    load_reference_file(&vs_pt, &fixtures().join("linear_small.state_dict.pt")).unwrap();
    for (name, t) in vs.variables() {
        assert!(t.equal(&vs_pt.variables()[&name]), "{name}");
    }
    // Weights of another configuration are refused, naming what is missing.
    let (vs_ny, _) = build(&OnoConfig {
        nn_block: NnBlock::Nystrom,
        ..cfg
    });
    let err = import_reference(&vs_ny, &tensors, "param.", &fixtures()).unwrap_err();
    assert!(err.to_string().contains("to_qkv"), "{err}");
    // A fresh model exports no feature_cov (the reference's None buffer).
    let (fresh, _) = build(&cfg);
    assert!(!export_reference(&fresh)
        .unwrap()
        .keys()
        .any(|k| k.ends_with("feature_cov")));
}

#[test]
fn eval_before_any_training_step_whitens_by_the_identity() {
    seeded(4);
    let cfg = small(NnBlock::LinearTransformer, Orthogonalization::Orthonormal);
    let (vs, model) = build(&cfg);
    let plain_cfg = OnoConfig {
        orthogonalization: Orthogonalization::None,
        ..cfg
    };
    let (vs_plain, plain) = build(&plain_cfg);
    let (pos, fx) = inputs(2, 30, &cfg, Kind::Float);
    tch::no_grad(|| {
        for (name, mut t) in vs_plain.variables() {
            t.copy_(&vs.variables()[&name]);
        }
    });
    let out = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
    let expected = tch::no_grad(|| plain.forward(&pos, &fx, None, None, false)).unwrap();
    assert!(bool::try_from(out.isfinite().all()).unwrap());
    assert_close(&out, &expected, 0.0, 0.0);
    // A training pass updates the buffer, after which eval differs; reset brings it back.
    let _ = tch::no_grad(|| model.forward(&pos, &fx, None, None, true)).unwrap();
    let trained = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
    assert!(!trained.allclose(&expected, 1e-4, 1e-4, false));
    model.reset_statistics().unwrap();
    let reset = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
    assert_close(&reset, &expected, 0.0, 0.0);
}

#[test]
fn every_block_and_orthogonalization_runs_and_trains() {
    seeded(5);
    for nn_block in [
        NnBlock::LinearTransformer,
        NnBlock::Nystrom,
        NnBlock::Galerkin,
        NnBlock::Softmax,
        NnBlock::None,
    ] {
        for orth in [
            Orthogonalization::Orthonormal,
            Orthogonalization::BatchNorm,
            Orthogonalization::LayerNorm,
            Orthogonalization::None,
        ] {
            let cfg = small(nn_block, orth);
            let (vs, model) = build(&cfg);
            let (pos, fx) = inputs(2, 20, &cfg, Kind::Float);
            let out = model.forward(&pos, &fx, None, None, true).unwrap();
            assert_eq!(out.size(), [2, 20, 1]);
            out.square().sum(Kind::Float).backward();
            for (name, t) in vs.trainable_variables().iter().enumerate() {
                assert!(
                    t.grad().defined(),
                    "{nn_block:?}/{orth:?}: parameter {name} no grad"
                );
            }
            let eval = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
            assert!(bool::try_from(eval.isfinite().all()).unwrap());
        }
    }
    // Without an NN block there is no attention and no ln_1.
    let (vs, _) = build(&small(NnBlock::None, Orthogonalization::Orthonormal));
    assert!(!vs
        .variables()
        .keys()
        .any(|k| k.contains("Attn") || k.contains("ln_1")));
}

/// The training-mode output's gradient with respect to the input function agrees with central
/// finite differences in f64 (through the batch covariance, Cholesky and inverse).
#[test]
fn input_gradients_match_finite_differences() {
    seeded(6);
    for nn_block in [NnBlock::LinearTransformer, NnBlock::Softmax] {
        let cfg = OnoConfig {
            n_layers: 2,
            n_hidden: 8,
            n_head: 2,
            psi_dim: 3,
            nn_block,
            ..OnoConfig::default()
        };
        let (mut vs, model) = build(&cfg);
        vs.double();
        let (pos, fx) = inputs(2, 12, &cfg, Kind::Double);
        let f = |t: &[Tensor]| -> Tensor {
            let out = model.forward(&pos, &t[0], None, None, true).unwrap();
            (out.sin()).sum(Kind::Double)
        };
        ono_testing::assert_gradients(f, &[fx], 1e-6, 1e-6);
    }
}

#[test]
fn bad_inputs_are_typed_errors_naming_the_shapes() {
    seeded(7);
    let cfg = OnoConfig {
        time_input: true,
        ..small(NnBlock::LinearTransformer, Orthogonalization::Orthonormal)
    };
    let (_vs, model) = build(&cfg);
    let (pos, fx) = inputs(2, 10, &cfg, Kind::Float);
    let t = Tensor::rand([2, 1], (Kind::Float, Device::Cpu));
    assert!(model.forward(&pos, &fx, None, Some(&t), true).is_ok());

    let wrong_pos = Tensor::rand([2, 10, 3], (Kind::Float, Device::Cpu));
    let err = model
        .forward(&wrong_pos, &fx, None, Some(&t), false)
        .unwrap_err();
    assert!(
        matches!(err, Error::Shape { .. }) && err.to_string().contains("[2, 10, 3]"),
        "{err}"
    );

    let wrong_fx = Tensor::randn([2, 11, 1], (Kind::Float, Device::Cpu));
    let err = model
        .forward(&pos, &wrong_fx, None, Some(&t), false)
        .unwrap_err();
    assert!(err.to_string().contains("[2, 11, 1]"), "{err}");

    let empty_pos = Tensor::rand([2, 0, 2], (Kind::Float, Device::Cpu));
    let empty_fx = Tensor::randn([2, 0, 1], (Kind::Float, Device::Cpu));
    let err = model
        .forward(&empty_pos, &empty_fx, None, Some(&t), false)
        .unwrap_err();
    assert!(
        matches!(err, Error::Shape { .. }) && err.to_string().contains("[2, 0, 2]"),
        "{err}"
    );

    let nan_fx = fx.copy();
    let _ = nan_fx.get(1).get(3).fill_(f64::NAN);
    let err = model
        .forward(&pos, &nan_fx, None, Some(&t), true)
        .unwrap_err();
    assert!(matches!(err, Error::NonFinite { .. }), "{err}");

    assert!(matches!(
        model.forward(&pos, &fx, None, None, false),
        Err(Error::Config(_))
    ));
    let wrong_t = Tensor::rand([3, 1], (Kind::Float, Device::Cpu));
    assert!(model
        .forward(&pos, &fx, None, Some(&wrong_t), false)
        .is_err());

    for bad in [
        OnoConfig { n_head: 5, ..cfg },
        OnoConfig { psi_dim: 0, ..cfg },
        OnoConfig { n_layers: 0, ..cfg },
        OnoConfig {
            momentum: 1.5,
            ..cfg
        },
    ] {
        let vs = VarStore::new(Device::Cpu);
        assert!(
            matches!(bad.init(&vs.root()), Err(Error::Config(_))),
            "{bad:?}"
        );
    }
}

/// The Nyström block's landmark count is the config's (the reference's 256 by default, also for
/// a file written before the field existed); it changes no parameter, only the attention, and a
/// count of zero is refused by name.
#[test]
fn nystrom_landmarks_come_from_the_config() {
    let mut cfg = small(NnBlock::Nystrom, Orthogonalization::Orthonormal);
    assert_eq!(cfg.landmarks, Landmarks::Fixed(256));
    let mut text = serde_json::to_value(cfg).unwrap();
    text.as_object_mut().unwrap().remove("landmarks");
    let old: OnoConfig = serde_json::from_value(text).unwrap();
    assert_eq!(old, cfg);

    let forward = |cfg: &OnoConfig| {
        seeded(9);
        let (vs, model) = build(cfg);
        let (pos, fx) = inputs(2, 20, cfg, Kind::Double);
        let mut vs = vs;
        vs.double();
        let out = tch::no_grad(|| model.forward(&pos, &fx, None, None, false)).unwrap();
        (vs.variables().len(), out)
    };
    let (n256, out256) = forward(&cfg);
    cfg.landmarks = Landmarks::Fixed(4);
    let (n4, out4) = forward(&cfg);
    assert_eq!(n4, n256);
    // 20 tokens are 4 landmarks of 5 tokens each here, and 256 landmarks of one token (after
    // 236 zero rows at the front) by default.
    let diff = (&out4 - &out256).abs().max().double_value(&[]);
    let scale = out256.abs().max().double_value(&[]);
    assert!(diff > 1e-6 * scale, "{diff} of {scale}");
    // The same count twice is the same model.
    assert!(forward(&cfg).1.allclose(&out4, 0.0, 0.0, false));

    cfg.landmarks = Landmarks::Fixed(0);
    let err = ModelConfig::Ono(cfg).validate().unwrap_err().to_string();
    assert!(err.contains("landmarks"), "{err}");
}
