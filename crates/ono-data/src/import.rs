//! Users' own data as a dataset file: VTK meshes (`.vtk`, `.vtu`, `.vtp`, one sample per file,
//! point or cell data) or arrays (`.npy`, `.npz`, MAT v5/v7.3, HDF5, safetensors, torch.save;
//! one sample per file or every sample along the first axis), with the arrays the user names as
//! inputs, targets and coordinates, or those [`import`] infers and says it inferred.
//!
//! The layout follows the data:
//! - samples with positions that differ in count become the ragged point-cloud layout
//!   ([`PointCloudSplit::to_split`]): padded, with per-sample lengths;
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
use tch::{Kind, Tensor};

use crate::array::NamedArray;
use crate::dataset::{epoch_order, Split, TensorDataset};
use crate::point_cloud::{PointCloudSplit, PointSample};
use crate::readers::vtk::{self, Mesh};
use crate::{Error, Result};

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

impl ImportLayout {
    /// A sample's `rows` (n, c) in the dataset's point order, put back in its file's order: the
    /// inverse of the row-major reordering of a grid found among scattered points; the rows as
    /// they are for every other layout.
    pub fn to_file_order(&self, rows: &Tensor) -> Result<Tensor> {
        let ImportLayout::Grid {
            order: Some(order), ..
        } = self
        else {
            return Ok(rows.shallow_clone());
        };
        if rows.dim() == 0 || rows.size()[0] != order.len() as i64 {
            return Err(Error::Shape {
                op: "ImportLayout::to_file_order",
                expected: format!("rows of the grid's {} points", order.len()),
                got: rows.size(),
            });
        }
        let order: Vec<i64> = order.iter().map(|&i| i as i64).collect();
        let index = Tensor::f_from_slice(&order)?.f_to_device(rows.device())?;
        // Node k of the grid is the file's point order[k].
        Ok(rows.f_zeros_like()?.f_index_copy(0, &index, rows)?)
    }
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
        let (raw, parts) = from_meshes(&files, o, &mut inferred)?;
        (SourceFormat::Vtk, raw, parts)
    } else if vtk == 0 {
        let (raw, parts) = from_arrays(&files, o, &mut inferred)?;
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
    let (layout, raw) = lay_out(raw, grid, &mut inferred)?;
    let (train_idx, test_idx) = split_indices(raw.len(), o.test_fraction, o.seed)?;
    let d = raw[0].pos.len() / raw[0].source.points.max(1);
    let cf: usize = inputs.iter().map(|f| f.components).sum();
    let cy: usize = targets.iter().map(|f| f.components).sum();
    let build = |idx: &[usize]| -> Result<Split> {
        match &layout {
            ImportLayout::Grid { .. } => {
                let n = raw[0].source.points as i64;
                let stack = |f: &dyn Fn(&RawSample) -> &Vec<f64>, c: usize| -> Result<Tensor> {
                    let mut all = Vec::with_capacity(idx.len() * n as usize * c);
                    for &i in idx {
                        all.extend_from_slice(f(&raw[i]));
                    }
                    Ok(Tensor::from_slice(&all)
                        .f_reshape([idx.len() as i64, n, c as i64])?
                        .f_to_kind(o.kind)?)
                };
                let pos = Tensor::from_slice(&raw[0].pos)
                    .f_reshape([1, n, d as i64])?
                    .f_to_kind(o.kind)?;
                Ok(Split::new(
                    stack(&|r| &r.fx, cf)?,
                    stack(&|r| &r.y, cy)?,
                    pos,
                ))
            }
            ImportLayout::PointCloud { .. } => {
                let mut split = PointCloudSplit::default();
                for &i in idx {
                    let r = &raw[i];
                    let n = r.source.points as i64;
                    let t = |v: &[f64], c: usize| -> Result<Tensor> {
                        Ok(Tensor::from_slice(v)
                            .f_reshape([n, c as i64])?
                            .f_to_kind(o.kind)?)
                    };
                    split.samples.push(PointSample {
                        pos: t(&r.pos, d)?,
                        fx: t(&r.fx, cf)?,
                        y: t(&r.y, cy)?,
                        theta: None,
                        funcs: Vec::new(),
                    });
                }
                split.to_split()
            }
        }
    };
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

fn from_meshes(
    files: &[PathBuf],
    o: &ImportOptions,
    inferred: &mut Vec<String>,
) -> Result<(Vec<RawSample>, Parts)> {
    if o.samples == Some(SampleAxis::Leading) {
        return Err(Error::Config {
            what: "samples".into(),
            msg: "a VTK file is one sample; samples along a first axis are for array files".into(),
        });
    }
    let meshes: Vec<Mesh> = files
        .iter()
        .map(|f| vtk::read_mesh(f))
        .collect::<Result<_>>()?;
    let first = &meshes[0];
    let names = |m: &Mesh, a: Association| -> Vec<String> {
        match a {
            Association::Point => m.point_data.iter().map(|a| a.name.clone()).collect(),
            Association::Cell => m.cell_data.iter().map(|a| a.name.clone()).collect(),
        }
    };
    let association = match o.association {
        Some(a) => a,
        None => {
            let named: Vec<&String> = o.inputs.iter().chain(&o.targets).flatten().collect();
            let in_cells =
                |n: &&String| first.cell_array(n).is_some() && first.point_array(n).is_none();
            let a = if (!named.is_empty() && named.iter().all(in_cells))
                || (named.is_empty() && first.point_data.is_empty() && !first.cell_data.is_empty())
            {
                Association::Cell
            } else {
                Association::Point
            };
            inferred.push(format!(
                "{} data (pass --cell-data or --point-data to choose)",
                a.name()
            ));
            a
        }
    };
    let what = format!("{} arrays", association.name());
    let coords_array = o.coords.as_deref().filter(|c| *c != "points");
    let (inputs, targets) = choose(&names(first, association), o, coords_array, inferred, &what)?;
    let array = |m: &Mesh, name: &str| -> Result<vtk::MeshArray> {
        let found = match association {
            Association::Point => m.point_array(name),
            Association::Cell => m.cell_array(name),
        };
        found.cloned().ok_or_else(|| Error::Format {
            path: m.path.clone(),
            msg: format!(
                "no {} array `{name}` (its {}: {})",
                association.name(),
                what,
                list(&names(m, association))
            ),
        })
    };
    let fields = |names: &[String]| -> Result<Vec<Field>> {
        names
            .iter()
            .map(|n| {
                Ok(Field {
                    name: n.clone(),
                    components: array(first, n)?.components,
                })
            })
            .collect()
    };
    let (in_fields, out_fields) = (fields(&inputs)?, fields(&targets)?);
    // The axes that vary over any sample (a planar mesh written with z = 0 has two).
    let location = |m: &Mesh| -> Vec<f64> {
        match association {
            Association::Point => m.points.clone(),
            Association::Cell => m.cell_centres.clone(),
        }
    };
    let coords = match coords_array {
        Some(name) => Coords::Array {
            name: name.to_string(),
        },
        None => {
            let mut axes: Vec<usize> = Vec::new();
            for m in &meshes {
                let loc = location(m);
                for a in 0..3 {
                    let mut it = loc.iter().skip(a).step_by(3);
                    let v0 = it.next().copied().unwrap_or(0.0);
                    if !axes.contains(&a) && it.any(|&v| v != v0) {
                        axes.push(a);
                    }
                }
            }
            axes.sort_unstable();
            if axes.is_empty() {
                return Err(Error::Format {
                    path: first.path.clone(),
                    msg: format!("all its {}s are at one place", association.name()),
                });
            }
            match association {
                Association::Point => Coords::MeshPoints { axes },
                Association::Cell => Coords::CellCentres { axes },
            }
        }
    };
    let mut raw = Vec::with_capacity(meshes.len());
    let mut dims: Option<usize> = None;
    for m in &meshes {
        let n = match association {
            Association::Point => m.num_points(),
            Association::Cell => m.cells,
        };
        if n == 0 {
            return Err(Error::Format {
                path: m.path.clone(),
                msg: format!("the mesh has no {}s", association.name()),
            });
        }
        let gather = |fields: &[Field]| -> Result<Vec<f64>> {
            let arrays: Vec<vtk::MeshArray> = fields
                .iter()
                .map(|f| {
                    let a = array(m, &f.name)?;
                    if a.components != f.components {
                        return Err(Error::Format {
                            path: m.path.clone(),
                            msg: format!(
                                "{} array `{}` has {} components, {} has {}",
                                association.name(),
                                f.name,
                                a.components,
                                first.path.display(),
                                f.components
                            ),
                        });
                    }
                    finite(
                        &m.path,
                        &format!("{} array", association.name()),
                        &a.name,
                        &a.values,
                        (a.components, association.name()),
                    )?;
                    Ok(a)
                })
                .collect::<Result<_>>()?;
            Ok(interleave(
                &arrays
                    .iter()
                    .map(|a| (&a.values[..], a.components))
                    .collect::<Vec<_>>(),
                n,
            ))
        };
        let pos = match &coords {
            Coords::Array { name } => {
                let a = array(m, name)?;
                finite(
                    &m.path,
                    "coordinates",
                    name,
                    &a.values,
                    (a.components, association.name()),
                )?;
                if *dims.get_or_insert(a.components) != a.components {
                    return Err(Error::Format {
                        path: m.path.clone(),
                        msg: format!(
                            "coordinates `{name}` have {} components, {} has {}",
                            a.components,
                            first.path.display(),
                            dims.unwrap_or(0)
                        ),
                    });
                }
                a.values
            }
            Coords::MeshPoints { axes } | Coords::CellCentres { axes } => {
                let loc = location(m);
                finite(
                    &m.path,
                    "coordinates",
                    "points",
                    &loc,
                    (3, association.name()),
                )?;
                loc.chunks(3)
                    .flat_map(|p| axes.iter().map(move |&a| p[a]))
                    .collect()
            }
            Coords::UnitGrid => unreachable!("meshes have coordinates"),
        };
        raw.push(RawSample {
            source: SampleRef {
                file: m.path.clone(),
                index: None,
                points: n,
            },
            pos,
            fx: gather(&in_fields)?,
            y: gather(&out_fields)?,
        });
    }
    Ok((
        raw,
        Parts {
            association,
            inputs: in_fields,
            targets: out_fields,
            coords,
            grid: None,
        },
    ))
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

/// Sample s's positions of one array file.
type PositionsOf = Box<dyn Fn(usize) -> Result<Vec<f64>>>;

fn from_arrays(
    files: &[PathBuf],
    o: &ImportOptions,
    inferred: &mut Vec<String>,
) -> Result<(Vec<RawSample>, Parts)> {
    if o.association == Some(Association::Cell) {
        return Err(Error::Config {
            what: "cell data".into(),
            msg: "array files have no cells; cell data are for VTK meshes".into(),
        });
    }
    let axis = o.samples.unwrap_or_else(|| {
        let a = if files.len() > 1 {
            SampleAxis::PerFile
        } else {
            SampleAxis::Leading
        };
        inferred.push(match a {
            SampleAxis::PerFile => "one sample per file (pass --samples leading for samples along the first axis)".into(),
            SampleAxis::Leading => "samples along the first axis of every array (pass --samples per-file for one sample per file)".into(),
        });
        a
    });
    let read = |f: &Path, names: Option<&[&str]>| -> Result<Vec<NamedArray>> {
        let arrays = crate::readers::read_any(f, names)?;
        if arrays.is_empty() {
            return Err(Error::Format {
                path: f.to_path_buf(),
                msg: "holds no arrays".into(),
            });
        }
        Ok(arrays)
    };
    // The names come from the first file.
    let first = read(&files[0], None)?;
    let available: Vec<String> = first.iter().map(|a| a.name.clone()).collect();
    let coords_name = match &o.coords {
        Some(c) => Some(c.clone()),
        None => {
            let found = COORD_NAMES
                .iter()
                .find(|c| available.iter().any(|a| a == *c))
                .map(|c| c.to_string());
            inferred.push(match &found {
                Some(c) => format!("coordinates: `{c}` (pass --coords to choose)"),
                None => format!(
                    "coordinates: none (no array named {}): the arrays' own grid on [0, 1]",
                    COORD_NAMES.join(", ")
                ),
            });
            found
        }
    };
    let (inputs, targets) = choose(&available, o, coords_name.as_deref(), inferred, "arrays")?;
    let mut wanted: Vec<&str> = inputs.iter().chain(&targets).map(String::as_str).collect();
    if let Some(c) = &coords_name {
        wanted.push(c);
    }
    let mut raw = Vec::new();
    let mut parts: Option<Parts> = None;
    for f in files {
        let arrays = read(f, Some(&wanted))?;
        let get = |name: &str| {
            arrays
                .iter()
                .find(|a| a.name == name)
                .expect("read_any returns every name asked")
        };
        let count = match axis {
            SampleAxis::PerFile => 1,
            SampleAxis::Leading => {
                let s = get(&targets[0]).shape.first().copied().unwrap_or(0);
                for n in inputs.iter().chain(&targets) {
                    let a = get(n);
                    if a.shape.first().copied() != Some(s) {
                        return Err(Error::Format {
                            path: f.clone(),
                            msg: format!(
                                "array `{n}` {:?} does not have the {s} samples of `{}` along its first axis",
                                a.shape, targets[0]
                            ),
                        });
                    }
                }
                s
            }
        };
        if count == 0 {
            return Err(Error::Format {
                path: f.clone(),
                msg: format!("array `{}` holds no samples", targets[0]),
            });
        }
        // A field's shape per sample.
        let per_sample = |a: &NamedArray| -> Vec<usize> {
            match axis {
                SampleAxis::PerFile => a.shape.clone(),
                SampleAxis::Leading => a.shape[1..].to_vec(),
            }
        };
        // Each field as float64 once per file, checked finite.
        let mut field_values: HashMap<&str, Vec<f64>> = HashMap::new();
        for n in inputs.iter().chain(&targets) {
            let v = get(n).data.to_f64();
            finite(f, "array", n, &v, (1, "element"))?;
            field_values.insert(n.as_str(), v);
        }
        // Points per sample and each field's components.
        let fields = |names: &[String], spatial: &[usize], coords: bool| -> Result<Vec<Field>> {
            names
                .iter()
                .map(|n| {
                    let s = per_sample(get(n));
                    let c = if s == spatial {
                        1
                    } else if s.len() == spatial.len() + 1 && s[..spatial.len()] == *spatial {
                        s[spatial.len()]
                    } else {
                        let want = if coords {
                            format!(
                                "({}) or ({}, C), the points of the coordinates",
                                spatial[0], spatial[0]
                            )
                        } else {
                            format!(
                                "{spatial:?} or {spatial:?} + (C,), the grid of the other arrays"
                            )
                        };
                        return Err(Error::Format {
                            path: f.clone(),
                            msg: format!("array `{n}` is {s:?} per sample, not {want}"),
                        });
                    };
                    Ok(Field {
                        name: n.clone(),
                        components: c,
                    })
                })
                .collect()
        };
        let (spatial, pos_of): (Vec<usize>, PositionsOf) = match &coords_name {
            Some(c) => {
                let a = get(c);
                let values = a.data.to_f64();
                finite(f, "coordinates", c, &values, (1, "element"))?;
                let (shared, n, d) = match (axis, a.shape.as_slice()) {
                    (_, [n, d]) => (true, *n, *d),
                    (SampleAxis::Leading, [s, n, d]) if *s == count => (false, *n, *d),
                    (_, [n]) => (true, *n, 1),
                    _ => {
                        return Err(Error::Format {
                            path: f.clone(),
                            msg: format!(
                                "coordinates `{c}` are {:?}, not (N, d){}",
                                a.shape,
                                if axis == SampleAxis::Leading {
                                    " or (S, N, d)"
                                } else {
                                    ""
                                }
                            ),
                        })
                    }
                };
                (
                    vec![n],
                    Box::new(move |s| {
                        Ok(if shared {
                            values.clone()
                        } else {
                            values[s * n * d..(s + 1) * n * d].to_vec()
                        })
                    }),
                )
            }
            None => {
                // The grid: the smallest per-sample shape among the fields.
                let spatial = inputs
                    .iter()
                    .chain(&targets)
                    .map(|n| per_sample(get(n)))
                    .min_by_key(|s| s.len())
                    .unwrap_or_default();
                if spatial.is_empty() || spatial.len() > 3 {
                    return Err(Error::Format {
                        path: f.clone(),
                        msg: format!(
                            "arrays of {spatial:?} per sample are not a grid of 1 to 3 axes (name the coordinates with --coords for a point cloud)"
                        ),
                    });
                }
                let pos = unit_grid(&spatial);
                (spatial, Box::new(move |_| Ok(pos.clone())))
            }
        };
        let in_fields = fields(&inputs, &spatial, coords_name.is_some())?;
        let out_fields = fields(&targets, &spatial, coords_name.is_some())?;
        let points: usize = spatial.iter().product();
        if points == 0 {
            return Err(Error::Format {
                path: f.clone(),
                msg: format!("array `{}` has no points", targets[0]),
            });
        }
        match &parts {
            None => {
                parts = Some(Parts {
                    association: Association::Point,
                    inputs: in_fields.clone(),
                    targets: out_fields.clone(),
                    coords: match &coords_name {
                        Some(c) => Coords::Array { name: c.clone() },
                        None => Coords::UnitGrid,
                    },
                    grid: coords_name.is_none().then(|| spatial.clone()),
                })
            }
            Some(p) => {
                let mismatch = |what: String| Error::Format {
                    path: f.clone(),
                    msg: format!("{what} ({} has otherwise)", files[0].display()),
                };
                for (a, b) in p
                    .inputs
                    .iter()
                    .chain(&p.targets)
                    .zip(in_fields.iter().chain(&out_fields))
                {
                    if a != b {
                        return Err(mismatch(format!(
                            "array `{}` has {} components",
                            b.name, b.components
                        )));
                    }
                }
                if let Some(g) = &p.grid {
                    if *g != spatial {
                        return Err(mismatch(format!(
                            "its arrays are on a grid {spatial:?}, not {g:?}"
                        )));
                    }
                }
            }
        }
        for s in 0..count {
            let take = |fields: &[Field]| -> Vec<f64> {
                let parts: Vec<(&[f64], usize)> = fields
                    .iter()
                    .map(|fl| {
                        let all = &field_values[fl.name.as_str()][..];
                        let k = points * fl.components;
                        let rows = match axis {
                            SampleAxis::PerFile => all,
                            SampleAxis::Leading => &all[s * k..(s + 1) * k],
                        };
                        (rows, fl.components)
                    })
                    .collect();
                interleave(&parts, points)
            };
            let pos = pos_of(s)?;
            if pos.len() % points != 0 || pos.len() / points == 0 {
                return Err(Error::Format {
                    path: f.clone(),
                    msg: "coordinates do not fit the points".into(),
                });
            }
            raw.push(RawSample {
                source: SampleRef {
                    file: f.clone(),
                    index: (axis == SampleAxis::Leading).then_some(s),
                    points,
                },
                pos,
                fx: take(&in_fields),
                y: take(&out_fields),
            });
        }
    }
    let parts = parts.expect("at least one file");
    let d = raw[0].pos.len() / raw[0].source.points;
    if let Some(r) = raw.iter().find(|r| r.pos.len() / r.source.points != d) {
        return Err(Error::Format {
            path: r.source.file.clone(),
            msg: format!(
                "coordinates of {} axes, {} has {d}",
                r.pos.len() / r.source.points,
                files[0].display()
            ),
        });
    }
    Ok((raw, parts))
}

/// Positions of a row-major grid of `shape` on [0, 1] per axis, in the convention of
/// [`crate::dataset::grid_positions_2d`]: channel c runs along grid axis d − 1 − c (x along the
/// columns), a single node at 0.
fn unit_grid(shape: &[usize]) -> Vec<f64> {
    let d = shape.len();
    let n: usize = shape.iter().product();
    let mut pos = Vec::with_capacity(n * d);
    for k in 0..n {
        let mut rem = k;
        let mut idx = vec![0usize; d];
        for a in (0..d).rev() {
            idx[a] = rem % shape[a];
            rem /= shape[a];
        }
        for c in 0..d {
            let a = d - 1 - c;
            let m = shape[a];
            pos.push(if m > 1 {
                idx[a] as f64 / (m - 1) as f64
            } else {
                0.0
            });
        }
    }
    pos
}

/// The layout of the samples: a grid given by the arrays, a grid found in shared positions, or
/// point clouds. A found grid reorders every sample's points row-major.
fn lay_out(
    mut raw: Vec<RawSample>,
    grid: Option<Vec<usize>>,
    inferred: &mut Vec<String>,
) -> Result<(ImportLayout, Vec<RawSample>)> {
    if let Some(g) = grid {
        let shape: Vec<i64> = g.iter().map(|&s| s as i64).collect();
        inferred.push(format!("layout: a grid {shape:?}"));
        return Ok((ImportLayout::Grid { shape, order: None }, raw));
    }
    let n0 = raw[0].source.points;
    let shared = raw
        .iter()
        .all(|r| r.source.points == n0 && r.pos == raw[0].pos);
    if shared {
        if let Some((shape, order)) = tensor_grid(&raw[0].pos, n0) {
            let identity = order.iter().enumerate().all(|(k, &i)| k == i);
            for r in &mut raw {
                let d = r.pos.len() / n0;
                let cf = r.fx.len() / n0;
                let cy = r.y.len() / n0;
                let permute = |v: &[f64], c: usize| -> Vec<f64> {
                    order
                        .iter()
                        .flat_map(|&i| v[i * c..(i + 1) * c].iter().copied())
                        .collect()
                };
                if !identity {
                    r.pos = permute(&r.pos, d);
                    r.fx = permute(&r.fx, cf);
                    r.y = permute(&r.y, cy);
                }
            }
            inferred.push(format!(
                "layout: a grid {shape:?} (every sample has the same points, and they form one){}",
                if identity { "" } else { "; the points are reordered row-major and put back in the files' order on output" }
            ));
            return Ok((
                ImportLayout::Grid {
                    shape,
                    order: (!identity).then_some(order),
                },
                raw,
            ));
        }
    }
    let ragged = raw.iter().any(|r| r.source.points != n0);
    let (lo, hi) = raw.iter().fold((usize::MAX, 0), |(lo, hi), r| {
        (lo.min(r.source.points), hi.max(r.source.points))
    });
    inferred.push(if ragged {
        format!("layout: point clouds of {lo} to {hi} points (padded, with each sample's length)")
    } else if shared {
        format!("layout: point clouds of {n0} points, the same in every sample but not a grid")
    } else {
        format!("layout: point clouds of {n0} points, positions per sample")
    });
    Ok((ImportLayout::PointCloud { ragged }, raw))
}

/// Whether `pos` ((n, d) row-major) are the nodes of a tensor-product grid of at least 2 nodes
/// per axis: its shape (axis k along channel d − 1 − k, as [`unit_grid`]) and, for each grid
/// node in row-major order, the index of its point.
fn tensor_grid(pos: &[f64], n: usize) -> Option<(Vec<i64>, Vec<usize>)> {
    let d = pos.len() / n;
    let (lo, hi) = pos
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v), h.max(v))
        });
    let tol = 1e-9 * (hi - lo).abs().max(1.0);
    // The distinct values of each channel, within the tolerance.
    let mut levels: Vec<Vec<f64>> = Vec::with_capacity(d);
    for c in 0..d {
        let mut v: Vec<f64> = (0..n).map(|i| pos[i * d + c]).collect();
        v.sort_by(f64::total_cmp);
        v.dedup_by(|a, b| (*a - *b).abs() <= tol);
        if v.len() < 2 {
            return None;
        }
        levels.push(v);
    }
    let count: usize = levels.iter().map(Vec::len).product();
    if count != n {
        return None;
    }
    let level = |c: usize, x: f64| -> Option<usize> {
        let l = &levels[c];
        let i = l.partition_point(|&v| v < x - tol);
        (i < l.len() && (l[i] - x).abs() <= tol).then_some(i)
    };
    let mut order = vec![usize::MAX; n];
    for i in 0..n {
        let mut k = 0usize;
        // Grid axis 0 is channel d − 1 (rows), the last axis channel 0 (columns).
        for c in (0..d).rev() {
            k = k * levels[c].len() + level(c, pos[i * d + c])?;
        }
        if order[k] != usize::MAX {
            return None;
        }
        order[k] = i;
    }
    let shape = (0..d).rev().map(|c| levels[c].len() as i64).collect();
    Some((shape, order))
}

/// Test and train indices: the first `round(S × fraction)` (at least one, and one left to train
/// on) of the permutation [`epoch_order`]`(S, seed, 0)` are the test samples; both lists in
/// file order.
fn split_indices(s: usize, fraction: f64, seed: u64) -> Result<(Vec<usize>, Vec<usize>)> {
    if s < 2 {
        return Err(Error::Config {
            what: "import".into(),
            msg: format!("{s} sample: a training and a test split need at least 2"),
        });
    }
    let k = ((s as f64 * fraction).round() as usize).clamp(1, s - 1);
    let order = epoch_order(s as i64, seed, 0);
    let mut test: Vec<usize> = order[..k].iter().map(|&i| i as usize).collect();
    let mut train: Vec<usize> = order[k..].iter().map(|&i| i as usize).collect();
    test.sort_unstable();
    train.sort_unstable();
    Ok((train, test))
}
