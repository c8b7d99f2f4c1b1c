//! The cross-attention ONO (paper eq. 20): Y = X reproduces the self-attention path, each point set
//! keeps its own EMA covariance, and a trained model can be queried on any point set.

use ono_models::{Error, NnBlock, OnoConfig, OnoCross};
use ono_nn::orthogonal::Orthogonalization;
use ono_testing::{assert_close, assert_near, seeded};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn config(nn_block: NnBlock, n_layers: usize) -> OnoConfig {
    OnoConfig {
        n_layers,
        n_hidden: 16,
        n_head: 4,
        psi_dim: 4,
        nn_block,
        ..OnoConfig::default()
    }
}

fn build(cfg: &OnoConfig) -> (VarStore, OnoCross) {
    let mut vs = VarStore::new(Device::Cpu);
    let model = cfg.init_cross(&vs.root()).unwrap();
    vs.double();
    (vs, model)
}

fn points(b: i64, n: i64, cfg: &OnoConfig) -> (Tensor, Tensor) {
    (
        Tensor::rand([b, n, cfg.space_dim], (Kind::Double, Device::Cpu)),
        Tensor::randn([b, n, cfg.fun_dim], (Kind::Double, Device::Cpu)),
    )
}

/// The self-attention path written with the blocks' own operations: at Y = X the first block is
/// the ordinary ONO block with the residual of eq. (20) dropped.
fn self_path(model: &OnoCross, pos: &Tensor, fx: &Tensor, train: bool) -> Tensor {
    let blocks = model.blocks();
    let x = model.encode_positions(pos, None).unwrap();
    let h = model.encode_function(pos, fx).unwrap();
    let x = blocks[0].nn_block().forward(&x, None).unwrap();
    let psi = blocks[0].eigenfunctions(&x, None, train).unwrap();
    let mut h = blocks[0]
        .head(&blocks[0].kernel(&psi, &psi, &h, None, false).unwrap())
        .unwrap();
    let mut x = x;
    for block in &blocks[1..] {
        (x, h) = block.forward(&x, &h, None, train).unwrap();
    }
    h
}

#[test]
fn queries_at_the_input_points_reproduce_the_self_attention_path() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(0);
    for nn_block in [
        NnBlock::LinearTransformer,
        NnBlock::Galerkin,
        NnBlock::Softmax,
        NnBlock::None,
    ] {
        let cfg = config(nn_block, 3);
        let (_vs, model) = build(&cfg);
        let (pos, fx) = points(2, 25, &cfg);
        let cross = model
            .forward((&pos, &fx, None), (&pos, None), None, true)
            .unwrap();
        // Both buffers saw the same points: equal covariances.
        let b0 = &model.blocks()[0];
        assert_close(
            &b0.covariance().unwrap().value().unwrap(),
            &b0.query_covariance().unwrap().value().unwrap(),
            1e-13,
            1e-15,
        );
        // Two code paths through a Cholesky factor in float64: their rounding differs by up to
        // ~6e-11 relative (seen once in a full parallel test run), so 1e-9; a wrong formula is off
        // by far more.
        let reference = self_path(&model, &pos, &fx, true);
        assert_close(&cross, &reference, 1e-9, 1e-11);
        let cross_eval =
            tch::no_grad(|| model.forward((&pos, &fx, None), (&pos, None), None, false)).unwrap();
        let reference_eval = tch::no_grad(|| self_path(&model, &pos, &fx, false));
        assert_close(&cross_eval, &reference_eval, 1e-9, 1e-11);
    }
}

#[test]
fn each_point_set_has_its_own_covariance() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(1);
    let cfg = config(NnBlock::LinearTransformer, 2);
    let (vs, model) = build(&cfg);
    let (pos, fx) = points(2, 30, &cfg);
    let query = Tensor::rand([2, 11, 2], (Kind::Double, Device::Cpu));
    let _ = tch::no_grad(|| model.forward((&pos, &fx, None), (&query, None), None, true)).unwrap();
    let names: Vec<String> = vs.variables().into_keys().collect();
    assert!(names.contains(&"blocks.0.feature_cov_q".to_string()));
    assert!(!names
        .iter()
        .any(|n| n.starts_with("blocks.1.feature_cov_q")));
    let b0 = &model.blocks()[0];
    let (c_in, c_q) = (
        b0.covariance().unwrap().value().unwrap(),
        b0.query_covariance().unwrap().value().unwrap(),
    );
    assert!(!c_in.allclose(&c_q, 1e-6, 1e-9, false));
    assert_eq!(b0.query_covariance().unwrap().count().unwrap(), 1);
}

#[test]
fn a_one_layer_model_answers_each_query_point_independently() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(2);
    let cfg = config(NnBlock::LinearTransformer, 1);
    let (_vs, model) = build(&cfg);
    let (pos, fx) = points(2, 40, &cfg);
    let _ = tch::no_grad(|| model.forward((&pos, &fx, None), (&pos, None), None, true)).unwrap();
    // In eval, one layer maps each query point on its own: any mesh, any split.
    let y1 = Tensor::rand([2, 7, 2], (Kind::Double, Device::Cpu));
    let y2 = Tensor::rand([2, 13, 2], (Kind::Double, Device::Cpu));
    let both = Tensor::cat(&[&y1, &y2], 1);
    let run = |y: &Tensor| {
        tch::no_grad(|| model.forward((&pos, &fx, None), (y, None), None, false)).unwrap()
    };
    let joint = run(&both);
    assert_close(&joint, &Tensor::cat(&[run(&y1), run(&y2)], 1), 1e-12, 1e-14);
    assert_eq!(run(&y1.narrow(1, 0, 1)).size(), [2, 1, 1]);
}

#[test]
fn deeper_models_are_equivariant_to_reordering_the_queries() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(3);
    let cfg = config(NnBlock::Galerkin, 3);
    let (_vs, model) = build(&cfg);
    let (pos, fx) = points(2, 30, &cfg);
    let _ = tch::no_grad(|| model.forward((&pos, &fx, None), (&pos, None), None, true)).unwrap();
    let query = Tensor::rand([2, 50, 2], (Kind::Double, Device::Cpu)); // a finer mesh
    let perm = Tensor::randperm(50, (Kind::Int64, Device::Cpu));
    let out =
        tch::no_grad(|| model.forward((&pos, &fx, None), (&query, None), None, false)).unwrap();
    let out_perm = tch::no_grad(|| {
        model.forward(
            (&pos, &fx, None),
            (&query.index_select(1, &perm), None),
            None,
            false,
        )
    })
    .unwrap();
    assert_close(&out_perm, &out.index_select(1, &perm), 1e-12, 1e-14);
}

#[test]
fn unsupported_configurations_and_bad_queries_are_errors() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(4);
    let vs = VarStore::new(Device::Cpu);
    assert!(matches!(
        config(NnBlock::Nystrom, 2).init_cross(&vs.root()),
        Err(Error::Config(_))
    ));
    let bn = OnoConfig {
        orthogonalization: Orthogonalization::BatchNorm,
        ..config(NnBlock::LinearTransformer, 2)
    };
    assert!(matches!(bn.init_cross(&vs.root()), Err(Error::Config(_))));
    let cfg = config(NnBlock::LinearTransformer, 2);
    let (_vs, model) = build(&cfg);
    let (pos, fx) = points(2, 10, &cfg);
    let bad = Tensor::rand([2, 5, 3], (Kind::Double, Device::Cpu));
    let err = model
        .forward((&pos, &fx, None), (&bad, None), None, false)
        .unwrap_err();
    assert!(err.to_string().contains("[2, 5, 3]"), "{err}");
    let empty = Tensor::rand([2, 0, 2], (Kind::Double, Device::Cpu));
    assert!(model
        .forward((&pos, &fx, None), (&empty, None), None, false)
        .is_err());
}

/// `t` (1, n, c) padded to `n_to` rows with garbage, and its mask (1, n_to).
fn pad_garbage(t: &Tensor, n_to: i64) -> (Tensor, Tensor) {
    let [_, n, c] = t.size()[..] else { panic!() };
    let garbage = Tensor::randn([1, n_to - n, c], (Kind::Double, Device::Cpu)) * 4.0 - 2.0;
    let mask = Tensor::arange(n_to, (Kind::Int64, Device::Cpu))
        .lt(n)
        .unsqueeze(0);
    (Tensor::cat(&[t, &garbage], 1), mask)
}

/// What [`cross_step`] observed.
struct Observed {
    /// Training outputs at each sample's real query points.
    outs: Vec<Tensor>,
    /// Evaluation outputs of the batch, at each sample's real query points.
    evals: Vec<Tensor>,
    /// Evaluation of each sample alone, after the same step.
    alone: Vec<Tensor>,
    grads: Vec<(String, Tensor)>,
    buffers: Vec<(String, Tensor)>,
}

/// One training step (output, every gradient, both EMA buffers) and an evaluation of a batch of
/// samples (input points, input function, query points), padded with garbage to `extra` rows
/// beyond the longest, or not padded at all (`extra` None, one sample).
fn cross_step(cfg: &OnoConfig, data: &[(Tensor, Tensor, Tensor)], extra: Option<i64>) -> Observed {
    seeded(11);
    let (vs, model) = build(cfg);
    let part = |d: &(Tensor, Tensor, Tensor), j: usize| [&d.0, &d.1, &d.2][j].shallow_clone();
    let batch = |j: usize| -> (Tensor, Option<Tensor>) {
        match extra {
            None => (part(&data[0], j), None),
            Some(e) => {
                let longest = data.iter().map(|d| part(d, j).size()[1]).max().unwrap();
                let (t, m): (Vec<Tensor>, Vec<Tensor>) = data
                    .iter()
                    .map(|d| pad_garbage(&part(d, j), longest + e))
                    .unzip();
                (Tensor::cat(&t, 0), Some(Tensor::cat(&m, 0)))
            }
        }
    };
    let ((pos, mask), (fx, _), (query, query_mask)) = (batch(0), batch(1), batch(2));
    let target = query.sum_dim_intlist(-1, true, Kind::Double).sin();
    let out = model
        .forward(
            (&pos, &fx, mask.as_ref()),
            (&query, query_mask.as_ref()),
            None,
            true,
        )
        .unwrap();
    let d = (&out - &target).square();
    let d = match &query_mask {
        Some(m) => d * m.to_kind(Kind::Double).unsqueeze(-1),
        None => d,
    };
    d.sum(Kind::Double).backward();
    let real = |t: &Tensor, i: usize| t.narrow(0, i as i64, 1).narrow(1, 0, data[i].2.size()[1]);
    let eval = tch::no_grad(|| {
        model.forward(
            (&pos, &fx, mask.as_ref()),
            (&query, query_mask.as_ref()),
            None,
            false,
        )
    })
    .unwrap();
    let alone = data
        .iter()
        .map(|(p, f, q)| {
            tch::no_grad(|| model.forward((p, f, None), (q, None), None, false)).unwrap()
        })
        .collect();
    let named = |grad: bool| {
        let mut v: Vec<(String, Tensor)> = vs
            .variables()
            .into_iter()
            .filter(|(_, t)| t.requires_grad() == grad)
            .map(|(n, t)| if grad { (n, t.grad()) } else { (n, t) })
            .collect();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    };
    Observed {
        outs: (0..data.len()).map(|i| real(&out.detach(), i)).collect(),
        evals: (0..data.len()).map(|i| real(&eval, i)).collect(),
        alone,
        grads: named(true),
        buffers: named(false),
    }
}

/// Padded input and query points reach no real point: one sample padded equals it unpadded,
/// and a ragged batch gives the same under any amount of garbage padding; in evaluation each
/// padded row is its sample alone.
#[test]
fn a_padded_batch_of_inputs_and_queries_keeps_to_its_real_points() {
    let _rng = ono_testing::torch_rng_lock();
    seeded(12);
    let sample = |n: i64, m: i64| {
        let f = (Kind::Double, Device::Cpu);
        (
            Tensor::rand([1, n, 2], f),
            Tensor::randn([1, n, 1], f),
            Tensor::rand([1, m, 2], f),
        )
    };
    let data = [sample(9, 5), sample(14, 11)];
    for nn_block in [
        NnBlock::LinearTransformer,
        NnBlock::Galerkin,
        NnBlock::Softmax,
        NnBlock::None,
    ] {
        let cfg = config(nn_block, 2);
        // Two layouts sum in different orders, through a Cholesky factor: measured up to 1.7e-10
        // of a gradient's largest entry (Softmax); a padded point that leaked would move the
        // outputs by O(1).
        let same = |a: &Observed, b: &Observed| {
            for (x, y) in a
                .outs
                .iter()
                .zip(&b.outs)
                .chain(a.evals.iter().zip(&b.evals))
            {
                assert_near(x, y, 1e-9);
            }
            let named = a
                .grads
                .iter()
                .chain(&a.buffers)
                .zip(b.grads.iter().chain(&b.buffers));
            for ((name, x), (_, y)) in named {
                assert!(x.defined(), "{nn_block:?}: {name}");
                assert_near(x, y, 1e-9);
            }
        };
        same(
            &cross_step(&cfg, &data[..1], None),
            &cross_step(&cfg, &data[..1], Some(3)),
        );
        let ragged = cross_step(&cfg, &data, Some(0));
        same(&ragged, &cross_step(&cfg, &data, Some(4)));
        for (batch, alone) in ragged.evals.iter().zip(&ragged.alone) {
            assert_near(batch, alone, 1e-10);
        }
    }
}
