//! Kernel benchmarks: `cargo xtask bench kernels` (all) or a criterion filter such as
//! `cargo xtask bench attention_fwd/galerkin`. `cargo xtask bench-report` turns the results into the
//! table of docs/benchmarks.md, with the log-log slope of time against N for each kernel.
//!
//! Shapes follow issue #3: B = 4, H = 8, d = 16, N ∈ {1k, 4k, 16k, 64k}; the quadratic kernels stop
//! at 4k (their N×N score matrices need 2 GB at 4k and 34 GB at 16k); orthonormalization at k = 8, 16,
//! 32; the spectral multiply as FNO-2D layers on s×s grids with N = s².

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ono_benches::{bench_device, forward_backward, timed};
use ono_kernels::attention::{
    fourier, galerkin, gnot_linear, linear_transformer, nystrom, softmax, NystromConfig,
};
use ono_kernels::orthonormal::{psd_safe_cholesky, second_moment, whiten, whiten_explicit_inverse};
use ono_kernels::spectral::spectral_conv;
use tch::{Device, Kind, Tensor};

const B: i64 = 4;
const H: i64 = 8;
const D: i64 = 16;
const LINEAR_NS: [i64; 4] = [1 << 10, 1 << 12, 1 << 14, 1 << 16];
const QUADRATIC_NS: [i64; 3] = [1 << 10, 1 << 11, 1 << 12];

fn configure(c: &mut Criterion) -> &mut Criterion {
    let threads = std::env::var("ONO_BENCH_THREADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get() as i32));
    tch::set_num_threads(threads);
    c
}

/// Times `f` forward only (under no_grad) and forward + backward (gradients of the sum with respect
/// to every input), as `<group>_fwd` and `<group>_fwd+bwd`.
fn bench_both(
    c: &mut Criterion,
    group: &str,
    name: &str,
    n: i64,
    inputs: &[Tensor],
    f: &dyn Fn(&[Tensor]) -> Tensor,
) {
    let dev = inputs[0].device();
    let mut g = c.benchmark_group(format!("{group}_fwd"));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_with_input(BenchmarkId::new(name, n), inputs, |bench, inputs| {
        let _guard = tch::no_grad_guard();
        bench.iter_custom(|iters| timed(dev, iters, || black_box(f(inputs))))
    });
    g.finish();

    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.detach().set_requires_grad(true))
        .collect();
    let mut g = c.benchmark_group(format!("{group}_fwd+bwd"));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    g.bench_with_input(BenchmarkId::new(name, n), &leaves, |bench, leaves| {
        bench.iter_custom(|iters| timed(dev, iters, || black_box(forward_backward(f, leaves))))
    });
    g.finish();
}

fn randn(shape: &[i64], dev: Device) -> Tensor {
    Tensor::randn(shape, (Kind::Float, dev))
}

fn orthonormalize(c: &mut Criterion) {
    let dev = bench_device();
    tch::manual_seed(0);
    for k in [8i64, 16, 32] {
        for n in LINEAR_NS {
            let psi = randn(&[B, n, k], dev);
            bench_both(
                configure(c),
                "orthonormalize",
                &format!("k{k}"),
                n,
                &[psi],
                &|t| {
                    let (l, _) = psd_safe_cholesky(&second_moment(&t[0], None).unwrap()).unwrap();
                    whiten(&t[0], &l).unwrap()
                },
            );
        }
    }
    // Triangular solve against the reference's explicit inverse, at the NS2d shape (k = 16).
    for n in LINEAR_NS {
        let psi = randn(&[B, n, 16], dev);
        bench_both(
            configure(c),
            "orthonormalize",
            "k16_explicit_inverse",
            n,
            &[psi],
            &|t| {
                let (l, _) = psd_safe_cholesky(&second_moment(&t[0], None).unwrap()).unwrap();
                whiten_explicit_inverse(&t[0], &l).unwrap()
            },
        );
    }
}

type Kernel = fn(&Tensor, &Tensor, &Tensor, Option<&Tensor>) -> ono_kernels::Result<Tensor>;

const LINEAR_KERNELS: [(&str, Kernel); 3] = [
    ("galerkin", galerkin),
    ("linear_transformer", linear_transformer),
    ("gnot_linear", gnot_linear),
];

/// The linear kernels (and, if `with_nystrom`, Nyström) at each N of `ns`, as `group`.
fn linear_attention(c: &mut Criterion, group: &str, ns: &[i64], with_nystrom: bool) {
    let dev = bench_device();
    tch::manual_seed(0);
    for &n in ns {
        let qkv = [
            randn(&[B, H, n, D], dev),
            randn(&[B, H, n, D], dev),
            randn(&[B, H, n, D], dev),
        ];
        for (name, kernel) in LINEAR_KERNELS {
            bench_both(configure(c), group, name, n, &qkv, &|t| {
                kernel(&t[0], &t[1], &t[2], None).unwrap()
            });
        }
        if with_nystrom {
            let cfg = NystromConfig::default();
            bench_both(configure(c), group, "nystrom", n, &qkv, &|t| {
                nystrom(&t[0], &t[1], &t[2], &cfg, None).unwrap()
            });
        }
    }
}

fn attention(c: &mut Criterion) {
    linear_attention(c, "attention", &LINEAR_NS, true);
    let dev = bench_device();
    let quadratic: [(&str, Kernel); 2] = [("fourier", fourier), ("softmax", softmax)];
    for n in QUADRATIC_NS {
        let qkv = [
            randn(&[B, H, n, D], dev),
            randn(&[B, H, n, D], dev),
            randn(&[B, H, n, D], dev),
        ];
        for (name, kernel) in quadratic {
            bench_both(configure(c), "attention", name, n, &qkv, &|t| {
                kernel(&t[0], &t[1], &t[2], None).unwrap()
            });
        }
    }
}

/// The linear kernels beyond the 260 MB L3 of the development machine (64k → 256k), where every N is
/// bandwidth-bound: the slope there isolates the algorithmic scaling from the cache step.
fn attention_large(c: &mut Criterion) {
    linear_attention(c, "attention_large", &[1 << 16, 1 << 17, 1 << 18], false);
}

/// One FNO-2D spectral layer: width 32, 12×12 modes in each of the two corners.
fn spectral(c: &mut Criterion) {
    let dev = bench_device();
    tch::manual_seed(0);
    let (width, modes) = (32i64, 12i64);
    for s in [32i64, 64, 128, 256] {
        let x = randn(&[B, width, s, s], dev);
        let w1 = randn(&[width, width, modes, modes, 2], dev) / (width * width) as f64;
        let w2 = randn(&[width, width, modes, modes, 2], dev) / (width * width) as f64;
        bench_both(
            configure(c),
            "spectral2d",
            "w32_m12",
            s * s,
            &[x, w1, w2],
            &|t| spectral_conv(&t[0], &[&t[1], &t[2]], &[modes, modes], "backward").unwrap(),
        );
    }
}

criterion_group!(
    kernels,
    orthonormalize,
    attention,
    attention_large,
    spectral
);
criterion_main!(kernels);
