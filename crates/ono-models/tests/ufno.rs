//! NSL's U-FNO against its fixtures (`fixtures/ufno`: a train-mode pass with BatchNorm batch
//! statistics, the updated running buffers, an eval-mode pass on them), and the presets'
//! parameter counts against NSL's StandardBench scripts' (the embedded U-Nets' unused parts
//! included).

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn ufno_darcy_small() {
    run_case("ufno", "ufno_darcy_small", "ufno");
}

#[test]
fn ufno_darcy_wellcond() {
    run_case("ufno", "ufno_darcy_wellcond", "ufno");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "conv1.weights2");
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "w3.weight");
    perturbed_weight_is_caught(
        "ufno",
        "ufno_darcy_wellcond",
        "u_net2.up1.conv.double_conv.0.weight",
    );
    perturbed_weight_is_caught(
        "ufno",
        "ufno_darcy_wellcond",
        "u_net3.down4.maxpool_conv.1.double_conv.4.bias",
    );
    perturbed_weight_is_caught("ufno", "ufno_darcy_wellcond", "u_net3.outc.conv.weight");
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    for bench in ["darcy", "ns", "airfoil", "pipe", "elasticity", "plasticity"] {
        let count = reference_count("ufno", &["configs", bench, "param_count_real"]);
        assert_param_count("ufno", bench, count);
    }
}
