//! VTK files, the format OpenFOAM, FEniCS, deal.II and Abaqus post-processing write and ParaView
//! opens: serial XML `.vtu` / `.vtp` ([`xml`]: ascii, inline base64 or appended raw/base64
//! data, uncompressed or zlib-compressed, 32- or 64-bit headers, either byte order) and legacy
//! `.vtk` ([`legacy`]: ASCII, or binary, big-endian as VTK writes it; the 5.1 layout with
//! OFFSETS/CONNECTIVITY too). One file is one mesh: its points, its cells, and its named point
//! and cell arrays, all as float64, the pieces of a multi-piece file concatenated.
//!
//! The readers are our own, written for untrusted input: every size a file states is checked
//! against the bytes that are there before anything is allocated by it, every index is checked,
//! and a file's content never makes them open another path (the pieces of parallel files,
//! `.pvtu`, are refused). Any malformed file is an [`Error::Format`] naming it; the fuzz target
//! `fuzz/fuzz_targets/vtk.rs` holds them to it (docs/fuzzing.md). We used the `vtkio` crate
//! before, and fuzzing found it panics on malformed XML (a piece without points,
//! `fixtures/vtk/piece_without_points.vtu`), prints its parser's state to stderr on malformed
//! legacy files, and drops arrays of the wrong length without a word; it stays as the
//! independent implementation the tests read our files with and write files for us with.
//!
//! Only unstructured grids and poly data are read: the structured kinds have implicit points,
//! and are refused by name. Writing ([`write_mesh_with`], [`write_triangles`]) produces
//! uncompressed inline-base64 `.vtu` files with 64-bit headers, which ParaView and vtkio read.

pub mod legacy;
mod write;
pub mod xml;

use std::path::{Path, PathBuf};

use crate::{Error, Result};

pub use write::{write_mesh_with, write_triangles};

/// A named array of a mesh: `values` holds `tuples × components` numbers, tuple-major.
#[derive(Debug, Clone, PartialEq)]
pub struct MeshArray {
    pub name: String,
    pub components: usize,
    pub values: Vec<f64>,
}

impl MeshArray {
    /// Tuples (points or cells) the array covers.
    pub fn tuples(&self) -> usize {
        self.values.len() / self.components.max(1)
    }
}

/// One mesh as read from a VTK file.
#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    /// The file it came from.
    pub path: PathBuf,
    /// (N, 3) point coordinates, row-major (VTK always stores three).
    pub points: Vec<f64>,
    /// Arrays with a value per point.
    pub point_data: Vec<MeshArray>,
    /// Arrays with a value per cell.
    pub cell_data: Vec<MeshArray>,
    /// Cells in the file (0 for a point cloud without cells).
    pub cells: usize,
    /// (cells, 3) cell centres, row-major: the mean of each cell's points (where cell data
    /// live when a model is trained on them).
    pub cell_centres: Vec<f64>,
    /// The cells' points, one cell after the other (VTK's `connectivity`).
    pub connectivity: Vec<u64>,
    /// The end of each cell in `connectivity` (VTK's `offsets`).
    pub offsets: Vec<u64>,
    /// The VTK cell type of each cell (poly data's vertices, lines, polygons and strips as
    /// poly-vertex 2, poly-line 4, polygon 7 and triangle strip 6).
    pub types: Vec<u8>,
}

impl Mesh {
    /// An empty mesh of the file `path`, to which pieces are added.
    fn new(path: &Path) -> Self {
        Mesh {
            path: path.to_path_buf(),
            points: Vec::new(),
            point_data: Vec::new(),
            cell_data: Vec::new(),
            cells: 0,
            cell_centres: Vec::new(),
            connectivity: Vec::new(),
            offsets: Vec::new(),
            types: Vec::new(),
        }
    }

    /// Points N.
    pub fn num_points(&self) -> usize {
        self.points.len() / 3
    }

    /// The point array `name`, if there is one.
    pub fn point_array(&self, name: &str) -> Option<&MeshArray> {
        self.point_data.iter().find(|a| a.name == name)
    }

    /// The cell array `name`, if there is one.
    pub fn cell_array(&self, name: &str) -> Option<&MeshArray> {
        self.cell_data.iter().find(|a| a.name == name)
    }

    /// The coordinate axes that vary over the points (a 2-D mesh written with z = 0 has two).
    pub fn varying_axes(&self) -> Vec<usize> {
        (0..3)
            .filter(|&a| {
                let mut it = self.points.iter().skip(a).step_by(3);
                let first = it.next().copied().unwrap_or(0.0);
                it.any(|&v| v != first)
            })
            .collect()
    }

    /// Appends one piece: its points ((n, 3) row-major), its cells (connectivity into the
    /// piece's own points, end offsets, types) and its arrays, which must cover its points and
    /// cells and match the arrays of earlier pieces by name and components.
    fn add_piece(&mut self, piece: Piece) -> std::result::Result<(), String> {
        let Piece {
            points,
            connectivity,
            offsets,
            types,
            point_data,
            cell_data,
        } = piece;
        if !points.len().is_multiple_of(3) {
            return Err(format!(
                "{} point coordinates are not a whole number of (x, y, z) triples",
                points.len()
            ));
        }
        let n = points.len() / 3;
        if offsets.len() != types.len() {
            return Err(format!(
                "{} cell offsets for {} cell types",
                offsets.len(),
                types.len()
            ));
        }
        let base = self.num_points() as u64;
        let mut start = 0usize;
        for &end in &offsets {
            let end = usize::try_from(end).unwrap_or(usize::MAX);
            let ids = connectivity
                .get(start..end)
                .ok_or("the cell offsets do not fit the connectivity")?;
            let mut sum = [0.0f64; 3];
            for &i in ids {
                let i = usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
                    format!("a cell refers to point {i} of a piece of {n} points")
                })?;
                for (s, v) in sum.iter_mut().zip(&points[3 * i..3 * i + 3]) {
                    *s += v;
                }
            }
            let k = ids.len().max(1) as f64;
            self.cell_centres.extend(sum.map(|s| s / k));
            start = end;
        }
        if start != connectivity.len() {
            return Err(format!(
                "the cells use {start} of the {} connectivity entries",
                connectivity.len()
            ));
        }
        let first = self.points.is_empty() && self.cells == 0;
        let conn_base = self.connectivity.len() as u64;
        self.connectivity
            .extend(connectivity.iter().map(|&i| i + base));
        self.offsets.extend(offsets.iter().map(|&o| o + conn_base));
        self.cells += types.len();
        self.types.extend(types.iter().copied());
        self.points.extend(points);
        for (arrays, tuples, into, what) in [
            (point_data, n, &mut self.point_data, "point"),
            (cell_data, offsets.len(), &mut self.cell_data, "cell"),
        ] {
            for array in arrays {
                if array.components == 0 || array.values.len() != tuples * array.components {
                    return Err(format!(
                        "{what} array `{}` has {} values, not {} {what}s × {} components",
                        array.name,
                        array.values.len(),
                        tuples,
                        array.components
                    ));
                }
                if first {
                    if into.iter().any(|a| a.name == array.name) {
                        return Err(format!("two {what} arrays are named `{}`", array.name));
                    }
                    into.push(array);
                    continue;
                }
                match into.iter_mut().find(|a| a.name == array.name) {
                    Some(a) if a.components == array.components => a.values.extend(array.values),
                    _ => {
                        return Err(format!(
                            "{what} array `{}` of a later piece does not match the first piece's \
                             arrays",
                            array.name
                        ))
                    }
                }
            }
        }
        Ok(())
    }
}

/// One piece of a file as a reader found it.
#[derive(Debug, Default)]
struct Piece {
    points: Vec<f64>,
    connectivity: Vec<u64>,
    offsets: Vec<u64>,
    types: Vec<u8>,
    point_data: Vec<MeshArray>,
    cell_data: Vec<MeshArray>,
}

/// How a VTK file is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeshFormat {
    /// Serial XML (`.vtu`, `.vtp`).
    Xml,
    /// Legacy (`.vtk`; binary ones big-endian, as VTK writes them).
    Legacy,
}

impl MeshFormat {
    /// The format of a file by its extension (`vtk`, `vtu`, `vtp`; any case).
    pub fn of(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "vtk" => Some(MeshFormat::Legacy),
            "vtu" | "vtp" => Some(MeshFormat::Xml),
            _ => None,
        }
    }
}

/// Reads the mesh of a `.vtk`, `.vtu` or `.vtp` file.
pub fn read_mesh(path: &Path) -> Result<Mesh> {
    if !path.is_file() {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    let format = MeshFormat::of(path).ok_or_else(|| Error::Format {
        path: path.to_path_buf(),
        msg: "not a VTK file by its extension (.vtk, .vtu or .vtp)".into(),
    })?;
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_mesh(&bytes, format, path)
}

/// The mesh of a VTK file's bytes; `path` names it in errors.
pub fn parse_mesh(bytes: &[u8], format: MeshFormat, path: &Path) -> Result<Mesh> {
    let pieces = match format {
        MeshFormat::Xml => xml::pieces(bytes),
        MeshFormat::Legacy => legacy::pieces(bytes),
    };
    let fail = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let mut mesh = Mesh::new(path);
    for piece in pieces.map_err(fail)? {
        mesh.add_piece(piece).map_err(fail)?;
    }
    if mesh.num_points() == 0 {
        return Err(fail("the mesh has no points".into()));
    }
    Ok(mesh)
}

/// The element types of VTK data arrays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scalar {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
}

impl Scalar {
    fn size(self) -> usize {
        match self {
            Scalar::I8 | Scalar::U8 => 1,
            Scalar::I16 | Scalar::U16 => 2,
            Scalar::I32 | Scalar::U32 | Scalar::F32 => 4,
            Scalar::I64 | Scalar::U64 | Scalar::F64 => 8,
        }
    }

    /// The numbers of `bytes` (a whole number of elements) as float64.
    fn decode(self, bytes: &[u8], big_endian: bool) -> std::result::Result<Vec<f64>, String> {
        let size = self.size();
        if !bytes.len().is_multiple_of(size) {
            return Err(format!(
                "{} bytes are not a whole number of {size}-byte values",
                bytes.len()
            ));
        }
        macro_rules! each {
            ($t:ty) => {
                bytes
                    .chunks_exact(size)
                    .map(|c| {
                        let a = c.try_into().expect("chunks_exact gives the size");
                        (if big_endian {
                            <$t>::from_be_bytes(a)
                        } else {
                            <$t>::from_le_bytes(a)
                        }) as f64
                    })
                    .collect()
            };
        }
        Ok(match self {
            Scalar::I8 => each!(i8),
            Scalar::U8 => each!(u8),
            Scalar::I16 => each!(i16),
            Scalar::U16 => each!(u16),
            Scalar::I32 => each!(i32),
            Scalar::U32 => each!(u32),
            Scalar::I64 => each!(i64),
            Scalar::U64 => each!(u64),
            Scalar::F32 => each!(f32),
            Scalar::F64 => each!(f64),
        })
    }
}

/// Cell indices (connectivity, offsets) as unsigned integers: each value must be a whole
/// number in [0, 2⁵³].
fn indices(values: &[f64], what: &str) -> std::result::Result<Vec<u64>, String> {
    values
        .iter()
        .map(|&v| {
            if v.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&v) {
                Ok(v as u64)
            } else {
                Err(format!("{what} holds {v}, not an index"))
            }
        })
        .collect()
}

/// Cell types as bytes (VTK's are 1 to 255).
fn cell_types(values: &[f64]) -> std::result::Result<Vec<u8>, String> {
    values
        .iter()
        .map(|&v| {
            if v.fract() == 0.0 && (0.0..=255.0).contains(&v) {
                Ok(v as u8)
            } else {
                Err(format!("the cell types hold {v}, not a VTK cell type"))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests;
