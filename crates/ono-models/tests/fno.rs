//! FNO 1-D/2-D/3-D and Geo-FNO on structured meshes against the reference scripts' fixtures
//! (`fixtures/fno`, `fixtures/geofno`), and the presets' parameter counts against the scripts'.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn fno1d_small() {
    run_case("fno", "fno1d_small", "fno1d");
}

#[test]
fn fno2d_small() {
    run_case("fno", "fno2d_small", "fno2d");
}

#[test]
fn fno3d_small() {
    run_case("fno", "fno3d_small", "fno3d");
}

#[test]
fn geofno_airfoil_small() {
    run_case("geofno", "airfoil_geofno_small", "fno2d");
}

#[test]
fn geofno_plasticity_small() {
    run_case("geofno", "plasticity_geofno_small", "fno3d");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("fno", "fno2d_small", "conv1.weights1");
    perturbed_weight_is_caught("fno", "fno1d_small", "w3.bias");
    perturbed_weight_is_caught("geofno", "plasticity_geofno_small", "fc0.weight");
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    let fno = |k: &str| reference_count("fno", &["configs", k, "param_count_real"]);
    assert_param_count("fno1d", "burgers", fno("FNO1d_burgers"));
    assert_param_count("fno2d", "darcy", fno("FNO2d_darcy"));
    assert_param_count("fno3d", "ns", fno("FNO3d_ns"));
    let geo = |k: &str| reference_count("geofno", &["configs", k, "param_count_real"]);
    assert_param_count("fno2d", "airfoil", geo("airfoil"));
    assert_param_count("fno2d", "pipe", geo("pipe"));
    assert_param_count("fno3d", "plasticity", geo("plasticity"));
    // fourier_2d_time.py with its four unused BatchNorm2d (docs/models.md).
    assert_param_count("fno2d", "ns", 926_517);
}
