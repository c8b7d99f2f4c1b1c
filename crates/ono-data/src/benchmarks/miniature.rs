//! Miniature copies of the benchmark files: the original file names, formats, variable names,
//! dtypes and axis order, with few samples and small grids, and values that encode their own
//! index (so a transposed axis or a column-major slip changes every value). Tests read them
//! through the loaders; users can run `ono data info` or a one-epoch training on them to check an
//! installation without downloading anything.

use std::path::Path;

use super::Benchmark;
use crate::array::{ArrayData, NamedArray};
use crate::readers::{hdf5_mat, mat_v5, npy};
use crate::{Error, Result};

/// The sizes a miniature benchmark is written with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Miniature {
    /// Samples in each file (Darcy: in each of its two files).
    pub samples: usize,
    /// Training samples to ask the loader for.
    pub ntrain: usize,
    /// Test samples to ask the loader for.
    pub ntest: usize,
}

/// The value stored at a multi-index: a positional code, exact in float32 for the sizes used.
pub fn code(idx: &[usize]) -> f64 {
    idx.iter().fold(0.0, |acc, &i| acc * 32.0 + i as f64)
}

fn coded(
    name: &str,
    shape: &[usize],
    f32_data: bool,
    map: impl Fn(&[usize]) -> f64,
) -> Result<NamedArray> {
    let n: usize = shape.iter().product();
    let mut idx = vec![0usize; shape.len()];
    let mut vals = Vec::with_capacity(n);
    for _ in 0..n {
        vals.push(map(&idx));
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    let data = if f32_data {
        ArrayData::F32(vals.iter().map(|&v| v as f32).collect())
    } else {
        ArrayData::F64(vals)
    };
    NamedArray::new(name, shape.to_vec(), data)
}

fn npy_file(dir: &Path, file: &str, a: &NamedArray) -> Result<()> {
    npy::write_npy(&dir.join(file), a)
}

/// A `torch.save` dict of the arrays as the neuraloperator wheel stores them: column-major
/// storages, the arrays named in `bools` as bool tensors.
fn pt_file(dir: &Path, file: &str, arrays: &[NamedArray], bools: &[&str]) -> Result<()> {
    let tensors = arrays
        .iter()
        .map(|a| {
            let t = a.to_tensor()?;
            Ok(if bools.contains(&a.name.as_str()) {
                t.f_ne(0)?
            } else {
                t
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let named: Vec<(&str, &tch::Tensor)> = arrays
        .iter()
        .zip(&tensors)
        .map(|(a, t)| (a.name.as_str(), t))
        .collect();
    Ok(ono_io::torch_save::write_dict(
        &dir.join(file),
        &named,
        ono_io::torch_save::StorageOrder::ColumnMajor,
    )?)
}

/// The MAT-file version of a miniature's MAT files (Darcy, NS2d, Burgers, Plasticity). The
/// published files are v5; MATLAB's `save -v7.3` (HDF5) is how larger re-saved copies come, and
/// the loaders read both.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MatVersion {
    /// MAT v5/v7 (`scipy.io.savemat`, MATLAB's default `save`): the published files' format.
    #[default]
    V5,
    /// MAT v7.3: HDF5 with MATLAB's 512-byte header.
    V73,
}

impl MatVersion {
    fn write(self, path: &Path, arrays: &[NamedArray], compress: bool) -> Result<()> {
        match self {
            MatVersion::V5 => mat_v5::write(path, arrays, compress),
            // Contiguous, as `hdf5_mat::write_mat73` says why.
            MatVersion::V73 => hdf5_mat::write_mat73(path, arrays),
        }
    }
}

/// The sizes of a set of miniatures: samples per file and the spatial extents, per benchmark.
#[derive(Debug, Clone, Copy)]
struct Sizes {
    /// Darcy: samples per file and the grid side (published: 1024, 421).
    darcy: (usize, usize),
    /// NS2d: samples, grid side, time steps (published: 1200, 64, 20).
    ns2d: (usize, usize, usize),
    /// Airfoil and Pipe: samples and the (H, W) grid (published: 221 × 51, 129 × 129).
    airfoil: (usize, usize, usize),
    pipe: (usize, usize, usize),
    /// Elasticity: samples and points (published: 972 points).
    elasticity: (usize, usize),
    /// Plasticity: samples and (H, W, T) (published: 101 × 31 × 20).
    plasticity: (usize, usize, usize, usize),
    /// Burgers: samples and points (published: 2048 samples of 8192).
    burgers: (usize, usize),
}

/// The loader tests' sizes: a few cells each, fast to read.
const TINY: Sizes = Sizes {
    darcy: (6, 21),
    ns2d: (10, 8, 12),
    airfoil: (9, 5, 4),
    pipe: (9, 4, 5),
    elasticity: (10, 12),
    plasticity: (10, 6, 3, 5),
    burgers: (8, 64),
};

/// The rehearsal's sizes ([`write_rehearsal`]): the published grids where they are cheap
/// (Airfoil's 221 × 51, Elasticity's 972 points, Plasticity's 101 × 31), and smaller ones where
/// every model of the paper plan still runs at its paper size: Darcy at 211² (every second point
/// of 421²: 43² at the paper's r = 5, 22² at Table 3's r = 10, where FNO's 12 modes still fit),
/// NS2d at 32² and Pipe at 65² (the U-Nets' instance norms need 32² at least), and Plasticity
/// with 10 of its 20 time steps (one optimizer step each; FNO-3D's 8 modes along time need 9).
const REHEARSAL: Sizes = Sizes {
    darcy: (6, 211),
    ns2d: (6, 32, 20),
    airfoil: (6, 221, 51),
    pipe: (6, 65, 65),
    elasticity: (6, 972),
    plasticity: (6, 101, 31, 10),
    burgers: (6, 8192),
};

/// The published files' sizes ([`Benchmark::published_extent`]) with `samples` samples per
/// file: the shapes of the paper's runs (`ono reproduce --plan-only --measure` times steps on
/// them).
fn published(samples: usize) -> Sizes {
    let extent = |b: Benchmark| b.published_extent();
    let (darcy, ns2d, airfoil, pipe, elasticity, plasticity) = (
        extent(Benchmark::Darcy),
        extent(Benchmark::Ns2d),
        extent(Benchmark::Airfoil),
        extent(Benchmark::Pipe),
        extent(Benchmark::Elasticity),
        extent(Benchmark::Plasticity),
    );
    Sizes {
        darcy: (samples, darcy.grid[0]),
        ns2d: (samples, ns2d.grid[0], ns2d.time_steps),
        airfoil: (samples, airfoil.grid[0], airfoil.grid[1]),
        pipe: (samples, pipe.grid[0], pipe.grid[1]),
        elasticity: (samples, elasticity.grid[0]),
        plasticity: (
            samples,
            plasticity.grid[0],
            plasticity.grid[1],
            plasticity.time_steps,
        ),
        burgers: (samples, Benchmark::Burgers.published_extent().grid[0]),
    }
}

/// Writes the miniature files of `benchmark` into `dir` (created if needed).
pub fn write(benchmark: Benchmark, dir: &Path) -> Result<Miniature> {
    write_sized(benchmark, dir, &TINY, MatVersion::V5)
}

/// [`write`] with the MAT files in `mat`'s version.
pub fn write_as(benchmark: Benchmark, dir: &Path, mat: MatVersion) -> Result<Miniature> {
    write_sized(benchmark, dir, &TINY, mat)
}

/// Files of the published sizes (Darcy 421², NS2d 64² × 20, Airfoil 221 × 51, Pipe 129²,
/// Elasticity 972 points, Plasticity 101 × 31 × 20) with `samples` samples each, in the published
/// formats: what a step of a paper-size run reads, without its data. The split returned is
/// [`write`]'s; choose `ntrain` and `ntest` to fit `samples`.
pub fn write_published(benchmark: Benchmark, dir: &Path, samples: usize) -> Result<Miniature> {
    let written = write_sized(benchmark, dir, &published(samples), MatVersion::V5)?;
    Ok(Miniature { samples, ..written })
}

/// Miniatures for rehearsing the paper profile (`ono reproduce --rehearse`): the published
/// files' names, formats, variables, dtypes and axis order, six samples each (four to train, two
/// to test) on grids where every model of the paper plans runs at its paper size (Burgers at the
/// published 8192 points, for the Galerkin Transformer paper's n = 8192; its Darcy inverse
/// problem reads the Darcy files). The benchmarks no paper plan reads (the neuraloperator sets,
/// the interpolated Elasticity grid) are [`write`]'s.
/// `mat` is the MAT files' version (the published files are [`MatVersion::V5`]).
pub fn write_rehearsal(benchmark: Benchmark, dir: &Path, mat: MatVersion) -> Result<Miniature> {
    let tiny = write_sized(benchmark, dir, &REHEARSAL, mat)?;
    Ok(rehearsal_split(benchmark).unwrap_or(tiny))
}

/// The sizes [`write_rehearsal`] writes and [`write_published`] with `samples`, in words: what
/// a folder of miniatures is stamped with, so that one written with other sizes is told apart.
pub fn sizes_label(rehearsal: bool, samples: usize) -> String {
    let z = if rehearsal {
        REHEARSAL
    } else {
        published(samples)
    };
    format!("{z:?}")
}

/// The split of [`write_rehearsal`]'s files of the benchmarks it sizes (four samples to
/// train, two to test), without writing them; `None` for the others ([`write`]'s).
pub fn rehearsal_split(benchmark: Benchmark) -> Option<Miniature> {
    matches!(
        benchmark,
        Benchmark::Darcy
            | Benchmark::Ns2d
            | Benchmark::Airfoil
            | Benchmark::Pipe
            | Benchmark::Elasticity
            | Benchmark::Plasticity
            | Benchmark::Burgers
    )
    .then_some(Miniature {
        samples: REHEARSAL.darcy.0,
        ntrain: 4,
        ntest: 2,
    })
}

fn write_sized(benchmark: Benchmark, dir: &Path, z: &Sizes, mat: MatVersion) -> Result<Miniature> {
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let m = |samples, ntrain, ntest| Miniature {
        samples,
        ntrain,
        ntest,
    };
    match benchmark {
        // The inverse problem reads the Darcy files.
        Benchmark::Darcy | Benchmark::DarcyInverse => {
            // MATLAB `save` files (compressed), 21×21 so that r = 5 gives s = 5; 12 / 3 coefficients.
            for (file, offset) in [
                ("piececonst_r421_N1024_smooth1.mat", 0),
                ("piececonst_r421_N1024_smooth2.mat", 100),
            ] {
                let (n, side) = z.darcy;
                let coeff = coded("coeff", &[n, side, side], false, |i| {
                    if (i[0] + i[1] / 3 + i[2] / 4) % 2 == 0 {
                        12.0
                    } else {
                        3.0
                    }
                })?;
                let sol = coded("sol", &[n, side, side], false, |i| {
                    code(&[i[0] + offset, i[1], i[2]]) + 1.0
                })?;
                let kcoeff = coded("Kcoeff", &[n, side, side], false, code)?;
                mat.write(&dir.join(file), &[coeff, sol, kcoeff], true)?;
            }
            Ok(m(6, 4, 3))
        }
        Benchmark::Ns2d => {
            // scipy.io.savemat (uncompressed), float32, [sample, x, y, time], 12 frames.
            let (n, side, steps) = z.ns2d;
            let a = coded("a", &[n, side, side], true, |i| code(i) + 1.0)?;
            let u = coded("u", &[n, side, side, steps], true, |i| code(i) + 1.0)?;
            let t = coded("t", &[1, steps], true, |i| (i[1] + 1) as f64)?;
            mat.write(
                &dir.join("NavierStokes_V1e-5_N1200_T20.mat"),
                &[a, u, t],
                false,
            )?;
            Ok(m(10, 6, 3))
        }
        Benchmark::Burgers => {
            let (n, points) = z.burgers;
            let a = coded("a", &[n, points], false, |i| code(i) + 1.0)?;
            let u = coded("u", &[n, points], false, |i| code(i) + 0.5)?;
            let a_x = coded("a_x", &[n, points], false, code)?;
            mat.write(&dir.join("burgers_data_R10.mat"), &[a, u, a_x], true)?;
            // The tiny file's split (5 + 2 of 8); a larger one keeps two samples to test.
            Ok(if n == 8 { m(8, 5, 2) } else { m(n, n - 2, 2) })
        }
        Benchmark::Airfoil => {
            let (n, h, w) = z.airfoil;
            let x = coded("NACA_Cylinder_X", &[n, h, w], false, |i| code(i) + 1.0)?;
            let y = coded("NACA_Cylinder_Y", &[n, h, w], false, |i| code(i) + 2.0)?;
            let q = coded("NACA_Cylinder_Q", &[n, 5, h, w], false, |i| code(i) + 3.0)?;
            npy_file(dir, "NACA_Cylinder_X.npy", &x)?;
            npy_file(dir, "NACA_Cylinder_Y.npy", &y)?;
            npy_file(dir, "NACA_Cylinder_Q.npy", &q)?;
            Ok(m(9, 5, 3))
        }
        Benchmark::Pipe => {
            let (n, h, w) = z.pipe;
            let x = coded("Pipe_X", &[n, h, w], true, |i| code(i) + 1.0)?;
            let y = coded("Pipe_Y", &[n, h, w], true, |i| code(i) + 2.0)?;
            let q = coded("Pipe_Q", &[n, 3, h, w], true, |i| code(i) + 3.0)?;
            npy_file(dir, "Pipe_X.npy", &x)?;
            npy_file(dir, "Pipe_Y.npy", &y)?;
            npy_file(dir, "Pipe_Q.npy", &q)?;
            Ok(m(9, 5, 3))
        }
        Benchmark::Elasticity => {
            let (n, points) = z.elasticity;
            let sigma = coded("Random_UnitCell_sigma_10", &[points, n], false, |i| {
                code(i) + 1.0
            })?;
            let xy = coded("Random_UnitCell_XY_10", &[points, 2, n], false, |i| {
                code(i) + 2.0
            })?;
            npy_file(dir, "Random_UnitCell_sigma_10.npy", &sigma)?;
            npy_file(dir, "Random_UnitCell_XY_10.npy", &xy)?;
            Ok(m(10, 6, 3))
        }
        Benchmark::ElasticityGrid => {
            let mask = coded("Random_UnitCell_mask_10_interp", &[6, 5, 10], false, |i| {
                ((i[0] + i[1] + i[2]) % 2) as f64
            })?;
            let sigma = coded("Random_UnitCell_sigma_10_interp", &[6, 5, 10], false, |i| {
                code(i) + 1.0
            })?;
            npy_file(dir, "Random_UnitCell_mask_10_interp.npy", &mask)?;
            npy_file(dir, "Random_UnitCell_sigma_10_interp.npy", &sigma)?;
            Ok(m(10, 6, 3))
        }
        Benchmark::NeuralopDarcy => {
            // 8² "16" files and a 16² "32" file: the test problems at twice the resolution, of
            // which the "16" test file holds every other point, as in the wheel. Test samples
            // are offset by 100; `x` is bool.
            let coeff = |s: usize, i: usize, j: usize| ((s + i / 4 + j / 6) % 2) as f64;
            let sol = |s: usize, i: usize, j: usize| code(&[s, i, j]) + 1.0;
            let file = |name: &str, n: usize, step: usize, offset: usize| -> Result<()> {
                let at = |i: &[usize]| (i[0] + offset, step * i[1], step * i[2]);
                let x = coded("x", &[6, n, n], true, |i| {
                    let (s, a, b) = at(i);
                    coeff(s, a, b)
                })?;
                let y = coded("y", &[6, n, n], true, |i| {
                    let (s, a, b) = at(i);
                    sol(s, a, b)
                })?;
                pt_file(dir, name, &[x, y], &["x"])
            };
            file("darcy_train_16.pt", 8, 2, 0)?;
            file("darcy_test_16.pt", 8, 2, 100)?;
            file("darcy_test_32.pt", 16, 1, 100)?;
            Ok(m(6, 4, 3))
        }
        Benchmark::NeuralopBurgers => {
            // 10 trajectories of 5 frames × 8 points; the first frame is the input.
            let input = coded("input", &[10, 8], false, |i| code(i) + 1.0)?;
            let output = coded("output", &[10, 5, 8], false, |i| {
                if i[1] == 0 {
                    code(&[i[0], i[2]]) + 1.0
                } else {
                    code(i) + 0.5
                }
            })?;
            let visc = coded("visc", &[1, 1], false, |_| 0.01)?;
            pt_file(dir, "burgers_lowres.pt", &[input, output, visc], &[])?;
            Ok(m(10, 6, 3))
        }
        Benchmark::Plasticity => {
            let (n, h, w, steps) = z.plasticity;
            let input = coded("input", &[n, h], false, |i| code(i) + 1.0)?;
            let output = coded("output", &[n, h, w, steps, 4], false, |i| code(i) + 1.0)?;
            mat.write(&dir.join("plas_N987_T20.mat"), &[input, output], true)?;
            Ok(m(10, 6, 3))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of published-size files is stamped with this label and reused only when it
    /// matches, so the sizes must not move: these are the published files' shapes.
    #[test]
    fn published_sizes_are_the_published_files_shapes() {
        assert_eq!(
            sizes_label(false, 2),
            "Sizes { darcy: (2, 421), ns2d: (2, 64, 20), airfoil: (2, 221, 51), \
             pipe: (2, 129, 129), elasticity: (2, 972), plasticity: (2, 101, 31, 20), \
             burgers: (2, 8192) }"
        );
    }
}
