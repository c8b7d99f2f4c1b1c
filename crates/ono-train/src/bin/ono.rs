//! `ono`: the user-facing command line of the toolkit.

use anyhow::Result;
use clap::{Parser, Subcommand};
use tch::{Device, Kind, Tensor};

#[derive(Parser)]
#[command(
    name = "ono",
    version,
    about = "Neural operators on libtorch",
    arg_required_else_help = true
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the libtorch build this binary runs on and the devices it sees, and run a small
    /// matrix product on each device as a smoke test.
    Info,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Cmd::Info => info(),
    }
}

fn info() -> Result<()> {
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
    Ok(())
}
