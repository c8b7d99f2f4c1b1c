//! `ono predict`: a checkpoint's predictions for the inputs of a safetensors file, or for the
//! samples of a dataset imported by `ono data import`, written back on each sample's own mesh
//! (VTK XML, to open in ParaView) or as NumPy archives.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use ono_data::array::{ArrayData, NamedArray};
use ono_data::dataset::Split;
use ono_data::import::{ImportManifest, SampleRef};
use ono_data::readers::vtk::MeshArray;
use ono_train::{Predictor, Regime};
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::device;

/// Reads `fx` (S, N, Cf), `pos` (1 or S, N, d) and optionally `grid`, `query` (1 or S, M, d,
/// the output points of a model trained with query points) and `query_grid` from `input`,
/// writes `pred` to `output`. Samples of different sizes (`lengths` (S,), rows beyond them
/// padding), global parameters `theta` (S, n_θ) and input functions on their own points (`f0`,
/// `f1`, … (S, L_j, c_j) with optional `f0.lengths`, …) are predicted `batch` samples per pass,
/// as the model was trained (an unmasked GNOT depends on its batches).
#[allow(clippy::too_many_arguments)]
pub fn run(
    checkpoint: PathBuf,
    input: PathBuf,
    output: PathBuf,
    steps: i64,
    batch: i64,
    dev: &str,
    format: Format,
    split: SplitChoice,
    split_points: bool,
    graphs: ono_train::graphs::Graphs,
) -> Result<()> {
    let dev = device(dev)?;
    let load = |checkpoint: &PathBuf| -> Result<_> {
        let (mut p, state) = Predictor::from_checkpoint(checkpoint, dev)?;
        if let Some(note) = p.set_graphs(graphs)? {
            eprintln!("{note}");
        }
        Ok((p, state))
    };
    if split_points {
        return on_split_points(&checkpoint, &input, &output, dev, format);
    }
    // A dataset of `ono data import` carries how to put each sample back on its mesh.
    if let Ok(Some(manifest)) = ono_data::import::read_manifest(&input) {
        let (p, state) = load(&checkpoint)?;
        // No more samples per forward pass than in training: a model trained a sample at a
        // time (no padding mask) predicts so too.
        let trained = (state.config.batch_size.max(1) as u64).div_ceil(state.micro_batches.max(1));
        let batch = batch.min(trained as i64);
        let fx_as_function = state.config.data.fx_as_function;
        return imported(
            &p,
            &input,
            &manifest,
            &output,
            batch,
            format,
            split,
            fx_as_function,
        );
    }
    anyhow::ensure!(
        format != Format::Vtu,
        "--format vtu: {} is not a dataset of `ono data import`, so it has no meshes to write on",
        input.display()
    );
    let (p, _) = load(&checkpoint)?;
    let named = InputFile::read(&input)?;
    let get = |k: &str| {
        named
            .get(k)
            .with_context(|| format!("{}: no array `{k}`", input.display()))
            .and_then(|t| Ok(t.f_to_device(dev)?.f_to_kind(p.kind())?))
    };
    let fx = get("fx")?;
    // Samples of different sizes, θ or input functions on their own points (GNOT's data).
    let ragged = ["lengths", "theta", "f0"]
        .iter()
        .any(|k| named.contains_key(k));
    if ragged {
        let sizes = |k: &str| -> Result<Option<Vec<i64>>> {
            named
                .get(k)
                .map(|t| {
                    Vec::<i64>::try_from(t.f_to_kind(Kind::Int64)?.f_reshape([-1])?).with_context(
                        || format!("{}: `{k}` is not a list of lengths", input.display()),
                    )
                })
                .transpose()
        };
        let s = fx.size();
        anyhow::ensure!(
            s.len() == 3,
            "{}: fx must be (S, N, C), got {s:?}",
            input.display()
        );
        let mut split = ono_data::dataset::Split::new(
            fx.shallow_clone(),
            Tensor::zeros([s[0], s[1], 1], (p.kind(), Device::Cpu)),
            get("pos")?,
        );
        split.lengths = sizes("lengths")?;
        split.theta = named.get("theta").map(|_| get("theta")).transpose()?;
        for j in 0.. {
            let k = format!("f{j}");
            if !named.contains_key(&k) {
                break;
            }
            split.functions.push(ono_data::dataset::FunctionSplit {
                values: get(&k)?,
                lengths: sizes(&format!("{k}.lengths"))?,
            });
        }
        split
            .validate("input")
            .with_context(|| format!("{}: not a valid set of samples", input.display()))?;
        let pred = p.predict_samples(&split, batch)?;
        return write_pred(&output, &pred, format);
    }
    let mut pos = get("pos")?;
    if pos.dim() == 3 && pos.size()[0] == 1 && fx.dim() == 3 {
        pos = pos.expand([fx.size()[0], -1, -1], false);
    }
    let shape = |k: &str| named.sizes(k);
    let points = |t: &Option<Vec<i64>>, n: i64| {
        t.clone()
            .filter(|g| fx.dim() == 3 && g.iter().product::<i64>() == n)
    };
    // The inputs' grid: given in the file, else the training grid when the point counts agree.
    let grid = match shape("grid")? {
        Some(g) => Some(g),
        None => points(&p.grid, fx.size().get(1).copied().unwrap_or(0)),
    };
    let query = match named.get("query") {
        Some(_) => {
            let mut q = get("query")?;
            if q.dim() == 3 && q.size()[0] == 1 && fx.dim() == 3 {
                q = q.expand([fx.size()[0], -1, -1], false);
            }
            Some(q)
        }
        None => None,
    };
    let query_grid = match (&query, shape("query_grid")?) {
        (Some(_), Some(g)) => Some(g),
        (Some(q), None) => points(&p.query_grid, q.size().get(1).copied().unwrap_or(0)),
        (None, _) => None,
    };
    let steps = if p.regime == Regime::Steady { 0 } else { steps };
    let pred = p.predict(
        &pos,
        &fx,
        steps,
        grid.as_deref(),
        query.as_ref().map(|q| (q, query_grid.as_deref())),
    )?;
    write_pred(&output, &pred, format)
}

/// `--split-points`: this process, one of a launch (torchrun, srun, mpirun), predicts its
/// contiguous share of every sample's points ([`ono_data::dataset::point_share`]) with the
/// model's sums over points all-reduced, as a point-sharded run trains; rank 0 gathers the
/// shares and writes the whole predictions. Steady samples of one size at their input points.
fn on_split_points(
    checkpoint: &Path,
    input: &Path,
    output: &Path,
    dev: Device,
    format: Format,
) -> Result<()> {
    use ono_train::parallel::{timeout_from_env, DataParallel};
    anyhow::ensure!(
        !matches!(ono_data::import::read_manifest(input), Ok(Some(_))) && format != Format::Vtu,
        "--split-points: the samples of an imported dataset (and VTU output) are not split over \
         points yet; give a safetensors file with `fx` and `pos`"
    );
    let parallel = DataParallel::from_env(dev, timeout_from_env()?)?.context(
        "--split-points: no launcher started this process; run it under torchrun, srun or mpirun",
    )?;
    let dev = DataParallel::device_for(parallel.launch(), dev);
    let (p, _) = Predictor::from_checkpoint(checkpoint, dev)?;
    let named = InputFile::read(input)?;
    for k in ["lengths", "theta", "f0", "query"] {
        anyhow::ensure!(
            !named.contains_key(k),
            "--split-points: {}: `{k}` is not split over points yet",
            input.display()
        );
    }
    let get = |k: &str| {
        named
            .get(k)
            .with_context(|| format!("{}: no array `{k}`", input.display()))
            .and_then(|t| Ok(t.f_to_kind(p.kind())?))
    };
    let (fx, pos) = (get("fx")?, get("pos")?);
    let (fs, ps) = (fx.size(), pos.size());
    anyhow::ensure!(
        fs.len() == 3 && ps.len() == 3 && ps[1] == fs[1] && (ps[0] == 1 || ps[0] == fs[0]),
        "{}: fx (S, N, C) and pos (1 or S, N, d) on the same points, got {fs:?} and {ps:?}",
        input.display()
    );
    let n = fs[1];
    let (start, len) = ono_data::dataset::point_share(n, parallel.rank(), parallel.world());
    let share = |t: &Tensor| -> Result<Tensor> {
        Ok(t.f_narrow(1, start, len)?
            .f_expand([fs[0], len, t.size()[2]], false)?
            .f_to_device(dev)?)
    };
    // The whole samples' grid, for pointwise normalizers: the file's, else the training one's.
    let grid = match named.sizes("grid")? {
        Some(g) => Some(g),
        None => p.grid.clone().filter(|g| g.iter().product::<i64>() == n),
    };
    let pred = parallel.with_split_points(|| {
        p.predict_point_share(&share(&pos)?, &share(&fx)?, (start, len), grid.as_deref())
            .map_err(anyhow::Error::from)
    })?;
    let whole = parallel.gather_point_shares(&pred, n)?;
    if parallel.rank() == 0 {
        write_pred(output, &whole, format)?;
    }
    Ok(())
}

/// The arrays of an input safetensors file, by name, with the file's path for the errors.
struct InputFile<'a> {
    path: &'a Path,
    named: HashMap<String, Tensor>,
}

impl<'a> InputFile<'a> {
    fn read(path: &'a Path) -> Result<Self> {
        let named = Tensor::read_safetensors(path)
            .with_context(|| format!("{}: not a readable safetensors file", path.display()))?
            .into_iter()
            .collect();
        Ok(Self { path, named })
    }

    fn get(&self, k: &str) -> Option<&Tensor> {
        self.named.get(k)
    }

    fn contains_key(&self, k: &str) -> bool {
        self.named.contains_key(k)
    }

    /// The array `k` (a grid's shape) as a list of sizes, if the file has it.
    fn sizes(&self, k: &str) -> Result<Option<Vec<i64>>> {
        self.named
            .get(k)
            .map(|g| {
                Vec::<i64>::try_from(g.f_to_kind(Kind::Int64)?.f_reshape([-1])?).with_context(
                    || format!("{}: `{k}` is not a list of sizes", self.path.display()),
                )
            })
            .transpose()
    }
}

/// What `ono predict` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// One safetensors file with `pred`.
    Safetensors,
    /// NumPy: one `.npz` per sample of an imported dataset (`<field>_prediction`, `_target`,
    /// `_error`, `coords`), else one `.npz` with `pred`.
    Npz,
    /// One `.vtu` file per sample of an imported VTK dataset: its mesh with
    /// `<field>_prediction`, `_target` and `_error` added as point (or cell) data.
    Vtu,
}

/// Which samples of an imported dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SplitChoice {
    Test,
    Train,
    All,
}

/// Writes `pred` to `output` (safetensors or npz, atomically).
fn write_pred(output: &Path, pred: &Tensor, format: Format) -> Result<()> {
    let pred = pred.f_to_device(Device::Cpu)?.f_contiguous()?;
    match format {
        Format::Npz => {
            let a = named_array("pred", &pred)?;
            ono_data::readers::npy::write_npz(output, &[a])?;
        }
        _ => ono_data::dataset::write_tensors_atomic(
            output,
            &[("pred".to_string(), pred.shallow_clone())],
        )?,
    }
    eprintln!("wrote pred {:?} to {}", pred.size(), output.display());
    Ok(())
}

/// A tensor as a float64 NumPy array of its shape.
fn named_array(name: &str, t: &Tensor) -> Result<NamedArray> {
    let shape = t.size().iter().map(|&d| d as usize).collect();
    let values = Vec::<f64>::try_from(t.f_to_kind(Kind::Double)?.f_reshape([-1])?)?;
    Ok(NamedArray::new(name, shape, ArrayData::F64(values))?)
}

/// What `ono predict` prints for the samples of an imported dataset: one JSON line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Predictions {
    /// Samples predicted.
    pub samples: usize,
    /// The mean of their relative L2 errors.
    pub mean_rel_l2: f64,
    /// One per sample, in output order.
    pub files: Vec<PredictedSample>,
}

/// One sample's prediction file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PredictedSample {
    /// The file the sample came from.
    pub source: PathBuf,
    /// The file written.
    pub output: PathBuf,
    /// Its points (or cells).
    pub points: i64,
    /// ‖prediction − target‖₂ / ‖target‖₂ over its points and channels.
    pub rel_l2: f64,
}

/// The predictions for the samples of an imported dataset, one file per sample in `out`
/// (created), named after the sample's source (`format` npz or vtu), or one safetensors file.
/// Prints [`Predictions`].
#[allow(clippy::too_many_arguments)]
fn imported(
    p: &Predictor,
    input: &Path,
    m: &ImportManifest,
    out: &Path,
    batch: i64,
    format: Format,
    which: SplitChoice,
    fx_as_function: bool,
) -> Result<()> {
    use ono_data::import::SourceFormat;
    anyhow::ensure!(
        p.regime == Regime::Steady,
        "{}: an imported dataset is steady; this checkpoint is a time-series model",
        input.display()
    );
    anyhow::ensure!(
        format != Format::Vtu || m.format == SourceFormat::Vtk,
        "--format vtu: the samples of {} came from array files, which have no mesh; use --format npz",
        input.display()
    );
    let mut ds = ono_data::dataset::TensorDataset::read(input)?;
    // Presented to the model as it was trained (GNOT takes the input at the points as an input
    // function on its own points).
    if fx_as_function {
        ds = ono_train::data_source::fx_as_function(ds)?;
    }
    let mut parts: Vec<(&Split, &[SampleRef])> = Vec::new();
    if matches!(which, SplitChoice::Train | SplitChoice::All) {
        parts.push((&ds.train, &m.train));
    }
    if matches!(which, SplitChoice::Test | SplitChoice::All) {
        parts.push((&ds.test, &m.test));
    }
    let mut preds: Vec<(Tensor, &Split, &[SampleRef])> = Vec::new();
    for (split, refs) in parts {
        anyhow::ensure!(
            split.len() as usize == refs.len(),
            "{}: {} samples but its manifest names {}",
            input.display(),
            split.len(),
            refs.len()
        );
        preds.push((
            predict_split(p, ds.grid.as_deref(), split, batch)?,
            split,
            refs,
        ));
    }
    if format == Format::Safetensors {
        let all: Vec<Tensor> = preds.iter().map(|p| p.0.shallow_clone()).collect();
        let n = all.iter().map(|t| t.size()[1]).max().unwrap_or(0);
        let padded: Vec<Tensor> = all
            .iter()
            .map(|t| t.f_constant_pad_nd([0, 0, 0, n - t.size()[1]]))
            .collect::<Result<_, _>>()?;
        return write_pred(out, &Tensor::f_cat(&padded, 0)?, format);
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let names = output_names(preds.iter().flat_map(|(_, _, r)| r.iter()));
    let mut files = Vec::new();
    for (pred, split, refs) in &preds {
        let target = split.y.f_to_kind(Kind::Double)?;
        let mask = match &split.lengths {
            Some(l) => ono_data::dataset::length_mask(l, split.points(), Device::Cpu)?,
            None => None,
        };
        let rel = Vec::<f64>::try_from(ono_nn::loss::relative_l2(
            pred,
            &target,
            ono_nn::loss::Reduction::None,
            mask.as_ref(),
        )?)?;
        for (b, r) in refs.iter().enumerate() {
            let n = split.lengths.as_ref().map_or(split.points(), |l| l[b]);
            let sample = |t: &Tensor, s: usize| -> Result<Tensor> {
                let rows = t.f_get(s as i64)?.f_narrow(0, 0, n)?;
                Ok(m.layout.to_file_order(&rows.f_to_kind(Kind::Double)?)?)
            };
            let shared = split.pos.size()[0] == 1;
            let written = SampleFiles { m, format, out }.write(
                &names[files.len()],
                r,
                &sample(pred, b)?,
                &sample(&target, b)?,
                &sample(&split.pos, if shared { 0 } else { b })?,
            )?;
            files.push(PredictedSample {
                source: r.file.clone(),
                output: written,
                points: n,
                rel_l2: rel[b],
            });
        }
    }
    let mean = files.iter().map(|f| f.rel_l2).sum::<f64>() / files.len().max(1) as f64;
    eprintln!(
        "wrote {} predictions to {} (mean relative L2 {mean:.4e})",
        files.len(),
        out.display()
    );
    println!(
        "{}",
        serde_json::to_string(&Predictions {
            samples: files.len(),
            mean_rel_l2: mean,
            files,
        })?
    );
    Ok(())
}

/// The predictions of `split` (S, N, C) in float64 on the CPU: `batch` samples per pass, on the
/// dataset's `grid` when it has one.
fn predict_split(p: &Predictor, grid: Option<&[i64]>, split: &Split, batch: i64) -> Result<Tensor> {
    let pred = match grid {
        Some(g) => {
            let mut out = Vec::new();
            let dev = p.model.device();
            for start in (0..split.len()).step_by(batch.max(1) as usize) {
                let n = batch.max(1).min(split.len() - start);
                let fx = split.fx.f_narrow(0, start, n)?;
                let pos = if split.pos.size()[0] == 1 {
                    split.pos.f_expand([n, -1, -1], false)?
                } else {
                    split.pos.f_narrow(0, start, n)?
                };
                let (fx, pos) = (
                    fx.f_to_device(dev)?.f_to_kind(p.kind())?,
                    pos.f_to_device(dev)?.f_to_kind(p.kind())?,
                );
                out.push(
                    p.predict(&pos, &fx, 0, Some(g), None)?
                        .f_to_device(Device::Cpu)?,
                );
            }
            Tensor::f_cat(&out, 0)?
        }
        None => p.predict_samples(split, batch)?.f_to_device(Device::Cpu)?,
    };
    Ok(pred.f_to_kind(Kind::Double)?)
}

/// A file name per sample: its source's stem, numbered in output order when two sources (in
/// different folders) share one.
fn output_names<'a>(refs: impl Iterator<Item = &'a SampleRef>) -> Vec<String> {
    let names: Vec<String> = refs.map(SampleRef::stem).collect();
    let mut seen = std::collections::HashSet::new();
    if names.iter().all(|n| seen.insert(n.clone())) {
        return names;
    }
    names
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{i:04}-{n}"))
        .collect()
}

/// Where and how one sample's prediction is written.
struct SampleFiles<'a> {
    m: &'a ImportManifest,
    format: Format,
    out: &'a Path,
}

impl SampleFiles<'_> {
    /// Writes sample `r`'s prediction, target and error per target field (its rows (n, C) in
    /// the file's point order; `coords` (n, d)) as `name`: a copy of its mesh with the fields
    /// added (vtu) or a NumPy archive with its coordinates (npz). Returns the file.
    fn write(
        &self,
        name: &str,
        r: &SampleRef,
        pred: &Tensor,
        target: &Tensor,
        coords: &Tensor,
    ) -> Result<PathBuf> {
        use ono_data::import::Association;
        let host =
            |t: &Tensor| -> Result<Vec<f64>> { Ok(Vec::<f64>::try_from(t.f_reshape([-1])?)?) };
        let (pv, tv) = (host(pred)?, host(target)?);
        let err: Vec<f64> = pv.iter().zip(&tv).map(|(a, b)| a - b).collect();
        // Per target field: its columns of the concatenated channels.
        let c: usize = self.m.targets.iter().map(|f| f.components).sum();
        let mut arrays = Vec::new();
        let mut col = 0usize;
        for f in &self.m.targets {
            let cols = |v: &[f64]| -> Vec<f64> {
                v.chunks(c)
                    .flat_map(|row| row[col..col + f.components].iter().copied())
                    .collect()
            };
            for (suffix, v) in [("prediction", &pv), ("target", &tv), ("error", &err)] {
                arrays.push(MeshArray {
                    name: format!("{}_{suffix}", f.name),
                    components: f.components,
                    values: cols(v),
                });
            }
            col += f.components;
        }
        if self.format == Format::Vtu {
            let (point, cell) = match self.m.association {
                Association::Point => (&arrays[..], &[][..]),
                Association::Cell => (&[][..], &arrays[..]),
            };
            return Ok(ono_data::readers::vtk::write_mesh_with(
                &r.file,
                &self.out.join(name),
                point,
                cell,
            )?);
        }
        let mut named: Vec<NamedArray> = arrays
            .iter()
            .map(|a| {
                NamedArray::new(
                    a.name.clone(),
                    vec![a.tuples(), a.components],
                    ArrayData::F64(a.values.clone()),
                )
            })
            .collect::<Result<_, _>>()?;
        named.push(named_array("coords", coords)?);
        let file = self.out.join(format!("{name}.npz"));
        ono_data::readers::npy::write_npz(&file, &named)?;
        Ok(file)
    }
}
