//! `ono info`: the libtorch build, the devices this binary sees, and the architectures it builds.

use anyhow::Result;
use tch::{Device, Kind, Tensor};

/// Prints the build and runs a small matrix product on each device.
pub fn run() -> Result<()> {
    println!("ono {}", env!("CARGO_PKG_VERSION"));
    println!(
        "torch threads: {} (interop {})",
        tch::get_num_threads(),
        tch::get_num_interop_threads()
    );
    println!(
        "MKL: {}, LAPACK: {}, OpenMP: {}",
        tch::utils::has_mkl(),
        tch::utils::has_lapack(),
        tch::utils::has_openmp()
    );
    let cuda = tch::Cuda::is_available();
    println!(
        "CUDA available: {cuda} (devices: {}, cuDNN: {})",
        tch::Cuda::device_count(),
        tch::Cuda::cudnn_is_available()
    );
    let mut devices = vec![Device::Cpu];
    if cuda {
        devices.extend((0..tch::Cuda::device_count() as usize).map(Device::Cuda));
    }
    for dev in devices {
        let a = Tensor::f_ones([64, 64], (Kind::Float, dev))?;
        let s = a.f_matmul(&a)?.f_sum(Kind::Float)?.f_double_value(&[])?;
        anyhow::ensure!(
            s == 64.0 * 64.0 * 64.0,
            "wrong matmul result {s} on {dev:?}"
        );
        println!("{dev:?}: 64×64 matmul ok");
    }
    println!("architectures (arch: presets):");
    for arch in ono_models::ARCHS {
        let presets = ono_models::ModelConfig::preset_names(arch)?;
        println!("  {arch}: {}", presets.join(", "));
    }
    Ok(())
}
