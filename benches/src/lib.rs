//! Criterion benchmarks of the ono kernels live in `benches/`; this library holds their shared
//! plumbing.

use tch::Device;

/// Waits for queued CUDA work so that a timing covers the kernels, not just their launch.
pub fn sync(dev: Device) {
    if let Device::Cuda(i) = dev {
        tch::Cuda::synchronize(i as i64);
    }
}

/// The device benchmarks run on: CUDA:0 when present, else the CPU.
pub fn bench_device() -> Device {
    Device::cuda_if_available()
}
