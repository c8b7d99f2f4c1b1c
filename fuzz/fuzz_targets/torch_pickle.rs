//! Any bytes given to the pickle machine must give `Ok` or `Err`: no panic, no unbounded
//! allocation. Twice: as a plain pickle (`ono_io::pickle::loads`, GNOT's data files), and as the
//! `data.pkl` of a `torch.save` archive with two storages, read by the torch.save reader
//! (`ono_io::torch_save::load`: persistent ids, storages, tensor rebuilds) and converted as a data
//! file (`ono_data::readers::torch_pt::read_pt`).
#![no_main]

use std::io::Write;
use std::path::{Path, PathBuf};

use libfuzzer_sys::fuzz_target;

/// This process's archive, rewritten for every input.
fn archive() -> PathBuf {
    std::env::temp_dir().join(format!("ono-fuzz-torch-{}.pt", std::process::id()))
}

fuzz_target!(|data: &[u8]| {
    let _ = ono_io::pickle::loads(data, Path::new("fuzz.pkl"));
    let path = archive();
    let file = std::fs::File::create(&path).expect("the fuzz archive can be written");
    let mut zip = zip::ZipWriter::new(file);
    let stored = zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Stored);
    for (name, bytes) in [
        ("archive/data.pkl", data),
        ("archive/byteorder", &b"little"[..]),
        ("archive/data/0", &[7u8; 64][..]),
        ("archive/data/1", &[1u8; 12][..]),
    ] {
        zip.start_file(name, stored).expect("zip entry");
        zip.write_all(bytes).expect("zip write");
    }
    zip.finish().expect("zip finish");
    let _ = ono_io::torch_save::load(&path);
    let _ = ono_data::readers::torch_pt::read_pt(&path);
});
