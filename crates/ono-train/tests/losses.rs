//! Losses and metrics against independent loop implementations in f64.

use ono_train::loss::{
    central_diff_2d, channel_relative_l2, check_targets, darcy_derivative_loss, darcy_loss,
    galerkin_h1_loss_1d, galerkin_h1_loss_2d, relative_l2, DarcyH1Target, LossReduction, MetricSum,
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

/// The Galerkin Transformer's losses against the reference classes themselves
/// (`fixtures/train/galerkin_losses.safetensors`, made by `make_galerkin_losses.py` with
/// `WeightedL2Loss` and `WeightedL2Loss2d` of libs/ft.py), with and without the H¹ term.
#[test]
fn galerkin_losses_match_the_reference_classes() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/train/galerkin_losses.safetensors");
    let t: std::collections::HashMap<String, Tensor> = Tensor::read_safetensors(&path)
        .unwrap()
        .into_iter()
        .collect();
    let v = |k: &str| t[k].double_value(&[0]);
    let hg = |k: &str| (t[k].double_value(&[0]), t[k].double_value(&[1]));
    let close = |got: Tensor, want: f64, what: &str| {
        let got = got.double_value(&[]);
        assert!(
            (got - want).abs() < 1e-12 * want.abs(),
            "{what}: {got} vs {want}"
        );
    };
    let (h, gamma) = hg("h_gamma_1d");
    let (p, u, du) = (&t["pred_1d"], &t["u_1d"], &t["du_1d"]);
    close(
        galerkin_h1_loss_1d(p, u, Some(du), h, gamma).unwrap(),
        v("loss_1d"),
        "1-D loss",
    );
    close(
        galerkin_h1_loss_1d(p, u, None, h, gamma).unwrap(),
        v("metric_1d"),
        "1-D metric",
    );
    close(
        galerkin_h1_loss_1d(p, u, Some(du), h, 0.0).unwrap(),
        v("metric_1d"),
        "1-D γ = 0",
    );
    assert!(galerkin_h1_loss_1d(p, u, Some(&du.narrow(1, 0, 5)), h, gamma).is_err());

    let (h, gamma) = hg("h_gamma_2d");
    let (p, u) = (&t["pred_2d"], &t["u_2d"]);
    let target = || DarcyH1Target {
        grad_u: &t["grad_2d"],
        coeff: &t["coeff_2d"],
    };
    close(
        galerkin_h1_loss_2d(p, u, Some(target()), h, gamma).unwrap(),
        v("loss_2d"),
        "2-D loss",
    );
    close(
        galerkin_h1_loss_2d(p, u, None, h, gamma).unwrap(),
        v("metric_2d"),
        "2-D metric",
    );
    // The channels are not interchangeable: ∂ along the rows comes first.
    let swapped = t["grad_2d"].flip([3]);
    let wrong = galerkin_h1_loss_2d(
        p,
        u,
        Some(DarcyH1Target {
            grad_u: &swapped,
            coeff: &t["coeff_2d"],
        }),
        h,
        gamma,
    )
    .unwrap()
    .double_value(&[]);
    assert!((wrong - v("loss_2d")).abs() > 1e-6);
    let short = t["coeff_2d"].narrow(1, 0, 4);
    assert!(galerkin_h1_loss_2d(
        p,
        u,
        Some(DarcyH1Target {
            grad_u: &t["grad_2d"],
            coeff: &short
        }),
        h,
        gamma
    )
    .is_err());
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

/// GNOT's `WeightedLpRelLoss(p=2)` against loops: per sample and channel over the real points,
/// averaged over samples × channels; padding rows change nothing.
#[test]
fn gnot_channel_loss_matches_loops_and_ignores_padding() {
    let (b, n, c) = (3, 7, 2);
    let pred = Tensor::randn([b, n, c], F64);
    let y = Tensor::randn([b, n, c], F64);
    let lengths = [7i64, 4, 5];
    let flags: Vec<bool> = lengths
        .iter()
        .flat_map(|&l| (0..n).map(move |i| i < l))
        .collect();
    let mask = Tensor::from_slice(&flags).reshape([b, n]);
    let got = channel_relative_l2(&pred, &y, Some(&mask))
        .unwrap()
        .double_value(&[]);
    let mut want = 0.0;
    for s in 0..b {
        for ch in 0..c {
            let (mut num, mut den) = (0.0, 0.0);
            for i in 0..lengths[s as usize] {
                let (p, t) = (pred.double_value(&[s, i, ch]), y.double_value(&[s, i, ch]));
                num += (p - t) * (p - t);
                den += t * t;
            }
            want += (num / den).sqrt() / (b * c) as f64;
        }
    }
    assert!((got - want).abs() < 1e-12, "{got} vs {want}");
    // Garbage in the padding does not move it.
    let noisy = &pred + Tensor::randn([b, n, c], F64) * mask.logical_not().unsqueeze(2);
    let again = channel_relative_l2(&noisy, &y, Some(&mask))
        .unwrap()
        .double_value(&[]);
    assert!((again - got).abs() < 1e-12);
    assert!(channel_relative_l2(&pred, &y.narrow(2, 0, 1), None).is_err());
}
