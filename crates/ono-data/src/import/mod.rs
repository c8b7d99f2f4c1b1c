//! Users' own data as a dataset file: VTK meshes (`.vtk`, `.vtu`, `.vtp`, one sample per file,
//! point or cell data) or arrays (`.npy`, `.npz`, MAT v5/v7.3, HDF5, safetensors, torch.save;
//! one sample per file or every sample along the first axis), with the arrays the user names as
//! inputs, targets and coordinates, or those [`import`] infers and says it inferred.
//!
//! The layout follows the data:
//! - samples with positions that differ in count become the ragged point-cloud layout
//!   ([`crate::point_cloud::PointCloudSplit::to_split`]): padded, with per-sample lengths;
//! - samples on one shared set of points that is a tensor-product grid become a grid (the points
//!   reordered row-major, the order kept to write predictions back on the mesh);
//! - arrays without coordinates are grids on [0, 1]^d (their own axes);
//! - anything else is a point cloud with positions per sample.
//!
//! The split is by fraction and seed, and everything needed to map a sample back to its file is
//! kept in an [`ImportManifest`], stored inside the dataset file's metadata ([`write`],
//! [`read_manifest`]), so `ono predict` can write a prediction on the sample's own mesh.
//!
//! Every refusal names the file and the array: a missing array, sizes that differ between samples
//! where they must agree, NaN or Inf, a non-numeric array (the readers refuse those), an empty
//! file.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tch::Kind;

use crate::dataset::TensorDataset;
use crate::{Error, Result};

mod arrays;
mod layout;
mod mesh;
mod split;

/// The metadata key of the manifest in an imported dataset file.
pub const MANIFEST_KEY: &str = "ono.import";

/// The extensions read as VTK meshes.
pub const VTK_EXTENSIONS: [&str; 3] = ["vtk", "vtu", "vtp"];

/// The extensions read as arrays.
pub const ARRAY_EXTENSIONS: [&str; 8] = [
    "npy",
    "npz",
    "mat",
    "h5",
    "hdf5",
    "safetensors",
    "pt",
    "pth",
];

/// Array names taken as coordinates when none are named.
pub const COORD_NAMES: [&str; 8] = [
    "coords",
    "coordinates",
    "pos",
    "positions",
    "points",
    "mesh",
    "xyz",
    "grid",
];

/// Where a mesh's values live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Association {
    /// One value per point (VTK point data; every array file).
    #[default]
    Point,
    /// One value per cell (VTK cell data); the sample's positions are the cell centres.
    Cell,
}

impl Association {
    fn name(self) -> &'static str {
        match self {
            Association::Point => "point",
            Association::Cell => "cell",
        }
    }
}

/// How array files hold their samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SampleAxis {
    /// Each file is one sample.
    PerFile,
    /// Every array holds many samples along its first axis.
    Leading,
}

/// What to import and how; `None` fields are inferred.
#[derive(Debug, Clone)]
pub struct ImportOptions {
    /// The arrays whose values are the model's input at each point.
    pub inputs: Option<Vec<String>>,
    /// The arrays the model learns to predict.
    pub targets: Option<Vec<String>>,
    /// The array of coordinates ((N, d) or (S, N, d)); for VTK the mesh's points (or cell
    /// centres) unless an array is named.
    pub coords: Option<String>,
    /// VTK: point or cell data.
    pub association: Option<Association>,
    /// Array files: one sample per file or along the first axis.
    pub samples: Option<SampleAxis>,
    /// The fraction of samples in the test split.
    pub test_fraction: f64,
    /// The split's seed.
    pub seed: u64,
    /// Float or Double.
    pub kind: Kind,
}

impl Default for ImportOptions {
    fn default() -> Self {
        ImportOptions {
            inputs: None,
            targets: None,
            coords: None,
            association: None,
            samples: None,
            test_fraction: 0.2,
            seed: 0,
            kind: Kind::Float,
        }
    }
}

/// The kind of source files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceFormat {
    /// VTK meshes, one sample per file.
    Vtk,
    /// Arrays (npy, npz, MAT, HDF5, safetensors, torch.save).
    Arrays,
}

/// A named array and its component count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    pub name: String,
    pub components: usize,
}

/// Where the positions came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Coords {
    /// The mesh's points, these of the axes x, y, z (those that vary).
    MeshPoints { axes: Vec<usize> },
    /// The mesh's cell centres, these axes.
    CellCentres { axes: Vec<usize> },
    /// An array of the files.
    Array { name: String },
    /// None: the arrays' own grid, on [0, 1] along each axis.
    UnitGrid,
}

/// How the samples were laid out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ImportLayout {
    /// One grid of this shape (row-major); `order[k]` is the file's point of grid node k when
    /// the files' points are not already in that order.
    Grid {
        shape: Vec<i64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        order: Option<Vec<usize>>,
    },
    /// Positions per sample; `ragged` when the point counts differ.
    PointCloud { ragged: bool },
}

/// Where one sample came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SampleRef {
    /// The file (absolute).
    pub file: PathBuf,
    /// Its row along the first axis, for arrays holding many samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index: Option<usize>,
    /// Its points (or cells).
    pub points: usize,
}

impl SampleRef {
    /// A file name for outputs of this sample: the source's stem, with the row for a file of
    /// many samples.
    pub fn stem(&self) -> String {
        let stem = self
            .file
            .file_stem()
            .map_or_else(|| "sample".into(), |s| s.to_string_lossy().into_owned());
        match self.index {
            Some(i) => format!("{stem}-{i}"),
            None => stem,
        }
    }
}

/// How a dataset file was imported: enough to map each sample back to its file and points.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImportManifest {
    pub format: SourceFormat,
    pub association: Association,
    pub inputs: Vec<Field>,
    pub targets: Vec<Field>,
    pub coords: Coords,
    pub layout: ImportLayout,
    pub train: Vec<SampleRef>,
    pub test: Vec<SampleRef>,
    pub test_fraction: f64,
    pub seed: u64,
}

/// An imported dataset, what it came from, and what was inferred (sentences to print).
#[derive(Debug)]
pub struct Imported {
    pub dataset: TensorDataset,
    pub manifest: ImportManifest,
    pub inferred: Vec<String>,
}

/// One sample before batching: values per point, row-major.
struct RawSample {
    source: SampleRef,
    /// (n, d)
    pos: Vec<f64>,
    /// (n, inputs' components)
    fx: Vec<f64>,
    /// (n, targets' components)
    y: Vec<f64>,
}

/// The samples of `paths` (files, or folders whose files with a known extension are taken in
/// name order) as a dataset.
pub fn import(paths: &[PathBuf], o: &ImportOptions) -> Result<Imported> {
    if !(o.test_fraction > 0.0 && o.test_fraction < 1.0) {
        return Err(Error::Config {
            what: "test fraction".into(),
            msg: format!("{} is not in (0, 1)", o.test_fraction),
        });
    }
    if !matches!(o.kind, Kind::Float | Kind::Double) {
        return Err(Error::Config {
            what: "kind".into(),
            msg: format!("{:?}: float32 or float64", o.kind),
        });
    }
    let files = expand(paths)?;
    let vtk = files.iter().filter(|f| is_vtk(f)).count();
    let mut inferred = Vec::new();
    let (format, raw, parts) = if vtk == files.len() {
        let (raw, parts) = mesh::from_meshes(&files, o, &mut inferred)?;
        (SourceFormat::Vtk, raw, parts)
    } else if vtk == 0 {
        let (raw, parts) = arrays::from_arrays(&files, o, &mut inferred)?;
        (SourceFormat::Arrays, raw, parts)
    } else {
        return Err(Error::Config {
            what: "import".into(),
            msg: "VTK meshes and array files together: import one kind at a time".into(),
        });
    };
    let Parts {
        association,
        inputs,
        targets,
        coords,
        grid,
    } = parts;
    let (layout, raw) = layout::lay_out(raw, grid, &mut inferred)?;
    let (train_idx, test_idx) = split::indices(raw.len(), o.test_fraction, o.seed)?;
    let fields = (&inputs[..], &targets[..]);
    let build = |idx: &[usize]| split::build(&raw, idx, &layout, fields, o.kind);
    let dataset = TensorDataset {
        train: build(&train_idx)?,
        test: build(&test_idx)?,
        grid: match &layout {
            ImportLayout::Grid { shape, .. } => Some(shape.clone()),
            ImportLayout::PointCloud { .. } => None,
        },
        query_grid: None,
        test_grid: None,
    };
    dataset.validate()?;
    let refs = |idx: &[usize]| idx.iter().map(|&i| raw[i].source.clone()).collect();
    let manifest = ImportManifest {
        format,
        association,
        inputs,
        targets,
        coords,
        layout,
        train: refs(&train_idx),
        test: refs(&test_idx),
        test_fraction: o.test_fraction,
        seed: o.seed,
    };
    Ok(Imported {
        dataset,
        manifest,
        inferred,
    })
}

/// Writes an imported dataset, its manifest in the file's metadata, atomically.
pub fn write(imported: &Imported, path: &Path) -> Result<()> {
    let json =
        serde_json::to_string(&imported.manifest).map_err(|e| Error::Invalid(e.to_string()))?;
    let meta = HashMap::from([(MANIFEST_KEY.to_string(), json)]);
    imported.dataset.write_with_metadata(path, &meta)
}

/// The manifest of a dataset file written by [`write`]; `None` for a dataset file of another
/// origin.
pub fn read_manifest(path: &Path) -> Result<Option<ImportManifest>> {
    let meta = ono_io::safetensors::read_metadata(path)?;
    meta.get(MANIFEST_KEY)
        .map(|json| {
            serde_json::from_str(json).map_err(|e| Error::Format {
                path: path.to_path_buf(),
                msg: format!("its import manifest cannot be read: {e}"),
            })
        })
        .transpose()
}

fn is_vtk(path: &Path) -> bool {
    has_extension(path, &VTK_EXTENSIONS)
}

fn has_extension(path: &Path, exts: &[&str]) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| exts.contains(&e.to_ascii_lowercase().as_str()))
}

/// Files as given, folders expanded to their files with a known extension in name order.
fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|source| Error::Io {
                    path: p.clone(),
                    source,
                })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.is_file() && (is_vtk(f) || has_extension(f, &ARRAY_EXTENSIONS)))
                .collect();
            if found.is_empty() {
                return Err(Error::Config {
                    what: p.display().to_string(),
                    msg: format!(
                        "a folder with no file to import (extensions {} or {})",
                        VTK_EXTENSIONS.join(", "),
                        ARRAY_EXTENSIONS.join(", ")
                    ),
                });
            }
            found.sort();
            files.extend(found);
        } else if p.is_file() {
            files.push(p.clone());
        } else {
            return Err(Error::Io {
                path: p.clone(),
                source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
            });
        }
    }
    if files.is_empty() {
        return Err(Error::Config {
            what: "import".into(),
            msg: "no files given".into(),
        });
    }
    files
        .into_iter()
        .map(|f| {
            f.canonicalize().map_err(|source| Error::Io {
                path: f.clone(),
                source,
            })
        })
        .collect()
}

/// What the sources agree on.
struct Parts {
    association: Association,
    inputs: Vec<Field>,
    targets: Vec<Field>,
    coords: Coords,
    /// Arrays without coordinates: their shared grid.
    grid: Option<Vec<usize>>,
}

/// Inputs and targets from what the user named and the names available (in file order):
/// targets default to the last name, inputs to every other. `exclude` (the coordinates) is
/// never taken by default.
fn choose(
    available: &[String],
    o: &ImportOptions,
    exclude: Option<&str>,
    inferred: &mut Vec<String>,
    what: &str,
) -> Result<(Vec<String>, Vec<String>)> {
    let pool: Vec<&String> = available
        .iter()
        .filter(|n| Some(n.as_str()) != exclude)
        .collect();
    let rest = |taken: &[String]| -> Vec<String> {
        pool.iter()
            .filter(|n| !taken.contains(n))
            .map(|n| n.to_string())
            .collect()
    };
    let (inputs, targets) = match (&o.inputs, &o.targets) {
        (Some(i), Some(t)) => (i.clone(), t.clone()),
        (Some(i), None) => {
            let t = rest(i);
            inferred.push(format!(
                "targets: {} (the {what} not named as inputs)",
                list(&t)
            ));
            (i.clone(), t)
        }
        (None, Some(t)) => {
            let i = rest(t);
            inferred.push(format!(
                "inputs: {} (the {what} not named as targets)",
                list(&i)
            ));
            (i, t.clone())
        }
        (None, None) => {
            let Some(last) = pool.last() else {
                return Err(Error::Invalid(format!("there are no {what} to learn")));
            };
            let t = vec![last.to_string()];
            let i = rest(&t);
            inferred.push(format!(
                "targets: {} (the last of the {what}); inputs: {} (pass --inputs and --targets to choose)",
                list(&t),
                list(&i)
            ));
            (i, t)
        }
    };
    if targets.is_empty() {
        return Err(Error::Config {
            what: "targets".into(),
            msg: format!("none: every one of the {what} is an input; name the targets"),
        });
    }
    if let Some(n) = inputs.iter().find(|n| targets.contains(n)) {
        return Err(Error::Config {
            what: "inputs and targets".into(),
            msg: format!("`{n}` is named as both"),
        });
    }
    if inputs.is_empty() {
        inferred.push("no input arrays: the models see the coordinates alone".into());
    }
    Ok((inputs, targets))
}

fn list(names: &[String]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `values` (tuples × components; a tuple is a `unit`) checked finite, naming the file, array
/// and tuple.
fn finite(
    file: &Path,
    what: &str,
    name: &str,
    values: &[f64],
    (components, unit): (usize, &str),
) -> Result<()> {
    match values.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(at) => Err(Error::Format {
            path: file.to_path_buf(),
            msg: format!(
                "{what} `{name}` holds {} at {unit} {}",
                values[at],
                at / components.max(1)
            ),
        }),
    }
}

/// Per-point rows of several arrays side by side: `arrays` are (values of n tuples, components).
fn interleave(arrays: &[(&[f64], usize)], n: usize) -> Vec<f64> {
    let width: usize = arrays.iter().map(|a| a.1).sum();
    let mut out = Vec::with_capacity(n * width);
    for i in 0..n {
        for (v, c) in arrays {
            out.extend_from_slice(&v[i * c..(i + 1) * c]);
        }
    }
    out
}
