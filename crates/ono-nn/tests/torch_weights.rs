//! A real model's `state_dict()` (an `OrderedDict` with `_metadata`) read through ono-nn's weight
//! loaders, which hand torch.save archives to `ono_io::torch_save`. (The reader's own tests are
//! in crates/ono-io/tests/torch_pickle.rs.)

use std::io::Read;
use std::path::{Path, PathBuf};

use ono_nn::weights::{read_any, read_safetensors, read_torch_zip, NamedTensors};
use tch::{Device, Tensor};

fn fixture(rel: &str) -> PathBuf {
    ono_testing::fixtures_dir().join(rel)
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
fn model_state_dict_ordered_dict_reads_like_the_safetensors_reference() {
    ono_testing::init();
    let pt = fixture("ono/linear_small.state_dict.pt");
    // The fixture is what model.state_dict() gives: an OrderedDict with `_metadata` (which
    // libtorch's own loader, Tensor::loadz_multi, refuses).
    let pickle = zip_entries(&pt)
        .into_iter()
        .find(|(n, _)| n.ends_with("/data.pkl"))
        .unwrap()
        .1;
    assert!(contains(&pickle, b"collections\nOrderedDict"));
    assert!(contains(&pickle, b"_metadata"));

    let t = read_torch_zip(&pt).unwrap();
    assert_eq!(t.len(), 48);
    let (reference, _) = read_safetensors(&fixture("ono/linear_small.safetensors")).unwrap();
    let reference: NamedTensors = reference
        .into_iter()
        .filter_map(|(k, v)| k.strip_prefix("param.").map(|k| (k.to_string(), v)))
        .collect();
    assert_eq!(
        t.keys().collect::<Vec<_>>(),
        reference.keys().collect::<Vec<_>>()
    );
    for (name, expected) in &reference {
        assert_tensor(&t, name, expected);
    }
    // The generic readers go through the same path.
    let any = read_any(&pt).unwrap();
    assert_eq!(any.len(), 48);
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
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

#[test]
fn torch_read_errors_are_typed_file_errors() {
    ono_testing::init();
    // The reader's refusal arrives as ono-io's typed error, not as a string.
    let path = std::env::temp_dir().join(format!("ono_nn_torch_{}_bad.pt", std::process::id()));
    std::fs::write(&path, b"not a zip").unwrap();
    let err = read_torch_zip(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    match err {
        ono_nn::Error::File(ono_io::Error::Format { path: p, msg }) => {
            assert_eq!(p, path);
            assert!(msg.contains("zip"), "{msg}");
        }
        other => panic!("expected Error::File(Format), got {other:?}"),
    }
    assert!(matches!(
        read_any(Path::new("/nonexistent/ono/missing.pt")),
        Err(ono_nn::Error::File(ono_io::Error::Io { .. }))
    ));
}
