//! numpy arrays in plain pickles, read by `ono_io::pickle`: the pickles numpy itself writes with
//! protocols 2, 4 and 5 (fixtures/numpy_pickle/make_numpy_pickles.py) hold values given by a
//! formula, recomputed here for every dtype, byte order and memory order; what the reader cannot
//! represent is refused with a clear error; and no prefix or one-byte corruption of a valid
//! pickle makes it panic.

use std::path::{Path, PathBuf};

use ono_io::pickle::{load, loads, Value};
use ono_io::Error;
use tch::{Device, Kind, Tensor};

fn fixture(name: &str) -> PathBuf {
    ono_testing::fixtures_dir().join("numpy_pickle").join(name)
}

/// The fixture's formula: v_k = k + 1 at row-major position k of `shape` (bool: k % 3 == 1).
fn expected(shape: &[i64], kind: Kind) -> Tensor {
    let n: i64 = shape.iter().product();
    let k = Tensor::arange(n, (Kind::Int64, Device::Cpu)).reshape(shape);
    if kind == Kind::Bool {
        k.remainder(3).eq(1)
    } else {
        (k + 1).to_kind(kind)
    }
}

/// The arrays of one `arrays_p*.pkl`, by name.
fn arrays(file: &str) -> Vec<(String, Tensor)> {
    let Value::Dict(d) = load(&fixture(file)).unwrap() else {
        panic!("{file}: not a dict")
    };
    d.entries
        .into_iter()
        .map(|(k, v)| match (k, v) {
            (Value::Str(k), Value::Tensor(t)) => (k, t),
            (k, v) => panic!("{file}: {k:?} -> {v:?}"),
        })
        .collect()
}

#[test]
fn numpy_arrays_read_exactly_in_every_protocol_byte_order_and_memory_order() {
    ono_testing::init();
    let codes = [
        ("f8", Kind::Double),
        ("f4", Kind::Float),
        ("f2", Kind::Half),
        ("i8", Kind::Int64),
        ("i4", Kind::Int),
        ("i2", Kind::Int16),
        ("i1", Kind::Int8),
        ("u1", Kind::Uint8),
        ("b1", Kind::Bool),
    ];
    let mut want: Vec<(String, Tensor)> = Vec::new();
    for (code, kind) in codes {
        for order in ["le", "be"] {
            if order == "be" && kind.elt_size_in_bytes() == 1 {
                continue;
            }
            want.push((format!("{code}_{order}"), expected(&[2, 3], kind)));
        }
    }
    want.extend([
        ("f8_fortran".into(), expected(&[2, 3, 4], Kind::Double)),
        ("i4_be_fortran".into(), expected(&[3, 2], Kind::Int)),
        (
            "f4_flipped".into(),
            expected(&[3, 2], Kind::Float).flip([0]),
        ),
        ("f8_0d".into(), expected(&[], Kind::Double)),
        ("i8_0d".into(), expected(&[], Kind::Int64)),
        ("f8_empty".into(), expected(&[0, 3], Kind::Double)),
        ("scalar_f8".into(), expected(&[], Kind::Double)),
        ("scalar_f4".into(), expected(&[], Kind::Float)),
        ("scalar_b1".into(), expected(&[], Kind::Int64).eq(1)),
    ]);
    for file in ["arrays_p2.pkl", "arrays_p4.pkl", "arrays_p5.pkl"] {
        let got = arrays(file);
        let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        let want_names: Vec<&str> = want.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, want_names, "{file}");
        for ((name, t), (_, w)) in got.iter().zip(&want) {
            let what = format!("{file} {name}");
            assert_eq!(t.kind(), w.kind(), "{what}: dtype");
            assert_eq!(t.size(), w.size(), "{what}: shape");
            assert_eq!(t.device(), Device::Cpu, "{what}");
            assert!(t.is_contiguous(), "{what}: not contiguous");
            assert!(t.equal(w), "{what}: {t} != {w}");
        }
    }
}

#[test]
fn arrays_numpy_cannot_hand_over_as_numbers_are_refused() {
    ono_testing::init();
    for (name, needle) in [
        ("object", "dtype object"),
        ("structured", "structured"),
        ("complex", "numpy dtype c16 is not supported"),
        ("unicode", "numpy dtype U2 is not supported"),
        ("matrix", "numpy array type numpy.matrix is not supported"),
    ] {
        let path = fixture(&format!("refused_{name}.pkl"));
        match load(&path) {
            Err(Error::Format { path: p, msg }) => {
                assert_eq!(p, path);
                assert!(msg.contains(needle), "{name}: `{needle}` not in: {msg}");
            }
            other => panic!("{name}: expected a Format error, got {other:?}"),
        }
    }
    assert!(matches!(
        load(Path::new("/nonexistent/ono/missing.pkl")),
        Err(Error::Io { .. })
    ));
}

#[test]
fn no_prefix_or_corruption_of_a_numpy_pickle_panics() {
    ono_testing::init();
    let name = Path::new("fuzz.pkl");
    for file in ["arrays_p2.pkl", "arrays_p4.pkl", "arrays_p5.pkl"] {
        let bytes = std::fs::read(fixture(file)).unwrap();
        assert!(loads(&bytes, name).is_ok(), "{file}");
        // The STOP opcode is the last byte, so every proper prefix is incomplete.
        for cut in 0..bytes.len() {
            match loads(&bytes[..cut], name) {
                Err(Error::Format { .. }) => {}
                other => panic!("{file} cut at {cut}: {other:?}"),
            }
        }
        // Each byte replaced by a few others: an error or another value, never a panic.
        let mut buf = bytes.clone();
        for at in 0..bytes.len() {
            for v in [0x00, 0xff, bytes[at] ^ 0x01, bytes[at].wrapping_add(0x40)] {
                buf[at] = v;
                let _ = loads(&buf, name);
            }
            buf[at] = bytes[at];
        }
    }
}
