//! `ono_data::import` on files written here: VTU meshes of different sizes, a shared grid in
//! shuffled order, cell data, arrays along a first axis and per file, and every refusal.

use std::path::{Path, PathBuf};

use ono_data::array::{ArrayData, NamedArray};
use ono_data::import::{
    import, read_manifest, write, Association, Coords, ImportLayout, ImportOptions, SampleAxis,
};
use ono_data::readers::npy::write_npz;
use tch::{Kind, Tensor};
use vtkio::model::{
    Attribute, Attributes, ByteOrder, CellType, Cells, DataArray, DataSet, ElementType,
    UnstructuredGridPiece, Version, VertexNumbers, Vtk,
};

fn scratch(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-import-{name}"))
}

fn scalar(name: &str, values: Vec<f64>) -> Attribute {
    Attribute::DataArray(DataArray {
        name: name.into(),
        elem: ElementType::Scalars {
            num_comp: 1,
            lookup_table: None,
        },
        data: values.into(),
    })
}

/// A mesh of `points` ((x, y) in the z = 0 plane) with a triangle fan from point 0 (cells
/// (0, i, i + 1)), the point arrays and cell arrays given, written to `path` (XML or legacy
/// ASCII by the extension).
fn write_mesh(path: &Path, points: &[[f64; 2]], point: Vec<Attribute>, cell: Vec<Attribute>) {
    let xyz: Vec<f64> = points.iter().flat_map(|p| [p[0], p[1], 0.0]).collect();
    let n = points.len() as u64;
    let tris: Vec<u64> = (1..n - 1).flat_map(|i| [0, i, i + 1]).collect();
    let offsets: Vec<u64> = (1..n - 1).map(|i| 3 * i).collect();
    let piece = UnstructuredGridPiece {
        points: xyz.into(),
        cells: Cells {
            types: vec![CellType::Triangle; offsets.len()],
            cell_verts: VertexNumbers::XML {
                connectivity: tris,
                offsets,
            },
        },
        data: Attributes { point, cell },
    };
    let vtk = Vtk {
        version: Version::new((1, 0)),
        title: "test".into(),
        byte_order: ByteOrder::LittleEndian,
        data: DataSet::inline(piece),
        file_path: None,
    };
    if path.extension().unwrap() == "vtk" {
        vtk.export_ascii(path).unwrap()
    } else {
        vtk.export(path).unwrap()
    }
}

/// Points of sample `k`: 5 + k points on a circle of radius 1 + k/10 around (k, 0), and two
/// fields of them: a(x, y) = x + 2y, u(x, y) = x·y − k.
fn ragged_sample(k: usize) -> (Vec<[f64; 2]>, Vec<f64>, Vec<f64>) {
    let n = 5 + k;
    let r = 1.0 + k as f64 / 10.0;
    let pts: Vec<[f64; 2]> = (0..n)
        .map(|i| {
            let t = i as f64 / n as f64 * std::f64::consts::TAU;
            [k as f64 + r * t.cos(), r * t.sin()]
        })
        .collect();
    let a = pts.iter().map(|p| p[0] + 2.0 * p[1]).collect();
    let u = pts.iter().map(|p| p[0] * p[1] - k as f64).collect();
    (pts, a, u)
}

fn values(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap()
}

#[test]
fn meshes_of_different_sizes_become_padded_point_clouds() {
    let dir = scratch("ragged");
    for k in 0..6 {
        let (pts, a, u) = ragged_sample(k);
        // Legacy and XML files alike.
        let ext = if k % 2 == 0 { "vtu" } else { "vtk" };
        write_mesh(
            &dir.join(format!("s{k}.{ext}")),
            &pts,
            vec![scalar("a", a), scalar("u", u)],
            vec![],
        );
    }
    let o = ImportOptions {
        test_fraction: 0.34,
        seed: 3,
        ..Default::default()
    };
    let im = import(&[dir.to_path_buf()], &o).unwrap();
    let m = &im.manifest;
    assert_eq!(m.layout, ImportLayout::PointCloud { ragged: true });
    assert_eq!(m.coords, Coords::MeshPoints { axes: vec![0, 1] });
    assert_eq!(
        (m.inputs[0].name.as_str(), m.targets[0].name.as_str()),
        ("a", "u")
    );
    assert!(
        im.inferred.iter().any(|s| s.contains("targets: `u`")),
        "{:?}",
        im.inferred
    );
    // 6 samples, round(6 × 0.34) = 2 in the test split, both splits in file order.
    assert_eq!((m.train.len(), m.test.len()), (4, 2));
    let mut all: Vec<String> = m.train.iter().chain(&m.test).map(|s| s.stem()).collect();
    all.sort();
    assert_eq!(all, ["s0", "s1", "s2", "s3", "s4", "s5"]);
    // The same seed splits the same way; another seed (here) differently.
    let again = import(&[dir.to_path_buf()], &o).unwrap();
    assert_eq!(again.manifest.test, m.test);
    for (split, refs) in [(&im.dataset.train, &m.train), (&im.dataset.test, &m.test)] {
        let lengths = split.lengths.clone().expect("ragged");
        for (b, r) in refs.iter().enumerate() {
            let k: usize = r.stem()[1..].parse().unwrap();
            let (pts, a, u) = ragged_sample(k);
            assert_eq!(lengths[b] as usize, pts.len());
            let n = pts.len() as i64;
            let pos = values(&split.pos.get(b as i64).narrow(0, 0, n));
            let want: Vec<f64> = pts.iter().flat_map(|p| p.to_vec()).collect();
            let close = |x: &[f64], y: &[f64]| {
                x.len() == y.len() && x.iter().zip(y).all(|(p, q)| (p - q).abs() < 1e-5)
            };
            assert!(close(&pos, &want), "positions of {}", r.stem());
            assert!(close(&values(&split.fx.get(b as i64).narrow(0, 0, n)), &a));
            assert!(close(&values(&split.y.get(b as i64).narrow(0, 0, n)), &u));
            // Padding is zero.
            let max = split.fx.size()[1];
            if n < max {
                assert_eq!(
                    values(
                        &split
                            .y
                            .get(b as i64)
                            .narrow(0, n, max - n)
                            .abs()
                            .sum(Kind::Double)
                    ),
                    [0.0]
                );
            }
        }
    }
    // Written and read back, with its manifest.
    let file = dir.join("set.safetensors");
    write(&im, &file).unwrap();
    assert_eq!(read_manifest(&file).unwrap().as_ref(), Some(m));
    let ds = ono_data::dataset::TensorDataset::read(&file).unwrap();
    assert_eq!(ds.train.lengths, im.dataset.train.lengths);
}

#[test]
fn a_shared_grid_in_shuffled_order_becomes_a_grid() {
    let dir = scratch("grid");
    // A 4 (x) × 3 (y) grid of points written in a scrambled order.
    let mut pts: Vec<[f64; 2]> = (0..12)
        .map(|i| [0.5 * (i % 4) as f64, 2.0 * (i / 4) as f64])
        .collect();
    let perm = [7, 2, 11, 0, 5, 9, 1, 10, 3, 6, 8, 4];
    pts = perm.iter().map(|&i| pts[i]).collect();
    for k in 0..4 {
        let u: Vec<f64> = pts.iter().map(|p| 10.0 * p[0] + p[1] + k as f64).collect();
        let a: Vec<f64> = pts.iter().map(|p| p[0] - p[1]).collect();
        write_mesh(
            &dir.join(format!("g{k}.vtu")),
            &pts,
            vec![scalar("a", a), scalar("u", u)],
            vec![],
        );
    }
    let im = import(&[dir.to_path_buf()], &ImportOptions::default()).unwrap();
    let ImportLayout::Grid { shape, order } = &im.manifest.layout else {
        panic!("not a grid: {:?}", im.manifest.layout)
    };
    // Rows along y (3), columns along x (4), as grid_positions_2d.
    assert_eq!(shape, &[3, 4]);
    assert_eq!(im.dataset.grid.as_deref(), Some(&[3i64, 4][..]));
    let order = order.clone().expect("the file order is not row-major");
    let pos = values(&im.dataset.train.pos.reshape([-1, 2]));
    for (kk, &i) in order.iter().enumerate() {
        // Grid node kk is the file's point i, and row-major: x runs fastest.
        assert_eq!([pos[2 * kk], pos[2 * kk + 1]], pts[i]);
        assert_eq!(pos[2 * kk], 0.5 * (kk % 4) as f64);
        assert_eq!(pos[2 * kk + 1], 2.0 * (kk / 4) as f64);
    }
    // Back in the file's order: the positions as written, point for point.
    let back = im
        .manifest
        .layout
        .to_file_order(&im.dataset.train.pos.get(0).to_kind(tch::Kind::Double))
        .unwrap();
    let back = values(&back.reshape([-1]));
    for (i, p) in pts.iter().enumerate() {
        assert_eq!([back[2 * i], back[2 * i + 1]], *p, "file point {i}");
    }
    assert!(im
        .manifest
        .layout
        .to_file_order(&im.dataset.train.pos.get(0).narrow(0, 0, 11))
        .is_err());
    for (split, refs) in [
        (&im.dataset.train, &im.manifest.train),
        (&im.dataset.test, &im.manifest.test),
    ] {
        assert!(split.lengths.is_none());
        for (b, r) in refs.iter().enumerate() {
            let k: f64 = r.stem()[1..].parse().unwrap();
            let y = values(&split.y.get(b as i64));
            for kk in 0..12 {
                let want = 10.0 * pos[2 * kk] + pos[2 * kk + 1] + k;
                assert!((y[kk] - want).abs() < 1e-5);
            }
        }
    }
}

#[test]
fn cell_data_live_at_the_cell_centres() {
    let dir = scratch("cells");
    let pts = [[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [-1.0, 0.5]];
    for k in 0..3 {
        // Three fan triangles (0,1,2), (0,2,3), (0,3,4).
        let c: Vec<f64> = vec![1.0 + k as f64, 2.0, 3.0];
        let t: Vec<f64> = vec![k as f64, 5.0, 6.0];
        write_mesh(
            &dir.join(format!("c{k}.vtu")),
            &pts,
            vec![scalar("p", vec![0.0; 5])],
            vec![scalar("c", c), scalar("t", t)],
        );
    }
    let o = ImportOptions {
        inputs: Some(vec!["c".into()]),
        targets: Some(vec!["t".into()]),
        ..Default::default()
    };
    let im = import(&[dir.to_path_buf()], &o).unwrap();
    assert_eq!(im.manifest.association, Association::Cell);
    assert_eq!(im.manifest.coords, Coords::CellCentres { axes: vec![0, 1] });
    assert_eq!(im.dataset.train.fx.size()[1], 3);
    let pos = values(&im.dataset.test.pos.get(0));
    let want = [2.0 / 3.0, 1.0 / 3.0, 1.0 / 3.0, 2.0 / 3.0, -1.0 / 3.0, 0.5];
    assert!(
        pos.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6),
        "{pos:?}"
    );
}

fn npz(path: &Path, arrays: &[(&str, Vec<usize>, Vec<f64>)]) {
    let arrays: Vec<NamedArray> = arrays
        .iter()
        .map(|(n, s, v)| NamedArray::new(*n, s.clone(), ArrayData::F64(v.clone())).unwrap())
        .collect();
    write_npz(path, &arrays).unwrap();
}

#[test]
fn arrays_along_a_first_axis_without_coordinates_are_a_unit_grid() {
    let dir = scratch("leading");
    let (s, h, w) = (5usize, 4usize, 3usize);
    let a: Vec<f64> = (0..s * h * w).map(|i| i as f64).collect();
    let u: Vec<f64> = (0..s * h * w * 2).map(|i| -(i as f64)).collect();
    let file = dir.join("all.npz");
    npz(
        &file,
        &[
            ("a", vec![s, h, w], a.clone()),
            ("u", vec![s, h, w, 2], u.clone()),
        ],
    );
    let im = import(std::slice::from_ref(&file), &ImportOptions::default()).unwrap();
    assert_eq!(im.manifest.coords, Coords::UnitGrid);
    assert_eq!(
        im.manifest.layout,
        ImportLayout::Grid {
            shape: vec![4, 3],
            order: None
        }
    );
    assert_eq!(im.manifest.targets[0].components, 2);
    let want = ono_data::dataset::grid_positions_2d(4, 3).unwrap();
    let (got, want) = (values(&im.dataset.train.pos), values(&want));
    assert!(
        got.iter().zip(&want).all(|(a, b)| (a - b).abs() < 1e-6),
        "{got:?}"
    );
    // Sample i of the file is row i of the arrays.
    for (b, r) in im.manifest.test.iter().enumerate() {
        let i = r.index.unwrap();
        assert_eq!(r.stem(), format!("all-{i}"));
        assert_eq!(
            values(&im.dataset.test.fx.get(b as i64)),
            a[i * 12..(i + 1) * 12]
        );
        assert_eq!(
            values(&im.dataset.test.y.get(b as i64)),
            u[i * 24..(i + 1) * 24]
        );
    }
}

#[test]
fn per_file_arrays_with_coordinates_are_point_clouds() {
    let dir = scratch("perfile");
    for k in 0..4usize {
        let n = 6 + k;
        let coords: Vec<f64> = (0..n * 2).map(|i| (i * (k + 1)) as f64 / 7.0).collect();
        let f: Vec<f64> = (0..n).map(|i| i as f64).collect();
        npz(
            &dir.join(format!("p{k}.npz")),
            &[
                ("coords", vec![n, 2], coords),
                ("f", vec![n], f.clone()),
                ("g", vec![n, 1], f),
            ],
        );
    }
    let im = import(&[dir.to_path_buf()], &ImportOptions::default()).unwrap();
    assert_eq!(
        im.manifest.coords,
        Coords::Array {
            name: "coords".into()
        }
    );
    assert_eq!(
        im.manifest.layout,
        ImportLayout::PointCloud { ragged: true }
    );
    assert!(im
        .inferred
        .iter()
        .any(|s| s.contains("one sample per file")));
    assert_eq!(im.dataset.train.pos.size()[2], 2);
    // Named explicitly, the sample axis must fit: these files have no sample axis of 4.
    let lead = ImportOptions {
        samples: Some(SampleAxis::Leading),
        ..Default::default()
    };
    let e = import(&[dir.join("p0.npz"), dir.join("p1.npz")], &lead).unwrap_err();
    assert!(e.to_string().contains("p0.npz"), "{e}");
}

/// Every refusal is one line naming the file (and the array where there is one).
#[test]
fn bad_inputs_are_refused_by_name() {
    let dir = scratch("bad");
    let ok = |name: &str| {
        let (pts, a, u) = ragged_sample(1);
        let p = dir.join(name);
        write_mesh(&p, &pts, vec![scalar("a", a), scalar("u", u)], vec![]);
        p
    };
    let (g0, g1) = (ok("g0.vtu"), ok("g1.vtu"));
    let check = |files: Vec<PathBuf>, o: ImportOptions, file: &Path, words: &[&str]| {
        let e = import(&files, &o).expect_err("refused").to_string();
        assert!(!e.contains('\n'), "one line: {e}");
        assert!(
            e.contains(&file.display().to_string()),
            "{e} does not name {}",
            file.display()
        );
        for w in words {
            assert!(e.contains(w), "{e} does not say {w}");
        }
    };
    // A missing array.
    let o = ImportOptions {
        targets: Some(vec!["nope".into()]),
        ..Default::default()
    };
    check(vec![g0.clone(), g1.clone()], o, &g0, &["`nope`"]);
    // The array missing from the second file only.
    let (pts, a, _) = ragged_sample(2);
    let lacks = dir.join("lacks.vtu");
    write_mesh(&lacks, &pts, vec![scalar("a", a.clone())], vec![]);
    check(
        vec![g0.clone(), lacks.clone()],
        ImportOptions::default(),
        &lacks,
        &["`u`"],
    );
    // Components that differ between samples.
    let vec3 = dir.join("vec3.vtu");
    let u3 = Attribute::DataArray(DataArray {
        name: "u".into(),
        elem: ElementType::Vectors,
        data: vec![0.5f64; pts.len() * 3].into(),
    });
    write_mesh(&vec3, &pts, vec![scalar("a", a.clone()), u3], vec![]);
    check(
        vec![g0.clone(), vec3.clone()],
        ImportOptions::default(),
        &vec3,
        &["`u`", "components"],
    );
    // NaN and Inf.
    for (name, bad) in [("nan.vtu", f64::NAN), ("inf.vtu", f64::INFINITY)] {
        let mut u = vec![1.0; pts.len()];
        u[3] = bad;
        let p = dir.join(name);
        write_mesh(
            &p,
            &pts,
            vec![scalar("a", a.clone()), scalar("u", u)],
            vec![],
        );
        check(
            vec![g0.clone(), p.clone()],
            ImportOptions::default(),
            &p,
            &["`u`", "point 3"],
        );
    }
    // An empty file, a truncated one, a missing one.
    let empty = dir.join("empty.vtu");
    std::fs::write(&empty, b"").unwrap();
    check(
        vec![g0.clone(), empty.clone()],
        ImportOptions::default(),
        &empty,
        &[],
    );
    let bytes = std::fs::read(&g1).unwrap();
    let cut = dir.join("cut.vtu");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    check(
        vec![g0.clone(), cut.clone()],
        ImportOptions::default(),
        &cut,
        &[],
    );
    let missing = dir.join("missing.vtu");
    check(
        vec![g0.clone(), missing.clone()],
        ImportOptions::default(),
        &missing,
        &[],
    );
    // Arrays: a non-numeric array (a numpy string array), sizes that differ between samples,
    // NaN in an array.
    let strings = dir.join("strings.npy");
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }";
    let mut h = header.as_bytes().to_vec();
    while !(10 + h.len() + 1).is_multiple_of(64) {
        h.push(b' ');
    }
    h.push(b'\n');
    npy.extend((h.len() as u16).to_le_bytes());
    npy.extend(h);
    npy.extend([0u8; 24]);
    std::fs::write(&strings, npy).unwrap();
    check(
        vec![strings.clone()],
        ImportOptions::default(),
        &strings,
        &[],
    );
    let lead = dir.join("lead.npz");
    npz(
        &lead,
        &[
            ("a", vec![3, 4, 4], vec![0.0; 48]),
            ("u", vec![2, 4, 4], vec![0.0; 32]),
        ],
    );
    check(
        vec![lead.clone()],
        ImportOptions::default(),
        &lead,
        &["`a`", "samples"],
    );
    let mut v = vec![0.0; 48];
    v[17] = f64::NAN;
    let nan = dir.join("nan.npz");
    npz(
        &nan,
        &[("a", vec![3, 4, 4], vec![0.0; 48]), ("u", vec![3, 4, 4], v)],
    );
    check(
        vec![nan.clone()],
        ImportOptions::default(),
        &nan,
        &["`u`", "NaN"],
    );
    // Too few samples, a bad fraction, both kinds at once.
    assert!(import(std::slice::from_ref(&g0), &ImportOptions::default()).is_err());
    let half = ImportOptions {
        test_fraction: 1.0,
        ..Default::default()
    };
    assert!(import(&[g0.clone(), g1.clone()], &half).is_err());
    assert!(import(&[g0.clone(), lead.clone()], &ImportOptions::default()).is_err());
}
