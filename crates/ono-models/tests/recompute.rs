//! Activation recomputation gives the plain path's loss, gradients and statistics.

use ono_models::{NnBlock, Ono, OnoConfig};
use ono_nn::orthogonal::Orthogonalization;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

fn build(cfg: &OnoConfig, seed: i64) -> (VarStore, Ono) {
    tch::manual_seed(seed);
    let mut vs = VarStore::new(Device::Cpu);
    let model = cfg.init(&vs.root()).unwrap();
    vs.double();
    (vs, model)
}

fn sorted(vs: &VarStore) -> Vec<(String, Tensor)> {
    let mut v: Vec<_> = vs.variables().into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

#[test]
fn recomputation_matches_the_plain_backward() {
    for (orth, time_input) in [
        (Orthogonalization::Orthonormal, false),
        (Orthogonalization::BatchNorm, true),
    ] {
        let cfg = OnoConfig {
            n_layers: 3,
            n_hidden: 16,
            n_head: 4,
            psi_dim: 4,
            nn_block: NnBlock::LinearTransformer,
            orthogonalization: orth,
            time_input,
            ..OnoConfig::default()
        };
        let opts = (Kind::Double, Device::Cpu);
        let pos = Tensor::rand([2, 30, cfg.space_dim], opts);
        let fx = Tensor::randn([2, 30, cfg.fun_dim], opts);
        let y = Tensor::randn([2, 30, cfg.out_dim], opts);
        let t = time_input.then(|| Tensor::rand([2, 1], opts));
        let loss =
            |p: &Tensor| -> ono_models::Result<Tensor> { Ok((p - &y).square().sum(Kind::Double)) };
        let (vs_a, a) = build(&cfg, 5);
        let (vs_b, b) = build(&cfg, 5);
        for step in 0..2 {
            let la = loss(&a.forward(&pos, &fx, t.as_ref(), true).unwrap()).unwrap();
            la.backward();
            let lb = b
                .forward_backward_recompute(&pos, &fx, t.as_ref(), loss)
                .unwrap();
            assert_eq!(
                la.double_value(&[]),
                lb.double_value(&[]),
                "{orth:?} step {step}: loss"
            );
            for ((na, va), (nb, vb)) in sorted(&vs_a).iter().zip(sorted(&vs_b).iter()) {
                assert_eq!(na, nb);
                // Buffers (EMA covariance, BatchNorm statistics, counters) updated exactly once.
                if !va.requires_grad() {
                    assert!(va.equal(vb), "{orth:?}: buffer {na} differs");
                    continue;
                }
                let (ga, gb) = (va.grad(), vb.grad());
                assert!(ga.defined() && gb.defined(), "{na}: no gradient");
                let err = (&ga - &gb).abs().max().double_value(&[]);
                let scale = ga.abs().max().double_value(&[]).max(1e-12);
                assert!(err <= 1e-10 * scale, "{orth:?} {na}: {err} vs {scale}");
            }
        }
    }
}
