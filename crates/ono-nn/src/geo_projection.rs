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
///
/// Made on the device (small integers, exact in any float kind): an upload per forward would
/// wait for the queued work, and cannot be captured in a CUDA graph.
fn wavenumbers(m: i64, first_axis: bool, extended: bool, kind: Kind, device: Device) -> Tensor {
    let head = Tensor::arange(m, (kind, device));
    let from = match (first_axis, extended) {
        (true, _) => -m,
        (false, true) => -(m - 1),
        (false, false) => return head,
    };
    Tensor::cat(&[head, Tensor::arange_start(from, 0, (kind, device))], 0)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spectral_conv::SpectralConvConfig;
    use tch::nn::VarStore;

    const F64: (Kind, Device) = (Kind::Double, Device::Cpu);

    fn projection(
        vs: &VarStore,
        ci: i64,
        co: i64,
        modes: [i64; 2],
        latent: [i64; 2],
    ) -> GeoSpectralConv {
        GeoSpectralConvConfig {
            in_channels: ci,
            out_channels: co,
            modes,
            latent,
        }
        .init(&(vs.root() / "p"))
        .unwrap()
    }

    /// Points lying exactly on the latent grid (ξ = (i/s1, j/s2)) make the non-uniform sum the
    /// DFT of the grid, so the projection equals the FNO layer (rfft2, corners, irfft2) on that
    /// grid with the same weights.
    #[test]
    fn points_on_the_grid_give_the_fno_layer() {
        tch::manual_seed(3);
        let (s1, s2, m1, m2, ci, co) = (8i64, 6i64, 3i64, 2i64, 2i64, 3i64);
        let vs = VarStore::new(Device::Cpu);
        let geo = projection(&vs, ci, co, [m1, m2], [s1, s2]);
        let mut fno = SpectralConvConfig {
            in_channels: ci,
            out_channels: co,
            modes: vec![m1, m2],
        }
        .init(&(vs.root() / "f"))
        .unwrap();
        tch::no_grad(|| {
            fno.weights[0].copy_(&geo.weights1);
            fno.weights[1].copy_(&geo.weights2);
        });
        vs.root().set_kind(Kind::Double);
        let grid = Tensor::randn([2, ci, s1, s2], F64);
        let i = Tensor::arange(s1, F64).divide_scalar(s1 as f64);
        let j = Tensor::arange(s2, F64).divide_scalar(s2 as f64);
        let mesh = Tensor::meshgrid_indexing(&[i, j], "ij");
        let xi = Tensor::stack(&[mesh[0].reshape([-1]), mesh[1].reshape([-1])], -1)
            .unsqueeze(0)
            .expand([2, s1 * s2, 2], false);
        let u = grid.reshape([2, ci, s1 * s2]);
        let got = geo.points_to_grid(&u, &xi).unwrap();
        let want = fno.forward(&grid).unwrap();
        let err = (&got - &want).abs().max().double_value(&[]);
        assert!(err < 1e-12 * want.abs().max().double_value(&[]), "{err}");
    }

    /// The grid → points transform against the definition in scalar float64 loops: a naive
    /// 2-D DFT of the grid, the corner products, and the series with the reference's
    /// extension, the column −k2 of row r holding conj(F[2·m1 − 1 − r, k2]). The Hermitian
    /// extension (row −k1) gives a different answer, so the test tells the two apart.
    #[test]
    #[allow(clippy::needless_range_loop)] // the loops spell out the sums of the definition
    fn grid_to_points_matches_the_definition_with_the_flip() {
        tch::manual_seed(4);
        let (s1, s2, m1, m2, ci, co, n) = (6usize, 5usize, 2usize, 3usize, 2usize, 2usize, 7usize);
        let vs = VarStore::new(Device::Cpu);
        let geo = projection(
            &vs,
            ci as i64,
            co as i64,
            [m1 as i64, m2 as i64],
            [s1 as i64, s2 as i64],
        );
        vs.root().set_kind(Kind::Double);
        let grid = Tensor::randn([1, ci as i64, s1 as i64, s2 as i64], F64);
        let xi = Tensor::rand([1, n as i64, 2], F64);
        let got =
            Vec::<f64>::try_from(geo.grid_to_points(&grid, &xi).unwrap().reshape([-1])).unwrap();

        let g = Vec::<f64>::try_from(grid.reshape([-1])).unwrap();
        let x = Vec::<f64>::try_from(xi.reshape([-1])).unwrap();
        let w = |t: &Tensor| Vec::<f64>::try_from(t.reshape([-1])).unwrap();
        let (w1, w2) = (w(&geo.weights1), w(&geo.weights2));
        type C = (f64, f64);
        let mul = |a: C, b: C| (a.0 * b.0 - a.1 * b.1, a.0 * b.1 + a.1 * b.0);
        let tau = 2.0 * std::f64::consts::PI;
        // Naive DFT û[c][k1 row of the grid][k2].
        let dft = |c: usize, r: usize, k2: usize| -> C {
            let mut acc = (0.0, 0.0);
            for a in 0..s1 {
                for bb in 0..s2 {
                    let v = g[(c * s1 + a) * s2 + bb];
                    let ph = -tau * ((r * a) as f64 / s1 as f64 + (k2 * bb) as f64 / s2 as f64);
                    acc.0 += v * ph.cos();
                    acc.1 += v * ph.sin();
                }
            }
            acc
        };
        // F[o][row][k2], rows 0..m1 from the low corner, m1..2m1 from the high one.
        let mut f = vec![vec![vec![(0.0, 0.0); m2]; 2 * m1]; co];
        for (o, fo) in f.iter_mut().enumerate() {
            for (row, fr) in fo.iter_mut().enumerate() {
                let (grid_row, wt, wr) = if row < m1 {
                    (row, &w1, row)
                } else {
                    (s1 - m1 + (row - m1), &w2, row - m1)
                };
                for (k2, v) in fr.iter_mut().enumerate() {
                    for c in 0..ci {
                        let k = (((c * co + o) * m1 + wr) * m2 + k2) * 2;
                        let p = mul(dft(c, grid_row, k2), (wt[k], wt[k + 1]));
                        v.0 += p.0;
                        v.1 += p.1;
                    }
                }
            }
        }
        let k1_of = |row: usize| {
            if row < m1 {
                row as f64
            } else {
                row as f64 - 2.0 * m1 as f64
            }
        };
        let series = |hermitian: bool| -> Vec<f64> {
            let mut out = vec![0.0; co * n];
            for o in 0..co {
                for p in 0..n {
                    let (x0, x1) = (x[2 * p], x[2 * p + 1]);
                    let mut acc = 0.0;
                    for row in 0..2 * m1 {
                        let k1 = k1_of(row);
                        for k2 in 0..m2 {
                            let ph = tau * (x0 * k1 + x1 * k2 as f64);
                            acc += mul(f[o][row][k2], (ph.cos(), ph.sin())).0;
                        }
                        for k2 in 1..m2 {
                            let src = if hermitian {
                                (2 * m1 - row) % (2 * m1)
                            } else {
                                2 * m1 - 1 - row
                            };
                            let v = f[o][src][k2];
                            let ph = tau * (x0 * k1 - x1 * k2 as f64);
                            acc += mul((v.0, -v.1), (ph.cos(), ph.sin())).0;
                        }
                    }
                    out[o * n + p] = acc;
                }
            }
            out
        };
        let scale = got.iter().fold(0f64, |m, v| m.max(v.abs()));
        let diff =
            |a: &[f64], b: &[f64]| a.iter().zip(b).fold(0f64, |m, (p, q)| m.max((p - q).abs()));
        let want = series(false);
        assert!(diff(&got, &want) < 1e-12 * scale, "{}", diff(&got, &want));
        assert!(
            diff(&got, &series(true)) > 1e-3 * scale,
            "the flip went unnoticed"
        );
    }

    #[test]
    fn refuses_bad_shapes() {
        let vs = VarStore::new(Device::Cpu);
        let geo = projection(&vs, 2, 2, [2, 2], [6, 6]);
        let u = Tensor::zeros([1, 2, 5], (Kind::Float, Device::Cpu));
        let xi = Tensor::zeros([1, 4, 2], (Kind::Float, Device::Cpu));
        assert!(geo.points_to_grid(&u, &xi).is_err());
        let small = Tensor::zeros([1, 2, 1, 6], (Kind::Float, Device::Cpu));
        assert!(geo.grid_to_points(&small, &xi).is_err());
        assert!(GeoSpectralConvConfig {
            in_channels: 1,
            out_channels: 1,
            modes: [4, 2],
            latent: [6, 6],
        }
        .init(&vs.root())
        .is_err());
    }
}
