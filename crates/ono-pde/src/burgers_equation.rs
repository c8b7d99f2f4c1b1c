//! The Burgers generator of the FNO benchmark (`burgers_data_R10.mat`): viscous Burgers on the
//! periodic unit interval,
//!
//! ```text
//! ∂t u + ∂x(u²/2) = ν ∂xx u,   x ∈ [0, 1) periodic,   ν = 0.1,
//! ```
//!
//! mapping `u0 = u(·, 0)` to `u(·, 1)`, both sampled at `x_j = j/s`, `s = 8192`.
//!
//! # Initial condition (`GRF1.m`)
//!
//! `GRF1(N = s/2, m = 0, γ = 2, τ = 5, σ = 25, "periodic")` is a draw from
//! `N(m, σ²(−Δ + τ²)^{−γ})` truncated to the modes `1..=N` (the mean mode is the constant `m`):
//!
//! ```text
//! u0(x) = m + Σ_{k=1}^{N} √2 σ ((2πk)² + τ²)^{−γ/2} (ξ_k cos 2πkx + η_k sin 2πkx),
//! ```
//!
//! with `ξ, η` i.i.d. standard normal. MATLAB builds this as a chebfun with coefficients on
//! `e^{iπk(2x−1)}` and then evaluates it at `x − ½`; the two half-period shifts cancel. The normals are
//! drawn as `GRF1.m` does (all `N` cosine normals, then all `N` sine normals), from a ChaCha8 stream
//! instead of MATLAB's Mersenne twister, so the law is the same but not the sample paths. At the
//! Nyquist mode `k = s/2` the sine vanishes at the grid points and only `ξ_{s/2}` shows. (MATLAB
//! rebuilds the shifted chebfun adaptively, which may chop coefficients below machine precision
//! relative to the largest; all modes are kept here, a difference at the 1e-16 level.)
//!
//! # Solver (`burgers1.m`: chebfun `spin`)
//!
//! `spin` with `S.lin = ν u''`, `S.nonlin = −½ (u²)'` on `[0, 1]`, `s` points and its default
//! scheme, ETDRK4 (Cox–Matthews; the Kassam–Trefethen formulation), is reproduced step by step:
//!
//! * Fourier pseudo-spectral state `v̂ = fft(u)` (real-to-complex FFTs here; `spin` uses complex
//!   ones and drops the round-off imaginary part at output); linear part `L_k = −ν(2πk)²` (also at the Nyquist
//!   mode); nonlinear part `N(v̂) = −½ · i2πk · fft(ifft(v̂)²)` with the Nyquist wavenumber of the
//!   first derivative set to zero (chebfun's `trigspec.diffmat` for an even `s`);
//! * no dealiasing (`spinpref` default `dealias = 'off'`); optional 2/3-rule as `spin`'s `'on'`,
//!   except that both `±k` are zeroed from `spin`'s positive-side cut (`spin` zeroes one positive
//!   wavenumber more than negative ones, which a real solution cannot represent);
//! * the φ-functions of the scheme are contour means over `M = 64` points of the upper unit
//!   half-circle around `h L_k` (`spinpref.M`, `computeLR` for a real `L`); on each contour point
//!   `φ_l` is evaluated by its Taylor series where `|w| < 1` and by the closed form elsewhere, so
//!   no point loses digits to cancellation; `e^{hL}` and `e^{hL/2}` are plain exponentials;
//! * time step `dt = 1e-4` (the value hard-coded in `burgers1.m` when R10 was produced); when `dt`
//!   does not divide `t_final` the step is shortened to `t_final / ⌈t_final/dt⌉` so that the last
//!   step lands on `t_final` (`spin` with a fixed step would overshoot).
//!
//! The mean mode has `L_0 = 0` and a zero nonlinear term, so the mean of `u` is conserved exactly.
//! With ν = 0.1 the solution is very smooth and the scheme is far more accurate than the data need:
//! against the Cole–Hopf solution the relative L2 error at t = 1 is ~5e-13
//! (tests/burgers_equation.rs), and on R10 samples dt = 1e-3 differs from dt = 1e-4 by ~1e-9
//! relative (examples/burgers_timing.rs).
//! Note the scale of the output: mode `k` decays like `e^{−ν(2πk)²t}`, so `u(·, 1)` is roughly 1/60 of
//! `u0` in amplitude (standard deviations ≈ 0.01 against ≈ 0.6).

use std::path::Path;
use std::sync::Arc;

use ndarray::Array2;
use ono_data::array::{ArrayData, NamedArray};
use ono_data::readers::mat_v5;
use rand::Rng;
use rand_distr::StandardNormal;
use realfft::num_complex::Complex;
use realfft::{ComplexToReal, RealFftPlanner, RealToComplex};
use serde::{Deserialize, Serialize};

pub use crate::darcy_flow::sample_rng;
use crate::{Error, Result};

type C64 = Complex<f64>;

/// Number of contour points for the φ-functions (chebfun `spinpref.M`).
pub const DEFAULT_CONTOUR_POINTS: usize = 64;

/// The most time steps one solve may take: a guard against a `dt` that would run for days.
pub const MAX_STEPS: usize = 100_000_000;

// ---------------------------------------------------------------------------------------------
// Initial condition: GRF1.m
// ---------------------------------------------------------------------------------------------

/// Parameters of the periodic Gaussian random field of `GRF1.m`: mean `m` and covariance
/// `σ²(−Δ + τ²)^{−γ}` on the periodic unit interval (the mean mode fixed to `m`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BurgersGrf {
    /// Smoothness exponent γ (2 for R10).
    pub gamma: f64,
    /// Inverse length scale τ (5 for R10).
    pub tau: f64,
    /// Amplitude σ (25 for R10: covariance `625(−Δ + 25 I)^{−2}`).
    pub sigma: f64,
    /// The mean `m` (0 for R10).
    pub mean: f64,
}

impl Default for BurgersGrf {
    fn default() -> Self {
        Self {
            gamma: 2.0,
            tau: 5.0,
            sigma: 25.0,
            mean: 0.0,
        }
    }
}

impl BurgersGrf {
    /// Refuses non-finite or non-positive γ and σ, a negative τ and a non-finite mean. τ = 0 is
    /// allowed: the mean mode, where it would make the covariance singular, is not random.
    pub fn validate(&self) -> Result<()> {
        for (what, v) in [("grf.gamma", self.gamma), ("grf.sigma", self.sigma)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config {
                    what: what.into(),
                    msg: format!("must be finite and positive, got {v}"),
                });
            }
        }
        if !(self.tau.is_finite() && self.tau >= 0.0) {
            return Err(Error::Config {
                what: "grf.tau".into(),
                msg: format!("must be finite and non-negative, got {}", self.tau),
            });
        }
        if !self.mean.is_finite() {
            return Err(Error::Config {
                what: "grf.mean".into(),
                msg: format!("must be finite, got {}", self.mean),
            });
        }
        Ok(())
    }

    /// Number of random Fourier modes on `n_points` grid points: `N = ⌊n_points/2⌋` (`GRF1(s/2, ...)`).
    pub fn n_modes(n_points: usize) -> usize {
        n_points / 2
    }

    /// Standard deviation of the cosine and of the sine coefficient of mode `k ≥ 1`:
    /// `√2 σ ((2πk)² + τ²)^{−γ/2}` (`my_eigs` of `GRF1.m`). Their variance is the covariance
    /// operator's eigenvalue on the L²-orthonormal `√2 cos 2πkx`, `√2 sin 2πkx`.
    pub fn mode_std(&self, k: usize) -> f64 {
        let kk = 2.0 * std::f64::consts::PI * k as f64;
        std::f64::consts::SQRT_2
            * self.sigma
            * (kk * kk + self.tau * self.tau).powf(-self.gamma / 2.0)
    }

    /// Precomputes what every sample on `n_points` grid points shares (amplitudes, FFT plan).
    pub fn sampler(&self, n_points: usize) -> Result<BurgersGrfSampler> {
        self.validate()?;
        if n_points < 2 {
            return Err(Error::Config {
                what: "BurgersGrf: n_points".into(),
                msg: format!("need at least 2 grid points, got {n_points}"),
            });
        }
        let n_modes = Self::n_modes(n_points);
        let stds = (1..=n_modes).map(|k| self.mode_std(k)).collect();
        let c2r = RealFftPlanner::<f64>::new().plan_fft_inverse(n_points);
        Ok(BurgersGrfSampler {
            n_points,
            stds,
            mean: self.mean,
            c2r,
        })
    }

    /// One initial condition on the grid `x_j = j/n_points`. Builds a [`BurgersGrfSampler`]; reuse
    /// one for many samples.
    pub fn sample<R: Rng + ?Sized>(&self, n_points: usize, rng: &mut R) -> Result<Vec<f64>> {
        self.sampler(n_points)?.sample(rng)
    }
}

/// A [`BurgersGrf`] prepared for one grid size.
#[derive(Clone)]
pub struct BurgersGrfSampler {
    n_points: usize,
    stds: Vec<f64>,
    mean: f64,
    c2r: Arc<dyn ComplexToReal<f64>>,
}

impl std::fmt::Debug for BurgersGrfSampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BurgersGrfSampler")
            .field("n_points", &self.n_points)
            .field("n_modes", &self.stds.len())
            .field("mean", &self.mean)
            .finish()
    }
}

impl BurgersGrfSampler {
    /// The grid size.
    pub fn n_points(&self) -> usize {
        self.n_points
    }

    /// One field on `x_j = j/n`. Draws `N` cosine normals and then `N` sine normals, in the order
    /// of `GRF1.m`; the sine normal of an even grid's Nyquist mode is drawn and has no effect.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Result<Vec<f64>> {
        let n = self.n_points;
        let n_modes = self.stds.len();
        let xi: Vec<f64> = (0..n_modes).map(|_| rng.sample(StandardNormal)).collect();
        let eta: Vec<f64> = (0..n_modes).map(|_| rng.sample(StandardNormal)).collect();
        // An unnormalised inverse real FFT gives Σ_k X_k e^{2πikj/n} over the Hermitian extension,
        // so X_k = (α_k − iβ_k)/2 yields α_k cos + β_k sin; the Nyquist entry appears only once.
        let mut spec = vec![C64::new(0.0, 0.0); n / 2 + 1];
        spec[0] = C64::new(self.mean, 0.0);
        for k in 1..=n_modes {
            let (alpha, beta) = (self.stds[k - 1] * xi[k - 1], self.stds[k - 1] * eta[k - 1]);
            spec[k] = if 2 * k == n {
                C64::new(alpha, 0.0)
            } else {
                C64::new(0.5 * alpha, -0.5 * beta)
            };
        }
        let mut out = vec![0.0; n];
        self.c2r
            .process(&mut spec, &mut out)
            .map_err(|e| Error::Invalid(format!("BurgersGrf: inverse FFT: {e}")))?;
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration and the public pipeline
// ---------------------------------------------------------------------------------------------

/// The Burgers data generator: grid, viscosity, time stepping, output stride and initial law.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BurgersConfig {
    /// Grid size `s` of the initial field and of the solver (8192 for R10).
    pub resolution: usize,
    /// Viscosity ν (0.1 for R10).
    pub nu: f64,
    /// Final time (1 for R10).
    pub t_final: f64,
    /// Time step; shortened to `t_final / ⌈t_final/dt⌉` where it does not divide `t_final`
    /// (1e-4, `burgers1.m` when R10 was produced).
    pub dt: f64,
    /// Stride of the stored grid: `a` and `u` keep every `subsample`-th point (1 for R10, whose
    /// users subsample when loading). Must divide `resolution`.
    pub subsample: usize,
    /// 2/3-rule dealiasing after every step (`spin`'s `dealias`; off for R10).
    pub dealias: bool,
    /// Contour points for the ETDRK4 φ-functions (`spinpref.M` = 64).
    pub contour_points: usize,
    /// Law of the initial condition.
    pub grf: BurgersGrf,
}

impl Default for BurgersConfig {
    fn default() -> Self {
        Self {
            resolution: 8192,
            nu: 0.1,
            t_final: 1.0,
            dt: 1e-4,
            subsample: 1,
            dealias: false,
            contour_points: DEFAULT_CONTOUR_POINTS,
            grf: BurgersGrf::default(),
        }
    }
}

impl BurgersConfig {
    /// Refuses a resolution below 4, a subsample of 0 or one that does not divide the resolution,
    /// a non-finite or non-positive ν, `t_final` or `dt`, more than [`MAX_STEPS`] steps, fewer
    /// than 8 contour points and a bad GRF.
    pub fn validate(&self) -> Result<()> {
        check_resolution(self.resolution)?;
        if self.subsample == 0 || !self.resolution.is_multiple_of(self.subsample) {
            return Err(Error::Config {
                what: "subsample".into(),
                msg: format!(
                    "must be a positive divisor of the resolution {}, got {}",
                    self.resolution, self.subsample
                ),
            });
        }
        self.grf.validate()?;
        self.check_solver()
    }

    fn check_solver(&self) -> Result<()> {
        for (what, v) in [("nu", self.nu), ("t_final", self.t_final), ("dt", self.dt)] {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config {
                    what: what.into(),
                    msg: format!("must be finite and positive, got {v}"),
                });
            }
        }
        self.steps()?;
        if self.contour_points < 8 {
            return Err(Error::Config {
                what: "contour_points".into(),
                msg: format!(
                    "need at least 8 for accurate φ-functions, got {}",
                    self.contour_points
                ),
            });
        }
        Ok(())
    }

    /// The number of time steps and the step actually used: `n = ⌈t_final/dt⌉` (a `dt` within
    /// 1e-9 relative of dividing `t_final` counts as dividing it) and `h = t_final/n`.
    pub fn steps(&self) -> Result<(usize, f64)> {
        let ratio = self.t_final / self.dt;
        if !(ratio.is_finite() && ratio <= MAX_STEPS as f64) {
            return Err(Error::Config {
                what: "dt".into(),
                msg: format!("t_final/dt = {ratio} steps; at most {MAX_STEPS} are allowed"),
            });
        }
        // Rounding slack: 1/1e-4 is 10000.000000000002 in floating point.
        let n = ((ratio * (1.0 - 1e-9)).ceil() as usize).max(1);
        Ok((n, self.t_final / n as f64))
    }

    /// Precomputes the scheme for `n_points` grid points (FFT plans and ETDRK4 coefficients).
    /// Only `nu`, `t_final`, `dt`, `dealias` and `contour_points` are used.
    pub fn solver(&self, n_points: usize) -> Result<BurgersSolver> {
        self.check_solver()?;
        check_resolution(n_points)?;
        BurgersSolver::new(self, n_points)
    }

    /// `u(·, t_final)` on the same grid as `u0` (`x_j = j/n`, `n = u0.len()`, which need not equal
    /// `resolution`). Builds a [`BurgersSolver`]; reuse one for many solves.
    pub fn solve(&self, u0: &[f64]) -> Result<Vec<f64>> {
        self.check_solver()?;
        check_resolution(u0.len())?;
        self.solver(u0.len())?.solve(u0)
    }

    /// Sample `index` of the stream `seed`: `(a, u)` on the stored grid (every `subsample`-th
    /// point). Identical to row `index` of [`generate`](Self::generate) with the same seed.
    pub fn sample(&self, seed: u64, index: u64) -> Result<(Vec<f64>, Vec<f64>)> {
        self.validate()?;
        let sampler = self.grf.sampler(self.resolution)?;
        let solver = self.solver(self.resolution)?;
        self.sample_with(&sampler, &solver, seed, index)
    }

    fn sample_with(
        &self,
        sampler: &BurgersGrfSampler,
        solver: &BurgersSolver,
        seed: u64,
        index: u64,
    ) -> Result<(Vec<f64>, Vec<f64>)> {
        let mut rng = sample_rng(seed, index);
        let u0 = sampler.sample(&mut rng)?;
        let u1 = solver.solve(&u0)?;
        let pick = |v: &[f64]| v.iter().step_by(self.subsample).copied().collect();
        Ok((pick(&u0), pick(&u1)))
    }

    /// `n` samples `(a, u)`, each of shape `(n, resolution/subsample)`: `a` the initial condition
    /// and `u` the solution at `t_final`. Sample `i` draws from [`sample_rng`]`(seed, i)`, so the
    /// data depend only on `(seed, i)` and not on the number of worker threads (one per available
    /// core). The first failing sample's error is returned.
    pub fn generate(&self, n: usize, seed: u64) -> Result<(Array2<f64>, Array2<f64>)> {
        self.generate_with_threads(n, seed, 0)
    }

    /// [`generate`](Self::generate) on `threads` worker threads (0: one per available core).
    /// The result does not depend on `threads`.
    pub fn generate_with_threads(
        &self,
        n: usize,
        seed: u64,
        threads: usize,
    ) -> Result<(Array2<f64>, Array2<f64>)> {
        self.generate_with_progress(n, seed, threads, |_, _| {})
    }

    /// [`generate_with_threads`](Self::generate_with_threads), calling `progress(done, n)` from
    /// the worker threads as samples finish (in any order).
    pub fn generate_with_progress(
        &self,
        n: usize,
        seed: u64,
        threads: usize,
        progress: impl Fn(usize, usize) + Sync,
    ) -> Result<(Array2<f64>, Array2<f64>)> {
        self.validate()?;
        let s_out = self.resolution / self.subsample;
        if n.checked_mul(s_out)
            .is_none_or(|len| len > isize::MAX as usize / 8)
        {
            return Err(Error::Config {
                what: "n".into(),
                msg: format!("{n} samples of {s_out} points do not fit in memory"),
            });
        }
        let mut a = Array2::<f64>::zeros((n, s_out));
        let mut u = Array2::<f64>::zeros((n, s_out));
        if n == 0 {
            return Ok((a, u));
        }
        let sampler = self.grf.sampler(self.resolution)?;
        let solver = self.solver(self.resolution)?;
        let samples = crate::parallel::map_indexed_with_progress(
            n,
            threads,
            |i| self.sample_with(&sampler, &solver, seed, i as u64),
            progress,
        )?;
        for (i, (ai, ui)) in samples.into_iter().enumerate() {
            a.row_mut(i).assign(&ndarray::ArrayView1::from(&ai));
            u.row_mut(i).assign(&ndarray::ArrayView1::from(&ui));
        }
        Ok((a, u))
    }
}

/// Writes `a` and `u` as `burgers_data_R10.mat` stores them: a MAT v5 file with the float64
/// variables `a` and `u`, each `(samples, points)`, zlib-compressed per variable as MATLAB `save`
/// does. The file appears atomically (temporary file and rename, see [`mat_v5::write`]).
pub fn write_mat(path: &Path, a: &Array2<f64>, u: &Array2<f64>) -> Result<()> {
    if a.dim() != u.dim() {
        return Err(Error::Shape {
            op: "burgers_equation::write_mat",
            expected: format!("u of the shape of a, {:?}", a.shape()),
            got: u.shape().iter().map(|&d| d as i64).collect(),
        });
    }
    let named = |name: &str, x: &Array2<f64>| {
        // `iter` walks the logical row-major order whatever the memory layout.
        NamedArray::new(
            name,
            x.shape().to_vec(),
            ArrayData::F64(x.iter().copied().collect()),
        )
    };
    Ok(mat_v5::write(
        path,
        &[named("a", a)?, named("u", u)?],
        true,
    )?)
}

fn check_resolution(n: usize) -> Result<()> {
    if n < 4 {
        return Err(Error::Config {
            what: "resolution".into(),
            msg: format!("need at least 4 grid points, got {n}"),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The ETDRK4 pseudo-spectral solver
// ---------------------------------------------------------------------------------------------

/// The `spin` ETDRK4 scheme prepared for one grid size and step: FFT plans and the per-mode
/// coefficients. Shared by reference between threads; each solve allocates its own buffers.
#[derive(Clone)]
pub struct BurgersSolver {
    n: usize,
    steps: usize,
    h: f64,
    /// `e^{hL}` and `e^{hL/2}`.
    e: Vec<f64>,
    e2: Vec<f64>,
    /// `(h/2) φ1(hL/2)`: the stage weight of the nonlinear term.
    q: Vec<f64>,
    /// `h(φ1 − 3φ2 + 4φ3)`, `h(2φ2 − 4φ3)`, `h(4φ3 − φ2)`: the final-combination weights.
    b1: Vec<f64>,
    b23: Vec<f64>,
    b4: Vec<f64>,
    /// `−½ · 2πk / n²`: the factor `g` of `N̂ = i g · rfft((n·u)²)`, zero at the Nyquist mode. The
    /// `1/n²` undoes the unnormalised inverse FFT that produced `n·u`.
    g: Vec<f64>,
    /// First wavenumber zeroed by the 2/3 rule, if dealiasing.
    dealias_from: Option<usize>,
    r2c: Arc<dyn RealToComplex<f64>>,
    c2r: Arc<dyn ComplexToReal<f64>>,
}

impl std::fmt::Debug for BurgersSolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BurgersSolver")
            .field("n", &self.n)
            .field("steps", &self.steps)
            .field("h", &self.h)
            .field("dealias_from", &self.dealias_from)
            .finish()
    }
}

/// Buffers of one solve.
struct Work {
    spec: Vec<C64>,
    real: Vec<f64>,
    scratch: Vec<C64>,
}

impl BurgersSolver {
    fn new(cfg: &BurgersConfig, n: usize) -> Result<Self> {
        let (steps, h) = cfg.steps()?;
        let m = n / 2 + 1;
        let mut planner = RealFftPlanner::<f64>::new();
        let r2c = planner.plan_fft_forward(n);
        let c2r = planner.plan_fft_inverse(n);
        let two_pi = 2.0 * std::f64::consts::PI;
        let mut s = Self {
            n,
            steps,
            h,
            e: Vec::with_capacity(m),
            e2: Vec::with_capacity(m),
            q: Vec::with_capacity(m),
            b1: Vec::with_capacity(m),
            b23: Vec::with_capacity(m),
            b4: Vec::with_capacity(m),
            g: Vec::with_capacity(m),
            dealias_from: cfg.dealias.then(|| n / 2 - n.div_ceil(6)),
            r2c,
            c2r,
        };
        let nn = (n as f64) * (n as f64);
        for k in 0..m {
            let kappa = two_pi * k as f64;
            let z = h * (-cfg.nu * kappa * kappa);
            let [p1h, _, _] = phi_contour(0.5 * z, cfg.contour_points);
            let [p1, p2, p3] = phi_contour(z, cfg.contour_points);
            s.e.push(z.exp());
            s.e2.push((0.5 * z).exp());
            s.q.push(0.5 * h * p1h);
            s.b1.push(h * (p1 - 3.0 * p2 + 4.0 * p3));
            s.b23.push(h * (2.0 * p2 - 4.0 * p3));
            s.b4.push(h * (4.0 * p3 - p2));
            let nyquist = n.is_multiple_of(2) && 2 * k == n;
            s.g.push(if nyquist { 0.0 } else { -0.5 * kappa / nn });
        }
        Ok(s)
    }

    /// The grid size this solver was prepared for.
    pub fn n_points(&self) -> usize {
        self.n
    }

    /// The number of steps and the step size used.
    pub fn steps(&self) -> (usize, f64) {
        (self.steps, self.h)
    }

    /// `u(·, t_final)` from `u0` on `x_j = j/n`. Refuses a wrong length or non-finite values with
    /// [`Error::Shape`] / [`Error::Invalid`], and a solution that blows up with [`Error::Solver`].
    pub fn solve(&self, u0: &[f64]) -> Result<Vec<f64>> {
        if u0.len() != self.n {
            return Err(Error::Shape {
                op: "BurgersSolver::solve",
                expected: format!("{} grid values", self.n),
                got: vec![u0.len() as i64],
            });
        }
        if u0.iter().any(|v| !v.is_finite()) {
            return Err(Error::Invalid(
                "BurgersSolver::solve: non-finite initial value".into(),
            ));
        }
        let m = self.n / 2 + 1;
        let zero = C64::new(0.0, 0.0);
        let mut w = Work {
            spec: vec![zero; m],
            real: u0.to_vec(),
            scratch: vec![zero; self.r2c.get_scratch_len().max(self.c2r.get_scratch_len())],
        };
        let mut v = vec![zero; m];
        self.r2c
            .process_with_scratch(&mut w.real, &mut v, &mut w.scratch)
            .map_err(fft_err)?;
        let (mut nv, mut na, mut nb, mut nc) =
            (vec![zero; m], vec![zero; m], vec![zero; m], vec![zero; m]);
        let (mut a, mut b, mut c) = (vec![zero; m], vec![zero; m], vec![zero; m]);
        for step in 0..self.steps {
            self.nonlinear(&v, &mut nv, &mut w)?;
            for k in 0..m {
                a[k] = v[k] * self.e2[k] + nv[k] * self.q[k];
            }
            self.nonlinear(&a, &mut na, &mut w)?;
            for k in 0..m {
                b[k] = v[k] * self.e2[k] + na[k] * self.q[k];
            }
            self.nonlinear(&b, &mut nb, &mut w)?;
            for k in 0..m {
                c[k] = a[k] * self.e2[k] + (nb[k] * 2.0 - nv[k]) * self.q[k];
            }
            self.nonlinear(&c, &mut nc, &mut w)?;
            for k in 0..m {
                v[k] = v[k] * self.e[k]
                    + nv[k] * self.b1[k]
                    + (na[k] + nb[k]) * self.b23[k]
                    + nc[k] * self.b4[k];
            }
            if let Some(from) = self.dealias_from {
                v[from..].fill(zero);
            }
            // A blow-up reaches every mode through the FFT of u², so one mode tells.
            let probe = v[1];
            if !(probe.re.is_finite() && probe.im.is_finite()) {
                return Err(Error::Solver {
                    solver: "Burgers ETDRK4",
                    msg: format!(
                        "non-finite solution at step {} of {} (t = {:.6}); reduce dt",
                        step + 1,
                        self.steps,
                        (step + 1) as f64 * self.h
                    ),
                });
            }
        }
        let mut out = vec![0.0; self.n];
        self.c2r
            .process_with_scratch(&mut v, &mut out, &mut w.scratch)
            .map_err(fft_err)?;
        let inv = 1.0 / self.n as f64;
        out.iter_mut().for_each(|x| *x *= inv);
        if out.iter().any(|x| !x.is_finite()) {
            return Err(Error::Solver {
                solver: "Burgers ETDRK4",
                msg: "non-finite solution at t_final; reduce dt".into(),
            });
        }
        Ok(out)
    }

    /// `N̂(v̂) = −½ · i2πk · fft(ifft(v̂)²)` (`spin`'s `Nc .* fft(Nv(ifft(c)))`).
    fn nonlinear(&self, v: &[C64], out: &mut [C64], w: &mut Work) -> Result<()> {
        w.spec.copy_from_slice(v);
        // The inverse real FFT needs real DC and Nyquist entries; the scheme keeps them real up to
        // a signed zero, so this only guards against round-off drift.
        w.spec[0].im = 0.0;
        if self.n.is_multiple_of(2) {
            let last = w.spec.len() - 1;
            w.spec[last].im = 0.0;
        }
        self.c2r
            .process_with_scratch(&mut w.spec, &mut w.real, &mut w.scratch)
            .map_err(fft_err)?;
        w.real.iter_mut().for_each(|x| *x *= *x);
        self.r2c
            .process_with_scratch(&mut w.real, out, &mut w.scratch)
            .map_err(fft_err)?;
        for (o, &g) in out.iter_mut().zip(&self.g) {
            *o = C64::new(-g * o.im, g * o.re);
        }
        Ok(())
    }
}

fn fft_err(e: realfft::FftError) -> Error {
    Error::Solver {
        solver: "Burgers FFT",
        msg: e.to_string(),
    }
}

/// `φ1, φ2, φ3` at the real `z` as Kassam–Trefethen contour means: the real part of the mean of
/// `φ_l(z + r_j)` over `r_j = e^{iπ(j − ½)/M}`, `j = 1..M` (the upper half of the unit circle, which
/// suffices for a real `z` by conjugate symmetry; chebfun `computeLR`).
fn phi_contour(z: f64, m: usize) -> [f64; 3] {
    let mut acc = [0.0; 3];
    for j in 0..m {
        let theta = std::f64::consts::PI * (j as f64 + 0.5) / m as f64;
        let p = phi_point(C64::new(z + theta.cos(), theta.sin()));
        for (a, v) in acc.iter_mut().zip(p) {
            *a += v.re;
        }
    }
    acc.map(|a| a / m as f64)
}

/// `φ1, φ2, φ3` at one complex point: the Taylor series of `φ3` inside the unit disc (the closed
/// forms cancel catastrophically near 0) and `φ1 = (e^w − 1)/w` outside; the others follow from
/// `φ_l(w) = 1/l! + w φ_{l+1}(w)`, in the direction that is stable in each region.
fn phi_point(w: C64) -> [C64; 3] {
    if w.norm() < 1.0 {
        // φ3(w) = Σ_m w^m/(m+3)!; 25 terms leave < 1/28! ≈ 3e-30 for |w| < 1.
        let mut p3 = C64::new(0.0, 0.0);
        for m in (0..25).rev() {
            p3 = p3 * w + 1.0 / factorial(m + 3);
        }
        let p2 = w * p3 + 0.5;
        let p1 = w * p2 + 1.0;
        [p1, p2, p3]
    } else {
        let p1 = (w.exp() - 1.0) / w;
        let p2 = (p1 - 1.0) / w;
        let p3 = (p2 - 0.5) / w;
        [p1, p2, p3]
    }
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|i| i as f64).product()
}
