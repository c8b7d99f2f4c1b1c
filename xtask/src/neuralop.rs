//! The data files of the `neuraloperator` 0.3.0 wheel on PyPI (MIT licence, "Copyright (c) 2023
//! NeuralOperator developers"): `darcy_train_16.pt`, `darcy_test_16.pt`, `darcy_test_32.pt` and
//! `burgers_lowres.pt` under `neuralop/datasets/data/`, which ono-data reads as the benchmarks
//! `neuralop_darcy` and `neuralop_burgers`.
//!
//! Fetched once, like torch: `pip download neuraloperator==0.3.0 --no-deps` (pip checks PyPI's
//! hash) into the cache (`$ONO_CACHE_DIR`, else `$XDG_CACHE_HOME/ono`, else `~/.cache/ono`), the
//! wheel's sha256 checked against the one pinned here, the four files and the LICENSE unpacked
//! into `<cache>/neuraloperator-0.3.0/`, and `SOURCE.json` (wheel, URL, sha256, licence, each
//! file's size and sha256) written last. A folder whose `SOURCE.json` names the pinned wheel and
//! whose files have their recorded sizes is complete and is reused without the network.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

use crate::bench_compare::write_atomic;
use crate::torch::{cache_dir, say, succeeds, TORCH_VERSION};

/// The release whose files are read.
pub const VERSION: &str = "0.3.0";
/// Its wheel on PyPI.
pub const WHEEL: &str = "neuraloperator-0.3.0-py3-none-any.whl";
/// The sha256 of that wheel (PyPI's; a file of a release on PyPI cannot change).
pub const WHEEL_SHA256: &str = "483b358f2d9823c2ccb5dd0c1af8d21f879fd103806ad42959ebb975260e6ec4";
/// Its page on PyPI.
pub const URL: &str = "https://pypi.org/project/neuraloperator/0.3.0/";
/// Its licence (the wheel's `LICENSE`, unpacked beside the files).
pub const LICENSE: &str = "MIT License, Copyright (c) 2023 NeuralOperator developers";

/// (path in the wheel, name in the folder) of every file taken from the wheel.
const FILES: [(&str, &str); 5] = [
    (
        "neuralop/datasets/data/darcy_train_16.pt",
        "darcy_train_16.pt",
    ),
    (
        "neuralop/datasets/data/darcy_test_16.pt",
        "darcy_test_16.pt",
    ),
    (
        "neuralop/datasets/data/darcy_test_32.pt",
        "darcy_test_32.pt",
    ),
    (
        "neuralop/datasets/data/burgers_lowres.pt",
        "burgers_lowres.pt",
    ),
    ("neuraloperator-0.3.0.dist-info/LICENSE", "LICENSE"),
];

/// Written last into the folder: what was unpacked from which wheel.
const SOURCE: &str = "SOURCE.json";

/// The folder of the files: `<cache>/neuraloperator-0.3.0`.
pub fn data_dir() -> Result<PathBuf> {
    Ok(cache_dir()?.join(format!("neuraloperator-{VERSION}")))
}

/// The folder of the files (the `--data-dir` of `neuralop_darcy` and `neuralop_burgers`),
/// fetched first unless it is complete. Progress goes to stderr.
pub fn ensure_data() -> Result<PathBuf> {
    let dir = data_dir()?;
    match incomplete(&dir) {
        None => say(format!(
            "reusing the neuraloperator {VERSION} files in {}",
            dir.display()
        )),
        Some(why) => {
            say(format!(
                "{}: {why}; fetching {WHEEL} from PyPI",
                dir.display()
            ));
            fetch_into(&dir)?;
            say(format!(
                "unpacked the neuraloperator {VERSION} files into {}",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// Why `dir` is not a complete copy of the files, or `None` when it is.
fn incomplete(dir: &Path) -> Option<String> {
    let text = match std::fs::read_to_string(dir.join(SOURCE)) {
        Ok(t) => t,
        Err(_) => return Some(format!("no {SOURCE}")),
    };
    let Ok(source) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Some(format!("{SOURCE} does not parse"));
    };
    if source["sha256"] != WHEEL_SHA256 {
        return Some(format!("{SOURCE} names another wheel"));
    }
    for (_, name) in FILES {
        let want = source["files"][name]["bytes"].as_u64();
        let have = std::fs::metadata(dir.join(name)).ok().map(|m| m.len());
        if want.is_none() || want != have {
            return Some(format!("{name} is missing or of another size"));
        }
    }
    None
}

/// Downloads the wheel with pip into `dir/.download`, unpacks it into `dir`, removes the download.
fn fetch_into(dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // The files may be rewritten: the folder is complete again only once SOURCE.json is back.
    let _ = std::fs::remove_file(dir.join(SOURCE));
    let download = dir.join(".download");
    let _ = std::fs::remove_dir_all(&download);
    std::fs::create_dir_all(&download)
        .with_context(|| format!("creating {}", download.display()))?;
    let python = pip_python()?;
    let status = Command::new(&python)
        .args(["-m", "pip", "download", "--disable-pip-version-check"])
        .args(["--no-deps", "--only-binary=:all:", "--dest"])
        .arg(&download)
        .arg(format!("neuraloperator=={VERSION}"))
        .status()
        .with_context(|| format!("could not run {} -m pip", python.display()))?;
    if !status.success() {
        bail!(
            "pip download neuraloperator=={VERSION} failed ({status}); is PyPI reachable? \
             (or put the files of {URL} under {})",
            dir.display()
        );
    }
    let wheel = download.join(WHEEL);
    let bytes =
        std::fs::read(&wheel).with_context(|| format!("pip left no {}", wheel.display()))?;
    unpack(&bytes, WHEEL_SHA256, dir)?;
    let _ = std::fs::remove_dir_all(&download);
    Ok(())
}

/// Checks that `wheel` has the sha256 `expected`, writes its [`FILES`] into `dir`, then
/// [`SOURCE`].
fn unpack(wheel: &[u8], expected: &str, dir: &Path) -> Result<()> {
    let sha = hex_sha256(wheel);
    if sha != expected {
        bail!("{WHEEL} has sha256 {sha}, not the pinned {expected}; not unpacking it");
    }
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(wheel))
        .with_context(|| format!("{WHEEL} is not a zip archive"))?;
    let mut files = serde_json::Map::new();
    for (inner, name) in FILES {
        let mut entry = zip
            .by_name(inner)
            .with_context(|| format!("{WHEEL} has no {inner}"))?;
        let mut data = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut data)
            .with_context(|| format!("reading {inner} from {WHEEL}"))?;
        write_atomic(&dir.join(name), &data)?;
        files.insert(
            name.into(),
            serde_json::json!({ "bytes": data.len(), "sha256": hex_sha256(&data) }),
        );
    }
    let source = serde_json::json!({
        "wheel": WHEEL,
        "version": VERSION,
        "url": URL,
        "sha256": expected,
        "license": LICENSE,
        "files": files,
    });
    write_atomic(
        &dir.join(SOURCE),
        serde_json::to_string_pretty(&source)? + "\n",
    )
}

/// A Python with pip: the torch venv's when it exists, else `python3`.
fn pip_python() -> Result<PathBuf> {
    let venv = cache_dir()?
        .join(format!("venv-torch-{TORCH_VERSION}"))
        .join("bin")
        .join("python");
    let python = if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    };
    if !succeeds(Command::new(&python).args(["-m", "pip", "--version"])) {
        bail!(
            "fetching the neuraloperator files needs pip: {} -m pip does not run \
             (on Debian/Ubuntu: apt-get install python3-pip)",
            python.display()
        );
    }
    Ok(python)
}

fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A wheel-like zip holding every file of [`FILES`] (content: its own name) and another one.
    fn fake_wheel() -> Vec<u8> {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        let opts =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (inner, _) in FILES.iter().chain(&[("neuralop/__init__.py", "")]) {
            w.start_file(*inner, opts).unwrap();
            w.write_all(inner.as_bytes()).unwrap();
        }
        w.finish().unwrap().into_inner()
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("xtask-neuralop-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// Unpacked, the folder holds each file under its name and a SOURCE.json that makes it
    /// complete; a missing or resized file or another wheel's SOURCE.json makes it incomplete.
    #[test]
    fn unpacked_folders_are_complete_until_a_file_changes() {
        let dir = scratch("unpack");
        assert_eq!(incomplete(&dir), Some("no SOURCE.json".into()));
        let wheel = fake_wheel();
        // SOURCE.json records the pinned sha256; unpack it under that name with the fake's.
        unpack(&wheel, &hex_sha256(&wheel), &dir).unwrap();
        let text = std::fs::read_to_string(dir.join(SOURCE)).unwrap();
        let mut source: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(source["license"], LICENSE);
        let lic = "neuraloperator-0.3.0.dist-info/LICENSE";
        assert_eq!(source["files"]["LICENSE"]["bytes"], lic.len());
        assert_eq!(
            source["files"]["LICENSE"]["sha256"],
            hex_sha256(lic.as_bytes())
        );
        assert_eq!(std::fs::read_to_string(dir.join("LICENSE")).unwrap(), lic);
        assert!(incomplete(&dir).unwrap().contains("another wheel"));
        source["sha256"] = WHEEL_SHA256.into();
        std::fs::write(dir.join(SOURCE), source.to_string()).unwrap();
        assert_eq!(incomplete(&dir), None);
        std::fs::write(dir.join("darcy_test_32.pt"), b"short").unwrap();
        assert!(incomplete(&dir).unwrap().contains("darcy_test_32.pt"));
        std::fs::remove_file(dir.join("darcy_test_32.pt")).unwrap();
        assert!(incomplete(&dir).unwrap().contains("darcy_test_32.pt"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A wheel of another hash, or without one of the files, is refused and leaves no SOURCE.json.
    #[test]
    fn wrong_wheels_are_refused() {
        let dir = scratch("refuse");
        let wheel = fake_wheel();
        let e = unpack(&wheel, WHEEL_SHA256, &dir).unwrap_err().to_string();
        assert!(
            e.contains("sha256") && e.contains(&hex_sha256(&wheel)),
            "{e}"
        );
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        w.start_file(
            "neuralop/datasets/data/darcy_train_16.pt",
            Default::default(),
        )
        .unwrap();
        let partial = w.finish().unwrap().into_inner();
        let e = unpack(&partial, &hex_sha256(&partial), &dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("darcy_test_16.pt"), "{e}");
        assert!(!dir.join(SOURCE).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The pinned hash is a sha256 in lower-case hex, as `hex_sha256` writes them.
    #[test]
    fn sha256_is_hex() {
        assert_eq!(
            hex_sha256(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(WHEEL_SHA256.len(), 64);
        assert!(WHEEL_SHA256
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }
}
