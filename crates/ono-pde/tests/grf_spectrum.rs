//! The empirical spectra of the two Gaussian random fields against their analytic covariances.
//!
//! Each field is a sum of independent Gaussian modes, so the projection of a sample on a mode is
//! `N(0, λ)` with the covariance eigenvalue `λ`, and the average power of `n` samples is
//! `λ · χ²_ν/ν` with `ν = n` degrees of freedom per real coefficient. Every estimate is normalised
//! with the Wilson–Hilferty transform, `z = ((P/λ)^{1/3} − (1 − 2/9ν)) / √(2/9ν)`, which is standard
//! normal to a good approximation even in the tails, and `|z| ≤ 5` is required for every mode, every
//! shell and the pooled average. Under the correct law the chance that any of the ~1,500 statistics
//! exceeds 5 is below 1e-3 (Bonferroni: 1,500 · 5.7e-7), and the draws are seeded, so the test is
//! deterministic; an amplitude off by a factor √2 (the NS data set's trap) gives `z` in the tens.

use std::f64::consts::PI;

use ndarray::Array2;
use ono_pde::burgers_equation::{sample_rng, BurgersGrf};
use ono_pde::grf::DarcyGrf;

const SAMPLES: usize = 1000;
const Z_MAX: f64 = 5.0;

/// Wilson–Hilferty normal score of `ratio = χ²_ν/ν`.
fn wh_z(ratio: f64, dof: f64) -> f64 {
    let v = 2.0 / (9.0 * dof);
    (ratio.cbrt() - (1.0 - v)) / v.sqrt()
}

/// Largest `|z|` and where it occurs.
fn worst(zs: &[(String, f64)]) -> (String, f64) {
    zs.iter()
        .max_by(|a, b| a.1.abs().total_cmp(&b.1.abs()))
        .cloned()
        .unwrap_or_default()
}

#[test]
fn burgers_grf_spectrum_matches_covariance() {
    let s = 256;
    let (sigma, tau, gamma) = (25.0_f64, 5.0_f64, 2.0_f64);
    // The covariance 625(−Δ + 25 I)^{−2}: eigenvalue of √2 cos 2πkx and √2 sin 2πkx, i.e. the
    // variance of the coefficients α_k, β_k of cos 2πkx and sin 2πkx is twice it.
    let lambda = |k: usize| {
        let kk = 2.0 * PI * k as f64;
        2.0 * sigma * sigma * (kk * kk + tau * tau).powf(-gamma)
    };
    let grf = BurgersGrf::default();
    let sampler = grf.sampler(s).unwrap();
    // A direct DFT (not the sampler's FFT) with the angle reduced mod s.
    let half = s / 2;
    let cos = Array2::from_shape_fn((half + 1, s), |(k, j)| {
        (2.0 * PI * ((k * j) % s) as f64 / s as f64).cos()
    });
    let sin = Array2::from_shape_fn((half + 1, s), |(k, j)| {
        (2.0 * PI * ((k * j) % s) as f64 / s as f64).sin()
    });
    let mut pow_cos = vec![0.0; half + 1];
    let mut pow_sin = vec![0.0; half + 1];
    let mut max_mean = 0.0_f64;
    for i in 0..SAMPLES {
        let u = sampler.sample(&mut sample_rng(11, i as u64)).unwrap();
        let u = ndarray::Array1::from(u);
        let (c, sn) = (cos.dot(&u), sin.dot(&u));
        max_mean = max_mean.max((c[0] / s as f64).abs());
        for k in 1..=half {
            // cos 2πkx has DFT weight s/2 except at the Nyquist mode, where it is s.
            let w = if k == half {
                1.0 / s as f64
            } else {
                2.0 / s as f64
            };
            pow_cos[k] += (w * c[k]).powi(2);
            pow_sin[k] += (w * sn[k]).powi(2);
        }
    }
    assert!(
        max_mean < 1e-13,
        "the mean mode must be exactly 0, got {max_mean:e}"
    );
    let n = SAMPLES as f64;
    let mut zs = Vec::new();
    let (mut pooled, mut pooled_dof) = (0.0, 0.0);
    for k in 1..=half {
        let l = lambda(k);
        let (rc, rs) = (pow_cos[k] / n / l, pow_sin[k] / n / l);
        zs.push((format!("cos k={k}"), wh_z(rc, n)));
        if k < half {
            zs.push((format!("sin k={k}"), wh_z(rs, n)));
            zs.push((format!("cos+sin k={k}"), wh_z((rc + rs) / 2.0, 2.0 * n)));
            pooled += (rc + rs) * n;
            pooled_dof += 2.0 * n;
        } else {
            // The sine of the Nyquist mode vanishes on the grid.
            assert!(
                pow_sin[k] / n < 1e-12 * l,
                "Nyquist sine power {}",
                pow_sin[k] / n
            );
            pooled += rc * n;
            pooled_dof += n;
        }
    }
    let z_pooled = wh_z(pooled / pooled_dof, pooled_dof);
    let (at, z) = worst(&zs);
    let rel = |k: usize| ((pow_cos[k] + pow_sin[k]) / (2.0 * n * lambda(k)) - 1.0).abs();
    let worst_rel = (1..half).map(rel).fold(0.0_f64, f64::max);
    println!(
        "Burgers GRF, s = {s}, {SAMPLES} samples, {} statistics: worst normalised deviation z = {z:.2} ({at}), \
         pooled over all modes z = {z_pooled:.2}, worst relative power error {worst_rel:.3} \
         (one standard error per mode: {:.3})",
        zs.len(),
        (1.0 / n).sqrt()
    );
    assert!(z.abs() <= Z_MAX, "{at}: z = {z:.2}");
    assert!(z_pooled.abs() <= Z_MAX, "pooled z = {z_pooled:.2}");
}

#[test]
fn darcy_grf_spectrum_matches_covariance() {
    let s = 32;
    let (alpha, tau) = (2.0_f64, 3.0_f64);
    // The DCT coefficients of a sample are s · τ^{α−1} (π²|k|² + τ²)^{−α/2} ξ_k: variance
    // s² τ^{2α−2} (π²|k|² + τ²)^{−α} for every mode but the mean, which is zero.
    let lambda = |k1: usize, k2: usize| {
        let k2sum = (k1 * k1 + k2 * k2) as f64;
        (s * s) as f64 * tau.powf(2.0 * alpha - 2.0) * (PI * PI * k2sum + tau * tau).powf(-alpha)
    };
    // The orthonormal DCT-II matrix, written out here rather than taken from the crate.
    let c = Array2::from_shape_fn((s, s), |(k, j)| {
        let w = if k == 0 {
            (1.0 / s as f64).sqrt()
        } else {
            (2.0 / s as f64).sqrt()
        };
        w * (PI * ((2 * j + 1) * k) as f64 / (2 * s) as f64).cos()
    });
    let sampler = DarcyGrf::default().sampler(s).unwrap();
    let mut power = Array2::<f64>::zeros((s, s));
    let mut max_mean = 0.0_f64;
    for i in 0..SAMPLES {
        let u = sampler.sample(&mut sample_rng(12, i as u64));
        let l = c.dot(&u).dot(&c.t());
        max_mean = max_mean.max(l[[0, 0]].abs());
        power += &l.mapv(|v| v * v);
    }
    assert!(
        max_mean < 1e-10,
        "the mean mode must be zero, got {max_mean:e}"
    );
    let n = SAMPLES as f64;
    let mut zs = Vec::new();
    let mut shells: Vec<(f64, f64)> = vec![(0.0, 0.0); 2 * s];
    let mut worst_rel = 0.0_f64;
    for k1 in 0..s {
        for k2 in 0..s {
            if (k1, k2) == (0, 0) {
                continue;
            }
            let r = power[[k1, k2]] / n / lambda(k1, k2);
            worst_rel = worst_rel.max((r - 1.0).abs());
            zs.push((format!("mode ({k1},{k2})"), wh_z(r, n)));
            let shell = ((k1 * k1 + k2 * k2) as f64).sqrt().round() as usize;
            shells[shell].0 += r * n;
            shells[shell].1 += n;
        }
    }
    let mode_count = zs.len();
    let (at_mode, z_mode) = worst(&zs);
    let shell_zs: Vec<(String, f64)> = shells
        .iter()
        .enumerate()
        .filter(|(_, (_, dof))| *dof > 0.0)
        .map(|(r, (sum, dof))| (format!("shell |k|≈{r}"), wh_z(sum / dof, *dof)))
        .collect();
    let (at_shell, z_shell) = worst(&shell_zs);
    let (sum, dof) = shells
        .iter()
        .fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    let z_pooled = wh_z(sum / dof, dof);
    println!(
        "Darcy GRF, s = {s}, {SAMPLES} samples: worst per-mode z = {z_mode:.2} ({at_mode}, of {mode_count} modes), \
         worst per-shell z = {z_shell:.2} ({at_shell}, of {} shells), pooled z = {z_pooled:.2}, \
         worst relative power error {worst_rel:.3} (one standard error per mode: {:.3})",
        shell_zs.len(),
        (2.0 / n).sqrt()
    );
    assert!(z_mode.abs() <= Z_MAX, "{at_mode}: z = {z_mode:.2}");
    assert!(z_shell.abs() <= Z_MAX, "{at_shell}: z = {z_shell:.2}");
    assert!(z_pooled.abs() <= Z_MAX, "pooled z = {z_pooled:.2}");
}

/// The statistic is sharp enough to see the √2 amplitude trap of the NS data set: a field scaled by
/// 1/√2 is rejected in every single mode, and by a huge margin in the pooled statistic.
#[test]
fn spectrum_test_detects_a_sqrt2_amplitude_error() {
    let ratio = 0.5; // power of a field scaled by 1/√2
    let z = wh_z(ratio, SAMPLES as f64);
    assert!(z.abs() > 2.0 * Z_MAX, "z = {z}");
    let z_pooled = wh_z(ratio, 255.0 * SAMPLES as f64);
    assert!(z_pooled.abs() > 40.0 * Z_MAX, "z = {z_pooled}");
    // And a 10 % power error in a single mode is already beyond 3 standard errors.
    assert!(wh_z(1.1, 2.0 * SAMPLES as f64).abs() > 3.0);
}
