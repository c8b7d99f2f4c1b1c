//! Every attention kernel against a naive f64 loop transcription of its definition. The oracles
//! sum over keys pair by pair — the quadratic expansion — so for the linear kernels the same check
//! proves that the O(N) factorisation equals its quadratic form.

mod common;

use common::{dot, row, row_softmax, A4};
use ono_kernels::attention::{
    fourier, galerkin, gnot_cross, gnot_linear, linear_transformer, softmax, NystromConfig,
};
use ono_testing::{assert_close, assert_gradients, seeded};
use rand::rngs::StdRng;
use tch::{Kind, Tensor};

const B: usize = 2;
const H: usize = 3;
const NQ: usize = 5;
const NK: usize = 7;
const D: usize = 4;

fn qkv(rng: &mut StdRng) -> (A4, A4, A4) {
    (
        A4::random(rng, [B, H, NQ, D], 1.5),
        A4::random(rng, [B, H, NK, D], 1.5),
        A4::random(rng, [B, H, NK, D], 1.5),
    )
}

/// out_i = Σ_j w(i, j) v_j, with w from `weights(b, h, i) -> Vec over j`.
fn weighted_sum(v: &A4, nq: usize, weights: impl Fn(usize, usize, usize) -> Vec<f64>) -> A4 {
    let [bs, hs, _, dv] = v.shape;
    let mut out = A4::zeros([bs, hs, nq, dv]);
    for b in 0..bs {
        for h in 0..hs {
            for i in 0..nq {
                let w = weights(b, h, i);
                for e in 0..dv {
                    let s: f64 = w
                        .iter()
                        .enumerate()
                        .map(|(j, wj)| wj * v.at(b, h, j, e))
                        .sum();
                    out.set(b, h, i, e, s);
                }
            }
        }
    }
    out
}

fn galerkin_oracle(q: &A4, k: &A4, v: &A4, divisor: f64) -> A4 {
    weighted_sum(v, q.shape[2], |b, h, i| {
        (0..k.shape[2])
            .map(|j| dot(&row(q, b, h, i), &row(k, b, h, j)) / divisor)
            .collect()
    })
}

fn fourier_oracle(q: &A4, k: &A4, v: &A4) -> A4 {
    let (nk, d) = (k.shape[2] as f64, q.shape[3] as f64);
    weighted_sum(v, q.shape[2], |b, h, i| {
        (0..k.shape[2])
            .map(|j| dot(&row(q, b, h, i), &row(k, b, h, j)) / d.sqrt() / nk)
            .collect()
    })
}

#[allow(clippy::needless_range_loop)] // index arithmetic mirrors the formula
fn linear_oracle(q: &A4, k: &A4, v: &A4) -> A4 {
    let (nk, d) = (k.shape[2], q.shape[3]);
    weighted_sum(v, q.shape[2], |b, h, i| {
        let qi: Vec<f64> = row_softmax(&row(q, b, h, i))
            .iter()
            .map(|x| x / (d as f64).sqrt())
            .collect();
        // k softmax over the sequence, feature by feature.
        let mut kh = vec![vec![0.0; d]; nk];
        for c in 0..d {
            let col: Vec<f64> = (0..nk).map(|j| k.at(b, h, j, c)).collect();
            for (j, x) in row_softmax(&col).into_iter().enumerate() {
                kh[j][c] = x;
            }
        }
        (0..nk).map(|j| dot(&qi, &kh[j])).collect()
    })
}

fn softmax_oracle(q: &A4, k: &A4, v: &A4) -> A4 {
    let d = q.shape[3] as f64;
    weighted_sum(v, q.shape[2], |b, h, i| {
        let s: Vec<f64> = (0..k.shape[2])
            .map(|j| dot(&row(q, b, h, i), &row(k, b, h, j)) / d.sqrt())
            .collect();
        row_softmax(&s)
    })
}

fn gnot_oracle(q: &A4, sets: &[(&A4, &A4)]) -> A4 {
    let [bs, hs, nq, d] = q.shape;
    let mut out = A4::zeros(q.shape);
    for b in 0..bs {
        for h in 0..hs {
            for i in 0..nq {
                let qi = row_softmax(&row(q, b, h, i));
                let mut z = qi.clone();
                for (k, v) in sets {
                    let a: Vec<f64> = (0..k.shape[2])
                        .map(|j| dot(&qi, &row_softmax(&row(k, b, h, j))))
                        .collect();
                    let norm: f64 = a.iter().sum();
                    for (e, ze) in z.iter_mut().enumerate() {
                        *ze += a
                            .iter()
                            .enumerate()
                            .map(|(j, aj)| aj * v.at(b, h, j, e))
                            .sum::<f64>()
                            / norm;
                    }
                }
                for (e, ze) in z.into_iter().enumerate().take(d) {
                    out.set(b, h, i, e, ze);
                }
            }
        }
    }
    out
}

const RTOL: f64 = 1e-10;
const ATOL: f64 = 1e-12;

#[test]
fn galerkin_equals_quadratic_oracle() {
    let (q, k, v) = qkv(&mut seeded(1));
    let out = galerkin(&q.tensor(), &k.tensor(), &v.tensor(), None).unwrap();
    // The reference divides by the query length.
    assert_close(
        &out,
        &galerkin_oracle(&q, &k, &v, NQ as f64).tensor(),
        RTOL,
        ATOL,
    );
}

#[test]
fn fourier_equals_quadratic_oracle() {
    let (q, k, v) = qkv(&mut seeded(2));
    let out = fourier(&q.tensor(), &k.tensor(), &v.tensor(), None).unwrap();
    assert_close(&out, &fourier_oracle(&q, &k, &v).tensor(), RTOL, ATOL);
}

#[test]
fn linear_transformer_equals_quadratic_oracle() {
    let (q, k, v) = qkv(&mut seeded(3));
    let out = linear_transformer(&q.tensor(), &k.tensor(), &v.tensor(), None).unwrap();
    assert_close(&out, &linear_oracle(&q, &k, &v).tensor(), RTOL, ATOL);
}

#[test]
fn softmax_equals_oracle() {
    let (q, k, v) = qkv(&mut seeded(4));
    let out = softmax(&q.tensor(), &k.tensor(), &v.tensor(), None).unwrap();
    assert_close(&out, &softmax_oracle(&q, &k, &v).tensor(), RTOL, ATOL);
}

#[test]
fn gnot_self_and_heterogeneous_cross_equal_oracle() {
    let mut rng = seeded(5);
    let (q, k, v) = qkv(&mut rng);
    let out = gnot_linear(&q.tensor(), &k.tensor(), &v.tensor(), None).unwrap();
    assert_close(&out, &gnot_oracle(&q, &[(&k, &v)]).tensor(), RTOL, ATOL);

    // Two input functions of different lengths, summed (not averaged) as the reference.
    let k2 = A4::random(&mut rng, [B, H, 3, D], 1.5);
    let v2 = A4::random(&mut rng, [B, H, 3, D], 1.5);
    let (kt, vt, k2t, v2t) = (k.tensor(), v.tensor(), k2.tensor(), v2.tensor());
    let out = gnot_cross(&q.tensor(), &[(&kt, &vt, None), (&k2t, &v2t, None)]).unwrap();
    assert_close(
        &out,
        &gnot_oracle(&q, &[(&k, &v), (&k2, &v2)]).tensor(),
        RTOL,
        ATOL,
    );
}

/// A set whose keys are all masked for a sample (an empty input function) adds nothing to that
/// sample: the output is q̃ plus the other sets' terms, finite, instead of 0/0.
#[test]
fn gnot_fully_masked_set_contributes_nothing() {
    let mut rng = seeded(12);
    let (q, k, v) = qkv(&mut rng);
    let k2 = A4::random(&mut rng, [B, H, 3, D], 1.5);
    let v2 = A4::random(&mut rng, [B, H, 3, D], 1.5);
    // Sample 1 has no real row in the second set; sample 0 has all three.
    let mask2 = Tensor::from_slice(&[1.0f64, 1.0, 1.0, 0.0, 0.0, 0.0]).view([B as i64, 3]);
    let (qt, kt, vt, k2t, v2t) = (q.tensor(), k.tensor(), v.tensor(), k2.tensor(), v2.tensor());
    let out = gnot_cross(&qt, &[(&kt, &vt, None), (&k2t, &v2t, Some(&mask2))]).unwrap();
    let both = gnot_oracle(&q, &[(&k, &v), (&k2, &v2)]).tensor();
    let first = gnot_oracle(&q, &[(&k, &v)]).tensor();
    assert_close(&out.narrow(0, 0, 1), &both.narrow(0, 0, 1), RTOL, ATOL);
    assert_close(&out.narrow(0, 1, 1), &first.narrow(0, 1, 1), RTOL, ATOL);
}

/// Padding keys and masking them must equal removing them: checked per sample.
#[test]
fn masked_keys_equal_removed_keys() {
    let mut rng = seeded(6);
    let (q, k, v) = qkv(&mut rng);
    let real = [NK, 4];
    let mask = Tensor::from_slice(
        &(0..B)
            .flat_map(|b| (0..NK).map(move |j| (j < real[b]) as i64 as f64))
            .collect::<Vec<_>>(),
    )
    .view([B as i64, NK as i64]);
    type Kernel = fn(&Tensor, &Tensor, &Tensor, Option<&Tensor>) -> ono_kernels::Result<Tensor>;
    let kernels: [(&str, Kernel); 4] = [
        ("fourier", fourier),
        ("linear_transformer", linear_transformer),
        ("softmax", softmax),
        ("gnot_linear", gnot_linear),
    ];
    for (name, kernel) in kernels {
        let masked = kernel(&q.tensor(), &k.tensor(), &v.tensor(), Some(&mask)).unwrap();
        for (b, &n) in real.iter().enumerate() {
            let one = |a: &A4| a.tensor().narrow(0, b as i64, 1);
            let kb = one(&k).narrow(2, 0, n as i64);
            let vb = one(&v).narrow(2, 0, n as i64);
            let plain = kernel(&one(&q), &kb, &vb, None).unwrap();
            let got = masked.narrow(0, b as i64, 1);
            if let Err(msg) = ono_testing::check_close(&got, &plain, RTOL, ATOL) {
                panic!("{name}, sample {b}: {msg}");
            }
        }
    }
    // Galerkin: masked keys drop out and n becomes the number of real keys.
    let masked = galerkin(&q.tensor(), &k.tensor(), &v.tensor(), Some(&mask)).unwrap();
    for (b, &n) in real.iter().enumerate() {
        let keep = |_: usize, j: usize| j < n;
        let (kb, vb) = (k.select_rows(keep, n), v.select_rows(keep, n));
        let want = galerkin_oracle(&q, &kb, &vb, n as f64)
            .tensor()
            .narrow(0, b as i64, 1);
        assert_close(&masked.narrow(0, b as i64, 1), &want, RTOL, ATOL);
    }
}

#[test]
fn kernels_have_correct_f64_gradients() {
    let mut rng = seeded(7);
    let q = A4::random(&mut rng, [1, 2, 3, 3], 1.0).tensor();
    let k = A4::random(&mut rng, [1, 2, 4, 3], 1.0).tensor();
    let v = A4::random(&mut rng, [1, 2, 4, 3], 1.0).tensor();
    let r = A4::random(&mut rng, [1, 2, 3, 3], 1.0).tensor();
    type Kernel = fn(&Tensor, &Tensor, &Tensor, Option<&Tensor>) -> ono_kernels::Result<Tensor>;
    let kernels: [Kernel; 5] = [galerkin, fourier, linear_transformer, softmax, gnot_linear];
    for kernel in kernels {
        assert_gradients(
            |t| (kernel(&t[0], &t[1], &t[2], None).unwrap() * &r).sum(Kind::Double),
            &[q.copy(), k.copy(), v.copy()],
            1e-6,
            1e-6,
        );
    }
    let cfg = NystromConfig {
        landmarks: 2,
        ..Default::default()
    };
    let k3 = k.narrow(2, 0, 3);
    let v3 = v.narrow(2, 0, 3);
    assert_gradients(
        |t| {
            (ono_kernels::attention::nystrom(&t[0], &t[1], &t[2], &cfg, None).unwrap() * &r)
                .sum(Kind::Double)
        },
        &[q.copy(), k3.copy(), v3.copy()],
        1e-6,
        1e-6,
    );
}

#[test]
fn bad_shapes_are_errors() {
    let z = |s: &[i64]| Tensor::zeros(s, (Kind::Float, tch::Device::Cpu));
    assert!(galerkin(&z(&[1, 2, 3]), &z(&[1, 2, 3, 4]), &z(&[1, 2, 3, 4]), None).is_err());
    assert!(fourier(
        &z(&[1, 2, 3, 4]),
        &z(&[1, 2, 3, 5]),
        &z(&[1, 2, 3, 4]),
        None
    )
    .is_err());
    assert!(softmax(
        &z(&[1, 2, 3, 4]),
        &z(&[1, 2, 3, 4]),
        &z(&[1, 2, 2, 4]),
        None
    )
    .is_err());
    let mask = z(&[2, 3]);
    assert!(linear_transformer(
        &z(&[1, 2, 3, 4]),
        &z(&[1, 2, 3, 4]),
        &z(&[1, 2, 3, 4]),
        Some(&mask)
    )
    .is_err());
    assert!(gnot_cross(&z(&[1, 2, 3, 4]), &[]).is_err());
}
