//! Layer-level checks against analytic values (the full stack is checked against the reference
//! fixtures in ono-models).

use ono_nn::attention::{AttentionConfig, AttentionKind};
use ono_nn::loss::{relative_l2, Reduction};
use ono_nn::norm::BatchNorm;
use ono_nn::time_embedding::sinusoidal;
use ono_nn::{Error, LinearConfig};
use ono_testing::{assert_close, seeded};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

#[test]
fn sinusoidal_embedding_matches_the_formula() {
    seeded(0);
    let t = Tensor::from_slice(&[0.25f64, 0.7]).view([2, 1]);
    let emb = sinusoidal(&t, 6).unwrap();
    assert_eq!(emb.size(), [2, 1, 6]);
    for (b, tv) in [0.25f64, 0.7].into_iter().enumerate() {
        for i in 0..3 {
            let f = (-(10000f64.ln()) * i as f64 / 3.0).exp();
            let cos = emb.double_value(&[b as i64, 0, i]);
            let sin = emb.double_value(&[b as i64, 0, i + 3]);
            assert!((cos - (tv * f).cos()).abs() < 1e-15);
            assert!((sin - (tv * f).sin()).abs() < 1e-15);
        }
    }
    // Odd widths get a zero last column; 1-D T is refused (the reference would broadcast it wrongly).
    let odd = sinusoidal(&t, 5).unwrap();
    assert_eq!(odd.double_value(&[1, 0, 4]), 0.0);
    assert!(matches!(
        sinusoidal(&Tensor::from_slice(&[0.5f64]), 4),
        Err(Error::Shape { .. })
    ));
}

#[test]
fn relative_l2_is_the_per_sample_norm_ratio_summed() {
    seeded(1);
    let target = Tensor::from_slice(&[3.0f64, 4.0, 0.0, 1.0]).view([2, 2, 1]);
    let pred = Tensor::from_slice(&[3.0f64, 0.0, 0.0, 3.0]).view([2, 2, 1]);
    // Sample 0: ‖(0, −4)‖/5 = 0.8; sample 1: ‖(0, 2)‖/1 = 2.
    let sum = relative_l2(&pred, &target, Reduction::Sum, None).unwrap();
    assert!((sum.double_value(&[]) - 2.8).abs() < 1e-15);
    let mean = relative_l2(&pred, &target, Reduction::Mean, None).unwrap();
    assert!((mean.double_value(&[]) - 1.4).abs() < 1e-15);
    assert!(relative_l2(&pred, &target.view([2, 2]), Reduction::Sum, None).is_err());
}

#[test]
fn masked_relative_l2_equals_the_unpadded_samples_alone() {
    seeded(11);
    let opts = (Kind::Double, Device::Cpu);
    // Two samples of 3 and 5 real points, padded to 6, with garbage in the padding.
    let (pred, target) = (
        Tensor::randn([2, 6, 2], opts),
        Tensor::randn([2, 6, 2], opts),
    );
    let lens = [3i64, 5];
    let mask = Tensor::arange(6, (Kind::Int64, Device::Cpu))
        .unsqueeze(0)
        .lt_tensor(&Tensor::from_slice(&lens).unsqueeze(1));
    let masked = relative_l2(&pred, &target, Reduction::None, Some(&mask)).unwrap();
    for (b, &n) in lens.iter().enumerate() {
        let alone = relative_l2(
            &pred.narrow(0, b as i64, 1).narrow(1, 0, n),
            &target.narrow(0, b as i64, 1).narrow(1, 0, n),
            Reduction::Sum,
            None,
        )
        .unwrap();
        let (m, a) = (masked.double_value(&[b as i64]), alone.double_value(&[]));
        assert!((m - a).abs() <= 1e-15 * a, "{m} vs {a}");
    }
    let bad = Tensor::ones([2, 5], (Kind::Bool, Device::Cpu));
    assert!(relative_l2(&pred, &target, Reduction::Sum, Some(&bad)).is_err());
}

#[test]
fn batch_norm_updates_running_statistics_like_pytorch() {
    seeded(2);
    let vs = VarStore::new(Device::Cpu);
    let bn = BatchNorm::new(&vs.root(), 3);
    let x = Tensor::randn([4, 3, 5], (Kind::Float, Device::Cpu));
    let y = bn.forward(&x, true).unwrap();
    let dims = &[0i64, 2][..];
    let mean = x.mean_dim(dims, false, Kind::Float);
    let var_unbiased = x.var_dim(dims, true, false);
    assert_close(&bn.running_mean, &(&mean * 0.1), 1e-6, 1e-7);
    assert_close(&bn.running_var, &(var_unbiased * 0.1 + 0.9), 1e-6, 1e-7);
    assert_eq!(bn.num_batches_tracked.int64_value(&[]), 1);
    // Training output uses the biased batch variance.
    let var_biased = x.var_dim(dims, false, true);
    let expected = (&x - mean.view([1, 3, 1])) / (var_biased + 1e-5).sqrt();
    assert_close(&y, &expected, 1e-5, 1e-5);
    assert!(bn.forward(&x.narrow(1, 0, 2), true).is_err());
    bn.reset_running_stats().unwrap();
    assert_eq!(bn.num_batches_tracked.int64_value(&[]), 0);
}

#[test]
fn linear_init_is_the_reference_one() {
    seeded(3);
    let vs = VarStore::new(Device::Cpu);
    let lin = LinearConfig::default().init(&vs.root(), 256, 512);
    let std = lin.weight.std(true).double_value(&[]);
    assert!((std - 0.02).abs() < 0.0005, "std {std}");
    assert_eq!(
        lin.bias.as_ref().unwrap().abs().max().double_value(&[]),
        0.0
    );
    assert!(LinearConfig::no_bias()
        .init(&(vs.root() / "nb"), 2, 2)
        .bias
        .is_none());
}

/// Each attention's cross form with `context = x` is its self form, and the cross form accepts a
/// different number of keys.
#[test]
fn cross_attention_with_itself_as_context_is_self_attention() {
    seeded(4);
    for kind in [
        AttentionKind::LinearTransformer,
        AttentionKind::Galerkin,
        AttentionKind::Softmax,
    ] {
        let vs = VarStore::new(Device::Cpu);
        let cfg = AttentionConfig {
            kind,
            dim: 16,
            heads: 4,
            ..AttentionConfig::default()
        };
        let attn = cfg.init(&vs.root()).unwrap();
        let x = Tensor::randn([2, 9, 16], (Kind::Float, Device::Cpu));
        assert_close(
            &attn.forward_cross(&x, &x, None).unwrap(),
            &attn.forward(&x, None).unwrap(),
            1e-5,
            1e-6,
        );
        let ctx = Tensor::randn([2, 5, 16], (Kind::Float, Device::Cpu));
        assert_eq!(
            attn.forward_cross(&x, &ctx, None).unwrap().size(),
            [2, 9, 16]
        );
    }
    let vs = VarStore::new(Device::Cpu);
    let ny = AttentionConfig {
        kind: AttentionKind::Nystrom,
        dim: 16,
        heads: 4,
        ..AttentionConfig::default()
    }
    .init(&vs.root())
    .unwrap();
    let x = Tensor::randn([1, 3, 16], (Kind::Float, Device::Cpu));
    assert!(matches!(
        ny.forward_cross(&x, &x, None),
        Err(Error::Config(_))
    ));
    assert!(matches!(
        ny.forward(&x.narrow(2, 0, 8), None),
        Err(Error::Shape { .. })
    ));
    let bad = AttentionConfig {
        dim: 10,
        heads: 4,
        ..AttentionConfig::default()
    };
    assert!(matches!(bad.init(&vs.root()), Err(Error::Config(_))));
}
