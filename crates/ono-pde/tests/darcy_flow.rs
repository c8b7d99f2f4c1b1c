//! Darcy generator: GRF, splines, the finite-difference operator and its solver, determinism, errors.

use std::f64::consts::PI;

use ndarray::{Array2, Axis};
use ono_pde::darcy_flow::{
    apply_operator, cell_centres, cells_to_nodes, node_points, nodes_to_cells,
    not_a_knot_interpolate, sample_rng, solve_nodes, DarcyConfig, Preconditioner,
};
use ono_pde::grf::{dct_matrix, idct2, DarcyGrf};
use ono_pde::Error;
use rand::Rng;

fn small(k: usize) -> DarcyConfig {
    DarcyConfig {
        resolution: k,
        ..DarcyConfig::default()
    }
}

fn max_abs_diff(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

// ------------------------------------------------------------------------------------------------
// 1. Manufactured solution on the node grid: second-order convergence.
// ------------------------------------------------------------------------------------------------

/// a = 1 + ½ sin(2πx) cos(πy), u = sin(πx) sin(2πy): neither is symmetric in x ↔ y, so a swapped
/// axis anywhere in the operator destroys the convergence.
fn manufactured(x: f64, y: f64) -> (f64, f64, f64) {
    let a = 1.0 + 0.5 * (2.0 * PI * x).sin() * (PI * y).cos();
    let ax = PI * (2.0 * PI * x).cos() * (PI * y).cos();
    let ay = -0.5 * PI * (2.0 * PI * x).sin() * (PI * y).sin();
    let u = (PI * x).sin() * (2.0 * PI * y).sin();
    let ux = PI * (PI * x).cos() * (2.0 * PI * y).sin();
    let uy = 2.0 * PI * (PI * x).sin() * (2.0 * PI * y).cos();
    let lap = -5.0 * PI * PI * u;
    let f = -(ax * ux + ay * uy + a * lap);
    (a, u, f)
}

#[test]
fn manufactured_solution_converges_at_second_order() {
    let mut errors = Vec::new();
    let ks = [17usize, 33, 65, 129];
    for &k in &ks {
        let x = node_points(k);
        let mut a = Array2::zeros((k, k));
        let mut u = Array2::zeros((k, k));
        let mut f = Array2::zeros((k, k));
        for i in 0..k {
            for j in 0..k {
                let (av, uv, fv) = manufactured(x[i], x[j]);
                a[[i, j]] = av;
                u[[i, j]] = uv;
                f[[i, j]] = fv;
            }
        }
        let (uh, stats) = solve_nodes(&a, &f, 1e-12, 200, Preconditioner::Multigrid).unwrap();
        assert!(stats.rel_residual <= 1e-12);
        let err = max_abs_diff(&uh, &u);
        println!(
            "K = {k:4}: max error {err:.3e} ({} MG-PCG iterations, residual {:.1e})",
            stats.iterations, stats.rel_residual
        );
        errors.push(err);
    }
    for w in 0..errors.len() - 1 {
        // h halves from one resolution to the next.
        let rate = (errors[w] / errors[w + 1]).log2();
        println!("rate {} -> {}: {rate:.3}", ks[w], ks[w + 1]);
        assert!((rate - 2.0).abs() <= 0.2, "convergence rate {rate}");
    }
}

/// −Δu = 1 with u = 0 on the unit square: the torsion function
/// u = Σ_{m,n odd} 16 / (π⁴ m n (m² + n²)) sin(mπx) sin(nπy).
fn torsion(x: f64, y: f64) -> f64 {
    let mut s = 0.0;
    for m in (1..400).step_by(2) {
        let sx = (m as f64 * PI * x).sin() / m as f64;
        for n in (1..400).step_by(2) {
            let (mf, nf) = (m as f64, n as f64);
            s += sx * (nf * PI * y).sin() / (nf * (mf * mf + nf * nf));
        }
    }
    16.0 / PI.powi(4) * s
}

/// The whole cell-centre pipeline (spline to nodes, solve, spline back) on a ≡ 2 against the exact
/// torsion function at the cell centres: O(h²), which also pins the cell/node coordinate conventions.
#[test]
fn full_pipeline_converges_for_constant_coefficient() {
    let ks = [9usize, 17, 33];
    let mut errors = Vec::new();
    for &k in &ks {
        let coeff = Array2::from_elem((k, k), 2.0);
        let sol = small(k).solve(&coeff).unwrap();
        let c = cell_centres(k);
        let mut err: f64 = 0.0;
        for i in 0..k {
            for j in 0..k {
                err = err.max((sol[[i, j]] - torsion(c[i], c[j]) / 2.0).abs());
            }
        }
        println!("K = {k:3}: max cell-centre error {err:.3e}");
        errors.push(err);
    }
    for w in 0..errors.len() - 1 {
        // h = 1/(K−1) halves between these resolutions.
        let rate = (errors[w] / errors[w + 1]).log2();
        println!("rate {} -> {}: {rate:.3}", ks[w], ks[w + 1]);
        assert!(
            (rate - 2.0).abs() <= 0.3,
            "pipeline convergence rate {rate}"
        );
    }
}

// ------------------------------------------------------------------------------------------------
// 2. Residuals and the operator itself.
// ------------------------------------------------------------------------------------------------

#[test]
fn generated_sample_satisfies_the_discrete_equation() {
    let cfg = small(33);
    let (coeff, sol) = cfg.generate(2, 11).unwrap();
    for s in 0..2 {
        let c = coeff.index_axis(Axis(0), s).to_owned();
        let det = cfg.solve_detailed(&c).unwrap();
        assert_eq!(det.sol, sol.index_axis(Axis(0), s));
        let k = cfg.resolution;
        let au = apply_operator(&det.a_nodes, &det.u_nodes).unwrap();
        let mut res2 = 0.0;
        for i in 1..k - 1 {
            for j in 1..k - 1 {
                res2 += (au[[i, j]] - 1.0).powi(2);
            }
        }
        let rel = res2.sqrt() / (k - 2) as f64;
        println!(
            "sample {s}: {} iterations, solver residual {:.2e}, recomputed {rel:.2e}",
            det.stats.iterations, det.stats.rel_residual
        );
        assert!(rel <= cfg.tol, "residual {rel}");
        // The boundary nodes carry the Dirichlet zeros.
        for i in 0..k {
            for v in [
                det.u_nodes[[0, i]],
                det.u_nodes[[k - 1, i]],
                det.u_nodes[[i, 0]],
                det.u_nodes[[i, k - 1]],
            ] {
                assert_eq!(v, 0.0);
            }
        }
        // The flow is driven by f = 1 > 0 with a positive coefficient: u > 0 inside.
        assert!(det.u_nodes.iter().all(|v| *v >= 0.0));
    }
}

/// `apply_operator` against a literal transcription of `solve_gwf.m`'s sparse assembly (column-major
/// unknowns, 1-based MATLAB indices), and `solve_nodes` against a dense direct solve of that matrix.
#[test]
fn operator_matches_the_matlab_assembly_and_a_direct_solve() {
    let k = 8;
    let m = k - 2;
    let mut rng = sample_rng(3, 0);
    let a = Array2::from_shape_fn((k, k), |_| rng.gen_range(1.0..5.0));
    let coef = |i: usize, j: usize| a[[i - 1, j - 1]]; // MATLAB coef(i, j)
    let idx = |i: usize, j: usize| (i - 2) + (j - 2) * m; // unknown of node (i, j), 2 ≤ i, j ≤ K−1
    let mut mat = vec![vec![0.0; m * m]; m * m];
    for j in 2..k {
        for i in 2..k {
            let r = idx(i, j);
            mat[r][r] = (coef(i - 1, j) + coef(i, j)) / 2.0
                + (coef(i + 1, j) + coef(i, j)) / 2.0
                + (coef(i, j - 1) + coef(i, j)) / 2.0
                + (coef(i, j + 1) + coef(i, j)) / 2.0;
            if i > 2 {
                mat[r][idx(i - 1, j)] = -(coef(i - 1, j) + coef(i, j)) / 2.0;
            }
            if i < k - 1 {
                mat[r][idx(i + 1, j)] = -(coef(i, j) + coef(i + 1, j)) / 2.0;
            }
            if j > 2 {
                mat[r][idx(i, j - 1)] = -(coef(i, j - 1) + coef(i, j)) / 2.0;
            }
            if j < k - 1 {
                mat[r][idx(i, j + 1)] = -(coef(i, j) + coef(i, j + 1)) / 2.0;
            }
        }
    }
    let h2 = ((k - 1) * (k - 1)) as f64;
    let mut u = Array2::zeros((k, k));
    for i in 1..k - 1 {
        for j in 1..k - 1 {
            u[[i, j]] = rng.gen_range(-1.0..1.0);
        }
    }
    let au = apply_operator(&a, &u).unwrap();
    for i in 2..k {
        for j in 2..k {
            let r = idx(i, j);
            let mut v = 0.0;
            for i2 in 2..k {
                for j2 in 2..k {
                    v += mat[r][idx(i2, j2)] * u[[i2 - 1, j2 - 1]];
                }
            }
            assert!((v * h2 - au[[i - 1, j - 1]]).abs() < 1e-10 * h2);
        }
    }
    // Dense Gaussian elimination of A p = f with f = 1.
    let mut aug: Vec<Vec<f64>> = mat
        .iter()
        .map(|row| {
            let mut r: Vec<f64> = row.iter().map(|v| v * h2).collect();
            r.push(1.0);
            r
        })
        .collect();
    let nn = m * m;
    for c in 0..nn {
        let piv = (c..nn)
            .max_by(|&x, &y| aug[x][c].abs().total_cmp(&aug[y][c].abs()))
            .unwrap();
        aug.swap(c, piv);
        for r in c + 1..nn {
            let (top, bottom) = aug.split_at_mut(r);
            let (pivot_row, row) = (&top[c], &mut bottom[0]);
            let f = row[c] / pivot_row[c];
            for (x, p) in row[c..].iter_mut().zip(&pivot_row[c..]) {
                *x -= f * p;
            }
        }
    }
    let mut p = vec![0.0; nn];
    for r in (0..nn).rev() {
        let s: f64 = (r + 1..nn).map(|c| aug[r][c] * p[c]).sum();
        p[r] = (aug[r][nn] - s) / aug[r][r];
    }
    let f = Array2::from_elem((k, k), 1.0);
    for pre in [Preconditioner::Multigrid, Preconditioner::Jacobi] {
        let (uh, _) = solve_nodes(&a, &f, 1e-13, 500, pre).unwrap();
        for i in 2..k {
            for j in 2..k {
                let want = p[idx(i, j)];
                assert!((uh[[i - 1, j - 1]] - want).abs() <= 1e-11 * want.abs().max(1e-3));
            }
        }
    }
}

/// Multigrid and Jacobi preconditioning reach the same solution; multigrid in far fewer iterations,
/// and its count must not grow with the resolution (the point of the Galerkin hierarchy).
#[test]
fn multigrid_iterations_stay_flat() {
    let mut counts = Vec::new();
    for k in [33usize, 65, 129] {
        let cfg = small(k);
        let mut rng = sample_rng(5, k as u64);
        let coeff = cfg
            .grf
            .sample_coefficient(k, cfg.hi, cfg.lo, &mut rng)
            .unwrap();
        let mg = cfg.solve_detailed(&coeff).unwrap();
        let jac_cfg = DarcyConfig {
            preconditioner: Preconditioner::Jacobi,
            ..cfg
        };
        let jac = jac_cfg.solve_detailed(&coeff).unwrap();
        let diff = max_abs_diff(&mg.sol, &jac.sol);
        let scale = mg.sol.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        println!(
            "K = {k}: multigrid {} iterations, Jacobi {} iterations, max |Δsol| / max|sol| = {:.1e}",
            mg.stats.iterations,
            jac.stats.iterations,
            diff / scale
        );
        assert!(diff <= 1e-8 * scale);
        assert!(mg.stats.iterations * 5 < jac.stats.iterations);
        counts.push(mg.stats.iterations);
    }
    assert!(counts.iter().all(|&c| c <= 15), "{counts:?}");
}

// ------------------------------------------------------------------------------------------------
// 3. Coefficient fields.
// ------------------------------------------------------------------------------------------------

#[test]
fn coefficients_take_exactly_the_two_levels() {
    let cfg = small(33);
    let (coeff, sol) = cfg.generate(3, 2).unwrap();
    let (mut hi, mut lo) = (0usize, 0usize);
    for &v in coeff.iter() {
        if v == 12.0 {
            hi += 1;
        } else if v == 3.0 {
            lo += 1;
        } else {
            panic!("coefficient value {v}");
        }
    }
    println!("12: {hi} cells, 3: {lo} cells");
    assert!(hi > 0 && lo > 0, "both phases appear");
    assert!(sol.iter().all(|v| v.is_finite()));

    // The threshold follows the sign of the raw field drawn from the same stream.
    let sampler = cfg.grf.sampler(33).unwrap();
    let u = sampler.sample(&mut sample_rng(2, 0));
    let c0 = coeff.index_axis(Axis(0), 0);
    for (uv, cv) in u.iter().zip(c0.iter()) {
        assert_eq!(*cv, if *uv >= 0.0 { 12.0 } else { 3.0 });
    }

    // Other levels are honoured.
    let alt = DarcyConfig {
        lo: 4.0,
        ..small(17)
    };
    let (c, _) = alt.generate(1, 2).unwrap();
    assert!(c.iter().all(|v| *v == 4.0 || *v == 12.0));
}

/// The field's grid-averaged variance is Σ_k spectrum(k)² / s² (C is orthonormal): checks the
/// amplitude and that every mode is actually used.
#[test]
fn grf_variance_matches_the_spectrum() {
    let s = 16;
    let grf = DarcyGrf::default();
    let spec = grf.spectrum(s).unwrap();
    assert_eq!(spec[[0, 0]], 0.0);
    // τ^{α−1} (π²·1 + τ²)^{−α/2} · s for k = (1, 0).
    assert!((spec[[1, 0]] - 16.0 * 3.0 / (PI * PI + 9.0)).abs() < 1e-12);
    let want = spec.iter().map(|c| c * c).sum::<f64>() / (s * s) as f64;
    let sampler = grf.sampler(s).unwrap();
    let mut rng = sample_rng(99, 0);
    let n = 2000;
    let (mut sum, mut sum2) = (0.0, 0.0);
    for _ in 0..n {
        let u = sampler.sample(&mut rng);
        sum += u.sum();
        sum2 += u.iter().map(|v| v * v).sum::<f64>();
    }
    let npts = (n * s * s) as f64;
    let (mean, var) = (sum / npts, sum2 / npts);
    println!("GRF s = {s}: mean {mean:.2e}, variance {var:.4} (theory {want:.4})");
    // Zero mode removed: every sample has exactly zero spatial mean.
    assert!(mean.abs() < 1e-12);
    assert!((var / want - 1.0).abs() < 0.1, "variance {var} vs {want}");
}

// ------------------------------------------------------------------------------------------------
// 4. Not-a-knot splines.
// ------------------------------------------------------------------------------------------------

#[test]
fn spline_reproduces_cubics_and_matches_scipy() {
    let cubic = |x: f64| 2.0 - x + 3.0 * x * x - 4.0 * x * x * x;
    let x = [0.0, 0.13, 0.3, 0.41, 0.6, 0.77, 0.9, 1.0];
    let t = [-0.2, 0.0, 0.05, 0.35, 0.5, 0.95, 1.0, 1.25];
    for n in [4usize, 5, 8] {
        let xs = &x[..n];
        let y: Vec<f64> = xs.iter().map(|&v| cubic(v)).collect();
        let got = not_a_knot_interpolate(xs, &y, &t).unwrap();
        for (g, &tv) in got.iter().zip(&t) {
            assert!(
                (g - cubic(tv)).abs() < 1e-12,
                "n = {n}, t = {tv}: {g} vs {}",
                cubic(tv)
            );
        }
    }
    // Three points: the parabola (MATLAB's special case); two: the line.
    let quad = |x: f64| 1.0 + 2.0 * x - 5.0 * x * x;
    let y3: Vec<f64> = x[..3].iter().map(|&v| quad(v)).collect();
    for (g, &tv) in not_a_knot_interpolate(&x[..3], &y3, &t)
        .unwrap()
        .iter()
        .zip(&t)
    {
        assert!((g - quad(tv)).abs() < 1e-12);
    }
    let y2 = [1.0, 3.0];
    let g = not_a_knot_interpolate(&[0.0, 1.0], &y2, &[-1.0, 0.5, 2.0]).unwrap();
    assert_eq!(g, vec![-1.0, 2.0, 5.0]);

    // A cubic does not tell not-a-knot from clamped-with-exact-slopes; a non-polynomial does.
    // Reference: scipy.interpolate.CubicSpline(x, exp(sin(3x)), bc_type="not-a-knot")(t).
    let y: Vec<f64> = x.iter().map(|&v| (3.0 * v).sin().exp()).collect();
    let t = [-0.2, 0.05, 0.35, 0.5, 0.95, 1.25];
    let want = [
        0.842455148684312,
        1.156360570052654,
        2.380883524784116,
        2.7067601925122307,
        1.3313079449277565,
        0.9182281250469883,
    ];
    let got = not_a_knot_interpolate(&x, &y, &t).unwrap();
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() < 1e-12, "{g} vs scipy {w}");
    }
}

#[test]
fn tensor_spline_between_cells_and_nodes() {
    // Bicubic polynomials pass through both directions exactly (including the extrapolated nodes).
    let k = 9;
    let p = |x: f64, y: f64| (1.0 + x - 2.0 * x * x * x) * (0.5 - y * y + 3.0 * y * y * y);
    let (c, n) = (cell_centres(k), node_points(k));
    let on = |pts: &[f64]| Array2::from_shape_fn((k, k), |(i, j)| p(pts[i], pts[j]));
    assert!(max_abs_diff(&cells_to_nodes(&on(&c)).unwrap(), &on(&n)) < 1e-12);
    assert!(max_abs_diff(&nodes_to_cells(&on(&n)).unwrap(), &on(&c)) < 1e-12);

    // A 12/3 pattern against scipy (CubicSpline not-a-knot along axis 0, then axis 1).
    let a = Array2::from_shape_vec(
        (6, 6),
        vec![
            3., 12., 12., 3., 3., 3., 3., 3., 12., 12., 3., 12., 12., 3., 3., 12., 12., 12., 12.,
            12., 3., 3., 3., 12., 3., 12., 12., 3., 12., 3., 3., 3., 12., 3., 3., 3.,
        ],
    )
    .unwrap();
    let want = [
        [
            -6.42578125,
            20.08759375,
            3.589968750000004,
            -1.0343437500000043,
            23.06928125,
            -80.99609375000009,
        ],
        [
            8.140093749999993,
            2.27501483,
            13.471231589999999,
            8.868529890000003,
            -0.46868207000000084,
            34.20693125000004,
        ],
        [
            18.57496875,
            4.167571589999998,
            3.0161030700000007,
            13.035488969999996,
            11.186467890000003,
            17.655356249999993,
        ],
        [
            -0.9509062499999938,
            14.40119499,
            4.321551269999995,
            2.514577170000002,
            4.21125129,
            22.090481250000032,
        ],
        [
            2.8689687499999943,
            6.6417226299999985,
            14.493480989999998,
            3.9336792899999993,
            15.45908573,
            -35.279693750000035,
        ],
        [
            38.089843750000036,
            -1.6818812500000109,
            1.2657937499999936,
            -4.6905187499999945,
            -26.314193750000026,
            94.51953125000016,
        ],
    ];
    let got = cells_to_nodes(&a).unwrap();
    for i in 0..6 {
        for j in 0..6 {
            assert!((got[[i, j]] - want[i][j]).abs() < 1e-11, "({i},{j})");
        }
    }
}

// ------------------------------------------------------------------------------------------------
// 5. The orthonormal inverse DCT.
// ------------------------------------------------------------------------------------------------

#[test]
fn dct_is_orthogonal_and_matches_the_direct_sum() {
    for s in [1usize, 2, 7, 64, 421] {
        let c = dct_matrix(s).unwrap();
        let eye = Array2::<f64>::eye(s);
        let err = max_abs_diff(&c.dot(&c.t()), &eye).max(max_abs_diff(&c.t().dot(&c), &eye));
        println!("s = {s}: max |C Cᵀ − I| = {err:.2e}");
        assert!(err < 1e-12);
    }
    let s = 7;
    let mut rng = sample_rng(1, 1);
    let l = Array2::from_shape_fn((s, s), |_| rng.gen_range(-1.0..1.0));
    let u = idct2(&l).unwrap();
    let w = |k: usize| {
        if k == 0 {
            (1.0 / s as f64).sqrt()
        } else {
            (2.0 / s as f64).sqrt()
        }
    };
    for n1 in 0..s {
        for n2 in 0..s {
            let mut v = 0.0;
            for k1 in 0..s {
                for k2 in 0..s {
                    v += w(k1)
                        * w(k2)
                        * l[[k1, k2]]
                        * (PI * (2 * n1 + 1) as f64 * k1 as f64 / (2 * s) as f64).cos()
                        * (PI * (2 * n2 + 1) as f64 * k2 as f64 / (2 * s) as f64).cos();
                }
            }
            assert!((u[[n1, n2]] - v).abs() < 1e-12);
        }
    }
    // Parseval: the transform preserves the Frobenius norm.
    let (nl, nu) = (
        l.iter().map(|v| v * v).sum::<f64>(),
        u.iter().map(|v| v * v).sum::<f64>(),
    );
    assert!((nl - nu).abs() < 1e-12 * nl);
}

// ------------------------------------------------------------------------------------------------
// 6. Determinism.
// ------------------------------------------------------------------------------------------------

#[test]
fn generation_is_deterministic_and_independent_of_batching() {
    let cfg = small(17);
    let (c1, s1) = cfg.generate(3, 5).unwrap();
    let (c2, s2) = cfg.generate(3, 5).unwrap();
    assert_eq!(c1, c2);
    assert_eq!(s1, s2);
    let (c3, s3) = cfg.generate(3, 6).unwrap();
    assert_ne!(c1, c3);
    assert_ne!(s1, s3);
    // Samples differ from each other within a batch.
    assert_ne!(s1.index_axis(Axis(0), 0), s1.index_axis(Axis(0), 1));
    // Sample i depends only on (seed, i).
    let (c4, s4) = cfg.generate(1, 5).unwrap();
    assert_eq!(c4.index_axis(Axis(0), 0), c1.index_axis(Axis(0), 0));
    assert_eq!(s4.index_axis(Axis(0), 0), s1.index_axis(Axis(0), 0));
    let (c5, s5) = cfg.sample(5, 2).unwrap();
    assert_eq!(c5, c1.index_axis(Axis(0), 2));
    assert_eq!(s5, s1.index_axis(Axis(0), 2));
    let (c0, s0) = cfg.generate(0, 5).unwrap();
    assert_eq!(c0.shape(), &[0, 17, 17]);
    assert_eq!(s0.shape(), &[0, 17, 17]);
}

// ------------------------------------------------------------------------------------------------
// 7. Bad input.
// ------------------------------------------------------------------------------------------------

#[test]
fn bad_input_is_refused_with_typed_errors() {
    let cfg = small(9);
    for k in [0usize, 1, 2] {
        assert!(matches!(small(k).validate(), Err(Error::Config { .. })));
        assert!(matches!(small(k).generate(1, 0), Err(Error::Config { .. })));
    }
    for bad in [
        DarcyConfig { hi: 0.0, ..cfg },
        DarcyConfig {
            lo: f64::NAN,
            ..cfg
        },
        DarcyConfig { tol: 0.0, ..cfg },
        DarcyConfig { max_iter: 0, ..cfg },
        DarcyConfig {
            grf: DarcyGrf {
                alpha: -1.0,
                tau: 3.0,
            },
            ..cfg
        },
    ] {
        assert!(
            matches!(bad.validate(), Err(Error::Config { .. })),
            "{bad:?}"
        );
    }
    let good = Array2::from_elem((9, 9), 3.0);
    let mut nan = good.clone();
    nan[[4, 4]] = f64::NAN;
    assert!(matches!(cfg.solve(&nan), Err(Error::Invalid(_))));
    let mut inf = good.clone();
    inf[[0, 1]] = f64::INFINITY;
    assert!(matches!(cfg.solve(&inf), Err(Error::Invalid(_))));
    for v in [0.0, -3.0] {
        let mut neg = good.clone();
        neg[[2, 7]] = v;
        assert!(matches!(cfg.solve(&neg), Err(Error::Invalid(_))));
    }
    assert!(matches!(
        cfg.solve(&Array2::from_elem((9, 8), 3.0)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cfg.solve(&Array2::from_elem((2, 2), 3.0)),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        cells_to_nodes(&Array2::zeros((3, 4))),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(
        solve_nodes(
            &good,
            &Array2::zeros((8, 8)),
            1e-10,
            10,
            Preconditioner::Multigrid
        ),
        Err(Error::Shape { .. })
    ));
    // Negative node coefficients are legitimate (the spline overshoots at the jumps), but a matrix
    // that is visibly not positive definite is refused by the solver.
    let mut a = Array2::from_elem((9, 9), 1.0);
    a[[3, 3]] = -5.0;
    assert!(matches!(
        solve_nodes(
            &a,
            &Array2::from_elem((9, 9), 1.0),
            1e-10,
            100,
            Preconditioner::Multigrid
        ),
        Err(Error::Solver { .. })
    ));
    a[[3, 3]] = f64::NAN;
    assert!(matches!(
        solve_nodes(
            &a,
            &Array2::from_elem((9, 9), 1.0),
            1e-10,
            100,
            Preconditioner::Multigrid
        ),
        Err(Error::Invalid(_))
    ));
    // Too few iterations: the solver reports non-convergence instead of returning a poor answer.
    let starved = DarcyConfig {
        max_iter: 2,
        preconditioner: Preconditioner::Jacobi,
        ..small(33)
    };
    let coeff = small(33).sample(1, 0).unwrap().0;
    assert!(matches!(starved.solve(&coeff), Err(Error::Solver { .. })));
    // Splines need strictly increasing abscissae and matching lengths.
    assert!(matches!(
        not_a_knot_interpolate(&[0.0, 1.0, 1.0], &[1.0, 2.0, 3.0], &[0.5]),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        not_a_knot_interpolate(&[0.0, 1.0], &[1.0], &[0.5]),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        not_a_knot_interpolate(&[0.0], &[1.0], &[0.5]),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        idct2(&Array2::zeros((3, 2))),
        Err(Error::Shape { .. })
    ));
    assert!(matches!(dct_matrix(0), Err(Error::Config { .. })));
}
