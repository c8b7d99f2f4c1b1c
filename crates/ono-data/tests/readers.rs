//! The file readers against fixtures written by numpy, torch, h5py and scipy
//! (`fixtures/readers/make_fixtures.py`), whose expected contents are recorded in
//! `fixtures/readers/expected.json`; write → read round trips; and corrupt input (every prefix,
//! every bit flip, garbage, refused dtypes), which must give `Err` and never panic.

use std::path::{Path, PathBuf};

use ono_data::array::{ArrayData, NamedArray};
use ono_data::readers::any::{read_any, sniff, Format};
use ono_data::readers::npy::{parse_npy, read_npy, read_npz, write_npy, write_npz};
use ono_data::readers::safetensors_file::read_safetensors;
use ono_data::readers::torch_pt::read_pt;
use ono_data::Error;
use serde_json::Value;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/readers")
}

fn expected() -> serde_json::Map<String, Value> {
    let text = std::fs::read_to_string(fixtures().join("expected.json")).expect("expected.json");
    match serde_json::from_str(&text).expect("expected.json parses") {
        Value::Object(m) => m,
        _ => panic!("expected.json is not an object"),
    }
}

/// The fixtures of one kind: (file name, record).
fn of_kind(kind: &str) -> Vec<(String, Value)> {
    expected()
        .into_iter()
        .filter(|(_, v)| v["kind"] == kind)
        .collect()
}

/// A scratch directory of its own for each test, emptied first.
fn scratch(test: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-readers-{test}"))
}

fn json_f64(v: &Value) -> f64 {
    match v {
        Value::String(s) if s == "nan" => f64::NAN,
        Value::String(s) if s == "inf" => f64::INFINITY,
        Value::String(s) if s == "-inf" => f64::NEG_INFINITY,
        _ => v.as_f64().unwrap_or_else(|| panic!("not a number: {v}")),
    }
}

/// `got` is the recorded array exactly: name (unless `name` is false), dtype, shape and every
/// element (floats bit for bit up to NaN payloads, integers as integers).
fn assert_matches(file: &str, got: &NamedArray, want: &Value, name: bool) {
    let ctx = format!("{file}: `{}`", got.name);
    if name {
        assert_eq!(got.name, want["name"].as_str().unwrap(), "{ctx}: name");
    }
    assert_eq!(got.dtype(), want["dtype"].as_str().unwrap(), "{ctx}: dtype");
    let shape: Vec<usize> = want["shape"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_u64().unwrap() as usize)
        .collect();
    assert_eq!(got.shape, shape, "{ctx}: shape");
    let data = want["data"].as_array().unwrap();
    assert_eq!(got.data.len(), data.len(), "{ctx}: element count");
    let floats = |v: Vec<f64>| {
        for (i, (g, w)) in v.iter().zip(data).enumerate() {
            let w = json_f64(w);
            assert!(
                (g.is_nan() && w.is_nan()) || *g == w,
                "{ctx}[{i}]: got {g:e}, want {w:e}"
            );
        }
    };
    match &got.data {
        ArrayData::F64(v) => floats(v.clone()),
        ArrayData::F32(v) => floats(v.iter().map(|&x| f64::from(x)).collect()),
        ArrayData::U64(v) => {
            let w: Vec<u64> = data.iter().map(|x| x.as_u64().unwrap()).collect();
            assert_eq!(v, &w, "{ctx}");
        }
        other => {
            let g: Vec<i64> = match other {
                ArrayData::I64(v) => v.clone(),
                ArrayData::I32(v) => v.iter().map(|&x| x.into()).collect(),
                ArrayData::I16(v) => v.iter().map(|&x| x.into()).collect(),
                ArrayData::I8(v) => v.iter().map(|&x| x.into()).collect(),
                ArrayData::U8(v) => v.iter().map(|&x| x.into()).collect(),
                ArrayData::U16(v) => v.iter().map(|&x| x.into()).collect(),
                ArrayData::U32(v) => v.iter().map(|&x| x.into()).collect(),
                _ => unreachable!(),
            };
            let w: Vec<i64> = data.iter().map(|x| x.as_i64().unwrap()).collect();
            assert_eq!(g, w, "{ctx}");
        }
    }
}

fn assert_all_match(file: &str, got: &[NamedArray], record: &Value) {
    let want = record["arrays"].as_array().unwrap();
    let names: Vec<&str> = got.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(got.len(), want.len(), "{file}: arrays {names:?}");
    for (g, w) in got.iter().zip(want) {
        assert_matches(file, g, w, true);
    }
}

fn format_msg(e: &Error) -> String {
    match e {
        Error::Format { msg, .. } => msg.clone(),
        other => panic!("expected Error::Format, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------------
// numpy

#[test]
fn npy_fixtures_read_as_numpy_wrote_them() {
    let mut read = 0;
    for (file, record) in of_kind("npy") {
        let path = fixtures().join(&file);
        if record.get("error").is_some() {
            continue;
        }
        let a = read_npy(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_all_match(&file, std::slice::from_ref(&a), &record);
        // The in-memory parser gives the same array, unnamed.
        let b = parse_npy(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!(b.name, "");
        // Debug of floats is exact, and unlike `==` it lets NaN equal NaN.
        assert_eq!(
            format!("{:?}", (b.shape, b.data)),
            format!("{:?}", (a.shape, a.data)),
            "{file}"
        );
        read += 1;
    }
    // 12 dtypes little-endian + the 9 multi-byte ones big-endian, 2 Fortran-ordered, 2 0-d,
    // 1 empty, versions 2.0 and 3.0.
    assert_eq!(read, 28, "npy fixtures read");
}

#[test]
fn fortran_order_npy_comes_back_row_major() {
    // numpy's a[i, j, k] = (i·12 + j·4 + k)·1.5 − 3 for the (2, 3, 4) Fortran-ordered file.
    let a = read_npy(&fixtures().join("npy_fortran_f8.npy")).unwrap();
    assert_eq!(a.shape, [2, 3, 4]);
    let ArrayData::F64(v) = &a.data else {
        panic!("dtype {}", a.dtype())
    };
    for (i, j, k) in [(0, 0, 1), (1, 0, 0), (0, 2, 3), (1, 2, 3)] {
        let want = (i * 12 + j * 4 + k) as f64 * 1.5 - 3.0;
        assert_eq!(v[i * 12 + j * 4 + k], want, "a[{i},{j},{k}]");
    }
}

#[test]
fn refused_npy_dtypes_are_format_errors_naming_the_dtype() {
    let mut refused = 0;
    for (file, record) in of_kind("npy") {
        let Some(word) = record.get("error").and_then(Value::as_str) else {
            continue;
        };
        let path = fixtures().join(&file);
        let msg = format_msg(&read_npy(&path).expect_err(&file));
        assert!(msg.contains(word), "{file}: `{msg}` does not name `{word}`");
        let bytes = std::fs::read(&path).unwrap();
        match parse_npy(&bytes) {
            Err(Error::Format { path, .. }) => assert_eq!(path, Path::new("<memory>")),
            other => panic!("{file}: {other:?}"),
        }
        refused += 1;
    }
    assert_eq!(refused, 5, "object, structured, complex, string, datetime");
}

#[test]
fn npz_stored_and_deflated_read_as_numpy_wrote_them() {
    let records = of_kind("npz");
    assert_eq!(records.len(), 2);
    for (file, record) in records {
        let path = fixtures().join(&file);
        let all = read_npz(&path, None).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_all_match(&file, &all, &record);
        // A selection comes back in the order asked, each name once.
        let some = read_npz(&path, Some(&["z", "x", "z"])).unwrap();
        let names: Vec<&str> = some.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["z", "x"], "{file}");
        let msg = format_msg(&read_npz(&path, Some(&["x", "nope"])).unwrap_err());
        assert!(
            msg.contains("nope") && msg.contains("x, y"),
            "{file}: {msg}"
        );
    }
}

/// Every element type, shapes 0-d to 3-d and empty.
fn sample_arrays() -> Vec<NamedArray> {
    let datas = [
        ArrayData::F64(vec![0.5, -1e300, f64::NAN, f64::INFINITY, -0.0, 3.0]),
        ArrayData::F32(vec![0.5, -1e30, f32::MIN_POSITIVE, 7.0, -2.0, 1e-45]),
        ArrayData::I64(vec![i64::MIN, i64::MAX, 0, -1, 1, 42]),
        ArrayData::I32(vec![i32::MIN, i32::MAX, 0, -1, 1, 42]),
        ArrayData::I16(vec![i16::MIN, i16::MAX, 0, -1, 1, 42]),
        ArrayData::I8(vec![i8::MIN, i8::MAX, 0, -1, 1, 42]),
        ArrayData::U8(vec![0, 255, 1, 2, 3, 4]),
        ArrayData::U16(vec![0, u16::MAX, 1, 2, 3, 4]),
        ArrayData::U32(vec![0, u32::MAX, 1, 2, 3, 4]),
        ArrayData::U64(vec![0, u64::MAX, 1, 2, 3, 1 << 60]),
    ];
    let mut out = Vec::new();
    for (i, d) in datas.into_iter().enumerate() {
        let first = |n: usize| -> ArrayData {
            macro_rules! cut {
                ($($v:ident),*) => {
                    match &d { $(ArrayData::$v(v) => ArrayData::$v(v[..n].to_vec()),)* }
                };
            }
            cut!(F64, F32, I64, I32, I16, I8, U8, U16, U32, U64)
        };
        let dtype = d.dtype();
        out.push(NamedArray::new(format!("{dtype}_2x3"), vec![2, 3], d.clone()).unwrap());
        out.push(NamedArray::new(format!("{dtype}_3x1x2"), vec![3, 1, 2], d.clone()).unwrap());
        out.push(NamedArray::new(format!("{dtype}_scalar"), vec![], first(1)).unwrap());
        out.push(NamedArray::new(format!("{dtype}_vec"), vec![4], first(4)).unwrap());
        out.push(NamedArray::new(format!("{dtype}_empty{i}"), vec![0, 5], first(0)).unwrap());
    }
    out
}

/// Equality that lets NaN equal NaN.
fn same(a: &NamedArray, b: &NamedArray) -> bool {
    let bits = |d: &ArrayData| -> Option<Vec<u64>> {
        match d {
            ArrayData::F64(v) => Some(v.iter().map(|x| x.to_bits()).collect()),
            _ => None,
        }
    };
    a.name == b.name
        && a.shape == b.shape
        && match (bits(&a.data), bits(&b.data)) {
            (Some(x), Some(y)) => x == y,
            _ => a.data == b.data,
        }
}

#[test]
fn npy_and_npz_round_trip_every_type_and_shape() {
    let dir = scratch("roundtrip");
    let arrays = sample_arrays();
    assert_eq!(arrays.len(), 50);
    for a in &arrays {
        let path = dir.join(format!("{}.npy", a.name));
        write_npy(&path, a).unwrap();
        let back = read_npy(&path).unwrap();
        assert!(same(&back, a), "{}: {back:?}", a.name);
        let parsed = parse_npy(&std::fs::read(&path).unwrap()).unwrap();
        assert!(same(
            &NamedArray {
                name: a.name.clone(),
                ..parsed
            },
            a
        ));
    }
    let npz = dir.join("all.npz");
    write_npz(&npz, &arrays).unwrap();
    let back = read_npz(&npz, None).unwrap();
    assert_eq!(back.len(), arrays.len());
    for (b, a) in back.iter().zip(&arrays) {
        assert!(same(b, a), "{}", a.name);
    }
    // Nothing but the written files is left behind (the temporary files were renamed).
    let leftovers: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn written_npy_is_byte_identical_to_numpy() {
    // numpy's own files for the C-order little-endian types the writer emits.
    let dir = scratch("identical");
    let mut compared = 0;
    for code in ["f8", "f4", "i8", "i4", "i2", "i1", "u1", "u2", "u4", "u8"] {
        let file = format!("npy_{code}_le.npy");
        let original = std::fs::read(fixtures().join(&file)).unwrap();
        let out = dir.join(&file);
        write_npy(&out, &parse_npy(&original).unwrap()).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), original, "{file}");
        compared += 1;
    }
    for file in ["npy_scalar_f8.npy", "npy_empty_f4.npy"] {
        let original = std::fs::read(fixtures().join(file)).unwrap();
        let out = dir.join(file);
        write_npy(&out, &parse_npy(&original).unwrap()).unwrap();
        assert_eq!(std::fs::read(&out).unwrap(), original, "{file}");
        compared += 1;
    }
    assert_eq!(compared, 12);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn failed_writes_leave_the_old_file_alone() {
    let dir = scratch("atomic");
    let path = dir.join("a.npy");
    let good = NamedArray::new("a", vec![2], ArrayData::F64(vec![1.0, 2.0])).unwrap();
    write_npy(&path, &good).unwrap();
    let before = std::fs::read(&path).unwrap();
    // The fields are public: an array whose shape does not hold its data is refused.
    let bad = NamedArray {
        shape: vec![3],
        ..good.clone()
    };
    assert!(matches!(write_npy(&path, &bad), Err(Error::Invalid(_))));
    assert!(write_npz(&dir.join("b.npz"), &[good.clone(), good.clone()]).is_err());
    let unnamed = NamedArray {
        name: String::new(),
        ..good.clone()
    };
    assert!(write_npz(&dir.join("b.npz"), &[unnamed]).is_err());
    // The one atomic writer's I/O error, typed, naming the target.
    assert!(matches!(
        write_npy(&dir.join("missing-dir/a.npy"), &good),
        Err(Error::File(ono_io::Error::Io { path, .. })) if path == dir.join("missing-dir/a.npy")
    ));
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["a.npy"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `.npy` with a hand-written header and `data` after it.
fn npy_with_header(dict: &str, data: &[u8]) -> Vec<u8> {
    let mut h = dict.as_bytes().to_vec();
    h.push(b'\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(data);
    out
}

#[test]
fn malformed_headers_are_refused_without_allocating() {
    let eight = [0u8; 8];
    let cases = [
        // A shape of 10^18 elements over 8 bytes of data: must be refused, not allocated.
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1000000000, 1000000000), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (99999999999999999999999,), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (-1,), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }",
        "{'descr': '<f8', 'fortran_order': 'no', 'shape': (1,), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': [1], }",
        "{'descr': '<f8', 'fortran_order': False, }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'extra': 1}",
        "{'descr': '|f8', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': 'f8', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }",
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), } trailing",
        "{'descr': '<f8' 'fortran_order': False, 'shape': (1,), }",
        "['descr', '<f8']",
        "",
    ];
    for dict in cases {
        let bytes = npy_with_header(dict, &eight);
        let err = parse_npy(&bytes).expect_err(dict);
        assert!(matches!(err, Error::Format { .. }), "{dict}: {err:?}");
    }
    // The control: the same header with a consistent shape reads.
    let ok = npy_with_header(
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }",
        &eight,
    );
    assert_eq!(parse_npy(&ok).unwrap().shape, [1]);
    // A version-2 header length of 4 GiB in a 20-byte file.
    let mut v2 = b"\x93NUMPY\x02\x00\xff\xff\xff\xff".to_vec();
    v2.extend_from_slice(&eight);
    assert!(parse_npy(&v2).is_err());
    // Deep nesting must not overflow the stack.
    let deep = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': {}",
        "(".repeat(30_000)
    );
    assert!(parse_npy(&npy_with_header(&deep, &eight)).is_err());
}

// ---------------------------------------------------------------------------------------------
// torch.save

#[test]
fn torch_save_fixtures_read_as_torch_wrote_them() {
    let mut read = 0;
    for (file, record) in of_kind("pt") {
        let path = fixtures().join(&file);
        if let Some(word) = record.get("error").and_then(Value::as_str) {
            let msg = format_msg(&read_pt(&path).expect_err(&file));
            assert!(
                msg.contains(word),
                "{file}: `{msg}` does not mention `{word}`"
            );
            assert!(
                msg.contains(".npy") || msg.contains("complex") || msg.contains("Complex"),
                "{file}: `{msg}` suggests no conversion"
            );
            continue;
        }
        let arrays = read_pt(&path).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_all_match(&file, &arrays, &record);
        read += 1;
    }
    // A tensor, a Parameter, a 0-d tensor, a dict of 10 dtypes, a dict of strided views.
    assert_eq!(read, 5);
}

/// The layout of the neuraloperator wheel's data files: a plain dict of tensors from
/// Fortran-ordered arrays (column-major strides), bool among them, and a view at a storage
/// offset, written by torch (fixtures/torch_pickle/make_column_major_pt.py), read value by value
/// against the script's formulas.
#[test]
fn column_major_strides_offsets_and_bool_read_as_torch_indexes_them() {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/torch_pickle/column_major.pt");
    let arrays = read_pt(&path).unwrap();
    let names: Vec<&str> = arrays.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["input", "output", "visc", "window", "x", "y"]);
    let get = |n: &str| arrays.iter().find(|a| a.name == n).unwrap();
    // Row-major index of a multi-index.
    let flat =
        |shape: &[usize], idx: &[usize]| idx.iter().zip(shape).fold(0, |a, (&i, &n)| a * n + i);

    let x = get("x");
    assert_eq!((x.shape.as_slice(), x.dtype()), (&[3, 4, 5][..], "uint8"));
    let y = get("y");
    assert_eq!((y.shape.as_slice(), y.dtype()), (&[3, 4, 5][..], "float32"));
    let (ArrayData::U8(xv), ArrayData::F32(yv)) = (&x.data, &y.data) else {
        panic!("x {:?}, y {:?}", x.dtype(), y.dtype())
    };
    for i in 0..3 {
        for j in 0..4 {
            for k in 0..5 {
                let at = flat(&x.shape, &[i, j, k]);
                assert_eq!(
                    xv[at],
                    u8::from((i + 2 * j + 3 * k) % 3 == 0),
                    "x[{i},{j},{k}]"
                );
                assert_eq!(
                    yv[at],
                    (100 * i + 10 * j + k) as f32 + 0.25,
                    "y[{i},{j},{k}]"
                );
            }
        }
    }
    let input = get("input");
    assert_eq!(input.shape, [4, 3]);
    let want: Vec<f64> = (0..4)
        .flat_map(|i| (0..3).map(move |j| (10 * i + j) as f64 - 0.5))
        .collect();
    assert_eq!(input.data, ArrayData::F64(want));
    let output = get("output");
    assert_eq!(output.shape, [4, 2, 3]);
    let want: Vec<f64> = (0..4)
        .flat_map(|i| (0..2).flat_map(move |j| (0..3).map(move |k| (100 * i + 10 * j + k) as f64)))
        .collect();
    assert_eq!(output.data, ArrayData::F64(want));
    assert_eq!(get("visc").data, ArrayData::F64(vec![0.01]));
    // base[2:, 1:4]: storage offset 7, strides (1, 5).
    let window = get("window");
    assert_eq!(window.shape, [3, 3]);
    let want: Vec<f32> = (0..3)
        .flat_map(|i| (0..3).map(move |j| (10 * (i + 2) + j + 1) as f32))
        .collect();
    assert_eq!(window.data, ArrayData::F32(want));
}

// ---------------------------------------------------------------------------------------------
// safetensors

#[test]
fn safetensors_fixtures_read_as_written() {
    let file = "st_all.safetensors";
    let record = &expected()[file];
    let arrays = read_safetensors(&fixtures().join(file)).unwrap();
    assert_eq!(arrays.len(), 15);
    assert_all_match(file, &arrays, record);
    let msg =
        format_msg(&read_safetensors(&fixtures().join("st_refused_f8.safetensors")).unwrap_err());
    assert!(msg.contains("F8_E4M3"), "{msg}");
}

// ---------------------------------------------------------------------------------------------
// read_any

#[test]
fn read_any_dispatches_by_content_whatever_the_extension() {
    let dir = scratch("any");
    let cases: Vec<(&str, Format)> = vec![
        ("npy_f8_be.npy", Format::Npy),
        ("npy_fortran_f8.npy", Format::Npy),
        ("npz_stored.npz", Format::Npz),
        ("npz_deflated.npz", Format::Npz),
        ("pt_dict.pt", Format::TorchPt),
        ("pt_single.pt", Format::TorchPt),
        ("pt_refused_legacy.pt", Format::TorchPt),
        ("st_all.safetensors", Format::Safetensors),
        ("mat_v5.mat", Format::MatV5),
        ("mat_v5_compressed.mat", Format::MatV5),
        ("mat73.mat", Format::Mat73),
        ("plain.h5", Format::Hdf5),
    ];
    let all = expected();
    for (file, format) in cases {
        let disguised = dir.join(format!("{}.bin", file.replace('.', "_")));
        std::fs::copy(fixtures().join(file), &disguised).unwrap();
        assert_eq!(sniff(&disguised).unwrap(), format, "{file}");
        let record = &all[file];
        let result = read_any(&disguised, None);
        if let Some(word) = record.get("error").and_then(Value::as_str) {
            assert!(format_msg(&result.unwrap_err()).contains(word), "{file}");
            continue;
        }
        let arrays = result.unwrap_or_else(|e| panic!("{file}: {e}"));
        let want = record["arrays"].as_array().unwrap();
        assert_eq!(arrays.len(), want.len(), "{file}");
        // Single-array formats name the array after the (disguised) file stem.
        let named = !matches!(
            file,
            "npy_f8_be.npy" | "npy_fortran_f8.npy" | "pt_single.pt"
        );
        for (g, w) in arrays.iter().zip(want) {
            assert_matches(file, g, w, named);
        }
    }
    // Selections through read_any, in the order asked.
    let npz = fixtures().join("npz_deflated.npz");
    let picked = read_any(&npz, Some(&["big", "y"])).unwrap();
    assert_eq!(
        picked.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["big", "y"]
    );
    assert!(read_any(&fixtures().join("pt_dict.pt"), Some(&["missing"])).is_err());
    let one = read_any(&fixtures().join("pt_dict.pt"), Some(&["i8", "a"])).unwrap();
    assert_eq!(
        one.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
        ["i8", "a"]
    );
    let npy = read_any(&fixtures().join("npy_i4_le.npy"), Some(&["npy_i4_le"])).unwrap();
    assert_eq!(npy[0].shape, [2, 3]);
    // Unrecognised content: the extension picks the reader, whose error explains.
    let junk = dir.join("junk.npy");
    std::fs::write(&junk, b"this is not an array file at all").unwrap();
    assert!(format_msg(&read_any(&junk, None).unwrap_err()).contains(".npy"));
    let junk = dir.join("junk.xyz");
    std::fs::write(&junk, b"this is not an array file at all").unwrap();
    assert!(format_msg(&read_any(&junk, None).unwrap_err()).contains("unrecognised"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Corrupt input: Err, never a panic

/// Every file-based reader on `path`, each of which must fail.
fn all_readers_fail(path: &Path, what: &str) {
    assert!(read_any(path, None).is_err(), "read_any accepted {what}");
    assert!(read_npy(path).is_err(), "read_npy accepted {what}");
    assert!(read_npz(path, None).is_err(), "read_npz accepted {what}");
    assert!(read_pt(path).is_err(), "read_pt accepted {what}");
    assert!(
        read_safetensors(path).is_err(),
        "read_safetensors accepted {what}"
    );
}

#[test]
fn every_truncation_is_an_error() {
    let dir = scratch("truncated");
    let mut prefixes = 0;
    // In memory, every .npy fixture.
    for (file, record) in of_kind("npy") {
        if record.get("error").is_some() {
            continue;
        }
        let bytes = std::fs::read(fixtures().join(&file)).unwrap();
        for n in 0..bytes.len() {
            assert!(parse_npy(&bytes[..n]).is_err(), "{file}[..{n}] parsed");
            prefixes += 1;
        }
    }
    // On disk, the container formats.
    type Reader = fn(&Path) -> bool;
    let readers: [(&str, Reader); 4] = [
        ("npz_stored.npz", |p| read_npz(p, None).is_err()),
        ("npz_deflated.npz", |p| read_npz(p, None).is_err()),
        ("st_all.safetensors", |p| read_safetensors(p).is_err()),
        ("pt_single.pt", |p| read_pt(p).is_err()),
    ];
    for (file, fails) in readers {
        let bytes = std::fs::read(fixtures().join(file)).unwrap();
        let path = dir.join(file);
        for n in 0..bytes.len() {
            std::fs::write(&path, &bytes[..n]).unwrap();
            assert!(fails(&path), "{file}[..{n}] was read");
            prefixes += 1;
        }
    }
    // The 28 readable .npy fixtures hold 4 452 bytes, the four containers 5 085.
    assert!(prefixes >= 9_000, "{prefixes} prefixes tried");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bit_flips_never_panic() {
    let dir = scratch("flips");
    // .npy in memory: every bit of every file. A flip in the magic must be refused;
    // a flip in the data is a valid file with another value; whatever parses is consistent.
    let mut flips = 0;
    let mut refused = 0;
    for (file, record) in of_kind("npy") {
        if record.get("error").is_some() {
            continue;
        }
        let mut bytes = std::fs::read(fixtures().join(&file)).unwrap();
        for i in 0..bytes.len() * 8 {
            bytes[i / 8] ^= 1 << (i % 8);
            match parse_npy(&bytes) {
                Ok(a) => {
                    // (A flipped version byte can be another valid version: 2.0 ↔ 3.0.)
                    assert!(i >= 48, "{file}: flip of bit {i} in the magic accepted");
                    assert_eq!(a.shape.iter().product::<usize>(), a.data.len());
                }
                Err(_) => refused += 1,
            }
            bytes[i / 8] ^= 1 << (i % 8);
            flips += 1;
        }
    }
    assert!(
        refused > flips / 4,
        "{refused} of {flips} npy flips refused"
    );
    // Containers on disk, one flipped bit per byte (bit i mod 8 of byte i: every bit of the
    // file would take minutes through libtorch). Zip entries carry CRCs, so most data flips fail.
    for file in [
        "npz_stored.npz",
        "npz_deflated.npz",
        "st_all.safetensors",
        "pt_single.pt",
    ] {
        let mut bytes = std::fs::read(fixtures().join(file)).unwrap();
        let path = dir.join(file);
        let (mut ok, mut err) = (0, 0);
        for i in 0..bytes.len() {
            bytes[i] ^= 1 << (i % 8);
            std::fs::write(&path, &bytes).unwrap();
            match read_any(&path, None) {
                Ok(_) => ok += 1,
                Err(_) => err += 1,
            }
            bytes[i] ^= 1 << (i % 8);
        }
        assert!(
            err > bytes.len() / 10,
            "{file}: {err} flips refused, {ok} read"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn garbage_and_wrong_formats_are_errors() {
    let dir = scratch("garbage");
    // Deterministic noise (xorshift), alone and behind each format's magic bytes.
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut noise = |n: usize| -> Vec<u8> {
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect()
    };
    let magics: [&[u8]; 8] = [
        b"",
        b"\x93NUMPY\x01\x00",
        b"\x93NUMPY\x03\x00\xff\x00\x00\x00",
        b"PK\x03\x04",
        b"\x80\x02\x8a\x0al\xfc\x9cF\xf9 j\xa8P\x19",
        b"\x40\x00\x00\x00\x00\x00\x00\x00{",
        b"\x89HDF\r\n\x1a\n",
        b"MATLAB 5.0 MAT-file",
    ];
    for (m, magic) in magics.iter().enumerate() {
        for len in [0usize, 1, 9, 64, 127, 128, 600, 5000] {
            let mut bytes = magic.to_vec();
            bytes.extend(noise(len));
            assert!(parse_npy(&bytes).is_err(), "magic {m}, {len} bytes");
            let path = dir.join(format!("g{m}_{len}"));
            std::fs::write(&path, &bytes).unwrap();
            all_readers_fail(&path, &format!("noise after magic {m} ({len} bytes)"));
        }
    }
    // Valid files of one format given to another format's reader.
    let fx = fixtures();
    assert!(read_npz(&fx.join("npy_f8_le.npy"), None).is_err());
    assert!(read_npy(&fx.join("npz_stored.npz")).is_err());
    assert!(read_pt(&fx.join("npz_stored.npz")).is_err());
    assert!(read_pt(&fx.join("st_all.safetensors")).is_err());
    assert!(read_safetensors(&fx.join("pt_dict.pt")).is_err());
    assert!(read_safetensors(&fx.join("npy_f8_le.npy")).is_err());
    assert!(read_npz(&fx.join("pt_dict.pt"), None).is_err());
    assert!(read_npy(&fx.join("mat_v5.mat")).is_err());
    assert!(matches!(
        read_npy(&dir.join("does-not-exist.npy")),
        Err(Error::Io { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---------------------------------------------------------------------------------------------
// MATLAB v7.3 (HDF5)

mod hdf5 {
    use super::*;
    use ono_data::readers::hdf5_mat::{parse_mat73, read_hdf5, read_mat73};

    #[test]
    fn mat73_variables_have_matlab_shapes() {
        let path = fixtures().join("mat73.mat");
        let record = &expected()["mat73.mat"];
        // char and struct variables are skipped when everything is read.
        assert_all_match("mat73.mat", &read_mat73(&path, None).unwrap(), record);
        // MATLAB coeff(i+1, j+1, k+1) = (i·12 + j·4 + k)·1.5 − 3 for size (2, 3, 4).
        let coeff = read_mat73(&path, Some(&["coeff"])).unwrap().remove(0);
        assert_eq!(coeff.shape, [2, 3, 4]);
        let ArrayData::F64(v) = &coeff.data else {
            panic!("{}", coeff.dtype())
        };
        for (i, j, k) in [(0, 0, 1), (1, 0, 0), (0, 2, 3), (1, 1, 2)] {
            assert_eq!(
                v[i * 12 + j * 4 + k],
                (i * 12 + j * 4 + k) as f64 * 1.5 - 3.0
            );
        }
        // Asked for by name, they are errors that say what they are.
        for (name, word) in [("label", "char"), ("s", "struct"), ("nope", "no variable")] {
            let msg = format_msg(&read_mat73(&path, Some(&[name])).unwrap_err());
            assert!(msg.contains(word), "{name}: {msg}");
        }
        let picked = read_mat73(&path, Some(&["sol", "coeff"])).unwrap();
        assert_eq!(
            picked.iter().map(|a| a.name.as_str()).collect::<Vec<_>>(),
            ["sol", "coeff"]
        );
        // read_any dispatches v7.3 files here.
        let via_any = read_any(&path, Some(&["coeff"])).unwrap();
        assert_eq!(via_any[0], coeff);
    }

    #[test]
    fn plain_hdf5_is_c_order() {
        let path = fixtures().join("plain.h5");
        let record = &expected()["plain.h5"];
        assert_all_match("plain.h5", &read_hdf5(&path, None).unwrap(), record);
        assert_all_match("plain.h5", &read_any(&path, None).unwrap(), record);
        // Read as MATLAB would have written it, the axes are reversed.
        assert_eq!(read_mat73(&path, None).unwrap()[0].shape, [3, 2]);
    }

    #[test]
    fn chunked_shuffled_deflated_mat73_reads_every_element() {
        let path = fixtures().join("mat73_deflate.mat");
        let record = &expected()["mat73_deflate.mat"];
        let arrays = read_mat73(&path, None).unwrap();
        assert_all_match("mat73_deflate.mat", &arrays, record);
        // Independent of the record: MATLAB x(i+1, j+1, k+1) = i + 10·j + 100·k + 0.25, size
        // (5, 7, 6) in chunks (2, 3, 4) whose edge chunks are partial.
        let x = arrays.iter().find(|a| a.name == "x").unwrap();
        assert_eq!(x.shape, [5, 7, 6]);
        let ArrayData::F64(v) = &x.data else {
            panic!("{}", x.dtype())
        };
        for i in 0..5 {
            for j in 0..7 {
                for k in 0..6 {
                    let want = (i + 10 * j + 100 * k) as f64 + 0.25;
                    assert_eq!(v[(i * 7 + j) * 6 + k], want, "x({i}, {j}, {k})");
                }
            }
        }
        // The same bytes in memory read the same.
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(parse_mat73(bytes, None).unwrap(), arrays);
    }

    #[test]
    fn truncated_or_garbage_hdf5_is_an_error() {
        let dir = scratch("hdf5-truncated");
        let path = dir.join("t.mat");
        for fixture in ["mat73.mat", "mat73_deflate.mat"] {
            let bytes = std::fs::read(fixtures().join(fixture)).unwrap();
            // Every prefix near the end (the last metadata and chunks), every 11th before; some
            // through a file, to see the error type.
            for n in (0..bytes.len())
                .step_by(11)
                .chain(bytes.len() - 300..bytes.len())
            {
                let read = parse_mat73(bytes[..n].to_vec(), None);
                assert!(read.is_err(), "{fixture}: prefix {n} was read: {read:?}");
                if n % 5 == 0 {
                    std::fs::write(&path, &bytes[..n]).unwrap();
                    let err = read_mat73(&path, None).unwrap_err();
                    assert!(
                        matches!(err, Error::Format { .. }),
                        "{fixture}: prefix {n}: {err}"
                    );
                }
            }
            // Flipped bytes past the MAT header: an error or a reading, never a panic.
            for at in (512..bytes.len()).step_by(13) {
                let mut bad = bytes.clone();
                bad[at] ^= 0x5a;
                let _ = parse_mat73(bad, None);
            }
        }
        let bytes = std::fs::read(fixtures().join("mat73.mat")).unwrap();
        let mut junk = bytes[..600].to_vec();
        junk.extend(std::iter::repeat_n(0xa5u8, 4000));
        std::fs::write(&path, &junk).unwrap();
        assert!(read_any(&path, None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
