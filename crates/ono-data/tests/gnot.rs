//! GNOT MIO datasets: the committed pickles (fixtures/gnot/make_gnot_fixtures.py) and their .npz
//! conversions by the retired Python converter read back into exactly the pickled per-sample
//! arrays (values recomputed from the generator's formulas), the pickles natively equal to their
//! conversions; numpy's layouts (byte orders, memory orders, dtypes, protocols 2, 4, 5) and pickles
//! written here by hand read exactly; malformed pickles, truncated ones (every prefix), corrupt or
//! inconsistent .npz files and missing datasets are typed errors.

use std::path::{Path, PathBuf};

use ono_data::array::{ArrayData, NamedArray};
use ono_data::gnot::{
    load_gnot, read_gnot, read_gnot_npz, read_gnot_pickle, split_from_arrays, GNOT_DATA_URL,
};
use ono_data::point_cloud::{PointCloudSplit, PointField};
use ono_data::Error;
use tch::{Kind, Tensor};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn fixture(name: &str) -> PathBuf {
    root().join("fixtures/gnot").join(name)
}

fn vals(t: &Tensor) -> Vec<f64> {
    Vec::<f64>::try_from(t.to_kind(Kind::Double).reshape([-1])).unwrap()
}

/// A fresh scratch directory for one test.
fn scratch(test: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-gnot-{test}"))
}

/// Row-major values of a (rows, cols) grid given by `f(row, col)`.
fn grid(rows: usize, cols: usize, f: impl Fn(f64, f64) -> f64) -> Vec<f64> {
    (0..rows)
        .flat_map(|r| (0..cols).map(move |c| (r, c)))
        .map(|(r, c)| f(r as f64, c as f64))
        .collect()
}

fn assert_tensor(what: &str, t: &Tensor, shape: &[i64], kind: Kind, want: &[f64]) {
    assert_eq!(t.size(), shape, "{what}: shape");
    assert_eq!(t.kind(), kind, "{what}: kind");
    assert_eq!(vals(t), want, "{what}: values");
}

#[test]
fn mio_small_reads_back_the_pickled_samples() {
    for file in ["mio_small.pkl", "mio_small.npz"] {
        let split = read_gnot(&fixture(file)).unwrap();
        check_mio_small(&split);
    }
}

fn check_mio_small(split: &PointCloudSplit) {
    assert_eq!(split.len(), 3);
    for (i, &(n, m0, m1)) in [(5usize, 4usize, 3usize), (2, 6, 0), (7, 1, 2)]
        .iter()
        .enumerate()
    {
        let s = &split.samples[i];
        let i = i as f64;
        let w = format!("sample {i}");
        let ni = n as i64;
        assert_tensor(
            &format!("{w} X"),
            &s.pos,
            &[ni, 2],
            Kind::Double,
            &grid(n, 2, |r, k| i * 100.0 + r * 10.0 + k + 0.5),
        );
        assert_tensor(
            &format!("{w} Y"),
            &s.y,
            &[ni, 3],
            Kind::Float,
            &grid(n, 3, |r, c| -(i * 100.0 + r * 10.0 + c) * 0.25),
        );
        assert_eq!(s.fx.size(), [ni, 0]);
        assert_tensor(
            &format!("{w} theta"),
            s.theta.as_ref().unwrap(),
            &[4],
            Kind::Double,
            &grid(1, 4, |_, t| i + t / 8.0),
        );
        assert_eq!(s.funcs.len(), 2);
        assert_tensor(
            &format!("{w} f0"),
            &s.funcs[0],
            &[m0 as i64, 3],
            Kind::Double,
            &grid(m0, 3, |r, c| 1000.0 + i * 100.0 + r * 10.0 + c),
        );
        assert_tensor(
            &format!("{w} f1"),
            &s.funcs[1],
            &[m1 as i64, 2],
            Kind::Float,
            &grid(m1, 2, |r, c| 2000.0 + i * 100.0 + r * 10.0 + c + 0.125),
        );
    }
    split.validate("mio_small").unwrap();
    // A ragged batch straight from the file; θ becomes (B, 4), f1 pads to its longest M = 3.
    let b = split
        .batch(&[1, 2, 0], tch::Device::Cpu, Kind::Float)
        .unwrap();
    assert_eq!(b.lengths, [2, 7, 5]);
    assert_eq!(b.theta.as_ref().unwrap().size(), [3, 4]);
    assert_eq!(b.funcs[1].lengths, [0, 2, 3]);
    assert_eq!(b.funcs[1].values.size(), [3, 3, 2]);
    // GNOT's normalizers fit on the loaded split.
    split.fit_unit(PointField::Y).unwrap();
    split.fit_unit(PointField::Pos).unwrap();
    split.fit_unit(PointField::Theta).unwrap();
}

#[test]
fn mio_nofunc_has_no_theta_or_functions() {
    for file in ["mio_nofunc.pkl", "mio_nofunc.npz"] {
        let split = read_gnot(&fixture(file)).unwrap();
        check_mio_nofunc(&split);
    }
}

fn check_mio_nofunc(split: &PointCloudSplit) {
    assert_eq!(split.len(), 2);
    for (i, &n) in [3usize, 1].iter().enumerate() {
        let s = &split.samples[i];
        let i = i as f64;
        assert_tensor(
            "X",
            &s.pos,
            &[n as i64, 2],
            Kind::Float,
            &grid(n, 2, |r, k| i * 10.0 + r + k / 4.0),
        );
        // int64 in the pickle, float64 once read.
        assert_tensor(
            "Y",
            &s.y,
            &[n as i64, 1],
            Kind::Double,
            &grid(n, 1, |r, _| i * 10.0 + r),
        );
        assert!(s.theta.is_none());
        assert!(s.funcs.is_empty());
    }
    let b = split.batch(&[0, 1], tch::Device::Cpu, Kind::Float).unwrap();
    assert!(b.theta.is_none() && b.funcs.is_empty());
}

/// Same samples: every tensor of the same dtype, shape and values.
fn assert_same_split(what: &str, a: &PointCloudSplit, b: &PointCloudSplit) {
    assert_eq!(a.len(), b.len(), "{what}: samples");
    for (i, (s, t)) in a.samples.iter().zip(&b.samples).enumerate() {
        let mut pairs = vec![
            ("pos", &s.pos, &t.pos),
            ("fx", &s.fx, &t.fx),
            ("y", &s.y, &t.y),
        ];
        assert_eq!(s.theta.is_some(), t.theta.is_some(), "{what} {i}: theta");
        if let (Some(u), Some(v)) = (&s.theta, &t.theta) {
            pairs.push(("theta", u, v));
        }
        assert_eq!(s.funcs.len(), t.funcs.len(), "{what} {i}: functions");
        pairs.extend(s.funcs.iter().zip(&t.funcs).map(|(u, v)| ("f", u, v)));
        for (name, u, v) in pairs {
            assert_eq!(u.kind(), v.kind(), "{what} {i} {name}: kind");
            assert_eq!(u.size(), v.size(), "{what} {i} {name}: shape");
            assert!(u.equal(v), "{what} {i} {name}: values");
        }
    }
}

#[test]
fn pickles_read_natively_equal_their_converted_npz() {
    for name in ["mio_small", "mio_nofunc"] {
        let native = read_gnot_pickle(&fixture(&format!("{name}.pkl"))).unwrap();
        let converted = read_gnot_npz(&fixture(&format!("{name}.npz"))).unwrap();
        assert_same_split(name, &native, &converted);
    }
}

#[test]
fn every_layout_numpy_pickles_reads_back_the_formulas() {
    for file in [
        "mio_layouts_p2.pkl",
        "mio_layouts_p4.pkl",
        "mio_layouts_p5.pkl",
    ] {
        let split = read_gnot(&fixture(file)).unwrap();
        assert_eq!(split.len(), 3, "{file}");
        for (i, &(n, m0, m1)) in [(4usize, 2usize, 3usize), (3, 0, 1), (6, 5, 0)]
            .iter()
            .enumerate()
        {
            let s = &split.samples[i];
            let i = i as f64;
            let w = format!("{file} sample {i}");
            // big-endian / Fortran order / a strided view, all float64.
            assert_tensor(
                &format!("{w} X"),
                &s.pos,
                &[n as i64, 2],
                Kind::Double,
                &grid(n, 2, |r, k| i * 100.0 + r * 10.0 + k + 0.25),
            );
            assert_eq!(s.fx.size(), [n as i64, 0]);
            // big-endian int32, float32, uint8: float64.
            assert_tensor(
                &format!("{w} Y"),
                &s.y,
                &[n as i64, 2],
                Kind::Double,
                &grid(n, 2, |r, c| i * 10.0 + r * 2.0 + c),
            );
            // float32, big-endian float64, float64: float64.
            assert_tensor(
                &format!("{w} theta"),
                s.theta.as_ref().unwrap(),
                &[2],
                Kind::Double,
                &grid(1, 2, |_, t| i + t / 4.0),
            );
            // float32 everywhere (the last one big-endian in Fortran order): stays float32.
            assert_tensor(
                &format!("{w} f0"),
                &s.funcs[0],
                &[m0 as i64, 3],
                Kind::Float,
                &grid(m0, 3, |r, c| 1000.0 + i * 100.0 + r * 10.0 + c + 0.5),
            );
            // bool, big-endian int64, bool: float64.
            assert_tensor(
                &format!("{w} f1"),
                &s.funcs[1],
                &[m1 as i64, 1],
                Kind::Double,
                &grid(m1, 1, |r, _| (r + i) % 2.0),
            );
        }
    }
}

/// A Python value, pickled by hand below with the opcodes pickle and numpy emit.
enum Py {
    None,
    Int(i32),
    List(Vec<Py>),
    Tuple(Vec<Py>),
    /// A little-endian float64 numpy array: its shape and row-major values.
    F8(Vec<u8>, Vec<f64>),
}

/// A float64 array of `shape` holding `base`, `base + 1`, … in row-major order.
fn arr(shape: &[u8], base: f64) -> Py {
    let n: usize = shape.iter().map(|&d| usize::from(d)).product();
    Py::F8(shape.to_vec(), (0..n).map(|k| base + k as f64).collect())
}

fn sample(x: Py, y: Py, theta: Py, funcs: Py) -> Py {
    Py::List(vec![x, y, theta, funcs])
}

/// Protocol 3 opcodes: lists by EMPTY_LIST + APPENDS, tuples by MARK + TUPLE, arrays as numpy's
/// `__reduce__` writes them (`_reconstruct(ndarray, (0,), b'b')`, then BUILD with
/// `(1, shape, dtype('f8') with byte order '<', False, bytes)`).
fn pickle(v: &Py) -> Vec<u8> {
    fn emit(v: &Py, p: &mut Vec<u8>) {
        match v {
            Py::None => p.push(b'N'),
            Py::Int(i) => {
                p.push(b'J');
                p.extend(i.to_le_bytes());
            }
            Py::List(items) => {
                p.extend(b"](");
                items.iter().for_each(|i| emit(i, p));
                p.push(b'e');
            }
            Py::Tuple(items) => {
                p.push(b'(');
                items.iter().for_each(|i| emit(i, p));
                p.push(b't');
            }
            Py::F8(shape, values) => {
                p.extend(b"cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\n");
                p.extend(b"K\x00\x85C\x01b\x87R(K\x01(");
                for &d in shape {
                    p.extend([b'K', d]);
                }
                p.extend(b"tcnumpy\ndtype\nX\x02\x00\x00\x00f8\x89\x88\x87R");
                p.extend(b"(K\x03X\x01\x00\x00\x00<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb");
                let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
                p.extend(b"\x89B");
                p.extend(u32::try_from(data.len()).unwrap().to_le_bytes());
                p.extend(data);
                p.extend(b"tb");
            }
        }
    }
    let mut p = b"\x80\x03".to_vec();
    emit(v, &mut p);
    p.push(b'.');
    p
}

#[test]
fn a_hand_written_pickle_with_ragged_samples_and_two_functions() {
    let dir = scratch("handwritten");
    let path = dir.join("mio.pkl");
    // N = 3, 1, 2; f0 (M, 2) with M = 2, 0, 1; f1 (M, 1) with M = 1, 3, 0.
    let samples = [(3u8, 2u8, 1u8), (1, 0, 3), (2, 1, 0)]
        .iter()
        .enumerate()
        .map(|(i, &(n, m0, m1))| {
            let b = 100.0 * i as f64;
            sample(
                arr(&[n, 2], b),
                arr(&[n, 1], b + 10.0),
                arr(&[3], b + 20.0),
                Py::Tuple(vec![arr(&[m0, 2], b + 30.0), arr(&[m1, 1], b + 40.0)]),
            )
        })
        .collect();
    std::fs::write(&path, pickle(&Py::List(samples))).unwrap();
    let split = read_gnot_pickle(&path).unwrap();
    assert_eq!(split.len(), 3);
    for (i, &(n, m0, m1)) in [(3usize, 2usize, 1usize), (1, 0, 3), (2, 1, 0)]
        .iter()
        .enumerate()
    {
        let s = &split.samples[i];
        let b = 100.0 * i as f64;
        let count = |rows: usize, cols: usize, base: f64| -> Vec<f64> {
            (0..rows * cols).map(|k| base + k as f64).collect()
        };
        let w = format!("sample {i}");
        let dbl = Kind::Double;
        assert_tensor(&w, &s.pos, &[n as i64, 2], dbl, &count(n, 2, b));
        assert_tensor(&w, &s.y, &[n as i64, 1], dbl, &count(n, 1, b + 10.0));
        assert_tensor(
            &w,
            s.theta.as_ref().unwrap(),
            &[3],
            dbl,
            &count(1, 3, b + 20.0),
        );
        assert_tensor(
            &w,
            &s.funcs[0],
            &[m0 as i64, 2],
            dbl,
            &count(m0, 2, b + 30.0),
        );
        assert_tensor(
            &w,
            &s.funcs[1],
            &[m1 as i64, 1],
            dbl,
            &count(m1, 1, b + 40.0),
        );
    }
    let b = split
        .batch(&[0, 1, 2], tch::Device::Cpu, Kind::Float)
        .unwrap();
    assert_eq!(b.lengths, [3, 1, 2]);
    assert_eq!(b.funcs[1].lengths, [1, 3, 0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_samples_are_refused_with_the_npz_checks() {
    let dir = scratch("malformed");
    // Sample i of a good file: N = 2 + i points, θ (2,), f0 (i, 2), f1 (1, 1).
    let good = |i: u8| {
        vec![
            arr(&[2 + i, 2], 0.0),
            arr(&[2 + i, 1], 0.0),
            arr(&[2], 0.0),
            Py::Tuple(vec![arr(&[i, 2], 0.0), arr(&[1, 1], 0.0)]),
        ]
    };
    // A good file whose sample 1 has part `part` (X, Y, θ, funcs) replaced.
    let replaced = |part: usize, with: Py| {
        let mut second = good(1);
        second[part] = with;
        Py::List(vec![Py::List(good(0)), Py::List(second)])
    };
    let f = |funcs: Vec<Py>| Py::Tuple(funcs);
    let cases: Vec<(&str, &str, Py)> = vec![
        (
            "not a list",
            "holds an int, not the list of samples",
            Py::Int(3),
        ),
        ("empty", "has no samples", Py::List(vec![])),
        (
            "sample not a list",
            "sample 1 must be [X, Y, theta, funcs], got None",
            Py::List(vec![Py::List(good(0)), Py::None]),
        ),
        (
            "three items",
            "sample 0 must be [X, Y, theta, funcs] (4 items), got 3 items",
            Py::List(vec![Py::List(vec![Py::None, Py::None, Py::None])]),
        ),
        (
            "no points",
            "pos as (N, d) with N ≥ 1",
            Py::List(vec![sample(
                arr(&[0, 2], 0.0),
                arr(&[0, 1], 0.0),
                Py::None,
                Py::None,
            )]),
        ),
        (
            "X not an array",
            "sample 1: X must be a numpy array, got an int",
            replaced(0, Py::Int(1)),
        ),
        (
            "X of rank 1",
            "pos as (N, d) with N ≥ 1",
            replaced(0, arr(&[3], 0.0)),
        ),
        (
            "N of Y",
            "y as (N, C) with N = 3",
            replaced(1, arr(&[2, 1], 0.0)),
        ),
        (
            "columns of Y",
            "y as (N, C) with N = 3 and sample 0's C = 1",
            replaced(1, arr(&[3, 2], 0.0)),
        ),
        (
            "NaN",
            "y contains NaN or Inf",
            replaced(1, Py::F8(vec![3, 1], vec![0.0, f64::NAN, 1.0])),
        ),
        (
            "theta in one sample only",
            "theta is present in some samples but not in others",
            replaced(2, Py::None),
        ),
        (
            "theta length",
            "theta as (2,) like sample 0",
            replaced(2, arr(&[3], 0.0)),
        ),
        (
            "number of functions",
            "1 input functions, sample 0 has 2",
            replaced(3, f(vec![arr(&[1, 2], 0.0)])),
        ),
        (
            "a None function among arrays",
            "sample 1: input function 1 is None but others are not",
            replaced(3, f(vec![arr(&[1, 2], 0.0), Py::None])),
        ),
        (
            "functions not a tuple",
            "sample 1: the input functions must be a tuple of arrays or None, got an int",
            replaced(3, Py::Int(0)),
        ),
        (
            "width of a function",
            "input function 1 as (M, C) with sample 0's C = 1",
            replaced(3, f(vec![arr(&[1, 2], 0.0), arr(&[1, 2], 0.0)])),
        ),
    ];
    // The cases differ from a good file only where they say.
    let fine = dir.join("fine.pkl");
    std::fs::write(
        &fine,
        pickle(&Py::List(vec![Py::List(good(0)), Py::List(good(1))])),
    )
    .unwrap();
    assert_eq!(read_gnot_pickle(&fine).unwrap().len(), 2);
    for (what, needle, value) in cases {
        let path = dir.join("case.pkl");
        std::fs::write(&path, pickle(&value)).unwrap();
        match read_gnot_pickle(&path) {
            Err(Error::Format { path: p, msg }) => {
                assert_eq!(p, path, "{what}");
                assert!(msg.contains(needle), "{what}: `{needle}` not in: {msg}");
            }
            other => panic!("{what}: expected a Format error, got {other:?}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_pickles_are_refused() {
    for (file, needle) in [
        ("bad_not_list.pkl", "holds a dict, not the list of samples"),
        ("bad_nesting.pkl", "nested one level too deep"),
        ("bad_n_mismatch.pkl", "sample 1: y as (N, C) with N = 5"),
        (
            "bad_global.pkl",
            "the input functions must be a tuple of arrays or None, got a collections.OrderedDict",
        ),
    ] {
        match read_gnot_pickle(&fixture(file)) {
            Err(Error::Format { path, msg }) => {
                assert_eq!(path, fixture(file));
                assert!(msg.contains(needle), "{file}: `{needle}` not in: {msg}");
            }
            other => panic!("{file}: expected a Format error, got {other:?}"),
        }
    }
    // Unreadable pickles are refused by the pickle machine, naming the file.
    match read_gnot_pickle(&fixture("bad_truncated.pkl")) {
        Err(Error::File(ono_io::Error::Format { path, .. })) => {
            assert_eq!(path, fixture("bad_truncated.pkl"))
        }
        other => panic!("expected a Format error, got {other:?}"),
    }
    assert!(matches!(
        read_gnot_pickle(&fixture("does_not_exist.pkl")),
        Err(Error::File(ono_io::Error::Io { .. }))
    ));
}

#[test]
fn every_prefix_of_a_pickle_is_an_error() {
    let dir = scratch("prefixes");
    let path = dir.join("cut.pkl");
    for file in ["mio_small.pkl", "mio_nofunc.pkl", "mio_layouts_p5.pkl"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        for cut in 0..bytes.len() {
            std::fs::write(&path, &bytes[..cut]).unwrap();
            match read_gnot_pickle(&path) {
                Err(Error::File(ono_io::Error::Format { .. })) => {}
                other => panic!("{file} cut at {cut}: {other:?}"),
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn corrupt_npz_is_a_typed_error() {
    let dir = scratch("corrupt");
    let bytes = std::fs::read(fixture("mio_small.npz")).unwrap();
    let truncated = dir.join("truncated.npz");
    std::fs::write(&truncated, &bytes[..bytes.len() / 2]).unwrap();
    let garbage = dir.join("garbage.npz");
    std::fs::write(&garbage, b"PK\x03\x04 this is not a zip archive").unwrap();
    for p in [&truncated, &garbage] {
        match read_gnot_npz(p) {
            Err(Error::Format { path, .. }) => assert_eq!(&path, p),
            other => panic!("{}: expected a Format error, got {other:?}", p.display()),
        }
    }
    assert!(matches!(
        read_gnot_npz(&dir.join("missing.npz")),
        Err(Error::Io { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}

fn i64s(name: &str, v: &[i64]) -> NamedArray {
    NamedArray::new(name, vec![v.len()], ArrayData::I64(v.to_vec())).unwrap()
}

fn f64s(name: &str, rows: usize, cols: usize) -> NamedArray {
    let v = (0..rows * cols).map(|k| k as f64).collect();
    NamedArray::new(name, vec![rows, cols], ArrayData::F64(v)).unwrap()
}

/// x (5, 2), y (5, 1), offsets [0, 2, 5], theta (2, 3), f0 (4, 2) with offsets [0, 4, 4].
fn good() -> Vec<NamedArray> {
    vec![
        f64s("x", 5, 2),
        f64s("y", 5, 1),
        i64s("offsets", &[0, 2, 5]),
        f64s("theta", 2, 3),
        f64s("f0", 4, 2),
        i64s("f0_offsets", &[0, 4, 4]),
        NamedArray::new("meta", vec![2], ArrayData::U8(b"{}".to_vec())).unwrap(),
    ]
}

fn with(replace: &str, a: Option<NamedArray>) -> Vec<NamedArray> {
    let mut v: Vec<NamedArray> = good().into_iter().filter(|x| x.name != replace).collect();
    v.extend(a);
    v
}

#[test]
fn inconsistent_layouts_are_refused() {
    let p = Path::new("mem.npz");
    let s = split_from_arrays(p, good()).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s.samples[1].funcs[0].size(), [0, 2]);
    assert_eq!(
        vals(&s.samples[1].pos),
        (4..10).map(f64::from).collect::<Vec<_>>()
    );

    // (case, a phrase the message must contain, arrays)
    let cases: Vec<(&str, &str, Vec<NamedArray>)> = vec![
        ("no y", "no array `y`", with("y", None)),
        ("no offsets", "no array `offsets`", with("offsets", None)),
        (
            "offsets not from 0",
            "must run from 0",
            with("offsets", Some(i64s("offsets", &[1, 2, 5]))),
        ),
        (
            "offsets short of the rows",
            "to the 5 rows",
            with("offsets", Some(i64s("offsets", &[0, 2, 4]))),
        ),
        (
            "empty sample",
            "increase strictly",
            with("offsets", Some(i64s("offsets", &[0, 0, 5]))),
        ),
        (
            "decreasing",
            "increase strictly",
            with("offsets", Some(i64s("offsets", &[0, 3, 2, 5]))),
        ),
        (
            "one entry",
            "S ≥ 1",
            with("offsets", Some(i64s("offsets", &[5]))),
        ),
        (
            "float offsets",
            "must be int64",
            with("offsets", Some(f64s("offsets", 3, 1))),
        ),
        ("y rows", "`y` has 4 rows", with("y", Some(f64s("y", 4, 1)))),
        (
            "x rank",
            "`x` must be (rows, columns)",
            with("x", Some(i64s("x", &[0, 1, 2, 3, 4]))),
        ),
        (
            "theta rows",
            "S = 2 samples",
            with("theta", Some(f64s("theta", 3, 3))),
        ),
        (
            "f0 without offsets",
            "no `f0_offsets`",
            with("f0_offsets", None),
        ),
        (
            "f0 offsets of other samples",
            "the same samples",
            with("f0_offsets", Some(i64s("f0_offsets", &[0, 1, 2, 4]))),
        ),
        (
            "f0 offsets decreasing",
            "not decrease",
            with("f0_offsets", Some(i64s("f0_offsets", &[0, 5, 4]))),
        ),
        ("gap", "without gaps", with("f0", Some(f64s("f1", 4, 2)))),
        ("stray offsets", "without gaps", with("f0", None)),
    ];
    for (what, needle, arrays) in cases {
        match split_from_arrays(p, arrays) {
            Err(Error::Format { path, msg }) => {
                assert_eq!(path, p);
                assert!(msg.contains(needle), "{what}: `{needle}` not in: {msg}");
            }
            other => panic!("{what}: expected a Format error, got {other:?}"),
        }
    }
    // NaN in the data: refused by the split's validation, still as a Format error on the file.
    let mut nan = f64s("y", 5, 1);
    nan.data = ArrayData::F64(vec![0.0, 1.0, f64::NAN, 3.0, 4.0]);
    assert!(matches!(
        split_from_arrays(p, with("y", Some(nan))),
        Err(Error::Format { .. })
    ));
}

#[test]
fn load_gnot_reads_pickles_or_npz_and_names_missing_files() {
    let dir = scratch("load");
    match load_gnot(&dir, "ns2d") {
        Err(Error::Io { path, source }) => {
            assert_eq!(path, dir.join("ns2d_1100_train.pkl"));
            let msg = source.to_string();
            for needle in [
                "ns2d",
                "ns2d_1100_train.pkl",
                "HaoZhongkai/GNOT",
                GNOT_DATA_URL,
            ] {
                assert!(msg.contains(needle), "{needle} not in: {msg}");
            }
            assert!(!msg.contains("convert"), "{msg}");
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    // A pickle is read as it is: an empty one is refused by the pickle machine.
    std::fs::write(dir.join("ns2d_1100_train.pkl"), b"").unwrap();
    match load_gnot(&dir, "ns2d") {
        Err(Error::File(ono_io::Error::Format { path, .. })) => {
            assert_eq!(path, dir.join("ns2d_1100_train.pkl"))
        }
        other => panic!("expected a Format error, got {other:?}"),
    }
    assert!(matches!(
        load_gnot(&dir, "darcy2d"),
        Err(Error::Config { .. })
    ));

    std::fs::copy(fixture("mio_small.pkl"), dir.join("heat2d_1100_train.pkl")).unwrap();
    match load_gnot(&dir, "heat2d") {
        Err(Error::Io { path, .. }) => assert_eq!(path, dir.join("heat2d_1100_test.pkl")),
        other => panic!("expected the test split to be missing, got {other:?}"),
    }
    // A split converted by earlier versions pairs with a pickle.
    std::fs::copy(fixture("mio_small.npz"), dir.join("heat2d_1100_test.npz")).unwrap();
    let (train, test) = load_gnot(&dir, "heat2d").unwrap();
    assert_same_split("train/test", &train, &test);
    check_mio_small(&train);
    // The pickle is the published file: it wins over a conversion beside it.
    std::fs::copy(fixture("mio_nofunc.npz"), dir.join("heat2d_1100_train.npz")).unwrap();
    assert_eq!(load_gnot(&dir, "heat2d").unwrap().0.len(), 3);

    // Splits of different datasets do not pair.
    std::fs::copy(fixture("mio_nofunc.pkl"), dir.join("heat2d_1100_test.pkl")).unwrap();
    assert!(matches!(load_gnot(&dir, "heat2d"), Err(Error::Invalid(_))));
    let _ = std::fs::remove_dir_all(&dir);
}
