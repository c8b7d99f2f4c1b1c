//! The model registry: tagged configurations (and the untagged ones of earlier files), presets of
//! every architecture, the pointwise MLP against an f64 oracle, the input parts an architecture
//! refuses, whole-model files of any architecture, and per-parameter fixture tolerances.

use std::collections::HashMap;

use ono_models::fixture::{check, Fixture};
use ono_models::{
    io, ArchConfig, DataDims, Error, InputPart, LossError, Model, ModelConfig, ModelInput,
    OnoConfig, PointwiseMlpConfig, Recompute, ARCHS,
};
use ono_testing::seeded;
use tch::{Device, Kind, Tensor};

fn mlp(width: i64, n_layers: usize, time_input: bool) -> ModelConfig {
    PointwiseMlpConfig {
        space_dim: 2,
        fun_dim: 3,
        out_dim: 2,
        width,
        n_layers,
        time_input,
    }
    .into()
}

#[test]
fn configurations_carry_their_arch_and_untagged_ones_are_ono() {
    for cfg in [
        ModelConfig::from(OnoConfig::default()),
        mlp(16, 2, false),
        ModelConfig::preset("ono", "ns").unwrap(),
        ModelConfig::preset("mlp", "small").unwrap(),
    ] {
        let v = serde_json::to_value(&cfg).unwrap();
        assert_eq!(v["arch"], cfg.arch());
        let back: ModelConfig = serde_json::from_value(v).unwrap();
        assert_eq!(back, cfg);
    }
    // What files and checkpoints held before the registry: ONO's fields without `arch`.
    let old = serde_json::to_value(OnoConfig::default()).unwrap();
    assert!(old.get("arch").is_none());
    let back: ModelConfig = serde_json::from_value(old).unwrap();
    assert_eq!(back, ModelConfig::from(OnoConfig::default()));
    // Unknown architectures and fields are refused by name.
    let err = serde_json::from_str::<ModelConfig>(r#"{"arch": "fno"}"#).unwrap_err();
    assert!(
        err.to_string().contains("unknown architecture `fno`"),
        "{err}"
    );
    let err = serde_json::from_str::<ModelConfig>(r#"{"arch": "mlp", "n_hidden": 3}"#).unwrap_err();
    assert!(err.to_string().contains("n_hidden"), "{err}");
    assert_eq!(&ARCHS[..2], ["ono", "mlp"]);
    for arch in [
        "fno1d",
        "fno2d",
        "fno3d",
        "geofno",
        "nsl_fno",
        "ffno",
        "ufno",
        "lsm",
        "transolver",
        "galerkin",
        "gnot",
    ] {
        assert!(ARCHS.contains(&arch), "{arch} is not registered");
    }
}

#[test]
fn every_architecture_has_presets_and_takes_the_data_dimensions() {
    for arch in ARCHS {
        let names = ModelConfig::preset_names(arch).unwrap();
        assert!(!names.is_empty(), "{arch}");
        for name in names {
            let mut cfg = ModelConfig::preset(arch, name).unwrap();
            cfg.set_data_dims(DataDims {
                space_dim: 1,
                fun_dim: 4,
                out_dim: 3,
                time_input: false,
                functions: Vec::new(),
            });
            cfg.validate().unwrap();
            let v = cfg.fields().unwrap();
            assert_eq!(
                (
                    v["space_dim"].as_i64(),
                    v["fun_dim"].as_i64(),
                    v["out_dim"].as_i64()
                ),
                (Some(1), Some(4), Some(3))
            );
            seeded(0);
            let m = Model::new(&cfg, Device::Cpu, Kind::Float).unwrap();
            assert!(m.parameter_count() > 0);
        }
        let err = ModelConfig::preset(arch, "no-such-preset").unwrap_err();
        assert!(err.to_string().contains("known"), "{err}");
    }
    assert!(ModelConfig::preset("no_such_arch", "darcy").is_err());
    // ONO's preset names accept `ns` and dashes.
    assert_eq!(
        ModelConfig::preset("ono", "ns").unwrap(),
        ModelConfig::preset("ono", "NS2d").unwrap()
    );
    assert!(ModelConfig::preset("ono", "super-resolution").is_ok());
}

/// Presets of a benchmark are listed under the benchmark's own name (ono-data's `ns2d`); the
/// older `ns`, which experiment files may hold, reads as it.
#[test]
fn benchmark_presets_are_listed_by_the_benchmarks_name_and_ns_still_reads() {
    let mut with_ns2d = Vec::new();
    for arch in ARCHS {
        let names = ModelConfig::preset_names(arch).unwrap();
        assert!(!names.contains(&"ns"), "{arch}: {names:?}");
        if names.contains(&"ns2d") {
            with_ns2d.push(*arch);
            assert_eq!(
                ModelConfig::preset(arch, "ns").unwrap(),
                ModelConfig::preset(arch, "ns2d").unwrap(),
                "{arch}"
            );
        }
    }
    assert_eq!(
        with_ns2d,
        [
            "ono",
            "fno2d",
            "fno3d",
            "nsl_fno",
            "ffno",
            "ufno",
            "lsm",
            "transolver"
        ]
    );
}

/// The MLP in f64 on the host, from the model's own weights.
fn mlp_oracle(model: &Model, x: &[f64], n_layers: usize) -> Vec<f64> {
    let vars = model.var_store().variables();
    let w = |name: &str| -> (Vec<f64>, Vec<i64>) {
        let t = vars[name].to_kind(Kind::Double);
        (Vec::<f64>::try_from(t.reshape([-1])).unwrap(), t.size())
    };
    let linear = |name: &str, x: &[f64]| -> Vec<f64> {
        let (wt, s) = w(&format!("{name}.weight"));
        let (b, _) = w(&format!("{name}.bias"));
        (0..s[0] as usize)
            .map(|o| {
                b[o] + (0..s[1] as usize)
                    .map(|i| wt[o * s[1] as usize + i] * x[i])
                    .sum::<f64>()
            })
            .collect()
    };
    let gelu = |v: Vec<f64>| -> Vec<f64> {
        v.into_iter()
            .map(|z| 0.5 * z * (1.0 + libm_erf(z / std::f64::consts::SQRT_2)))
            .collect()
    };
    let mut h = gelu(linear("mlp.linear_pre.0", x));
    for i in 0..n_layers {
        let y = gelu(linear(&format!("mlp.linears.{i}.0"), &h));
        h = y.iter().zip(&h).map(|(a, b)| a + b).collect();
    }
    linear("mlp.linear_post", &h)
}

/// erf by its Maclaurin series (|z| ≤ 3 here) summed to machine precision.
fn libm_erf(z: f64) -> f64 {
    let (mut term, mut sum, mut n) = (z, z, 0.0);
    while term.abs() > 1e-17 * sum.abs().max(1e-300) {
        n += 1.0;
        term *= -z * z / n;
        sum += term / (2.0 * n + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

#[test]
fn the_pointwise_mlp_is_the_mlp_at_every_point_and_zeroes_padding() {
    seeded(3);
    let cfg = mlp(8, 2, true);
    let model = Model::new(&cfg, Device::Cpu, Kind::Double).unwrap();
    // in 2 + 3 + 1 → 8, two residual layers, → 2.
    assert_eq!(
        model.parameter_count(),
        6 * 8 + 8 + 2 * (8 * 8 + 8) + 8 * 2 + 2
    );
    let opts = (Kind::Double, Device::Cpu);
    let (b, n) = (2, 5);
    let pos = Tensor::rand([b, n, 2], opts);
    let fx = Tensor::randn([b, n, 3], opts);
    let t = Tensor::rand([b, 1], opts);
    let out = model
        .forward(&ModelInput::new(&pos, &fx).with_time(Some(&t)), false)
        .unwrap();
    assert_eq!(out.size(), [b, n, 2]);
    for (bi, ni) in [(0, 0), (1, 3), (1, 4)] {
        let mut x: Vec<f64> = Vec::<f64>::try_from(pos.get(bi).get(ni)).unwrap();
        x.extend(Vec::<f64>::try_from(fx.get(bi).get(ni)).unwrap());
        x.push(t.double_value(&[bi, 0]));
        let want = mlp_oracle(&model, &x, 2);
        let got = Vec::<f64>::try_from(out.get(bi).get(ni)).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-12 * w.abs().max(1.0),
                "{got:?} vs {want:?}"
            );
        }
    }
    // Padded rows are zero; real rows unchanged.
    let mask = Tensor::from_slice(&[true, true, true, false, false, true, true, true, true, true])
        .reshape([b, n]);
    let masked = model
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_time(Some(&t))
                .with_mask(Some(&mask)),
            false,
        )
        .unwrap();
    assert_eq!(
        masked.get(0).narrow(0, 3, 2).abs().max().double_value(&[]),
        0.0
    );
    assert!(masked.get(1).equal(&out.get(1)));
    // The time value is required exactly when configured; query points are refused.
    let err = model
        .forward(&ModelInput::new(&pos, &fx), false)
        .unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let err = model
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_time(Some(&t))
                .with_query(Some(&pos), None),
            false,
        )
        .unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { arch: "mlp", .. }),
        "{err}"
    );
    let bad = Tensor::randn([b, n, 4], opts);
    assert!(matches!(
        model.forward(&ModelInput::new(&pos, &bad).with_time(Some(&t)), false),
        Err(Error::Shape { .. })
    ));
}

#[test]
fn ono_refuses_what_it_cannot_take_and_names_it() {
    seeded(4);
    let mut cfg = ModelConfig::preset("ono", "darcy").unwrap();
    if let ModelConfig::Ono(c) = &mut cfg {
        c.n_layers = 1;
        c.n_hidden = 8;
        c.n_head = 2;
        c.psi_dim = 2;
    }
    let model = Model::new(&cfg, Device::Cpu, Kind::Float).unwrap();
    let pos = Tensor::rand([1, 6, 2], (Kind::Float, Device::Cpu));
    let fx = Tensor::rand([1, 6, 1], (Kind::Float, Device::Cpu));
    let input = ModelInput::new(&pos, &fx).with_query(Some(&pos), None);
    assert!(input.has(InputPart::Query));
    let err = model.forward(&input, false).unwrap_err();
    assert!(
        matches!(err, Error::Unsupported { arch: "ono", .. }),
        "{err}"
    );
    // A padding mask it takes (tests/ono_masked.rs checks what it does with it).
    let mask = Tensor::ones([1, 6], (Kind::Bool, Device::Cpu));
    assert!(model
        .forward(&ModelInput::new(&pos, &fx).with_mask(Some(&mask)), false)
        .is_ok());
    // A grid shape is information every model may take.
    let grid = [2i64, 3];
    assert!(model
        .forward(&ModelInput::new(&pos, &fx).with_grid(Some(&grid)), false)
        .is_ok());
}

#[test]
fn forward_backward_equals_forward_then_backward_and_keeps_the_callers_error() {
    seeded(5);
    let cfg = mlp(8, 1, false);
    let opts = (Kind::Double, Device::Cpu);
    let pos = Tensor::rand([3, 4, 2], opts);
    let fx = Tensor::randn([3, 4, 3], opts);
    let y = Tensor::randn([3, 4, 2], opts);
    let input = ModelInput::new(&pos, &fx);
    let a = Model::new(&cfg, Device::Cpu, Kind::Double).unwrap();
    let b = Model::new(&cfg, Device::Cpu, Kind::Double).unwrap();
    let weights: ono_nn::weights::NamedTensors = a.var_store().variables().into_iter().collect();
    b.load_tensors(&weights, "a".as_ref()).unwrap();
    let loss = (a.forward(&input, true).unwrap() - &y)
        .square()
        .sum(Kind::Double);
    loss.backward();
    let mut loss_of =
        |out: &Tensor| -> Result<Tensor, LossError> { Ok((out - &y).square().sum(Kind::Double)) };
    let value = b
        .forward_backward(&input, &mut loss_of, Recompute::None)
        .unwrap();
    assert_eq!(value.double_value(&[]), loss.double_value(&[]));
    assert!(!value.requires_grad());
    let (va, vb) = (a.var_store().variables(), b.var_store().variables());
    for (name, t) in &va {
        assert!(t.grad().equal(&vb[name].grad()), "{name}");
    }
    // The MLP has nothing to recompute.
    assert!(!b.operator().supports_recompute(Recompute::Blocks));
    assert!(b.operator().supports_recompute(Recompute::Auto));
    for mode in [Recompute::Blocks, Recompute::Selective] {
        assert!(matches!(
            b.forward_backward(&input, &mut loss_of, mode),
            Err(Error::Unsupported { .. })
        ));
    }
    // The loss closure's own error comes back whole, as the source of Error::Loss.
    #[derive(Debug)]
    struct Mine;
    impl std::fmt::Display for Mine {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "mine")
        }
    }
    impl std::error::Error for Mine {}
    let mut failing = |_: &Tensor| -> Result<Tensor, LossError> { Err(Box::new(Mine)) };
    match b.forward_backward(&input, &mut failing, Recompute::None) {
        Err(Error::Loss(e)) => assert!(e.downcast_ref::<Mine>().is_some()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn model_files_of_any_architecture_round_trip_and_old_ono_files_load() {
    let dir = std::env::temp_dir().join(format!("ono-registry-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    seeded(6);
    let opts = (Kind::Float, Device::Cpu);
    let pos = Tensor::rand([2, 7, 2], opts);
    let fx = Tensor::randn([2, 7, 3], opts);
    let m = Model::new(&mlp(16, 1, false), Device::Cpu, Kind::Float).unwrap();
    let path = dir.join("mlp.safetensors");
    m.save(&path).unwrap();
    let back = io::load(&path, Device::Cpu).unwrap();
    assert_eq!(back.config(), m.config());
    let input = ModelInput::new(&pos, &fx);
    assert!(m
        .forward(&input, false)
        .unwrap()
        .equal(&back.forward(&input, false).unwrap()));

    // A file in the layout written before the registry: ONO's configuration under `ono_config`.
    let ono_cfg = OnoConfig {
        n_layers: 1,
        n_hidden: 8,
        n_head: 2,
        psi_dim: 2,
        fun_dim: 3,
        ..OnoConfig::default()
    };
    let ono = Model::new(&ono_cfg.into(), Device::Cpu, Kind::Float).unwrap();
    let vars = ono.var_store().variables();
    let meta = HashMap::from([
        ("format".to_string(), "ono-model-v1".to_string()),
        (
            "ono_config".to_string(),
            serde_json::to_string(&ono_cfg).unwrap(),
        ),
    ]);
    let old = dir.join("old.safetensors");
    ono_nn::weights::save_safetensors(&old, vars.iter().map(|(n, t)| (n.as_str(), t)), meta)
        .unwrap();
    let back = io::load(&old, Device::Cpu).unwrap();
    assert_eq!(back.config(), &ModelConfig::from(ono_cfg));
    assert!(ono
        .forward(&input, false)
        .unwrap()
        .equal(&back.forward(&input, false).unwrap()));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn per_parameter_gradient_tolerances_are_honoured() {
    ono_testing::init();
    let dir = ono_testing::fixtures_dir().join("ono");
    let mut fx = Fixture::load(
        &dir.join("linear_small_wellcond.safetensors"),
        &dir.join("linear_small_wellcond.json"),
    )
    .unwrap();
    let suggested = fx.f32_tolerances().unwrap();
    // The other families' layout: `tolerances` with `grad_rel_overrides` by reference name; a
    // global gradient tolerance no float32 port meets, and the case's own one per parameter.
    let obj = fx.json.as_object_mut().unwrap();
    obj.remove("suggested_tolerances");
    let params: Vec<String> = fx
        .tensors
        .keys()
        .filter_map(|k| k.strip_prefix("grad.").map(str::to_string))
        .collect();
    let overrides: serde_json::Map<String, serde_json::Value> = params
        .iter()
        .map(|p| (p.clone(), suggested.grads.into()))
        .collect();
    fx.json["tolerances"] = serde_json::json!({
        "output_rel": suggested.outputs,
        "grad_rel": 1e-30,
        "grad_rel_overrides": overrides,
    });
    let tol = fx.f32_tolerances().unwrap();
    assert_eq!(tol.grad_overrides.len(), params.len());
    let report = check(&fx, Kind::Float, Device::Cpu, &tol).unwrap();
    assert!(report.passed(), "{report}");
    // Without the override of the parameter with the largest error, that one fails.
    let worst = report
        .checks
        .iter()
        .filter(|c| c.name.starts_with("grad.") && c.error > 0.0)
        .max_by(|a, b| a.error.total_cmp(&b.error))
        .expect("float32 gradients are not bit-identical")
        .name
        .clone();
    let mut tol2 = tol.clone();
    tol2.grad_overrides
        .remove(worst.trim_start_matches("grad."));
    let report = check(&fx, Kind::Float, Device::Cpu, &tol2).unwrap();
    let failed: Vec<_> = report
        .checks
        .iter()
        .filter(|c| !c.passed())
        .map(|c| c.name.clone())
        .collect();
    assert_eq!(failed, [worst]);
    // ArchConfig is implemented by every registered configuration.
    assert_eq!(<PointwiseMlpConfig as ArchConfig>::ARCH, "mlp");
}

/// The NSL ports' configurations are their shared settings flattened with their own fields:
/// serialized flat, read over the `darcy` preset, an unknown field refused by name.
#[test]
fn nsl_configurations_are_flat_read_over_their_preset_and_strict() {
    for arch in ["nsl_fno", "ffno", "ufno", "lsm"] {
        let darcy = ModelConfig::preset(arch, "darcy").unwrap();
        let fields = darcy.fields().unwrap();
        assert!(
            fields.get("n_hidden").is_some() && fields.get("nsl").is_none(),
            "{fields}"
        );
        let cfg = ModelConfig::from_fields(arch, serde_json::json!({"modes": 5})).unwrap();
        let mut want = darcy.fields().unwrap();
        want["modes"] = 5.into();
        assert_eq!(cfg.fields().unwrap(), want, "{arch}");
        let err = ModelConfig::from_fields(arch, serde_json::json!({"n_hiden": 3})).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `n_hiden`"),
            "{arch}: {err}"
        );
        // Round trip through the tagged form.
        let tagged = serde_json::to_value(&cfg).unwrap();
        assert_eq!(serde_json::from_value::<ModelConfig>(tagged).unwrap(), cfg);
    }
}
