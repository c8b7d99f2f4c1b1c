//! Kernel benchmarks: `cargo xtask bench [FILTER]`.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use ono_benches::{bench_device, sync};
use ono_kernels::orthonormal::{psd_safe_cholesky, second_moment, whiten};
use tch::{Kind, Tensor};

/// Second moment + Cholesky + whitening of ψ at the shapes of the ONO presets.
fn orthonormalize(c: &mut Criterion) {
    let _guard = tch::no_grad_guard();
    let dev = bench_device();
    let mut group = c.benchmark_group("orthonormalize");
    // (B, N, k): NS2d (8, 4096, 16), Darcy (4, 7225, 32).
    for (b, n, k) in [(8i64, 4096i64, 16i64), (4, 7225, 32)] {
        let psi = Tensor::randn([b, n, k], (Kind::Float, dev));
        group.bench_with_input(
            BenchmarkId::from_parameter(format!("{b}x{n}x{k}")),
            &psi,
            |bench, psi| {
                bench.iter_custom(|iters| {
                    sync(dev);
                    let start = Instant::now();
                    for _ in 0..iters {
                        let cov = second_moment(psi, None).unwrap();
                        let (l, _) = psd_safe_cholesky(&cov).unwrap();
                        black_box(whiten(psi, &l).unwrap());
                    }
                    sync(dev);
                    start.elapsed()
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, orthonormalize);
criterion_main!(benches);
