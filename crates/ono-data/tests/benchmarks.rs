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
    let dir = temp_dir(b.name());
    let m = miniature::write(b, &dir).unwrap();
    let opts = LoadOptions {
        ntrain: Some(m.ntrain),
        ntest: Some(m.ntest),
        r: None,
        layout,
    };
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
