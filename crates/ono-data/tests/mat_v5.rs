//! The MAT v5 reader and writer against files written (or, for big-endian and MATLAB-style narrow
//! storage, checked) by scipy: `fixtures/mat/*.mat`, with the arrays `scipy.io.loadmat` returns in
//! `fixtures/mat/expected.json` (both made by `fixtures/mat/make_mat_fixtures.py`).

use std::path::{Path, PathBuf};

use ono_data::array::{ArrayData, NamedArray};
use ono_data::readers::mat_v5::{self, VariableInfo};
use rand::{Rng, RngCore};
use serde_json::Value;

const FILES: [&str; 5] = [
    "scipy_plain.mat",
    "scipy_zlib.mat",
    "darcy_like.mat",
    "hand_le.mat",
    "hand_be.mat",
];
/// Files whose every variable is zlib-compressed: Adler-32 makes any corruption detectable.
const ALL_COMPRESSED: [&str; 2] = ["scipy_zlib.mat", "darcy_like.mat"];

fn mat_dir() -> PathBuf {
    ono_testing::fixtures_dir().join("mat")
}

fn fixture(name: &str) -> PathBuf {
    mat_dir().join(name)
}

fn bytes_of(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).unwrap()
}

fn expected() -> Value {
    let text = std::fs::read_to_string(mat_dir().join("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn expected_file(exp: &Value, file: &str) -> Value {
    exp["files"][file].clone()
}

fn shape_of(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect()
}

/// Names of the variables `loadmat` returned as real numeric arrays, in file order.
fn numeric_names(entry: &Value) -> Vec<String> {
    entry["variables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap().to_string())
        .filter(|n| entry["arrays"].get(n).is_some())
        .collect()
}

/// Exact comparison with numpy: shape, dtype and every value in C order.
fn assert_matches(ctx: &str, a: &NamedArray, exp: &Value) {
    assert_eq!(a.shape, shape_of(&exp["shape"]), "{ctx}: shape");
    assert_eq!(a.dtype(), exp["dtype"].as_str().unwrap(), "{ctx}: dtype");
    let want = exp["data"].as_array().unwrap();
    assert_eq!(a.data.len(), want.len(), "{ctx}: element count");
    for (i, w) in want.iter().enumerate() {
        // Integers compare as integers (int64/uint64 extremes are not exact in f64).
        let ok = match &a.data {
            ArrayData::F64(v) => v[i] == w.as_f64().unwrap(),
            ArrayData::F32(v) => f64::from(v[i]) == w.as_f64().unwrap(),
            ArrayData::I64(v) => Some(v[i]) == w.as_i64(),
            ArrayData::U64(v) => Some(v[i]) == w.as_u64(),
            ArrayData::I32(v) => Some(i64::from(v[i])) == w.as_i64(),
            ArrayData::I16(v) => Some(i64::from(v[i])) == w.as_i64(),
            ArrayData::I8(v) => Some(i64::from(v[i])) == w.as_i64(),
            ArrayData::U8(v) => Some(u64::from(v[i])) == w.as_u64(),
            ArrayData::U16(v) => Some(u64::from(v[i])) == w.as_u64(),
            ArrayData::U32(v) => Some(u64::from(v[i])) == w.as_u64(),
        };
        assert!(
            ok,
            "{ctx}: flat index {i}: got {:?}, numpy {w}",
            a.data.to_f64()[i]
        );
    }
}

#[test]
fn every_fixture_reads_exactly_as_scipy_loads_it() {
    let exp = expected();
    for file in FILES {
        let entry = expected_file(&exp, file);
        let arrays = mat_v5::read(&fixture(file), None).unwrap();
        let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(
            names,
            numeric_names(&entry),
            "{file}: read(None) returns the numeric variables"
        );
        for a in &arrays {
            assert_matches(&format!("{file}:{}", a.name), a, &entry["arrays"][&a.name]);
        }
    }
}

#[test]
fn list_reports_what_whosmat_reports() {
    let exp = expected();
    for file in FILES {
        let entry = expected_file(&exp, file);
        let got = mat_v5::list(&fixture(file)).unwrap();
        let want: Vec<VariableInfo> = entry["variables"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| VariableInfo {
                name: v["name"].as_str().unwrap().into(),
                class: v["class"].as_str().unwrap().into(),
                shape: shape_of(&v["shape"]),
                compressed: v["compressed"].as_bool().unwrap(),
                complex: v["complex"].as_bool().unwrap(),
            })
            .collect();
        assert_eq!(got, want, "{file}");
        assert_eq!(
            mat_v5::list_bytes(&bytes_of(file)).unwrap(),
            want,
            "{file} from memory"
        );
    }
}

/// The column-major trap, checked against a formula rather than against the JSON.
#[test]
fn element_i_j_k_is_matlab_element_i_j_k() {
    let arrays = mat_v5::read(&fixture("darcy_like.mat"), Some(&["coeff", "sol"])).unwrap();
    let (coeff, sol) = (&arrays[0], &arrays[1]);
    assert_eq!(coeff.shape, [3, 5, 5]);
    let ArrayData::F64(c) = &coeff.data else {
        panic!("coeff is {}", coeff.dtype())
    };
    let ArrayData::F32(s) = &sol.data else {
        panic!("sol is {}", sol.dtype())
    };
    for i in 0..3 {
        for j in 0..5 {
            for k in 0..5 {
                let v = (100 * i + 10 * j + k) as f64;
                assert_eq!(c[i * 25 + j * 5 + k], v, "coeff[{i},{j},{k}]");
                assert_eq!(
                    f64::from(s[i * 25 + j * 5 + k]),
                    v + 0.5,
                    "sol[{i},{j},{k}]"
                );
            }
        }
    }
    // And through a tensor, the way the loaders use it.
    let t = coeff.to_tensor().unwrap();
    assert_eq!(t.double_value(&[2, 3, 4]), 234.0);
    assert_eq!(t.double_value(&[1, 4, 0]), 140.0);
}

#[test]
fn big_endian_and_little_endian_files_read_the_same() {
    let le = mat_v5::read(&fixture("hand_le.mat"), None).unwrap();
    let be = mat_v5::read(&fixture("hand_be.mat"), None).unwrap();
    assert_eq!(le, be);
    assert_eq!(le.len(), 9);
}

#[test]
fn narrow_storage_comes_back_in_the_class_type() {
    // MATLAB stores a double array of small integers as miUINT8 / miINT16.
    let a = mat_v5::read(
        &fixture("hand_be.mat"),
        Some(&["dbl8", "dbl16", "sgl8", "c16"]),
    )
    .unwrap();
    assert_eq!(
        a[0].data,
        ArrayData::F64(vec![0.0, 40.0, 80.0, 120.0, 160.0, 200.0])
    );
    assert_eq!(a[1].data, ArrayData::F64(vec![-300.0, 2.0, 5.0, 30000.0]));
    assert_eq!(a[2].data, ArrayData::F32(vec![1.0, 2.0, 3.0]));
    assert_eq!(a[3].dtype(), "float64");
}

#[test]
fn reads_only_the_requested_variables_in_the_requested_order() {
    let path = fixture("darcy_like.mat");
    let a = mat_v5::read(&path, Some(&["sol", "coeff", "sol"])).unwrap();
    let names: Vec<&str> = a.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["sol", "coeff"]);
    let only = mat_v5::read(&path, Some(&["coeff"])).unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0], a[1]);
}

/// A skipped compressed variable is seeked past, not inflated: corrupting the compressed bytes of
/// a large `Kcoeff` (beyond the first 32 KiB window that listing its header inflates) matters only
/// when it is asked for.
#[test]
fn skipped_compressed_variables_are_not_inflated() {
    let dir = tempdir("lazy");
    let path = dir.join("darcy_big_k.mat");
    let coeff = NamedArray::new(
        "coeff",
        vec![2, 3],
        ArrayData::F64(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    )
    .unwrap();
    let mut rng = ono_testing::seeded(3);
    // Random values: incompressible, so the corruption lands far from the stream's start.
    let k: Vec<f64> = (0..100_000).map(|_| rng.gen()).collect();
    let kcoeff = NamedArray::new("Kcoeff", vec![100, 1000], ArrayData::F64(k)).unwrap();
    let sol = NamedArray::new("sol", vec![3], ArrayData::F32(vec![7.0, 8.0, 9.0])).unwrap();
    mat_v5::write(&path, &[coeff.clone(), kcoeff, sol], true).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    let n = bytes.len();
    // sol is a ~100-byte element at the end; Kcoeff's last half-MB precedes it.
    for b in &mut bytes[n / 2..n - 200] {
        *b ^= 0x5a;
    }
    let got = mat_v5::parse(&bytes, Some(&["coeff", "sol"])).unwrap();
    assert_eq!(got[0], coeff);
    assert_eq!(got[1].data, ArrayData::F32(vec![7.0, 8.0, 9.0]));
    let listed = mat_v5::list_bytes(&bytes).unwrap();
    assert_eq!(listed[1].shape, [100, 1000]);
    assert!(mat_v5::parse(&bytes, Some(&["Kcoeff"])).is_err());
    assert!(mat_v5::parse(&bytes, None).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

fn err_text<T: std::fmt::Debug>(r: ono_data::Result<T>) -> String {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_missing_variable_is_named_with_what_the_file_has() {
    let path = fixture("darcy_like.mat");
    let msg = err_text(mat_v5::read(&path, Some(&["coeff", "a"])));
    assert!(msg.contains("darcy_like.mat"), "{msg}");
    assert!(msg.contains("`a`"), "{msg}");
    for have in ["coeff", "sol", "Kcoeff"] {
        assert!(msg.contains(have), "{msg}");
    }
    assert!(
        err_text(mat_v5::parse(&bytes_of("darcy_like.mat"), Some(&["x"]))).contains("<memory>")
    );
}

#[test]
fn non_numeric_variables_are_listed_skipped_and_refused_by_name() {
    for file in ["scipy_plain.mat", "scipy_zlib.mat"] {
        for (name, kind) in [
            ("z", "complex"),
            ("st", "struct"),
            ("cel", "cell"),
            ("txt", "char"),
            ("sp", "sparse"),
        ] {
            let msg = err_text(mat_v5::read(&fixture(file), Some(&[name])));
            assert!(
                msg.contains(&format!("`{name}`")) && msg.contains(kind),
                "{file}: {msg}"
            );
        }
    }
}

/// One array of each element type, in shapes that exercise small data elements (≤ 4 bytes), 1-D
/// and 0-D arrays, empty arrays and rank 3.
fn all_dtype_arrays() -> Vec<NamedArray> {
    let mut rng = ono_testing::seeded(5);
    let mut v = Vec::new();
    let mut add = |name: &str, shape: Vec<usize>, data: ArrayData| {
        v.push(NamedArray::new(name, shape, data).unwrap());
    };
    let f64s: Vec<f64> = (0..60).map(|_| rng.gen_range(-1e6..1e6)).collect();
    add("f64_3d", vec![3, 4, 5], ArrayData::F64(f64s));
    add(
        "f64_nan",
        vec![1, 3],
        ArrayData::F64(vec![f64::NAN, f64::INFINITY, -0.0]),
    );
    add(
        "f32",
        vec![2, 3],
        ArrayData::F32(vec![1.5, -2.0, 3.25, f32::MAX, f32::MIN_POSITIVE, 0.0]),
    );
    add("i64", vec![3], ArrayData::I64(vec![i64::MIN, -1, i64::MAX]));
    add(
        "i32",
        vec![2, 1, 2],
        ArrayData::I32(vec![i32::MIN, 0, 7, i32::MAX]),
    );
    add("i16", vec![1], ArrayData::I16(vec![-300]));
    add("i8", vec![2, 2], ArrayData::I8(vec![-128, 0, 1, 127]));
    add("u8", vec![5], ArrayData::U8(vec![0, 1, 2, 254, 255]));
    add("u16", vec![2], ArrayData::U16(vec![0, 65535]));
    add("u32", vec![], ArrayData::U32(vec![4_000_000_000]));
    add("u64", vec![2, 1], ArrayData::U64(vec![u64::MAX, 1 << 53]));
    add("empty", vec![0, 3], ArrayData::F64(vec![]));
    add("a", vec![4, 0, 2], ArrayData::F32(vec![]));
    v
}

/// What reading gives back: MATLAB has no rank below 2.
fn as_matlab(a: &NamedArray) -> NamedArray {
    let shape = match a.shape.len() {
        0 => vec![1, 1],
        1 => vec![1, a.shape[0]],
        _ => a.shape.clone(),
    };
    NamedArray::new(a.name.clone(), shape, a.data.clone()).unwrap()
}

fn same(a: &[NamedArray], b: &[NamedArray]) -> bool {
    // PartialEq on f64 fails on NaN; compare the bits through Debug of the bit patterns instead.
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            x.name == y.name
                && x.shape == y.shape
                && match (&x.data, &y.data) {
                    (ArrayData::F64(p), ArrayData::F64(q)) => p
                        .iter()
                        .map(|v| v.to_bits())
                        .eq(q.iter().map(|v| v.to_bits())),
                    (ArrayData::F32(p), ArrayData::F32(q)) => p
                        .iter()
                        .map(|v| v.to_bits())
                        .eq(q.iter().map(|v| v.to_bits())),
                    (p, q) => p == q,
                }
        })
}

#[test]
fn write_then_read_round_trips_every_dtype() {
    let dir = tempdir("roundtrip");
    let arrays = all_dtype_arrays();
    let want: Vec<NamedArray> = arrays.iter().map(as_matlab).collect();
    for compress in [false, true] {
        let path = dir.join(format!("all_{compress}.mat"));
        mat_v5::write(&path, &arrays, compress).unwrap();
        let got = mat_v5::read(&path, None).unwrap();
        assert!(same(&got, &want), "compress={compress}: {got:?}");
        let listed = mat_v5::list(&path).unwrap();
        assert!(listed
            .iter()
            .all(|v| v.compressed == compress && !v.complex));
        let classes: Vec<&str> = listed.iter().map(|v| v.class.as_str()).collect();
        assert_eq!(
            classes,
            [
                "double", "double", "single", "int64", "int32", "int16", "int8", "uint8", "uint16",
                "uint32", "uint64", "double", "single"
            ]
        );
    }
    // Fixtures through the writer and back: every numeric variable unchanged.
    for file in FILES {
        let arrays = mat_v5::read(&fixture(file), None).unwrap();
        for compress in [false, true] {
            let path = dir.join(format!("{file}.{compress}.mat"));
            mat_v5::write(&path, &arrays, compress).unwrap();
            assert_eq!(
                mat_v5::read(&path, None).unwrap(),
                arrays,
                "{file} compress={compress}"
            );
        }
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn write_replaces_atomically_and_refuses_bad_names() {
    let dir = tempdir("atomic");
    let path = dir.join("x.mat");
    let one = |v: f64| NamedArray::new("x", vec![1], ArrayData::F64(vec![v])).unwrap();
    mat_v5::write(&path, &[one(1.0)], true).unwrap();
    mat_v5::write(&path, &[one(2.0)], true).unwrap();
    assert_eq!(
        mat_v5::read(&path, None).unwrap()[0].data,
        ArrayData::F64(vec![2.0])
    );
    let bad = NamedArray::new("", vec![1], ArrayData::F64(vec![0.0])).unwrap();
    assert!(mat_v5::write(&path, &[bad], false).is_err());
    // The failed write left the previous file as it was.
    assert_eq!(
        mat_v5::read(&path, None).unwrap()[0].data,
        ArrayData::F64(vec![2.0])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// scipy reads what the writer writes. Runs only where the throwaway venv of
/// make_mat_fixtures.py exists (/tmp/scipyenv); CI does not need it.
#[test]
fn scipy_reads_what_we_write() {
    let python = Path::new("/tmp/scipyenv/bin/python");
    if !python.exists() {
        eprintln!("skipped: no /tmp/scipyenv (see fixtures/mat/make_mat_fixtures.py)");
        return;
    }
    let dir = tempdir("scipy");
    let script = mat_dir().join("make_mat_fixtures.py");
    for file in FILES {
        let arrays = mat_v5::read(&fixture(file), None).unwrap();
        for compress in [false, true] {
            let path = dir.join(format!("{compress}_{file}"));
            mat_v5::write(&path, &arrays, compress).unwrap();
            let out = std::process::Command::new(python)
                .arg(&script)
                .arg("--check-written")
                .arg(&path)
                .arg(fixture(file))
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn every_truncation_is_an_error_or_a_clean_prefix() {
    for file in FILES {
        let bytes = bytes_of(file);
        let full_list = mat_v5::list_bytes(&bytes).unwrap();
        let full = mat_v5::parse(&bytes, None).unwrap();
        let mut clean_cuts = 0;
        for len in 0..bytes.len() {
            let cut = &bytes[..len];
            let listed = mat_v5::list_bytes(cut);
            match mat_v5::parse(cut, None) {
                Err(_) => assert!(listed.is_err() || len >= 128, "{file}[..{len}]"),
                Ok(got) => {
                    // A cut exactly between two variables is a valid, shorter file.
                    let listed = listed.unwrap();
                    assert!(
                        listed.len() < full_list.len() && full_list.starts_with(&listed),
                        "{file}[..{len}]"
                    );
                    assert!(full.starts_with(&got), "{file}[..{len}]");
                    clean_cuts += 1;
                }
            }
        }
        // Only the element boundaries: after the header and after each variable but the last.
        assert!(
            clean_cuts <= full_list.len(),
            "{file}: {clean_cuts} clean cuts"
        );
    }
}

#[test]
fn bit_flips_never_panic_and_never_change_compressed_values_silently() {
    for file in FILES {
        let bytes = bytes_of(file);
        let original = mat_v5::parse(&bytes, None).unwrap();
        let all: Vec<String> = mat_v5::list_bytes(&bytes)
            .unwrap()
            .into_iter()
            .map(|v| v.name)
            .collect();
        let numeric: Vec<&str> = original.iter().map(|a| a.name.as_str()).collect();
        let mut accepted = 0;
        for pos in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[pos] ^= 1 << bit;
                let _ = mat_v5::list_bytes(&b);
                if bit == pos % 8 {
                    // Every variable by name, non-numeric ones too (one bit per byte: time).
                    for n in &all {
                        let _ = mat_v5::parse(&b, Some(&[n.as_str()]));
                    }
                }
                let got = mat_v5::parse(&b, Some(&numeric));
                if (124..128).contains(&pos) {
                    assert!(
                        got.is_err(),
                        "{file}: flip at {pos}.{bit} of version/endian accepted"
                    );
                }
                if let Ok(got) = got {
                    accepted += 1;
                    // The 116 bytes of text and the subsystem offset are free; past them, in a
                    // fully compressed file, zlib's checksum must catch every change of content.
                    if ALL_COMPRESSED.contains(&file) && pos >= 128 {
                        assert_eq!(
                            got, original,
                            "{file}: flip at {pos}.{bit} changed values silently"
                        );
                    }
                }
            }
        }
        assert!(
            accepted >= 124 * 8,
            "{file}: flips of the descriptive text must be accepted"
        );
    }
}

#[test]
fn garbage_is_refused() {
    let mut rng = ono_testing::seeded(11);
    let header = bytes_of("scipy_plain.mat")[..128].to_vec();
    for round in 0..500 {
        let len = rng.gen_range(0..3000);
        let mut junk = vec![0u8; len];
        rng.fill_bytes(&mut junk);
        assert!(mat_v5::parse(&junk, None).is_err(), "round {round}");
        // A valid header followed by noise.
        let mut b = header.clone();
        b.extend_from_slice(&junk);
        let r = mat_v5::parse(&b, None);
        assert!(len == 0 || r.is_err(), "round {round}: {r:?}");
        let _ = mat_v5::list_bytes(&b);
    }
}

/// A little-endian file: header plus `body`.
fn le_file(body: &[u8]) -> Vec<u8> {
    let mut b = bytes_of("scipy_plain.mat")[..128].to_vec();
    b.extend_from_slice(body);
    b
}

fn tag(ty: u32, n: u32) -> Vec<u8> {
    [ty.to_le_bytes(), n.to_le_bytes()].concat()
}

/// A plain miMATRIX of class double with the given dims and `data` as miDOUBLE bytes.
fn matrix(dims: &[i32], data_tag: (u32, u32), data: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    body.extend(tag(6, 8));
    body.extend([6u8, 0, 0, 0, 0, 0, 0, 0]);
    body.extend(tag(5, 4 * dims.len() as u32));
    for d in dims {
        body.extend(d.to_le_bytes());
    }
    while body.len() % 8 != 0 {
        body.push(0);
    }
    body.extend([1u8, 0, 1, 0, b'x', 0, 0, 0]); // name "x" as a small data element
    body.extend(tag(data_tag.0, data_tag.1));
    body.extend(data);
    let mut m = tag(14, body.len() as u32);
    m.extend(body);
    m
}

#[test]
fn crafted_size_fields_are_refused_without_allocating() {
    // The hand-made matrix itself is valid.
    let ok = le_file(&matrix(&[1, 2], (9, 16), &[0u8; 16]));
    assert_eq!(mat_v5::parse(&ok, None).unwrap()[0].shape, [1, 2]);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty input", vec![]),
        ("header only, v7.3", {
            let mut b = le_file(&[]);
            b[124] = 0;
            b[125] = 2;
            b
        }),
        ("element claims 4 GiB", le_file(&tag(14, u32::MAX))),
        ("compressed element claims 4 GiB inflated", {
            let inner = tag(14, u32::MAX);
            let z = deflate(&inner);
            let mut b = tag(15, z.len() as u32);
            b.extend(z);
            le_file(&b)
        }),
        (
            "dims product overflows",
            le_file(&matrix(
                &[i32::MAX, i32::MAX, i32::MAX, 8],
                (9, 16),
                &[0u8; 16],
            )),
        ),
        (
            "dims product mismatch",
            le_file(&matrix(&[3, 2], (9, 16), &[0u8; 16])),
        ),
        (
            "negative dimension",
            le_file(&matrix(&[-1, 2], (9, 16), &[0u8; 16])),
        ),
        (
            "data claims more than the matrix",
            le_file(&matrix(&[1, 2], (9, 1 << 30), &[0u8; 16])),
        ),
        (
            "data not numeric",
            le_file(&matrix(&[1, 2], (14, 16), &[0u8; 16])),
        ),
        (
            "ragged data",
            le_file(&matrix(&[1, 2], (9, 15), &[0u8; 16])),
        ),
        ("top-level numeric element", le_file(&tag(9, 0))),
        ("stray bytes", le_file(&[1, 2, 3])),
        ("compressed garbage", {
            let mut b = tag(15, 16);
            b.extend([0x78, 0x9c, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]);
            le_file(&b)
        }),
        ("compressed stream cut short", {
            let m = matrix(&[1, 2], (9, 16), &[7u8; 16]);
            let z = deflate(&m);
            let z = &z[..z.len() - 6];
            let mut b = tag(15, z.len() as u32);
            b.extend(z);
            le_file(&b)
        }),
    ];
    for (what, bytes) in cases {
        let msg = err_text(mat_v5::parse(&bytes, None));
        assert!(msg.starts_with("<memory>"), "{what}: {msg}");
        eprintln!("{what}: {msg}");
    }
}

/// A zlib stream of `b` (integration tests see the crate's own dependencies, flate2 included).
fn deflate(b: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(b).unwrap();
    z.finish().unwrap()
}

fn tempdir(tag: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-mat-v5-{tag}"))
}
