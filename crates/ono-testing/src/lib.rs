//! Test support shared by the ono crates.
//!
//! - [`init`]: one torch thread per test process (the CI machine has two cores and libtest already
//!   runs tests in parallel), called once however many tests call it.
//! - [`seeded`]: seeds torch and returns a seeded Rust RNG, so a test is reproducible end to end.
//! - [`assert_close`]: tensor closeness with a failure message that says how far and where.
//! - [`device_tests!`]: one test body run on CPU and (ignored unless asked for) on CUDA.
//! - [`assert_libtorch_linked`]: proof that the shared link script did its job for this binary.
//! - [`ranks`]: tests that run as several ranks of one world (the test binary runs itself).
//! - [`Scratch`]: a test's scratch folder, removed when the test is done.

pub mod ranks;
mod scratch;

pub use scratch::Scratch;

use std::sync::OnceLock;

use rand::rngs::StdRng;
use rand::SeedableRng;
use tch::{Device, Kind, Tensor};

/// Limits torch to `ONO_TEST_THREADS` (default 1) intra-op threads on the calling thread.
///
/// libtorch keeps the OpenMP and MKL thread counts per OS thread (`omp_set_num_threads`,
/// `mkl_set_num_threads_local`), and the test harness runs each test on a thread of its own, so
/// this must run on every test's thread, not once per process: a test thread left at the default
/// runs MKL's FFTs with dynamic threading, whose results are not bit-reproducible from call to call.
pub fn init() {
    static THREADS: OnceLock<i32> = OnceLock::new();
    let threads = *THREADS.get_or_init(|| {
        std::env::var("ONO_TEST_THREADS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1)
    });
    tch::set_num_threads(threads);
}

/// Serializes the tests of one binary that use torch's global generator (seeding it, building
/// models, training): the harness runs tests on parallel threads, and a test that seeds, then draws,
/// sees other tests' draws in between unless every such test holds this guard. A test that panicked
/// while holding it does not poison it for the others.
pub fn torch_rng_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Seeds torch's generators (CPU and CUDA) and returns a Rust RNG seeded the same way.
///
/// torch's generator is global, so tests that draw torch random numbers and compare against
/// values drawn elsewhere should draw from the returned RNG instead.
pub fn seeded(seed: u64) -> StdRng {
    init();
    tch::manual_seed(seed as i64);
    StdRng::seed_from_u64(seed)
}

/// The CUDA device for CUDA test variants; fails loudly when there is none, because a test that
/// was asked to run on CUDA and silently ran nowhere would prove nothing.
pub fn cuda_device() -> Device {
    assert!(
        tch::Cuda::is_available(),
        "this test variant needs CUDA, but tch::Cuda::is_available() is false \
         (no GPU, a CPU-only libtorch, or libtorch_cuda.so not loaded)"
    );
    Device::Cuda(0)
}

/// Every device available here: CPU, then CUDA:0 when present.
pub fn devices() -> Vec<Device> {
    let mut devs = vec![Device::Cpu];
    if tch::Cuda::is_available() {
        devs.push(Device::Cuda(0));
    }
    devs
}

/// Defines one test module per function, with a `cpu` test and a `cuda` test (ignored by default;
/// run on a GPU machine with `--include-ignored cuda`).
///
/// ```ignore
/// ono_testing::device_tests! {
///     fn adds_up(dev) {
///         let t = tch::Tensor::ones([3], (tch::Kind::Float, dev));
///         assert_eq!(t.sum(tch::Kind::Float).double_value(&[]), 3.0);
///     }
/// }
/// ```
#[macro_export]
macro_rules! device_tests {
    ($($(#[$meta:meta])* fn $name:ident($dev:ident) $body:block)*) => {$(
        $(#[$meta])*
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            fn body($dev: ::tch::Device) $body

            #[test]
            fn cpu() {
                $crate::init();
                body(::tch::Device::Cpu)
            }

            #[test]
            #[ignore = "needs CUDA: run with `--include-ignored cuda` on a GPU machine"]
            fn cuda() {
                $crate::init();
                body($crate::cuda_device())
            }
        }
    )*};
}

/// Where and how badly two tensors disagree.
#[derive(Debug, Clone, PartialEq)]
pub struct Mismatch {
    pub shape: Vec<i64>,
    pub count: usize,
    pub total: usize,
    pub max_abs: f64,
    pub max_abs_at: Vec<i64>,
    pub max_rel: f64,
    pub max_rel_at: Vec<i64>,
    pub worst: (f64, f64),
    pub worst_at: Vec<i64>,
}

/// Element-wise `|a - b| <= atol + rtol * |b|` (numpy's `allclose`, with `b` the reference).
/// NaN never compares close; infinities must match exactly.
///
/// Returns `Ok(())` or a human-readable description of the disagreement.
pub fn check_close(a: &Tensor, b: &Tensor, rtol: f64, atol: f64) -> Result<(), String> {
    if a.size() != b.size() {
        return Err(format!(
            "shapes differ: actual {:?} vs expected {:?}",
            a.size(),
            b.size()
        ));
    }
    let shape = a.size();
    let av = to_f64_vec(a);
    let bv = to_f64_vec(b);
    let mut bad: Option<(usize, f64)> = None; // most violating index, by excess over tolerance
    let mut count = 0usize;
    let (mut max_abs, mut max_abs_i) = (0.0f64, 0usize);
    let (mut max_rel, mut max_rel_i) = (0.0f64, 0usize);
    for (i, (&x, &y)) in av.iter().zip(&bv).enumerate() {
        let ok = if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
        };
        let err = if x == y { 0.0 } else { (x - y).abs() };
        let err = if err.is_nan() { f64::INFINITY } else { err };
        let rel = if y != 0.0 { err / y.abs() } else { err };
        if err > max_abs {
            (max_abs, max_abs_i) = (err, i);
        }
        if rel > max_rel {
            (max_rel, max_rel_i) = (rel, i);
        }
        if !ok {
            count += 1;
            let excess = err - (atol + rtol * y.abs());
            if bad.is_none_or(|(_, e)| excess > e) {
                bad = Some((i, excess));
            }
        }
    }
    let Some((worst_i, _)) = bad else {
        return Ok(());
    };
    let m = Mismatch {
        count,
        total: av.len(),
        max_abs,
        max_abs_at: unravel(max_abs_i, &shape),
        max_rel,
        max_rel_at: unravel(max_rel_i, &shape),
        worst: (av[worst_i], bv[worst_i]),
        worst_at: unravel(worst_i, &shape),
        shape,
    };
    Err(format!(
        "{} of {} elements of a {:?} tensor exceed atol {atol:e} + rtol {rtol:e}·|expected|\n  \
         max abs error {:.3e} at {:?}; max rel error {:.3e} at {:?}\n  \
         worst violation at {:?}: actual {:e}, expected {:e}",
        m.count,
        m.total,
        m.shape,
        m.max_abs,
        m.max_abs_at,
        m.max_rel,
        m.max_rel_at,
        m.worst_at,
        m.worst.0,
        m.worst.1
    ))
}

/// Panics with [`check_close`]'s description when `actual` and `expected` are not close.
#[track_caller]
pub fn assert_close(actual: &Tensor, expected: &Tensor, rtol: f64, atol: f64) {
    if let Err(msg) = check_close(actual, expected, rtol, atol) {
        panic!("assert_close failed: {msg}");
    }
}

/// [`assert_close`] within `tol` of each element and of the tensor's largest magnitude (a
/// gradient's near-zero entries carry the rounding of its large ones), or within 1e-14 (a tensor
/// that is zero but for rounding): for float64 comparisons of two computations of one quantity.
#[track_caller]
pub fn assert_near(actual: &Tensor, expected: &Tensor, tol: f64) {
    let scale = expected.abs().max().double_value(&[]);
    assert_close(actual, expected, tol, tol * scale + 1e-14);
}

/// A tensor's values as f64, in row-major order, whatever its device and kind.
pub fn to_f64_vec(t: &Tensor) -> Vec<f64> {
    let flat = t
        .detach()
        .to_device(Device::Cpu)
        .to_kind(Kind::Double)
        .contiguous()
        .view([-1]);
    Vec::<f64>::try_from(&flat).expect("a CPU f64 tensor converts to Vec<f64>")
}

fn unravel(mut i: usize, shape: &[i64]) -> Vec<i64> {
    let mut idx = vec![0i64; shape.len()];
    for (d, &n) in shape.iter().enumerate().rev() {
        let n = n.max(1) as usize;
        idx[d] = (i % n) as i64;
        i /= n;
    }
    idx
}

/// Checks autograd gradients of a scalar function against central finite differences, in f64.
///
/// `f` maps the inputs to a 0-dim tensor. Every element of every input is perturbed by ±`eps`
/// (keep the inputs small); the analytic gradient must match to `rtol` relative to the largest
/// gradient magnitude of that input (plus `1e-12` absolute). Inputs are converted to f64.
#[track_caller]
pub fn assert_gradients(f: impl Fn(&[Tensor]) -> Tensor, inputs: &[Tensor], eps: f64, rtol: f64) {
    init();
    let leaves: Vec<Tensor> = inputs
        .iter()
        .map(|t| t.detach().to_kind(Kind::Double).set_requires_grad(true))
        .collect();
    let out = f(&leaves);
    assert_eq!(out.numel(), 1, "assert_gradients needs a scalar function");
    let grads = Tensor::run_backward(&[out], &leaves, false, false);
    let _guard = tch::no_grad_guard();
    for (which, (leaf, grad)) in leaves.iter().zip(&grads).enumerate() {
        let base = leaf.detach().copy();
        let mut numeric = vec![0.0f64; base.numel()];
        let flat = base.view([-1]);
        for (i, slot) in numeric.iter_mut().enumerate() {
            let orig = flat.double_value(&[i as i64]);
            let eval = |x: f64| {
                let _ = flat.get(i as i64).fill_(x);
                let args: Vec<Tensor> = leaves
                    .iter()
                    .enumerate()
                    .map(|(j, l)| {
                        if j == which {
                            base.shallow_clone()
                        } else {
                            l.detach()
                        }
                    })
                    .collect();
                f(&args).double_value(&[])
            };
            *slot = (eval(orig + eps) - eval(orig - eps)) / (2.0 * eps);
            let _ = flat.get(i as i64).fill_(orig);
        }
        let numeric = Tensor::from_slice(&numeric).view(base.size().as_slice());
        let scale = numeric.abs().max().double_value(&[]).max(1e-12);
        if let Err(msg) = check_close(grad, &numeric, 0.0, rtol * scale + 1e-12) {
            panic!("gradient of input {which} disagrees with central differences (eps {eps:e}):\n{msg}");
        }
    }
}

/// Asserts that this process has `libtorch.so` mapped, i.e. that the crate's `build.rs`
/// (`ono_link::emit()`) gave the binary its RUNPATH and kept `-ltorch` despite `--as-needed`.
/// Without it `libtorch_cuda.so` is never loaded and CUDA reports as unavailable on GPU machines.
pub fn assert_libtorch_linked() {
    init();
    // Touch libtorch so that the check is about this binary, not a lazily loaded library.
    let _ = Tensor::zeros([1], (Kind::Float, Device::Cpu));
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps is readable");
    let loaded = |name: &str| maps.lines().any(|l| l.trim_end().ends_with(name));
    assert!(
        loaded("/libtorch_cpu.so"),
        "libtorch_cpu.so is not mapped into the test process"
    );
    assert!(
        loaded("/libtorch.so"),
        "libtorch.so is not mapped: the crate's build.rs must call ono_link::emit() \
         (it links with --no-as-needed -ltorch) and torch-sys must be a direct dependency"
    );
}

/// The repository's reference fixtures (`fixtures/` at the workspace root), or `ONO_FIXTURES`.
pub fn fixtures_dir() -> std::path::PathBuf {
    match std::env::var_os("ONO_FIXTURES") {
        Some(dir) => dir.into(),
        None => std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_tensors_pass_and_report_nothing() {
        init();
        let a = Tensor::from_slice(&[1.0f32, 2.0, 3.0]);
        let b = Tensor::from_slice(&[1.0f64, 2.0 + 1e-7, 3.0]);
        assert_eq!(check_close(&a, &b, 1e-6, 0.0), Ok(()));
    }

    #[test]
    fn mismatch_names_the_worst_element_and_its_index() {
        init();
        let a = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0, 4.5, 5.0]).view([2, 3]);
        let b = Tensor::from_slice(&[0.0f64, 1.0, 2.0, 3.0, 4.0, 5.0]).view([2, 3]);
        let msg = check_close(&a, &b, 1e-3, 1e-3).unwrap_err();
        assert!(msg.contains("1 of 6 elements"), "{msg}");
        assert!(msg.contains("max abs error 5.000e-1 at [1, 1]"), "{msg}");
        assert!(msg.contains("max rel error 1.250e-1 at [1, 1]"), "{msg}");
    }

    #[test]
    fn nan_is_never_close_and_shapes_must_agree() {
        init();
        let a = Tensor::from_slice(&[f64::NAN, 1.0]);
        let b = Tensor::from_slice(&[f64::NAN, 1.0]);
        assert!(check_close(&a, &b, 1.0, 1.0).is_err());
        let c = Tensor::from_slice(&[1.0f64, 1.0]).view([1, 2]);
        let d = Tensor::from_slice(&[1.0f64, 1.0]);
        assert!(check_close(&c, &d, 1.0, 1.0)
            .unwrap_err()
            .contains("shapes differ"));
    }

    #[test]
    fn seeding_makes_torch_and_rust_draws_repeatable() {
        use rand::Rng;
        let mut r1 = seeded(7);
        let t1 = Tensor::randn([4], (Kind::Float, Device::Cpu));
        let x1: f64 = r1.gen();
        let mut r2 = seeded(7);
        let t2 = Tensor::randn([4], (Kind::Float, Device::Cpu));
        let x2: f64 = r2.gen();
        assert_eq!(to_f64_vec(&t1), to_f64_vec(&t2));
        assert_eq!(x1, x2);
    }

    #[test]
    fn init_limits_torch_to_one_thread() {
        init();
        if std::env::var_os("ONO_TEST_THREADS").is_none() {
            assert_eq!(tch::get_num_threads(), 1);
        }
    }

    #[test]
    fn libtorch_is_linked() {
        assert_libtorch_linked();
    }

    #[test]
    fn gradient_check_accepts_true_and_rejects_false_gradients() {
        init();
        let x = Tensor::from_slice(&[0.3f64, -1.2, 2.0]);
        assert_gradients(
            |t| (&t[0] * &t[0]).sin().sum(Kind::Double),
            &[x.copy()],
            1e-6,
            1e-7,
        );
        // A function whose autograd gradient is deliberately wrong (detach hides a term).
        let wrong = std::panic::catch_unwind(|| {
            assert_gradients(
                |t| (&t[0] * t[0].detach()).sum(Kind::Double),
                &[x.copy()],
                1e-6,
                1e-7,
            )
        });
        assert!(wrong.is_err());
    }

    crate::device_tests! {
        fn macro_runs_body_on_device(dev) {
            let t = Tensor::ones([3], (Kind::Float, dev));
            assert_eq!(t.device(), dev);
            assert_close(&t.sum(Kind::Float), &Tensor::from(3.0f32), 0.0, 0.0);
        }
    }
}
