//! ONO on padded ragged batches, against the same samples laid out without padding, in float64.
//!
//! The oracle runs each sample alone through every part that reads other points of its own
//! sample (the NN block's attention, ψ̃ᵀf), and pools the normalization statistics over the
//! concatenation of every sample's points (the covariance is the batch's, like BatchNorm's).
//! The padded rows are filled with garbage, not zeros: a padded value that reached a real point
//! would show.

use ono_models::{ModelInput, NeuralOperator, NnBlock, Ono, OnoConfig, Recompute};
use ono_nn::attention::Landmarks;
use ono_nn::orthogonal::{KernelScale, Orthogonalization};
use ono_testing::{assert_near, seeded};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

const TOL: f64 = 1e-10;

fn config(nn_block: NnBlock, orth: Orthogonalization, scale: KernelScale) -> OnoConfig {
    OnoConfig {
        n_layers: 2,
        n_hidden: 8,
        n_head: 2,
        psi_dim: 3,
        mlp_ratio: 2,
        nn_block,
        orthogonalization: orth,
        kernel_scale: scale,
        landmarks: Landmarks::Fixed(4),
        ..OnoConfig::default()
    }
}

fn build(cfg: &OnoConfig, seed: u64) -> (VarStore, Ono) {
    seeded(seed);
    let mut vs = VarStore::new(Device::Cpu);
    let model = cfg.init(&vs.root()).unwrap();
    vs.double();
    (vs, model)
}

/// Samples of the given lengths: (pos, fx, target) each (1, n, ·).
type Sample = (Tensor, Tensor, Tensor);

fn samples(lengths: &[i64]) -> Vec<Sample> {
    let f = (Kind::Double, Device::Cpu);
    lengths
        .iter()
        .map(|&n| {
            (
                Tensor::rand([1, n, 2], f),
                Tensor::randn([1, n, 1], f),
                Tensor::randn([1, n, 1], f),
            )
        })
        .collect()
}

/// The padded batch: every sample's points first, then `extra` more rows of garbage beyond the
/// longest; (pos, fx, target, mask).
fn padded(samples: &[Sample], extra: i64) -> (Tensor, Tensor, Tensor, Tensor) {
    let n = samples.iter().map(|s| s.0.size()[1]).max().unwrap() + extra;
    let f = (Kind::Double, Device::Cpu);
    let pad = |t: &Tensor| {
        let len = t.size()[1];
        let garbage = Tensor::randn([1, n - len, t.size()[2]], f) * 3.0 + 1.5;
        Tensor::cat(&[t, &garbage], 1)
    };
    let cat = |i: usize| {
        Tensor::cat(
            &samples
                .iter()
                .map(|s| pad(&[&s.0, &s.1, &s.2][i].shallow_clone()))
                .collect::<Vec<_>>(),
            0,
        )
    };
    let mask = Tensor::stack(
        &samples
            .iter()
            .map(|s| Tensor::arange(n, (Kind::Int64, Device::Cpu)).lt(s.0.size()[1]))
            .collect::<Vec<_>>(),
        0,
    );
    (cat(0), cat(1), cat(2), mask)
}

fn squared_error(pred: &Tensor, target: &Tensor, mask: Option<&Tensor>) -> Tensor {
    let d = (pred - target).square();
    match mask {
        Some(m) => (d * m.to_kind(Kind::Double).unsqueeze(-1)).sum(Kind::Double),
        None => d.sum(Kind::Double),
    }
}

/// The oracle: the samples without padding, statistics pooled over their concatenation.
fn unpadded_training_forward(model: &Ono, samples: &[Sample]) -> Vec<Tensor> {
    let lengths: Vec<i64> = samples.iter().map(|s| s.0.size()[1]).collect();
    let mut streams: Vec<(Tensor, Tensor)> = samples
        .iter()
        .map(|(pos, fx, _)| model.encode(pos, fx, None, None).unwrap())
        .collect();
    for block in model.blocks() {
        let xs: Vec<Tensor> = streams
            .iter()
            .map(|(x, _)| block.nn_block().forward(x, None).unwrap())
            .collect();
        let psi = block
            .eigenfunctions(&Tensor::cat(&xs, 1), None, true)
            .unwrap()
            .split_with_sizes(&lengths, 1);
        streams = xs
            .into_iter()
            .zip(&psi)
            .zip(&streams)
            .map(|((x, p), (_, f))| {
                let f = block
                    .head(&block.kernel(p, p, f, None, true).unwrap())
                    .unwrap();
                (x, f)
            })
            .collect();
    }
    streams.into_iter().map(|(_, f)| f).collect()
}

fn grads(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| t.requires_grad())
        .map(|(name, t)| (name, t.grad()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn buffers(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, t)| !t.requires_grad())
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

fn assert_same_state(label: &str, a: &VarStore, b: &VarStore) {
    for ((name, ga), (_, gb)) in grads(a).iter().zip(grads(b)) {
        assert!(
            ga.defined() && gb.defined(),
            "{label}: {name} has no gradient"
        );
        assert_near(ga, &gb, TOL);
    }
    for ((name, ba), (_, bb)) in buffers(a).iter().zip(buffers(b)) {
        if ba.is_floating_point() {
            assert_near(ba, &bb, TOL);
        } else {
            assert!(ba.equal(&bb), "{label}: {name}");
        }
    }
}

/// One training step's output, gradients and statistics on the padded batch against the
/// oracle; then, in evaluation, each padded row against its sample alone.
fn check(cfg: &OnoConfig, lengths: &[i64], recompute: Recompute) {
    let label = format!(
        "{:?}/{:?}/{:?}/{recompute:?}",
        cfg.nn_block, cfg.orthogonalization, cfg.kernel_scale
    );
    seeded(40);
    let data = samples(lengths);
    let (pos, fx, y, mask) = padded(&data, 3);

    let (vs, model) = build(cfg, 7);
    let input = ModelInput::new(&pos, &fx).with_mask(Some(&mask));
    let mut out = None;
    let mut loss = |o: &Tensor| -> Result<Tensor, ono_models::LossError> {
        out = Some(o.detach());
        Ok(squared_error(o, &y, Some(&mask)))
    };
    let _ = model
        .forward_backward(&input, &mut loss, recompute)
        .unwrap();
    let out = out.unwrap();

    let (vs_o, oracle) = build(cfg, 7);
    let outs = unpadded_training_forward(&oracle, &data);
    let total = outs
        .iter()
        .zip(&data)
        .map(|(o, (_, _, t))| squared_error(o, t, None))
        .fold(Tensor::zeros([], (Kind::Double, Device::Cpu)), |a, b| a + b);
    total.backward();

    for (i, (o, (p, _, _))) in outs.iter().zip(&data).enumerate() {
        let n = p.size()[1];
        assert_near(&out.narrow(0, i as i64, 1).narrow(1, 0, n), o, TOL);
        let rest = out.narrow(0, i as i64, 1).narrow(1, n, out.size()[1] - n);
        assert_eq!(
            rest.abs().max().double_value(&[]),
            0.0,
            "{label}: padded rows are zero"
        );
    }
    assert_same_state(&label, &vs, &vs_o);

    // Evaluation reads the buffers point by point: each sample alone is its padded row.
    let eval = tch::no_grad(|| model.forward(&pos, &fx, Some(&mask), None, false)).unwrap();
    for (i, (p, f, _)) in data.iter().enumerate() {
        let alone = tch::no_grad(|| model.forward(p, f, None, None, false)).unwrap();
        let n = p.size()[1];
        assert_near(&eval.narrow(0, i as i64, 1).narrow(1, 0, n), &alone, TOL);
    }
}

#[test]
fn every_nn_block_on_a_padded_batch_equals_its_samples_without_padding() {
    let _rng = ono_testing::torch_rng_lock();
    for nn_block in [
        NnBlock::LinearTransformer,
        NnBlock::Galerkin,
        NnBlock::Softmax,
        NnBlock::Nystrom,
        NnBlock::None,
    ] {
        for scale in [KernelScale::Sum, KernelScale::Mean] {
            let cfg = config(nn_block, Orthogonalization::Orthonormal, scale);
            check(&cfg, &[9, 14, 6], Recompute::None);
        }
    }
}

#[test]
fn every_normalization_of_psi_keeps_to_the_real_points() {
    let _rng = ono_testing::torch_rng_lock();
    for orth in [
        Orthogonalization::BatchNorm,
        Orthogonalization::LayerNorm,
        Orthogonalization::None,
    ] {
        let cfg = config(NnBlock::LinearTransformer, orth, KernelScale::Sum);
        check(&cfg, &[11, 5, 8], Recompute::None);
    }
}

#[test]
fn recomputed_steps_on_a_padded_batch_equal_the_unpadded_samples() {
    let _rng = ono_testing::torch_rng_lock();
    for recompute in [Recompute::Blocks, Recompute::Selective] {
        for nn_block in [
            NnBlock::LinearTransformer,
            NnBlock::Nystrom,
            NnBlock::Galerkin,
        ] {
            let cfg = config(nn_block, Orthogonalization::Orthonormal, KernelScale::Mean);
            check(&cfg, &[10, 4, 13], recompute);
        }
        let cfg = config(
            NnBlock::LinearTransformer,
            Orthogonalization::BatchNorm,
            KernelScale::Sum,
        );
        check(&cfg, &[7, 12], recompute);
    }
}

/// `landmarks = "auto"` attends exactly on short samples and through at most half their length
/// in landmarks on long ones; a padded batch mixing both is still its samples alone.
#[test]
fn auto_landmarks_on_a_batch_of_short_and_long_samples() {
    let _rng = ono_testing::torch_rng_lock();
    let cfg = OnoConfig {
        landmarks: Landmarks::Auto,
        n_layers: 1,
        ..config(
            NnBlock::Nystrom,
            Orthogonalization::Orthonormal,
            KernelScale::Mean,
        )
    };
    check(&cfg, &[40, 270], Recompute::None);
    check(&cfg, &[263, 300], Recompute::Selective);
}

#[test]
fn a_bad_mask_is_refused_by_name() {
    let _rng = ono_testing::torch_rng_lock();
    let cfg = config(
        NnBlock::LinearTransformer,
        Orthogonalization::Orthonormal,
        KernelScale::Sum,
    );
    let (_vs, model) = build(&cfg, 1);
    let data = samples(&[4, 6]);
    let (pos, fx, _, mask) = padded(&data, 0);
    let wrong = mask.narrow(1, 0, 5);
    let err = model
        .forward(&pos, &fx, Some(&wrong), None, true)
        .unwrap_err();
    assert!(err.to_string().contains("padding mask"), "{err}");
    let empty = mask.zeros_like();
    let err = model
        .forward(&pos, &fx, Some(&empty), None, true)
        .unwrap_err();
    assert!(err.to_string().contains("at least one real point"), "{err}");

    // Nyström reads each sample's length: real points must come first.
    let ny = config(
        NnBlock::Nystrom,
        Orthogonalization::Orthonormal,
        KernelScale::Sum,
    );
    let (_vs, model) = build(&ny, 1);
    let holes = mask.flip([1]);
    let err = model
        .forward(&pos, &fx, Some(&holes), None, true)
        .unwrap_err();
    assert!(err.to_string().contains("real points first"), "{err}");
}
