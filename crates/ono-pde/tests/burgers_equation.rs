//! The Burgers generator (`ono_pde::burgers_equation`): the solver against the exact Cole–Hopf solution,
//! its order in time, conservation of the mean, determinism by seed, the MAT layout and the
//! refusal of bad configurations.

use std::f64::consts::PI;
use std::path::PathBuf;

use ono_data::readers::mat_v5;
use ono_pde::burgers_equation::{sample_rng, write_mat, BurgersConfig, BurgersGrf};
use ono_pde::Error;

/// A positive periodic `φ0 = c0 + Σ (a_k cos 2πkx + b_k sin 2πkx)`; `u = −2ν ∂x log φ` solves
/// Burgers where `φ` solves the heat equation `φ_t = ν φ_xx`, i.e. each mode decays like
/// `e^{−ν(2πk)²t}`.
struct ColeHopf {
    c0: f64,
    modes: Vec<(usize, f64, f64)>,
    nu: f64,
}

impl ColeHopf {
    fn u(&self, n: usize, t: f64) -> Vec<f64> {
        (0..n)
            .map(|j| {
                let x = j as f64 / n as f64;
                let (mut phi, mut phi_x) = (self.c0, 0.0);
                for &(k, a, b) in &self.modes {
                    let kk = 2.0 * PI * k as f64;
                    let decay = (-self.nu * kk * kk * t).exp();
                    let (s, c) = (kk * x).sin_cos();
                    phi += decay * (a * c + b * s);
                    phi_x += decay * kk * (b * c - a * s);
                }
                assert!(phi > 0.0, "φ must stay positive");
                -2.0 * self.nu * phi_x / phi
            })
            .collect()
    }
}

fn rel_l2(a: &[f64], b: &[f64]) -> f64 {
    let num: f64 = a.iter().zip(b).map(|(x, y)| (x - y).powi(2)).sum();
    let den: f64 = b.iter().map(|y| y * y).sum();
    (num / den).sqrt()
}

fn cfg(resolution: usize, nu: f64, t_final: f64, dt: f64) -> BurgersConfig {
    BurgersConfig {
        resolution,
        nu,
        t_final,
        dt,
        ..BurgersConfig::default()
    }
}

/// Solves from the exact `u(·, 0)` and returns the relative L2 error at `t_final`.
fn cole_hopf_error(exact: &ColeHopf, c: &BurgersConfig) -> f64 {
    let n = c.resolution;
    let u1 = c.solve(&exact.u(n, 0.0)).expect("solve");
    rel_l2(&u1, &exact.u(n, c.t_final))
}

#[test]
fn matches_cole_hopf_single_mode() {
    // The case: ν = 0.1, t = 1, the generator's default step.
    let exact = ColeHopf {
        c0: 2.0,
        modes: vec![(1, 0.0, 1.0)],
        nu: 0.1,
    };
    let c = cfg(256, 0.1, 1.0, BurgersConfig::default().dt);
    let err = cole_hopf_error(&exact, &c);
    println!(
        "Cole–Hopf, φ0 = 2 + sin 2πx, ν = 0.1, s = 256, dt = 1e-4, t = 1: rel L2 error {err:.3e}"
    );
    assert!(err < 1e-6, "rel L2 error {err:.3e} ≥ 1e-6");
}

#[test]
fn matches_cole_hopf_large_amplitude() {
    // Amplitudes above those of the GRF initial conditions (max |u0| ≈ 2–4.5); φ0 comes close to
    // zero, so u0 has sharp gradients that need s = 512 to be resolved to round-off.
    let cases = [
        ColeHopf {
            c0: 1.1,
            modes: vec![(1, 0.0, 1.0)],
            nu: 0.1,
        },
        ColeHopf {
            c0: 1.6,
            modes: vec![
                (1, 0.0, 1.0),
                (2, 0.6, -0.3),
                (3, 0.0, 0.3),
                (5, 0.05, 0.05),
            ],
            nu: 0.1,
        },
    ];
    for exact in &cases {
        let max_u0 = exact
            .u(512, 0.0)
            .iter()
            .fold(0.0_f64, |m, v| m.max(v.abs()));
        // dt = 5e-4 keeps the debug-build test short; 1e-4 gives ~1e-12.
        let c = cfg(512, 0.1, 1.0, 5e-4);
        let err = cole_hopf_error(exact, &c);
        println!(
            "Cole–Hopf, c0 = {}, {} mode(s) (max |u0| = {max_u0:.2}), ν = 0.1, s = 512, dt = 5e-4, t = 1: rel L2 error {err:.3e}",
            exact.c0,
            exact.modes.len()
        );
        assert!(err < 1e-6, "rel L2 error {err:.3e} ≥ 1e-6");
    }
}

#[test]
fn matches_cole_hopf_steep_front() {
    // A smaller viscosity and φ0 nearly touching zero give a steep front (max |u0| ≈ 2.5 over a
    // width of a few hundredths): the nonlinear term dominates early on.
    let exact = ColeHopf {
        c0: 1.005,
        modes: vec![(1, 0.0, 1.0)],
        nu: 0.02,
    };
    let u0 = exact.u(1024, 0.0);
    let max_u0 = u0.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
    let c = cfg(1024, 0.02, 1.0, 1e-3);
    let err = cole_hopf_error(&exact, &c);
    println!(
        "Cole–Hopf, φ0 = 1.005 + sin 2πx (max |u0| = {max_u0:.2}), ν = 0.02, s = 1024, dt = 1e-3, t = 1: rel L2 error {err:.3e}"
    );
    assert!(err < 1e-6, "rel L2 error {err:.3e} ≥ 1e-6");
}

#[test]
fn etdrk4_is_fourth_order_in_time() {
    let exact = ColeHopf {
        c0: 1.5,
        modes: vec![(1, 0.0, 1.0), (2, 0.2, 0.0)],
        nu: 0.1,
    };
    let t = 0.5;
    let steps = [8usize, 16, 32, 64, 128, 256];
    let errs: Vec<f64> = steps
        .iter()
        .map(|&n| cole_hopf_error(&exact, &cfg(128, 0.1, t, t / n as f64)))
        .collect();
    let orders: Vec<f64> = errs.windows(2).map(|w| (w[0] / w[1]).log2()).collect();
    let shown: Vec<String> = steps
        .iter()
        .zip(&errs)
        .map(|(n, e)| format!("dt = {:.5}: {e:.3e}", t / *n as f64))
        .collect();
    println!("ETDRK4 errors {shown:?}; observed orders {orders:.3?}");
    for (w, p) in errs.windows(2).zip(&orders) {
        // Only pairs well above the round-off floor measure the order.
        if w[1] > 1e-12 {
            assert!(
                (3.6..4.6).contains(p),
                "observed order {p:.3} is not 4 ({errs:?})"
            );
        }
    }
    assert!(
        orders.iter().filter(|p| (3.6..4.6).contains(*p)).count() >= 2,
        "{orders:?}"
    );
}

#[test]
fn mean_is_conserved() {
    for dealias in [false, true] {
        let c = BurgersConfig {
            dealias,
            grf: BurgersGrf {
                mean: 0.7,
                ..BurgersGrf::default()
            },
            ..cfg(512, 0.1, 1.0, 1e-3)
        };
        let u0 = c.grf.sample(512, &mut sample_rng(3, 0)).unwrap();
        let u1 = c.solve(&u0).unwrap();
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
        let scale = u0.iter().fold(0.0_f64, |m, v| m.max(v.abs()));
        let drift = (mean(&u1) - mean(&u0)).abs();
        println!(
            "dealias {dealias}: mean {:.17} → {:.17}, drift {drift:.2e} (max |u0| {scale:.2})",
            mean(&u0),
            mean(&u1)
        );
        assert!((mean(&u0) - 0.7).abs() < 1e-14);
        assert!(drift <= 1e-14 * scale, "mean drifted by {drift:.2e}");
        // The solution did move: this is not a trivially conserved identity.
        assert!(rel_l2(&u1, &u0) > 0.1);
    }
}

#[test]
fn uneven_step_lands_on_t_final() {
    // dt = 0.03 does not divide 0.1: four steps of 0.025 are taken instead.
    let c = cfg(64, 0.1, 0.1, 0.03);
    assert_eq!(c.steps().unwrap(), (4, 0.025));
    let u0 = BurgersGrf::default()
        .sample(64, &mut sample_rng(1, 0))
        .unwrap();
    let exact_step = BurgersConfig { dt: 0.025, ..c };
    assert_eq!(c.solve(&u0).unwrap(), exact_step.solve(&u0).unwrap());
    // 1/1e-4 is not exactly 10000 in floating point; it must not become 10001 steps.
    assert_eq!(BurgersConfig::default().steps().unwrap(), (10_000, 1e-4));
    assert_eq!(cfg(64, 0.1, 1.0, 0.3).steps().unwrap().0, 4);
    assert_eq!(cfg(64, 0.1, 1.0, 2.0).steps().unwrap(), (1, 1.0));
}

/// The sampler's FFT evaluation is the series of `GRF1.m` with the normals in its order (all
/// cosine normals, then all sine normals), including an odd grid and the even grid's Nyquist mode.
#[test]
fn grf_sample_is_the_grf1_series() {
    use rand::Rng;
    use rand_distr::StandardNormal;
    let grf = BurgersGrf {
        mean: -0.3,
        ..BurgersGrf::default()
    };
    for n in [64usize, 65] {
        let u = grf.sample(n, &mut sample_rng(5, 2)).unwrap();
        let mut rng = sample_rng(5, 2);
        let modes = n / 2;
        let xi: Vec<f64> = (0..modes).map(|_| rng.sample(StandardNormal)).collect();
        let eta: Vec<f64> = (0..modes).map(|_| rng.sample(StandardNormal)).collect();
        for (j, &uj) in u.iter().enumerate() {
            let x = j as f64 / n as f64;
            let mut v = grf.mean;
            for k in 1..=modes {
                let sd = 2f64.sqrt() * 25.0 * ((2.0 * PI * k as f64).powi(2) + 25.0).powf(-1.0);
                let (s, c) = (2.0 * PI * k as f64 * x).sin_cos();
                v += sd * (xi[k - 1] * c + eta[k - 1] * s);
            }
            assert!((uj - v).abs() < 1e-13, "n = {n}, x_{j}: {uj} vs {v}");
        }
    }
}

fn small() -> BurgersConfig {
    cfg(64, 0.1, 0.05, 1e-3)
}

#[test]
fn generation_is_deterministic_by_seed() {
    let c = small();
    let (a, u) = c.generate(5, 7).unwrap();
    assert_eq!(a.dim(), (5, 64));
    assert_eq!(u.dim(), (5, 64));
    let (a2, u2) = c.generate_with_threads(5, 7, 1).unwrap();
    let (a3, u3) = c.generate_with_threads(5, 7, 3).unwrap();
    assert_eq!((&a, &u), (&a2, &u2));
    assert_eq!((&a, &u), (&a3, &u3));
    for i in [0usize, 3] {
        let (ai, ui) = c.sample(7, i as u64).unwrap();
        assert_eq!(a.row(i).to_vec(), ai);
        assert_eq!(u.row(i).to_vec(), ui);
    }
    let (a8, _) = c.generate(5, 8).unwrap();
    assert_ne!(a, a8);
    assert_ne!(a.row(0), a.row(1));
    // Subsampling keeps every k-th point of the same data.
    let (a_sub, u_sub) = BurgersConfig { subsample: 4, ..c }.generate(5, 7).unwrap();
    assert_eq!(a_sub.dim(), (5, 16));
    assert_eq!(a_sub, a.slice(ndarray::s![.., ..;4]));
    assert_eq!(u_sub, u.slice(ndarray::s![.., ..;4]));
    // n = 0 is an empty set, not an error.
    assert_eq!(c.generate(0, 7).unwrap().0.dim(), (0, 64));
}

#[test]
fn write_mat_roundtrip() {
    let c = small();
    let (a, u) = c.generate(3, 1).unwrap();
    let dir = std::env::temp_dir().join(format!("ono-burgers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path: PathBuf = dir.join("burgers_data_R10.mat");
    write_mat(&path, &a, &u).unwrap();
    let info = mat_v5::list(&path).unwrap();
    let names: Vec<_> = info.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["a", "u"]);
    for v in &info {
        assert_eq!(v.class, "double");
        assert_eq!(v.shape, [3, 64]);
        assert!(v.compressed);
    }
    let back = mat_v5::read(&path, Some(&["a", "u"])).unwrap();
    assert_eq!(back[0].shape, [3, 64]);
    assert_eq!(back[0].data.to_f64(), a.iter().copied().collect::<Vec<_>>());
    assert_eq!(back[1].data.to_f64(), u.iter().copied().collect::<Vec<_>>());
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name() != "burgers_data_R10.mat")
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    scipy_reads(&path, &a, &u);
    assert!(matches!(
        write_mat(&path, &a, &u.slice(ndarray::s![..2, ..]).to_owned()),
        Err(Error::Shape { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// Cross-check with `scipy.io.loadmat` where the developer venv of make_mat_fixtures.py exists
/// (/tmp/scipyenv); CI does not need it.
fn scipy_reads(path: &std::path::Path, a: &ndarray::Array2<f64>, u: &ndarray::Array2<f64>) {
    let python = std::path::Path::new("/tmp/scipyenv/bin/python");
    if !python.exists() {
        eprintln!("scipy cross-check skipped: no /tmp/scipyenv");
        return;
    }
    let script = "import sys, scipy.io\n\
                  d = scipy.io.loadmat(sys.argv[1])\n\
                  for k in ('a', 'u'):\n    \
                  print(k, d[k].dtype, *d[k].shape, repr(float(d[k][1, 7])), repr(float(d[k].sum())))";
    let out = std::process::Command::new(python)
        .args(["-c", script])
        .arg(path)
        .output()
        .expect("run python");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for (line, (name, x)) in text.lines().zip([("a", a), ("u", u)]) {
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(&f[..4], [name, "float64", "3", "64"], "{line}");
        assert_eq!(f[4].parse::<f64>().unwrap(), x[[1, 7]], "{line}");
        let sum: f64 = f[5].parse().unwrap();
        assert!((sum - x.sum()).abs() <= 1e-12 * x.iter().map(|v| v.abs()).sum::<f64>());
    }
    println!(
        "scipy.io.loadmat reads a and u: {}",
        text.trim().replace('\n', "; ")
    );
}

#[test]
fn bad_configs_are_refused() {
    let d = BurgersConfig::default();
    let grf = |f: fn(&mut BurgersGrf)| {
        let mut g = BurgersGrf::default();
        f(&mut g);
        BurgersConfig { grf: g, ..d }
    };
    let cases: Vec<(BurgersConfig, &str)> = vec![
        (BurgersConfig { resolution: 3, ..d }, "resolution"),
        (BurgersConfig { subsample: 0, ..d }, "subsample"),
        (BurgersConfig { subsample: 3, ..d }, "subsample"),
        (BurgersConfig { nu: 0.0, ..d }, "nu"),
        (BurgersConfig { nu: f64::NAN, ..d }, "nu"),
        (BurgersConfig { t_final: -1.0, ..d }, "t_final"),
        (BurgersConfig { dt: 0.0, ..d }, "dt"),
        (
            BurgersConfig {
                dt: f64::INFINITY,
                ..d
            },
            "dt",
        ),
        (BurgersConfig { dt: 1e-12, ..d }, "dt"),
        (
            BurgersConfig {
                contour_points: 2,
                ..d
            },
            "contour_points",
        ),
        (grf(|g| g.gamma = 0.0), "grf.gamma"),
        (grf(|g| g.sigma = f64::NAN), "grf.sigma"),
        (grf(|g| g.tau = -1.0), "grf.tau"),
        (grf(|g| g.mean = f64::INFINITY), "grf.mean"),
    ];
    for (c, want) in cases {
        for r in [
            c.validate(),
            c.generate(1, 0).map(|_| ()),
            c.sample(0, 0).map(|_| ()),
        ] {
            match r {
                Err(Error::Config { what, msg }) => {
                    assert_eq!(what, want, "{msg}");
                }
                other => panic!("{want}: expected Error::Config, got {other:?}"),
            }
        }
    }
    assert!(d.validate().is_ok());
    // Bad inputs to the solver.
    let c = small();
    assert!(matches!(c.solve(&[0.0; 3]), Err(Error::Config { .. })));
    let mut u0 = vec![0.0; 64];
    u0[5] = f64::NAN;
    assert!(matches!(c.solve(&u0), Err(Error::Invalid(_))));
    let solver = c.solver(64).unwrap();
    assert!(matches!(solver.solve(&[0.0; 32]), Err(Error::Shape { .. })));
    assert!(matches!(
        BurgersGrf::default().sample(1, &mut sample_rng(0, 0)),
        Err(Error::Config { .. })
    ));
}

#[test]
fn blow_up_is_a_solver_error() {
    // An explicit-looking step far too long for the advective CFL of a huge initial condition.
    let c = cfg(256, 0.1, 50.0, 0.5);
    let u0: Vec<f64> = (0..256)
        .map(|j| 1e6 * (2.0 * PI * j as f64 / 256.0).sin())
        .collect();
    match c.solve(&u0) {
        Err(Error::Solver { .. }) => {}
        other => panic!("expected Error::Solver, got {:?}", other.map(|v| v[0])),
    }
}
