//! Cao's Galerkin / Fourier Transformer against the reference's fixtures (`fixtures/galerkin`), and
//! the presets' parameter counts against the reference's.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};

#[test]
fn gt1d_small() {
    run_case("galerkin", "gt1d_small", "galerkin");
}

#[test]
fn ft1d_small() {
    run_case("galerkin", "ft1d_small", "galerkin");
}

#[test]
fn perturbed_weights_are_caught() {
    perturbed_weight_is_caught(
        "galerkin",
        "gt1d_small",
        "encoder_layers.1.attn.norm_V.1.weight",
    );
    perturbed_weight_is_caught(
        "galerkin",
        "ft1d_small",
        "encoder_layers.0.attn.norm_Q.0.weight",
    );
    perturbed_weight_is_caught(
        "galerkin",
        "gt1d_small",
        "regressor.spectral_conv.1.fourier_weight",
    );
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    let count = |k: &str| reference_count("galerkin", &["configs", k, "param_count_real"]);
    assert_param_count("galerkin", "burgers", count("ex1_burgers_galerkin"));
    assert_param_count("galerkin", "burgers_fourier", count("ex1_burgers_fourier"));
}

#[test]
fn gt2d_small() {
    run_case("galerkin", "gt2d_small", "galerkin");
}

#[test]
fn perturbed_2d_weights_are_caught() {
    perturbed_weight_is_caught(
        "galerkin",
        "gt2d_small",
        "downscaler.downsample.conv2.conv.0.weight",
    );
    perturbed_weight_is_caught(
        "galerkin",
        "gt2d_small",
        "upscaler.upsample.conv.0.conv.0.weight",
    );
    perturbed_weight_is_caught(
        "galerkin",
        "gt2d_small",
        "regressor.spectral_conv.0.fourier_weight.1",
    );
}

#[test]
fn darcy_preset_has_the_reference_parameter_count() {
    let count = reference_count("galerkin", &["configs", "ex2_darcy", "param_count_real"]);
    assert_param_count("galerkin", "darcy", count);
}
