//! Gaussian random fields for the Darcy benchmark: the recipe of the FNO data set's MATLAB `GRF.m`.
//!
//! For a grid of `s × s` cell centres `x_n = (n + ½)/s` the field is
//!
//! ```text
//! U = C^T L C,   L(k1,k2) = s · τ^{α−1} (π²(k1² + k2²) + τ²)^{−α/2} · ξ(k1,k2),   L(0,0) = 0,
//! ```
//!
//! with `ξ` i.i.d. standard normal and `C` the orthonormal DCT-II matrix, so `C^T · C` is MATLAB's
//! `idct2` (scipy `idctn(type=2, norm="ortho")`, i.e. an orthonormal DCT-III). The result is a draw from
//! `N(0, τ^{2α−2}(−Δ + τ²)^{−α})` with the zero-Neumann Laplacian, sampled at the cell centres.
//! The Darcy coefficient is the thresholded field: `hi` where `U ≥ 0`, `lo` elsewhere.

use ndarray::{Array2, ArrayView2};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The coefficient value where the random field is non-negative (FNO paper; `demo.m` uses the same).
pub const DEFAULT_HI: f64 = 12.0;
/// The coefficient value where the random field is negative (FNO paper; the public `demo.m` uses 4).
pub const DEFAULT_LO: f64 = 3.0;

/// Parameters of the Darcy Gaussian random field (`GRF.m`): covariance `τ^{2α−2}(−Δ + τ²)^{−α}`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DarcyGrf {
    /// Smoothness exponent α (2 in the FNO data).
    pub alpha: f64,
    /// Inverse length scale τ (3 in the FNO data).
    pub tau: f64,
}

impl Default for DarcyGrf {
    fn default() -> Self {
        Self {
            alpha: 2.0,
            tau: 3.0,
        }
    }
}

impl DarcyGrf {
    /// Refuses non-finite or non-positive α and τ.
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [("grf.alpha", self.alpha), ("grf.tau", self.tau)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config {
                    what: what.into(),
                    msg: format!("must be finite and positive, got {v}"),
                });
            }
        }
        Ok(())
    }

    /// The spectral amplitudes `s · τ^{α−1}(π²(k1² + k2²) + τ²)^{−α/2}` with the mean mode zeroed:
    /// multiplying them by i.i.d. normals gives the DCT coefficients `L` of a sample.
    pub fn spectrum(&self, s: usize) -> Result<Array2<f64>> {
        self.validate()?;
        check_size("DarcyGrf::spectrum", s)?;
        let pi2 = std::f64::consts::PI.powi(2);
        let pre = s as f64 * self.tau.powf(self.alpha - 1.0);
        let mut c = Array2::from_shape_fn((s, s), |(k1, k2)| {
            let k2sum = (k1 * k1 + k2 * k2) as f64;
            pre * (pi2 * k2sum + self.tau * self.tau).powf(-self.alpha / 2.0)
        });
        c[[0, 0]] = 0.0;
        Ok(c)
    }

    /// Precomputes what every sample on an `s × s` grid shares (cosine matrix, spectrum).
    pub fn sampler(&self, s: usize) -> Result<GrfSampler> {
        Ok(GrfSampler {
            spectrum: self.spectrum(s)?,
            dct: dct_matrix(s)?,
        })
    }

    /// One raw field `U` (`s × s`, cell centres). Builds a [`GrfSampler`]; reuse one for many samples.
    pub fn sample<R: Rng + ?Sized>(&self, s: usize, rng: &mut R) -> Result<Array2<f64>> {
        Ok(self.sampler(s)?.sample(rng))
    }

    /// One thresholded coefficient field (`hi` where `U ≥ 0`, `lo` elsewhere).
    pub fn sample_coefficient<R: Rng + ?Sized>(
        &self,
        s: usize,
        hi: f64,
        lo: f64,
        rng: &mut R,
    ) -> Result<Array2<f64>> {
        check_levels(hi, lo)?;
        Ok(threshold(&self.sample(s, rng)?, hi, lo))
    }
}

/// A [`DarcyGrf`] prepared for one grid size: holds the `s × s` cosine matrix and spectrum so that a
/// sample costs two `s³` matrix products.
#[derive(Debug, Clone)]
pub struct GrfSampler {
    spectrum: Array2<f64>,
    dct: Array2<f64>,
}

impl GrfSampler {
    /// The grid size `s`.
    pub fn size(&self) -> usize {
        self.dct.nrows()
    }

    /// One raw field `U`. The normals are drawn in row-major order of `(k1, k2)`, all `s²` of them
    /// (including the discarded mean mode), so a stream position maps to one sample whatever `s`'s
    /// spectrum looks like.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Array2<f64> {
        let s = self.size();
        let mut l = Array2::<f64>::zeros((s, s));
        for (v, c) in l.iter_mut().zip(self.spectrum.iter()) {
            let xi: f64 = rng.sample(StandardNormal);
            *v = c * xi;
        }
        idct2_with(&self.dct, l.view())
    }

    /// One thresholded coefficient field.
    pub fn sample_coefficient<R: Rng + ?Sized>(
        &self,
        hi: f64,
        lo: f64,
        rng: &mut R,
    ) -> Result<Array2<f64>> {
        check_levels(hi, lo)?;
        Ok(threshold(&self.sample(rng), hi, lo))
    }
}

/// The orthonormal DCT-II matrix `C(k, n) = w(k) cos(π(2n+1)k / 2s)`, `w(0) = √(1/s)`,
/// `w(k>0) = √(2/s)`. It is orthogonal, so the inverse transform of `L` is `C^T L C`.
pub fn dct_matrix(s: usize) -> Result<Array2<f64>> {
    check_size("dct_matrix", s)?;
    let w0 = (1.0 / s as f64).sqrt();
    let w = (2.0 / s as f64).sqrt();
    let step = std::f64::consts::PI / (2 * s) as f64;
    Ok(Array2::from_shape_fn((s, s), |(k, n)| {
        // Reduce the angle's integer part mod 4s first: cos is evaluated on a small argument, which
        // keeps the matrix orthogonal to ~1e-15 even for s in the hundreds.
        let m = ((2 * n + 1) * k) % (4 * s);
        let c = (step * m as f64).cos();
        if k == 0 {
            w0 * c
        } else {
            w * c
        }
    }))
}

/// MATLAB's `idct2` / scipy's `idctn(type=2, norm="ortho")` of a square array: the orthonormal 2-D
/// DCT-III, `U(n1,n2) = Σ_k w(k1)w(k2) L(k1,k2) cos(π(2n1+1)k1/2s) cos(π(2n2+1)k2/2s)`.
pub fn idct2(l: &Array2<f64>) -> Result<Array2<f64>> {
    let (r, c) = l.dim();
    if r != c || r == 0 {
        return Err(Error::Shape {
            op: "idct2",
            expected: "a non-empty square array".into(),
            got: vec![r as i64, c as i64],
        });
    }
    Ok(idct2_with(&dct_matrix(r)?, l.view()))
}

fn idct2_with(dct: &Array2<f64>, l: ArrayView2<f64>) -> Array2<f64> {
    dct.t().dot(&l).dot(dct)
}

/// The Darcy coefficient: `hi` where `u ≥ 0`, `lo` elsewhere (NaN maps to `lo`).
pub fn threshold(u: &Array2<f64>, hi: f64, lo: f64) -> Array2<f64> {
    u.mapv(|v| if v >= 0.0 { hi } else { lo })
}

fn check_size(op: &'static str, s: usize) -> Result<()> {
    if s == 0 {
        return Err(Error::Config {
            what: format!("{op}: size"),
            msg: "must be at least 1".into(),
        });
    }
    Ok(())
}

/// The two coefficient levels must be usable conductivities.
pub(crate) fn check_levels(hi: f64, lo: f64) -> Result<()> {
    for (what, v) in [("hi", hi), ("lo", lo)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::Config {
                what: what.into(),
                msg: format!("coefficient level must be finite and positive, got {v}"),
            });
        }
    }
    Ok(())
}
