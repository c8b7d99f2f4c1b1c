//! GNOT MIO datasets: the committed converted fixtures read back into exactly the pickled
//! per-sample arrays (values recomputed from fixtures/gnot/make_gnot_fixtures.py's formulas); the
//! converter script reproduces them and refuses malformed pickles (skipped without a Python with
//! numpy); corrupt or inconsistent .npz files and missing datasets are typed errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use ono_data::array::{ArrayData, NamedArray};
use ono_data::gnot::{load_gnot, read_gnot_npz, split_from_arrays, GNOT_DATA_URL};
use ono_data::point_cloud::PointField;
use ono_data::readers::npy::read_npz;
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
fn scratch(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ono-gnot-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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
fn converted_fixture_reads_back_the_pickled_samples() {
    let split = read_gnot_npz(&fixture("mio_small.npz")).unwrap();
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
fn converted_fixture_without_theta_or_functions() {
    let split = read_gnot_npz(&fixture("mio_nofunc.npz")).unwrap();
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
        // int64 in the pickle, float64 after conversion.
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

/// The Python that `cargo xtask env` put first (the torch venv's), if it has numpy.
fn python() -> Option<PathBuf> {
    let py = match std::env::var_os("VIRTUAL_ENV") {
        Some(v) => PathBuf::from(v).join("bin/python"),
        None => PathBuf::from("python3"),
    };
    let ok = Command::new(&py)
        .args(["-c", "import numpy"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!(
            "skipped: no Python with numpy ({}); run under `cargo xtask env`",
            py.display()
        );
    }
    ok.then_some(py)
}

fn convert(py: &Path, input: &Path, output: &Path) -> std::process::Output {
    Command::new(py)
        .arg(root().join("xtask/scripts/convert_gnot.py"))
        .arg(input)
        .arg(output)
        .output()
        .unwrap()
}

#[test]
fn converter_reproduces_the_committed_npz() {
    let Some(py) = python() else { return };
    let dir = scratch("reproduce");
    for name in ["mio_small", "mio_nofunc"] {
        let out = dir.join(format!("{name}.npz"));
        let run = convert(&py, &fixture(&format!("{name}.pkl")), &out);
        assert!(
            run.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let mut got = read_npz(&out, None).unwrap();
        let mut want = read_npz(&fixture(&format!("{name}.npz")), None).unwrap();
        got.sort_by(|a, b| a.name.cmp(&b.name));
        want.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(got, want, "{name}");
    }
    // Nothing but the two outputs: the temporary files were renamed.
    let mut left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["mio_nofunc.npz", "mio_small.npz"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn converter_refuses_malformed_pickles() {
    let Some(py) = python() else { return };
    let dir = scratch("refuse");
    // An existing output must survive a refused conversion untouched.
    let out = dir.join("out.npz");
    std::fs::write(&out, b"previous").unwrap();
    for (file, needle) in [
        ("bad_not_list.pkl", "holds a dict, not the list of samples"),
        ("bad_nesting.pkl", "nested one level too deep"),
        ("bad_n_mismatch.pkl", "sample 1: X has 5 points but Y has 4"),
        ("bad_global.pkl", "references collections.OrderedDict"),
        ("bad_truncated.pkl", "not a readable pickle"),
        ("does_not_exist.pkl", "cannot read it"),
    ] {
        let run = convert(&py, &fixture(file), &out);
        let err = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{file}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{file}: {err}"
        );
        assert_eq!(
            err.lines().count(),
            1,
            "{file}: one line, no traceback: {err}"
        );
    }
    assert_eq!(std::fs::read(&out).unwrap(), b"previous");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
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
fn load_gnot_names_missing_files_and_their_source() {
    let dir = scratch("load");
    match load_gnot(&dir, "ns2d") {
        Err(Error::Io { path, source }) => {
            assert_eq!(path, dir.join("ns2d_1100_train.npz"));
            let msg = source.to_string();
            for needle in [
                "ns2d",
                "ns2d_1100_train.pkl",
                "HaoZhongkai/GNOT",
                GNOT_DATA_URL,
            ] {
                assert!(msg.contains(needle), "{needle} not in: {msg}");
            }
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    // The pickle is there but not its conversion: say how to convert.
    std::fs::write(dir.join("ns2d_1100_train.pkl"), b"").unwrap();
    match load_gnot(&dir, "ns2d") {
        Err(Error::Io { source, .. }) => {
            assert!(source.to_string().contains("cargo xtask data convert-gnot"))
        }
        other => panic!("expected an Io error, got {other:?}"),
    }
    assert!(matches!(
        load_gnot(&dir, "darcy2d"),
        Err(Error::Config { .. })
    ));

    std::fs::copy(fixture("mio_small.npz"), dir.join("heat2d_1100_train.npz")).unwrap();
    match load_gnot(&dir, "heat2d") {
        Err(Error::Io { path, .. }) => assert_eq!(path, dir.join("heat2d_1100_test.npz")),
        other => panic!("expected the test split to be missing, got {other:?}"),
    }
    std::fs::copy(fixture("mio_small.npz"), dir.join("heat2d_1100_test.npz")).unwrap();
    let (train, test) = load_gnot(&dir, "heat2d").unwrap();
    assert_eq!((train.len(), test.len()), (3, 3));

    // Splits of different datasets do not pair.
    std::fs::copy(fixture("mio_nofunc.npz"), dir.join("heat2d_1100_test.npz")).unwrap();
    assert!(matches!(load_gnot(&dir, "heat2d"), Err(Error::Invalid(_))));
    let _ = std::fs::remove_dir_all(&dir);
}
