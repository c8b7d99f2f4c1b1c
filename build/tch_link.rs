//! Link script shared by every crate that links an executable against libtorch (tests, benches, bins).
//!
//! torch-sys passes its rpath only to the compile of its own C++ shim, and `--as-needed` drops
//! `libtorch.so` (which is what pulls in `libtorch_cuda.so`). Without this script test binaries cannot
//! find `libtorch_cpu.so` and CUDA silently reports as unavailable on GPU machines (tch-rs #907, #980).
//! The path is baked as RUNPATH, so `LD_LIBRARY_PATH` still wins when a binary is moved to another
//! machine. Every user must list `torch-sys` as a direct dependency: `DEP_TCH_LIBTORCH_LIB` only reaches
//! direct dependents of the `links = "tch"` package.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TCH_LIBTORCH_LIB");
    if let Some(lib) = std::env::var_os("DEP_TCH_LIBTORCH_LIB") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.to_string_lossy());
    }
    println!("cargo:rustc-link-arg=-Wl,--no-as-needed");
    println!("cargo:rustc-link-arg=-ltorch");
}
