//! The spectral layer of the Galerkin Transformer's decoder (`SpectralConv1d`, `SpectralConv2d` of
//! scaomath/galerkin-transformer `libs/layers.py` @ f9e7d6a): SiLU(K(x) + Linear(x)), where K
//! keeps the lowest modes of an "ortho"-normalised rFFT. Unlike FNO's `SpectralConv` the residual
//! linear map is part of the layer, the FFTs are orthonormal, and the weights are initialised by
//! `xavier_normal_`. The multiply is [`ono_kernels::spectral::spectral_conv`].

use tch::nn::{Init, Path};
use tch::Tensor;

use crate::linear::torch_linear;
use crate::linear::Linear;
use crate::{Error, Result};
use ono_kernels::spectral::spectral_conv;

/// Settings of [`ResidualSpectralConv`].
#[derive(Debug, Clone, PartialEq)]
pub struct ResidualSpectralConvConfig {
    pub in_channels: i64,
    pub out_channels: i64,
    /// Retained modes per spatial dimension: one (1-D) or two equal ones (2-D, as the reference's
    /// single `modes`); the last dimension is the halved one of the rFFT.
    pub modes: Vec<i64>,
    /// Dropout on the input of the FFT (not of the residual), in training.
    pub dropout: f64,
}

impl ResidualSpectralConvConfig {
    /// Registers `linear` (in → out, PyTorch's default init) and the real (in, out, m…, 2)
    /// weights: `fourier_weight` in 1-D, `fourier_weight.0` (modes [:m, :m]) and
    /// `fourier_weight.1` ([−m:, :m]) in 2-D, drawn by `xavier_normal_` with the reference's gain
    /// 1/(in·out) (1-D) or √(in+out)/(in·out) (2-D).
    pub fn init(&self, path: &Path) -> Result<ResidualSpectralConv> {
        let (ci, co) = (self.in_channels, self.out_channels);
        let d = self.modes.len();
        if !(1..=2).contains(&d)
            || self.modes.iter().any(|&m| m < 1)
            || ci < 1
            || co < 1
            || !(0.0..=1.0).contains(&self.dropout)
        {
            return Err(Error::Config(format!(
                "residual spectral convolution {self:?}"
            )));
        }
        let linear = torch_linear(&(path / "linear"), ci, co, true);
        let mut shape = vec![ci, co];
        shape.extend_from_slice(&self.modes);
        shape.push(2);
        let receptive: i64 = shape[2..].iter().product();
        let (gain, count) = if d == 1 {
            (1.0 / (ci * co) as f64, 1)
        } else {
            (((ci + co) as f64).sqrt() / (ci * co) as f64, 2)
        };
        let std = gain * (2.0 / ((ci + co) * receptive) as f64).sqrt();
        let init = Init::Randn {
            mean: 0.0,
            stdev: std,
        };
        let weights = if d == 1 {
            vec![path.var("fourier_weight", &shape, init)]
        } else {
            let wp = path / "fourier_weight";
            (0..count)
                .map(|k| wp.var(&k.to_string(), &shape, init))
                .collect()
        };
        Ok(ResidualSpectralConv {
            linear,
            weights,
            modes: self.modes.clone(),
            dropout: self.dropout,
        })
    }
}

/// See [`ResidualSpectralConvConfig`].
#[derive(Debug)]
pub struct ResidualSpectralConv {
    pub linear: Linear,
    pub weights: Vec<Tensor>,
    modes: Vec<i64>,
    dropout: f64,
}

impl ResidualSpectralConv {
    /// # Shapes
    /// - `x`: (B, n_1, …, n_D, in) channels last, D = 1 or 2
    /// - returns: (B, n_1, …, n_D, out)
    pub fn forward(&self, x: &Tensor, train: bool) -> Result<Tensor> {
        let d = self.modes.len();
        let size = x.size();
        if size.len() != d + 2 || size[d + 1] != self.linear.in_dim() {
            return Err(Error::Shape {
                op: "ResidualSpectralConv::forward",
                expected: format!("x (B, n_1..n_{d}, {})", self.linear.in_dim()),
                got: size,
            });
        }
        let res = self.linear.forward(x)?;
        let x = if train && self.dropout > 0.0 {
            x.f_dropout(self.dropout, true)?
        } else {
            x.shallow_clone()
        };
        let channels_first = x.f_movedim([(d + 1) as i64], [1])?;
        let weights: Vec<&Tensor> = self.weights.iter().collect();
        let spec = spectral_conv(&channels_first, &weights, &self.modes, "ortho")?;
        Ok(spec
            .f_movedim([1], [(d + 1) as i64])?
            .f_add(&res)?
            .f_silu()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::{Device, Kind};

    /// The reference's forward, written out with full FFTs in float64.
    #[test]
    fn matches_the_reference_formula_in_1d_and_2d() {
        tch::manual_seed(0);
        for (modes, grid) in [(vec![3], vec![10]), (vec![2, 2], vec![7, 6])] {
            let mut vs = VarStore::new(Device::Cpu);
            let layer = ResidualSpectralConvConfig {
                in_channels: 3,
                out_channels: 4,
                modes: modes.clone(),
                dropout: 0.0,
            }
            .init(&vs.root())
            .unwrap();
            vs.set_kind(Kind::Double);
            let mut shape = vec![2];
            shape.extend_from_slice(&grid);
            shape.push(3);
            let x = Tensor::randn(&shape, (Kind::Double, Device::Cpu));
            let got = layer.forward(&x, false).unwrap();
            let xc = if grid.len() == 1 {
                x.permute([0, 2, 1])
            } else {
                x.permute([0, 3, 1, 2])
            };
            let cw = |w: &Tensor| w.view_as_complex();
            let m = modes[0];
            let want = if grid.len() == 1 {
                let xf = xc.fft_rfft(grid[0], -1, "ortho");
                let out =
                    Tensor::zeros([2, 4, grid[0] / 2 + 1], (Kind::ComplexDouble, Device::Cpu));
                let kept = Tensor::einsum(
                    "bix,iox->box",
                    &[xf.narrow(-1, 0, m), cw(&layer.weights[0])],
                    None::<i64>,
                );
                out.narrow(-1, 0, m).copy_(&kept);
                out.fft_irfft(grid[0], -1, "ortho").permute([0, 2, 1])
            } else {
                let (n1, n2) = (grid[0], grid[1]);
                let xf = xc.fft_rfft2(Some([n1, n2].as_slice()), [-2, -1], "ortho");
                let out = Tensor::zeros([2, 4, n1, n2 / 2 + 1], (Kind::ComplexDouble, Device::Cpu));
                for (c, start) in [(0usize, 0i64), (1, n1 - m)] {
                    let block = xf.narrow(-2, start, m).narrow(-1, 0, m);
                    let kept = Tensor::einsum(
                        "bixy,ioxy->boxy",
                        &[block, cw(&layer.weights[c])],
                        None::<i64>,
                    );
                    out.narrow(-2, start, m).narrow(-1, 0, m).copy_(&kept);
                }
                out.fft_irfft2(Some([n1, n2].as_slice()), [-2, -1], "ortho")
                    .permute([0, 2, 3, 1])
            };
            let want = (want + layer.linear.forward(&x).unwrap()).silu();
            let err = (got - want).abs().max().double_value(&[]);
            assert!(err < 1e-12, "{modes:?}: {err}");
        }
    }
}
