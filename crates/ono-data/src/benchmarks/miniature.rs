//! Miniature copies of the benchmark files: the original file names, formats, variable names,
//! dtypes and axis order, with few samples and small grids, and values that encode their own
//! index (so a transposed axis or a column-major slip changes every value). Tests read them
//! through the loaders; users can run `ono data info` or a one-epoch training on them to check an
//! installation without downloading anything.

use std::path::Path;

use super::Benchmark;
use crate::array::{ArrayData, NamedArray};
use crate::readers::{mat_v5, npy};
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

/// Writes the miniature files of `benchmark` into `dir` (created if needed).
pub fn write(benchmark: Benchmark, dir: &Path) -> Result<Miniature> {
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
                let coeff = coded("coeff", &[6, 21, 21], false, |i| {
                    if (i[0] + i[1] / 3 + i[2] / 4) % 2 == 0 {
                        12.0
                    } else {
                        3.0
                    }
                })?;
                let sol = coded("sol", &[6, 21, 21], false, |i| {
                    code(&[i[0] + offset, i[1], i[2]]) + 1.0
                })?;
                let kcoeff = coded("Kcoeff", &[6, 21, 21], false, code)?;
                mat_v5::write(&dir.join(file), &[coeff, sol, kcoeff], true)?;
            }
            Ok(m(6, 4, 3))
        }
        Benchmark::Ns2d => {
            // scipy.io.savemat (uncompressed), float32, [sample, x, y, time], 12 frames.
            let a = coded("a", &[10, 8, 8], true, |i| code(i) + 1.0)?;
            let u = coded("u", &[10, 8, 8, 12], true, |i| code(i) + 1.0)?;
            let t = coded("t", &[1, 12], true, |i| (i[1] + 1) as f64)?;
            mat_v5::write(
                &dir.join("NavierStokes_V1e-5_N1200_T20.mat"),
                &[a, u, t],
                false,
            )?;
            Ok(m(10, 6, 3))
        }
        Benchmark::Burgers => {
            let a = coded("a", &[8, 64], false, |i| code(i) + 1.0)?;
            let u = coded("u", &[8, 64], false, |i| code(i) + 0.5)?;
            let a_x = coded("a_x", &[8, 64], false, code)?;
            mat_v5::write(&dir.join("burgers_data_R10.mat"), &[a, u, a_x], true)?;
            Ok(m(8, 5, 2))
        }
        Benchmark::Airfoil => {
            let x = coded("NACA_Cylinder_X", &[9, 5, 4], false, |i| code(i) + 1.0)?;
            let y = coded("NACA_Cylinder_Y", &[9, 5, 4], false, |i| code(i) + 2.0)?;
            let q = coded("NACA_Cylinder_Q", &[9, 5, 5, 4], false, |i| code(i) + 3.0)?;
            npy_file(dir, "NACA_Cylinder_X.npy", &x)?;
            npy_file(dir, "NACA_Cylinder_Y.npy", &y)?;
            npy_file(dir, "NACA_Cylinder_Q.npy", &q)?;
            Ok(m(9, 5, 3))
        }
        Benchmark::Pipe => {
            let x = coded("Pipe_X", &[9, 4, 5], true, |i| code(i) + 1.0)?;
            let y = coded("Pipe_Y", &[9, 4, 5], true, |i| code(i) + 2.0)?;
            let q = coded("Pipe_Q", &[9, 3, 4, 5], true, |i| code(i) + 3.0)?;
            npy_file(dir, "Pipe_X.npy", &x)?;
            npy_file(dir, "Pipe_Y.npy", &y)?;
            npy_file(dir, "Pipe_Q.npy", &q)?;
            Ok(m(9, 5, 3))
        }
        Benchmark::Elasticity => {
            let sigma = coded("Random_UnitCell_sigma_10", &[12, 10], false, |i| {
                code(i) + 1.0
            })?;
            let xy = coded("Random_UnitCell_XY_10", &[12, 2, 10], false, |i| {
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
            let input = coded("input", &[10, 6], false, |i| code(i) + 1.0)?;
            let output = coded("output", &[10, 6, 3, 5, 4], false, |i| code(i) + 1.0)?;
            mat_v5::write(&dir.join("plas_N987_T20.mat"), &[input, output], true)?;
            Ok(m(10, 6, 3))
        }
    }
}
