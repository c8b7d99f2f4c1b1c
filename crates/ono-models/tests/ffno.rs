//! NSL's F-FNO against its fixtures (`fixtures/ffno`), and the presets' parameter counts against
//! NSL's StandardBench scripts'.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn ffno_darcy_small() {
    run_case("ffno", "ffno_darcy_small", "ffno");
}

#[test]
fn ffno_irregular_small() {
    run_case("ffno", "ffno_irregular_small", "ffno");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught(
        "ffno",
        "ffno_darcy_small",
        "spectral_layers.1.fourier_weight.0",
    );
    perturbed_weight_is_caught(
        "ffno",
        "ffno_darcy_small",
        "spectral_layers.2.fourier_weight.1",
    );
    perturbed_weight_is_caught("ffno", "ffno_darcy_small", "preprocess.linear_pre.0.weight");
    perturbed_weight_is_caught("ffno", "ffno_irregular_small", "fftproject_out.weights2");
    perturbed_weight_is_caught(
        "ffno",
        "ffno_irregular_small",
        "spectral_layers.0.fourier_weight.1",
    );
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count("ffno", &["configs", bench, "param_count_real"]);
        assert_param_count("ffno", bench, count);
    }
}
