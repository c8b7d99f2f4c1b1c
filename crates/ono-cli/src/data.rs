//! `ono data`: benchmark file info, data generators, miniature benchmark copies.

use std::path::PathBuf;

use anyhow::Result;
use clap::Subcommand;
use ono_data::benchmarks::{Benchmark, Layout, LoadOptions};
use ono_data::normalizer::{Normalizer, NormalizerKind};
use ono_train::recipe::recipe;
use tch::{Kind, Tensor};

use crate::device;

#[derive(Subcommand)]
pub enum DataCmd {
    /// What a benchmark's files hold: the files found, their arrays (shapes, dtypes), the split
    /// sizes, the subsampled resolution, value ranges and the fitted normalizer statistics. Or
    /// what a dataset file (of `ono data import`, `ono data darcy`, …) holds: its layout, the
    /// splits, the channels and their ranges over the real points, where it was imported from.
    Info {
        /// darcy, ns2d, burgers, airfoil, pipe, elasticity, elasticity_grid, plasticity,
        /// darcy_inverse, neuralop_darcy, neuralop_burgers; or a dataset file.
        benchmark: String,
        /// The folder with the files (default: $ONO_DATA_DIR, else ./data).
        #[arg(long)]
        data_dir: Option<PathBuf>,
        /// Training samples (default: the reference split).
        #[arg(long)]
        ntrain: Option<usize>,
        /// Test samples (default: the reference split).
        #[arg(long)]
        ntest: Option<usize>,
        /// Subsampling stride (default: the reference's).
        #[arg(long)]
        r: Option<usize>,
        /// ono, fno or galerkin.
        #[arg(long, default_value = "ono")]
        layout: String,
        /// darcy_inverse: the coarse grid's stride on the 421 grid (default 12 → 36).
        #[arg(long)]
        coarse_r: Option<usize>,
        /// darcy_inverse: the noise on the normalized input (default 0.01).
        #[arg(long)]
        noise: Option<f64>,
        /// neuralop_darcy: the test set's resolution, 16 (default) or 32.
        #[arg(long)]
        test_resolution: Option<usize>,
    },
    /// Generate a data set by the published process and write it in the original file layout
    /// (MAT v5, as the published files), with a metadata JSON beside it (seed, parameters,
    /// solver, version). Sample i depends only on (seed, i).
    Gen(GenArgs),
    /// Write a miniature copy of a benchmark's files (original names, formats and layouts, a few
    /// samples) into a folder, to try the loaders and `ono train` without the real data.
    Miniature {
        /// The benchmark.
        benchmark: String,
        /// Where to write.
        #[arg(long)]
        out: PathBuf,
        /// The MAT files' version: 5 (the published files') or 7.3 (HDF5).
        #[arg(long, default_value = "5")]
        mat: String,
    },
    /// Darcy flow (FNO's process: GRF coefficient thresholded to 12/3, −∇·(a∇u) = 1 solved with
    /// the reference finite differences) at a chosen resolution, as a dataset file for
    /// `ono train`.
    Darcy(DarcyArgs),
    /// Darcy flow (as `ono data darcy`) sampled on a random triangulation of the unit square per
    /// sample and written as VTU files, one per sample, each with its own number of points:
    /// the example data of docs/data.md, "Your own data".
    DarcyVtu {
        /// Samples (files).
        #[arg(long, default_value_t = 40)]
        n: usize,
        /// The solver's grid K (K×K cell centres).
        #[arg(long, default_value_t = 33)]
        res: usize,
        /// The fewest points of a sample's mesh.
        #[arg(long, default_value_t = 200)]
        min_points: usize,
        /// The most points of a sample's mesh.
        #[arg(long, default_value_t = 300)]
        max_points: usize,
        /// Seed; sample i depends only on (seed, i).
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// The folder to write into.
        #[arg(long)]
        out: PathBuf,
    },
    /// Import your own data as a dataset file for `ono train` and `ono compare`: VTK meshes
    /// (.vtk, .vtu, .vtp; one sample per file, point or cell data) or arrays (.npy, .npz, .mat,
    /// .h5, .safetensors, .pt; one sample per file or every sample along the first axis).
    /// Samples of different sizes become padded point clouds, samples on one shared grid a grid;
    /// what is not named is inferred, and said.
    Import(ImportArgs),
}

/// `ono data import`'s arguments.
#[derive(clap::Args)]
pub struct ImportArgs {
    /// Files, or folders whose files are taken in name order.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// The dataset file to write (safetensors).
    #[arg(long)]
    pub out: PathBuf,
    /// The arrays the model reads at each point, comma-separated (default: every array but
    /// the targets and coordinates).
    #[arg(long, value_delimiter = ',')]
    pub inputs: Option<Vec<String>>,
    /// The arrays the model learns to predict, comma-separated (default: the last array).
    #[arg(long, value_delimiter = ',')]
    pub targets: Option<Vec<String>>,
    /// The coordinates: an array ((N, d), or (S, N, d) with samples along the first axis);
    /// VTK: the mesh's points unless an array is named (`points` names them). Default: the
    /// mesh's points; for arrays one named coords, coordinates, pos, positions, points, mesh,
    /// xyz or grid, else the arrays' own grid on [0, 1].
    #[arg(long)]
    pub coords: Option<String>,
    /// VTK: learn the cell data (positions: the cell centres).
    #[arg(long, conflicts_with = "point_data")]
    pub cell_data: bool,
    /// VTK: learn the point data (the default unless the files have cell data only).
    #[arg(long)]
    pub point_data: bool,
    /// Array files: `per-file` (each file one sample; the default for several files) or
    /// `leading` (every array holds the samples along its first axis; the default for one file).
    #[arg(long)]
    pub samples: Option<String>,
    /// The fraction of samples held out for testing.
    #[arg(long, default_value_t = 0.2)]
    pub test_fraction: f64,
    /// The seed of the split.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Store float64 (default float32).
    #[arg(long)]
    pub float64: bool,
}

/// `ono data darcy`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct DarcyArgs {
    /// Training samples.
    #[arg(long, default_value_t = 1000)]
    pub n_train: usize,
    /// Test samples.
    #[arg(long, default_value_t = 200)]
    pub n_test: usize,
    /// Grid size K (K×K cell centres; 421 in the published data).
    #[arg(long, default_value_t = 85)]
    pub res: usize,
    /// Keep every r-th cell of the K×K solution in each direction (the ONO scripts use r = 5
    /// on 421); coarse data are best made this way.
    #[arg(long, default_value_t = 1)]
    pub stride: usize,
    /// Seed; sample i depends only on (seed, i).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Keep N distinct cells of each sample's (strided) grid, chosen at random per sample
    /// (by (seed, i)): point clouds with positions per sample and no grid, a stand-in for
    /// unstructured data such as Elasticity's.
    #[arg(long)]
    pub points: Option<i64>,
    /// Output file (safetensors).
    #[arg(long)]
    pub out: PathBuf,
}

/// `ono data gen`'s arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct GenArgs {
    /// darcy, ns2d or burgers.
    pub kind: String,
    /// Number of samples.
    #[arg(long)]
    pub n: usize,
    /// Solver grid (Darcy K: 421 published; NS: 256; Burgers: 8192).
    #[arg(long)]
    pub res: Option<usize>,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output .mat file (for example data/piececonst_r421_N1024_smooth1.mat).
    #[arg(long)]
    pub out: PathBuf,
    /// NS2d: `full` (256², Δt 1e-4, stored 64²) or `reduced` (64² solve, IF-RK4 at Δt 0.02;
    /// see docs/data.md).
    #[arg(long, default_value = "full")]
    pub profile: String,
    /// NS2d: cpu, cuda or cuda:N.
    #[arg(long, default_value = "cpu")]
    pub device: String,
    /// NS2d: final time (20 published); fewer frames for quick sets.
    #[arg(long)]
    pub t_final: Option<f64>,
    /// NS2d: samples solved together (20 in the original; 100 or more fill a large GPU).
    /// The samples do not depend on it.
    #[arg(long)]
    pub batch: Option<usize>,
    /// NS2d: the time integrator, `cn-euler` (ns_2d.py's, Δt 1e-4) or `if-rk4` (Δt 0.02);
    /// default: the profile's.
    #[arg(long)]
    pub scheme: Option<String>,
}

/// Runs one `ono data` command.
pub fn run(cmd: DataCmd) -> Result<()> {
    match cmd {
        DataCmd::Info {
            benchmark,
            data_dir,
            ntrain,
            ntest,
            r,
            layout,
            coarse_r,
            noise,
            test_resolution,
        } => {
            if std::path::Path::new(&benchmark).is_file() {
                return file_info(std::path::Path::new(&benchmark));
            }
            let layout: Layout = layout
                .parse()
                .map_err(|_| anyhow::anyhow!("--layout: `{layout}` is not ono, fno or galerkin"))?;
            let opts = LoadOptions {
                ntrain,
                ntest,
                r,
                layout,
                coarse_r,
                noise,
                test_resolution,
            };
            data_info(&benchmark, data_dir, &opts)
        }
        DataCmd::Gen(args) => generate(&args),
        DataCmd::Import(args) => data_import(args),
        DataCmd::DarcyVtu {
            n,
            res,
            min_points,
            max_points,
            seed,
            out,
        } => {
            anyhow::ensure!(n >= 2, "--n must be at least 2");
            let cfg = ono_pde::darcy_flow::DarcyConfig {
                resolution: res,
                ..Default::default()
            };
            let start = std::time::Instant::now();
            let bar = progress_bar(n as u64, "darcy");
            // The solver's split is only a numbering here (sample i depends on (seed, i)): every
            // sample becomes a file, and `ono data import` makes the split.
            let grid = cfg
                .dataset_with_progress(n - n / 2, n / 2, seed, 1, |done, _| bar.set(done as u64))?;
            bar.finish();
            let m = ono_data::example_meshes::write_vtu_samples(
                &grid, &out, min_points, max_points, seed,
            )?;
            eprintln!(
                "wrote {} Darcy samples on their own triangulations ({} to {} points; point data `a` the coefficient, `u` the solution) to {} in {:.1} s",
                m.files.len(),
                m.points.0,
                m.points.1,
                out.display(),
                start.elapsed().as_secs_f64()
            );
            Ok(())
        }
        DataCmd::Miniature {
            benchmark,
            out,
            mat,
        } => {
            use ono_data::benchmarks::miniature::{self, MatVersion};
            let b: Benchmark = benchmark.parse()?;
            let mat = match mat.as_str() {
                "5" => MatVersion::V5,
                "7.3" => MatVersion::V73,
                other => anyhow::bail!("--mat: `{other}` is not 5 or 7.3"),
            };
            let m = miniature::write_as(b, &out, mat)?;
            eprintln!(
                "wrote a miniature {} ({} samples per file; use ntrain = {}, ntest = {}) to {}",
                b.name(),
                m.samples,
                m.ntrain,
                m.ntest,
                out.display()
            );
            Ok(())
        }
        DataCmd::Darcy(args) => darcy(&args),
    }
}

/// `ono data darcy`: Darcy flow at a chosen resolution as a dataset file, on its grid or as
/// point clouds.
pub fn darcy(args: &DarcyArgs) -> Result<()> {
    let DarcyArgs {
        n_train,
        n_test,
        res,
        stride,
        seed,
        points,
        out,
    } = args.clone();
    let k = res.div_ceil(stride.max(1));
    if let Some(p) = points {
        // Before the solve, not after it.
        anyhow::ensure!(
            p >= 1 && p as usize <= k * k,
            "--points must be in [1, {}] (the cells of the {k}×{k} grid), got {p}",
            k * k
        );
    }
    let cfg = ono_pde::darcy_flow::DarcyConfig {
        resolution: res,
        ..Default::default()
    };
    let start = std::time::Instant::now();
    let bar = progress_bar((n_train + n_test) as u64, "darcy");
    let grid = cfg.dataset_with_progress(n_train, n_test, seed, stride, |done, _| {
        bar.set(done as u64)
    })?;
    bar.finish();
    let (ds, layout) = match points {
        Some(p) => (
            ono_data::point_cloud::scatter_grid(&grid, p, seed)?,
            format!("{p} random points of {k}×{k}"),
        ),
        None => (grid, format!("{k}×{k}")),
    };
    ds.write(&out)?;
    eprintln!(
        "wrote {n_train} + {n_test} Darcy samples at {layout} (solved at {res}×{res}) to {} in {:.1} s",
        out.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

fn data_import(a: ImportArgs) -> Result<()> {
    use ono_data::import::{self, Association, ImportLayout, ImportOptions, SampleAxis};
    let samples = match a.samples.as_deref() {
        None => None,
        Some("per-file") => Some(SampleAxis::PerFile),
        Some("leading") => Some(SampleAxis::Leading),
        Some(other) => anyhow::bail!("--samples: `{other}` is not per-file or leading"),
    };
    let o = ImportOptions {
        inputs: a.inputs,
        targets: a.targets,
        coords: a.coords,
        association: match (a.cell_data, a.point_data) {
            (true, _) => Some(Association::Cell),
            (_, true) => Some(Association::Point),
            _ => None,
        },
        samples,
        test_fraction: a.test_fraction,
        seed: a.seed,
        kind: if a.float64 { Kind::Double } else { Kind::Float },
    };
    let im = import::import(&a.paths, &o)?;
    for line in &im.inferred {
        eprintln!("inferred {line}");
    }
    import::write(&im, &a.out)?;
    let m = &im.manifest;
    let fields = |f: &[import::Field]| -> String {
        f.iter()
            .map(|f| format!("{} ({})", f.name, f.components))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let layout = match &m.layout {
        ImportLayout::Grid { shape, .. } => format!("grid {shape:?}"),
        ImportLayout::PointCloud { ragged: true } => format!(
            "point clouds of up to {} points",
            im.dataset.train.points().max(im.dataset.test.points())
        ),
        ImportLayout::PointCloud { ragged: false } => {
            format!("point clouds of {} points", im.dataset.train.points())
        }
    };
    eprintln!(
        "wrote {} train + {} test samples ({layout}; inputs {}; targets {}; {} coordinates) to {}",
        m.train.len(),
        m.test.len(),
        if m.inputs.is_empty() {
            "none".into()
        } else {
            fields(&m.inputs)
        },
        fields(&m.targets),
        im.dataset.train.pos.size()[2],
        a.out.display()
    );
    Ok(())
}

/// `ono data info FILE`: a dataset file described.
fn file_info(path: &std::path::Path) -> Result<()> {
    let ds = ono_data::dataset::TensorDataset::read(path)?;
    let size = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    println!(
        "dataset file {} ({:.1} MB)",
        path.display(),
        size as f64 / 1e6
    );
    let channels = |t: &Tensor| t.size().get(2).copied().unwrap_or(0);
    match &ds.grid {
        Some(g) => println!("layout: a grid {g:?} (row-major)"),
        None => {
            let lengths: Vec<i64> = [&ds.train, &ds.test]
                .iter()
                .flat_map(|s| match &s.lengths {
                    Some(l) => l.clone(),
                    None => vec![s.points(); s.len() as usize],
                })
                .collect();
            let (lo, hi) = (
                lengths.iter().min().copied().unwrap_or(0),
                lengths.iter().max().copied().unwrap_or(0),
            );
            if lo == hi {
                println!("layout: point clouds of {hi} points");
            } else {
                println!("layout: point clouds of {lo} to {hi} points (padded, with each sample's length)");
            }
        }
    }
    println!(
        "channels: {} coordinates, {} inputs, {} targets",
        channels(&ds.train.pos),
        channels(&ds.train.fx),
        channels(&ds.train.y)
    );
    for (name, split) in [("train", &ds.train), ("test", &ds.test)] {
        // The real rows of every sample, padding left out.
        let real = |t: &Tensor| -> Result<Tensor> {
            let rows = match &split.lengths {
                Some(lengths) => Tensor::f_cat(
                    &lengths
                        .iter()
                        .enumerate()
                        .map(|(i, &l)| t.f_get(i as i64)?.f_narrow(0, 0, l))
                        .collect::<Result<Vec<_>, _>>()?,
                    0,
                )?,
                None => t.f_reshape([-1, channels(t)])?,
            };
            Ok(rows.f_to_kind(Kind::Double)?)
        };
        let ranges = |t: &Tensor| -> Result<String> {
            let rows = real(t)?;
            let (lo, hi) = (rows.f_amin(0, false)?, rows.f_amax(0, false)?);
            let (lo, hi) = (Vec::<f64>::try_from(&lo)?, Vec::<f64>::try_from(&hi)?);
            Ok(lo
                .iter()
                .zip(&hi)
                .map(|(a, b)| format!("[{a:.4e}, {b:.4e}]"))
                .collect::<Vec<_>>()
                .join(" "))
        };
        println!("{name}: {} samples", split.len());
        for (what, t) in [
            ("coordinates", &split.pos),
            ("inputs", &split.fx),
            ("targets", &split.y),
        ] {
            if channels(t) > 0 && t.dim() == 3 {
                println!("  {what:<11} {}", ranges(t)?);
            }
        }
    }
    if let Some(m) = ono_data::import::read_manifest(path)? {
        let fields = |f: &[ono_data::import::Field]| {
            f.iter()
                .map(|f| format!("{} ({})", f.name, f.components))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let first = m.train.first().or(m.test.first());
        println!(
            "imported ({:?} files, {:?} data) from {} files{}: inputs {}; targets {}; coordinates {:?}; test fraction {}, seed {}",
            m.format,
            m.association,
            m.train.len() + m.test.len(),
            first.map_or(String::new(), |s| format!(" (first {})", s.file.display())),
            fields(&m.inputs),
            fields(&m.targets),
            m.coords,
            m.test_fraction,
            m.seed
        );
    }
    Ok(())
}

fn data_info(benchmark: &str, data_dir: Option<PathBuf>, opts: &LoadOptions) -> Result<()> {
    let b: Benchmark = benchmark
        .parse()
        .map_err(|e| anyhow::anyhow!("{e} (nor is `{benchmark}` a dataset file: no such file)"))?;
    let layout = opts.layout;
    let dir = ono_data::benchmarks::data_dir(data_dir.as_deref());
    let loaded = ono_data::benchmarks::load(b, &dir, opts)?;
    println!(
        "benchmark {} ({layout:?} layout), data folder {}",
        b.name(),
        dir.display()
    );
    for f in &loaded.files {
        let size = std::fs::metadata(f).map(|m| m.len()).unwrap_or(0);
        println!("file {} ({:.1} MB)", f.display(), size as f64 / 1e6);
        for v in ono_data::benchmarks::list_file(f)? {
            println!("  {:<28} {:<8} {:?}", v.0, v.1, v.2);
        }
    }
    for n in &loaded.notes {
        println!("{n}");
    }
    let d = &loaded.dataset;
    for (name, s) in [("train", &d.train), ("test", &d.test)] {
        println!(
            "{name}: fx {:?} range [{:.6e}, {:.6e}], y {:?} range [{:.6e}, {:.6e}], pos {:?}",
            s.fx.size(),
            s.fx.min().double_value(&[]),
            s.fx.max().double_value(&[]),
            s.y.size(),
            s.y.min().double_value(&[]),
            s.y.max().double_value(&[]),
            s.pos.size()
        );
        for (what, t) in [("query", &s.query), ("aux", &s.aux)] {
            if let Some(t) = t {
                println!("{name}: {what} {:?}", t.size());
            }
        }
    }
    let rcp = recipe(b, layout);
    println!(
        "recipe: regime {:?}, normalize_x {:?}, normalize_y {:?}, derivative_alpha {}, loss {:?} (h1_gamma {}), preset {}",
        rcp.regime,
        rcp.normalize_x,
        rcp.normalize_y,
        rcp.derivative_alpha,
        rcp.loss,
        rcp.h1_gamma,
        rcp.preset.unwrap_or("(none)")
    );
    for (what, kind, t) in [
        ("x", rcp.normalize_x, &d.train.fx),
        ("y", rcp.normalize_y, &d.train.y),
    ] {
        let n = Normalizer::fit(kind, t)?;
        if kind == NormalizerKind::None {
            continue;
        }
        let show = |t: &Tensor| -> String {
            let v = Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap_or_default();
            if v.len() <= 8 {
                format!(
                    "{:?}",
                    v.iter().map(|x| format!("{x:.6e}")).collect::<Vec<_>>()
                )
            } else {
                format!(
                    "{} values in [{:.6e}, {:.6e}]",
                    v.len(),
                    v.iter().cloned().fold(f64::MAX, f64::min),
                    v.iter().cloned().fold(f64::MIN, f64::max)
                )
            }
        };
        println!(
            "normalizer {what} ({kind:?}, fitted on train): mean {}, std {}",
            show(n.mean()),
            show(n.std())
        );
    }
    Ok(())
}

/// `ono data gen`: a benchmark's data from the project's solvers, as the published files.
pub fn generate(args: &GenArgs) -> Result<()> {
    let GenArgs {
        kind,
        n,
        res,
        seed,
        out,
        profile,
        device: dev,
        t_final,
        batch,
        scheme,
    } = args;
    let (kind, n, res, seed, out) = (kind.as_str(), *n, *res, *seed, out.as_path());
    anyhow::ensure!(n > 0, "--n must be at least 1");
    // Refuse an unwritable destination before the solve, not after it.
    let parent = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => std::path::Path::new("."),
    };
    anyhow::ensure!(
        parent.is_dir(),
        "--out {}: the folder {} does not exist",
        out.display(),
        parent.display()
    );
    let start = std::time::Instant::now();
    let bar = progress_bar(n as u64, kind);
    let (config, solver): (serde_json::Value, &str) = match kind {
        "darcy" => {
            let cfg = ono_pde::darcy_flow::DarcyConfig {
                resolution: res.unwrap_or(421),
                ..Default::default()
            };
            let (coeff, sol) =
                cfg.generate_with_progress(0, n, seed, |done, _| bar.set(done as u64))?;
            ono_pde::darcy_flow::write_mat(out, &coeff, &sol)?;
            (serde_json::to_value(cfg)?, "GRF (α 2, τ 3, orthonormal inverse DCT) thresholded 12/3; not-a-knot spline to nodes; 5-point FD, multigrid-preconditioned CG; spline back to cell centres")
        }
        "ns2d" => {
            use ono_pde::navier_stokes::TimeScheme;
            let mut cfg = match profile.as_str() {
                "full" => ono_pde::navier_stokes::NsConfig::fno(device(dev)?),
                "reduced" => ono_pde::navier_stokes::NsConfig {
                    device: device(dev)?,
                    ..ono_pde::navier_stokes::NsConfig::reduced()
                },
                p => anyhow::bail!("--profile: `{p}` is not full or reduced"),
            };
            if let Some(r) = res {
                cfg.resolution = r;
            }
            if let Some(t) = t_final {
                cfg.t_final = *t;
            }
            if let Some(b) = batch {
                cfg.batch_size = *b;
            }
            match scheme.as_deref() {
                None => {}
                Some("cn-euler") => {
                    cfg.scheme = TimeScheme::CrankNicolsonEuler;
                    cfg.dt = 1e-4;
                }
                Some("if-rk4") => {
                    cfg.scheme = TimeScheme::IfRk4;
                    cfg.dt = ono_pde::navier_stokes::NsConfig::reduced().dt;
                }
                Some(s) => anyhow::bail!("--scheme: `{s}` is not cn-euler or if-rk4"),
            }
            // Progress in sample-snapshots: a batch advances all its samples together.
            let (a, u) = cfg.generate_with_progress(n, seed, |done, total| {
                bar.set((done * n / total.max(1)) as u64)
            })?;
            cfg.write_mat(out, &a, &u)?;
            let solver = match cfg.scheme {
                TimeScheme::CrankNicolsonEuler => "pseudo-spectral vorticity form, Crank–Nicolson diffusion, forward-Euler advection and forcing, 2/3 dealiasing (FNO ns_2d.py)",
                TimeScheme::IfRk4 => "pseudo-spectral vorticity form, integrating-factor RK4 (exact diffusion, RK4 advection and forcing), 2/3 dealiasing",
            };
            (serde_json::to_value(cfg)?, solver)
        }
        "burgers" => {
            let cfg = ono_pde::burgers_equation::BurgersConfig {
                resolution: res.unwrap_or(8192),
                ..Default::default()
            };
            let (a, u) = cfg.generate_with_progress(n, seed, 0, |done, _| bar.set(done as u64))?;
            ono_pde::burgers_equation::write_mat(out, &a, &u)?;
            (
                serde_json::to_value(cfg)?,
                "Fourier spectral, ETDRK4 (Kassam–Trefethen contour integrals), as chebfun spin",
            )
        }
        k => anyhow::bail!("unknown generator `{k}` (darcy, ns2d, burgers)"),
    };
    bar.finish();
    let meta = serde_json::json!({
        "generator": kind,
        "ono_version": env!("CARGO_PKG_VERSION"),
        "seed": seed,
        "samples": n,
        "sample_stream": "sample i is drawn from ChaCha8(seed) on stream i",
        "config": config,
        "solver": solver,
        "file": out.file_name().map(|f| f.to_string_lossy().to_string()),
        "seconds": start.elapsed().as_secs_f64(),
    });
    let meta_path = std::path::PathBuf::from(format!("{}.json", out.display()));
    ono_io::atomic::write_atomic(&meta_path, serde_json::to_string_pretty(&meta)?.as_bytes())?;
    eprintln!(
        "wrote {n} {kind} samples to {} (+ {}) in {:.1} s",
        out.display(),
        meta_path.display(),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A generator's progress: a bar on a terminal; elsewhere (a log file, `reproduce`'s captured
/// output) a line at every tenth, so that a long generation is never silent.
struct GenProgress {
    bar: indicatif::ProgressBar,
    what: String,
    len: u64,
    lines: Option<std::sync::atomic::AtomicU64>,
    start: std::time::Instant,
}

impl GenProgress {
    fn set(&self, done: u64) {
        self.bar.set_position(done);
        if let Some(printed) = &self.lines {
            let tenth = done * 10 / self.len.max(1);
            if printed.fetch_max(tenth, std::sync::atomic::Ordering::Relaxed) < tenth {
                eprintln!(
                    "{}: {done}/{} samples, {:.0} s",
                    self.what,
                    self.len,
                    self.start.elapsed().as_secs_f64()
                );
            }
        }
    }

    fn finish(&self) {
        self.bar.finish();
    }
}

fn progress_bar(n: u64, what: &str) -> GenProgress {
    use std::io::IsTerminal;
    let bar = indicatif::ProgressBar::new(n);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{prefix} [{bar:30}] {pos}/{len} samples {per_sec} ETA {eta}",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    GenProgress {
        bar,
        what: what.to_string(),
        len: n,
        lines: (!std::io::stderr().is_terminal()).then(|| std::sync::atomic::AtomicU64::new(0)),
        start: std::time::Instant::now(),
    }
}
