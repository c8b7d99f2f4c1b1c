//! `torch.save` archives read by `ono_io::torch_save`, against the values that
//! fixtures/make_state_dict_pt.py defines, and refusals of broken files. (The state_dict of a
//! real model, read through ono-nn's weight loaders, is checked in ono-nn's tests/torch_weights.rs.)

use std::io::{Cursor, Read, Write};
use std::path::{Path, PathBuf};

use std::collections::BTreeMap;

use ono_io::torch_save::read_state_dict as read_torch_state_dict;
use ono_io::Error;
use tch::{Device, Kind, Tensor};

type NamedTensors = BTreeMap<String, Tensor>;

fn fixture(rel: &str) -> PathBuf {
    ono_testing::fixtures_dir().join(rel)
}

fn arange(n: i64, kind: Kind) -> Tensor {
    Tensor::arange(n, (kind, Device::Cpu))
}

/// Same dtype, shape and values, and a contiguous CPU tensor.
fn assert_tensor(tensors: &NamedTensors, name: &str, expected: &Tensor) {
    let t = tensors
        .get(name)
        .unwrap_or_else(|| panic!("{name} missing from {:?}", tensors.keys()));
    assert_eq!(t.kind(), expected.kind(), "{name}: dtype");
    assert_eq!(t.size(), expected.size(), "{name}: shape");
    assert_eq!(t.device(), Device::Cpu, "{name}: device");
    assert!(t.is_contiguous(), "{name}: not contiguous");
    assert!(t.equal(expected), "{name}: {t:?} != {expected:?}");
}

#[test]
fn mixed_dtypes_views_and_shared_storages_read_exactly() {
    ono_testing::init();
    let t = read_torch_state_dict(&fixture("torch_pickle/mixed.pt")).unwrap();
    assert_eq!(
        t.keys().map(String::as_str).collect::<Vec<_>>(),
        [
            "bf16",
            "bn.num_batches_tracked",
            "f16",
            "f32",
            "f64",
            "i32",
            "mask",
            "param",
            "shared_a",
            "shared_b",
            "transposed"
        ]
    );
    assert_tensor(
        &t,
        "f32",
        &(arange(6, Kind::Float).reshape([2, 3]) * 0.5 - 1.0),
    );
    assert_tensor(&t, "f64", &(arange(5, Kind::Double) / 3.0));
    assert_tensor(&t, "f16", &(arange(4, Kind::Half) * 0.25));
    assert_tensor(&t, "bf16", &(arange(3, Kind::BFloat16) * 2.0 - 1.0));
    assert_tensor(&t, "i32", &Tensor::from_slice(&[-2i32, 0, 7]));
    assert_tensor(&t, "mask", &Tensor::from_slice(&[true, false, true, true]));
    // BatchNorm's num_batches_tracked: a 0-d int64.
    assert_tensor(&t, "bn.num_batches_tracked", &Tensor::from(7i64));
    assert_eq!(t["bn.num_batches_tracked"].dim(), 0);
    // Saved as a non-contiguous transpose; read back contiguous with the same values.
    assert_tensor(
        &t,
        "transposed",
        &arange(6, Kind::Float).reshape([2, 3]).tr().contiguous(),
    );
    // Two views of one 12-element storage, at offsets 2 and 1 (stride 4).
    let base = arange(12, Kind::Float);
    assert_tensor(&t, "shared_a", &base.slice(0, 2, 6, 1));
    assert_tensor(&t, "shared_b", &base.view([3, 4]).select(1, 1).contiguous());
    assert_tensor(&t, "shared_b", &Tensor::from_slice(&[1.0f32, 5.0, 9.0]));
    // nn.Parameter (_rebuild_parameter) reads as its data.
    assert_tensor(&t, "param", &(arange(4, Kind::Float) + 10.0));
    assert!(!t["param"].requires_grad());
}

#[test]
fn nested_dicts_flatten_with_dots_and_skip_non_tensors() {
    ono_testing::init();
    let t = read_torch_state_dict(&fixture("torch_pickle/nested.pt")).unwrap();
    assert_eq!(
        t.keys().map(String::as_str).collect::<Vec<_>>(),
        ["outer.inner", "top"]
    );
    assert_tensor(
        &t,
        "outer.inner",
        &(arange(6, Kind::Float).reshape([3, 2]) - 2.0),
    );
    assert_tensor(&t, "top", &Tensor::from_slice(&[1.5f64, -2.5]));
}

/// Every entry of a zip archive, in order.
fn zip_entries(path: &Path) -> Vec<(String, Vec<u8>)> {
    let mut archive = zip::ZipArchive::new(std::fs::File::open(path).unwrap()).unwrap();
    (0..archive.len())
        .map(|i| {
            let mut f = archive.by_index(i).unwrap();
            let mut bytes = Vec::new();
            f.read_to_end(&mut bytes).unwrap();
            (f.name().to_string(), bytes)
        })
        .collect()
}

/// A zip archive of the given entries (stored, as torch.save writes them).
fn zip_bytes(entries: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut w = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let options =
        zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in entries {
        w.start_file(name.as_str(), options).unwrap();
        w.write_all(bytes).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// mixed.pt with its entries edited by `edit` (None drops an entry).
fn edited(edit: impl Fn(&str, Vec<u8>) -> Option<Vec<u8>>) -> Vec<u8> {
    let entries: Vec<(String, Vec<u8>)> = zip_entries(&fixture("torch_pickle/mixed.pt"))
        .into_iter()
        .filter_map(|(n, b)| edit(&n, b).map(|b| (n, b)))
        .collect();
    zip_bytes(&entries)
}

/// Writes `bytes` to a temporary file, reads it, removes it, and returns the Format message.
fn refusal(tag: &str, bytes: &[u8]) -> String {
    let path =
        std::env::temp_dir().join(format!("ono_torch_pickle_{}_{tag}.pt", std::process::id()));
    std::fs::write(&path, bytes).unwrap();
    let result = read_torch_state_dict(&path);
    std::fs::remove_file(&path).unwrap();
    match result {
        Err(Error::Format { path: p, msg }) => {
            assert!(p.to_string_lossy().contains(tag), "{}", p.display());
            msg
        }
        Err(e) => panic!("{tag}: expected Error::Format, got {e:?}"),
        Ok(t) => panic!("{tag}: read {} tensors from a broken file", t.len()),
    }
}

#[test]
fn truncated_and_non_zip_files_are_format_errors() {
    ono_testing::init();
    let bytes = std::fs::read(fixture("torch_pickle/mixed.pt")).unwrap();
    for cut in [bytes.len() / 2, bytes.len() - 10, 100, 0] {
        refusal(&format!("truncated{cut}"), &bytes[..cut]);
    }
    let msg = refusal("notzip", b"this is not a zip archive at all");
    assert!(msg.contains("zip"), "{msg}");
    // A file that cannot be opened is an I/O error naming it.
    assert!(matches!(
        read_torch_state_dict(Path::new("/nonexistent/ono/missing.pt")),
        Err(Error::Io { path, .. }) if path == Path::new("/nonexistent/ono/missing.pt")
    ));
}

#[test]
fn malformed_archives_are_format_errors() {
    ono_testing::init();
    // The edited-but-valid archive still reads (the helpers do not change anything by themselves).
    let same = edited(|_, b| Some(b));
    let path =
        std::env::temp_dir().join(format!("ono_torch_pickle_{}_same.pt", std::process::id()));
    std::fs::write(&path, &same).unwrap();
    let t = read_torch_state_dict(&path);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(t.unwrap().len(), 11);

    let msg = refusal(
        "nopkl",
        &edited(|n, b| (!n.ends_with("data.pkl")).then_some(b)),
    );
    assert!(msg.contains("data.pkl"), "{msg}");

    let msg = refusal(
        "shortstorage",
        &edited(|n, mut b| {
            if n.ends_with("/data/0") {
                b.truncate(b.len() - 1);
            }
            Some(b)
        }),
    );
    assert!(msg.contains("truncated"), "{msg}");

    let msg = refusal(
        "missingstorage",
        &edited(|n, b| (!n.ends_with("/data/0")).then_some(b)),
    );
    assert!(msg.contains("data/0"), "{msg}");

    let msg = refusal(
        "bigendian",
        &edited(|n, b| {
            Some(if n.ends_with("/byteorder") {
                b"big".to_vec()
            } else {
                b
            })
        }),
    );
    assert!(msg.contains("big-endian"), "{msg}");

    let edit_pickle = |f: fn(Vec<u8>) -> Vec<u8>| {
        edited(move |n, b| Some(if n.ends_with("/data.pkl") { f(b) } else { b }))
    };
    // Cut before STOP.
    let msg = refusal("cutpickle", &edit_pickle(|b| b[..b.len() / 2].to_vec()));
    assert!(msg.contains("data.pkl"), "{msg}");
    // An opcode outside the supported set (INT, the text form of protocol 0).
    let msg = refusal(
        "opcode",
        &edit_pickle(|b| {
            let mut out = b[..2].to_vec();
            out.extend_from_slice(b"I1\n.");
            out
        }),
    );
    assert!(msg.contains("0x49"), "{msg}");
    // A global the reader does not know.
    let msg = refusal(
        "global",
        &edit_pickle(|_| b"\x80\x02cos\nsystem\nX\x02\x00\x00\x00ls\x85R.".to_vec()),
    );
    assert!(msg.contains("os.system"), "{msg}");
    // A pickle of something other than a dict.
    let msg = refusal("notdict", &edit_pickle(|_| b"\x80\x02]q\x00.".to_vec()));
    assert!(msg.contains("not a dict"), "{msg}");
    // A tensor that reaches past its storage: the first size (4,) becomes (40,).
    let msg = refusal(
        "outside",
        &edit_pickle(|b| {
            let mut b = b;
            let at = b
                .windows(4)
                .position(|w| w == b"K\x04\x85q")
                .expect("a size (4,)");
            b[at + 1] = 40;
            b
        }),
    );
    assert!(msg.contains("outside"), "{msg}");
    // A dict that contains itself is refused, not followed forever.
    let msg = refusal(
        "cycle",
        &edit_pickle(|_| b"\x80\x02}q\x00X\x01\x00\x00\x00ah\x00s.".to_vec()),
    );
    assert!(msg.contains("nested"), "{msg}");
    // Deep nesting does not overflow the stack.
    refusal(
        "deep",
        &edit_pickle(|_| {
            let mut p = b"\x80\x02N".to_vec();
            p.extend(std::iter::repeat_n(0x85u8, 1_000_000));
            p.push(b'.');
            p
        }),
    );
}

/// `write_dict` writes what `load` reads back exactly, in both storage orders, every dtype torch
/// stores but complex; a column-major storage holds the elements column by column, and sizes
/// past one byte and one int32 take their own pickle opcodes.
#[test]
fn written_dicts_read_back_in_both_storage_orders() {
    use ono_io::pickle::Value;
    use ono_io::torch_save::{load, write_dict, StorageOrder};
    ono_testing::init();
    let dir = std::env::temp_dir().join(format!("ono-io-write-pt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let m = arange(24, Kind::Float).reshape([2, 3, 4]) * 0.5 - 3.0;
    let tensors = [
        ("f32", m.shallow_clone()),
        ("f64", arange(6, Kind::Double).reshape([3, 2]) - 2.5),
        ("i64", Tensor::from_slice(&[1i64 << 40, -3, 70_000])),
        ("i32", arange(5, Kind::Int) - 2),
        ("i16", Tensor::from_slice(&[-300i16, 300])),
        ("i8", Tensor::from_slice(&[-100i8, 100])),
        ("u8", Tensor::from_slice(&[0u8, 200, 255])),
        (
            "mask",
            arange(12, Kind::Int64).reshape([3, 4]).remainder(3).eq(0),
        ),
        (
            "f16",
            Tensor::from_slice(&[1.5f32, -2.0]).to_kind(Kind::Half),
        ),
        (
            "bf16",
            Tensor::from_slice(&[1.0f32, -3.0]).to_kind(Kind::BFloat16),
        ),
        ("scalar", Tensor::from(0.25f64)),
        (
            "long",
            Tensor::zeros([300, 300], (Kind::Uint8, Device::Cpu)),
        ),
    ];
    let refs: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    for order in [StorageOrder::RowMajor, StorageOrder::ColumnMajor] {
        let path = dir.join(format!("{order:?}.pt"));
        write_dict(&path, &refs, order).unwrap();
        let Value::Dict(d) = load(&path).unwrap() else {
            panic!("not a dict")
        };
        assert!(!d.ordered);
        let got: BTreeMap<String, Tensor> = d
            .deduplicated()
            .into_iter()
            .map(|(k, v)| match (k, v) {
                (Value::Str(k), Value::Tensor(t)) => (k.clone(), t.shallow_clone()),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(got.len(), tensors.len());
        for (name, t) in &tensors {
            assert_tensor(&got, name, t);
        }
        // The first storage is the 2×3×4 float tensor's, in the chosen order.
        let (name, bytes) = zip_entries(&path)
            .into_iter()
            .find(|(n, _)| n == "archive/data/0")
            .unwrap();
        let stored: Vec<f32> = bytes
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let want = match order {
            StorageOrder::RowMajor => m.reshape([-1]),
            StorageOrder::ColumnMajor => m.permute([2, 1, 0]).contiguous().reshape([-1]),
        };
        assert_eq!(stored, Vec::<f32>::try_from(&want).unwrap(), "{name}");
    }
    let e = write_dict(
        &dir.join("complex.pt"),
        &[("c", &Tensor::zeros([2], (Kind::ComplexFloat, Device::Cpu)))],
        StorageOrder::RowMajor,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("ComplexFloat") && e.contains("`c`"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
