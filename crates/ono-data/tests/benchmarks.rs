//! Every benchmark loader on a miniature file in the original format and layout: splits,
//! subsampling, channels, positions and the values at known indices (the column-major traps).

use std::path::PathBuf;

use ono_data::benchmarks::miniature::{self, code};
use ono_data::benchmarks::{self, Benchmark, Layout, LoadOptions};
use tch::Tensor;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ono-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn load(b: Benchmark, layout: Layout) -> (benchmarks::Loaded, miniature::Miniature) {
    load_with(b, layout, |o| o)
}

fn load_with(
    b: Benchmark,
    layout: Layout,
    edit: impl Fn(LoadOptions) -> LoadOptions,
) -> (benchmarks::Loaded, miniature::Miniature) {
    let dir = temp_dir(&format!("{}-{layout:?}", b.name()));
    let m = miniature::write(b, &dir).unwrap();
    let opts = edit(LoadOptions {
        ntrain: Some(m.ntrain),
        ntest: Some(m.ntest),
        r: None,
        layout,
        ..Default::default()
    });
    (benchmarks::load(b, &dir, &opts).unwrap(), m)
}

fn at(t: &Tensor, idx: &[i64]) -> f64 {
    t.double_value(idx)
}

#[test]
fn darcy_subsamples_splits_and_keeps_the_axes() {
    let (l, m) = load(Benchmark::Darcy, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.grid, Some(vec![5, 5]));
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 25, 1]);
    assert_eq!(d.test.y.size(), vec![m.ntest as i64, 25, 1]);
    // y[s, a*5 + b] = sol[s, 5a, 5b]; the test file's samples are offset by 100.
    for (s, a, b) in [(0, 0, 0), (1, 2, 3), (3, 4, 1)] {
        assert_eq!(
            at(&d.train.y, &[s, a * 5 + b, 0]),
            code(&[s as usize, 5 * a as usize, 5 * b as usize]) + 1.0
        );
    }
    assert_eq!(at(&d.test.y, &[2, 7, 0]), code(&[102, 5, 10]) + 1.0);
    // Positions: pos[..., 0] the column coordinate, pos[..., 1] the row coordinate.
    assert_eq!(at(&d.train.pos, &[0, 1, 0]), 0.25);
    assert_eq!(at(&d.train.pos, &[0, 1, 1]), 0.0);
    assert!(
        l.notes.iter().any(|n| n.contains("[3.0, 12.0]")),
        "{:?}",
        l.notes
    );
    // The FNO layout reads the same files (its normalizers are the trainer's recipe).
    let (f, _) = load(Benchmark::Darcy, Layout::Fno);
    assert!(f.dataset.train.y.size()[0] > 0);
}

#[test]
fn ns2d_frames_in_and_out_and_the_last_samples_for_test() {
    let (l, m) = load(Benchmark::Ns2d, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 64, 10]);
    assert_eq!(d.train.y.size(), vec![m.ntrain as i64, 64, 1, 2]);
    // fx[s, x*8+y, k] = u[s, x, y, k]; y[s, p, 0, k] = u[s, x, y, 10 + k]; test = last samples.
    assert_eq!(
        at(&d.train.fx, &[2, 3 * 8 + 5, 4]),
        code(&[2, 3, 5, 4]) + 1.0
    );
    assert_eq!(at(&d.train.y, &[1, 7, 0, 1]), code(&[1, 0, 7, 11]) + 1.0);
    let first_test = m.samples - m.ntest;
    assert_eq!(
        at(&d.test.fx, &[0, 9, 0]),
        code(&[first_test, 1, 1, 0]) + 1.0
    );
}

#[test]
fn burgers_subsamples_by_eight() {
    let (l, m) = load(Benchmark::Burgers, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 8, 1]);
    assert_eq!(at(&d.train.fx, &[1, 3, 0]), code(&[1, 24]) + 1.0);
    assert_eq!(
        at(&d.test.y, &[0, 2, 0]),
        code(&[m.samples - m.ntest, 16]) + 0.5
    );
}

/// `ex1_burgers.py`'s data: stride 4, and u′ by periodic central differences on the full grid
/// (h = 1/64 here), padded with u[n − 2] on the left and u[1] on the right, then subsampled.
#[test]
fn burgers_galerkin_layout_carries_the_periodic_derivative() {
    let (l, m) = load(Benchmark::Burgers, Layout::Galerkin);
    let d = &l.dataset;
    assert_eq!(d.grid, Some(vec![16]));
    let aux = d.train.aux.as_ref().unwrap();
    assert_eq!(aux.size(), vec![m.ntrain as i64, 16, 1]);
    // u[s, i] = 32 s + i + 0.5: interior differences are 1 / h = 64; at i = 0 the left
    // neighbour is u[62].
    assert_eq!(at(aux, &[1, 1, 0]), 64.0);
    assert_eq!(at(aux, &[1, 0, 0]), (1.0 - 62.0) / 2.0 * 64.0);
    assert_eq!(
        at(&d.test.aux.as_ref().unwrap().shallow_clone(), &[0, 3, 0]),
        64.0
    );
    // Odd strides are refused by the reference, and so here.
    let dir = temp_dir("burgers-odd");
    miniature::write(Benchmark::Burgers, &dir).unwrap();
    let opts = LoadOptions {
        ntrain: Some(4),
        ntest: Some(2),
        r: Some(3),
        layout: Layout::Galerkin,
        ..Default::default()
    };
    let e = benchmarks::load(Benchmark::Burgers, &dir, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("even"), "{e}");
}

/// `ex2_darcy.py`'s data: the fine grid [::3, ::3] (21 → 7), the last test samples, and aux =
/// (∂u/∂row, ∂u/∂column, coefficient), derivatives zero-padded on the full grid, h = 1/21.
#[test]
fn darcy_galerkin_layout_carries_the_fine_grid_derivatives() {
    let (l, m) = load(Benchmark::Darcy, Layout::Galerkin);
    let d = &l.dataset;
    assert_eq!(d.grid, Some(vec![7, 7]));
    let aux = d.train.aux.as_ref().unwrap();
    assert_eq!(aux.size(), vec![m.ntrain as i64, 49, 3]);
    // sol[s, i, j] = 1024 s + 32 i + j + 1: interior ∂/∂row = 64 / (2/21), ∂/∂col = 2 / (2/21).
    let p = 7 + 1; // fine point (1, 1) = full (3, 3)
    assert_eq!(at(aux, &[1, p, 0]), 32.0 * 21.0);
    assert_eq!(at(aux, &[1, p, 1]), 21.0);
    // Top row: the zero padding, (u[1, j] − 0) / 2h at full (0, 3).
    let u13 = code(&[1, 1, 3]) + 1.0;
    assert!((at(aux, &[1, 1, 0]) - u13 * 21.0 / 2.0).abs() < 1e-3);
    // The coefficient channel is the input, raw.
    assert_eq!(at(aux, &[2, 9, 2]), at(&d.train.fx, &[2, 9, 0]));
    // The test split is the last samples of the second file.
    assert_eq!(
        at(&d.test.y, &[0, 0, 0]),
        code(&[100 + m.samples - m.ntest, 0, 0]) + 1.0
    );
}

/// `ex3_darcy_inv.py`'s data: the solution on the fine grid (21 → 7) in, normalized with the
/// training statistics, then noisy; the coefficient pooled 3×3 then 4×4 (NaN padding) on the
/// 2×2 coarse query grid out.
#[test]
fn darcy_inverse_pools_the_coefficient_onto_the_query_grid() {
    let clean = |o| LoadOptions {
        noise: Some(0.0),
        ..o
    };
    let (l, m) = load_with(Benchmark::DarcyInverse, Layout::Ono, clean);
    let d = &l.dataset;
    assert_eq!(
        (d.grid.clone(), d.query_grid.clone()),
        (Some(vec![7, 7]), Some(vec![2, 2]))
    );
    assert_eq!(d.train.y.size(), vec![m.ntrain as i64, 4, 1]);
    assert_eq!(d.train.query.as_ref().unwrap().size(), vec![1, 4, 2]);
    assert_eq!(d.target_grid(), Some(&[2i64, 2][..]));
    // The miniature's coefficient: 12 where (s + i/3 + j/4) is even, else 3.
    let coeff = |s: usize, i: usize, j: usize| {
        if (s + i / 3 + j / 4) % 2 == 0 {
            12.0
        } else {
            3.0
        }
    };
    let block = |s: usize, rows: std::ops::Range<usize>, cols: std::ops::Range<usize>| {
        let n = (rows.len() * cols.len()) as f64;
        rows.flat_map(|i| cols.clone().map(move |j| (i, j)))
            .map(|(i, j)| coeff(s, i, j))
            .sum::<f64>()
            / n
    };
    // Coarse (0, 0) averages fine cells 0..4 (full 0..12); coarse (1, 1) the fine cells 4..7
    // (full 12..21) and one padding row and column.
    for s in 0..m.ntrain {
        let y = |k| at(&d.train.y, &[s as i64, k, 0]);
        assert!((y(0) - block(s, 0..12, 0..12)).abs() < 1e-6, "{s}");
        assert!((y(3) - block(s, 12..21, 12..21)).abs() < 1e-6, "{s}");
    }
    // Inputs normalized by the training statistics: zero mean over the training samples.
    let mean = d.train.fx.mean_dim(0, false, tch::Kind::Double).abs().max();
    assert!(mean.double_value(&[]) < 1e-5);
    // Noise 0.1: the difference to the clean inputs has about that spread, the same on a reload.
    let noisy = |o| LoadOptions {
        noise: Some(0.1),
        ..o
    };
    let (n1, _) = load_with(Benchmark::DarcyInverse, Layout::Ono, noisy);
    let (n2, _) = load_with(Benchmark::DarcyInverse, Layout::Ono, noisy);
    let diff = &n1.dataset.train.fx - &d.train.fx;
    let sd = diff.std(true).double_value(&[]);
    assert!((0.06..0.14).contains(&sd), "{sd}");
    assert!(n1.dataset.test.fx.equal(&n2.dataset.test.fx));
    assert!(!n1.dataset.test.fx.equal(&d.test.fx));
}

#[test]
fn airfoil_positions_are_the_index_grid_and_y_is_mach() {
    let (l, m) = load(Benchmark::Airfoil, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.grid, Some(vec![5, 4]));
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 20, 2]);
    assert_eq!(at(&d.train.fx, &[2, 2 * 4 + 3, 0]), code(&[2, 2, 3]) + 1.0);
    assert_eq!(at(&d.train.fx, &[2, 2 * 4 + 3, 1]), code(&[2, 2, 3]) + 2.0);
    assert_eq!(
        at(&d.train.y, &[2, 2 * 4 + 3, 0]),
        code(&[2, 4, 2, 3]) + 3.0
    );
    // Test = [ntrain, ntrain + ntest).
    assert_eq!(at(&d.test.y, &[0, 0, 0]), code(&[m.ntrain, 4, 0, 0]) + 3.0);
    // pos[..., 0] runs along axis 0 (5 rows), pos[..., 1] along axis 1 (4 columns).
    assert_eq!(at(&d.train.pos, &[0, 4, 0]), 0.25);
    assert_eq!(at(&d.train.pos, &[0, 3, 1]), 1.0);
}

#[test]
fn pipe_uses_channel_zero_and_point_index_positions() {
    let (l, m) = load(Benchmark::Pipe, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.train.pos.size(), vec![1, 20, 1]);
    assert_eq!(at(&d.train.y, &[3, 6, 0]), code(&[3, 0, 1, 1]) + 3.0);
    assert_eq!(
        at(&d.test.fx, &[1, 19, 1]),
        code(&[m.ntrain + 1, 3, 4]) + 2.0
    );
}

#[test]
fn elasticity_transposes_and_permutes() {
    let (l, m) = load(Benchmark::Elasticity, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 12, 2]);
    // sigma (N, S) → (S, N); XY (N, 2, S) → (S, N, 2); test = the last samples.
    assert_eq!(at(&d.train.y, &[4, 7, 0]), code(&[7, 4]) + 1.0);
    assert_eq!(at(&d.train.fx, &[4, 7, 1]), code(&[7, 1, 4]) + 2.0);
    assert_eq!(
        at(&d.test.y, &[0, 0, 0]),
        code(&[0, m.samples - m.ntest]) + 1.0
    );
    assert!(d.grid.is_none());
    let (g, _) = load(Benchmark::ElasticityGrid, Layout::Ono);
    assert_eq!(g.dataset.grid, Some(vec![6, 5]));
    assert_eq!(
        at(&g.dataset.train.y, &[2, 4 * 5 + 1, 0]),
        code(&[4, 1, 2]) + 1.0
    );
}

#[test]
fn plasticity_repeats_the_profile_and_puts_channels_before_time() {
    let (l, m) = load(Benchmark::Plasticity, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 18, 1]);
    assert_eq!(d.train.y.size(), vec![m.ntrain as i64, 18, 4, 5]);
    // fx[s, a*3 + b] = input[s, a]; y[s, a*3 + b, c, t] = output[s, a, b, t, c].
    assert_eq!(at(&d.train.fx, &[1, 4 * 3 + 2, 0]), code(&[1, 4]) + 1.0);
    assert_eq!(
        at(&d.train.y, &[1, 4 * 3 + 2, 3, 1]),
        code(&[1, 4, 2, 1, 3]) + 1.0
    );
    assert_eq!(
        at(&d.test.fx, &[0, 0, 0]),
        code(&[m.samples - m.ntest, 0]) + 1.0
    );
}

#[test]
fn missing_files_name_the_file_the_benchmark_and_the_source() {
    let dir = temp_dir("missing");
    for b in Benchmark::ALL {
        let e = benchmarks::load(b, &dir, &LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(b.name()) && e.contains("published"), "{e}");
    }
    let e = benchmarks::load(Benchmark::Ns2d, &dir, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("NavierStokes_V1e-5_N1200_T20.mat"), "{e}");
}

#[test]
fn too_few_samples_and_wrong_shapes_are_refused() {
    let dir = temp_dir("few");
    miniature::write(Benchmark::Ns2d, &dir).unwrap();
    // The reference split (1000 / 200) does not fit in 10 samples.
    let e = benchmarks::load(Benchmark::Ns2d, &dir, &LoadOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("ntrain") && e.contains("the file has 10"), "{e}");
    // A Darcy file whose `sol` has another shape than `coeff`.
    let dir = temp_dir("shape");
    miniature::write(Benchmark::Darcy, &dir).unwrap();
    let coeff = ono_data::array::NamedArray::new(
        "coeff",
        vec![2, 5, 5],
        ono_data::array::ArrayData::F64(vec![3.0; 50]),
    )
    .unwrap();
    let sol = ono_data::array::NamedArray::new(
        "sol",
        vec![2, 5, 4],
        ono_data::array::ArrayData::F64(vec![1.0; 40]),
    )
    .unwrap();
    ono_data::readers::mat_v5::write(
        &dir.join("piececonst_r421_N1024_smooth1.mat"),
        &[coeff, sol],
        false,
    )
    .unwrap();
    let opts = LoadOptions {
        ntrain: Some(1),
        ntest: Some(1),
        ..Default::default()
    };
    let e = benchmarks::load(Benchmark::Darcy, &dir, &opts)
        .unwrap_err()
        .to_string();
    assert!(e.contains("sol") && e.contains("shape"), "{e}");
}
