//! Link arguments for a crate whose executables use libtorch through ono (or tch).
//!
//! A downstream `build.rs` is one line, with `ono-link` as a build-dependency:
//!
//! ```no_run
//! fn main() {
//!     ono_link::emit()
//! }
//! ```
//!
//! Why this is needed at all: cargo does not pass a dependency's link arguments on, torch-sys gives
//! its rpath only to the compile of its own C++ shim, and the linker's default `--as-needed` drops
//! `libtorch.so` from executables because no symbol is taken from it directly, yet `libtorch.so` is
//! what loads `libtorch_cuda.so` (tch-rs #907, #980). Without these arguments a binary runs only
//! with `LD_LIBRARY_PATH` set and reports CUDA as unavailable on a GPU machine. [`emit`] adds
//! `-Wl,-rpath,<torch lib dir>` (a RUNPATH, which `LD_LIBRARY_PATH` still overrides when the binary
//! is moved to another machine), `-Wl,--no-as-needed` and `-ltorch`.
//!
//! The directory is the one torch-sys linked against, found as torch-sys's build script finds it
//! (see [`lookup`]). The crate has no dependencies, so it adds nothing to a build but itself.

// The crate documentation's example is a whole `build.rs`, `main` included.
#![allow(clippy::needless_doctest_main)]

use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The variable torch-sys (`links = "tch"`) exports its lib dir through. Cargo sets it only in the
/// build scripts of torch-sys's direct dependents.
pub const DEP_VAR: &str = "DEP_TCH_LIBTORCH_LIB";

/// Where the libtorch lib directory came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `DEP_TCH_LIBTORCH_LIB`: torch-sys's own answer.
    TorchSys,
    /// `LIBTORCH_USE_PYTORCH`: the torch of this Python interpreter.
    PyTorch(PathBuf),
    /// `$LIBTORCH_LIB/lib`.
    LibtorchLib,
    /// `$LIBTORCH/lib`.
    Libtorch,
    /// `/usr/lib`, which torch-sys uses when `/usr/lib/libtorch.so` exists.
    System,
}

/// The libtorch lib directory and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub dir: PathBuf,
    pub source: Source,
}

/// Why no directory was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotFound {
    /// `LIBTORCH_USE_PYTORCH` is set but the interpreter did not report torch's library paths.
    /// torch-sys would take nothing else in this case, so neither does the lookup.
    Python { python: PathBuf, why: String },
    /// None of the variables is set and there is no system libtorch.
    Unset,
}

impl fmt::Display for NotFound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NotFound::Python { python, why } => write!(
                f,
                "ono-link: LIBTORCH_USE_PYTORCH is set but `{} -c 'import torch ...'` gave no library \
                 path ({why}); this crate's binaries get no RUNPATH and need LD_LIBRARY_PATH=<torch>/lib \
                 to run. Make that interpreter import torch, or set LIBTORCH instead.",
                python.display()
            ),
            NotFound::Unset => write!(
                f,
                "ono-link: no libtorch directory found ({DEP_VAR}, LIBTORCH_USE_PYTORCH, LIBTORCH_LIB and \
                 LIBTORCH are unset and /usr/lib/libtorch.so does not exist); this crate's binaries get no \
                 RUNPATH and need LD_LIBRARY_PATH=<torch>/lib to run. Set LIBTORCH=<libtorch> or \
                 LIBTORCH_USE_PYTORCH=1 (as for torch-sys), or make torch-sys a direct dependency."
            ),
        }
    }
}

/// What the lookup asks of the machine, so that it can be tested without one.
pub trait Host {
    /// An environment variable (`None` when unset).
    fn var(&mut self, name: &str) -> Option<OsString>;
    /// Whether `path` is an existing file.
    fn is_file(&self, path: &Path) -> bool;
    /// Runs `python` with [`PYTHON_LIB_PATHS`] and returns its standard output.
    fn run_python(&mut self, python: &Path) -> Result<String, String>;
}

/// The part of torch-sys's Python query that yields the lib directory (`LIBTORCH_LIB: ` lines).
pub const PYTHON_LIB_PATHS: &str = "
import torch
from torch.utils import cpp_extension
for library_path in cpp_extension.library_paths():
  print('LIBTORCH_LIB:', library_path)
";

/// Finds the libtorch lib directory that torch-sys 0.24 links against, in torch-sys's order:
///
/// 1. `DEP_TCH_LIBTORCH_LIB`, torch-sys's own answer (only seen by its direct dependents);
/// 2. `LIBTORCH_USE_PYTORCH` set: the last `cpp_extension.library_paths()` entry of `python` when
///    `VIRTUAL_ENV` is set (torch-sys runs it from `PATH`), else of `python3`; if that fails, the
///    lookup fails too, because torch-sys would not fall back either;
/// 3. `LIBTORCH_LIB` + `/lib` (torch-sys appends `lib` to it as well);
/// 4. `LIBTORCH` + `/lib`;
/// 5. `/usr/lib` when `/usr/lib/libtorch.so` exists.
///
/// Only the variables it needs are read, in this order, so a host that records its reads knows
/// exactly which ones the result depends on.
pub fn lookup(host: &mut impl Host) -> Result<Found, NotFound> {
    let found = |dir: PathBuf, source| Ok(Found { dir, source });
    if let Some(dir) = host.var(DEP_VAR).filter(|d| !d.is_empty()) {
        return found(dir.into(), Source::TorchSys);
    }
    if host.var("LIBTORCH_USE_PYTORCH").is_some() {
        let python = PathBuf::from(match host.var("VIRTUAL_ENV") {
            Some(_) => "python",
            None => "python3",
        });
        return match host.run_python(&python).map(|out| last_lib_path(&out)) {
            Ok(Some(dir)) => found(dir, Source::PyTorch(python)),
            Ok(None) => Err(NotFound::Python {
                python,
                why: "no LIBTORCH_LIB line in its output".to_owned(),
            }),
            Err(why) => Err(NotFound::Python { python, why }),
        };
    }
    if let Some(lib) = host.var("LIBTORCH_LIB") {
        return found(PathBuf::from(lib).join("lib"), Source::LibtorchLib);
    }
    if let Some(root) = host.var("LIBTORCH") {
        return found(PathBuf::from(root).join("lib"), Source::Libtorch);
    }
    if host.is_file(Path::new("/usr/lib/libtorch.so")) {
        return found(PathBuf::from("/usr/lib"), Source::System);
    }
    Err(NotFound::Unset)
}

/// The last `LIBTORCH_LIB: ` path of [`PYTHON_LIB_PATHS`]'s output (torch-sys keeps the last one).
fn last_lib_path(output: &str) -> Option<PathBuf> {
    output
        .lines()
        .filter_map(|l| l.strip_prefix("LIBTORCH_LIB: "))
        .next_back()
        .map(PathBuf::from)
}

/// The process environment, recording which variables were read.
#[derive(Debug, Default)]
struct ProcessHost {
    read: Vec<String>,
}

impl Host for ProcessHost {
    fn var(&mut self, name: &str) -> Option<OsString> {
        self.read.push(name.to_owned());
        std::env::var_os(name)
    }

    fn is_file(&self, path: &Path) -> bool {
        path.is_file()
    }

    fn run_python(&mut self, python: &Path) -> Result<String, String> {
        let out = Command::new(python)
            .arg("-c")
            .arg(PYTHON_LIB_PATHS)
            .output()
            .map_err(|e| format!("could not run it: {e}"))?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().last().unwrap_or("").trim();
            return Err(format!("{}: {last}", out.status));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The libtorch lib directory for the current process environment (see [`lookup`]).
pub fn libtorch_lib_dir() -> Result<Found, NotFound> {
    lookup(&mut ProcessHost::default())
}

/// The `cargo:` lines that [`emit`] prints for a lookup result and the target OS.
///
/// A failed lookup still links `--no-as-needed -ltorch` (the library search path comes from
/// torch-sys), so the build behaves as before, with a warning instead of a RUNPATH.
pub fn cargo_lines(found: &Result<Found, NotFound>, target_os: &str) -> Vec<String> {
    let mut lines = Vec::new();
    match found {
        Ok(f) if target_os != "windows" => lines.push(format!(
            "cargo:rustc-link-arg=-Wl,-rpath,{}",
            f.dir.display()
        )),
        Ok(_) => {}
        Err(e) => lines.push(format!("cargo:warning={e}")),
    }
    // GNU ld and lld drop unused libraries under --as-needed; Apple's ld64 and MSVC have no such
    // flag (and ld64 keeps what it is given).
    if target_os != "macos" && target_os != "windows" {
        lines.push("cargo:rustc-link-arg=-Wl,--no-as-needed".to_owned());
    }
    if target_os != "windows" {
        lines.push("cargo:rustc-link-arg=-ltorch".to_owned());
    }
    lines
}

/// Prints the link arguments for this package's executables (tests, examples, benches, bins).
/// Call it from `build.rs`; it never panics.
pub fn emit() {
    let mut host = ProcessHost::default();
    let found = lookup(&mut host);
    for name in &host.read {
        println!("cargo:rerun-if-env-changed={name}");
    }
    // Cargo sets it for every build script; the host's OS would be wrong when cross-compiling.
    let target_os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_else(|_| "linux".to_owned());
    for line in cargo_lines(&found, &target_os) {
        println!("{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A machine given by its variables, files and Python answer; it records what was asked.
    #[derive(Default)]
    struct Fake {
        vars: HashMap<&'static str, &'static str>,
        files: Vec<&'static str>,
        python: Option<Result<String, String>>,
        read: Vec<String>,
        ran: Vec<PathBuf>,
    }

    impl Fake {
        fn with(vars: &[(&'static str, &'static str)]) -> Self {
            Fake {
                vars: vars.iter().copied().collect(),
                ..Fake::default()
            }
        }
    }

    impl Host for Fake {
        fn var(&mut self, name: &str) -> Option<OsString> {
            self.read.push(name.to_owned());
            self.vars.get(name).map(OsString::from)
        }
        fn is_file(&self, path: &Path) -> bool {
            self.files.iter().any(|f| Path::new(f) == path)
        }
        fn run_python(&mut self, python: &Path) -> Result<String, String> {
            self.ran.push(python.to_owned());
            self.python
                .clone()
                .unwrap_or_else(|| Err("no python".to_owned()))
        }
    }

    const TORCH_OUT: &str = "LIBTORCH_LIB: /venv/lib/python3/site-packages/torch/lib\n";

    fn everything() -> Fake {
        let mut host = Fake::with(&[
            (DEP_VAR, "/dep/lib"),
            ("LIBTORCH_USE_PYTORCH", "1"),
            ("VIRTUAL_ENV", "/venv"),
            ("LIBTORCH_LIB", "/ltl"),
            ("LIBTORCH", "/lt"),
        ]);
        host.files = vec!["/usr/lib/libtorch.so"];
        host.python = Some(Ok(TORCH_OUT.to_owned()));
        host
    }

    #[test]
    fn torch_sys_answer_wins_and_nothing_else_is_read() {
        let mut host = everything();
        let found = lookup(&mut host).unwrap();
        assert_eq!(found.dir, Path::new("/dep/lib"));
        assert_eq!(found.source, Source::TorchSys);
        assert_eq!(host.read, [DEP_VAR]);
        assert!(host.ran.is_empty());
    }

    #[test]
    fn empty_dep_variable_is_ignored() {
        let mut host = everything();
        host.vars.insert(DEP_VAR, "");
        assert_eq!(
            lookup(&mut host).unwrap().source,
            Source::PyTorch("python".into())
        );
    }

    #[test]
    fn pytorch_comes_before_libtorch_as_in_torch_sys() {
        let mut host = everything();
        host.vars.remove(DEP_VAR);
        let found = lookup(&mut host).unwrap();
        assert_eq!(
            found.dir,
            Path::new("/venv/lib/python3/site-packages/torch/lib")
        );
        // A venv's interpreter is `python` from PATH, as torch-sys runs it.
        assert_eq!(found.source, Source::PyTorch("python".into()));
        assert_eq!(host.ran, [PathBuf::from("python")]);
        assert_eq!(host.read, [DEP_VAR, "LIBTORCH_USE_PYTORCH", "VIRTUAL_ENV"]);
    }

    #[test]
    fn pytorch_without_venv_runs_python3() {
        let mut host = Fake::with(&[("LIBTORCH_USE_PYTORCH", "")]);
        host.python = Some(Ok(TORCH_OUT.to_owned()));
        assert_eq!(
            lookup(&mut host).unwrap().source,
            Source::PyTorch("python3".into())
        );
        assert_eq!(host.ran, [PathBuf::from("python3")]);
    }

    #[test]
    fn last_library_path_is_taken() {
        let mut host = Fake::with(&[("LIBTORCH_USE_PYTORCH", "1")]);
        host.python = Some(Ok(
            "noise\nLIBTORCH_LIB: /first\nLIBTORCH_LIB: /second\n".to_owned()
        ));
        assert_eq!(lookup(&mut host).unwrap().dir, Path::new("/second"));
    }

    #[test]
    fn failed_python_does_not_fall_back() {
        let mut host = everything();
        host.vars.remove(DEP_VAR);
        host.python = Some(Err("exit status: 1: ModuleNotFoundError".to_owned()));
        let err = lookup(&mut host).unwrap_err();
        assert_eq!(
            err,
            NotFound::Python {
                python: "python".into(),
                why: "exit status: 1: ModuleNotFoundError".to_owned()
            }
        );
        assert!(!host.read.contains(&"LIBTORCH".to_owned()));

        host.python = Some(Ok("no torch here\n".to_owned()));
        assert!(matches!(lookup(&mut host), Err(NotFound::Python { .. })));
    }

    #[test]
    fn libtorch_lib_then_libtorch_then_system() {
        let mut host = everything();
        host.vars.remove(DEP_VAR);
        host.vars.remove("LIBTORCH_USE_PYTORCH");
        let found = lookup(&mut host).unwrap();
        assert_eq!(
            (found.dir.as_path(), found.source),
            (Path::new("/ltl/lib"), Source::LibtorchLib)
        );
        assert!(host.ran.is_empty());

        host.vars.remove("LIBTORCH_LIB");
        let found = lookup(&mut host).unwrap();
        assert_eq!(
            (found.dir.as_path(), found.source),
            (Path::new("/lt/lib"), Source::Libtorch)
        );

        host.vars.remove("LIBTORCH");
        let found = lookup(&mut host).unwrap();
        assert_eq!(
            (found.dir.as_path(), found.source),
            (Path::new("/usr/lib"), Source::System)
        );

        host.files.clear();
        assert_eq!(lookup(&mut host), Err(NotFound::Unset));
    }

    #[test]
    fn every_variable_read_is_recorded_when_nothing_is_found() {
        let mut host = Fake::default();
        assert_eq!(lookup(&mut host), Err(NotFound::Unset));
        assert_eq!(
            host.read,
            [DEP_VAR, "LIBTORCH_USE_PYTORCH", "LIBTORCH_LIB", "LIBTORCH"]
        );
    }

    #[test]
    fn found_directory_becomes_a_runpath_with_libtorch_kept() {
        let found = Ok(Found {
            dir: "/t/lib".into(),
            source: Source::Libtorch,
        });
        assert_eq!(
            cargo_lines(&found, "linux"),
            [
                "cargo:rustc-link-arg=-Wl,-rpath,/t/lib",
                "cargo:rustc-link-arg=-Wl,--no-as-needed",
                "cargo:rustc-link-arg=-ltorch",
            ]
        );
        assert_eq!(
            cargo_lines(&found, "macos"),
            [
                "cargo:rustc-link-arg=-Wl,-rpath,/t/lib",
                "cargo:rustc-link-arg=-ltorch",
            ]
        );
        assert!(cargo_lines(&found, "windows").is_empty());
    }

    #[test]
    fn nothing_found_warns_and_links_as_before() {
        let lines = cargo_lines(&Err(NotFound::Unset), "linux");
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("cargo:warning=ono-link: no libtorch directory found"));
        assert!(lines[0].contains("LIBTORCH"));
        // One line: cargo shows only the first line of a multi-line warning.
        assert!(!lines[0].contains('\n'));
        assert_eq!(
            &lines[1..],
            [
                "cargo:rustc-link-arg=-Wl,--no-as-needed",
                "cargo:rustc-link-arg=-ltorch"
            ]
        );
    }

    /// Under `cargo xtask test` (or `eval "$(cargo xtask env)"`) the environment names a libtorch,
    /// and the lookup must land on the directory that holds it.
    #[test]
    fn the_configured_libtorch_is_found() {
        let configured = ["LIBTORCH_USE_PYTORCH", "LIBTORCH_LIB", "LIBTORCH"]
            .iter()
            .any(|v| std::env::var_os(v).is_some());
        if !configured {
            eprintln!("no libtorch configured in this environment; nothing to check");
            return;
        }
        let found = libtorch_lib_dir().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            found.dir.join("libtorch.so").is_file(),
            "{} has no libtorch.so",
            found.dir.display()
        );
    }
}
