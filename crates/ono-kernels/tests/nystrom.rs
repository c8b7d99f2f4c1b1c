//! Nyström attention against an f64 ndarray transcription of lucidrains nystrom-attention 0.0.11
//! (`NystromAttention.forward` without projections, `moore_penrose_iter_pinv`), for sequence
//! lengths that are not multiples of the landmark count.

mod common;

use common::A4;
use ndarray::{s, Array2};
use ono_kernels::attention::{moore_penrose_pinv, nystrom, nystrom_front_pad, NystromConfig};
use ono_testing::{assert_close, seeded};
use tch::Tensor;

extern crate openblas_src;

fn slab(a: &A4, b: usize, h: usize) -> Array2<f64> {
    let [_, _, n, d] = a.shape;
    Array2::from_shape_fn((n, d), |(i, j)| a.at(b, h, i, j))
}

fn softmax_rows(x: &Array2<f64>) -> Array2<f64> {
    let mut y = x.clone();
    for mut r in y.rows_mut() {
        let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        r.mapv_inplace(|v| (v - m).exp());
        let s = r.sum();
        r.mapv_inplace(|v| v / s);
    }
    y
}

/// The reference forward, head by head. `tok`: per sample, which of the padded tokens are real
/// (`None` = the unmasked path).
fn oracle(q: &A4, k: &A4, v: &A4, m: usize, iters: usize, tok: Option<&[Vec<bool>]>) -> A4 {
    let [bs, hs, n, d] = q.shape;
    let pad = (m - n % m) % m;
    let np = n + pad;
    let l = n.div_ceil(m);
    let groups = np / l;
    let fill = f64::MIN;
    let padded = |a: &A4, b: usize, h: usize| {
        let mut x = Array2::<f64>::zeros((np, d));
        x.slice_mut(s![pad.., ..]).assign(&slab(a, b, h));
        if let Some(tok) = tok {
            for (j, &real) in tok[b].iter().enumerate() {
                if !real {
                    x.row_mut(j).fill(0.0);
                }
            }
        }
        x
    };
    let mut parts = Vec::new(); // (attn1, attn2, attn3, v) per (b, h)
    for b in 0..bs {
        for h in 0..hs {
            let qp = padded(q, b, h) / (d as f64).sqrt();
            let kp = padded(k, b, h);
            let vp = padded(v, b, h);
            let mut qlm = Array2::<f64>::zeros((groups, d));
            let mut klm = Array2::<f64>::zeros((groups, d));
            let mut lm_real = vec![true; groups];
            for g in 0..groups {
                let rows = s![g * l..(g + 1) * l, ..];
                let divisor = match tok {
                    None => l as f64,
                    Some(tok) => {
                        let c = tok[b][g * l..(g + 1) * l].iter().filter(|&&t| t).count();
                        lm_real[g] = c > 0;
                        c as f64 + 1e-8
                    }
                };
                qlm.row_mut(g)
                    .assign(&(qp.slice(rows).sum_axis(ndarray::Axis(0)) / divisor));
                klm.row_mut(g)
                    .assign(&(kp.slice(rows).sum_axis(ndarray::Axis(0)) / divisor));
            }
            let mut sim1 = qp.dot(&klm.t());
            let mut sim2 = qlm.dot(&klm.t());
            let mut sim3 = qlm.dot(&kp.t());
            if let Some(tok) = tok {
                let t = &tok[b];
                sim1.indexed_iter_mut().for_each(|((i, j), x)| {
                    if !(t[i] && lm_real[j]) {
                        *x = fill
                    }
                });
                sim2.indexed_iter_mut().for_each(|((i, j), x)| {
                    if !(lm_real[i] && lm_real[j]) {
                        *x = fill
                    }
                });
                sim3.indexed_iter_mut().for_each(|((i, j), x)| {
                    if !(lm_real[i] && t[j]) {
                        *x = fill
                    }
                });
            }
            parts.push((
                softmax_rows(&sim1),
                softmax_rows(&sim2),
                softmax_rows(&sim3),
                vp,
            ));
        }
    }
    // Global maxima over every (b, h) of row and column absolute sums.
    let (mut max_row, mut max_col) = (0.0f64, 0.0f64);
    for (_, a2, _, _) in &parts {
        for r in a2.rows() {
            max_row = max_row.max(r.iter().map(|x| x.abs()).sum());
        }
        for c in a2.columns() {
            max_col = max_col.max(c.iter().map(|x| x.abs()).sum());
        }
    }
    let mut out = A4::zeros([bs, hs, n, d]);
    for (idx, (a1, a2, a3, vp)) in parts.iter().enumerate() {
        let (b, h) = (idx / hs, idx % hs);
        let eye = Array2::<f64>::eye(groups);
        let mut z = a2.t().to_owned() / (max_row * max_col);
        for _ in 0..iters {
            let xz = a2.dot(&z);
            let inner = &eye * 7.0 - &xz;
            let inner = &eye * 15.0 - xz.dot(&inner);
            let inner = &eye * 13.0 - xz.dot(&inner);
            z = z.dot(&inner) * 0.25;
        }
        let o = a1.dot(&z).dot(&a3.dot(vp));
        for i in 0..n {
            for e in 0..d {
                out.set(b, h, i, e, o[[pad + i, e]]);
            }
        }
    }
    out
}

#[test]
fn default_256_landmarks_with_front_padding_match_reference() {
    let mut rng = seeded(21);
    // N = 300: padded to 512 with 212 zero rows in front, two tokens per landmark.
    let shape = [2, 2, 300, 4];
    let (q, k, v) = (
        A4::random(&mut rng, shape, 1.0),
        A4::random(&mut rng, shape, 1.0),
        A4::random(&mut rng, shape, 1.0),
    );
    let cfg = NystromConfig::default();
    assert_eq!((cfg.landmarks, cfg.pinv_iterations), (256, 6));
    let out = nystrom(&q.tensor(), &k.tensor(), &v.tensor(), &cfg, None).unwrap();
    assert_close(
        &out,
        &oracle(&q, &k, &v, 256, 6, None).tensor(),
        1e-9,
        1e-11,
    );
}

#[test]
fn small_landmark_counts_and_the_masked_path_match_reference() {
    let mut rng = seeded(22);
    let shape = [2, 3, 21, 4];
    let (q, k, v) = (
        A4::random(&mut rng, shape, 1.0),
        A4::random(&mut rng, shape, 1.0),
        A4::random(&mut rng, shape, 1.0),
    );
    let (m, n) = (8usize, 21usize);
    let pad = (m - n % m) % m;
    let cfg = NystromConfig {
        landmarks: m as i64,
        ..Default::default()
    };
    let out = nystrom(&q.tensor(), &k.tensor(), &v.tensor(), &cfg, None).unwrap();
    assert_close(&out, &oracle(&q, &k, &v, m, 6, None).tensor(), 1e-9, 1e-11);

    // A user mask: sample 1 has only 13 real points; the front padding is masked too.
    let real = [21usize, 13];
    let mask = Tensor::from_slice(
        &(0..2)
            .flat_map(|b| (0..n).map(move |j| (j < real[b]) as i64 as f64))
            .collect::<Vec<_>>(),
    )
    .view([2, n as i64]);
    let tok: Vec<Vec<bool>> = (0..2)
        .map(|b| {
            (0..n + pad)
                .map(|j| j >= pad && j - pad < real[b])
                .collect()
        })
        .collect();
    let out = nystrom(&q.tensor(), &k.tensor(), &v.tensor(), &cfg, Some(&mask)).unwrap();
    let want = oracle(&q, &k, &v, m, 6, Some(&tok)).tensor();
    // Only real query rows are meaningful (padded rows see a uniform softmax of −max logits).
    assert_close(&out.narrow(0, 0, 1), &want.narrow(0, 0, 1), 1e-9, 1e-11);
    assert_close(
        &out.narrow(0, 1, 1).narrow(2, 0, 13),
        &want.narrow(0, 1, 1).narrow(2, 0, 13),
        1e-9,
        1e-11,
    );

    // mask_padding without a user mask equals an all-ones user mask.
    let ones = Tensor::ones([2, n as i64], (tch::Kind::Double, tch::Device::Cpu));
    let a = nystrom(
        &q.tensor(),
        &k.tensor(),
        &v.tensor(),
        &NystromConfig {
            mask_padding: true,
            ..cfg
        },
        None,
    )
    .unwrap();
    let b = nystrom(&q.tensor(), &k.tensor(), &v.tensor(), &cfg, Some(&ones)).unwrap();
    assert_close(&a, &b, 0.0, 0.0);
}

#[test]
fn newton_schulz_pinv_converges_to_the_lapack_inverse() {
    use ndarray_linalg::Inverse;
    let mut rng = seeded(23);
    let x = A4::random(&mut rng, [1, 1, 6, 6], 1.0);
    let a = softmax_rows(&slab(&x, 0, 0));
    let inv = a.inv().unwrap();
    let t = Tensor::from_slice(a.as_slice().unwrap()).view([6, 6]);
    let z = moore_penrose_pinv(&t, 30).unwrap();
    let want = Tensor::from_slice(inv.as_standard_layout().as_slice().unwrap()).view([6, 6]);
    assert_close(&z, &want, 1e-8, 1e-8);
}

#[test]
fn front_padding_puts_zeros_first() {
    let t = Tensor::ones([1, 1, 5, 2], (tch::Kind::Float, tch::Device::Cpu));
    let p = nystrom_front_pad(&t, 4).unwrap();
    assert_eq!(p.size(), [1, 1, 8, 2]);
    assert_eq!(
        p.narrow(2, 0, 3)
            .abs()
            .sum(tch::Kind::Float)
            .double_value(&[]),
        0.0
    );
    assert_eq!(
        p.narrow(2, 3, 5).sum(tch::Kind::Float).double_value(&[]),
        10.0
    );
}
