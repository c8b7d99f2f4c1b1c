//! The FNO Fourier layer `SpectralConv{1,2,3}d` (the reference scripts and NSL's
//! `layers/FNO_Layers.py`): complex weights on the lowest modes of an rFFT, on the
//! [`ono_kernels::spectral`] multiply.

use tch::nn::{Init, Path};
use tch::Tensor;

use crate::{Error, Result};
use ono_kernels::spectral::{corner_count, spectral_conv};

/// Settings of [`SpectralConv`].
#[derive(Debug, Clone, PartialEq)]
pub struct SpectralConvConfig {
    pub in_channels: i64,
    pub out_channels: i64,
    /// Retained modes per spatial dimension (1 ..= 3 of them); the last dimension is the halved
    /// one of the rFFT.
    pub modes: Vec<i64>,
}

impl SpectralConvConfig {
    /// Registers `weights1 … weights{2^(D−1)}`, each (in, out, m_1, …, m_D, 2): the complex
    /// weights of the reference as (real, imaginary) pairs, drawn as the reference draws them,
    /// `scale · U[0, 1)` for both parts with scale = 1/(in·out).
    pub fn init(&self, path: &Path) -> Result<SpectralConv> {
        let d = self.modes.len();
        if !(1..=3).contains(&d)
            || self.modes.iter().any(|&m| m < 1)
            || self.in_channels < 1
            || self.out_channels < 1
        {
            return Err(Error::Config(format!("spectral convolution {self:?}")));
        }
        let mut shape = vec![self.in_channels, self.out_channels];
        shape.extend_from_slice(&self.modes);
        shape.push(2);
        let scale = 1.0 / (self.in_channels * self.out_channels) as f64;
        let weights = (1..=corner_count(d))
            .map(|k| {
                path.var(
                    &format!("weights{k}"),
                    &shape,
                    Init::Uniform { lo: 0.0, up: scale },
                )
            })
            .collect();
        Ok(SpectralConv {
            weights,
            modes: self.modes.clone(),
        })
    }
}

/// See [`SpectralConvConfig`].
#[derive(Debug)]
pub struct SpectralConv {
    pub weights: Vec<Tensor>,
    modes: Vec<i64>,
}

impl SpectralConv {
    /// rFFT over the last D dimensions in the default ("backward") normalisation, the retained
    /// corner blocks times the weights, the rest zero, inverse rFFT at the input's size.
    ///
    /// # Shapes
    /// - `x`: (B, in, n_1, …, n_D) with m_j ≤ n_j (m_D ≤ n_D/2 + 1)
    /// - returns: (B, out, n_1, …, n_D)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let w: Vec<&Tensor> = self.weights.iter().collect();
        Ok(spectral_conv(x, &w, &self.modes, "backward")?)
    }

    pub fn modes(&self) -> &[i64] {
        &self.modes
    }
}
