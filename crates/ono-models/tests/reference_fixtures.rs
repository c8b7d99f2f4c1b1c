//! The ONO port against every case of the reference fixtures (`fixtures/ono`, made with the official
//! PyTorch code): float32 within each case's tolerances, float64 within 1e-9 (outputs, loss,
//! buffers) and 1e-8 (gradients).

use ono_models::fixture::{check, Fixture, Report};
use ono_models::ModelConfig;
use tch::{Device, Kind};

const CASES: [&str; 12] = [
    "linear_small",
    "linear_small_wellcond",
    "nystrom_small",
    "nystrom_small_wellcond",
    "galerkin_small",
    "galerkin_small_wellcond",
    "bn_ablation",
    "bn_ablation_wellcond",
    "time_input",
    "time_input_wellcond",
    "ema_distinct_inputs",
    "ema_distinct_inputs_wellcond",
];

fn fixture(case: &str) -> Fixture {
    let dir = ono_testing::fixtures_dir().join("ono");
    Fixture::load(
        &dir.join(format!("{case}.safetensors")),
        &dir.join(format!("{case}.json")),
    )
    .unwrap_or_else(|e| panic!("fixture {case}: {e}"))
}

fn assert_passed(report: &Report) {
    assert!(report.passed(), "{report}");
    // Every quantity was compared: outputs, loss, buffers and one gradient per parameter.
    assert!(report.checks.iter().any(|c| c.name == "output.eval"));
    assert!(report
        .checks
        .iter()
        .any(|c| c.name.starts_with("two passes")));
    assert!(
        report
            .checks
            .iter()
            .filter(|c| c.name.starts_with("grad."))
            .count()
            > 40
    );
}

fn run(case: &str) {
    ono_testing::init();
    let fx = fixture(case);
    let f32_report = check(&fx, Kind::Float, Device::Cpu, &fx.f32_tolerances().unwrap()).unwrap();
    assert_passed(&f32_report);
    let f64_report = check(&fx, Kind::Double, Device::Cpu, &fx.f64_tolerances()).unwrap();
    assert_passed(&f64_report);
}

macro_rules! cases {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            run(stringify!($name));
        }
    )*};
}

cases!(
    linear_small,
    linear_small_wellcond,
    nystrom_small,
    nystrom_small_wellcond,
    galerkin_small,
    galerkin_small_wellcond,
    bn_ablation,
    bn_ablation_wellcond,
    time_input,
    time_input_wellcond,
    ema_distinct_inputs,
    ema_distinct_inputs_wellcond
);

#[test]
fn every_case_is_listed() {
    let dir = ono_testing::fixtures_dir().join("ono");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".safetensors").map(str::to_string)
        })
        .collect();
    found.sort();
    let mut listed: Vec<String> = CASES.iter().map(|s| s.to_string()).collect();
    listed.sort();
    assert_eq!(found, listed);
}

/// The check is not vacuous: one wrong constant (the EMA momentum, 0.8 for 0.9) is caught in
/// float64 by the buffer comparison of the case built to exercise it.
#[test]
fn a_wrong_momentum_fails_the_check() {
    ono_testing::init();
    let mut fx = fixture("ema_distinct_inputs_wellcond");
    match &mut fx.config {
        ModelConfig::Ono(c) => c.momentum = 0.8,
        other => panic!("an ONO fixture built {other:?}"),
    }
    let report = check(&fx, Kind::Double, Device::Cpu, &fx.f64_tolerances()).unwrap();
    assert!(!report.passed());
    assert!(report.max_error("two passes") > 1e-6, "{report}");
}

/// …and a perturbed weight breaks outputs and gradients.
#[test]
fn a_perturbed_weight_fails_the_check() {
    ono_testing::init();
    let mut fx = fixture("nystrom_small_wellcond");
    let key = "param.blocks.0.Attn.res_conv.weight";
    let w = fx.tensors[key].shallow_clone();
    fx.tensors.insert(key.into(), &w * 1.001);
    let report = check(&fx, Kind::Double, Device::Cpu, &fx.f64_tolerances()).unwrap();
    assert!(report.max_error("output.eval") > 1e-9, "{report}");
}
