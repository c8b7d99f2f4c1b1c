//! The published benchmarks, read from their original files exactly as the reference scripts
//! read them: file and variable names, subsampling, splits, which arrays are input function,
//! positions and target. What the scripts train with on each (regime, normalizers, loss) is the
//! training crate's recipe (`ono_train::recipe`).
//!
//! The default layout is the ONO scripts' ([`Layout::Ono`]); where the FNO scripts differ, the
//! difference is a second, named layout ([`Layout::Fno`]). Each benchmark lives in its own file.
//!
//! Beside the papers' files, the small sets that the `neuraloperator` 0.3.0 wheel ships
//! (`neuralop_darcy`, `neuralop_burgers`) are read as neuraloperator's own loaders read them;
//! `cargo xtask data fetch` downloads them.

mod airfoil;
mod burgers;
mod darcy;
mod darcy_inverse;
mod elasticity;
pub mod miniature;
mod neuralop_burgers;
mod neuralop_darcy;
mod ns2d;
mod pipe;
mod plasticity;

use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use tch::{Kind, Tensor};

use crate::array::NamedArray;
use crate::dataset::{Split, TensorDataset};
use crate::{Error, Result};

/// The environment variable naming the data folder.
pub const DATA_DIR_ENV: &str = "ONO_DATA_DIR";

/// Where the FNO files (Darcy, NS2d, Burgers) are published.
pub const FNO_DATA: &str =
    "the FNO data release linked from the neuraloperator/neuraloperator (FNO) README (Google Drive)";
/// Where the Geo-FNO files (Airfoil, Pipe, Elasticity, Plasticity) are published.
pub const GEOFNO_DATA: &str =
    "the Geo-FNO data release linked from the neuraloperator/Geo-FNO README (Google Drive)";
/// The wheel that ships the neuraloperator files (`neuralop_darcy`, `neuralop_burgers`).
pub const NEURALOP_WHEEL: &str = "neuraloperator-0.3.0-py3-none-any.whl";
/// Its version on PyPI.
pub const NEURALOP_VERSION: &str = "0.3.0";
/// Its page on PyPI.
pub const NEURALOP_URL: &str = "https://pypi.org/project/neuraloperator/0.3.0/";
/// Where the neuraloperator files are published, and how to get them.
pub const NEURALOP_DATA: &str = "the neuraloperator 0.3.0 wheel on PyPI \
     (https://pypi.org/project/neuraloperator/0.3.0/, under neuralop/datasets/data/); \
     `cargo xtask data fetch` downloads it and prints the folder";
/// The licence of the neuraloperator files: the wheel's LICENSE.
pub const NEURALOP_LICENSE: &str = "MIT License, Copyright (c) 2023 NeuralOperator developers";

/// The source and licence of the neuraloperator files in one line, for notes and reports.
pub fn neuralop_source() -> String {
    format!(
        "the neuraloperator {NEURALOP_VERSION} wheel on PyPI ({NEURALOP_WHEEL}, {NEURALOP_URL}), \
         {NEURALOP_LICENSE}"
    )
}

/// A published benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Benchmark {
    /// Darcy flow, piecewise-constant coefficient (FNO).
    Darcy,
    /// Navier–Stokes 2-D, ν = 1e-5, 20 frames (FNO).
    Ns2d,
    /// Burgers 1-D, ν = 0.1 (FNO).
    Burgers,
    /// Transonic flow over an airfoil on a C-grid (Geo-FNO).
    Airfoil,
    /// Pipe flow on a structured mesh (Geo-FNO).
    Pipe,
    /// Hyper-elastic unit cell with a void, point cloud (Geo-FNO).
    Elasticity,
    /// The same, interpolated to a 41×41 grid (Geo-FNO `Interp/`).
    ElasticityGrid,
    /// Plastic forging, 20 time steps (Geo-FNO).
    Plasticity,
    /// The Galerkin Transformer's inverse problem on the Darcy files: the coefficient on a
    /// coarse grid from a noisy solution on a fine one (`ex3_darcy_inv.py`).
    DarcyInverse,
    /// Darcy flow, two-phase coefficient, from the neuraloperator 0.3.0 wheel: 1000 training
    /// samples at 16², the same 50 test problems at 16² and 32².
    NeuralopDarcy,
    /// Burgers 1-D, ν = 0.01, from the neuraloperator 0.3.0 wheel: the initial condition to the
    /// 17 × 16 space-time solution, 1200 trajectories.
    NeuralopBurgers,
}

impl Benchmark {
    /// Every benchmark.
    pub const ALL: [Benchmark; 11] = [
        Benchmark::Darcy,
        Benchmark::Ns2d,
        Benchmark::Burgers,
        Benchmark::Airfoil,
        Benchmark::Pipe,
        Benchmark::Elasticity,
        Benchmark::ElasticityGrid,
        Benchmark::Plasticity,
        Benchmark::DarcyInverse,
        Benchmark::NeuralopDarcy,
        Benchmark::NeuralopBurgers,
    ];

    /// The six benchmarks of the ONO paper's tables (and of the model presets named after
    /// them), in the order the presets list them: the one list the plan, the rehearsal's
    /// miniatures, the budget and the presets are views of.
    pub const PAPER: [Benchmark; 6] = [
        Benchmark::Darcy,
        Benchmark::Ns2d,
        Benchmark::Airfoil,
        Benchmark::Pipe,
        Benchmark::Elasticity,
        Benchmark::Plasticity,
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Benchmark::Darcy => "darcy",
            Benchmark::Ns2d => "ns2d",
            Benchmark::Burgers => "burgers",
            Benchmark::Airfoil => "airfoil",
            Benchmark::Pipe => "pipe",
            Benchmark::Elasticity => "elasticity",
            Benchmark::ElasticityGrid => "elasticity_grid",
            Benchmark::Plasticity => "plasticity",
            Benchmark::DarcyInverse => "darcy_inverse",
            Benchmark::NeuralopDarcy => "neuralop_darcy",
            Benchmark::NeuralopBurgers => "neuralop_burgers",
        }
    }

    /// The training and test samples its loader takes in `layout` when `ntrain` / `ntest` are
    /// not given: the reference scripts' splits. (Burgers in the Galerkin layout trains on half
    /// of its file instead of the first number.)
    pub fn default_split(self, layout: Layout) -> (usize, usize) {
        let galerkin = layout == Layout::Galerkin;
        match self {
            Benchmark::Darcy if galerkin => (1024, 100),
            Benchmark::Darcy if layout == Layout::Ono => (1000, 200),
            Benchmark::Darcy => (1000, 100),
            Benchmark::DarcyInverse => (1024, 100),
            Benchmark::Burgers => (1000, 100),
            Benchmark::Plasticity => (900, 80),
            Benchmark::NeuralopDarcy => (1000, 50),
            Benchmark::NeuralopBurgers => (800, 400),
            Benchmark::Ns2d
            | Benchmark::Airfoil
            | Benchmark::Pipe
            | Benchmark::Elasticity
            | Benchmark::ElasticityGrid => (1000, 200),
        }
    }
}

/// One sample's extent in a benchmark's published files: what the paper's runs read before
/// any subsampling. The one statement of the published shapes: [`miniature::write_published`]
/// writes them and the plan's cost estimate counts their points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// The grid's sides (Elasticity: its points; the Burgers sets: their stored x grid).
    pub grid: &'static [usize],
    /// Time steps stored per sample (1 without time).
    pub time_steps: usize,
}

impl Extent {
    const fn steady(grid: &'static [usize]) -> Self {
        Self {
            grid,
            time_steps: 1,
        }
    }
}

impl Benchmark {
    /// One sample's [`Extent`] in the published files.
    pub fn published_extent(self) -> Extent {
        match self {
            Benchmark::Darcy | Benchmark::DarcyInverse => Extent::steady(&[421, 421]),
            Benchmark::Ns2d => Extent {
                grid: &[64, 64],
                time_steps: 20,
            },
            Benchmark::Burgers => Extent::steady(&[8192]),
            Benchmark::Airfoil => Extent::steady(&[221, 51]),
            Benchmark::Pipe => Extent::steady(&[129, 129]),
            Benchmark::Elasticity => Extent::steady(&[972]),
            Benchmark::ElasticityGrid => Extent::steady(&[41, 41]),
            Benchmark::Plasticity => Extent {
                grid: &[101, 31],
                time_steps: 20,
            },
            Benchmark::NeuralopDarcy => Extent::steady(&[16, 16]),
            Benchmark::NeuralopBurgers => Extent {
                grid: &[16],
                time_steps: 17,
            },
        }
    }
}

impl FromStr for Benchmark {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let norm = s.to_ascii_lowercase().replace('-', "_");
        Benchmark::ALL
            .into_iter()
            .find(|b| b.name() == norm)
            .ok_or_else(|| Error::Config {
                what: "benchmark".into(),
                msg: format!(
                    "unknown benchmark `{s}` (known: {})",
                    Benchmark::ALL.map(|b| b.name()).join(", ")
                ),
            })
    }
}

/// Whose script's layout to reproduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Layout {
    /// The ONO scripts (`Darcy_example.py`, `NS_example2.py`, ...).
    #[default]
    Ono,
    /// The FNO / Geo-FNO scripts where they differ (normalizers, test sets).
    Fno,
    /// The Galerkin Transformer's scripts (`ex1_burgers.py`, `ex2_darcy.py`): their
    /// resolutions and splits, and the target derivatives of their H¹ loss as `aux`.
    Galerkin,
}

impl std::str::FromStr for Layout {
    type Err = Error;

    /// The names experiment files use: `ono`, `fno`, `galerkin`.
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ono" => Ok(Self::Ono),
            "fno" => Ok(Self::Fno),
            "galerkin" => Ok(Self::Galerkin),
            _ => Err(Error::Config {
                what: "layout".into(),
                msg: format!("`{s}` is not ono, fno or galerkin"),
            }),
        }
    }
}

/// Sizes and subsampling; `None` means the reference's value.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LoadOptions {
    /// Training samples.
    pub ntrain: Option<usize>,
    /// Test samples.
    pub ntest: Option<usize>,
    /// Subsampling stride r (Darcy: 5; Burgers: 8).
    pub r: Option<usize>,
    /// Whose layout.
    pub layout: Layout,
    /// `darcy_inverse`: the coarse grid's stride on the 421 grid (`subsample_attn`, 12 → 36).
    pub coarse_r: Option<usize>,
    /// `darcy_inverse`: the standard deviation of the Gaussian noise added to the normalized
    /// input (0.01 by default).
    pub noise: Option<f64>,
    /// `neuralop_darcy`: the resolution of the test set, 16 (the default, that of the training
    /// set) or 32 (the same test problems at 32²: a zero-shot test of a model trained at 16²).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub test_resolution: Option<usize>,
}

/// A benchmark read from its files.
#[derive(Debug)]
pub struct Loaded {
    /// The benchmark.
    pub benchmark: Benchmark,
    /// Train and test splits in the layout the models take.
    pub dataset: TensorDataset,
    /// The files read.
    pub files: Vec<PathBuf>,
    /// Facts worth printing (`ono data info`): resolution, split ranges, value checks.
    pub notes: Vec<String>,
}

/// The data folder: `dir` if given, else `$ONO_DATA_DIR`, else `./data`.
pub fn data_dir(dir: Option<&Path>) -> PathBuf {
    match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::var_os(DATA_DIR_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("data")),
    }
}

/// Reads a benchmark from `dir`.
pub fn load(benchmark: Benchmark, dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    if opts.test_resolution.is_some() && benchmark != Benchmark::NeuralopDarcy {
        return Err(Error::Config {
            what: "test_resolution".into(),
            msg: format!(
                "only neuralop_darcy has test sets at several resolutions; {} takes `r`",
                benchmark.name()
            ),
        });
    }
    let loaded = match benchmark {
        Benchmark::Darcy => darcy::load(dir, opts)?,
        Benchmark::Ns2d => ns2d::load(dir, opts)?,
        Benchmark::Burgers => burgers::load(dir, opts)?,
        Benchmark::Airfoil => airfoil::load(dir, opts)?,
        Benchmark::Pipe => pipe::load(dir, opts)?,
        Benchmark::Elasticity => elasticity::load_points(dir, opts)?,
        Benchmark::ElasticityGrid => elasticity::load_grid(dir, opts)?,
        Benchmark::Plasticity => plasticity::load(dir, opts)?,
        Benchmark::DarcyInverse => darcy_inverse::load(dir, opts)?,
        Benchmark::NeuralopDarcy => neuralop_darcy::load(dir, opts)?,
        Benchmark::NeuralopBurgers => neuralop_burgers::load(dir, opts)?,
    };
    loaded.dataset.validate()?;
    Ok(loaded)
}

/// The first of `candidates` that exists in `dir`, or an error naming the file, the benchmark
/// and where it is published.
fn find_file(
    dir: &Path,
    benchmark: Benchmark,
    candidates: &[&str],
    published: &str,
) -> Result<PathBuf> {
    for c in candidates {
        let p = dir.join(c);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(Error::Io {
        path: dir.join(candidates[0]),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!(
                "the {} benchmark needs this file{} in the data folder ({} or --data-dir); it is published in {published}",
                benchmark.name(),
                if candidates.len() > 1 {
                    format!(" (or {})", candidates[1..].join(", "))
                } else {
                    String::new()
                },
                DATA_DIR_ENV
            ),
        ),
    })
}

/// The array called `name` among `arrays`, or an error naming the file and what it holds.
fn take(arrays: &mut Vec<NamedArray>, name: &str, path: &Path) -> Result<NamedArray> {
    match arrays.iter().position(|a| a.name == name) {
        Some(i) => Ok(arrays.swap_remove(i)),
        None => Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!(
                "has no variable `{name}` (it has: {})",
                arrays
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }),
    }
}

/// A float32 tensor of `a`, after checking its rank (and the sizes given as `Some`).
fn tensor_of(a: &NamedArray, path: &Path, dims: &[Option<usize>]) -> Result<Tensor> {
    tensor_of_dtype(a, path, dims, &["float64", "float32"])
}

/// [`tensor_of`] for an array whose dtype is one of `dtypes`.
fn tensor_of_dtype(
    a: &NamedArray,
    path: &Path,
    dims: &[Option<usize>],
    dtypes: &[&str],
) -> Result<Tensor> {
    check_array(a, path, dims, dtypes)?;
    a.to_float_tensor(Kind::Float)
}

/// Checks the rank of `a` (and the sizes given as `Some`) and that its dtype is one of `dtypes`.
fn check_array(a: &NamedArray, path: &Path, dims: &[Option<usize>], dtypes: &[&str]) -> Result<()> {
    let ok = a.shape.len() == dims.len()
        && a.shape
            .iter()
            .zip(dims)
            .all(|(s, d)| d.is_none_or(|d| d == *s));
    if !ok {
        let want: Vec<String> = dims
            .iter()
            .map(|d| d.map_or("*".to_string(), |d| d.to_string()))
            .collect();
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!(
                "variable `{}` has shape {:?} ({}), expected ({})",
                a.name,
                a.shape,
                a.dtype(),
                want.join(", ")
            ),
        });
    }
    if !dtypes.contains(&a.dtype()) {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!(
                "variable `{}` is {}, expected {}",
                a.name,
                a.dtype(),
                dtypes.join(" or ")
            ),
        });
    }
    Ok(())
}

/// Which samples form a split.
#[derive(Debug, Clone, Copy)]
enum Take {
    /// The first n.
    First(usize),
    /// The last n.
    Last(usize),
    /// n samples from an offset.
    Range(usize, usize),
}

impl Take {
    /// `t` narrowed along dim 0, or an error if the file has too few samples.
    fn apply(self, t: &Tensor, what: &str) -> Result<Tensor> {
        let s = t.size()[0] as usize;
        let (from, n) = match self {
            Take::First(n) => (0, n),
            Take::Last(n) => (s.saturating_sub(n), n),
            Take::Range(a, n) => (a, n),
        };
        if n == 0 || from + n > s || n > s {
            return Err(Error::Config {
                what: what.into(),
                msg: format!(
                    "{self:?} needs {} samples, the file has {s} (set ntrain / ntest smaller)",
                    from + n
                ),
            });
        }
        Ok(t.f_narrow(0, from as i64, n as i64)?)
    }

    fn describe(self, total: usize) -> String {
        match self {
            Take::First(n) => format!("[0, {n})"),
            Take::Last(n) => format!("[{}, {total})", total.saturating_sub(n)),
            Take::Range(a, n) => format!("[{a}, {})", a + n),
        }
    }
}

/// 1-D positions linspace(0, 1, n) as (1, n, 1): the point index the ONO scripts use as the
/// coordinate on meshes (Pipe, Elasticity, Plasticity).
fn index_positions(n: i64) -> Result<Tensor> {
    Ok(Tensor::f_linspace(0.0, 1.0, n, (Kind::Float, tch::Device::Cpu))?.f_view([1, n, 1])?)
}

fn split(fx: Tensor, y: Tensor, pos: Tensor) -> Split {
    Split::new(fx, y, pos)
}

/// (name, type, shape) of every variable of a benchmark file: MAT files are listed without
/// inflating their data; other formats are read (torch.save files with torch's dtypes: `bool`
/// stays `bool`).
pub fn list_file(path: &Path) -> Result<Vec<(String, String, Vec<usize>)>> {
    if crate::readers::any::sniff(path)? == crate::readers::any::Format::TorchPt {
        return crate::readers::torch_pt::list_pt(path);
    }
    let is_mat = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("mat"));
    if is_mat {
        if let Ok(vars) = crate::readers::mat_v5::list(path) {
            return Ok(vars
                .into_iter()
                .map(|v| (v.name, v.class, v.shape))
                .collect());
        }
    }
    Ok(crate::readers::any::read_any(path, None)?
        .into_iter()
        .map(|a| (a.name.clone(), a.dtype().to_string(), a.shape.clone()))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::Layout;

    /// `--layout` reads the names experiment files use (serde's), and nothing else.
    #[test]
    fn layout_names_are_the_experiment_files() {
        for layout in [Layout::Ono, Layout::Fno, Layout::Galerkin] {
            let name = serde_json::to_value(layout).unwrap();
            let name = name.as_str().unwrap();
            assert_eq!(name.parse::<Layout>().unwrap(), layout);
        }
        assert!("FNO2d".parse::<Layout>().is_err());
    }
}
