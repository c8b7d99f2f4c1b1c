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

/// The paper's "regular" layer normalization: post-LayerNorms, no per-head norms
/// (`layer_norm = True`), with Galerkin and Fourier attention.
#[test]
fn post_layer_norm_cases() {
    run_case("galerkin", "gt1d_post_ln_small", "galerkin");
    run_case("galerkin", "ft1d_post_ln_small", "galerkin");
    perturbed_weight_is_caught(
        "galerkin",
        "gt1d_post_ln_small",
        "encoder_layers.1.layer_norm2.weight",
    );
    perturbed_weight_is_caught(
        "galerkin",
        "ft1d_post_ln_small",
        "encoder_layers.0.layer_norm1.bias",
    );
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
fn darcy_presets_have_the_reference_parameter_counts() {
    let count = |k: &str| reference_count("galerkin", &["configs", k, "param_count_real"]);
    assert_param_count("galerkin", "darcy", count("ex2_darcy"));
    // The count does not depend on the grids (the reference's note): 211/61 is ex2 too.
    assert_param_count("galerkin", "darcy_211", count("ex2_darcy"));
    assert_param_count("galerkin", "darcy_inverse", count("ex3_darcy_inv"));
}

/// The presets' interpolation sizes from their grid pairs, as the reference scripts derive them
/// (gnot-galerkin.md A2's table), and ex2_darcy.py's norm_eps rule.
#[test]
fn darcy_presets_have_the_reference_sizes() {
    use ono_models::galerkin::GalerkinConfig;
    use ono_models::ArchConfig;
    let sizes = |name: &str| {
        let cfg = GalerkinConfig::preset(name).unwrap();
        let s = cfg.scaler_sizes().unwrap();
        (s.down, s.up, cfg.norm_eps)
    };
    assert_eq!(
        sizes("darcy"),
        ([[78, 78], [43, 43]], [[77, 77], [141, 141]], 1e-7)
    );
    assert_eq!(
        sizes("darcy_211"),
        ([[113, 113], [61, 61]], [[113, 113], [211, 211]], 1e-5)
    );
    assert_eq!(
        sizes("darcy_inverse"),
        ([[71, 71], [36, 36]], [[36, 36], [36, 36]], 1e-7)
    );
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

#[test]
fn inv2d_small() {
    run_case("galerkin", "inv2d_small", "galerkin");
}

#[test]
fn perturbed_inverse_weights_are_caught() {
    for name in [
        "regressor.fc.weight",
        "regressor.ff.1.0.weight",
        "regressor.out.weight",
        "upscaler.upsample.conv.0.conv.0.weight",
    ] {
        perturbed_weight_is_caught("galerkin", "inv2d_small", name);
    }
}

/// The fine grid (B, n·n, 2) in the fixtures' convention, `pos[i·n + j] = (x_j, y_i)`.
fn meshgrid(b: i64, n: i64, kind: tch::Kind) -> tch::Tensor {
    let t = tch::Tensor::linspace(0.0, 1.0, n, (tch::Kind::Double, tch::Device::Cpu));
    let x = t.view([1, n]).expand([n, n], false);
    let y = t.view([n, 1]).expand([n, n], false);
    tch::Tensor::stack(&[x, y], -1)
        .reshape([1, n * n, 2])
        .expand([b, n * n, 2], false)
        .to_kind(kind)
}

/// Through the model trait the inverse model gets the fine grid's 24×24 points as `pos` and the
/// coarse grid's 7×7 points as the query; its output, in the query's order, is the reference
/// output before the normaliser, to float64 rounding. The sizes derived from
/// `scaler_grids = {fine: 24, coarse: 7, output: coarse}` build the same model as the fixture's
/// explicit ones.
#[test]
fn the_inverse_model_answers_on_the_query() {
    use ono_models::galerkin::{OutputGrid, ScalerGrids};
    use ono_models::ModelInput;
    use tch::Kind;
    let grids = |c: &mut ono_models::galerkin::GalerkinConfig| {
        assert_eq!(c.downscaler_size, Some([[13, 13], [7, 7]]));
        assert_eq!(c.upscaler_size, Some([[7, 7], [7, 7]]));
        c.downscaler_size = None;
        c.upscaler_size = None;
        c.scaler_grids = Some(ScalerGrids {
            fine: 24,
            coarse: 7,
            output: OutputGrid::Coarse,
            scale_factor: true,
        });
    };
    for edit in [None, Some(grids)] {
        let (fx, model) = loaded("inv2d_small", Kind::Double, |c| {
            if let Some(edit) = edit {
                edit(c)
            }
        });
        let t = |k: &str| fx.tensors[k].to_kind(Kind::Double);
        let node = t("input.node");
        let b = node.size()[0];
        let (pos, a) = (meshgrid(b, 24, Kind::Double), node.reshape([b, 24 * 24, 1]));
        let query = t("input.grid").reshape([b, 49, 2]);
        let out = tch::no_grad(|| {
            model.forward(
                &ModelInput::new(&pos, &a)
                    .with_grid(Some(&[24, 24]))
                    .with_query(Some(&query), None),
                false,
            )
        })
        .unwrap();
        assert_eq!(out.size(), [b, 49, 1]);
        let scaled = out.reshape([b, 7, 7, 1]) * (t("input.normalizer_y.std") + 1e-5)
            + t("input.normalizer_y.mean");
        let err = rel(&scaled, &t("output.eval_f64"));
        assert!(err < 1e-9, "{err}");
        // The decoder reads the query's coordinates (here equal to the coarse grid the
        // attention's are interpolated to, so check that they matter).
        let moved = &query * 0.5;
        let other = tch::no_grad(|| {
            model.forward(
                &ModelInput::new(&pos, &a)
                    .with_grid(Some(&[24, 24]))
                    .with_query(Some(&moved), None),
                false,
            )
        })
        .unwrap();
        assert!(rel(&other, &out) > 1e-3);
    }
}

/// The query is required exactly when the output grid is not the input grid, and must hold the
/// output grid's points; everything else is a typed error naming what to pass.
#[test]
fn query_errors() {
    use ono_models::{Error, ModelInput};
    use tch::{Device, Kind, Tensor};
    let opts = (Kind::Float, Device::Cpu);
    let (_, inv) = loaded("inv2d_small", Kind::Float, |_| {});
    let pos = Tensor::rand([2, 24 * 24, 2], opts);
    let fx = Tensor::randn([2, 24 * 24, 1], opts);
    let query = Tensor::rand([2, 49, 2], opts);
    let input = ModelInput::new(&pos, &fx).with_grid(Some(&[24, 24]));
    assert_eq!(
        inv.forward(&input.with_query(Some(&query), None), false)
            .unwrap()
            .size(),
        [2, 49, 1]
    );
    // No query: the message names the output grid and how to pass its points.
    let err = inv.forward(&input, false).unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("[7, 7]") && msg.contains("with_query") && msg.contains("(B, 49, 2)"),
        "{msg}"
    );
    // M is not 7·7, or the coordinates are not 2.
    for bad in [
        Tensor::rand([2, 48, 2], opts),
        Tensor::rand([2, 49, 3], opts),
    ] {
        let err = inv
            .forward(&input.with_query(Some(&bad), None), false)
            .unwrap_err();
        assert!(matches!(err, Error::Shape { .. }), "{err}");
    }
    let nan = query.copy().fill_(f64::NAN);
    let err = inv
        .forward(&input.with_query(Some(&nan), None), false)
        .unwrap_err();
    assert!(matches!(err, Error::NonFinite { .. }), "{err}");
    let mask = Tensor::ones([2, 49], (Kind::Bool, Device::Cpu));
    let err = inv
        .forward(&input.with_query(Some(&query), Some(&mask)), false)
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");

    // The forward model on its own fine grid takes no query.
    let (_, fwd) = loaded("gt2d_small", Kind::Float, |_| {});
    let pos = Tensor::rand([2, 29 * 29, 2], opts);
    let fx = Tensor::randn([2, 29 * 29, 1], opts);
    let q = Tensor::rand([2, 29 * 29, 2], opts);
    let err = fwd
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_grid(Some(&[29, 29]))
                .with_query(Some(&q), None),
            false,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
    // On another input grid its 29×29 output points are the query.
    let (pos, fx) = (pos.narrow(1, 0, 28 * 28), fx.narrow(1, 0, 28 * 28));
    let out = fwd
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_grid(Some(&[28, 28]))
                .with_query(Some(&q), None),
            false,
        )
        .unwrap();
    assert_eq!(out.size(), [2, 29 * 29, 1]);
    // The 1-D model takes no query at all.
    let (_, one) = loaded("gt1d_small", Kind::Float, |_| {});
    let pos = Tensor::rand([2, 64, 1], opts);
    let fx = Tensor::randn([2, 64, 1], opts);
    let err = one
        .forward(
            &ModelInput::new(&pos, &fx).with_query(Some(&pos), None),
            false,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Unsupported { .. }), "{err}");
}

/// With `scaler_grids` the input must be the declared fine grid.
#[test]
fn scaler_grids_fix_the_input_grid() {
    use ono_models::galerkin::{OutputGrid, ScalerGrids};
    use ono_models::{Error, ModelInput};
    use tch::{Device, Kind, Tensor};
    let (_, model) = loaded("inv2d_small", Kind::Float, |c| {
        c.downscaler_size = None;
        c.upscaler_size = None;
        c.scaler_grids = Some(ScalerGrids {
            fine: 24,
            coarse: 7,
            output: OutputGrid::Coarse,
            scale_factor: true,
        });
    });
    let opts = (Kind::Float, Device::Cpu);
    let pos = Tensor::rand([1, 25 * 25, 2], opts);
    let fx = Tensor::randn([1, 25 * 25, 1], opts);
    let query = Tensor::rand([1, 49, 2], opts);
    let err = model
        .forward(
            &ModelInput::new(&pos, &fx)
                .with_grid(Some(&[25, 25]))
                .with_query(Some(&query), None),
            false,
        )
        .unwrap_err();
    assert!(matches!(err, Error::Shape { .. }), "{err}");
    assert!(err.to_string().contains("scaler_grids"), "{err}");
}

/// Configurations the sizes cannot come from are errors naming the fix: 29/8 on the scale-factor
/// path (29 → 15 → 7), grids and explicit sizes at once. 29/8 without the scale factor is
/// `gt2d_small`'s explicit sizes.
#[test]
fn scaler_grid_configurations() {
    use ono_models::galerkin::{GalerkinConfig, OutputGrid, ScalerGrids};
    use ono_models::{ArchConfig, Error};
    let gt2d = match common::fixture("galerkin", "gt2d_small").config {
        ono_models::ModelConfig::Galerkin(c) => c,
        other => panic!("gt2d_small is {}", other.arch()),
    };
    let pair = ScalerGrids {
        fine: 29,
        coarse: 8,
        output: OutputGrid::Fine,
        scale_factor: true,
    };
    let with = |grids: ScalerGrids| GalerkinConfig {
        scaler_grids: Some(grids),
        downscaler_size: None,
        upscaler_size: None,
        ..gt2d.clone()
    };
    let err = with(pair).validate().unwrap_err();
    assert!(matches!(err, Error::Config(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("29 → 15 → 7") && msg.contains("explicit downscaler_size"),
        "{msg}"
    );
    let sizes = with(ScalerGrids {
        scale_factor: false,
        ..pair
    })
    .scaler_sizes()
    .unwrap();
    assert_eq!(Some(sizes.down), gt2d.downscaler_size);
    assert_eq!(Some(sizes.up), gt2d.upscaler_size);
    let both = GalerkinConfig {
        scaler_grids: Some(ScalerGrids {
            scale_factor: false,
            ..pair
        }),
        ..gt2d.clone()
    };
    assert!(matches!(both.validate(), Err(Error::Config(_))));
    // The 1-D model's pointwise decoder has the reference's two hidden layers, whatever
    // num_regressor_layers says (SimpleTransformer does not pass it on): another value is
    // refused by name.
    let one_d = GalerkinConfig {
        decoder: ono_models::galerkin::GalerkinDecoder::Pointwise,
        ..GalerkinConfig::preset("burgers").unwrap()
    };
    one_d.validate().unwrap();
    let three = GalerkinConfig {
        num_regressor_layers: 3,
        ..one_d
    };
    match three.validate() {
        Err(Error::Config(m)) => assert!(m.contains("num_regressor_layers 3"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// `get_scaler_sizes` against the reference function itself on the 5,139 pairs of
/// `fixtures/galerkin/scaler_sizes.csv` (`make_scaler_sizes.py`): the factor bit for bit, n_m, and
/// the scale-factor path's ⌊n_f f⌋, ⌊⌊n_f f⌋ f⌋ against the sizes PyTorch's interpolation
/// produced (0 where PyTorch refused an empty output).
#[test]
fn scaler_sizes_match_the_reference_function() {
    use ono_models::galerkin::get_scaler_sizes;
    let path = ono_testing::fixtures_dir().join("galerkin/scaler_sizes.csv");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("n_f,n_c,factor,n_m,down1,down2"));
    let mut rows = 0;
    let mut missed = 0;
    for line in lines {
        let cells: Vec<&str> = line.split(',').collect();
        let int = |i: usize| cells[i].parse::<i64>().ok();
        let (n_f, n_c) = (int(0).unwrap(), int(1).unwrap());
        let factor: f64 = cells[2].parse().unwrap();
        let s = get_scaler_sizes(n_f, n_c, true).unwrap();
        assert_eq!(s.factor, Some(factor), "{line}");
        assert_eq!(s.up, [[int(3).unwrap(); 2], [n_f; 2]], "{line}");
        assert_eq!(s.down[0][0], int(4).unwrap_or(0), "{line}");
        assert_eq!(s.down[1][0], int(5).unwrap_or(0), "{line}");
        let explicit = get_scaler_sizes(n_f, n_c, false).unwrap();
        assert_eq!(explicit.down, [[int(3).unwrap(); 2], [n_c; 2]], "{line}");
        missed += usize::from(s.down[1][0] != n_c);
        rows += 1;
    }
    assert_eq!(rows, 5139);
    // The pitfall is common: most pairs miss their coarse grid on the scale-factor path.
    assert!(missed > rows / 2, "{missed} of {rows}");
}
