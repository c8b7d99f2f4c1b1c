//! Writing VTK XML unstructured grids (`.vtu`): every array as Float64 (cells as Int64 and
//! UInt8), inline base64 after a 64-bit byte count, little-endian, uncompressed. ParaView, VTK,
//! meshio and vtkio read them; so does [`super::read_mesh`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use base64::Engine;

use super::{read_mesh, MeshArray};
use crate::{Error, Result};

/// Writes the mesh of the VTK file `source` with `point` and `cell` arrays added (each spans the
/// whole mesh, pieces in order, as [`read_mesh`] numbers points and cells; an array of the same
/// name as one of the file's is replaced) as `dest` with the extension `vtu`, whatever the
/// source's format (poly data's cells become poly-vertex, poly-line, polygon and triangle-strip
/// cells of the grid). Every point, cell and array of the file is kept. Written atomically;
/// returns the path written.
pub fn write_mesh_with(
    source: &Path,
    dest: &Path,
    point: &[MeshArray],
    cell: &[MeshArray],
) -> Result<PathBuf> {
    let mut mesh = read_mesh(source)?;
    // An array of the wrong length is refused by `write_vtu`, before anything is written.
    for (arrays, into) in [(point, &mut mesh.point_data), (cell, &mut mesh.cell_data)] {
        for a in arrays {
            into.retain(|old| old.name != a.name);
            into.push(a.clone());
        }
    }
    let out = dest.with_extension("vtu");
    write_vtu(
        &out,
        &mesh.points,
        (&mesh.connectivity, &mesh.offsets, &mesh.types),
        &mesh.point_data,
        &mesh.cell_data,
    )?;
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
    let connectivity: Vec<u64> = triangles.iter().flatten().map(|&i| i as u64).collect();
    let offsets: Vec<u64> = (1..=triangles.len() as u64).map(|k| 3 * k).collect();
    let types = vec![5u8; triangles.len()];
    write_vtu(path, points, (&connectivity, &offsets, &types), point, &[])
}

/// Writes one piece: `points` (N, 3) row-major, cells as (connectivity, end offsets, VTK
/// types), point and cell arrays.
fn write_vtu(
    path: &Path,
    points: &[f64],
    (connectivity, offsets, types): (&[u64], &[u64], &[u8]),
    point: &[MeshArray],
    cell: &[MeshArray],
) -> Result<()> {
    let bad = |msg: String| Error::Format {
        path: path.to_path_buf(),
        msg,
    };
    let n = points.len() / 3;
    let cells = offsets.len();
    if !points.len().is_multiple_of(3)
        || types.len() != cells
        || connectivity.iter().any(|&i| i >= n as u64)
        || offsets.last().copied().unwrap_or(0) != connectivity.len() as u64
    {
        return Err(bad(
            "points are not (x, y, z) triples, or the cells do not fit them".into(),
        ));
    }
    for (arrays, tuples, what) in [(point, n, "point"), (cell, cells, "cell")] {
        if let Some(a) = arrays
            .iter()
            .find(|a| a.components == 0 || a.values.len() != tuples * a.components)
        {
            return Err(bad(format!(
                "{what} array `{}` does not have {tuples} tuples",
                a.name
            )));
        }
    }
    let mut x = String::new();
    let _ = writeln!(x, r#"<?xml version="1.0"?>"#);
    let _ = writeln!(
        x,
        r#"<VTKFile type="UnstructuredGrid" version="1.0" byte_order="LittleEndian" header_type="UInt64">"#
    );
    let _ = writeln!(x, "  <UnstructuredGrid>");
    let _ = writeln!(
        x,
        r#"    <Piece NumberOfPoints="{n}" NumberOfCells="{cells}">"#
    );
    for (tag, arrays) in [("PointData", point), ("CellData", cell)] {
        let _ = writeln!(x, "      <{tag}>");
        for a in arrays {
            let bytes: Vec<u8> = a.values.iter().flat_map(|v| v.to_le_bytes()).collect();
            array(&mut x, "Float64", Some(&a.name), a.components, &bytes);
        }
        let _ = writeln!(x, "      </{tag}>");
    }
    let _ = writeln!(x, "      <Points>");
    let bytes: Vec<u8> = points.iter().flat_map(|v| v.to_le_bytes()).collect();
    array(&mut x, "Float64", None, 3, &bytes);
    let _ = writeln!(x, "      </Points>");
    let _ = writeln!(x, "      <Cells>");
    let ints =
        |v: &[u64]| -> Vec<u8> { v.iter().flat_map(|&i| (i as i64).to_le_bytes()).collect() };
    array(
        &mut x,
        "Int64",
        Some("connectivity"),
        1,
        &ints(connectivity),
    );
    array(&mut x, "Int64", Some("offsets"), 1, &ints(offsets));
    array(&mut x, "UInt8", Some("types"), 1, types);
    let _ = writeln!(x, "      </Cells>");
    let _ = writeln!(x, "    </Piece>");
    let _ = writeln!(x, "  </UnstructuredGrid>");
    let _ = writeln!(x, "</VTKFile>");
    ono_io::atomic::write_atomic(path, x.as_bytes())?;
    Ok(())
}

/// One `DataArray` element: a 64-bit byte count and the data, one base64 stream.
fn array(x: &mut String, ty: &str, name: Option<&str>, components: usize, data: &[u8]) {
    let mut block = (data.len() as u64).to_le_bytes().to_vec();
    block.extend_from_slice(data);
    let name = name.map_or(String::new(), |n| format!(r#" Name="{}""#, escape(n)));
    let _ = writeln!(
        x,
        r#"        <DataArray type="{ty}"{name} NumberOfComponents="{components}" format="binary">{}</DataArray>"#,
        base64::engine::general_purpose::STANDARD.encode(&block)
    );
}

/// `s` as an XML attribute value.
fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
