//! The factorised Fourier layer of F-FNO (Tran et al., "Factorized Fourier Neural Operators"), as
//! the Neural-Solver-Library's `layers/FFNO_Layers.py` `SpectralConv2d` / `SpectralConv3d`
//! write it: one 1-D spectral convolution per grid axis, summed. No cross-axis modes.
//!
//! NSL's `SpectralConv1d` of the same file is the plain FNO layer
//! ([`crate::spectral_conv`]), not a factorised one; its callers pick that for 1-D grids.

use tch::nn::{Init, Path};
use tch::{Kind, Tensor};

use crate::precision::widen;
use crate::{Error, Result};

/// Settings of [`FactorizedSpectralConv`].
#[derive(Debug, Clone, PartialEq)]
pub struct FactorizedSpectralConvConfig {
    pub in_channels: i64,
    pub out_channels: i64,
    /// Retained modes per spatial axis (1 ..= 3 axes), in the grid's axis order. Each axis is
    /// transformed by its own rFFT, so every axis is a halved one: m_j ≤ n_j/2 + 1.
    pub modes: Vec<i64>,
}

impl FactorizedSpectralConvConfig {
    /// Registers `fourier_weight.{j}` for every axis j, each (in, out, m_j, 2): the complex
    /// weights as (real, imaginary) pairs, with the reference's `nn.init.xavier_normal_` on that
    /// real 4-D tensor: fan_in = out·m·2 and fan_out = in·m·2 (PyTorch's fans of a 4-D tensor),
    /// so std = √(2/(fan_in + fan_out)) = 1/√(m·(in + out)).
    pub fn init(&self, path: &Path) -> Result<FactorizedSpectralConv> {
        let d = self.modes.len();
        if !(1..=3).contains(&d)
            || self.modes.iter().any(|&m| m < 1)
            || self.in_channels < 1
            || self.out_channels < 1
        {
            return Err(Error::Config(format!(
                "factorized spectral convolution {self:?}"
            )));
        }
        let list = path / "fourier_weight";
        let weights = self
            .modes
            .iter()
            .enumerate()
            .map(|(j, &m)| {
                let std = 1.0 / ((m * (self.in_channels + self.out_channels)) as f64).sqrt();
                list.var(
                    &j.to_string(),
                    &[self.in_channels, self.out_channels, m, 2],
                    Init::Randn {
                        mean: 0.0,
                        stdev: std,
                    },
                )
            })
            .collect();
        Ok(FactorizedSpectralConv {
            weights,
            cfg: self.clone(),
        })
    }
}

/// See [`FactorizedSpectralConvConfig`].
#[derive(Debug)]
pub struct FactorizedSpectralConv {
    /// `fourier_weight.{j}`: (in, out, m_j, 2), acting along spatial axis j.
    pub weights: Vec<Tensor>,
    cfg: FactorizedSpectralConvConfig,
}

impl FactorizedSpectralConv {
    /// Σ_j irfft_j(W_j · rfft_j(x)[:m_j]): along each axis j, an rFFT with norm "ortho", the
    /// first m_j modes times the complex weight (channels mixed, the other axes untouched), the
    /// rest zero, the inverse rFFT at the axis' size; the per-axis results are summed. In float32
    /// at least (a 16-bit `x` is widened: there is no bfloat16 FFT).
    ///
    /// # Shapes
    /// - `x`: (B, in, n_1, …, n_D) with m_j ≤ n_j/2 + 1
    /// - returns: (B, out, n_1, …, n_D)
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        const OP: &str = "FactorizedSpectralConv";
        let c = &self.cfg;
        let d = c.modes.len();
        let size = x.size();
        if size.len() != d + 2 || size[1] != c.in_channels {
            return Err(Error::Shape {
                op: OP,
                expected: format!("(B, {}, n_1, …, n_{d})", c.in_channels),
                got: size,
            });
        }
        for (j, (&m, &n)) in c.modes.iter().zip(&size[2..]).enumerate() {
            if m > n / 2 + 1 {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!(
                        "at least {} cells along axis {j} for {m} modes",
                        2 * (m - 1)
                    ),
                    got: size,
                });
            }
        }
        let x = &widen(x)?;
        let letters = &"xyz"[..d];
        // Summed in axis order, as the reference's xx + xy (+ xz).
        let mut out: Option<Tensor> = None;
        let mut parts = Vec::with_capacity(d);
        for (j, (w, &m)) in self.weights.iter().zip(&c.modes).enumerate() {
            let dim = 2 + j as i64;
            let n = size[2 + j];
            let xf = x.f_fft_rfft(None, dim, "ortho")?.f_narrow(dim, 0, m)?;
            let w = w
                .f_to_kind(real_kind(xf.kind()))?
                .f_contiguous()?
                .f_view_as_complex()?;
            let axis = &letters[j..=j];
            let eq = format!("bi{letters},io{axis}->bo{letters}");
            let prod = Tensor::f_einsum(&eq, &[xf, w], None::<&[i64]>)?;
            // irfft zero-pads the spectrum to n/2 + 1 modes: the reference's zero buffer.
            parts.push(prod.f_fft_irfft(n, dim, "ortho")?);
        }
        for p in parts {
            out = Some(match out {
                None => p,
                Some(acc) => acc.f_add(&p)?,
            });
        }
        out.ok_or_else(|| Error::Config("factorized spectral convolution without axes".into()))
    }

    pub fn modes(&self) -> &[i64] {
        &self.cfg.modes
    }
}

fn real_kind(complex: Kind) -> Kind {
    match complex {
        Kind::ComplexDouble => Kind::Double,
        Kind::ComplexHalf => Kind::Half,
        _ => Kind::Float,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::nn::VarStore;
    use tch::Device;

    fn layer(vs: &VarStore, modes: &[i64]) -> FactorizedSpectralConv {
        FactorizedSpectralConvConfig {
            in_channels: 3,
            out_channels: 2,
            modes: modes.to_vec(),
        }
        .init(&vs.root())
        .unwrap()
    }

    /// Against a direct DFT sum along each axis, in f64: the per-axis output at (b, o, x, y) is
    /// (1/n)·Σ_k c_k Re(e^{2πikx/n} Σ_i W_iok Σ_x' x[b,i,x',y] e^{−2πikx'/n}) with c_0 = 1, c_k = 2
    /// for 0 < k < n/2, and the imaginary part of the DC mode dropped (C2R).
    #[test]
    fn matches_a_direct_dft_per_axis() {
        let vs = VarStore::new(Device::Cpu);
        let l = layer(&vs, &[2, 3]);
        let x = Tensor::randn([1, 3, 5, 6], (Kind::Double, Device::Cpu));
        let out = l.forward(&x).unwrap();
        let w: Vec<Tensor> = l.weights.iter().map(|w| w.to_kind(Kind::Double)).collect();
        let xv = |i: i64, a: i64, b: i64| x.double_value(&[0, i, a, b]);
        let (n0, n1) = (5i64, 6i64);
        for o in 0..2 {
            for a in 0..n0 {
                for b in 0..n1 {
                    let mut total = 0.0;
                    for (axis, n, m) in [(0usize, n0, 2i64), (1, n1, 3)] {
                        let pos = if axis == 0 { a } else { b };
                        for k in 0..m {
                            let (mut re, mut im) = (0.0, 0.0);
                            for i in 0..3 {
                                let (mut sr, mut si) = (0.0, 0.0);
                                for p in 0..n {
                                    let v = if axis == 0 { xv(i, p, b) } else { xv(i, a, p) };
                                    let ang =
                                        -2.0 * std::f64::consts::PI * (k * p) as f64 / n as f64;
                                    sr += v * ang.cos();
                                    si += v * ang.sin();
                                }
                                let wr = w[axis].double_value(&[i, o, k, 0]);
                                let wi = w[axis].double_value(&[i, o, k, 1]);
                                re += sr * wr - si * wi;
                                im += sr * wi + si * wr;
                            }
                            let ang = 2.0 * std::f64::consts::PI * (k * pos) as f64 / n as f64;
                            let c = if k == 0 || 2 * k == n { 1.0 } else { 2.0 };
                            // DC (and Nyquist) bins: C2R keeps only the real part.
                            let im = if k == 0 || 2 * k == n { 0.0 } else { im };
                            total += c * (re * ang.cos() - im * ang.sin()) / n as f64;
                        }
                    }
                    let got = out.double_value(&[0, o, a, b]);
                    assert!(
                        (got - total).abs() < 1e-12,
                        "({o},{a},{b}): {got} vs {total}"
                    );
                }
            }
        }
    }

    #[test]
    fn init_has_the_xavier_normal_std() {
        let vs = VarStore::new(Device::Cpu);
        let l = FactorizedSpectralConvConfig {
            in_channels: 40,
            out_channels: 24,
            modes: vec![12, 12, 12],
        }
        .init(&vs.root())
        .unwrap();
        assert_eq!(l.weights.len(), 3);
        let names: Vec<String> = vs.variables().keys().cloned().collect();
        for j in 0..3 {
            assert!(names.contains(&format!("fourier_weight.{j}")), "{names:?}");
        }
        let std = l.weights[0].std(true).double_value(&[]);
        let want = 1.0 / ((12 * 64) as f64).sqrt();
        assert!((std / want - 1.0).abs() < 0.03, "{std} vs {want}");
    }

    #[test]
    fn refuses_bad_shapes() {
        let vs = VarStore::new(Device::Cpu);
        let l = layer(&vs, &[2, 3]);
        let bad = Tensor::zeros([1, 3, 5], (Kind::Float, Device::Cpu));
        assert!(matches!(l.forward(&bad), Err(Error::Shape { .. })));
        let wrong_channels = Tensor::zeros([1, 4, 5, 6], (Kind::Float, Device::Cpu));
        assert!(matches!(
            l.forward(&wrong_channels),
            Err(Error::Shape { .. })
        ));
        // 3 modes need 4 cells along the axis.
        let small = Tensor::zeros([1, 3, 5, 3], (Kind::Float, Device::Cpu));
        assert!(matches!(l.forward(&small), Err(Error::Shape { .. })));
    }
}
