//! Geo-FNO on point clouds (`elas_geofno.py`: FNO2d + IPHI with a geometry code) and NSL's FNO
//! (`models/FNO.py`, Geo-FNO projection on point clouds) against the reference fixtures
//! (`fixtures/geofno`), and the presets' parameter counts against the references'.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn nsl_fno_irregular_small() {
    run_case("geofno", "nsl_fno_irregular_small", "nsl_fno");
}

#[test]
fn nsl_fno_presets_have_the_reference_parameter_counts() {
    let nsl = |k: &str| reference_count("fno", &["nsl_FNO", "configs", k, "param_count_real"]);
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        assert_param_count("nsl_fno", bench, nsl(bench));
    }
}

#[test]
fn elas_geofno_small() {
    run_case("geofno", "elas_geofno_small", "geofno");
}

#[test]
fn geofno_preset_has_the_reference_parameter_count() {
    let geo = reference_count("geofno", &["configs", "elasticity", "param_count_real"]);
    assert_param_count("geofno", "elasticity", geo);
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model_iphi.fc_code.weight");
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model.conv4.weights1");
    perturbed_weight_is_caught("geofno", "elas_geofno_small", "model.b4.weight");
    perturbed_weight_is_caught("geofno", "nsl_fno_irregular_small", "iphi.fc4.weight");
    perturbed_weight_is_caught(
        "geofno",
        "nsl_fno_irregular_small",
        "fftproject_in.weights2",
    );
    perturbed_weight_is_caught(
        "geofno",
        "nsl_fno_irregular_small",
        "preprocess.linear_pre.0.weight",
    );
}
