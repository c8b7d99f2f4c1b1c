//! Mixed precision (`ono_nn::precision`): a linear layer, every attention and an ONO block run
//! their products in bfloat16 and agree with float32 to bfloat16's tolerance, while parameters,
//! gradients and the covariance path stay float32.

use ono_nn::attention::{AttentionConfig, AttentionKind, Landmarks};
use ono_nn::orthogonal::{KernelScale, OrthogonalBlockConfig, Orthogonalization, Whitening};
use ono_nn::precision::{self, Precision};
use ono_nn::transformer_block::TransformerBlockConfig;
use ono_nn::LinearConfig;
use ono_testing::{assert_close, seeded, torch_rng_lock};
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

/// ‖a − b‖ / ‖b‖ in float64.
fn rel_err(a: &Tensor, b: &Tensor) -> f64 {
    let (a, b) = (a.to_kind(Kind::Double), b.to_kind(Kind::Double));
    (&a - &b).norm().double_value(&[]) / b.norm().double_value(&[])
}

/// The gradients of every variable of `vs` after back-propagating Σ out · r (in float32).
fn grads(vs: &VarStore, out: &Tensor, r: &Tensor) -> Vec<(String, Tensor)> {
    for v in vs.trainable_variables() {
        v.grad().defined().then(|| v.grad().zero_());
    }
    (out.to_kind(Kind::Float) * r).sum(Kind::Float).backward();
    let mut g: Vec<(String, Tensor)> = vs
        .variables()
        .into_iter()
        .filter(|(_, v)| v.requires_grad())
        .map(|(k, v)| (k, v.grad().copy()))
        .collect();
    g.sort_by(|a, b| a.0.cmp(&b.0));
    g
}

/// Float32 parameters and float32 gradients that agree with the float32 pass's to `tol`.
fn assert_float32_grads(bf16: &[(String, Tensor)], f32: &[(String, Tensor)], tol: f64) {
    assert_eq!(bf16.len(), f32.len());
    for ((name, a), (_, b)) in bf16.iter().zip(f32) {
        assert_eq!(a.kind(), Kind::Float, "{name}: gradient kind");
        if b.norm().double_value(&[]) > 0.0 {
            let e = rel_err(a, b);
            assert!(e < tol, "{name}: gradient differs by {e:.2e}");
        }
    }
}

#[test]
fn a_linear_layer_rounds_its_operands_to_bf16_and_keeps_float32_gradients() {
    let _rng = torch_rng_lock();
    seeded(0);
    let vs = VarStore::new(Device::Cpu);
    let lin = LinearConfig::default().init(&vs.root(), 64, 32);
    let bias = lin.bias.as_ref().unwrap();
    tch::no_grad(|| {
        bias.shallow_clone()
            .copy_(&Tensor::randn([32], (Kind::Float, Device::Cpu)))
    });
    let x = Tensor::randn([4, 10, 64], (Kind::Float, Device::Cpu));
    let y16 = precision::scope(Precision::Bf16, || lin.forward(&x)).unwrap();
    assert_eq!(y16.kind(), Kind::BFloat16);
    // Truth: the bf16-rounded operands multiplied exactly (float64); the GEMM accumulates in
    // float32 and rounds its result once, 2⁻⁹ relative.
    let r = |t: &Tensor| t.to_kind(Kind::BFloat16).to_kind(Kind::Double);
    let truth = r(&x).matmul(&r(&lin.weight).tr()) + r(bias);
    assert_close(&y16.to_kind(Kind::Double), &truth, 4e-3, 1e-3);
    let y32 = lin.forward(&x).unwrap();
    assert_eq!(y32.kind(), Kind::Float);
    assert!(rel_err(&y16, &y32) < 1e-2);

    let probe = Tensor::randn([4, 10, 32], (Kind::Float, Device::Cpu));
    let g16 = grads(&vs, &y16, &probe);
    let g32 = grads(&vs, &y32, &probe);
    assert_float32_grads(&g16, &g32, 1e-2);
    assert_eq!(lin.weight.kind(), Kind::Float);
}

#[test]
fn every_attention_agrees_with_float32_in_bf16() {
    let _rng = torch_rng_lock();
    for kind in [
        AttentionKind::LinearTransformer,
        AttentionKind::Nystrom,
        AttentionKind::Galerkin,
        AttentionKind::Softmax,
    ] {
        seeded(1);
        let vs = VarStore::new(Device::Cpu);
        let cfg = AttentionConfig {
            kind,
            dim: 32,
            heads: 4,
            landmarks: Landmarks::Fixed(8),
            ..AttentionConfig::default()
        };
        let attn = cfg.init(&vs.root()).unwrap();
        let x = Tensor::randn([2, 40, 32], (Kind::Float, Device::Cpu));
        let y32 = attn.forward(&x, None).unwrap();
        let y16 = precision::scope(Precision::Bf16, || attn.forward(&x, None)).unwrap();
        assert_eq!(y16.kind(), Kind::BFloat16, "{kind:?}");
        let e = rel_err(&y16, &y32);
        assert!(e < 2e-2, "{kind:?}: output differs by {e:.2e}");
        let probe = Tensor::randn([2, 40, 32], (Kind::Float, Device::Cpu));
        let g16 = grads(&vs, &y16, &probe);
        let g32 = grads(&vs, &y32, &probe);
        assert_float32_grads(&g16, &g32, 5e-2);
    }
}

#[test]
fn an_ono_block_runs_its_products_in_bf16_and_its_covariance_path_in_float32() {
    let _rng = torch_rng_lock();
    for whitening in [Whitening::ExplicitInverse, Whitening::TriangularSolve] {
        seeded(2);
        let cfg = OrthogonalBlockConfig {
            nn_block: TransformerBlockConfig {
                attention: Some(AttentionConfig {
                    dim: 16,
                    heads: 2,
                    ..AttentionConfig::default()
                }),
                dim: 16,
                mlp_ratio: 2,
            },
            psi_dim: 4,
            orthogonalization: Orthogonalization::Orthonormal,
            whitening,
            momentum: 0.9,
            head_out: None,
            query_covariance: false,
            kernel_scale: KernelScale::Sum,
        };
        let build = || {
            seeded(3);
            let vs = VarStore::new(Device::Cpu);
            let block = cfg.init(&vs.root()).unwrap();
            (vs, block)
        };
        let (vs32, b32) = build();
        let (vs16, b16) = build();
        let x = Tensor::randn([2, 64, 16], (Kind::Float, Device::Cpu));
        let fx = Tensor::randn([2, 64, 16], (Kind::Float, Device::Cpu));
        let (x32, f32) = b32.forward(&x, &fx, None, true).unwrap();
        let (x16, f16) =
            precision::scope(Precision::Bf16, || b16.forward(&x, &fx, None, true)).unwrap();
        // The residual stream keeps its float32 input's kind (type promotion); the head's
        // output is a product's.
        assert_eq!((x16.kind(), f16.kind()), (Kind::Float, Kind::BFloat16));
        for (name, a, b) in [("x", &x16, &x32), ("fx", &f16, &f32)] {
            let e = rel_err(a, b);
            assert!(e < 3e-2, "{whitening:?} {name}: differs by {e:.2e}");
        }
        // The EMA covariance is a float32 buffer fed by a float32 second moment.
        let (c16, c32) = (
            b16.covariance().unwrap().buffer(),
            b32.covariance().unwrap().buffer(),
        );
        assert_eq!(c16.kind(), Kind::Float);
        assert!(rel_err(c16, c32) < 3e-2);
        // ψ̃ comes out of a float32 Cholesky and solve: orthonormal to float32's precision
        // (Σ ψ̃ψ̃ᵀ / BN = I), which a bfloat16 whitening would miss by about 1e-2.
        let psi = precision::scope(Precision::Bf16, || b16.eigenfunctions(&x, None, true)).unwrap();
        assert_eq!(psi.kind(), Kind::Float);
        let flat = psi.reshape([-1, 4]).to_kind(Kind::Double);
        let gram = flat.tr().matmul(&flat) / (2.0 * 64.0);
        assert_close(
            &gram,
            &Tensor::eye(4, (Kind::Double, Device::Cpu)),
            0.0,
            1e-5,
        );
        let probe = Tensor::randn([2, 64, 16], (Kind::Float, Device::Cpu));
        let out16 = x16.to_kind(Kind::Float) + f16.to_kind(Kind::Float);
        let g16 = grads(&vs16, &out16, &probe);
        let g32 = grads(&vs32, &(&x32 + &f32), &probe);
        assert_float32_grads(&g16, &g32, 6e-2);
        for v in vs16.variables().values() {
            assert!(v.kind() == Kind::Float || v.kind() == Kind::Int64);
        }
    }
}
