//! The Navier–Stokes 2-D generator of the FNO benchmark (`data_generation/navier_stokes/ns_2d.py`
//! and `random_fields.py`), on tch so that it runs batched on CUDA when one is available.
//!
//! # The process
//!
//! Vorticity form on the unit torus,
//!
//! ```text
//! ∂_t w + u·∇w = ν Δw + f,   ∇·u = 0,   w(0) = w0,
//! f(x, y) = 0.1 (sin 2π(x + y) + cos 2π(x + y)),   x_j = j/s (meshgrid 'ij'),
//! ```
//!
//! solved pseudo-spectrally on `s × s` points (256 in the data set) in `rfft2` layout, `k_x` along
//! axis 0 and `k_y` along axis 1, both in FFT order (`0 … s/2−1, −s/2 … −1`; the last `rfft` column
//! carries `k_y = −s/2` as in `ns_2d.py`). Each step, as `ns_2d.py`:
//!
//! * `lap = 4π²(k_x² + k_y²)` with `lap(0,0) := 1`, `ψ̂ = ŵ/lap`;
//! * `u = ∂_yψ`, `v = −∂_xψ`, `w_x`, `w_y` spectrally (one batched `irfft2`);
//! * `N̂ = rfft2(u w_x + v w_y)`, dealiased by the 2/3 rule (`|k_x|, |k_y| ≤ ⅔·⌊s/2⌋`);
//! * `ŵ ← [−Δt N̂ + Δt f̂ + (1 − ½Δt ν lap) ŵ] / (1 + ½Δt ν lap)`: Crank–Nicolson diffusion,
//!   forward-Euler advection and forcing. The scheme is therefore first order in `Δt` overall
//!   (second order without advection, also with the constant forcing, for which the update is
//!   exactly the trapezoidal rule).
//!
//! The data set uses `ν = 1e-5`, `Δt = 1e-4`, `T = 20` (200 000 steps), snapshots at
//! `t = 1, 2, …, 20`, stored at 64 × 64 by striding the 256² fields `[::4, ::4]`; `a` is `w0`
//! strided the same way ([`NsConfig::default`]).
//!
//! # Initial condition and the amplitude trap
//!
//! `w0 = Re(ifft2(sqrt_eig ⊙ ξ))` with `sqrt_eig(k) = s²·√2·σ·(4π²|k|² + τ²)^{−α/2}`,
//! `sqrt_eig(0,0) = 0`, `α = 2.5`, `τ = 7`, `σ = τ^{(2α−2)/2} = 7^{1.5}` ([`NsGrf`]). The 2020 code
//! that produced the data set drew the real and imaginary parts of `ξ` as independent `N(0, 1)`
//! ([`Amplitude::Dataset2020`], the default); today's `random_fields.py` draws complex `randn`, whose
//! parts have variance ½, and its fields are √2 smaller ([`Amplitude::ComplexRandn`]). In terms of
//! the `rfft2` of a sample, `E|ŵ0(k)|²/s⁴ = c·σ²(4π²|k|² + τ²)^{−α}` with `c = 2` for the data set's
//! convention and `c = 1` for complex `randn` ([`NsGrf::mode_variance`]); the pointwise standard
//! deviation of `w0` is 0.262 with the data set's convention (0.185 with complex `randn`).
//!
//! The normals of sample `i` come from [`sample_rng`]`(seed, i)` on the CPU (interleaved real,
//! imaginary, in row-major order of `(k_x, k_y)`, as `torch.randn(N, s, s, 2)` lays them out) and
//! the field is built on the CPU in float64 before it is moved to the solver's device, so a sample
//! depends only on `(seed, i)` and is bit-identical on every device. The same normals serve both
//! conventions: a [`Amplitude::ComplexRandn`] field is the [`Amplitude::Dataset2020`] field of the
//! same `(seed, i)` divided by √2.
//!
//! # Determinism of the trajectories
//!
//! The flow at `ν = 1e-5` is chaotic: round-off differences (float32 against float64, CPU against
//! CUDA FFTs) grow over `T = 20`, so trajectories are reproducible bit for bit only on the same
//! device, precision, batch size and thread count (MKL's and cuFFT's algorithms depend on the
//! last two); other batchings agree to round-off at short horizons (tested) and in their
//! statistics at `T = 20`.
//!
//! # Cost and the reduced profile
//!
//! The full profile (256², `Δt = 1e-4`) costs about 7.6 s of one CPU core per sample and simulated
//! time unit, 2.5 min per sample for `T = 20` (`examples/ns_timing.rs`); it is meant for CUDA,
//! where an H100 makes 100 samples in 2 min (`docs/benchmarks.md`). [`NsConfig::reduced`] is the
//! CPU profile: the same scheme and initial-condition law solved directly at 64² (stride 1), the GRF drawn at 256²
//! with the same `(seed, i)` streams and Fourier-truncated to 64², so that a reduced sample starts
//! from (the resolved part of) the full profile's initial condition. Its deviation from the full
//! profile is measured by `examples/ns_timing.rs deviation` and documented in `docs/`.

use std::f64::consts::{PI, SQRT_2};
use std::path::Path;

use ono_data::array::{ArrayData, NamedArray};
use ono_data::readers::mat_v5;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

pub use crate::darcy_flow::sample_rng;
use crate::{Error, Result};

// ---------------------------------------------------------------------------------------------
// The initial-condition law
// ---------------------------------------------------------------------------------------------

/// How the complex normals of the initial-condition GRF are scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amplitude {
    /// Real and imaginary parts independent `N(0, 1)` (the 2020 code that produced
    /// `NavierStokes_V1e-5_N1200_T20.mat`).
    #[default]
    Dataset2020,
    /// Complex `randn`, each part of variance ½ (today's `random_fields.py`): fields √2 smaller.
    ComplexRandn,
}

impl Amplitude {
    /// `E|ξ|²` of one complex normal: 2 or 1.
    pub fn complex_variance(self) -> f64 {
        match self {
            Amplitude::Dataset2020 => 2.0,
            Amplitude::ComplexRandn => 1.0,
        }
    }

    /// The factor applied to the `N(0, 1)` draws.
    fn scale(self) -> f64 {
        match self {
            Amplitude::Dataset2020 => 1.0,
            Amplitude::ComplexRandn => std::f64::consts::FRAC_1_SQRT_2,
        }
    }
}

/// The periodic Gaussian random field of the initial vorticity (`GaussianRF(2, s, alpha, tau)` of
/// `random_fields.py`): covariance `σ²(−Δ + τ²)^{−α}` up to the [`Amplitude`] convention.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NsGrf {
    /// Smoothness exponent α (2.5 in the data set).
    pub alpha: f64,
    /// Inverse length scale τ (7 in the data set).
    pub tau: f64,
    /// Amplitude σ; `None` means `τ^{(2α−d)/2}` with `d = 2` (`7^{1.5} ≈ 18.52` in the data set).
    pub sigma: Option<f64>,
    /// Scaling of the complex normals.
    pub amplitude: Amplitude,
}

impl Default for NsGrf {
    fn default() -> Self {
        Self {
            alpha: 2.5,
            tau: 7.0,
            sigma: None,
            amplitude: Amplitude::Dataset2020,
        }
    }
}

impl NsGrf {
    /// Refuses non-finite or non-positive α, τ and σ.
    pub fn validate(&self) -> Result<()> {
        let mut checks = vec![("grf.alpha", self.alpha), ("grf.tau", self.tau)];
        if let Some(s) = self.sigma {
            checks.push(("grf.sigma", s));
        }
        for (what, v) in checks {
            if !(v.is_finite() && v > 0.0) {
                return Err(Error::Config {
                    what: what.into(),
                    msg: format!("must be finite and positive, got {v}"),
                });
            }
        }
        Ok(())
    }

    /// σ, with the default `τ^{(2α−2)/2}` filled in.
    pub fn sigma_value(&self) -> f64 {
        self.sigma
            .unwrap_or_else(|| self.tau.powf((2.0 * self.alpha - 2.0) / 2.0))
    }

    /// The expected power `E|ŵ0(k)|²/s⁴` of one `rfft2` coefficient of a sample, for a wavevector
    /// `k ≠ 0` that is not its own negative on the grid: `c·σ²(4π²|k|² + τ²)^{−α}` with
    /// `c` = [`Amplitude::complex_variance`]. (Self-conjugate modes, `k ≡ −k mod s`, hold half of
    /// it; the mean mode holds nothing.) Grid-independent: the FFT's `s²` is divided out.
    pub fn mode_variance(&self, kx: f64, ky: f64) -> f64 {
        let sigma = self.sigma_value();
        self.amplitude.complex_variance()
            * sigma
            * sigma
            * (4.0 * PI * PI * (kx * kx + ky * ky) + self.tau * self.tau).powf(-self.alpha)
    }

    /// The spectral amplitudes `s²·√2·σ·(4π²|k|² + τ²)^{−α/2}` with `(0,0)` zeroed, in full FFT
    /// order on both axes.
    ///
    /// # Shapes
    /// - returns: (s, s), float64, CPU
    pub fn sqrt_eig(&self, s: usize) -> Result<Tensor> {
        self.validate()?;
        check_even("grf resolution", s)?;
        let k = fft_wavenumbers(s);
        let s2 = (s * s) as f64;
        let pre = s2 * SQRT_2 * self.sigma_value();
        let mut v = Vec::with_capacity(s * s);
        for &kx in &k {
            for &ky in &k {
                let lam = 4.0 * PI * PI * (kx * kx + ky * ky) + self.tau * self.tau;
                v.push(pre * lam.powf(-self.alpha / 2.0));
            }
        }
        v[0] = 0.0;
        Ok(Tensor::from_slice(&v).f_reshape([s as i64, s as i64])?)
    }

    /// Samples `first, first + 1, …, first + count − 1` of the stream `seed` on an `s × s` grid:
    /// `Re(ifft2(sqrt_eig ⊙ ξ))`, computed on the CPU in float64 so that sample `i` depends only on
    /// `(seed, i)`, whatever the batch it is drawn in and the device it is solved on.
    ///
    /// # Shapes
    /// - returns: (count, s, s), float64, CPU
    pub fn sample(&self, s: usize, seed: u64, first: u64, count: usize) -> Result<Tensor> {
        let eig = self.sqrt_eig(s)?;
        first
            .checked_add(count as u64)
            .ok_or_else(|| Error::Config {
                what: "sample index".into(),
                msg: format!("{first} + {count} overflows u64"),
            })?;
        let per = 2 * s * s;
        let scale = self.amplitude.scale();
        let mut xi = vec![0.0f64; count * per];
        for (b, chunk) in xi.chunks_mut(per).enumerate() {
            let mut rng = sample_rng(seed, first + b as u64);
            for v in chunk.iter_mut() {
                let z: f64 = rng.sample(StandardNormal);
                *v = scale * z;
            }
        }
        let si = s as i64;
        let xi = Tensor::from_slice(&xi)
            .f_reshape([count as i64, si, si, 2])?
            .f_view_as_complex()?;
        let coeff = xi.f_mul(&eig)?;
        Ok(coeff
            .f_fft_ifft2(None::<&[i64]>, [-2, -1], "backward")?
            .f_real()?
            .f_contiguous()?)
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------

/// The right-hand side `f` of the vorticity equation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Forcing {
    /// `0.1 (sin 2π(x + y) + cos 2π(x + y))`, as the data set.
    #[default]
    Fno,
    /// `f = 0` (free decay; used by the validation tests).
    None,
}

/// The time integrator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeScheme {
    /// `ns_2d.py`'s scheme: Crank–Nicolson diffusion with forward-Euler advection and forcing,
    /// first order; stable only at small steps (the data set's Δt = 1e-4).
    #[default]
    CrankNicolsonEuler,
    /// Integrating-factor (Lawson) fourth-order Runge–Kutta: diffusion exactly through
    /// `e^{−νλΔt}`, advection and forcing by classical RK4. Four nonlinear evaluations per step,
    /// but stable at steps about a hundred times larger (advective CFL, not Euler's
    /// instability), so a trajectory costs a small fraction of the reference scheme's at the
    /// same accuracy ([`NsConfig::reduced`]).
    IfRk4,
}

/// The Navier–Stokes generator: grid, physics, time stepping, storage and where it runs.
///
/// [`NsConfig::default`] is the data set's profile (256², `ν = 1e-5`, `Δt = 1e-4`, `T = 20`,
/// snapshots every time unit, stored 64² by stride 4, float32); [`NsConfig::reduced`] the CPU
/// profile. `device` and `kind` are not serialized (they select where and in which precision the
/// same process runs; a deserialized config gets CPU and float32).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NsConfig {
    /// Solver grid size `s` (even; 256 in the data set).
    pub resolution: usize,
    /// Viscosity ν.
    pub nu: f64,
    /// Time step Δt.
    pub dt: f64,
    /// The time integrator (default: `ns_2d.py`'s scheme, the published data's).
    pub scheme: TimeScheme,
    /// Final time T; must be a whole number of snapshot intervals.
    pub t_final: f64,
    /// Time between snapshots; must be a whole number of steps. Snapshots are taken at
    /// `record_every_time, 2·record_every_time, …, t_final` (not at `t = 0`).
    pub record_every_time: f64,
    /// Stored fields keep every `stride`-th point in both directions (`[::stride, ::stride]`).
    pub stride: usize,
    /// Right-hand side of the vorticity equation.
    pub forcing: Forcing,
    /// Law of the initial vorticity.
    pub grf: NsGrf,
    /// Grid on which the initial condition is drawn; `None` means `resolution`. A finer grid is
    /// Fourier-truncated to `resolution` ([`fourier_resample`]), so that a coarse profile starts
    /// from the resolved part of the fine profile's sample `(seed, i)`.
    pub grf_resolution: Option<usize>,
    /// Samples solved together by [`NsConfig::generate`] (20 in `ns_2d.py`).
    pub batch_size: usize,
    /// Where the solver runs.
    #[serde(skip)]
    pub device: Device,
    /// Solver precision: `Kind::Float` (as the data set) or `Kind::Double` (validation).
    #[serde(skip)]
    pub kind: Kind,
}

impl Default for NsConfig {
    fn default() -> Self {
        Self {
            resolution: 256,
            nu: 1e-5,
            dt: 1e-4,
            scheme: TimeScheme::CrankNicolsonEuler,
            t_final: 20.0,
            record_every_time: 1.0,
            stride: 4,
            forcing: Forcing::Fno,
            grf: NsGrf::default(),
            grf_resolution: None,
            batch_size: 20,
            device: Device::Cpu,
            kind: Kind::Float,
        }
    }
}

impl NsConfig {
    /// The data set's profile ([`NsConfig::default`]) on `device`.
    pub fn fno(device: Device) -> Self {
        Self {
            device,
            ..Self::default()
        }
    }

    /// The reduced CPU profile: the full profile's physics and snapshots solved directly at 64²
    /// (stored at 64², stride 1), with the initial condition drawn at 256² and Fourier-truncated
    /// to 64² (same `(seed, i)` streams as the full profile), integrated by
    /// [`TimeScheme::IfRk4`] at Δt = 0.02. At 64² that step agrees with `ns_2d.py`'s scheme at
    /// Δt = 1e-4 to the float32 round-off floor of the flow (tested) at about 1/40 of its cost;
    /// Δt = 0.04 also ran stably, so 0.02 keeps a factor two from the advective limit.
    /// [`NsConfig::reduced_reference_scheme`] is the same profile with `ns_2d.py`'s scheme.
    /// Batches of 20.
    pub fn reduced() -> Self {
        Self {
            scheme: TimeScheme::IfRk4,
            dt: 0.02,
            ..Self::reduced_reference_scheme()
        }
    }

    /// [`NsConfig::reduced`] with the full profile's scheme and Δt = 1e-4 (the reduced
    /// profile before the integrating-factor scheme; its reference).
    pub fn reduced_reference_scheme() -> Self {
        Self {
            resolution: 64,
            stride: 1,
            grf_resolution: Some(256),
            ..Self::default()
        }
    }

    /// Refuses an odd or tiny resolution, a stride that does not divide it, negative ν, a
    /// non-positive Δt, final time or snapshot interval, a snapshot interval that is not a whole
    /// number of steps or does not divide the final time, an empty batch, a precision other than
    /// float32/float64, an unavailable CUDA device and a bad GRF. Every refusal is
    /// [`Error::Config`] naming the field.
    pub fn validate(&self) -> Result<()> {
        check_even("resolution", self.resolution)?;
        if self.stride == 0 || !self.resolution.is_multiple_of(self.stride) {
            return Err(cfg_err(
                "stride",
                format!(
                    "must be at least 1 and divide the resolution {}, got {}",
                    self.resolution, self.stride
                ),
            ));
        }
        if !(self.nu.is_finite() && self.nu >= 0.0) {
            return Err(cfg_err(
                "nu",
                format!("must be finite and ≥ 0, got {}", self.nu),
            ));
        }
        for (what, v) in [
            ("dt", self.dt),
            ("t_final", self.t_final),
            ("record_every_time", self.record_every_time),
        ] {
            if !(v.is_finite() && v > 0.0) {
                return Err(cfg_err(
                    what,
                    format!("must be finite and positive, got {v}"),
                ));
            }
        }
        whole_ratio("record_every_time", self.record_every_time, self.dt, "dt")?;
        whole_ratio(
            "t_final",
            self.t_final,
            self.record_every_time,
            "record_every_time",
        )?;
        if self.batch_size == 0 {
            return Err(cfg_err("batch_size", "must be at least 1".into()));
        }
        if !matches!(self.kind, Kind::Float | Kind::Double) {
            return Err(cfg_err(
                "kind",
                format!("must be Float or Double, got {:?}", self.kind),
            ));
        }
        if let Device::Cuda(i) = self.device {
            let n = tch::Cuda::device_count();
            if !tch::Cuda::is_available() || i as i64 >= n {
                return Err(cfg_err(
                    "device",
                    format!("CUDA device {i} is not available ({n} visible)"),
                ));
            }
        }
        if let Some(g) = self.grf_resolution {
            check_even("grf_resolution", g)?;
        }
        self.grf.validate()
    }

    /// Solver steps between two snapshots.
    pub fn steps_per_frame(&self) -> usize {
        (self.record_every_time / self.dt).round() as usize
    }

    /// Snapshots per trajectory (20 in the data set).
    pub fn n_frames(&self) -> usize {
        (self.t_final / self.record_every_time).round() as usize
    }

    /// Side of the stored fields, `resolution / stride` (64 in the data set).
    pub fn stored_resolution(&self) -> usize {
        self.resolution / self.stride.max(1)
    }

    /// The snapshot times `record_every_time · (1, 2, …, n_frames)` (the data set's `t`).
    pub fn times(&self) -> Vec<f64> {
        (1..=self.n_frames())
            .map(|k| k as f64 * self.record_every_time)
            .collect()
    }

    /// Integrates a batch of initial vorticities and returns the strided snapshots.
    /// `w0` may live on any device and have any float kind; it is moved to `self.device` and
    /// `self.kind`. The time loop reads nothing back to the host; the result is checked for
    /// NaN/Inf once at the end ([`Error::Solver`] when the integration blew up).
    ///
    /// # Shapes
    /// - `w0`: (B, s, s) with `s = resolution`
    /// - returns: (B, s/stride, s/stride, n_frames) on `self.device`, `self.kind`
    pub fn solve(&self, w0: &Tensor) -> Result<Tensor> {
        let solver = NsSolver::new(self)?;
        solver.solve(w0)
    }

    /// `n` samples of the stream `seed`, solved in batches of `batch_size`: initial conditions `a`
    /// (`w0` strided like the snapshots) and snapshots `u`. Sample `i` uses [`sample_rng`]`(seed,
    /// i)`, so the initial conditions do not depend on the batching; see the module docs for the
    /// trajectories. Cast to float32 (or use [`NsConfig::write_mat`]) for the data set's dtype.
    ///
    /// # Shapes
    /// - returns: `a` (n, s/stride, s/stride), `u` (n, s/stride, s/stride, n_frames); CPU,
    ///   `self.kind`
    pub fn generate(&self, n: usize, seed: u64) -> Result<(Tensor, Tensor)> {
        self.generate_with_progress(n, seed, |_, _| {})
    }

    /// [`NsConfig::generate`], calling `progress(done, total)` after every snapshot of every
    /// batch, in sample-snapshots: `total = n · n_frames`.
    pub fn generate_with_progress(
        &self,
        n: usize,
        seed: u64,
        mut progress: impl FnMut(usize, usize),
    ) -> Result<(Tensor, Tensor)> {
        self.validate()?;
        let solver = NsSolver::new(self)?;
        let s = self.resolution;
        let s_grf = self.grf_resolution.unwrap_or(s);
        let r = self.stride as i64;
        let (mut a_parts, mut u_parts) = (Vec::new(), Vec::new());
        let mut done = 0usize;
        while done < n {
            let b = self.batch_size.min(n - done);
            let w0 = self.grf.sample(s_grf, seed, done as u64, b)?;
            let w0 = if s_grf == s {
                w0
            } else {
                fourier_resample(&w0, s)?
            };
            let w0 = w0.f_to_kind(self.kind)?;
            let frames = self.n_frames();
            let u = solver
                .solve_with_progress(&w0, |k| progress(done * frames + b * k, n * frames))?
                .f_to_device(Device::Cpu)?;
            let a = stride2(&w0, r)?;
            a_parts.push(a);
            u_parts.push(u);
            done += b;
        }
        let m = self.stored_resolution() as i64;
        if n == 0 {
            let opts = (self.kind, Device::Cpu);
            return Ok((
                Tensor::f_zeros([0, m, m], opts)?,
                Tensor::f_zeros([0, m, m, self.n_frames() as i64], opts)?,
            ));
        }
        Ok((Tensor::f_cat(&a_parts, 0)?, Tensor::f_cat(&u_parts, 0)?))
    }

    /// Writes `a` and `u` in the layout of `NavierStokes_V1e-5_N1200_T20.mat`: an uncompressed MAT
    /// v5 file (as `scipy.io.savemat`) with float32 variables `a` (N, H, W), `u` (N, H, W, F) and
    /// `t` (1, F) = [`NsConfig::times`] (1, 2, …, 20 for the data set). The file appears
    /// atomically (temporary sibling, then rename).
    ///
    /// # Shapes
    /// - `a`: (N, H, W); `u`: (N, H, W, F) with `F = n_frames`
    pub fn write_mat(&self, path: &Path, a: &Tensor, u: &Tensor) -> Result<()> {
        let (sa, su) = (a.size(), u.size());
        if sa.len() != 3 {
            return Err(Error::Shape {
                op: "NsConfig::write_mat",
                expected: "a of shape (N, H, W)".into(),
                got: sa,
            });
        }
        let frames = self.n_frames() as i64;
        if su.len() != 4 || su[..3] != sa[..] || su[3] != frames {
            return Err(Error::Shape {
                op: "NsConfig::write_mat",
                expected: format!("u of shape ({}, {}, {}, {frames})", sa[0], sa[1], sa[2]),
                got: su,
            });
        }
        let to_f32 = |t: &Tensor| -> Result<Vec<f32>> {
            let flat = t
                .f_to_device(Device::Cpu)?
                .f_to_kind(Kind::Float)?
                .f_contiguous()?
                .f_reshape([-1])?;
            Ok(Vec::<f32>::try_from(&flat)?)
        };
        let dims = |v: &[i64]| v.iter().map(|&d| d as usize).collect::<Vec<_>>();
        let times: Vec<f32> = self.times().iter().map(|&t| t as f32).collect();
        let arrays = [
            NamedArray::new("a", dims(&sa), ArrayData::F32(to_f32(a)?))?,
            NamedArray::new("u", dims(&su), ArrayData::F32(to_f32(u)?))?,
            NamedArray::new("t", vec![1, times.len()], ArrayData::F32(times))?,
        ];
        Ok(mat_v5::write(path, &arrays, false)?)
    }
}

// ---------------------------------------------------------------------------------------------
// The solver
// ---------------------------------------------------------------------------------------------

/// The spectral operators of one [`NsConfig`] on its device, precomputed once: what
/// [`NsConfig::solve`] runs, exposed for validation and diagnostics.
///
/// The state is `ŵ = rfft2(w)`, shape (B, s, s/2 + 1), complex of the config's precision.
#[derive(Debug)]
pub struct NsSolver {
    cfg: NsConfig,
    /// `[i2πk_y/lap, −i2πk_x/lap, i2πk_x, i2πk_y]`, (4, 1, s, s/2+1): `ŵ` times these gives
    /// `û, v̂, ŵ_x, ŵ_y` in one broadcast, so one batched `irfft2` serves all four.
    deriv: Tensor,
    /// The 2/3-rule mask, (s, s/2+1).
    dealias: Tensor,
    stepper: Stepper,
}

/// The per-scheme operators, each (s, s/2+1).
#[derive(Debug)]
enum Stepper {
    CrankNicolsonEuler {
        /// `(1 − ½Δtν lap)/(1 + ½Δtν lap)`.
        keep: Tensor,
        /// `−Δt · dealias/(1 + ½Δtν lap)`.
        adv: Tensor,
        /// `Δt f̂/(1 + ½Δtν lap)` (complex), or none without forcing.
        force: Option<Tensor>,
    },
    IfRk4 {
        /// `e^{−νλΔt/2}` and `e^{−νλΔt}` with the true `λ = 4π²|k|²` (0 for the mean mode).
        half: Tensor,
        full: Tensor,
        /// `−dealias`: the sign and mask of the advection term.
        adv: Tensor,
        /// `f̂` (complex), or none without forcing.
        force: Option<Tensor>,
    },
}

impl NsSolver {
    /// Validates `cfg` and builds its operators (in float64 on the CPU, then cast and moved, so
    /// that they are the same numbers on every device).
    pub fn new(cfg: &NsConfig) -> Result<Self> {
        cfg.validate()?;
        let s = cfg.resolution;
        let si = s as i64;
        let h = s / 2 + 1;
        let k = fft_wavenumbers(s);
        let k_max = (s / 2) as f64;
        let cut = 2.0 / 3.0 * k_max;
        let (mut lap, mut dealias) = (Vec::with_capacity(s * h), Vec::with_capacity(s * h));
        let mut deriv_im = vec![0.0f64; 4 * s * h];
        for (i, &kx) in k.iter().enumerate() {
            for (j, &ky) in k[..h].iter().enumerate() {
                let l = if i == 0 && j == 0 {
                    1.0
                } else {
                    4.0 * PI * PI * (kx * kx + ky * ky)
                };
                lap.push(l);
                dealias.push(if kx.abs() <= cut && ky.abs() <= cut {
                    1.0
                } else {
                    0.0
                });
                let at = i * h + j;
                deriv_im[at] = 2.0 * PI * ky / l;
                deriv_im[s * h + at] = -2.0 * PI * kx / l;
                deriv_im[2 * s * h + at] = 2.0 * PI * kx;
                deriv_im[3 * s * h + at] = 2.0 * PI * ky;
            }
        }
        let shape = [si, h as i64];
        let real = |v: &[f64]| -> Result<Tensor> {
            Ok(Tensor::from_slice(v)
                .f_reshape(shape)?
                .f_to_kind(cfg.kind)?
                .f_to_device(cfg.device)?)
        };
        let ckind = complex_kind(cfg.kind);
        let im = Tensor::from_slice(&deriv_im).f_reshape([4, 1, si, h as i64])?;
        let deriv = Tensor::f_complex(&im.f_zeros_like()?, &im)?
            .f_to_kind(ckind)?
            .f_to_device(cfg.device)?;
        // `scale · f̂ / denom` in float64 on the CPU, then cast and moved.
        let forcing = |scale: f64, denom: &[f64]| -> Result<Option<Tensor>> {
            Ok(match cfg.forcing {
                Forcing::None => None,
                Forcing::Fno => {
                    let denom = Tensor::from_slice(denom).f_reshape(shape)?;
                    let fh = fno_forcing(s)?
                        .f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?
                        .f_mul_scalar(scale)?
                        .f_div(&denom)?;
                    Some(fh.f_to_kind(ckind)?.f_to_device(cfg.device)?)
                }
            })
        };
        let stepper = match cfg.scheme {
            TimeScheme::CrankNicolsonEuler => {
                let half = 0.5 * cfg.dt * cfg.nu;
                let keep: Vec<f64> = lap
                    .iter()
                    .map(|&l| (1.0 - half * l) / (1.0 + half * l))
                    .collect();
                let adv: Vec<f64> = lap
                    .iter()
                    .zip(&dealias)
                    .map(|(&l, &m)| -cfg.dt * m / (1.0 + half * l))
                    .collect();
                let denom: Vec<f64> = lap.iter().map(|&l| half * l + 1.0).collect();
                Stepper::CrankNicolsonEuler {
                    keep: real(&keep)?,
                    adv: real(&adv)?,
                    force: forcing(cfg.dt, &denom)?,
                }
            }
            TimeScheme::IfRk4 => {
                // `lap(0,0) := 1` above only keeps ψ̂ = ŵ/lap finite; diffusion leaves the mean.
                let decay = |frac: f64| -> Vec<f64> {
                    lap.iter()
                        .enumerate()
                        .map(|(i, &l)| {
                            let l = if i == 0 { 0.0 } else { l };
                            (-cfg.nu * l * cfg.dt * frac).exp()
                        })
                        .collect()
                };
                let adv: Vec<f64> = dealias.iter().map(|&m| -m).collect();
                Stepper::IfRk4 {
                    half: real(&decay(0.5))?,
                    full: real(&decay(1.0))?,
                    adv: real(&adv)?,
                    force: forcing(1.0, &vec![1.0; lap.len()])?,
                }
            }
        };
        Ok(Self {
            cfg: *cfg,
            deriv,
            dealias: real(&dealias)?,
            stepper,
        })
    }

    /// The configuration the operators were built for.
    pub fn config(&self) -> &NsConfig {
        &self.cfg
    }

    /// `ŵ = rfft2(w)` on the solver's device and precision, after checking the shape.
    ///
    /// # Shapes
    /// - `w`: (B, s, s); returns (B, s, s/2 + 1) complex
    pub fn to_spectral(&self, w: &Tensor) -> Result<Tensor> {
        let w = self.prepare(w)?;
        Ok(w.f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?)
    }

    /// `w = irfft2(ŵ)` on the full `s × s` grid.
    ///
    /// # Shapes
    /// - `w_hat`: (B, s, s/2 + 1) complex; returns (B, s, s)
    pub fn to_physical(&self, w_hat: &Tensor) -> Result<Tensor> {
        let s = self.cfg.resolution as i64;
        Ok(w_hat.f_fft_irfft2(Some(&[s, s][..]), [-2, -1], "backward")?)
    }

    /// The dealiased advection term `u·∇w` of a vorticity field, in physical space (zero for any
    /// field made of one shell `|k| = const`, such as a Taylor–Green vortex).
    ///
    /// # Shapes
    /// - `w`: (B, s, s); returns (B, s, s)
    pub fn advection(&self, w: &Tensor) -> Result<Tensor> {
        let w_hat = self.to_spectral(w)?;
        let n_hat = self.nonlinear_hat(&w_hat)?.f_mul(&self.dealias)?;
        self.to_physical(&n_hat)
    }

    /// `rfft2(u w_x + v w_y)`, not yet dealiased.
    fn nonlinear_hat(&self, w_hat: &Tensor) -> Result<Tensor> {
        let s = self.cfg.resolution as i64;
        let fields = w_hat.f_unsqueeze(0)?.f_mul(&self.deriv)?.f_fft_irfft2(
            Some(&[s, s][..]),
            [-2, -1],
            "backward",
        )?;
        let nl = fields
            .f_select(0, 0)?
            .f_mul(&fields.f_select(0, 2)?)?
            .f_add(&fields.f_select(0, 1)?.f_mul(&fields.f_select(0, 3)?)?)?;
        Ok(nl.f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?)
    }

    /// One time step of the configured [`TimeScheme`] (see the module docs).
    ///
    /// # Shapes
    /// - `w_hat`: (B, s, s/2 + 1) complex; returns the same
    pub fn step(&self, w_hat: &Tensor) -> Result<Tensor> {
        match &self.stepper {
            Stepper::CrankNicolsonEuler { keep, adv, force } => {
                let n_hat = self.nonlinear_hat(w_hat)?;
                let next = w_hat.f_mul(keep)?.f_add(&n_hat.f_mul(adv)?)?;
                Ok(match force {
                    Some(f) => next.f_add(f)?,
                    None => next,
                })
            }
            Stepper::IfRk4 {
                half,
                full,
                adv,
                force,
            } => {
                // Lawson's RK4 on v = e^{νλt} ŵ: dv/dt = e^{νλt} N(e^{−νλt} v), written back
                // in ŵ so that only e^{−νλΔt/2} and e^{−νλΔt} are needed.
                let dt = self.cfg.dt;
                let rhs = |w: &Tensor| -> Result<Tensor> {
                    let n = self.nonlinear_hat(w)?.f_mul(adv)?;
                    Ok(match force {
                        Some(f) => n.f_add(f)?,
                        None => n,
                    })
                };
                let k1 = rhs(w_hat)?;
                let w_half = w_hat.f_mul(half)?;
                let k2 = rhs(&w_half.f_add(&k1.f_mul(half)?.f_mul_scalar(0.5 * dt)?)?)?;
                let k3 = rhs(&w_half.f_add(&k2.f_mul_scalar(0.5 * dt)?)?)?;
                let k4 = rhs(&w_hat
                    .f_mul(full)?
                    .f_add(&k3.f_mul(half)?.f_mul_scalar(dt)?)?)?;
                let mid = k2.f_add(&k3)?.f_mul(half)?.f_mul_scalar(2.0)?;
                let incr = k1.f_mul(full)?.f_add(&mid)?.f_add(&k4)?;
                Ok(w_hat.f_mul(full)?.f_add(&incr.f_mul_scalar(dt / 6.0)?)?)
            }
        }
    }

    /// [`NsConfig::solve`] with these operators.
    ///
    /// # Shapes
    /// - `w0`: (B, s, s); returns (B, s/stride, s/stride, n_frames)
    pub fn solve(&self, w0: &Tensor) -> Result<Tensor> {
        self.solve_with_progress(w0, |_| {})
    }

    /// [`NsSolver::solve`], calling `frame_done(k)` after snapshot `k` (1-based) is taken.
    ///
    /// # Shapes
    /// - `w0`: (B, s, s); returns (B, s/stride, s/stride, n_frames)
    pub fn solve_with_progress(
        &self,
        w0: &Tensor,
        mut frame_done: impl FnMut(usize),
    ) -> Result<Tensor> {
        let w0 = self.prepare(w0)?;
        // One host read before the loop: a NaN in the input would otherwise come back as a
        // "blow-up" of the solver.
        if !all_finite(&w0)? {
            return Err(Error::Invalid(
                "NsConfig::solve: the initial vorticity has NaN or Inf".into(),
            ));
        }
        let r = self.cfg.stride as i64;
        let per = self.cfg.steps_per_frame();
        let mut w_hat = w0.f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?;
        drop(w0);
        let mut frames = Vec::with_capacity(self.cfg.n_frames());
        for _ in 0..self.cfg.n_frames() {
            for _ in 0..per {
                w_hat = self.step(&w_hat)?;
            }
            frames.push(stride2(&self.to_physical(&w_hat)?, r)?);
            frame_done(frames.len());
        }
        let out = Tensor::f_stack(&frames, -1)?;
        if !all_finite(&out)? {
            return Err(Error::Solver {
                solver: "navier_stokes",
                msg: format!(
                    "non-finite vorticity by t = {} (ν = {}, Δt = {}, s = {}): the explicit \
                     advection is unstable at this step size",
                    self.cfg.t_final, self.cfg.nu, self.cfg.dt, self.cfg.resolution
                ),
            });
        }
        Ok(out)
    }

    /// Checks `(B, s, s)` and a float kind, and moves to the solver's device and precision.
    fn prepare(&self, w: &Tensor) -> Result<Tensor> {
        let s = self.cfg.resolution as i64;
        let size = w.size();
        if size.len() != 3 || size[1] != s || size[2] != s || size[0] == 0 {
            return Err(Error::Shape {
                op: "NsSolver",
                expected: format!("(B, {s}, {s}) with B ≥ 1"),
                got: size,
            });
        }
        if !w.is_floating_point() {
            return Err(Error::Invalid(format!(
                "NsSolver: the vorticity must be a real float tensor, got {:?}",
                w.kind()
            )));
        }
        Ok(w.f_to_device(self.cfg.device)?.f_to_kind(self.cfg.kind)?)
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// The FNO forcing `0.1 (sin 2π(x + y) + cos 2π(x + y))` on `x_j = j/s`, meshgrid 'ij' (x along
/// axis 0).
///
/// # Shapes
/// - returns: (s, s), float64, CPU
pub fn fno_forcing(s: usize) -> Result<Tensor> {
    check_even("resolution", s)?;
    let mut v = Vec::with_capacity(s * s);
    for i in 0..s {
        for j in 0..s {
            // Reduce the phase to [0, 1) in integers first so that sin/cos see small arguments.
            let p = 2.0 * PI * ((i + j) % s) as f64 / s as f64;
            v.push(0.1 * (p.sin() + p.cos()));
        }
    }
    Ok(Tensor::from_slice(&v).f_reshape([s as i64, s as i64])?)
}

/// Fourier resampling of periodic fields to an `s_out × s_out` grid: the modes
/// `|k_x|, |k_y| < min(s_in, s_out)/2` are kept (the smaller grid's Nyquist modes are dropped, so
/// the result is a real trigonometric polynomial on both grids) and the rest are zero. Downsampling
/// is a sharp spectral truncation, upsampling trigonometric interpolation.
///
/// # Shapes
/// - `w`: (B, s_in, s_in) real with `s_in` even; returns (B, s_out, s_out), same kind and device
pub fn fourier_resample(w: &Tensor, s_out: usize) -> Result<Tensor> {
    check_even("fourier_resample: s_out", s_out)?;
    let size = w.size();
    if size.len() != 3 || size[1] != size[2] || size[1] < 4 || size[1] % 2 != 0 {
        return Err(Error::Shape {
            op: "fourier_resample",
            expected: "(B, s, s) with s even and ≥ 4".into(),
            got: size,
        });
    }
    let (b, s_in) = (size[0], size[1]);
    let so = s_out as i64;
    if so == s_in {
        return Ok(w.f_detach_copy()?);
    }
    let m = s_in.min(so) / 2;
    let w_hat = w.f_fft_rfft2(None::<&[i64]>, [-2, -1], "backward")?;
    let out = Tensor::f_zeros([b, so, so / 2 + 1], (w_hat.kind(), w.device()))?;
    // Non-negative k_x rows 0..m, negative k_x rows −(m−1)..−1; k_y columns 0..m.
    out.f_narrow(1, 0, m)?
        .f_narrow(2, 0, m)?
        .f_copy_(&w_hat.f_narrow(1, 0, m)?.f_narrow(2, 0, m)?)?;
    let neg = w_hat
        .f_narrow(1, s_in - (m - 1), m - 1)?
        .f_narrow(2, 0, m)?;
    out.f_narrow(1, so - (m - 1), m - 1)?
        .f_narrow(2, 0, m)?
        .f_copy_(&neg)?;
    let scale = (so * so) as f64 / (s_in * s_in) as f64;
    Ok(out
        .f_mul_scalar(scale)?
        .f_fft_irfft2(Some(&[so, so][..]), [-2, -1], "backward")?)
}

/// FFT-order wavenumbers `0, 1, …, s/2 − 1, −s/2, …, −1`.
fn fft_wavenumbers(s: usize) -> Vec<f64> {
    (0..s)
        .map(|j| {
            if j < s / 2 {
                j as f64
            } else {
                j as f64 - s as f64
            }
        })
        .collect()
}

/// `[..., ::r, ::r]` over the last two axes of a (B, s, s) field, made contiguous so that the
/// full-resolution field it was cut from can be freed.
fn stride2(w: &Tensor, r: i64) -> Result<Tensor> {
    let s = w.size();
    let (h, wd) = (s[s.len() - 2], s[s.len() - 1]);
    Ok(w.f_slice(-2, 0, h, r)?
        .f_slice(-1, 0, wd, r)?
        .f_contiguous()?)
}

fn all_finite(t: &Tensor) -> Result<bool> {
    let ok = t.f_isfinite()?.f_all()?.f_to_kind(Kind::Int64)?;
    Ok(i64::try_from(&ok)? != 0)
}

fn complex_kind(k: Kind) -> Kind {
    if k == Kind::Double {
        Kind::ComplexDouble
    } else {
        Kind::ComplexFloat
    }
}

fn cfg_err(what: &str, msg: String) -> Error {
    Error::Config {
        what: what.into(),
        msg,
    }
}

fn check_even(what: &str, s: usize) -> Result<()> {
    if s < 4 || !s.is_multiple_of(2) {
        return Err(cfg_err(
            what,
            format!("must be an even number of grid points ≥ 4, got {s}"),
        ));
    }
    Ok(())
}

/// `num / den` must be a whole number ≥ 1 (to a relative 1e-6, so that `1.0 / 1e-4` passes).
fn whole_ratio(what: &str, num: f64, den: f64, den_name: &str) -> Result<()> {
    let q = num / den;
    let n = q.round();
    if n < 1.0 || (q - n).abs() > 1e-6 * n || n > 1e12 {
        return Err(cfg_err(
            what,
            format!("must be a whole multiple (≥ 1) of {den_name} = {den}, got {num}"),
        ));
    }
    Ok(())
}
