//! VTK files, the format OpenFOAM, FEniCS, deal.II and Abaqus post-processing write and ParaView
//! opens: legacy `.vtk` (ASCII; vtkio failed to re-read its own binary legacy export in our
//! test, so binary legacy files are unproven) and serial XML `.vtu` / `.vtp` (inline, base64 or
//! appended, raw or zlib-compressed), read with the `vtkio` crate. One file is one mesh: its
//! points and its named point and cell arrays, all as float64, the pieces of a multi-piece file
//! concatenated.
//!
//! What `vtkio` leaves to us, and this module checks: an unstructured grid or poly data set (the
//! structured kinds have implicit points: they are refused by name), arrays whose length is a
//! whole number of tuples for the points or cells they belong to, numeric arrays only (a field or
//! string array is named as such), and no empty mesh. A file that vtkio cannot parse (missing,
//! truncated, not VTK) is an [`Error::Format`] naming the file. One thing cannot be checked here:
//! vtkio drops an array of the wrong length without a word (in both formats), so such an array is
//! simply absent from the [`Mesh`]; whoever asks for it by name is told it is missing.

use std::path::{Path, PathBuf};

use vtkio::model::{Attribute, DataSet, IOBuffer, Piece, VertexNumbers};

use crate::{Error, Result};

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
    /// Cells in the file (0 for a point cloud of vertices only).
    pub cells: usize,
    /// (cells, 3) cell centres, row-major: the mean of each cell's points (where cell data
    /// live when a model is trained on them).
    pub cell_centres: Vec<f64>,
}

impl Mesh {
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
    mesh_of(parse(path)?, path)
}

/// The mesh of a VTK file's bytes; `path` names it in errors. Every piece must be in the file
/// itself: the pieces of parallel files (`.pvtu`) live in other files and are not read (a
/// file's content never makes this reader open another path).
pub fn parse_mesh(bytes: &[u8], format: MeshFormat, path: &Path) -> Result<Mesh> {
    mesh_of(parse_bytes(bytes, format, path)?, path)
}

/// The mesh of vtkio's model of the file `path`.
fn mesh_of(vtk: vtkio::Vtk, path: &Path) -> Result<Mesh> {
    let format_error = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let mut mesh = Mesh {
        path: path.to_path_buf(),
        points: Vec::new(),
        point_data: Vec::new(),
        cell_data: Vec::new(),
        cells: 0,
        cell_centres: Vec::new(),
    };
    match vtk.data {
        DataSet::UnstructuredGrid { pieces, .. } => {
            for piece in pieces {
                let p = inline(piece, path)?;
                if p.cells.types.len() != p.cells.cell_verts.num_cells() {
                    return Err(format_error(format!(
                        "{} cell types for {} cells",
                        p.cells.types.len(),
                        p.cells.cell_verts.num_cells()
                    )));
                }
                add_piece(&mut mesh, p.points, &[&p.cells.cell_verts], p.data, path)?;
            }
        }
        DataSet::PolyData { pieces, .. } => {
            for piece in pieces {
                let p = inline(piece, path)?;
                // VTK numbers poly data cells verts first, then lines, polygons, strips.
                let cells: Vec<&VertexNumbers> = [&p.verts, &p.lines, &p.polys, &p.strips]
                    .into_iter()
                    .flatten()
                    .collect();
                add_piece(&mut mesh, p.points, &cells, p.data, path)?;
            }
        }
        other => {
            return Err(format_error(format!(
                "a {} data set: only unstructured grids and poly data are read (their points are \
                 explicit); save it as an unstructured grid (.vtu)",
                kind_name(&other)
            )))
        }
    }
    if mesh.num_points() == 0 {
        return Err(format_error("the mesh has no points".into()));
    }
    Ok(mesh)
}

/// vtkio's model of a VTK file's bytes.
fn parse_bytes(bytes: &[u8], format: MeshFormat, path: &Path) -> Result<vtkio::Vtk> {
    let format_error = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    // vtkio's parsers index freely; a hostile file must not take the process down.
    let parsed = std::panic::catch_unwind(|| match format {
        MeshFormat::Xml => vtkio::Vtk::parse_xml(bytes),
        MeshFormat::Legacy => vtkio::Vtk::parse_legacy_be(bytes),
    })
    .map_err(|_| format_error("the VTK parser failed on this file (malformed)".into()))?;
    parsed.map_err(|e| format_error(format!("not a readable VTK file: {e}")))
}

/// vtkio's model of the VTK file at `path` (its format by its extension).
fn parse(path: &Path) -> Result<vtkio::Vtk> {
    let format = MeshFormat::of(path).ok_or_else(|| Error::Format {
        path: path.to_path_buf(),
        msg: "not a VTK file by its extension (.vtk, .vtu or .vtp)".into(),
    })?;
    let bytes = std::fs::read(path).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_bytes(&bytes, format, path)
}

/// Writes the mesh of the VTK file `source` with `point` and `cell` arrays added (each spans
/// the whole mesh, pieces in order, as [`read_mesh`] numbers points and cells; an array of the
/// same name as one of the file's is replaced) as a serial XML file: `dest` with the extension
/// `vtu` for an unstructured grid or `vtp` for poly data, whatever the source's format. Written
/// atomically; returns the path written. The mesh is read again from `source`, so the cells
/// and every array of the file are kept as they were.
pub fn write_mesh_with(
    source: &Path,
    dest: &Path,
    point: &[MeshArray],
    cell: &[MeshArray],
) -> Result<PathBuf> {
    let format = |msg: String| Error::Format {
        path: source.to_path_buf(),
        msg,
    };
    let mut vtk = parse(source)?;
    // Each piece gets its rows of every array: (points so far, cells so far).
    let mut at = (0usize, 0usize);
    let mut add = |data: &mut vtkio::model::Attributes, n: usize, c: usize| -> Result<()> {
        for (arrays, into, start, len, what) in [
            (point, &mut data.point, at.0, n, "point"),
            (cell, &mut data.cell, at.1, c, "cell"),
        ] {
            for a in arrays {
                let k = a.components.max(1);
                let rows = a.values.get(start * k..(start + len) * k).ok_or_else(|| {
                    format(format!(
                        "{what} array `{}` has {} tuples, fewer than the mesh's {what}s",
                        a.name,
                        a.tuples()
                    ))
                })?;
                into.retain(|old| !matches!(old, Attribute::DataArray(d) if d.name == a.name));
                into.push(data_array(&MeshArray {
                    name: a.name.clone(),
                    components: k,
                    values: rows.to_vec(),
                }));
            }
        }
        at = (at.0 + n, at.1 + c);
        Ok(())
    };
    let ext = match &mut vtk.data {
        DataSet::UnstructuredGrid { pieces, .. } => {
            for piece in pieces.iter_mut() {
                if let Piece::Inline(p) = piece {
                    let (n, c) = (p.points.len() / 3, p.cells.types.len());
                    add(&mut p.data, n, c)?;
                }
            }
            "vtu"
        }
        DataSet::PolyData { pieces, .. } => {
            for piece in pieces.iter_mut() {
                if let Piece::Inline(p) = piece {
                    let (n, c) = (p.points.len() / 3, p.num_cells());
                    add(&mut p.data, n, c)?;
                }
            }
            "vtp"
        }
        other => {
            return Err(format(format!(
                "a {} data set: only unstructured grids and poly data are written",
                kind_name(other)
            )))
        }
    };
    for (arrays, total, what) in [(point, at.0, "point"), (cell, at.1, "cell")] {
        if let Some(a) = arrays.iter().find(|a| a.tuples() != total) {
            return Err(format(format!(
                "{what} array `{}` has {} tuples, the mesh has {total} {what}s",
                a.name,
                a.tuples()
            )));
        }
    }
    // The XML writer takes the model's version as the file's; legacy numbers mean nothing there.
    vtk.version = vtkio::model::Version::new((1, 0));
    vtk.file_path = None;
    let mut bytes = Vec::new();
    vtk.write_xml(&mut bytes).map_err(|e| Error::Format {
        path: dest.to_path_buf(),
        msg: format!("cannot be written as VTK XML: {e}"),
    })?;
    let out = dest.with_extension(ext);
    ono_io::atomic::write_atomic(&out, &bytes)?;
    Ok(out)
}

/// Writes a triangle mesh as a VTK XML unstructured grid (`.vtu`), atomically: `points` (N, 3)
/// row-major, `triangles` three point indices each, and point arrays over the N points.
pub fn write_triangles(
    path: &Path,
    points: &[f64],
    triangles: &[[usize; 3]],
    point: &[MeshArray],
) -> Result<()> {
    let n = points.len() / 3;
    let bad = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    if !points.len().is_multiple_of(3) || triangles.iter().flatten().any(|&i| i >= n) {
        return Err(bad(
            "points are not (x, y, z) triples, or a triangle refers past them".into(),
        ));
    }
    if let Some(a) = point
        .iter()
        .find(|a| a.tuples() != n || a.values.len() % a.components.max(1) != 0)
    {
        return Err(bad(format!(
            "point array `{}` does not have {n} tuples",
            a.name
        )));
    }
    let piece = vtkio::model::UnstructuredGridPiece {
        points: points.to_vec().into(),
        cells: vtkio::model::Cells {
            cell_verts: VertexNumbers::XML {
                connectivity: triangles.iter().flatten().map(|&i| i as u64).collect(),
                offsets: (1..=triangles.len() as u64).map(|k| 3 * k).collect(),
            },
            types: vec![vtkio::model::CellType::Triangle; triangles.len()],
        },
        data: vtkio::model::Attributes {
            point: point.iter().map(data_array).collect(),
            cell: Vec::new(),
        },
    };
    let vtk = vtkio::Vtk {
        version: vtkio::model::Version::new((1, 0)),
        title: String::new(),
        byte_order: vtkio::model::ByteOrder::LittleEndian,
        data: DataSet::inline(piece),
        file_path: None,
    };
    let mut bytes = Vec::new();
    vtk.write_xml(&mut bytes)
        .map_err(|e| bad(format!("cannot be written as VTK XML: {e}")))?;
    ono_io::atomic::write_atomic(path, &bytes)?;
    Ok(())
}

/// A mesh array as a VTK data array (scalars, 3-vectors, or generic tuples).
fn data_array(a: &MeshArray) -> Attribute {
    Attribute::DataArray(vtkio::model::DataArray {
        name: a.name.clone(),
        elem: match a.components {
            1 => vtkio::model::ElementType::Scalars {
                num_comp: 1,
                lookup_table: None,
            },
            3 => vtkio::model::ElementType::Vectors,
            k => vtkio::model::ElementType::Generic(k as u32),
        },
        data: a.values.clone().into(),
    })
}

fn kind_name(d: &DataSet) -> &'static str {
    match d {
        DataSet::ImageData { .. } => "image data",
        DataSet::StructuredGrid { .. } => "structured grid",
        DataSet::RectilinearGrid { .. } => "rectilinear grid",
        DataSet::Field { .. } => "field",
        DataSet::UnstructuredGrid { .. } => "unstructured grid",
        DataSet::PolyData { .. } => "poly data",
    }
}

fn inline<P>(piece: Piece<P>, path: &Path) -> Result<P> {
    match piece {
        Piece::Inline(p) => Ok(*p),
        _ => Err(Error::Format {
            path: path.to_path_buf(),
            msg: "a piece stored in another file (a parallel .pvtu or .pvtp file): not read; \
                  write the mesh as one serial file"
                .into(),
        }),
    }
}

/// Appends one piece: its points, the centres of its cells (`cells`, in VTK's order) and its
/// arrays, which must match the arrays of earlier pieces by name and components.
fn add_piece(
    mesh: &mut Mesh,
    points: IOBuffer,
    cells: &[&VertexNumbers],
    data: vtkio::model::Attributes,
    path: &Path,
) -> Result<()> {
    let format = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let pts = numbers(points, "the points", path)?;
    if pts.len() % 3 != 0 {
        return Err(format(format!(
            "{} point coordinates are not a whole number of (x, y, z) triples",
            pts.len()
        )));
    }
    let n = pts.len() / 3;
    let first = mesh.points.is_empty() && mesh.cells == 0;
    let mut centres = Vec::new();
    for c in cells {
        cell_centres(c, &pts, &mut centres).map_err(format)?;
    }
    let cells = centres.len() / 3;
    mesh.points.extend(pts);
    mesh.cells += cells;
    mesh.cell_centres.extend(centres);
    for (attrs, tuples, into, what) in [
        (data.point, n, &mut mesh.point_data, "point"),
        (data.cell, cells, &mut mesh.cell_data, "cell"),
    ] {
        for attr in attrs {
            let array = match attr {
                Attribute::DataArray(a) => {
                    let components = a.elem.num_comp() as usize;
                    let name = a.name.clone();
                    let values = numbers(a.data, &format!("{what} array `{name}`"), path)?;
                    MeshArray {
                        name,
                        components,
                        values,
                    }
                }
                Attribute::Field { name, .. } => {
                    return Err(format(format!(
                        "{what} data `{name}` is a legacy FIELD of arrays; write each array as \
                         a scalar or vector array"
                    )))
                }
            };
            if array.components == 0 || array.values.len() != tuples * array.components {
                return Err(format(format!(
                    "{what} array `{}` has {} values, not {} {what}s × {} components",
                    array.name,
                    array.values.len(),
                    tuples,
                    array.components
                )));
            }
            if first {
                into.push(array);
                continue;
            }
            match into.iter_mut().find(|a| a.name == array.name) {
                Some(a) if a.components == array.components => a.values.extend(array.values),
                _ => {
                    return Err(format(format!(
                        "{what} array `{}` of a later piece does not match the first piece's \
                         arrays",
                        array.name
                    )))
                }
            }
        }
    }
    Ok(())
}

/// Appends the centre of every cell of `cells` (the mean of its points in `pts`, (N, 3)
/// row-major) to `out`. Indices are checked: a hostile file gets a message, not a panic (vtkio's
/// own conversion between the two layouts asserts).
fn cell_centres(
    cells: &VertexNumbers,
    pts: &[f64],
    out: &mut Vec<f64>,
) -> std::result::Result<(), String> {
    let n = pts.len() / 3;
    let mut add = |ids: &mut dyn Iterator<Item = u64>| -> std::result::Result<(), String> {
        let (mut sum, mut k) = ([0.0f64; 3], 0usize);
        for i in ids {
            let i = usize::try_from(i)
                .ok()
                .filter(|&i| i < n)
                .ok_or_else(|| format!("a cell refers to point {i} of a piece of {n} points"))?;
            for (s, v) in sum.iter_mut().zip(&pts[3 * i..3 * i + 3]) {
                *s += v;
            }
            k += 1;
        }
        let k = k.max(1) as f64;
        out.extend(sum.map(|s| s / k));
        Ok(())
    };
    match cells {
        VertexNumbers::Legacy {
            num_cells,
            vertices,
        } => {
            let mut at = 0usize;
            for _ in 0..*num_cells {
                let len = *vertices
                    .get(at)
                    .ok_or("the cell list ends before its last cell")?
                    as usize;
                let ids = vertices
                    .get(at + 1..at + 1 + len)
                    .ok_or("a cell's point list runs past the end of the cell list")?;
                add(&mut ids.iter().map(|&i| u64::from(i)))?;
                at += 1 + len;
            }
        }
        VertexNumbers::XML {
            connectivity,
            offsets,
        } => {
            let mut start = 0usize;
            for &end in offsets {
                let end = usize::try_from(end).unwrap_or(usize::MAX);
                let ids = connectivity
                    .get(start..end)
                    .ok_or("the cell offsets do not fit the connectivity")?;
                add(&mut ids.iter().copied())?;
                start = end;
            }
        }
    }
    Ok(())
}

/// The numbers of a buffer as float64; a non-numeric buffer is refused by name.
fn numbers(buf: IOBuffer, what: &str, path: &Path) -> Result<Vec<f64>> {
    let kind = match &buf {
        IOBuffer::Bit(_) => Some("bit"),
        _ => None,
    };
    if let Some(k) = kind {
        return Err(Error::Format {
            path: path.to_path_buf(),
            msg: format!("{what} holds {k} values, not numbers"),
        });
    }
    buf.cast_into::<f64>().ok_or_else(|| Error::Format {
        path: path.to_path_buf(),
        msg: format!("{what} is not numeric"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vtkio::model::{
        ByteOrder, CellType, Cells, DataArray, ElementType, UnstructuredGridPiece, Version,
        VertexNumbers, Vtk,
    };

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ono-vtk-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Two triangles on four points in the z = 0 plane, a scalar and a 2-vector per point and a
    /// scalar per cell.
    fn two_triangles() -> Vtk {
        let points = vec![
            0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0f64,
        ];
        let piece = UnstructuredGridPiece {
            points: points.into(),
            cells: Cells {
                cell_verts: VertexNumbers::XML {
                    connectivity: vec![0, 1, 2, 1, 3, 2],
                    offsets: vec![3, 6],
                },
                types: vec![CellType::Triangle; 2],
            },
            data: vtkio::model::Attributes {
                point: vec![
                    Attribute::DataArray(DataArray {
                        name: "a".into(),
                        elem: ElementType::Scalars {
                            num_comp: 1,
                            lookup_table: None,
                        },
                        data: vec![1.0f64, 2.0, 3.0, 4.0].into(),
                    }),
                    Attribute::DataArray(DataArray {
                        name: "u".into(),
                        elem: ElementType::Vectors,
                        data: vec![
                            0.5f32, 0.0, 1.5, 0.0, 2.5, 0.0, 3.5, 0.0, 4.5, 0.0, 5.5, 0.0,
                        ]
                        .into(),
                    }),
                ],
                cell: vec![Attribute::DataArray(DataArray {
                    name: "k".into(),
                    elem: ElementType::Scalars {
                        num_comp: 1,
                        lookup_table: None,
                    },
                    data: vec![7i32, 9].into(),
                })],
            },
        };
        Vtk {
            version: Version::new((1, 0)),
            title: "two triangles".into(),
            byte_order: ByteOrder::LittleEndian,
            data: DataSet::inline(piece),
            file_path: None,
        }
    }

    #[test]
    fn vtu_and_legacy_files_read_alike() {
        let dir = scratch("formats");
        for name in ["m.vtu", "m.vtk"] {
            let path = dir.join(name);
            // Legacy files as ASCII, the legacy form solvers write most.
            match name.ends_with(".vtk") {
                true => two_triangles().export_ascii(&path).unwrap(),
                false => two_triangles().export(&path).unwrap(),
            }
            let m = read_mesh(&path).unwrap();
            assert_eq!(m.num_points(), 4, "{name}");
            assert_eq!(m.cells, 2);
            assert_eq!(m.varying_axes(), vec![0, 1]);
            let a = m.point_array("a").unwrap();
            assert_eq!(
                (a.components, a.values.clone()),
                (1, vec![1.0, 2.0, 3.0, 4.0])
            );
            let u = m.point_array("u").unwrap();
            assert_eq!(u.components, 3, "VTK vectors have three components");
            assert_eq!(u.values[6], 3.5);
            assert_eq!(m.cell_data[0].values, vec![7.0, 9.0]);
        }
    }

    #[test]
    fn cell_centres_and_written_arrays() {
        let dir = scratch("write");
        for name in ["m.vtu", "m.vtk"] {
            let path = dir.join(name);
            match name.ends_with(".vtk") {
                true => two_triangles().export_ascii(&path).unwrap(),
                false => two_triangles().export(&path).unwrap(),
            }
            let m = read_mesh(&path).unwrap();
            let third = 1.0 / 3.0;
            let want = [third, third, 0.0, 2.0 * third, 2.0 * third, 0.0];
            assert_eq!(m.cell_centres.len(), 6);
            for (a, b) in m.cell_centres.iter().zip(want) {
                assert!((a - b).abs() < 1e-15, "{:?}", m.cell_centres);
            }
            let array = |name: &str, components, values: Vec<f64>| MeshArray {
                name: name.into(),
                components,
                values,
            };
            let pred = array("prediction", 2, (0..8).map(f64::from).collect());
            let replaced = array("a", 1, vec![9.0; 4]);
            let per_cell = array("c", 1, vec![5.0, 6.0]);
            let out = write_mesh_with(
                &path,
                &dir.join(format!("out-{name}")),
                &[pred.clone(), replaced.clone()],
                std::slice::from_ref(&per_cell),
            )
            .unwrap();
            assert_eq!(out.extension().unwrap(), "vtu", "{name}");
            let back = read_mesh(&out).unwrap();
            assert_eq!((&back.points, back.cells), (&m.points, 2));
            assert_eq!(back.point_array("prediction"), Some(&pred));
            assert_eq!(back.point_array("a"), Some(&replaced));
            assert_eq!(
                back.point_data.len(),
                3,
                "a replaced, u kept, prediction added"
            );
            assert_eq!(back.point_array("u"), m.point_array("u"));
            assert_eq!(back.cell_array("c"), Some(&per_cell));
            assert_eq!(back.cell_array("k"), m.cell_array("k"));
            // An array of the wrong length is refused, naming it; nothing is written.
            let short = array("short", 1, vec![1.0; 3]);
            let e = write_mesh_with(&path, &dir.join("never"), &[short], &[]).unwrap_err();
            assert!(e.to_string().contains("`short`"), "{e}");
            assert!(!dir.join("never.vtu").exists());
        }
    }

    #[test]
    fn bad_files_are_errors_naming_the_file() {
        let dir = scratch("bad");
        let missing = dir.join("none.vtu");
        assert!(matches!(read_mesh(&missing), Err(Error::Io { .. })));
        let empty = dir.join("empty.vtu");
        std::fs::write(&empty, b"").unwrap();
        let garbage = dir.join("garbage.vtk");
        std::fs::write(
            &garbage,
            b"# vtk DataFile Version 2.0\nx\nASCII\nDATASET POLY",
        )
        .unwrap();
        let good = dir.join("good.vtu");
        two_triangles().export(&good).unwrap();
        let bytes = std::fs::read(&good).unwrap();
        let truncated = dir.join("truncated.vtu");
        std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
        for p in [&empty, &garbage, &truncated] {
            let e = read_mesh(p).expect_err("refused");
            assert!(
                e.to_string().contains(&p.display().to_string()),
                "{e} does not name {}",
                p.display()
            );
        }
        // A point array one value short.
        let short_triangles = || {
            let mut v = two_triangles();
            if let DataSet::UnstructuredGrid { pieces, .. } = &mut v.data {
                if let Piece::Inline(p) = &mut pieces[0] {
                    if let Attribute::DataArray(a) = &mut p.data.point[0] {
                        a.data = vec![1.0f64, 2.0, 3.0].into();
                    }
                }
            }
            v
        };
        for name in ["short.vtu", "short.vtk"] {
            let short = dir.join(name);
            match name.ends_with(".vtk") {
                true => short_triangles().export_ascii(&short).unwrap(),
                false => short_triangles().export(&short).unwrap(),
            }
            // Refused, or (vtkio drops what it cannot read) absent: never a 3-value array.
            if let Ok(m) = read_mesh(&short) {
                assert!(m.point_array("a").is_none(), "{name}");
            }
        }
    }
}
