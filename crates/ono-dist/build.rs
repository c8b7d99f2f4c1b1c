//! Compiles `cpp/c10d_shim.cpp` against the libtorch that torch-sys links, and links it, when
//! the `c10d` feature is on (ono-train's `dist`).
//!
//! * The headers are the lib directory's sibling `include` (the PyPI wheel and the libtorch zip
//!   both ship c10d's headers there).
//! * Gloo's own headers are not in the wheel; Debian's `libgloo-dev` supplies the declarations
//!   (`ProcessGroupGloo` holds every Gloo type by pointer, so its layout does not depend on the
//!   Gloo version). Every Gloo function that runs is torch's own copy inside `libtorch_cpu`.
//! * ProcessGroupNCCL is compiled in only when `libtorch_cuda.so`, `nccl.h` and the CUDA headers
//!   it includes are all found; the build then sets `cfg(ono_nccl)`. The CUDA wheel alone is not
//!   enough (see [`nccl`] for the two header sets it lacks). `ONO_DIST_NCCL=0` leaves NCCL out on
//!   purpose. Without it, asking for NCCL is a runtime error that carries the reason found here.
//! * `cpp/cuda_graph_shim.cpp` (CUDA graph capture through `at::cuda::CUDAGraph`) needs the same
//!   CUDA headers and is compiled with NCCL (`cfg(ono_cuda_graphs)`); without them, capturing is
//!   a runtime error with the same reason.

#[cfg(feature = "c10d")]
use std::env;
#[cfg(feature = "c10d")]
use std::path::{Path, PathBuf};

fn main() {
    // RUNPATH and `--no-as-needed -ltorch` for this package's tests and examples.
    ono_link::emit();
    println!("cargo::rustc-check-cfg=cfg(ono_nccl)");
    println!("cargo::rustc-check-cfg=cfg(ono_cuda_graphs)");
    println!("cargo:rerun-if-changed=cpp/c10d_shim.cpp");
    println!("cargo:rerun-if-changed=cpp/cuda_graph_shim.cpp");
    println!("cargo:rerun-if-changed=cpp/guarded.hpp");
    println!("cargo:rerun-if-changed=build.rs");
    for var in [
        "GLOO_INCLUDE_DIR",
        "ONO_DIST_CUDA_INCLUDE",
        "NCCL_INCLUDE_DIR",
        "CUDA_HOME",
        "ONO_DIST_NCCL",
        "LIBTORCH_CXX11_ABI",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }

    // Without the `c10d` feature the crate reads launchers' variables only: nothing to compile.
    #[cfg(feature = "c10d")]
    compile_shim();
}

/// Compiles and links the shim, with NCCL where its headers are found.
#[cfg(feature = "c10d")]
fn compile_shim() {
    let lib = match ono_link::libtorch_lib_dir() {
        Ok(found) => found.dir,
        Err(e) => fail(&format!("cannot compile the c10d shim: {e}")),
    };
    let include = lib.parent().map(|p| p.join("include")).unwrap_or_default();
    if !include
        .join("torch/csrc/distributed/c10d/ProcessGroupGloo.hpp")
        .is_file()
    {
        fail(&format!(
            "{} has no torch/csrc/distributed/c10d/ProcessGroupGloo.hpp: this libtorch ships no c10d \
             headers (use the PyPI wheel, as `cargo xtask setup` does)",
            include.display()
        ));
    }
    let gloo = gloo_include();

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .file("cpp/c10d_shim.cpp")
        .std("c++17")
        .define("USE_C10D_GLOO", None)
        // torch-sys's own default; the PyPI wheels are built with the C++11 ABI.
        .define(
            "_GLIBCXX_USE_CXX11_ABI",
            env::var("LIBTORCH_CXX11_ABI")
                .unwrap_or_else(|_| "1".to_owned())
                .as_str(),
        )
        .include(&include)
        .include(include.join("torch/csrc/api/include"))
        // torch's headers are not warning-clean under the default flags.
        .warnings(false)
        .flag_if_supported("-w");
    if let Some(dir) = &gloo {
        build.include(dir);
    }

    let nccl = nccl(&lib, &include);
    match &nccl {
        Ok(dirs) => {
            build.define("USE_C10D_NCCL", None).define("ONO_NCCL", None);
            for d in dirs {
                build.include(d);
            }
            // The CUDA graph shim needs the same CUDA headers (and libtorch_cuda).
            build.file("cpp/cuda_graph_shim.cpp");
            println!("cargo:rustc-cfg=ono_nccl");
            println!("cargo:rustc-cfg=ono_cuda_graphs");
        }
        Err(why) => {
            println!("cargo:rustc-env=ONO_DIST_NO_NCCL_WHY={why}");
            println!("cargo:rustc-env=ONO_DIST_NO_CUDA_GRAPHS_WHY={why}");
        }
    }
    build.compile("ono_dist_c10d_shim");

    // After the static shim, the libraries it calls into (torch-sys links them as well; naming
    // them here keeps the order right for the linker whatever torch-sys does).
    println!("cargo:rustc-link-search=native={}", lib.display());
    println!("cargo:rustc-link-lib=dylib=torch_cpu");
    println!("cargo:rustc-link-lib=dylib=c10");
    if nccl.is_ok() {
        println!("cargo:rustc-link-lib=dylib=torch_cuda");
        println!("cargo:rustc-link-lib=dylib=c10_cuda");
    }
}

#[cfg(feature = "c10d")]
/// Stops the build with a message (a build script has no other way to refuse).
fn fail(msg: &str) -> ! {
    eprintln!("ono-dist: {msg}");
    std::process::exit(1)
}

#[cfg(feature = "c10d")]
/// The directory that holds `gloo/`, when it is not a default include directory of the compiler.
fn gloo_include() -> Option<PathBuf> {
    if let Some(dir) = env::var_os("GLOO_INCLUDE_DIR") {
        return Some(dir.into());
    }
    let default = ["/usr/include", "/usr/local/include"];
    if default
        .iter()
        .any(|d| Path::new(d).join("gloo/algorithm.h").is_file())
    {
        return None;
    }
    fail(
        "Gloo's headers (gloo/algorithm.h) are not installed: `apt-get install libgloo-dev` \
         (`cargo xtask setup` does it as root), or set GLOO_INCLUDE_DIR to the directory holding gloo/",
    )
}

#[cfg(feature = "c10d")]
/// The include directories ProcessGroupNCCL.hpp needs, or why NCCL is left out.
///
/// Beside `nccl.h` it includes the CUDA runtime headers, and those are more than the CUDA wheel
/// torch depends on ships: `cuda_runtime.h` includes `crt/host_config.h` (PyPI's
/// `nvidia-cuda-crt`, or a CUDA toolkit) and `cuda_fp16.h` includes `nv/target` (PyPI's
/// `nvidia-cuda-cccl`). Each header is looked for in `ONO_DIST_CUDA_INCLUDE` (a `:`-separated
/// list), `NCCL_INCLUDE_DIR`, `$CUDA_HOME/include`, every `site-packages/nvidia/*/include` beside
/// torch, `/usr/local/cuda/include` and `/usr/include`, each also with its `cccl` subdirectory
/// (where CUDA 13 keeps `nv/`).
fn nccl(lib: &Path, include: &Path) -> Result<Vec<PathBuf>, String> {
    if env::var("ONO_DIST_NCCL").is_ok_and(|v| v == "0") {
        return Err("ONO_DIST_NCCL=0 was set when ono-dist was built".to_owned());
    }
    if !lib.join("libtorch_cuda.so").is_file() {
        return Err(format!(
            "the libtorch in {} is a CPU build (no libtorch_cuda.so)",
            lib.display()
        ));
    }
    if !include
        .join("torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp")
        .is_file()
    {
        return Err(format!("{} has no ProcessGroupNCCL.hpp", include.display()));
    }
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Some(list) = env::var_os("ONO_DIST_CUDA_INCLUDE") {
        roots.extend(env::split_paths(&list));
    }
    roots.extend(env::var_os("NCCL_INCLUDE_DIR").map(PathBuf::from));
    roots.extend(env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("include")));
    // The wheel's site-packages/nvidia, beside site-packages/torch.
    if let Some(nvidia) = lib
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("nvidia"))
    {
        let mut wheels: Vec<PathBuf> = std::fs::read_dir(&nvidia)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("include"))
            .collect();
        wheels.sort();
        roots.extend(wheels);
    }
    roots.push("/usr/local/cuda/include".into());
    roots.push("/usr/include".into());
    let candidates: Vec<PathBuf> = roots
        .into_iter()
        .flat_map(|r| [r.join("cccl"), r])
        .filter(|d| d.is_dir())
        .collect();

    let mut dirs: Vec<PathBuf> = Vec::new();
    for (header, hint) in [
        ("nccl.h", "NCCL (PyPI nvidia-nccl-*)"),
        (
            "cuda_runtime_api.h",
            "the CUDA runtime (PyPI nvidia-cuda-runtime)",
        ),
        (
            "crt/host_config.h",
            "the CUDA C runtime (PyPI nvidia-cuda-crt)",
        ),
        ("nv/target", "CCCL (PyPI nvidia-cuda-cccl)"),
    ] {
        let Some(dir) = candidates.iter().find(|d| d.join(header).is_file()) else {
            return Err(format!(
                "{header} of {hint} was not found; install it beside torch, or name its include \
                 directory in ONO_DIST_CUDA_INCLUDE or CUDA_HOME"
            ));
        };
        if !dirs.contains(dir) {
            dirs.push(dir.clone());
        }
    }
    Ok(dirs)
}
