//! Builds a small ONO, runs it once on random input and checks the result.

use ono_models::OnoConfig;
use tch::{nn::VarStore, Cuda, Device, Kind, Tensor};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let device = Device::cuda_if_available();
    let vs = VarStore::new(device);
    // The paper's layout, (x, y, a) → u, at a toy size.
    let config = OnoConfig {
        n_layers: 2,
        n_hidden: 32,
        n_head: 4,
        psi_dim: 8,
        ..OnoConfig::default()
    };
    let model = config.init(&vs.root())?;

    let (batch, points) = (2, 64);
    let pos = Tensor::f_rand([batch, points, config.space_dim], (Kind::Float, device))?;
    let a = Tensor::f_randn([batch, points, config.fun_dim], (Kind::Float, device))?;
    let u = tch::no_grad(|| model.forward(&pos, &a, None, None, false))?;

    let expected = [batch, points, config.out_dim];
    if u.size() != expected {
        return Err(format!("output shape {:?}, expected {expected:?}", u.size()).into());
    }
    if !bool::try_from(u.f_isfinite()?.f_all()?)? {
        return Err("the output is not finite".into());
    }
    println!(
        "ONO output shape {:?} on {device:?}; CUDA available: {}",
        u.size(),
        Cuda::is_available()
    );
    Ok(())
}
