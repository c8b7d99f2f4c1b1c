//! The binary must run as a user runs it: without the LD_LIBRARY_PATH that cargo sets for tests.

use std::process::Command;

const EXE: &str = env!("CARGO_BIN_EXE_ono-downstream-example");

#[test]
fn runs_without_ld_library_path() {
    let out = Command::new(EXE)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("the example binary starts");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{EXE} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ONO output shape [2, 64, 1]"), "{stdout}");
}

/// RUNPATH (not only a working LD_LIBRARY_PATH-free start, which a system libtorch could also
/// give) and NEEDED libtorch.so, without which CUDA is not loaded on a GPU machine.
#[test]
fn links_libtorch_with_a_runpath() {
    let out = match Command::new("readelf").args(["-d", EXE]).output() {
        Ok(out) if out.status.success() => out,
        other => {
            eprintln!("readelf is not usable here ({other:?}); nothing to check");
            return;
        }
    };
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        dynamic.contains("Shared library: [libtorch.so]"),
        "no NEEDED libtorch.so:\n{dynamic}"
    );
    let runpath = dynamic
        .lines()
        .find(|l| l.contains("(RUNPATH)"))
        .unwrap_or_else(|| panic!("no RUNPATH:\n{dynamic}"));
    // `Library runpath: [dir1:dir2]`
    let dirs = runpath
        .split_once('[')
        .and_then(|(_, rest)| rest.split_once(']'))
        .map(|(dirs, _)| dirs)
        .unwrap_or_default();
    assert!(
        dirs.split(':')
            .any(|d| std::path::Path::new(d).join("libtorch.so").is_file()),
        "no RUNPATH entry holds libtorch.so: {runpath}"
    );
}
