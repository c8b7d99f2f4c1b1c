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

/// A model built from a case's configuration (with `edit` applied) and loaded with its weights.
fn loaded(
    case: &str,
    kind: tch::Kind,
    edit: impl FnOnce(&mut ono_models::galerkin::GalerkinConfig),
) -> (ono_models::fixture::Fixture, ono_models::Model) {
    ono_testing::init();
    let fx = common::fixture("galerkin", case);
    let mut cfg = fx.config.clone();
    match &mut cfg {
        ono_models::ModelConfig::Galerkin(c) => edit(c),
        other => panic!("{case} is {}", other.arch()),
    }
    let model = ono_models::Model::new(&cfg, tch::Device::Cpu, kind).unwrap();
    model
        .import_reference(&fx.tensors, "param.", &fx.path)
        .unwrap();
    (fx, model)
}

fn rel(a: &tch::Tensor, b: &tch::Tensor) -> f64 {
    (a - b).abs().max().double_value(&[]) / b.abs().max().double_value(&[])
}

/// Through the model trait the 2-D model takes the fine grid as `pos` and interpolates it to
/// the coarse grid the attention reads; without the data's normaliser (the trainer's), its
/// interior is the reference output before x·(std + 1e-5) + mean, and its ring is zero.
#[test]
fn the_trait_forward_is_the_2d_reference_without_the_normaliser() {
    use ono_models::ModelInput;
    use tch::Kind;
    let (fx, model) = loaded("gt2d_small", Kind::Double, |_| {});
    let t = |k: &str| fx.tensors[k].to_kind(Kind::Double);
    let (grid, node) = (t("input.grid"), t("input.node"));
    let (b, n) = (grid.size()[0], grid.size()[1]);
    let pos = grid.reshape([b, n * n, 2]);
    let a = node.reshape([b, n * n, 1]);
    let shape = [n, n];
    let out =
        tch::no_grad(|| model.forward(&ModelInput::new(&pos, &a).with_grid(Some(&shape)), false))
            .unwrap()
            .reshape([b, n, n, 1]);
    let interior = |x: &tch::Tensor| x.narrow(1, 1, n - 2).narrow(2, 1, n - 2);
    let scaled = out * (t("input.normalizer_y.std") + 1e-5) + t("input.normalizer_y.mean");
    let err = rel(&interior(&scaled), &interior(&t("output.eval_f64")));
    assert!(err < 1e-9, "{err}");
    let ring = out_ring_max(&model, &pos, &a, &shape);
    assert_eq!(ring, 0.0);
}

fn out_ring_max(
    model: &ono_models::Model,
    pos: &tch::Tensor,
    a: &tch::Tensor,
    shape: &[i64; 2],
) -> f64 {
    let out = tch::no_grad(|| {
        model.forward(
            &ono_models::ModelInput::new(pos, a).with_grid(Some(shape)),
            false,
        )
    })
    .unwrap()
    .reshape([-1, shape[0], shape[1]]);
    let edges = [
        out.select(1, 0),
        out.select(1, shape[0] - 1),
        out.select(2, 0),
        out.select(2, shape[1] - 1),
    ];
    edges
        .iter()
        .map(|e| e.abs().max().double_value(&[]))
        .fold(0.0, f64::max)
}

/// The attention-dropout choice. By default (`training`) evaluation is deterministic and equals
/// the fixture; `reference` reproduces the reference's defect, a Bernoulli(½) mask ×2 on every
/// head's context matrix in evaluation too, which moves the output by a large fraction.
#[test]
fn the_reference_dropout_defect_is_a_switch() {
    use ono_models::galerkin::AttentionDropout;
    use ono_models::ModelInput;
    use tch::Kind;
    let eval = |model: &ono_models::Model, fx: &ono_models::fixture::Fixture| {
        let (node, pos) = (&fx.tensors["input.node"], &fx.tensors["input.pos"]);
        tch::no_grad(|| model.forward(&ModelInput::new(pos, node), false)).unwrap()
    };
    let (fx, ours) = loaded("gt1d_small", Kind::Float, |c| {
        c.encoder_dropout = 0.1;
    });
    let want = &fx.tensors["output.eval"];
    let (a, b) = (eval(&ours, &fx), eval(&ours, &fx));
    assert!(a.equal(&b));
    assert!(rel(&a.reshape(want.size()), want) < 1e-5);
    let (fx, defect) = loaded("gt1d_small", Kind::Float, |c| {
        c.attention_dropout = AttentionDropout::Reference;
    });
    tch::manual_seed(0);
    let (a, b) = (eval(&defect, &fx), eval(&defect, &fx));
    let spread = rel(&a, &b);
    assert!(spread > 1e-2, "two evaluations differ by {spread}");
    assert!(rel(&a.reshape(want.size()), want) > 1e-2);
}

/// Inputs the models cannot take are errors naming the problem, not panics.
#[test]
fn bad_inputs_are_errors() {
    use ono_models::{Error, ModelInput};
    use tch::{Device, Kind, Tensor};
    let opts = (Kind::Float, Device::Cpu);
    let (_, one) = loaded("gt1d_small", Kind::Float, |_| {});
    let pos = Tensor::rand([2, 64, 1], opts);
    let fx = Tensor::randn([2, 64, 1], opts);
    assert!(one.forward(&ModelInput::new(&pos, &fx), false).is_ok());
    // 8 modes need at least 14 points on the rFFT's axis.
    let short = |t: &Tensor| t.narrow(1, 0, 12);
    let err = one
        .forward(&ModelInput::new(&short(&pos), &short(&fx)), false)
        .unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let nan = fx.copy().fill_(f64::NAN);
    let err = one
        .forward(&ModelInput::new(&pos, &nan), false)
        .unwrap_err();
    assert!(matches!(err, Error::NonFinite { .. }), "{err}");
    let time = Tensor::zeros([2, 1], opts);
    assert!(one
        .forward(&ModelInput::new(&pos, &fx).with_time(Some(&time)), false)
        .is_err());
    let wide = Tensor::randn([2, 64, 2], opts);
    assert!(one.forward(&ModelInput::new(&pos, &wide), false).is_err());

    let (_, two) = loaded("gt2d_small", Kind::Float, |_| {});
    let pos = Tensor::rand([2, 29 * 29, 2], opts);
    let fx = Tensor::randn([2, 29 * 29, 1], opts);
    assert!(two
        .forward(
            &ModelInput::new(&pos, &fx).with_grid(Some(&[29, 29])),
            false
        )
        .is_ok());
    // The fine grid is the upscaler's; a grid is required.
    assert!(two.forward(&ModelInput::new(&pos, &fx), false).is_err());
    let (pos, fx) = (pos.narrow(1, 0, 28 * 28), fx.narrow(1, 0, 28 * 28));
    let err = two
        .forward(
            &ModelInput::new(&pos, &fx).with_grid(Some(&[28, 28])),
            false,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
}
