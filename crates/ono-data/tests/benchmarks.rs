//! Every benchmark loader on a miniature file in the original format and layout: splits,
//! subsampling, channels, positions and the values at known indices (the column-major traps).

use ono_data::benchmarks::miniature::{self, code};
use ono_data::benchmarks::{self, Benchmark, Layout, LoadOptions};
use tch::Tensor;

fn temp_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-bench-{name}"))
}

/// A miniature's split and the folder of its files, which stays until this is dropped (a test
/// may read the files again: `list_file`).
struct Written {
    split: miniature::Miniature,
    _dir: ono_testing::Scratch,
}

impl std::ops::Deref for Written {
    type Target = miniature::Miniature;
    fn deref(&self) -> &miniature::Miniature {
        &self.split
    }
}

fn load(b: Benchmark, layout: Layout) -> (benchmarks::Loaded, Written) {
    load_with(b, layout, |o| o)
}

fn load_with(
    b: Benchmark,
    layout: Layout,
    edit: impl Fn(LoadOptions) -> LoadOptions,
) -> (benchmarks::Loaded, Written) {
    let dir = temp_dir(&format!("{}-{layout:?}", b.name()));
    let m = miniature::write(b, &dir).unwrap();
    let opts = edit(LoadOptions {
        ntrain: Some(m.ntrain),
        ntest: Some(m.ntest),
        r: None,
        layout,
        ..Default::default()
    });
    let loaded = benchmarks::load(b, &dir, &opts).unwrap();
    (
        loaded,
        Written {
            split: m,
            _dir: dir,
        },
    )
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
        if (s + i / 3 + j / 4).is_multiple_of(2) {
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

/// `coarse_r = r` (the paper's FNO2d rows of Table 3): the coefficient pooled r×r on the input's
/// own points, and no query points.
#[test]
fn darcy_inverse_on_one_grid_has_no_query() {
    let one_grid = |o| LoadOptions {
        noise: Some(0.0),
        r: Some(3),
        coarse_r: Some(3),
        ..o
    };
    let (l, m) = load_with(Benchmark::DarcyInverse, Layout::Ono, one_grid);
    let d = &l.dataset;
    assert_eq!(
        (d.grid.clone(), d.query_grid.clone()),
        (Some(vec![7, 7]), None)
    );
    assert!(d.train.query.is_none() && d.test.query.is_none());
    assert_eq!(d.train.y.size(), vec![m.ntrain as i64, 49, 1]);
    assert_eq!(d.target_grid(), Some(&[7i64, 7][..]));
    // Fine cell (1, 2) averages the miniature's coefficient over rows 3..6, columns 6..9.
    let coeff = |s: usize, i: usize, j: usize| {
        if (s + i / 3 + j / 4).is_multiple_of(2) {
            12.0
        } else {
            3.0
        }
    };
    for s in 0..m.ntrain {
        let want = (3..6)
            .flat_map(|i| (6..9).map(move |j| coeff(s, i, j)))
            .sum::<f64>()
            / 9.0;
        assert!(
            (at(&d.train.y, &[s as i64, 7 + 2, 0]) - want).abs() < 1e-6,
            "{s}"
        );
    }
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

/// The neuraloperator Darcy files: first samples of each file, the coefficient a 0/1 float
/// channel, neuraloperator's positions (the 16² points every other point of the 32² grid), and
/// the test set at 32² carrying its own grid.
#[test]
fn neuralop_darcy_reads_both_test_resolutions() {
    let (l, m) = load(Benchmark::NeuralopDarcy, Layout::Ono);
    let d = &l.dataset;
    // The miniature's "16" files are 8², its "32" file 16².
    assert_eq!(d.grid, Some(vec![8, 8]));
    assert_eq!(d.test_grid, None);
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 64, 1]);
    assert_eq!(d.test.y.size(), vec![m.ntest as i64, 64, 1]);
    assert_eq!(d.train.pos.size(), vec![1, 64, 2]);
    // y[s, 8a + b] = file y[s, a, b] = code(s, 2a, 2b) + 1; the test files are offset by 100.
    for (s, a, b) in [(0, 0, 0), (1, 2, 3), (3, 7, 1)] {
        let want = code(&[s as usize, 2 * a as usize, 2 * b as usize]) + 1.0;
        assert_eq!(at(&d.train.y, &[s, a * 8 + b, 0]), want);
    }
    assert_eq!(
        at(&d.test.y, &[2, 8 * 5 + 6, 0]),
        code(&[102, 10, 12]) + 1.0
    );
    // x = (s + i/4 + j/6) % 2 on the full grid, a float 0/1.
    for (s, a, b) in [(0, 0, 0), (1, 2, 3), (2, 6, 7)] {
        let (i, j) = (2 * a as usize, 2 * b as usize);
        assert_eq!(
            at(&d.train.fx, &[s, a * 8 + b, 0]),
            ((s as usize + i / 4 + j / 6) % 2) as f64
        );
    }
    // pos[.., 0] the column, pos[.., 1] the row coordinate, k / 8.
    assert_eq!(at(&d.train.pos, &[0, 8 * 3 + 5, 0]), 5.0 / 8.0);
    assert_eq!(at(&d.train.pos, &[0, 8 * 3 + 5, 1]), 3.0 / 8.0);
    assert!(
        l.notes.iter().any(|n| n.contains("[0.0, 1.0]")),
        "{:?}",
        l.notes
    );
    // `ono data info` lists the files with torch's dtypes.
    let listed = benchmarks::list_file(&l.files[0]).unwrap();
    assert_eq!(
        listed,
        [
            ("x".to_string(), "bool".to_string(), vec![6, 8, 8]),
            ("y".to_string(), "float32".to_string(), vec![6, 8, 8])
        ]
    );

    let (h, _) = load_with(Benchmark::NeuralopDarcy, Layout::Fno, |o| LoadOptions {
        test_resolution: Some(32),
        ..o
    });
    let t = &h.dataset;
    assert_eq!(
        (t.grid.clone(), t.test_grid.clone()),
        (Some(vec![8, 8]), Some(vec![16, 16]))
    );
    assert_eq!(t.effective_test_grid(), Some(&[16, 16][..]));
    assert_eq!(t.test.fx.size(), vec![m.ntest as i64, 256, 1]);
    assert_eq!(t.train.y.size(), vec![m.ntrain as i64, 64, 1]);
    assert_eq!(at(&t.test.y, &[2, 16 * 5 + 6, 0]), code(&[102, 5, 6]) + 1.0);
    // The same problems: the 32 set at the even points is the 16 set, at the same positions.
    for p in [0i64, 9, 63] {
        let (a, b) = (p / 8, p % 8);
        let q = 16 * 2 * a + 2 * b;
        assert_eq!(at(&t.test.y, &[1, q, 0]), at(&d.test.y, &[1, p, 0]));
        assert_eq!(at(&t.test.fx, &[1, q, 0]), at(&d.test.fx, &[1, p, 0]));
        for c in 0..2 {
            assert_eq!(at(&t.test.pos, &[0, q, c]), at(&d.test.pos, &[0, p, c]));
        }
    }
    assert!(h.files[1].ends_with("darcy_test_32.pt"));
}

/// The neuraloperator Burgers file as `load_burgers_1dtime`: the initial condition repeated along
/// t, the whole space-time solution as target, the test trajectories right after the training
/// ones, positions x ∈ [0, 1) (columns) and t ∈ [0, 1] (rows).
#[test]
fn neuralop_burgers_maps_the_initial_condition_to_the_space_time_solution() {
    let (l, m) = load(Benchmark::NeuralopBurgers, Layout::Ono);
    let d = &l.dataset;
    assert_eq!(d.grid, Some(vec![5, 8]));
    assert_eq!(d.train.fx.size(), vec![m.ntrain as i64, 40, 1]);
    assert_eq!(d.test.y.size(), vec![m.ntest as i64, 40, 1]);
    // fx[s, 8t + x] = input[s, x] for every t; y[s, 8t + x] = output[s, t, x].
    for t in 0..5 {
        assert_eq!(at(&d.train.fx, &[4, 8 * t + 3, 0]), code(&[4, 3]) + 1.0);
    }
    assert_eq!(at(&d.train.y, &[4, 8 * 2 + 3, 0]), code(&[4, 2, 3]) + 0.5);
    assert_eq!(at(&d.train.y, &[4, 3, 0]), code(&[4, 3]) + 1.0);
    // The test trajectories follow the training ones: [ntrain, ntrain + ntest).
    assert_eq!(
        at(&d.test.y, &[1, 8 * 4 + 7, 0]),
        code(&[m.ntrain + 1, 4, 7]) + 0.5
    );
    assert_eq!(at(&d.train.pos, &[0, 8 * 4 + 2, 0]), 2.0 / 8.0);
    assert_eq!(at(&d.train.pos, &[0, 8 * 4 + 2, 1]), 1.0);
    assert_eq!(at(&d.train.pos, &[0, 8 * 2 + 7, 1]), 0.5);
    assert!(
        l.notes.iter().any(|n| n.contains("ν = 0.01")),
        "{:?}",
        l.notes
    );
    assert!(l.notes.iter().any(|n| n.contains("= 0e0")), "{:?}", l.notes);
}

/// Bad neuraloperator files and options are errors that say what is wrong.
#[test]
fn neuralop_bad_files_and_options_are_refused() {
    use ono_io::torch_save::{write_dict, StorageOrder};
    let dir = temp_dir("neuralop-bad");
    miniature::write(Benchmark::NeuralopDarcy, &dir).unwrap();
    miniature::write(Benchmark::NeuralopBurgers, &dir).unwrap();
    let opts = |test_resolution| LoadOptions {
        ntrain: Some(2),
        ntest: Some(2),
        test_resolution,
        ..Default::default()
    };
    let err = |b, o: &LoadOptions| benchmarks::load(b, &dir, o).unwrap_err().to_string();
    let e = err(Benchmark::NeuralopDarcy, &opts(Some(64)));
    assert!(e.contains("16 and 32"), "{e}");
    let e = err(Benchmark::Darcy, &opts(Some(32)));
    assert!(e.contains("only neuralop_darcy"), "{e}");
    let e = err(
        Benchmark::NeuralopDarcy,
        &LoadOptions {
            r: Some(2),
            ..opts(None)
        },
    );
    assert!(e.contains("test_resolution"), "{e}");
    let e = err(
        Benchmark::NeuralopBurgers,
        &LoadOptions {
            ntrain: Some(9),
            ..opts(None)
        },
    );
    assert!(e.contains("the file has 10"), "{e}");
    // A missing test file names itself.
    std::fs::remove_file(dir.join("darcy_test_32.pt")).unwrap();
    let e = err(Benchmark::NeuralopDarcy, &opts(Some(32)));
    assert!(
        e.contains("darcy_test_32.pt") && e.contains("pypi.org"),
        "{e}"
    );
    // Wrong keys, wrong shapes, wrong dtypes.
    let t = |shape: &[i64], kind| tch::Tensor::zeros(shape, (kind, tch::Device::Cpu));
    let f = tch::Kind::Float;
    let write = |file: &str, named: &[(&str, &tch::Tensor)]| {
        write_dict(&dir.join(file), named, StorageOrder::ColumnMajor).unwrap()
    };
    write(
        "darcy_train_16.pt",
        &[("a", &t(&[4, 8, 8], f)), ("y", &t(&[4, 8, 8], f))],
    );
    let e = err(Benchmark::NeuralopDarcy, &opts(None));
    assert!(
        e.contains("no variable `x`") && e.contains("darcy_train_16.pt"),
        "{e}"
    );
    write(
        "darcy_train_16.pt",
        &[("x", &t(&[4, 8, 8], f)), ("y", &t(&[4, 8, 7], f))],
    );
    let e = err(Benchmark::NeuralopDarcy, &opts(None));
    assert!(e.contains("`y`") && e.contains("shape"), "{e}");
    write(
        "darcy_train_16.pt",
        &[("x", &t(&[4, 8, 6], f)), ("y", &t(&[4, 8, 6], f))],
    );
    let e = err(Benchmark::NeuralopDarcy, &opts(None));
    assert!(e.contains("square"), "{e}");
    write(
        "darcy_train_16.pt",
        &[("x", &t(&[4, 4, 4], f)), ("y", &t(&[4, 4, 4], f))],
    );
    let e = err(Benchmark::NeuralopDarcy, &opts(None));
    assert!(e.contains("darcy_test_16.pt") && e.contains("8×8"), "{e}");
    let i = tch::Kind::Int64;
    write(
        "darcy_train_16.pt",
        &[("x", &t(&[4, 8, 8], f)), ("y", &t(&[4, 8, 8], i))],
    );
    let e = err(Benchmark::NeuralopDarcy, &opts(None));
    assert!(e.contains("int64"), "{e}");
    write(
        "burgers_lowres.pt",
        &[("input", &t(&[10, 8], f)), ("output", &t(&[10, 5, 7], f))],
    );
    let e = err(Benchmark::NeuralopBurgers, &opts(None));
    assert!(e.contains("`output`") && e.contains("shape"), "{e}");
    write("burgers_lowres.pt", &[("u", &t(&[10, 8], f))]);
    let e = err(Benchmark::NeuralopBurgers, &opts(None));
    assert!(e.contains("no variable `input`"), "{e}");
    // Not a torch.save file at all.
    std::fs::write(dir.join("burgers_lowres.pt"), b"not a zip").unwrap();
    let e = err(Benchmark::NeuralopBurgers, &opts(None));
    assert!(e.contains("burgers_lowres.pt"), "{e}");
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

/// Every tensor of a split, by name, for comparing two loads.
fn tensors(s: &ono_data::dataset::Split) -> Vec<(&'static str, Tensor)> {
    let mut v = vec![
        ("fx", s.fx.shallow_clone()),
        ("y", s.y.shallow_clone()),
        ("pos", s.pos.shallow_clone()),
    ];
    v.extend(s.query.as_ref().map(|t| ("query", t.shallow_clone())));
    v.extend(s.aux.as_ref().map(|t| ("aux", t.shallow_clone())));
    v
}

/// The MAT files of Darcy, NS2d, Burgers and Plasticity, written as MAT v7.3 (HDF5) instead of
/// the published v5, load into the same datasets, bit for bit, in every layout that reads them;
/// at the rehearsal's sizes too (Darcy 211², NS2d 32² × 20).
#[test]
fn mat73_miniatures_load_as_the_v5_ones() {
    use miniature::MatVersion;
    let cases = [
        (Benchmark::Darcy, Layout::Ono, false),
        (Benchmark::Darcy, Layout::Galerkin, false),
        (Benchmark::Ns2d, Layout::Ono, false),
        (Benchmark::Burgers, Layout::Galerkin, false),
        (Benchmark::Plasticity, Layout::Ono, false),
        (Benchmark::Darcy, Layout::Ono, true),
        (Benchmark::Ns2d, Layout::Ono, true),
    ];
    for (b, layout, rehearsal) in cases {
        let what = format!("{} {layout:?}, rehearsal sizes: {rehearsal}", b.name());
        let loads: Vec<_> = [MatVersion::V5, MatVersion::V73]
            .into_iter()
            .map(|mat| {
                let dir = temp_dir(&format!("{}-{layout:?}-{rehearsal}-{mat:?}", b.name()));
                let m = if rehearsal {
                    miniature::write_rehearsal(b, &dir, mat).unwrap()
                } else {
                    miniature::write_as(b, &dir, mat).unwrap()
                };
                let head = std::fs::read(dir.join(mat_file(b))).unwrap();
                let hdf5 = head.get(512..520) == Some(b"\x89HDF\r\n\x1a\n");
                assert_eq!(hdf5, mat == MatVersion::V73, "{what}: {mat:?}");
                let opts = LoadOptions {
                    ntrain: Some(m.ntrain),
                    ntest: Some(m.ntest),
                    layout,
                    ..Default::default()
                };
                let loaded = benchmarks::load(b, &dir, &opts).unwrap();
                let _ = std::fs::remove_dir_all(&dir);
                loaded
            })
            .collect();
        let (v5, v73) = (&loads[0].dataset, &loads[1].dataset);
        assert_eq!(v5.grid, v73.grid, "{what}");
        for (a, b) in [(&v5.train, &v73.train), (&v5.test, &v73.test)] {
            let (ta, tb) = (tensors(a), tensors(b));
            assert_eq!(ta.len(), tb.len(), "{what}");
            for ((name, x), (_, y)) in ta.iter().zip(&tb) {
                assert_eq!(x.size(), y.size(), "{what}: {name}");
                assert!(x.equal(y), "{what}: {name} differs");
            }
        }
    }
}

/// The MAT file a benchmark's miniature writes first.
fn mat_file(b: Benchmark) -> &'static str {
    match b {
        Benchmark::Darcy => "piececonst_r421_N1024_smooth1.mat",
        Benchmark::Ns2d => "NavierStokes_V1e-5_N1200_T20.mat",
        Benchmark::Burgers => "burgers_data_R10.mat",
        Benchmark::Plasticity => "plas_N987_T20.mat",
        _ => unreachable!("{} has no MAT file", b.name()),
    }
}
