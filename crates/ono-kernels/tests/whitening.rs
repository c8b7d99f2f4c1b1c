//! Orthonormalization against independent truth: loop sums, the identity covariance it promises,
//! and central finite differences of the whole differentiable chain.

use ono_kernels::orthonormal::{psd_safe_cholesky, second_moment, whiten, whiten_explicit_inverse};
use ono_testing::{assert_close, assert_gradients, seeded, to_f64_vec};
use rand::Rng;
use tch::{Device, Kind, Tensor};

fn random(rng: &mut impl Rng, shape: &[i64]) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f64> = (0..n).map(|_| rng.gen_range(-1.0..1.0)).collect();
    Tensor::from_slice(&v).view(shape)
}

#[test]
fn second_moment_is_the_pooled_uncentred_loop_sum() {
    let mut rng = seeded(31);
    let (b, n, k) = (3usize, 11usize, 4usize);
    let psi = random(&mut rng, &[b as i64, n as i64, k as i64]);
    let p = to_f64_vec(&psi);
    let mut c = vec![0.0; k * k];
    for bi in 0..b {
        for ni in 0..n {
            for i in 0..k {
                for j in 0..k {
                    c[i * k + j] +=
                        p[(bi * n + ni) * k + i] * p[(bi * n + ni) * k + j] / (b * n) as f64;
                }
            }
        }
    }
    let want = Tensor::from_slice(&c).view([k as i64, k as i64]);
    assert_close(&second_moment(&psi, None).unwrap(), &want, 1e-12, 1e-14);

    // Masked: only real points, divided by their number (sample 1 keeps 6 of 11 points).
    let real = [11usize, 6, 9];
    let mask: Vec<f64> = (0..b)
        .flat_map(|bi| (0..n).map(move |ni| (ni < real[bi]) as i64 as f64))
        .collect();
    let mask = Tensor::from_slice(&mask).view([b as i64, n as i64]);
    let total: usize = real.iter().sum();
    let mut c = vec![0.0; k * k];
    for (bi, &r) in real.iter().enumerate() {
        for ni in 0..r {
            for i in 0..k {
                for j in 0..k {
                    c[i * k + j] +=
                        p[(bi * n + ni) * k + i] * p[(bi * n + ni) * k + j] / total as f64;
                }
            }
        }
    }
    let want = Tensor::from_slice(&c).view([k as i64, k as i64]);
    assert_close(
        &second_moment(&psi, Some(&mask)).unwrap(),
        &want,
        1e-12,
        1e-14,
    );
}

#[test]
fn whitened_features_have_identity_second_moment() {
    let mut rng = seeded(32);
    // Correlated features: ψ = z A with a random mixing A.
    let z = random(&mut rng, &[4, 64, 6]);
    let a = random(&mut rng, &[6, 6]) + Tensor::eye(6, (Kind::Double, Device::Cpu)) * 2.0;
    let psi = z.matmul(&a);
    let (l, jitter) = psd_safe_cholesky(&second_moment(&psi, None).unwrap()).unwrap();
    assert_eq!(jitter, 0.0);
    for w in [
        whiten(&psi, &l).unwrap(),
        whiten_explicit_inverse(&psi, &l).unwrap(),
    ] {
        let c = second_moment(&w, None).unwrap();
        assert_close(&c, &Tensor::eye(6, (Kind::Double, Device::Cpu)), 0.0, 1e-5);
        assert_close(&c, &Tensor::eye(6, (Kind::Double, Device::Cpu)), 0.0, 1e-12);
    }
}

#[test]
fn gradients_flow_through_moment_cholesky_and_solve() {
    let mut rng = seeded(33);
    let psi = random(&mut rng, &[2, 7, 3]);
    let r = random(&mut rng, &[2, 7, 3]);
    for explicit in [false, true] {
        assert_gradients(
            |t| {
                let (l, _) = psd_safe_cholesky(&second_moment(&t[0], None).unwrap()).unwrap();
                let w = if explicit {
                    whiten_explicit_inverse(&t[0], &l)
                } else {
                    whiten(&t[0], &l)
                };
                (w.unwrap() * &r).sum(Kind::Double)
            },
            &[psi.copy()],
            1e-6,
            1e-6,
        );
    }
}

#[test]
fn triangular_solve_and_explicit_inverse_agree_to_fp32_roundoff() {
    let mut rng = seeded(34);
    let psi = random(&mut rng, &[4, 256, 16]).to_kind(Kind::Float);
    let (l, _) = psd_safe_cholesky(&second_moment(&psi, None).unwrap()).unwrap();
    let a = whiten(&psi, &l).unwrap();
    let b = whiten_explicit_inverse(&psi, &l).unwrap();
    assert_close(&a, &b, 1e-4, 1e-5);
    // And both are far from wrong: against the f64 computation.
    let psi64 = psi.to_kind(Kind::Double);
    let (l64, _) = psd_safe_cholesky(&second_moment(&psi64, None).unwrap()).unwrap();
    assert_close(&a, &whiten(&psi64, &l64).unwrap(), 1e-4, 1e-5);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let z = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
    assert!(second_moment(&z, None).is_err());
    let psi = Tensor::zeros([2, 3, 4], (Kind::Float, Device::Cpu));
    assert!(second_moment(
        &psi,
        Some(&Tensor::ones([2, 4], (Kind::Float, Device::Cpu)))
    )
    .is_err());
    assert!(whiten(&psi, &Tensor::eye(3, (Kind::Float, Device::Cpu))).is_err());
    // A NaN feature reaches the Cholesky as a NonFinite error, not a panic.
    let nan = Tensor::ones([1, 4, 2], (Kind::Float, Device::Cpu));
    let _ = nan.get(0).get(1).get(0).fill_(f64::NAN);
    let c = second_moment(&nan, None).unwrap();
    assert!(matches!(
        psd_safe_cholesky(&c),
        Err(ono_kernels::Error::NonFinite { .. })
    ));
}
