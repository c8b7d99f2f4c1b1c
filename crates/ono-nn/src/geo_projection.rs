//! Geo-FNO's Fourier layer between a point cloud and a regular latent grid (`SpectralConv2d`
//! of `elasticity/elas_geofno.py`, neuraloperator/Geo-FNO `d499bde`, called with `x_in` or
//! `x_out`; NSL's `SpectralConv2d_IrregularGeo`, `layers/GeoFNO_Projection.py`, is the same
//! code). The points enter at computational coordinates ξ (usually ξ = [`Iphi`](crate::iphi::Iphi)(x)).
//!
//! Wavenumbers: k1 ∈ [0 … m1−1, −m1 … −1] (2·m1 rows), k2 ∈ [0 … m2−1, −(m2−1) … −1]
//! (2·m2 − 1 columns); K = ξ0·k1 + ξ1·k2.
//!
//! - **Points → grid** ([`GeoSpectralConv::points_to_grid`], the reference's `fft2d`):
//!   û(k) = Σ_n u_n e^{−2πi K_n(k)}, a plain sum (no 1/N, no quadrature weights); the two corner
//!   blocks k2 < m2 times `weights1` (k1 ≥ 0) and `weights2` (k1 < 0) go into an otherwise zero
//!   (s1, s2/2 + 1) half spectrum, then `irfft2` onto the s1 × s2 grid.
//! - **Grid → points** ([`GeoSpectralConv::grid_to_points`], `ifft2d`): `rfft2` of the grid, the
//!   two corner blocks times the weights, F = [factor1; factor2] (2·m1 × m2), extended by the
//!   conjugates to 2·m2 − 1 columns, Y_n = Re Σ_k F(k) e^{+2πi K_n(k)} (no 1/N, no factor 2).
//!
//! **The reference's conjugate extension is not Hermitian, and is reproduced**: it appends
//! `F[..., 1:].flip(-1, -2).conj()`, and the flip also reverses the k1 rows, so the column −k2 of
//! row k1 receives conj(F[−1−k1, k2]) instead of conj(F[−k1, k2]) (`elas_geofno.py` line 143,
//! NSL line 135). Every published Geo-FNO and NSL number was produced with it; Geo-FNO fixed it
//! only in `elas_geofno_v2.py` (commit a04a790).
//!
//! The basis is built as the reference builds it: θ = ∓fl(2π)·K in the parameters' precision,
//! `exp` of the complex (0 + iθ), a complex `einsum`.

use tch::nn::{Init, Path};
use tch::{Device, Kind, Tensor};

use crate::{Error, Result};

/// Settings of [`GeoSpectralConv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GeoSpectralConvConfig {
    pub in_channels: i64,
    pub out_channels: i64,
    /// (m1, m2): modes along the latent grid's first axis (each sign) and its halved second axis.
    pub modes: [i64; 2],
    /// (s1, s2): the latent grid [`points_to_grid`](GeoSpectralConv::points_to_grid) returns.
    pub latent: [i64; 2],
}

impl GeoSpectralConvConfig {
    /// Registers `weights1`, `weights2`, each (in, out, m1, m2, 2): complex weights as (real,
    /// imaginary) pairs, both parts U[0, 1/(in·out)) as the reference draws them.
    pub fn init(&self, path: &Path) -> Result<GeoSpectralConv> {
        let [m1, m2] = self.modes;
        let [s1, s2] = self.latent;
        if self.in_channels < 1 || self.out_channels < 1 || m1 < 1 || m2 < 1 {
            return Err(Error::Config(format!(
                "Geo-FNO spectral convolution {self:?}"
            )));
        }
        if 2 * m1 > s1 || m2 > s2 / 2 + 1 {
            return Err(Error::Config(format!(
                "Geo-FNO spectral convolution: the latent grid {s1} × {s2} cannot hold 2·{m1} \
                 rows and {m2} rFFT columns of modes"
            )));
        }
        let shape = [self.in_channels, self.out_channels, m1, m2, 2];
        let scale = 1.0 / (self.in_channels * self.out_channels) as f64;
        let init = Init::Uniform { lo: 0.0, up: scale };
        Ok(GeoSpectralConv {
            weights1: path.var("weights1", &shape, init),
            weights2: path.var("weights2", &shape, init),
            cfg: *self,
        })
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct GeoSpectralConv {
    pub weights1: Tensor,
    pub weights2: Tensor,
    cfg: GeoSpectralConvConfig,
}

/// The wavenumbers of `m` modes: `[0 … m−1, −m … −1]` for the first axis (`full = true`, 2m
/// values), `[0 … m−1]` for the second axis's retained half, and `[0 … m−1, −(m−1) … −1]` for
/// its conjugate-extended form (2m − 1 values).
fn wavenumbers(m: i64, first_axis: bool, extended: bool, kind: Kind, device: Device) -> Tensor {
    let mut k: Vec<f64> = (0..m).map(|i| i as f64).collect();
    if first_axis {
        k.extend((-m..0).map(|i| i as f64));
    } else if extended {
        k.extend((-(m - 1)..0).map(|i| i as f64));
    }
    Tensor::from_slice(&k).to_kind(kind).to_device(device)
}

fn complex_of(kind: Kind) -> Kind {
    match kind {
        Kind::Double => Kind::ComplexDouble,
        _ => Kind::ComplexFloat,
    }
}

impl GeoSpectralConv {
    pub fn config(&self) -> &GeoSpectralConvConfig {
        &self.cfg
    }

    fn check_xi(&self, op: &'static str, xi: &Tensor, b: i64, n: Option<i64>) -> Result<i64> {
        let size = xi.size();
        match size[..] {
            [bb, nn, 2] if bb == b && n.is_none_or(|n| n == nn) => Ok(nn),
            _ => Err(Error::Shape {
                op,
                expected: match n {
                    Some(n) => format!("xi ({b}, {n}, 2)"),
                    None => format!("xi ({b}, N, 2)"),
                },
                got: size,
            }),
        }
    }

    /// e^{sign·2πi·K}, K = ξ0·k1 + ξ1·k2 over the given wavenumbers.
    ///
    /// # Shapes
    /// - `xi`: (B, N, 2); `k1`: (R), `k2`: (C)
    /// - returns: (B, N, R, C) complex
    fn basis(xi: &Tensor, k1: &Tensor, k2: &Tensor, sign: f64) -> Result<Tensor> {
        let x0 = xi.f_select(-1, 0)?.f_unsqueeze(-1)?.f_unsqueeze(-1)?;
        let x1 = xi.f_select(-1, 1)?.f_unsqueeze(-1)?.f_unsqueeze(-1)?;
        let k = x0
            .f_mul(&k1.f_unsqueeze(-1)?)?
            .f_add(&x1.f_mul(&k2.f_unsqueeze(0)?)?)?;
        let theta = k.f_mul_scalar(sign * 2.0 * std::f64::consts::PI)?;
        Ok(Tensor::f_complex(&theta.f_zeros_like()?, &theta)?.f_exp()?)
    }

    fn complex_weights(&self, kind: Kind) -> Result<(Tensor, Tensor)> {
        let view = |w: &Tensor| -> Result<Tensor> {
            Ok(w.f_to_kind(kind)?.f_contiguous()?.f_view_as_complex()?)
        };
        Ok((view(&self.weights1)?, view(&self.weights2)?))
    }

    /// Non-uniform Fourier coefficients of the point values, the mode multiply, `irfft2` onto
    /// the latent grid (the reference's `forward(u, x_in=ξ)` with ξ given directly).
    ///
    /// # Shapes
    /// - `u`: (B, in, N) real; `xi`: (B, N, 2) computational coordinates
    /// - returns: (B, out, s1, s2)
    pub fn points_to_grid(&self, u: &Tensor, xi: &Tensor) -> Result<Tensor> {
        const OP: &str = "GeoSpectralConv::points_to_grid";
        let c = &self.cfg;
        let size = u.size();
        let (b, n) = match size[..] {
            [b, ci, n] if ci == c.in_channels => (b, n),
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("u (B, {}, N)", c.in_channels),
                    got: size,
                })
            }
        };
        self.check_xi(OP, xi, b, Some(n))?;
        let kind = self.weights1.kind();
        let xi = xi.f_to_kind(kind)?;
        let [m1, m2] = c.modes;
        let [s1, s2] = c.latent;
        // Only the columns k2 ∈ [0, m2) of the reference's 2·m2 − 1 are ever read.
        let k1 = wavenumbers(m1, true, false, kind, xi.device());
        let k2 = wavenumbers(m2, false, false, kind, xi.device());
        let basis = Self::basis(&xi, &k1, &k2, -1.0)?; // (B, N, 2m1, m2)
        let u_ft = Tensor::f_einsum(
            "bcn,bnxy->bcxy",
            &[u.f_to_kind(complex_of(kind))?, basis],
            None::<&[i64]>,
        )?;
        let (w1, w2) = self.complex_weights(kind)?;
        let mul = |rows: Tensor, w: Tensor| -> Result<Tensor> {
            Ok(Tensor::f_einsum(
                "bixy,ioxy->boxy",
                &[rows, w],
                None::<&[i64]>,
            )?)
        };
        let factor1 = mul(u_ft.f_narrow(2, 0, m1)?, w1)?;
        let factor2 = mul(u_ft.f_narrow(2, m1, m1)?, w2)?;
        let out_ft = Tensor::f_zeros(
            [b, c.out_channels, s1, s2 / 2 + 1],
            (complex_of(kind), xi.device()),
        )?;
        out_ft
            .f_narrow(2, 0, m1)?
            .f_narrow(3, 0, m2)?
            .f_copy_(&factor1)?;
        out_ft
            .f_narrow(2, s1 - m1, m1)?
            .f_narrow(3, 0, m2)?
            .f_copy_(&factor2)?;
        Ok(out_ft.f_fft_irfft2(Some(&[s1, s2][..]), [-2i64, -1], "backward")?)
    }

    /// `rfft2` of the grid, the mode multiply, the Fourier series evaluated at the points with
    /// the reference's (row-flipped) conjugate extension (the reference's `forward(u, x_out=ξ)`).
    ///
    /// # Shapes
    /// - `u`: (B, in, n1, n2) real, any grid with m1 ≤ n1 and m2 ≤ n2/2 + 1; `xi`: (B, N, 2)
    /// - returns: (B, out, N)
    pub fn grid_to_points(&self, u: &Tensor, xi: &Tensor) -> Result<Tensor> {
        const OP: &str = "GeoSpectralConv::grid_to_points";
        let c = &self.cfg;
        let [m1, m2] = c.modes;
        let size = u.size();
        let b = match size[..] {
            [b, ci, n1, n2] if ci == c.in_channels && m1 <= n1 && m2 <= n2 / 2 + 1 => b,
            _ => {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("u (B, {}, n1 ≥ {m1}, n2 ≥ {})", c.in_channels, 2 * (m2 - 1)),
                    got: size,
                })
            }
        };
        self.check_xi(OP, xi, b, None)?;
        let kind = self.weights1.kind();
        let xi = xi.f_to_kind(kind)?;
        let u_ft = u
            .f_to_kind(kind)?
            .f_fft_rfft2(None::<&[i64]>, [-2i64, -1], "backward")?;
        let (w1, w2) = self.complex_weights(kind)?;
        let rows = u_ft.size()[2];
        let corner = |start: i64, w: Tensor| -> Result<Tensor> {
            Ok(Tensor::f_einsum(
                "bixy,ioxy->boxy",
                &[u_ft.f_narrow(2, start, m1)?.f_narrow(3, 0, m2)?, w],
                None::<&[i64]>,
            )?)
        };
        let f = Tensor::f_cat(&[corner(0, w1)?, corner(rows - m1, w2)?], -2)?; // (B, O, 2m1, m2)
                                                                               // The reference's extension: flip over both the k2 columns and (the bug) the k1 rows.
        let ext = f
            .f_narrow(3, 1, m2 - 1)?
            .f_flip([-1i64, -2])?
            .f_conj_physical()?;
        let f = Tensor::f_cat(&[f, ext], -1)?; // (B, O, 2m1, 2m2 − 1)
        let k1 = wavenumbers(m1, true, false, kind, xi.device());
        let k2 = wavenumbers(m2, false, true, kind, xi.device());
        let basis = Self::basis(&xi, &k1, &k2, 1.0)?; // (B, N, 2m1, 2m2 − 1)
        Ok(Tensor::f_einsum("bcxy,bnxy->bcn", &[f, basis], None::<&[i64]>)?.f_real()?)
    }
}
