//! GNOT and CGPT against the reference's fixtures (`fixtures/gnot`), the presets' parameter counts
//! against the reference's, the `mask_padding` deviation against per-sample runs, and the inputs
//! the model refuses.

mod common;

use common::{assert_param_count, perturbed_weight_is_caught, reference_count, run_case};
use ono_models::gnot::{BlockOrder, GnotConfig, GnotModel};
use ono_models::{Error, InputFunction, Model, ModelConfig, ModelInput};
use tch::{Device, Kind, Tensor};

#[test]
fn gnot_small() {
    run_case("gnot", "gnot_small", "gnot");
}

/// Samples of different sizes, zero-padded and not masked: the padded rows enter every
/// attention's keys, values and normaliser as in the reference.
#[test]
fn gnot_ragged_small() {
    run_case("gnot", "gnot_ragged_small", "gnot");
}

#[test]
fn cgpt_small() {
    run_case("gnot", "cgpt_small", "gnot");
}

#[test]
fn cgpt_noinput_small() {
    run_case("gnot", "cgpt_noinput_small", "gnot");
}

#[test]
fn perturbed_weights_are_caught() {
    for name in [
        "trunk_mlp.linears.2.weight",
        "branch_mlps.1.linear_pre.weight",
        "blocks.0.crossattn.keys.1.weight",
        "blocks.1.crossattn.values.0.bias",
        "blocks.0.selfattn.query.weight",
        "blocks.1.moe_mlp1.1.0.weight",
        "blocks.0.moe_mlp2.0.2.weight",
        "blocks.0.gatenet.4.weight",
        "blocks.1.ln2_branch.0.weight",
        "blocks.0.ln3.weight",
        "out_mlp.linear_post.bias",
    ] {
        perturbed_weight_is_caught("gnot", "gnot_small", name);
    }
    perturbed_weight_is_caught(
        "gnot",
        "gnot_ragged_small",
        "blocks.1.selfattn.value.weight",
    );
    for name in [
        "blocks.0.mlp1.0.weight",
        "blocks.1.mlp2.2.weight",
        "blocks.1.crossattn.keys.0.weight",
    ] {
        perturbed_weight_is_caught("gnot", "cgpt_small", name);
    }
    perturbed_weight_is_caught(
        "gnot",
        "cgpt_noinput_small",
        "blocks.0.crossattn.query.weight",
    );
}

#[test]
fn presets_have_the_reference_parameter_counts() {
    let count = |k: &str| reference_count("gnot", &["configs", k, "param_count_real"]);
    assert_param_count("gnot", "gnot", count("GNOT_d128_E1"));
    assert_param_count("gnot", "gnot_e3", count("GNOT_d128_E3"));
    assert_param_count("gnot", "gnot_d256_e3", count("GNOT_d256_E3"));
    assert_param_count("gnot", "cgpt", count("CGPTNO_readme_no_inputs"));
}

/// A random f64 model of the small fixtures' shape (2 layers, d 32, 2 heads, two input functions
/// of 3 and 2 channels, θ ∈ ℝ³).
fn small_model(model: GnotModel, mask_padding: bool) -> Model {
    tch::manual_seed(11);
    let cfg = GnotConfig {
        model,
        space_dim: 2,
        fun_dim: 3,
        out_dim: 3,
        function_dims: vec![3, 2],
        n_hidden: 32,
        n_layers: 2,
        n_head: 2,
        n_experts: if model == GnotModel::Gnot { 2 } else { 1 },
        mask_padding,
        ..GnotConfig::default()
    };
    Model::new(&ModelConfig::from(cfg), Device::Cpu, Kind::Double).unwrap()
}

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

/// One sample: T query points with θ, and two input functions of its own lengths.
struct Sample {
    pos: Tensor,
    fx: Tensor,
    f: [Tensor; 2],
}

fn sample(t: i64, n0: i64, n1: i64) -> Sample {
    let theta = Tensor::randn([1, 1, 3], F64);
    Sample {
        pos: Tensor::randn([1, t, 2], F64),
        fx: theta.expand([1, t, 3], false),
        f: [
            Tensor::randn([1, n0, 3], F64),
            Tensor::randn([1, n1, 2], F64),
        ],
    }
}

/// Pads dim 1 to `n` with ones (not zeros, so that a padded row is never mistaken for nothing).
fn pad(t: &Tensor, n: i64) -> Tensor {
    let s = t.size();
    Tensor::cat(&[t, &Tensor::ones([1, n - s[1], s[2]], F64)], 1)
}

fn mask(real: i64, n: i64) -> Tensor {
    Tensor::arange(n, (Kind::Int64, Device::Cpu))
        .lt(real)
        .unsqueeze(0)
}

fn alone(model: &Model, s: &Sample) -> Tensor {
    let f = [
        InputFunction {
            values: &s.f[0],
            mask: None,
        },
        InputFunction {
            values: &s.f[1],
            mask: None,
        },
    ];
    tch::no_grad(|| model.forward(&ModelInput::new(&s.pos, &s.fx).with_functions(&f), false))
        .unwrap()
}

/// The two samples padded into one batch with their masks; the output rows of each.
fn batched(model: &Model, a: &Sample, b: &Sample) -> (Tensor, Tensor) {
    let len = |s: &Sample| [s.pos.size()[1], s.f[0].size()[1], s.f[1].size()[1]];
    let (la, lb) = (len(a), len(b));
    let n: Vec<i64> = (0..3).map(|i| la[i].max(lb[i])).collect();
    let cat = |x: &Tensor, y: &Tensor, n: i64| Tensor::cat(&[pad(x, n), pad(y, n)], 0);
    let masks = |i: usize| Tensor::cat(&[mask(la[i], n[i]), mask(lb[i], n[i])], 0);
    let pos = cat(&a.pos, &b.pos, n[0]);
    let fx = cat(&a.fx, &b.fx, n[0]);
    let (v0, v1) = (cat(&a.f[0], &b.f[0], n[1]), cat(&a.f[1], &b.f[1], n[2]));
    let (m, m0, m1) = (masks(0), masks(1), masks(2));
    let f = [
        InputFunction {
            values: &v0,
            mask: Some(&m0),
        },
        InputFunction {
            values: &v1,
            mask: Some(&m1),
        },
    ];
    let out = tch::no_grad(|| {
        model.forward(
            &ModelInput::new(&pos, &fx)
                .with_mask(Some(&m))
                .with_functions(&f),
            false,
        )
    })
    .unwrap();
    (
        out.narrow(0, 0, 1).narrow(1, 0, la[0]),
        out.narrow(0, 1, 1).narrow(1, 0, lb[0]),
    )
}

fn max_diff(a: &Tensor, b: &Tensor) -> f64 {
    (a - b).abs().max().double_value(&[])
}

/// With `mask_padding`, a ragged batch gives each sample the output it gets alone: padded query
/// rows and padded rows of both input functions (of different lengths, each padded in a different
/// sample) leave every attention. Without it, the reference's unmasked padding changes them.
#[test]
fn mask_padding_makes_each_sample_its_own() {
    for model in [GnotModel::Gnot, GnotModel::Cgpt] {
        tch::manual_seed(5);
        // Sample a has the most queries and f0 rows, sample b the most f1 rows.
        let (a, b) = (sample(40, 24, 9), sample(29, 17, 12));
        let masked = small_model(model, true);
        let (ga, gb) = batched(&masked, &a, &b);
        let (wa, wb) = (alone(&masked, &a), alone(&masked, &b));
        for (got, want) in [(&ga, &wa), (&gb, &wb)] {
            let err = max_diff(got, want);
            assert!(err < 1e-10, "{model:?}: {err}");
        }
        let reference = small_model(model, false);
        let (ra, rb) = batched(&reference, &a, &b);
        let (wa, wb) = (alone(&reference, &a), alone(&reference, &b));
        assert!(max_diff(&ra, &wa) > 1e-6, "{model:?}: sample a unchanged");
        assert!(max_diff(&rb, &wb) > 1e-6, "{model:?}: sample b unchanged");
    }
}

/// With `mask_padding`, a sample whose input function is empty (all rows padded) gets no
/// contribution from it, and the output stays finite.
#[test]
fn an_empty_input_function_is_no_input() {
    tch::manual_seed(6);
    let model = small_model(GnotModel::Gnot, true);
    let s = sample(7, 5, 4);
    let m0 = Tensor::ones([1, 5], (Kind::Bool, Device::Cpu));
    let none = Tensor::zeros([1, 4], (Kind::Bool, Device::Cpu));
    let f = [
        InputFunction {
            values: &s.f[0],
            mask: Some(&m0),
        },
        InputFunction {
            values: &s.f[1],
            mask: Some(&none),
        },
    ];
    let out =
        tch::no_grad(|| model.forward(&ModelInput::new(&s.pos, &s.fx).with_functions(&f), false))
            .unwrap();
    assert!(bool::try_from(out.isfinite().all()).unwrap());
    // The same with other values in the empty function.
    let other = Tensor::randn([1, 4, 2], F64);
    let f2 = [
        f[0],
        InputFunction {
            values: &other,
            mask: Some(&none),
        },
    ];
    let out2 =
        tch::no_grad(|| model.forward(&ModelInput::new(&s.pos, &s.fx).with_functions(&f2), false))
            .unwrap();
    assert!(max_diff(&out, &out2) < 1e-12);
}

/// Inputs the model cannot take are errors naming the problem, not panics.
#[test]
fn bad_inputs_are_errors() {
    tch::manual_seed(7);
    let model = small_model(GnotModel::Gnot, true);
    let s = sample(6, 4, 3);
    let run = |pos: &Tensor, fx: Option<&Tensor>, f: &[InputFunction<'_>], m: Option<&Tensor>| {
        let input = ModelInput {
            fx,
            ..ModelInput::positions(pos)
        }
        .with_functions(f)
        .with_mask(m);
        model.forward(&input, false)
    };
    let unmasked = |values| InputFunction { values, mask: None };
    let good = [unmasked(&s.f[0]), unmasked(&s.f[1])];
    assert!(run(&s.pos, Some(&s.fx), &good, None).is_ok());
    let shape = |r: ono_models::Result<Tensor>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Shape { .. }), "{e}");
    };
    // Wrong widths: coordinates, θ, an input function's channels.
    shape(run(&s.pos.narrow(2, 0, 1), Some(&s.fx), &good, None));
    shape(run(&s.pos, Some(&s.fx.narrow(2, 0, 2)), &good, None));
    shape(run(&s.pos, None, &good, None));
    let wide = Tensor::randn([1, 3, 3], F64);
    shape(run(&s.pos, Some(&s.fx), &[good[0], unmasked(&wide)], None));
    // A function count other than the configuration's.
    shape(run(&s.pos, Some(&s.fx), &good[..1], None));
    shape(run(&s.pos, Some(&s.fx), &[], None));
    // Masks of the wrong shape.
    let m = Tensor::ones([1, 5], (Kind::Bool, Device::Cpu));
    shape(run(&s.pos, Some(&s.fx), &good, Some(&m)));
    let bad_f = [
        good[0],
        InputFunction {
            values: &s.f[1],
            mask: Some(&m),
        },
    ];
    shape(run(&s.pos, Some(&s.fx), &bad_f, None));
    // NaN in the coordinates, θ or an input function.
    let nan = |t: &Tensor| t.copy().fill_(f64::NAN);
    let non_finite = |r: ono_models::Result<Tensor>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::NonFinite { .. }), "{e}");
    };
    non_finite(run(&nan(&s.pos), Some(&s.fx), &good, None));
    non_finite(run(&s.pos, Some(&nan(&s.fx)), &good, None));
    let nan_f = nan(&s.f[1]);
    non_finite(run(&s.pos, Some(&s.fx), &[good[0], unmasked(&nan_f)], None));
    // A time value and separate query points are refused; a grid shape is accepted and ignored.
    let time = Tensor::zeros([1, 1], F64);
    let input = ModelInput::new(&s.pos, &s.fx).with_functions(&good);
    let e = model
        .forward(&input.with_time(Some(&time)), false)
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let e = model
        .forward(&input.with_query(Some(&s.pos), None), false)
        .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let plain = model.forward(&input, false).unwrap();
    let gridded = model
        .forward(&input.with_grid(Some(&[2, 3])), false)
        .unwrap();
    assert!(plain.equal(&gridded));
}

/// Configurations the reference cannot build, or that this port does not take, are refused.
#[test]
fn bad_configurations_are_errors() {
    use ono_models::ArchConfig;
    let base = GnotConfig::preset("gnot").unwrap();
    for bad in [
        GnotConfig {
            n_head: 3,
            ..base.clone()
        },
        GnotConfig {
            function_dims: vec![2, 0],
            ..base.clone()
        },
        GnotConfig {
            model: GnotModel::Cgpt,
            n_experts: 3,
            ..base.clone()
        },
        GnotConfig {
            ffn_dropout: 1.5,
            ..base.clone()
        },
    ] {
        assert!(matches!(bad.validate(), Err(Error::Config(_))), "{bad:?}");
    }
    // Unknown fields are refused by name; `model` and `mask_padding` are read.
    let err =
        serde_json::from_str::<ModelConfig>(r#"{"arch": "gnot", "n_expert": 3}"#).unwrap_err();
    assert!(err.to_string().contains("n_expert"), "{err}");
    let cfg: ModelConfig =
        serde_json::from_str(r#"{"arch": "gnot", "model": "cgpt", "mask_padding": true}"#).unwrap();
    match cfg {
        ModelConfig::Gnot(c) => assert!(c.model == GnotModel::Cgpt && c.mask_padding),
        other => panic!("{}", other.arch()),
    }
}

/// The fixture forward through the model trait: the padded queries as `pos`, θ broadcast as
/// `fx`, the padded functions unmasked; the real rows are the reference output in float64.
#[test]
fn the_trait_forward_is_the_reference_on_the_real_rows() {
    ono_testing::init();
    let fx = common::fixture("gnot", "gnot_ragged_small");
    let model = Model::new(&fx.config, Device::Cpu, Kind::Double).unwrap();
    model
        .import_reference(&fx.tensors, "param.", &fx.path)
        .unwrap();
    let t = |k: &str| fx.tensors[k].to_kind(Kind::Double);
    let (x, theta) = (t("input.x"), t("input.theta"));
    let (b, n) = (x.size()[0], x.size()[1]);
    let feats = theta.unsqueeze(1).expand([b, n, 3], false);
    let (f0, f1) = (t("input.f0"), t("input.f1"));
    let f = [
        InputFunction {
            values: &f0,
            mask: None,
        },
        InputFunction {
            values: &f1,
            mask: None,
        },
    ];
    // The query mask does not change anything without mask_padding.
    let m = Tensor::cat(&[mask(40, n), mask(29, n)], 0);
    let out = tch::no_grad(|| {
        model.forward(
            &ModelInput::new(&x, &feats)
                .with_functions(&f)
                .with_mask(Some(&m)),
            false,
        )
    })
    .unwrap();
    let rows = Tensor::cat(
        &[out.get(0).narrow(0, 0, 40), out.get(1).narrow(0, 0, 29)],
        0,
    );
    let want = t("output.eval_f64");
    let err = max_diff(&rows, &want) / want.abs().max().double_value(&[]);
    assert!(err < 1e-12, "{err}");
}

/// A whole-model file keeps the configuration (input-function widths, model, mask option) and
/// the weights.
#[test]
fn model_files_round_trip() {
    let dir = std::env::temp_dir().join(format!("ono-gnot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    tch::manual_seed(8);
    let model = small_model(GnotModel::Cgpt, true);
    let path = dir.join("cgpt.safetensors");
    model.save(&path).unwrap();
    let back = ono_models::io::load(&path, Device::Cpu).unwrap();
    assert_eq!(back.config(), model.config());
    let s = sample(5, 3, 2);
    let (a, b) = (alone(&model, &s), alone(&back, &s));
    assert_eq!(back.kind(), Kind::Double);
    // Not bit for bit: libtorch's CPU reductions may split differently between runs when tests
    // share the machine.
    assert!(max_diff(&a, &b) < 1e-13, "{}", max_diff(&a, &b));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A random f64 GNOT of `n_layers` blocks in `order` (d 16, 2 heads, 2 experts, two input
/// functions), every LayerNorm's weight and bias perturbed so that a norm copied to the wrong
/// place shows.
fn ordered_model(n_layers: usize, order: BlockOrder, seed: i64) -> Model {
    tch::manual_seed(seed);
    let cfg = GnotConfig {
        space_dim: 2,
        fun_dim: 3,
        out_dim: 2,
        function_dims: vec![3, 2],
        n_hidden: 16,
        n_layers,
        n_head: 2,
        n_experts: 2,
        block_order: order,
        ..GnotConfig::default()
    };
    let model = Model::new(&ModelConfig::from(cfg), Device::Cpu, Kind::Double).unwrap();
    tch::no_grad(|| {
        for (name, mut v) in model.var_store().variables() {
            if name.contains(".ln") {
                let _ = v.g_add_(&(Tensor::randn_like(&v) * 0.3));
            }
        }
    });
    model
}

/// Sets the variables under each prefix to zero.
fn zero(model: &Model, prefixes: &[&str]) {
    let vars = model.var_store().variables();
    tch::no_grad(|| {
        for (name, mut v) in vars {
            if prefixes.iter().any(|p| name.starts_with(p)) {
                let _ = v.zero_();
            }
        }
    });
}

/// Copies every variable of `src` under `from` into `dst` under `to` (the rest of the name the
/// same), and every variable outside the blocks by name. Each of `dst`'s block variables must be
/// written by exactly one pair, so that nothing is left at its random init.
fn copy_blocks(dst: &Model, src: &Model, pairs: &[(&str, &str)]) {
    let from = src.var_store().variables();
    let mut to = dst.var_store().variables();
    let mut written = 0;
    tch::no_grad(|| {
        for (name, v) in to.iter_mut() {
            let source = if name.starts_with("blocks.") {
                pairs
                    .iter()
                    .find(|(t, _)| name.starts_with(t))
                    .map(|(t, f)| format!("{f}{}", &name[t.len()..]))
            } else {
                Some(name.clone())
            };
            if let Some(source) = source {
                v.copy_(&from[&source]);
                written += 1;
            }
        }
    });
    assert_eq!(written, to.len(), "every variable of the copy is written");
}

/// One sample of 7 query points and input functions of 5 and 4 rows, drawn once per test and
/// given to every model it compares: drawn again for each, another test's draw on torch's one
/// generator in between would make the samples differ.
fn ordered_sample() -> Sample {
    sample(7, 5, 4)
}

/// `self_cross` is the self-attention, then the cross-attention: a one-block model equals a
/// two-block `cross_self` model whose first cross-attention and second self-attention are
/// switched off (their output projections zero) and whose feed-forward halves add nothing (ln3,
/// ln5 zero), with the first block's self-attention and the second's cross-attention in its
/// places. The reference order does not equal it: a control that the comparison can fail.
#[test]
fn self_cross_attends_over_the_points_first() {
    let two = ordered_model(2, BlockOrder::CrossSelf, 21);
    let ff = [
        "blocks.0.ln3",
        "blocks.0.ln5",
        "blocks.1.ln3",
        "blocks.1.ln5",
    ];
    zero(&two, &ff);
    zero(&two, &["blocks.0.crossattn.proj", "blocks.1.selfattn.proj"]);
    let pairs = [
        ("blocks.0.ln1.", "blocks.0.ln4."),
        ("blocks.0.selfattn.", "blocks.0.selfattn."),
        ("blocks.0.ln4.", "blocks.1.ln1."),
        ("blocks.0.crossattn.", "blocks.1.crossattn."),
        ("blocks.0.ln2_branch.", "blocks.1.ln2_branch."),
        ("blocks.0.ln3.", "blocks.0.ln3."),
        ("blocks.0.ln5.", "blocks.0.ln5."),
        ("blocks.0.moe_mlp", "blocks.0.moe_mlp"),
        ("blocks.0.gatenet.", "blocks.0.gatenet."),
    ];
    let input = ordered_sample();
    let expected = alone(&two, &input);
    let one = ordered_model(1, BlockOrder::SelfCross, 22);
    copy_blocks(&one, &two, &pairs);
    let d = max_diff(&alone(&one, &input), &expected);
    assert!(d < 1e-12, "self + cross differs by {d}");
    let reference = ordered_model(1, BlockOrder::CrossSelf, 22);
    copy_blocks(&reference, &two, &pairs);
    let d = max_diff(&alone(&reference, &input), &expected);
    assert!(d > 1e-3, "cross + self must differ from self + cross: {d}");
}

/// `cross_cross` is two cross-attentions, the second with its own parts (`crossattn2`,
/// `ln2_branch2`) and no self-attention: a one-block model equals a two-block `cross_self` model
/// with both self-attentions switched off and no feed-forward contributions.
#[test]
fn cross_cross_attends_to_the_functions_twice() {
    let two = ordered_model(2, BlockOrder::CrossSelf, 31);
    zero(
        &two,
        &[
            "blocks.0.ln3",
            "blocks.0.ln5",
            "blocks.1.ln3",
            "blocks.1.ln5",
            "blocks.0.selfattn.proj",
            "blocks.1.selfattn.proj",
        ],
    );
    let input = ordered_sample();
    let expected = alone(&two, &input);
    let one = ordered_model(1, BlockOrder::CrossCross, 32);
    let names: Vec<String> = one.var_store().variables().into_keys().collect();
    assert!(!names.iter().any(|n| n.contains("selfattn")), "{names:?}");
    copy_blocks(
        &one,
        &two,
        &[
            ("blocks.0.ln1.", "blocks.0.ln1."),
            ("blocks.0.crossattn.", "blocks.0.crossattn."),
            ("blocks.0.ln2_branch.", "blocks.0.ln2_branch."),
            ("blocks.0.ln4.", "blocks.1.ln1."),
            ("blocks.0.crossattn2.", "blocks.1.crossattn."),
            ("blocks.0.ln2_branch2.", "blocks.1.ln2_branch."),
            ("blocks.0.ln3.", "blocks.0.ln3."),
            ("blocks.0.ln5.", "blocks.0.ln5."),
            ("blocks.0.moe_mlp", "blocks.0.moe_mlp"),
            ("blocks.0.gatenet.", "blocks.0.gatenet."),
        ],
    );
    let d = max_diff(&alone(&one, &input), &expected);
    assert!(d < 1e-12, "cross + cross differs by {d}");
    // Without its second cross-attention's own norms it is another model.
    zero(&one, &["blocks.0.ln2_branch2"]);
    let d = max_diff(&alone(&one, &input), &expected);
    assert!(d > 1e-3, "ln2_branch2 must matter: {d}");
}

/// The block order is a serde key with the reference's as default, so older files and
/// checkpoints keep their meaning.
#[test]
fn the_block_order_defaults_to_the_reference() {
    let cfg: GnotConfig = serde_json::from_str("{}").unwrap();
    assert_eq!(cfg.block_order, BlockOrder::CrossSelf);
    let cfg: GnotConfig = serde_json::from_str(r#"{"block_order": "self_cross"}"#).unwrap();
    assert_eq!(cfg.block_order, BlockOrder::SelfCross);
    assert!(serde_json::from_str::<GnotConfig>(r#"{"block_order": "self_self"}"#).is_err());
}
