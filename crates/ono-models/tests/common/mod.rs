//! Shared checks of the state_dict-layout fixture families (`fixtures/fno`, `geofno`, `ffno`,
//! `ufno`, …): every case f32 and f64, a perturbed weight is caught, and the presets' parameter
//! counts equal the references'.
#![allow(dead_code)]

use ono_models::fixture::{check, Fixture, Report};
use ono_models::{Model, ModelConfig};
use tch::{Device, Kind, Tensor};

pub fn fixture(family: &str, case: &str) -> Fixture {
    let dir = ono_testing::fixtures_dir().join(family);
    Fixture::load(
        &dir.join(format!("{case}.safetensors")),
        &dir.join(format!("{case}.json")),
    )
    .unwrap_or_else(|e| panic!("fixture {family}/{case}: {e}"))
}

fn assert_complete(report: &Report, fx: &Fixture) {
    assert!(report.passed(), "{report}");
    if report.kind == Kind::Double {
        assert!(report.checks.iter().any(|c| c.name == "output.eval_f64"));
        return;
    }
    // One gradient per stored gradient, and the outputs.
    let grads = fx.tensors.keys().filter(|k| k.starts_with("grad.")).count();
    let checked = report
        .checks
        .iter()
        .filter(|c| c.name.starts_with("grad."))
        .count();
    assert_eq!(checked, grads, "{report}");
    assert!(report.checks.iter().any(|c| c.name == "output.eval"));
    assert!(report.checks.iter().any(|c| c.name == "loss.train"));
}

/// The case passes in float32 (the JSON's tolerances) and float64 (1e-9 on the output), as
/// architecture `arch`.
pub fn run_case(family: &str, case: &str, arch: &str) {
    ono_testing::init();
    let fx = fixture(family, case);
    assert_eq!(fx.config.arch(), arch, "{case} is claimed by another arch");
    let report = check(&fx, Kind::Float, Device::Cpu, &fx.f32_tolerances().unwrap()).unwrap();
    assert_complete(&report, &fx);
    let report = check(&fx, Kind::Double, Device::Cpu, &fx.f64_tolerances()).unwrap();
    assert_complete(&report, &fx);
    // The parameter count of the fixture's model equals the reference's (complex = 2 reals).
    let model = Model::new(&fx.config, Device::Cpu, Kind::Float).unwrap();
    assert_eq!(
        Some(model.parameter_count()),
        fx.json["param_count_real"].as_i64(),
        "{case}: parameter count"
    );
}

/// Scaling `param.<name>` by 1 + 1e-2 makes the float32 check fail.
pub fn perturbed_weight_is_caught(family: &str, case: &str, name: &str) {
    ono_testing::init();
    let mut fx = fixture(family, case);
    let key = format!("param.{name}");
    let w = fx.tensors.get(&key).unwrap_or_else(|| panic!("no {key}"));
    let perturbed: Tensor = w * (1.0 + 1e-2);
    fx.tensors.insert(key, perturbed);
    let report = check(&fx, Kind::Float, Device::Cpu, &fx.f32_tolerances().unwrap()).unwrap();
    assert!(!report.passed(), "a perturbed {name} passed:\n{report}");
}

/// `arch`'s preset `preset` with the data dimensions it is meant for has the reference count.
pub fn assert_param_count(arch: &str, preset: &str, expected: i64) {
    ono_testing::init();
    let cfg = ModelConfig::preset(arch, preset).unwrap();
    let model = Model::new(&cfg, Device::Cpu, Kind::Float).unwrap();
    assert_eq!(model.parameter_count(), expected, "{arch} preset {preset}");
}

/// `configs.<key>.<field>` of `fixtures/<family>/reference_param_counts.json`.
pub fn reference_count(family: &str, path: &[&str]) -> i64 {
    let file = ono_testing::fixtures_dir()
        .join(family)
        .join("reference_param_counts.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let mut v = &json;
    for p in path {
        v = &v[*p];
    }
    v.as_i64()
        .unwrap_or_else(|| panic!("{}: no count at {path:?}", file.display()))
}
