//! Finding or installing libtorch 2.11.0, and the environment that makes tch build and run.
//!
//! Order of precedence:
//! 1. `LIBTORCH` set by the user: that libtorch, nothing installed.
//! 2. `LIBTORCH_USE_PYTORCH` set by the user: the torch of their Python (`$VIRTUAL_ENV/bin/python`,
//!    else `python3`, as torch-sys itself chooses), nothing installed.
//! 3. Otherwise a venv with PyPI `torch==2.11.0` in the cache (`$ONO_CACHE_DIR`, else
//!    `$XDG_CACHE_HOME/ono`, else `~/.cache/ono`), created once and reused afterwards.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// The only libtorch that tch/torch-sys 0.24.0 accept.
pub const TORCH_VERSION: &str = "2.11.0";

/// Written into the venv after `pip install` succeeded; a venv without it is an interrupted install.
const COMPLETE_MARKER: &str = ".ono-torch-complete";

pub fn say(msg: impl AsRef<str>) {
    eprintln!("xtask: {}", msg.as_ref());
}

/// What was found, and the variables child cargo processes need.
pub struct TorchEnv {
    origin: String,
    version: String,
    lib_dir: PathBuf,
    /// The Python whose torch this is (none for a plain `LIBTORCH`).
    python: Option<PathBuf>,
    /// Whether that Python is xtask's own venv (so xtask may install into it).
    managed: bool,
    /// Variables to set; `PATH` and `LD_LIBRARY_PATH` already include the inherited value.
    vars: Vec<(&'static str, OsString)>,
}

impl TorchEnv {
    fn new(origin: String, version: String, lib_dir: PathBuf, venv: Option<&Path>) -> Self {
        let mut vars = Vec::new();
        if let Some(venv) = venv {
            vars.push(("LIBTORCH_USE_PYTORCH", OsString::from("1")));
            vars.push(("VIRTUAL_ENV", venv.as_os_str().to_owned()));
            vars.push(("PATH", prepend_path(&venv.join("bin"), "PATH")));
        }
        vars.push(("LD_LIBRARY_PATH", prepend_path(&lib_dir, "LD_LIBRARY_PATH")));
        Self {
            origin,
            version,
            lib_dir,
            python: venv.map(|v| v.join("bin").join("python")),
            managed: venv.is_some(),
            vars,
        }
    }

    /// The Python with this torch, for the PyTorch reference scripts.
    pub fn python(&self) -> Option<&Path> {
        self.python.as_deref()
    }

    /// Whether [`Self::python`] is xtask's own venv.
    pub fn managed(&self) -> bool {
        self.managed
    }

    pub fn apply(&self, cmd: &mut Command) {
        for (k, v) in &self.vars {
            cmd.env(k, v);
        }
    }

    pub fn describe(&self) {
        say(format!("libtorch {} from {}", self.version, self.origin));
        say(format!("libtorch lib dir: {}", self.lib_dir.display()));
        say("for plain cargo in this shell: eval \"$(cargo xtask env)\"");
    }

    pub fn shell_exports(&self) -> String {
        let mut out = String::new();
        for (k, v) in &self.vars {
            let _ = writeln!(out, "export {k}={}", shell_quote(&v.to_string_lossy()));
        }
        out
    }
}

pub fn bootstrap() -> Result<TorchEnv> {
    if let Some(libtorch) = std::env::var_os("LIBTORCH") {
        return user_libtorch(PathBuf::from(libtorch));
    }
    if std::env::var_os("LIBTORCH_USE_PYTORCH").is_some() {
        return user_pytorch();
    }
    managed_venv()
}

fn user_libtorch(root: PathBuf) -> Result<TorchEnv> {
    let lib_dir = std::env::var_os("LIBTORCH_LIB")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("lib"));
    if !lib_dir.join("libtorch_cpu.so").exists() {
        bail!(
            "LIBTORCH={} but {} has no libtorch_cpu.so; point LIBTORCH at an unpacked libtorch {TORCH_VERSION} \
             (or unset it to let xtask install torch=={TORCH_VERSION} from PyPI into its cache)",
            root.display(),
            lib_dir.display()
        );
    }
    // libtorch archives carry a `build-version` file such as "2.11.0+cpu".
    let version = std::fs::read_to_string(root.join("build-version"))
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "of unknown version (no build-version file)".to_owned());
    if version.contains('.') {
        check_version(&version, &format!("LIBTORCH={}", root.display()))?;
    }
    say(format!(
        "using LIBTORCH={} (installing nothing)",
        root.display()
    ));
    Ok(TorchEnv::new(
        format!("LIBTORCH={}", root.display()),
        version,
        lib_dir,
        None,
    ))
}

fn user_pytorch() -> Result<TorchEnv> {
    // The same interpreter torch-sys's build script will run.
    let python = match std::env::var_os("VIRTUAL_ENV") {
        Some(venv) => PathBuf::from(venv).join("bin").join("python"),
        None => PathBuf::from("python3"),
    };
    let (version, lib_dir) = query_torch(&python).with_context(|| {
        format!(
            "LIBTORCH_USE_PYTORCH is set but {} cannot import torch; install torch=={TORCH_VERSION} there \
             or unset LIBTORCH_USE_PYTORCH to let xtask manage its own copy",
            python.display()
        )
    })?;
    check_version(&version, &format!("the torch of {}", python.display()))?;
    say(format!(
        "using the PyTorch of {} (LIBTORCH_USE_PYTORCH set; installing nothing)",
        python.display()
    ));
    let mut env = TorchEnv::new(
        format!("LIBTORCH_USE_PYTORCH with {}", python.display()),
        version,
        lib_dir,
        None,
    );
    env.python = Some(python);
    Ok(env)
}

pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("ONO_CACHE_DIR") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("ono"));
    }
    let home = std::env::var_os("HOME")
        .context("neither ONO_CACHE_DIR, XDG_CACHE_HOME nor HOME is set: set ONO_CACHE_DIR")?;
    Ok(PathBuf::from(home).join(".cache").join("ono"))
}

fn managed_venv() -> Result<TorchEnv> {
    let venv = cache_dir()?.join(format!("venv-torch-{TORCH_VERSION}"));
    let python = venv.join("bin").join("python");
    let marker = venv.join(COMPLETE_MARKER);

    if marker.exists() {
        match query_torch(&python) {
            Ok((version, lib_dir)) if same_release(&version) => {
                say(format!("reusing torch {version} in {}", venv.display()));
                return Ok(TorchEnv::new(
                    format!("the cached venv {}", venv.display()),
                    version,
                    lib_dir,
                    Some(&venv),
                ));
            }
            Ok((version, _)) => say(format!(
                "the cached venv {} holds torch {version}, but tch 0.24 only accepts {TORCH_VERSION} \
                 (someone upgraded it in place?); reinstalling torch=={TORCH_VERSION}",
                venv.display()
            )),
            Err(e) => say(format!(
                "the cached venv {} is broken ({e:#}); repairing it",
                venv.display()
            )),
        }
    } else if venv.exists() {
        say(format!(
            "{} exists but its install never completed (interrupted?); resuming it",
            venv.display()
        ));
    }

    install(&venv)?;
    let (version, lib_dir) = query_torch(&python)
        .context("torch was installed but cannot be imported from the new venv")?;
    check_version(&version, &format!("the new venv {}", venv.display()))?;
    std::fs::write(&marker, format!("{version}\n"))
        .with_context(|| format!("writing {}", marker.display()))?;
    say(format!("installed torch {version} into {}", venv.display()));
    Ok(TorchEnv::new(
        format!("the cached venv {} (just installed)", venv.display()),
        version,
        lib_dir,
        Some(&venv),
    ))
}

const DEBIAN_PYTHON_HINT: &str =
    "on Debian/Ubuntu: apt-get install python3 python3-venv python3-pip";

fn install(venv: &Path) -> Result<()> {
    let python = venv.join("bin").join("python");
    if !python.exists() {
        if let Some(parent) = venv.parent() {
            std::fs::create_dir_all(parent)
                .with_context(|| format!("creating the cache directory {}", parent.display()))?;
        }
        if !succeeds(Command::new("python3").arg("--version")) {
            bail!("python3 was not found; it is needed to install libtorch ({DEBIAN_PYTHON_HINT})");
        }
        if !succeeds(Command::new("python3").args(["-c", "import venv, ensurepip"])) {
            bail!("python3 has no working `venv`/`ensurepip` module ({DEBIAN_PYTHON_HINT})");
        }
        say(format!("creating a venv in {}", venv.display()));
        if !succeeds(Command::new("python3").arg("-m").arg("venv").arg(venv)) {
            bail!(
                "`python3 -m venv {}` failed ({DEBIAN_PYTHON_HINT})",
                venv.display()
            );
        }
    }
    if !succeeds(Command::new(&python).args(["-m", "pip", "--version"])) {
        bail!(
            "the venv at {} has no pip ({DEBIAN_PYTHON_HINT})",
            venv.display()
        );
    }
    say(format!(
        "pip install torch=={TORCH_VERSION} (the CUDA 13.0 build from PyPI: about 4.6 GB, once)"
    ));
    let status = Command::new(&python)
        .args(["-m", "pip", "install", "--disable-pip-version-check"])
        .arg(format!("torch=={TORCH_VERSION}"))
        // numpy: torch warns without it, and the fixture generators (fixtures/*/make_*.py) use it.
        .arg("numpy")
        .status()
        .context("could not run pip")?;
    if !status.success() {
        bail!(
            "pip install torch=={TORCH_VERSION} failed ({status}); the venv at {} is left to resume \
             on the next run. Is PyPI reachable, and is there about 5 GB free?",
            venv.display()
        );
    }
    Ok(())
}

/// The CUDA headers NCCL's declarations reach (`cuda_runtime.h` needs `crt/host_config.h`,
/// `cuda_fp16.h` needs `nv/target`), which the CUDA 13 torch wheel does not ship: with them
/// ono-dist compiles its NCCL path (data parallelism on CUDA). Pinned to the CUDA 13.0 of the
/// wheel; about 18 MB. Installed only into the xtask's own venv, only for a CUDA 13 torch, and
/// only when missing; a failure is reported and leaves NCCL out (training on one GPU and on the
/// CPU is unaffected).
const CUDA_HEADER_PACKAGES: [&str; 2] = ["nvidia-cuda-crt==13.0.88", "nvidia-cuda-cccl==13.0.85"];

pub fn ensure_cuda_headers(env: &TorchEnv) -> Result<()> {
    let Some(python) = env.python() else {
        return Ok(());
    };
    if !env.managed || !env.version.contains("+cu13") {
        return Ok(());
    }
    // torch/lib → site-packages.
    let Some(site) = env.lib_dir.parent().and_then(Path::parent) else {
        return Ok(());
    };
    let include = site.join("nvidia").join("cu13").join("include");
    if include.join("crt").join("host_config.h").is_file()
        && include.join("nv").join("target").is_file()
    {
        return Ok(());
    }
    say(format!(
        "pip install {} (CUDA headers for ono-dist's NCCL path, about 18 MB, once)",
        CUDA_HEADER_PACKAGES.join(" ")
    ));
    let status = Command::new(python)
        .args([
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--no-deps",
        ])
        .args(CUDA_HEADER_PACKAGES)
        .stdout(std::io::stderr())
        .status()
        .context("could not run pip")?;
    if !status.success() {
        say(format!(
            "pip install {} failed ({status}): ono-dist is built without NCCL (no data-parallel \
             training on CUDA)",
            CUDA_HEADER_PACKAGES.join(" ")
        ));
    }
    Ok(())
}

/// Imports torch with `python` and returns its version and its `lib/` directory.
fn query_torch(python: &Path) -> Result<(String, PathBuf)> {
    let out = Command::new(python)
        .args([
            "-c",
            "import os, torch; print(torch.__version__); \
             print(os.path.join(os.path.dirname(torch.__file__), 'lib'))",
        ])
        .output()
        .with_context(|| format!("could not run {}", python.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err.lines().last().unwrap_or("").trim();
        bail!("`import torch` failed with {}: {last}", python.display());
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut lines = stdout.lines();
    match (lines.next(), lines.next()) {
        (Some(v), Some(lib)) => Ok((v.trim().to_owned(), PathBuf::from(lib.trim()))),
        _ => bail!("unexpected answer from {}: {stdout:?}", python.display()),
    }
}

/// "2.11.0+cu130" is release 2.11.0: torch-sys ignores the local version suffix too.
fn same_release(version: &str) -> bool {
    version.split('+').next() == Some(TORCH_VERSION)
}

fn check_version(version: &str, source: &str) -> Result<()> {
    if same_release(version) {
        return Ok(());
    }
    if std::env::var_os("LIBTORCH_BYPASS_VERSION_CHECK").is_some() {
        say(format!(
            "warning: {source} is torch {version}, not {TORCH_VERSION}; LIBTORCH_BYPASS_VERSION_CHECK is set, \
             so going on, but tch 0.24's bindings were generated for {TORCH_VERSION} and may crash"
        ));
        return Ok(());
    }
    bail!(
        "{source} is torch {version}, but tch/torch-sys 0.24.0 only build against {TORCH_VERSION}. \
         Install torch=={TORCH_VERSION} there, or unset LIBTORCH/LIBTORCH_USE_PYTORCH so that xtask \
         installs its own copy into {}",
        cache_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|_| "its cache".into())
    )
}

pub(crate) fn succeeds(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// `dir` followed by the inherited value of `var`, without duplicates and without the entries that
/// `cargo run` itself put into `LD_LIBRARY_PATH` for the xtask process (target/ and toolchain dirs),
/// which must not leak into a user's shell through `cargo xtask env`.
fn prepend_path(dir: &Path, var: &str) -> OsString {
    let mut parts = vec![dir.to_path_buf()];
    if let Some(old) = std::env::var_os(var) {
        let added_by_cargo = |p: &Path| {
            var == "LD_LIBRARY_PATH"
                && (p.starts_with(workspace_target_dir())
                    || p.components().any(|c| c.as_os_str() == "toolchains"))
        };
        parts.extend(
            std::env::split_paths(&old)
                .filter(|p| p != dir && !p.as_os_str().is_empty() && !added_by_cargo(p)),
        );
    }
    std::env::join_paths(parts).unwrap_or_else(|_| dir.as_os_str().to_owned())
}

fn workspace_target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let xtask = Path::new(env!("CARGO_MANIFEST_DIR"));
            xtask.parent().unwrap_or(xtask).join("target")
        })
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_ignores_local_suffix() {
        assert!(same_release("2.11.0"));
        assert!(same_release("2.11.0+cu130"));
        assert!(!same_release("2.11.1"));
        assert!(!same_release("2.1.0"));
        assert!(!same_release("2.10.0+cpu"));
    }

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("/a b/c"), "'/a b/c'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
