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

use vtkio::model::{Attribute, DataSet, IOBuffer, Piece};

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

/// Reads the mesh of a `.vtk`, `.vtu` or `.vtp` file.
pub fn read_mesh(path: &Path) -> Result<Mesh> {
    let format = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    if !path.is_file() {
        return Err(Error::Io {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"),
        });
    }
    // vtkio's parsers index freely; a hostile file must not take the process down.
    let parsed = std::panic::catch_unwind(|| vtkio::Vtk::import(path))
        .map_err(|_| format("the VTK parser failed on this file (malformed)".into()))?;
    let mut vtk = parsed.map_err(|e| format(format!("not a readable VTK file: {e}")))?;
    vtk.load_all_pieces()
        .map_err(|e| format(format!("its pieces cannot be loaded: {e}")))?;
    let mut mesh = Mesh {
        path: path.to_path_buf(),
        points: Vec::new(),
        point_data: Vec::new(),
        cell_data: Vec::new(),
        cells: 0,
    };
    match vtk.data {
        DataSet::UnstructuredGrid { pieces, .. } => {
            for piece in pieces {
                let p = inline(piece, path)?;
                let cells = p.cells.types.len();
                add_piece(&mut mesh, p.points, cells, p.data, path)?;
            }
        }
        DataSet::PolyData { pieces, .. } => {
            for piece in pieces {
                let p = inline(piece, path)?;
                let cells = [&p.verts, &p.lines, &p.polys, &p.strips]
                    .iter()
                    .map(|c| c.as_ref().map_or(0, |c| c.num_cells()))
                    .sum();
                add_piece(&mut mesh, p.points, cells, p.data, path)?;
            }
        }
        other => {
            return Err(format(format!(
                "a {} data set: only unstructured grids and poly data are read (their points are \
                 explicit); save it as an unstructured grid (.vtu)",
                kind_name(&other)
            )))
        }
    }
    if mesh.num_points() == 0 {
        return Err(format("the mesh has no points".into()));
    }
    Ok(mesh)
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
            msg: "a piece stored in another file could not be loaded".into(),
        }),
    }
}

/// Appends one piece: its points and its arrays, which must match the arrays of earlier pieces
/// by name and components.
fn add_piece(
    mesh: &mut Mesh,
    points: IOBuffer,
    cells: usize,
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
    mesh.points.extend(pts);
    mesh.cells += cells;
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
