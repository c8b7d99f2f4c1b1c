//! Losses and metrics against independent loop implementations in f64.

use ono_train::loss::{
    central_diff_2d, check_targets, darcy_derivative_loss, darcy_loss, galerkin_h1_loss_1d,
    relative_l2, LossReduction, MetricSum,
};
use tch::{Device, Kind, Tensor};

const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

fn vec2(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.reshape([-1])).unwrap()
}

/// Zero-padded central differences by loops: (∂ along columns, ∂ along rows).
fn oracle_diff(u: &[f64], s: usize, h: f64) -> (Vec<f64>, Vec<f64>) {
    let at = |i: isize, j: isize| {
        if i < 0 || j < 0 || i >= s as isize || j >= s as isize {
            0.0
        } else {
            u[i as usize * s + j as usize]
        }
    };
    let mut dx = vec![0.0; s * s];
    let mut dy = vec![0.0; s * s];
    for i in 0..s as isize {
        for j in 0..s as isize {
            dx[i as usize * s + j as usize] = (at(i, j + 1) - at(i, j - 1)) / (2.0 * h);
            dy[i as usize * s + j as usize] = (at(i + 1, j) - at(i - 1, j)) / (2.0 * h);
        }
    }
    (dx, dy)
}

fn rel(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).powi(2))
        .sum::<f64>()
        .sqrt();
    let den: f64 = b.iter().map(|y| y * y).sum::<f64>().sqrt();
    num / den
}

#[test]
fn central_differences_match_loops_and_are_exact_on_linear_fields() {
    let s = 7;
    let u = Tensor::randn([2, s * s], F64);
    let (dx, dy) = central_diff_2d(&u, s, 0.25).unwrap();
    for b in 0..2 {
        let ub = vec2(&u.get(b));
        let (ox, oy) = oracle_diff(&ub, s as usize, 0.25);
        assert_eq!(
            vec2(&dx.get(b))
                .iter()
                .zip(&ox)
                .filter(|(a, o)| (*a - *o).abs() > 1e-12)
                .count(),
            0
        );
        assert_eq!(
            vec2(&dy.get(b))
                .iter()
                .zip(&oy)
                .filter(|(a, o)| (*a - *o).abs() > 1e-12)
                .count(),
            0
        );
    }
    // u = 2·col + 3·row with h = 1: interior derivatives are exactly 2 and 3.
    let lin: Vec<f64> = (0..s * s)
        .map(|k| 2.0 * (k % s) as f64 + 3.0 * (k / s) as f64)
        .collect();
    let (dx, dy) = central_diff_2d(&Tensor::from_slice(&lin).view([1, s * s]), s, 1.0).unwrap();
    assert_eq!(dx.double_value(&[0, 3, 3]), 2.0);
    assert_eq!(dy.double_value(&[0, 3, 3]), 3.0);
    assert!(central_diff_2d(&Tensor::zeros([2, 10], F64), 3, 1.0).is_err());
}

#[test]
fn darcy_derivative_loss_matches_the_reference_recipe() {
    let s = 9usize;
    let pred = Tensor::randn([3, (s * s) as i64, 1], F64);
    let truth = Tensor::randn([3, (s * s) as i64, 1], F64) + 2.0;
    let got = darcy_derivative_loss(&pred, &truth, s as i64)
        .unwrap()
        .double_value(&[]);
    let h = 1.0 / s as f64;
    let mut expected = 0.0;
    for b in 0..3 {
        let mut p = vec2(&pred.get(b));
        // The prediction's boundary ring is zeroed; the truth's is not.
        for i in 0..s {
            for j in 0..s {
                if i == 0 || j == 0 || i == s - 1 || j == s - 1 {
                    p[i * s + j] = 0.0;
                }
            }
        }
        let t = vec2(&truth.get(b));
        let (px, py) = oracle_diff(&p, s, h);
        let (tx, ty) = oracle_diff(&t, s, h);
        expected += rel(&px, &tx) + rel(&py, &ty);
    }
    assert!(
        (got - expected).abs() < 1e-12 * expected,
        "{got} vs {expected}"
    );
    let l2: f64 = (0..3)
        .map(|b| rel(&vec2(&pred.get(b)), &vec2(&truth.get(b))))
        .sum();
    let full = darcy_loss(&pred, &truth, s as i64, 0.1)
        .unwrap()
        .double_value(&[]);
    assert!((full - (l2 + 0.1 * expected)).abs() < 1e-12 * full);
    // A truth with a zero boundary ring and a perfect prediction give zero.
    let inner = Tensor::randn([2, 1, s as i64 - 2, s as i64 - 2], F64)
        .constant_pad_nd([1, 1, 1, 1])
        .reshape([2, (s * s) as i64, 1]);
    let zero = darcy_derivative_loss(&inner, &inner, s as i64)
        .unwrap()
        .double_value(&[]);
    assert!(zero.abs() < 1e-14, "{zero}");
    assert!(darcy_derivative_loss(&pred, &truth.narrow(1, 0, 10), s as i64).is_err());
}

#[test]
fn zero_or_non_finite_targets_are_refused_by_name() {
    let y = Tensor::randn([4, 6, 1], F64);
    assert!(check_targets(&y, "y").is_ok());
    let _ = y.get(2).zero_();
    let e = check_targets(&y, "test targets").unwrap_err().to_string();
    assert!(
        e.contains("sample 2") && e.contains("all zeros") && e.contains("test targets"),
        "{e}"
    );
    let y = Tensor::randn([4, 6, 1], F64);
    let _ = y.get(1).get(3).fill_(f64::NAN);
    let e = check_targets(&y, "y").unwrap_err().to_string();
    assert!(e.contains("sample 1") && e.contains("NaN"), "{e}");
    let e = ono_train::loss::relative_l2_checked(&y, &y, LossReduction::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("NaN"), "{e}");
}

#[test]
fn galerkin_1d_h1_loss_matches_loops() {
    let (b, n, h, gamma) = (2, 11, 0.1, 0.1);
    let pred = Tensor::randn([b, n], F64);
    let u = Tensor::randn([b, n], F64);
    let du = Tensor::randn([b, n], F64);
    let got = galerkin_h1_loss_1d(&pred, &u, &du, h, gamma)
        .unwrap()
        .double_value(&[]);
    let mut expected = 0.0;
    for i in 0..b {
        let (p, t, d) = (vec2(&pred.get(i)), vec2(&u.get(i)), vec2(&du.get(i)));
        let l2 = (p.iter().zip(&t).map(|(a, c)| (a - c).powi(2)).sum::<f64>()
            / t.iter().map(|c| c * c).sum::<f64>())
        .sqrt();
        let mut num = 0.0;
        let mut den = 0.0;
        for k in 1..n as usize - 1 {
            let dp = (p[k + 1] - p[k - 1]) / (2.0 * h);
            num += (d[k] - dp).powi(2);
            den += d[k] * d[k];
        }
        expected += (l2 + (gamma * h * num / den).sqrt()) / b as f64;
    }
    assert!((got - expected).abs() < 1e-12, "{got} vs {expected}");
}

#[test]
fn metric_sum_is_the_mean_over_samples_and_steps() {
    let pred = Tensor::randn([5, 8, 2, 3], F64);
    let truth = Tensor::randn([5, 8, 2, 3], F64);
    let mut m = MetricSum::new();
    m.add_rollout(&pred.narrow(0, 0, 2), &truth.narrow(0, 0, 2))
        .unwrap();
    m.add_rollout(&pred.narrow(0, 2, 3), &truth.narrow(0, 2, 3))
        .unwrap();
    let r = m.finish().unwrap();
    let per = relative_l2(&pred, &truth, LossReduction::None, None).unwrap();
    assert!((r.full - per.mean(Kind::Double).double_value(&[])).abs() < 1e-12);
    assert_eq!(r.per_step.len(), 3);
    for t in 0..3 {
        let e = relative_l2(
            &pred.select(3, t),
            &truth.select(3, t),
            LossReduction::Mean,
            None,
        )
        .unwrap();
        assert!((r.per_step[t as usize] - e.double_value(&[])).abs() < 1e-12);
    }
    assert!(MetricSum::new().finish().is_err());
}
