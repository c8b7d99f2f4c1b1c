//! The cross-attention ONO (paper eq. 20): Y = X reproduces the self-attention path, each point set
//! keeps its own EMA covariance, and a trained model can be queried on any point set.

use ono_models::{Error, NnBlock, OnoConfig, OnoCross};
use ono_nn::orthogonal::Orthogonalization;
use ono_testing::{assert_close, seeded};
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
    let x = blocks[0].nn_block().forward(&x).unwrap();
    let psi = blocks[0].eigenfunctions(&x, train).unwrap();
    let mut h = blocks[0]
        .head(&blocks[0].kernel(&psi, &psi, &h, false).unwrap())
        .unwrap();
    let mut x = x;
    for block in &blocks[1..] {
        (x, h) = block.forward(&x, &h, train).unwrap();
    }
    h
}

#[test]
fn queries_at_the_input_points_reproduce_the_self_attention_path() {
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
        let cross = model.forward(&pos, &fx, &pos, None, true).unwrap();
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
        let cross_eval = tch::no_grad(|| model.forward(&pos, &fx, &pos, None, false)).unwrap();
        let reference_eval = tch::no_grad(|| self_path(&model, &pos, &fx, false));
        assert_close(&cross_eval, &reference_eval, 1e-9, 1e-11);
    }
}

#[test]
fn each_point_set_has_its_own_covariance() {
    seeded(1);
    let cfg = config(NnBlock::LinearTransformer, 2);
    let (vs, model) = build(&cfg);
    let (pos, fx) = points(2, 30, &cfg);
    let query = Tensor::rand([2, 11, 2], (Kind::Double, Device::Cpu));
    let _ = tch::no_grad(|| model.forward(&pos, &fx, &query, None, true)).unwrap();
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
    seeded(2);
    let cfg = config(NnBlock::LinearTransformer, 1);
    let (_vs, model) = build(&cfg);
    let (pos, fx) = points(2, 40, &cfg);
    let _ = tch::no_grad(|| model.forward(&pos, &fx, &pos, None, true)).unwrap();
    // In eval, one layer maps each query point on its own: any mesh, any split.
    let y1 = Tensor::rand([2, 7, 2], (Kind::Double, Device::Cpu));
    let y2 = Tensor::rand([2, 13, 2], (Kind::Double, Device::Cpu));
    let both = Tensor::cat(&[&y1, &y2], 1);
    let run = |y: &Tensor| tch::no_grad(|| model.forward(&pos, &fx, y, None, false)).unwrap();
    let joint = run(&both);
    assert_close(&joint, &Tensor::cat(&[run(&y1), run(&y2)], 1), 1e-12, 1e-14);
    assert_eq!(run(&y1.narrow(1, 0, 1)).size(), [2, 1, 1]);
}

#[test]
fn deeper_models_are_equivariant_to_reordering_the_queries() {
    seeded(3);
    let cfg = config(NnBlock::Galerkin, 3);
    let (_vs, model) = build(&cfg);
    let (pos, fx) = points(2, 30, &cfg);
    let _ = tch::no_grad(|| model.forward(&pos, &fx, &pos, None, true)).unwrap();
    let query = Tensor::rand([2, 50, 2], (Kind::Double, Device::Cpu)); // a finer mesh
    let perm = Tensor::randperm(50, (Kind::Int64, Device::Cpu));
    let out = tch::no_grad(|| model.forward(&pos, &fx, &query, None, false)).unwrap();
    let out_perm =
        tch::no_grad(|| model.forward(&pos, &fx, &query.index_select(1, &perm), None, false))
            .unwrap();
    assert_close(&out_perm, &out.index_select(1, &perm), 1e-12, 1e-14);
}

#[test]
fn unsupported_configurations_and_bad_queries_are_errors() {
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
    let err = model.forward(&pos, &fx, &bad, None, false).unwrap_err();
    assert!(err.to_string().contains("[2, 5, 3]"), "{err}");
    let empty = Tensor::rand([2, 0, 2], (Kind::Double, Device::Cpu));
    assert!(model.forward(&pos, &fx, &empty, None, false).is_err());
}
