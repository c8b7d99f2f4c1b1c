//! The VTK readers and writer against two independent implementations: files meshio wrote
//! (`fixtures/vtk/make_vtk_fixtures.py`: every encoding it writes) and files vtkio wrote, and
//! our files read back by vtkio. Appended data, which neither writes, is built here byte by byte
//! from VTK's description of the format.

use std::path::{Path, PathBuf};

use base64::Engine;
use vtkio::model::{
    Attribute, Attributes, ByteOrder, CellType, Cells, DataArray, DataSet, ElementType, Piece,
    PolyDataPiece, UnstructuredGridPiece, Version, VertexNumbers, Vtk,
};

use super::*;

fn scratch(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-vtk-{name}"))
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/vtk")
}

fn close(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| (x - y).abs() <= 1e-12 * y.abs().max(1.0))
}

/// meshio's mesh: points (i, i²/10, i/2), triangles (0 1 2) (1 3 2) (2 3 4), `u` = x + 10y,
/// `v` = the point, `k` = 1, 2, 3 per cell.
#[test]
fn every_encoding_meshio_writes_reads_alike() {
    let points: Vec<f64> = (0..5)
        .flat_map(|i| {
            let i = f64::from(i);
            [i, i * i / 10.0, 0.5 * i]
        })
        .collect();
    let u: Vec<f64> = points.chunks(3).map(|p| p[0] + 10.0 * p[1]).collect();
    for name in [
        "meshio_zlib.vtu",
        "meshio_raw.vtu",
        "meshio_ascii.vtu",
        "meshio_51_ascii.vtk",
        "meshio_51_binary.vtk",
        "meshio_42_ascii.vtk",
        "meshio_42_binary.vtk",
    ] {
        let m = read_mesh(&fixtures().join(name)).unwrap_or_else(|e| panic!("{e}"));
        assert!(close(&m.points, &points), "{name}: {:?}", m.points);
        assert_eq!(m.connectivity, [0, 1, 2, 1, 3, 2, 2, 3, 4], "{name}");
        assert_eq!(m.offsets, [3, 6, 9], "{name}");
        assert_eq!((m.cells, m.types.clone()), (3, vec![5, 5, 5]), "{name}");
        assert!(close(&m.point_array("u").unwrap().values, &u), "{name}");
        let v = m.point_array("v").unwrap();
        assert_eq!(v.components, 3, "{name}");
        assert!(close(&v.values, &points), "{name}");
        assert!(
            close(&m.cell_array("k").unwrap().values, &[1.0, 2.0, 3.0]),
            "{name}"
        );
        let third = 1.0 / 3.0;
        let centre0 = [third * 3.0, third * 0.5, third * 1.5];
        assert!(close(&m.cell_centres[..3], &centre0), "{name}");
    }
}

/// Two triangles on four points in the z = 0 plane, a scalar and a 3-vector per point and a
/// scalar per cell, as vtkio models them.
fn two_triangles() -> Vtk {
    let points = vec![
        0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0f64,
    ];
    let scalars = |name: &str, data: vtkio::IOBuffer| {
        Attribute::DataArray(DataArray {
            name: name.into(),
            elem: ElementType::Scalars {
                num_comp: 1,
                lookup_table: None,
            },
            data,
        })
    };
    let piece = UnstructuredGridPiece {
        points: points.into(),
        cells: Cells {
            cell_verts: VertexNumbers::XML {
                connectivity: vec![0, 1, 2, 1, 3, 2],
                offsets: vec![3, 6],
            },
            types: vec![CellType::Triangle; 2],
        },
        data: Attributes {
            point: vec![
                scalars("a", vec![1.0f64, 2.0, 3.0, 4.0].into()),
                Attribute::DataArray(DataArray {
                    name: "u".into(),
                    elem: ElementType::Vectors,
                    data: vec![
                        0.5f32, 0.0, 1.5, 0.0, 2.5, 0.0, 3.5, 0.0, 4.5, 0.0, 5.5, 0.0,
                    ]
                    .into(),
                }),
            ],
            cell: vec![scalars("k", vec![7i32, 9].into())],
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

fn check_two_triangles(m: &Mesh, what: &str) {
    assert_eq!((m.num_points(), m.cells), (4, 2), "{what}");
    assert_eq!(m.varying_axes(), vec![0, 1], "{what}");
    let a = m.point_array("a").unwrap();
    assert_eq!(
        (a.components, a.values.clone()),
        (1, vec![1.0, 2.0, 3.0, 4.0]),
        "{what}"
    );
    let u = m.point_array("u").unwrap();
    assert_eq!((u.components, u.values[6]), (3, 3.5), "{what}");
    assert_eq!(m.cell_array("k").unwrap().values, vec![7.0, 9.0], "{what}");
    let third = 1.0 / 3.0;
    assert!(
        close(
            &m.cell_centres,
            &[third, third, 0.0, 2.0 * third, 2.0 * third, 0.0]
        ),
        "{what}"
    );
}

#[test]
fn files_vtkio_writes_read_alike() {
    let dir = scratch("vtkio");
    let xml = dir.join("m.vtu");
    two_triangles().export(&xml).unwrap();
    let ascii = dir.join("ascii.vtk");
    let mut legacy = two_triangles();
    legacy.version = Version::new((4, 2));
    legacy.clone().export_ascii(&ascii).unwrap();
    // Binary legacy files are big-endian, as VTK writes them.
    let binary = dir.join("binary.vtk");
    legacy.byte_order = ByteOrder::BigEndian;
    legacy.export_be(&binary).unwrap();
    for p in [&xml, &ascii, &binary] {
        check_two_triangles(
            &read_mesh(p).unwrap_or_else(|e| panic!("{e}")),
            &p.display().to_string(),
        );
    }
    // Poly data: vertices then polygons, numbered in that order.
    let poly = Vtk {
        data: DataSet::inline(PolyDataPiece {
            points: vec![
                0.0f64, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 2.0, 2.0, 0.0,
            ]
            .into(),
            verts: Some(VertexNumbers::XML {
                connectivity: vec![3],
                offsets: vec![1],
            }),
            polys: Some(VertexNumbers::XML {
                connectivity: vec![0, 1, 2],
                offsets: vec![3],
            }),
            ..Default::default()
        }),
        ..two_triangles()
    };
    let vtp = dir.join("p.vtp");
    poly.export(&vtp).unwrap();
    let m = read_mesh(&vtp).unwrap();
    assert_eq!((m.cells, m.types.clone()), (2, vec![2, 7]));
    assert_eq!(
        (m.connectivity.clone(), m.offsets.clone()),
        (vec![3, 0, 1, 2], vec![1, 4])
    );
}

#[test]
fn our_files_read_back_with_vtkio_and_ours() {
    let dir = scratch("write");
    let src = dir.join("m.vtu");
    two_triangles().export(&src).unwrap();
    let array = |name: &str, components, values: Vec<f64>| MeshArray {
        name: name.into(),
        components,
        values,
    };
    let pred = array("prediction", 2, (0..8).map(f64::from).collect());
    let replaced = array("a", 1, vec![9.0; 4]);
    let per_cell = array("c", 1, vec![5.0, 6.0]);
    let out = write_mesh_with(
        &src,
        &dir.join("out.vtk"),
        &[pred.clone(), replaced.clone()],
        std::slice::from_ref(&per_cell),
    )
    .unwrap();
    assert_eq!(out.extension().unwrap(), "vtu");
    let m = read_mesh(&src).unwrap();
    let back = read_mesh(&out).unwrap();
    assert_eq!(
        (&back.points, &back.connectivity, &back.types),
        (&m.points, &m.connectivity, &m.types)
    );
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
    // vtkio, independently.
    let v = Vtk::import(&out).unwrap();
    let DataSet::UnstructuredGrid { pieces, .. } = v.data else {
        panic!("not a grid")
    };
    let Piece::Inline(p) = &pieces[0] else {
        panic!("not inline")
    };
    assert_eq!(p.points.clone().cast_into::<f64>().unwrap(), m.points);
    let found = p.data.point.iter().find_map(|a| match a {
        Attribute::DataArray(d) if d.name == "prediction" => d.data.clone().cast_into::<f64>(),
        _ => None,
    });
    assert_eq!(found.unwrap(), pred.values);
    // An array of the wrong length is refused, naming it; nothing is written.
    let short = array("short", 1, vec![1.0; 3]);
    let e = write_mesh_with(&src, &dir.join("never"), &[short], &[]).unwrap_err();
    assert!(e.to_string().contains("`short`"), "{e}");
    assert!(!dir.join("never.vtu").exists());
    // Triangles of our own, read by vtkio.
    let tri = dir.join("t.vtu");
    let xyz = [0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    write_triangles(
        &tri,
        &xyz,
        &[[0, 1, 2]],
        &[array("w", 1, vec![1.0, 2.0, 3.0])],
    )
    .unwrap();
    assert!(Vtk::import(&tri).is_ok());
    assert_eq!(
        read_mesh(&tri).unwrap().point_array("w").unwrap().values,
        [1.0, 2.0, 3.0]
    );
}

/// Appended data (raw and base64; plain and zlib; 32- and 64-bit headers; both byte orders),
/// built from VTK's description: each array at its offset, a byte-count header (or the
/// compressed blocks' header) then its bytes.
#[test]
fn appended_data_in_every_layout() {
    use std::io::Write as _;
    let dir = scratch("appended");
    let points: Vec<f64> = vec![0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0];
    let u: Vec<f64> = vec![1.5, -2.0, 4.25];
    for (word, big, zlib, b64) in [
        (4, false, false, false),
        (8, false, true, false),
        (8, true, false, false),
        (4, true, true, false),
        (8, false, false, true),
        (4, false, true, true),
    ] {
        let put = |v: u64| -> Vec<u8> {
            match (word, big) {
                (4, false) => (v as u32).to_le_bytes().to_vec(),
                (4, true) => (v as u32).to_be_bytes().to_vec(),
                (_, false) => v.to_le_bytes().to_vec(),
                (_, true) => v.to_be_bytes().to_vec(),
            }
        };
        let block = |data: Vec<u8>| -> Vec<u8> {
            let (mut head, body) = if zlib {
                let mut e =
                    flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(&data).unwrap();
                let c = e.finish().unwrap();
                let mut h = put(1);
                h.extend(put(data.len() as u64));
                h.extend(put(data.len() as u64));
                h.extend(put(c.len() as u64));
                (h, c)
            } else {
                (put(data.len() as u64), data)
            };
            if b64 {
                // VTK encodes the header and the data separately.
                let e = base64::engine::general_purpose::STANDARD;
                let mut t = e.encode(&head).into_bytes();
                t.extend(e.encode(&body).into_bytes());
                t
            } else {
                head.extend(body);
                head
            }
        };
        let f64s = |v: &[f64]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| {
                    if big {
                        x.to_be_bytes()
                    } else {
                        x.to_le_bytes()
                    }
                })
                .collect()
        };
        let i32s = |v: &[i32]| -> Vec<u8> {
            v.iter()
                .flat_map(|x| {
                    if big {
                        x.to_be_bytes()
                    } else {
                        x.to_le_bytes()
                    }
                })
                .collect()
        };
        let parts = [
            block(f64s(&points)),
            block(i32s(&[0, 1, 2])),
            block(i32s(&[3])),
            block(vec![5u8]),
            block(f64s(&u)),
        ];
        let mut offsets = Vec::new();
        let mut data = Vec::new();
        for p in &parts {
            offsets.push(data.len());
            data.extend(p);
        }
        let xml = format!(
            r#"<?xml version="1.0"?>
<VTKFile type="UnstructuredGrid" version="1.0" byte_order="{}" header_type="UInt{}"{}>
<UnstructuredGrid><Piece NumberOfPoints="3" NumberOfCells="1">
<Points><DataArray type="Float64" NumberOfComponents="3" format="appended" offset="{}"/></Points>
<Cells>
<DataArray type="Int32" Name="connectivity" format="appended" offset="{}"/>
<DataArray type="Int32" Name="offsets" format="appended" offset="{}"/>
<DataArray type="UInt8" Name="types" format="appended" offset="{}"/>
</Cells>
<PointData><DataArray type="Float64" Name="u" format="appended" offset="{}"/></PointData>
</Piece></UnstructuredGrid>
<AppendedData encoding="{}">
_"#,
            if big { "BigEndian" } else { "LittleEndian" },
            word * 8,
            if zlib {
                r#" compressor="vtkZLibDataCompressor""#
            } else {
                ""
            },
            offsets[0],
            offsets[1],
            offsets[2],
            offsets[3],
            offsets[4],
            if b64 { "base64" } else { "raw" },
        );
        let mut bytes = xml.into_bytes();
        bytes.extend(&data);
        bytes.extend(b"\n</AppendedData>\n</VTKFile>\n");
        let path = dir.join(format!("a{word}{big}{zlib}{b64}.vtu"));
        std::fs::write(&path, &bytes).unwrap();
        let what = format!("header {word}, big-endian {big}, zlib {zlib}, base64 {b64}");
        let m = read_mesh(&path).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(m.points, points, "{what}");
        assert_eq!(
            (m.connectivity.clone(), m.offsets.clone(), m.types.clone()),
            (vec![0, 1, 2], vec![3], vec![5]),
            "{what}"
        );
        assert_eq!(m.point_array("u").unwrap().values, u, "{what}");
    }
}

/// Every malformed input is an error naming the file, never a panic.
#[test]
fn bad_files_are_errors_naming_the_file() {
    let dir = scratch("bad");
    assert!(matches!(
        read_mesh(&dir.join("none.vtu")),
        Err(Error::Io { .. })
    ));
    let good = dir.join("good.vtu");
    two_triangles().export(&good).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let text = String::from_utf8(bytes.clone()).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty.vtu", Vec::new()),
        ("empty.vtk", Vec::new()),
        ("garbage.vtk", b"# vtk DataFile Version 2.0\nx\nASCII\nDATASET POLY".to_vec()),
        ("truncated.vtu", bytes[..bytes.len() / 2].to_vec()),
        ("image.vtu", text.replace("UnstructuredGrid", "ImageData").into_bytes()),
        ("lz4.vtu", text.replace("<VTKFile ", r#"<VTKFile compressor="vtkLZ4DataCompressor" "#).into_bytes()),
        ("points.vtu", text.replace(r#"NumberOfPoints="4""#, r#"NumberOfPoints="5""#).into_bytes()),
        ("bomb.vtk", b"# vtk DataFile Version 2.0\nx\nBINARY\nDATASET UNSTRUCTURED_GRID\nPOINTS 99999999999 double\n".to_vec()),
        ("cell.vtk", b"# vtk DataFile Version 4.2\nx\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 1 double\n0 0 0\nCELLS 1 2\n1 7\nCELL_TYPES 1\n1\n".to_vec()),
        ("short.vtk", b"# vtk DataFile Version 4.2\nx\nASCII\nDATASET UNSTRUCTURED_GRID\nPOINTS 2 double\n0 0 0 1 1 1\nPOINT_DATA 2\nSCALARS a double\nLOOKUP_TABLE default\n1\n".to_vec()),
    ];
    cases.push((
        "piece_without_points.vtu",
        std::fs::read(fixtures().join("piece_without_points.vtu")).unwrap(),
    ));
    for (name, bytes) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let e = read_mesh(&p).expect_err(name);
        assert!(
            e.to_string().contains(&p.display().to_string()),
            "{e} does not name {name}"
        );
        assert!(!e.to_string().contains('\n'), "one line: {e}");
    }
}
