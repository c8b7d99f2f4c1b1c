//! The Darcy flow generator of the FNO benchmark: `−∇·(a∇u) = 1` on `(0,1)²`, `u = 0` on the boundary,
//! with `a` a thresholded Gaussian random field ([`crate::grf`]).
//!
//! [`DarcyConfig::solve`] reproduces MATLAB `solve_gwf.m` step by step:
//!
//! 1. the coefficient lives on the `K × K` cell centres `(i + ½)/K`; it is moved to the `K × K` node
//!    grid `i/(K−1)` by tensor-product not-a-knot cubic splines (`interp2(..., 'spline')`, which
//!    extrapolates with the end cubics: the nodes 0 and 1 lie outside the cell-centre range). The
//!    spline overshoots at the 12/3 jumps; that is part of the reference data, and it is large: the
//!    extrapolated boundary nodes reach −20 to −50 and interior nodes occasionally go below zero
//!    (most samples have some node coefficient ≤ 0, at K = 85 and at K = 421 alike). The matrix
//!    nevertheless stays positive definite in practice (no failure in several hundred samples);
//!    a sample where it visibly is not (a non-positive diagonal, or CG meeting `pᵀAp ≤ 0`) is
//!    refused with [`Error::Solver`] rather than solved by another method. The right-hand side
//!    `f ≡ 1` is a constant, which the spline reproduces, so it is used directly;
//! 2. five-point stencil on the `(K−2)²` interior nodes with arithmetic face averages
//!    (`(a_{i,j} + a_{i,j+1})/2` on the east face, ...), diagonal = sum of the four faces, all times
//!    `(K−1)²`; zero Dirichlet values on the boundary nodes;
//! 3. the SPD system is solved by preconditioned conjugate gradients to a relative residual
//!    `‖f − Au‖₂/‖f‖₂ ≤ tol` (the true residual, recomputed after convergence of the recursion);
//! 4. the node solution (with its zero boundary) is splined back to the cell centres. MATLAB's final
//!    transpose only undoes the row/column swap of its own `vec2mat` reshape, so the result here is
//!    aligned with the coefficient as in the data files (`sol[i][j]` belongs to `coeff[i][j]`).
//!
//! # Preconditioner
//!
//! The default ([`Preconditioner::Multigrid`]) is one V(1,1)-cycle of a Galerkin geometric multigrid:
//! bilinear prolongation `P` with full-weighting restriction `Pᵀ`, coarse operators `PᵀAP` (nine-point
//! stencils), coarsening `n → ⌊n/2⌋` interior nodes, which handles any `K` (an even count leaves one
//! half-width cell at the far boundary, which the Galerkin product accounts for exactly), forward
//! Gauss–Seidel before and backward Gauss–Seidel after the coarse correction (so the cycle is a
//! symmetric positive definite operator, as CG needs), and a dense Cholesky solve once at most 5 × 5
//! interior nodes remain. Galerkin coarsening keeps the rate independent of `K` for the 4:1 jumps of
//! these coefficients: 10–12 CG iterations to a relative residual of 1e-10 at K = 85 and 11–14 at
//! K = 421, against 129 / 276 / 547 Jacobi-PCG iterations at K = 33 / 65 / 129 (growing like `K`;
//! [`Preconditioner::Jacobi`] is kept as a cross-check). A 421² sample takes about 0.17 s on one
//! core (release build), of which the GRF is about 0.01 s.

use ndarray::{Array2, Array3};
use ono_data::dataset::{grid_positions_2d, Split, TensorDataset};
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tch::Tensor;

use crate::grf::{check_levels, DarcyGrf, GrfSampler, DEFAULT_HI, DEFAULT_LO};
use crate::{Error, Result};

// ---------------------------------------------------------------------------------------------
// Configuration and the public pipeline
// ---------------------------------------------------------------------------------------------

/// How the conjugate-gradient iteration is preconditioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preconditioner {
    /// One symmetric V(1,1)-cycle of Galerkin geometric multigrid (see the module docs).
    #[default]
    Multigrid,
    /// The diagonal of the matrix: simple, but the iteration count grows like `K`.
    Jacobi,
}

/// The Darcy data generator: resolution, coefficient law and linear-solver settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DarcyConfig {
    /// Grid size `K`: the coefficient and solution are `K × K` cell-centre arrays (421 in the FNO data).
    pub resolution: usize,
    /// Coefficient where the random field is non-negative.
    pub hi: f64,
    /// Coefficient where the random field is negative.
    pub lo: f64,
    /// The Gaussian random field that is thresholded.
    pub grf: DarcyGrf,
    /// Relative residual `‖f − Au‖₂/‖f‖₂` the linear solve must reach.
    pub tol: f64,
    /// Conjugate-gradient iterations allowed before [`Error::Solver`].
    pub max_iter: usize,
    /// Preconditioner of the conjugate-gradient solve.
    pub preconditioner: Preconditioner,
}

impl Default for DarcyConfig {
    fn default() -> Self {
        Self {
            resolution: 421,
            hi: DEFAULT_HI,
            lo: DEFAULT_LO,
            grf: DarcyGrf::default(),
            tol: 1e-10,
            max_iter: 5000,
            preconditioner: Preconditioner::Multigrid,
        }
    }
}

/// Convergence figures of one linear solve.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SolveStats {
    /// Conjugate-gradient iterations used.
    pub iterations: usize,
    /// The true relative residual `‖f − Au‖₂/‖f‖₂` reached.
    pub rel_residual: f64,
}

/// Everything [`DarcyConfig::solve_detailed`] computes for one coefficient field.
#[derive(Debug, Clone)]
pub struct DarcySolution {
    /// The coefficient splined to the `K × K` node grid (what the stencil uses).
    pub a_nodes: Array2<f64>,
    /// The finite-difference solution on the node grid, zero on the boundary nodes.
    pub u_nodes: Array2<f64>,
    /// The solution splined back to the cell centres: the data set's `sol`.
    pub sol: Array2<f64>,
    /// How the linear solve went.
    pub stats: SolveStats,
}

impl DarcyConfig {
    /// Refuses a resolution below 3, non-positive or non-finite coefficient levels, a bad GRF, a
    /// tolerance outside `(0, 1)` and `max_iter == 0`.
    pub fn validate(&self) -> Result<()> {
        if self.resolution < 3 {
            return Err(Error::Config {
                what: "resolution".into(),
                msg: format!(
                    "need at least 3 grid points per side, got {}",
                    self.resolution
                ),
            });
        }
        check_levels(self.hi, self.lo)?;
        self.grf.validate()?;
        self.check_solver()
    }

    fn check_solver(&self) -> Result<()> {
        if !(self.tol.is_finite() && self.tol > 0.0 && self.tol < 1.0) {
            return Err(Error::Config {
                what: "tol".into(),
                msg: format!("must lie in (0, 1), got {}", self.tol),
            });
        }
        if self.max_iter == 0 {
            return Err(Error::Config {
                what: "max_iter".into(),
                msg: "must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// Solves `solve_gwf` for one square cell-centre coefficient field and returns the cell-centre
    /// solution. The grid size is taken from `coeff` (it need not equal `self.resolution`); only
    /// `tol`, `max_iter` and `preconditioner` are used.
    pub fn solve(&self, coeff: &Array2<f64>) -> Result<Array2<f64>> {
        Ok(self.solve_detailed(coeff)?.sol)
    }

    /// [`solve`](Self::solve), also returning the node-grid coefficient and solution and the
    /// convergence figures.
    pub fn solve_detailed(&self, coeff: &Array2<f64>) -> Result<DarcySolution> {
        self.check_solver()?;
        let k = check_cell_field("DarcyConfig::solve", coeff)?;
        PreparedSolver::new(k)?.solve(coeff, self)
    }

    /// Sample `index` of the stream `seed`: `(coeff, sol)`, each `K × K`. Identical to the
    /// `index`-th slice of [`generate`](Self::generate) with the same seed.
    pub fn sample(&self, seed: u64, index: u64) -> Result<(Array2<f64>, Array2<f64>)> {
        self.validate()?;
        let k = self.resolution;
        let sampler = self.grf.sampler(k)?;
        let solver = PreparedSolver::new(k)?;
        self.sample_with(&sampler, &solver, seed, index)
    }

    fn sample_with(
        &self,
        sampler: &GrfSampler,
        solver: &PreparedSolver,
        seed: u64,
        index: u64,
    ) -> Result<(Array2<f64>, Array2<f64>)> {
        let mut rng = sample_rng(seed, index);
        let coeff = sampler.sample_coefficient(self.hi, self.lo, &mut rng)?;
        let sol = solver.solve(&coeff, self)?.sol;
        Ok((coeff, sol))
    }

    /// `n` samples `(coeff, sol)`, each of shape `(n, K, K)`. Sample `i` draws from
    /// [`sample_rng`]`(seed, i)`, so the data depend only on `(seed, i)` and not on the number of
    /// worker threads (one per available core). The first failing sample's error is returned.
    pub fn generate(&self, n: usize, seed: u64) -> Result<(Array3<f64>, Array3<f64>)> {
        self.generate_range(0, n, seed)
    }

    /// Samples `start..start + n` of `seed` (what [`DarcyConfig::generate`] returns for those
    /// indices), so that long runs can report progress chunk by chunk.
    pub fn generate_range(
        &self,
        start: usize,
        n: usize,
        seed: u64,
    ) -> Result<(Array3<f64>, Array3<f64>)> {
        self.generate_with_progress(start, n, seed, |_, _| {})
    }

    /// [`DarcyConfig::generate_range`], calling `progress(done, n)` from the worker threads as
    /// samples finish (in any order).
    pub fn generate_with_progress(
        &self,
        start: usize,
        n: usize,
        seed: u64,
        progress: impl Fn(usize, usize) + Sync,
    ) -> Result<(Array3<f64>, Array3<f64>)> {
        self.validate()?;
        let k = self.resolution;
        let mut coeffs = Array3::<f64>::zeros((n, k, k));
        let mut sols = Array3::<f64>::zeros((n, k, k));
        if n == 0 {
            return Ok((coeffs, sols));
        }
        let sampler = self.grf.sampler(k)?;
        let solver = PreparedSolver::new(k)?;
        let samples = crate::parallel::map_indexed_with_progress(
            n,
            0,
            |i| self.sample_with(&sampler, &solver, seed, (start + i) as u64),
            progress,
        )?;
        for (i, (c, s)) in samples.into_iter().enumerate() {
            coeffs.index_axis_mut(ndarray::Axis(0), i).assign(&c);
            sols.index_axis_mut(ndarray::Axis(0), i).assign(&s);
        }
        Ok((coeffs, sols))
    }
}

/// The random stream of sample `index` under `seed`: ChaCha8 seeded with `seed`, on stream `index`.
pub fn sample_rng(seed: u64, index: u64) -> ChaCha8Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(index);
    rng
}

/// The cell-centre coordinates `(i + ½)/K`, `i = 0..K`, where the data live.
pub fn cell_centres(k: usize) -> Vec<f64> {
    (0..k)
        .map(|i| (2 * i + 1) as f64 / (2 * k) as f64)
        .collect()
}

/// The node coordinates `i/(K−1)`, `i = 0..K`, where the finite differences live (needs `K ≥ 2`).
pub fn node_points(k: usize) -> Vec<f64> {
    let h = 1.0 / (k.max(2) - 1) as f64;
    (0..k).map(|i| i as f64 * h).collect()
}

/// Tensor-product not-a-knot spline from the `K × K` cell centres to the `K × K` nodes
/// (`interp2(X1,Y1,coef,X2,Y2,'spline')`).
pub fn cells_to_nodes(cells: &Array2<f64>) -> Result<Array2<f64>> {
    let k = check_square("cells_to_nodes", cells, 3)?;
    let plan = SplinePlan::new(&cell_centres(k), &node_points(k))?;
    Ok(plan.resample2(cells))
}

/// Tensor-product not-a-knot spline from the `K × K` nodes back to the `K × K` cell centres.
pub fn nodes_to_cells(nodes: &Array2<f64>) -> Result<Array2<f64>> {
    let k = check_square("nodes_to_cells", nodes, 3)?;
    let plan = SplinePlan::new(&node_points(k), &cell_centres(k))?;
    Ok(plan.resample2(nodes))
}

/// The discrete operator `−∇_h·(a∇_h u)` of `solve_gwf` on the `K × K` node grid (spacing
/// `h = 1/(K−1)`, arithmetic face averages of `a_nodes`), evaluated at the interior nodes; the
/// boundary entries of the result are zero. The boundary values of `u_nodes` enter as Dirichlet
/// data (the solver's are zero). Written independently of the solver's stencil storage so that
/// tests can check residuals against it.
pub fn apply_operator(a_nodes: &Array2<f64>, u_nodes: &Array2<f64>) -> Result<Array2<f64>> {
    let k = check_square("apply_operator", a_nodes, 3)?;
    if u_nodes.dim() != (k, k) {
        return Err(shape_err(
            "apply_operator",
            &format!("u of shape [{k}, {k}]"),
            u_nodes,
        ));
    }
    let h2 = ((k - 1) * (k - 1)) as f64;
    let a = a_nodes;
    let u = u_nodes;
    let mut out = Array2::<f64>::zeros((k, k));
    for i in 1..k - 1 {
        for j in 1..k - 1 {
            let n = 0.5 * (a[[i - 1, j]] + a[[i, j]]);
            let s = 0.5 * (a[[i + 1, j]] + a[[i, j]]);
            let w = 0.5 * (a[[i, j - 1]] + a[[i, j]]);
            let e = 0.5 * (a[[i, j + 1]] + a[[i, j]]);
            let c = u[[i, j]];
            out[[i, j]] = h2
                * (n * (c - u[[i - 1, j]])
                    + s * (c - u[[i + 1, j]])
                    + w * (c - u[[i, j - 1]])
                    + e * (c - u[[i, j + 1]]));
        }
    }
    Ok(out)
}

/// Solves the node-grid system `A u = f` of `solve_gwf` (zero Dirichlet boundary) by preconditioned
/// conjugate gradients. `a_nodes` and `f_nodes` are `K × K` node arrays; only the interior of
/// `f_nodes` is used. Returns the `K × K` node solution (zero boundary) and the convergence figures,
/// or [`Error::Solver`] when `tol` is not reached within `max_iter` iterations.
pub fn solve_nodes(
    a_nodes: &Array2<f64>,
    f_nodes: &Array2<f64>,
    tol: f64,
    max_iter: usize,
    preconditioner: Preconditioner,
) -> Result<(Array2<f64>, SolveStats)> {
    let k = check_square("solve_nodes", a_nodes, 3)?;
    if f_nodes.dim() != (k, k) {
        return Err(shape_err(
            "solve_nodes",
            &format!("f of shape [{k}, {k}]"),
            f_nodes,
        ));
    }
    check_finite("solve_nodes: a", a_nodes)?;
    check_finite("solve_nodes: f", f_nodes)?;
    DarcyConfig {
        tol,
        max_iter,
        ..DarcyConfig::default()
    }
    .check_solver()?;
    let op = Level::from_coefficient(a_nodes)?;
    let mut f = vec![0.0; k * k];
    for i in 1..k - 1 {
        for j in 1..k - 1 {
            f[i * k + j] = f_nodes[[i, j]];
        }
    }
    let (u, stats) = pcg(op, &f, tol, max_iter, preconditioner)?;
    Ok((to_array(u, k), stats))
}

/// Not-a-knot cubic spline interpolation as MATLAB's `spline(x, y, t)`: through the points
/// `(x_i, y_i)` (strictly increasing `x`, at least 2 points), evaluated at `t`; targets outside
/// `[x_0, x_{n−1}]` are extrapolated with the end cubics. Three points give the interpolating
/// parabola and two the line, as in MATLAB.
pub fn not_a_knot_interpolate(x: &[f64], y: &[f64], t: &[f64]) -> Result<Vec<f64>> {
    if y.len() != x.len() {
        return Err(Error::Invalid(format!(
            "spline: {} abscissae but {} values",
            x.len(),
            y.len()
        )));
    }
    if y.iter().chain(t).any(|v| !v.is_finite()) {
        return Err(Error::Invalid("spline: non-finite value or target".into()));
    }
    let plan = SplinePlan::new(x, t)?;
    Ok(plan.apply_rows(y, 1))
}

// ---------------------------------------------------------------------------------------------
// Input checks
// ---------------------------------------------------------------------------------------------

fn shape_err(op: &'static str, expected: &str, a: &Array2<f64>) -> Error {
    Error::Shape {
        op,
        expected: expected.into(),
        got: a.shape().iter().map(|&d| d as i64).collect(),
    }
}

fn check_square(op: &'static str, a: &Array2<f64>, min: usize) -> Result<usize> {
    let (r, c) = a.dim();
    if r != c || r < min {
        return Err(shape_err(op, &format!("a square array of side ≥ {min}"), a));
    }
    Ok(r)
}

fn check_finite(what: &str, a: &Array2<f64>) -> Result<()> {
    if let Some((idx, v)) = a.indexed_iter().find(|(_, v)| !v.is_finite()) {
        return Err(Error::Invalid(format!(
            "{what}: non-finite value {v} at {idx:?}"
        )));
    }
    Ok(())
}

/// A cell-centre coefficient must be square, at least 3 × 3, finite and positive.
fn check_cell_field(op: &'static str, coeff: &Array2<f64>) -> Result<usize> {
    let k = check_square(op, coeff, 3)?;
    check_finite(op, coeff)?;
    if let Some((idx, v)) = coeff.indexed_iter().find(|(_, v)| **v <= 0.0) {
        return Err(Error::Invalid(format!(
            "{op}: coefficient must be positive, got {v} at {idx:?}"
        )));
    }
    Ok(k)
}

fn to_array(v: Vec<f64>, k: usize) -> Array2<f64> {
    // The length is k*k by construction.
    Array2::from_shape_vec((k, k), v).unwrap_or_else(|_| Array2::zeros((k, k)))
}

// ---------------------------------------------------------------------------------------------
// The per-resolution solver (spline plans shared by every sample)
// ---------------------------------------------------------------------------------------------

struct PreparedSolver {
    k: usize,
    to_nodes: SplinePlan,
    to_cells: SplinePlan,
}

impl PreparedSolver {
    fn new(k: usize) -> Result<Self> {
        let (c, n) = (cell_centres(k), node_points(k));
        Ok(Self {
            k,
            to_nodes: SplinePlan::new(&c, &n)?,
            to_cells: SplinePlan::new(&n, &c)?,
        })
    }

    fn solve(&self, coeff: &Array2<f64>, cfg: &DarcyConfig) -> Result<DarcySolution> {
        let k = self.k;
        check_cell_field("DarcyConfig::solve", coeff)?;
        if coeff.dim() != (k, k) {
            return Err(shape_err(
                "DarcyConfig::solve",
                &format!("[{k}, {k}]"),
                coeff,
            ));
        }
        let a_nodes = self.to_nodes.resample2(coeff);
        let op = Level::from_coefficient(&a_nodes)?;
        // f ≡ 1 on the interior nodes; the spline of a constant is that constant.
        let mut f = vec![0.0; k * k];
        for i in 1..k - 1 {
            f[i * k + 1..i * k + k - 1].fill(1.0);
        }
        let (u, stats) = pcg(op, &f, cfg.tol, cfg.max_iter, cfg.preconditioner)?;
        let u_nodes = to_array(u, k);
        let sol = self.to_cells.resample2(&u_nodes);
        Ok(DarcySolution {
            a_nodes,
            u_nodes,
            sol,
            stats,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Not-a-knot cubic splines (MATLAB spline.m)
// ---------------------------------------------------------------------------------------------

/// A spline interpolation from fixed abscissae to fixed targets, factorised once: the slopes solve
/// a tridiagonal system whose matrix depends only on the abscissae, and each target is a fixed
/// combination of two values and two slopes (cubic Hermite form).
struct SplinePlan {
    n: usize,
    dx: Vec<f64>,
    /// Right-hand side of row i: `c0·δ[j0] + c1·δ[j1]` with `δ` the divided differences.
    rhs: Vec<[(usize, f64); 2]>,
    /// Thomas elimination multipliers (row i minus mult[i] × row i−1) and pivots.
    mult: Vec<f64>,
    pivot: Vec<f64>,
    sup: Vec<f64>,
    /// Per target: interval j and the weights of y_j, y_{j+1}, s_j, s_{j+1}.
    targets: Vec<(usize, [f64; 4])>,
}

impl SplinePlan {
    fn new(x: &[f64], t: &[f64]) -> Result<Self> {
        let n = x.len();
        if n < 2 {
            return Err(Error::Invalid(format!(
                "spline: need at least 2 points, got {n}"
            )));
        }
        if x.iter().any(|v| !v.is_finite()) || x.windows(2).any(|w| w[1] <= w[0]) {
            return Err(Error::Invalid(
                "spline: abscissae must be finite and strictly increasing".into(),
            ));
        }
        let dx: Vec<f64> = x.windows(2).map(|w| w[1] - w[0]).collect();
        let mut sub = vec![0.0; n];
        let mut diag = vec![1.0; n];
        let mut sup = vec![0.0; n];
        let mut rhs = vec![[(0, 0.0), (0, 0.0)]; n];
        match n {
            2 => {
                rhs = vec![[(0, 1.0), (0, 0.0)]; 2];
            }
            3 => {
                // MATLAB uses the parabola through the three points; its exact slopes in Hermite
                // form reproduce it on both intervals.
                let (d0, d1) = (dx[0], dx[1]);
                let span = d0 + d1;
                let g = [-d0 / span, d0 / span, (d0 + 2.0 * d1) / span];
                for i in 0..3 {
                    rhs[i] = [(0, 1.0 - g[i]), (1, g[i])];
                }
            }
            _ => {
                let x31 = x[2] - x[0];
                let xn = x[n - 1] - x[n - 3];
                diag[0] = dx[1];
                sup[0] = x31;
                rhs[0] = [
                    (0, (dx[0] + 2.0 * x31) * dx[1] / x31),
                    (1, dx[0] * dx[0] / x31),
                ];
                for i in 1..n - 1 {
                    sub[i] = dx[i];
                    diag[i] = 2.0 * (dx[i - 1] + dx[i]);
                    sup[i] = dx[i - 1];
                    rhs[i] = [(i - 1, 3.0 * dx[i]), (i, 3.0 * dx[i - 1])];
                }
                sub[n - 1] = xn;
                diag[n - 1] = dx[n - 3];
                rhs[n - 1] = [
                    (n - 3, dx[n - 2] * dx[n - 2] / xn),
                    (n - 2, (2.0 * xn + dx[n - 2]) * dx[n - 3] / xn),
                ];
            }
        }
        let mut mult = vec![0.0; n];
        let mut pivot = diag.clone();
        for i in 1..n {
            mult[i] = sub[i] / pivot[i - 1];
            pivot[i] = diag[i] - mult[i] * sup[i - 1];
        }
        if pivot.iter().any(|p| !p.is_finite() || *p == 0.0) {
            return Err(Error::Invalid("spline: singular slope system".into()));
        }
        let targets = t
            .iter()
            .map(|&tv| {
                // The interval whose cubic evaluates tv: the end ones extrapolate.
                let j = x.partition_point(|&xv| xv <= tv).clamp(1, n - 1) - 1;
                let h = dx[j];
                let s = (tv - x[j]) / h;
                let (s2, s3) = (s * s, s * s * s);
                let w = [
                    2.0 * s3 - 3.0 * s2 + 1.0,
                    -2.0 * s3 + 3.0 * s2,
                    h * (s3 - 2.0 * s2 + s),
                    h * (s3 - s2),
                ];
                (j, w)
            })
            .collect();
        Ok(Self {
            n,
            dx,
            rhs,
            mult,
            pivot,
            sup,
            targets,
        })
    }

    /// Interpolates every column of the row-major `n × cols` block `y` at once (row operations keep
    /// the inner loops contiguous); returns the `targets × cols` block.
    fn apply_rows(&self, y: &[f64], cols: usize) -> Vec<f64> {
        let n = self.n;
        let row = |i: usize| i * cols..(i + 1) * cols;
        let mut delta = vec![0.0; (n - 1) * cols];
        for j in 0..n - 1 {
            let inv = 1.0 / self.dx[j];
            let (a, b) = (&y[row(j)], &y[row(j + 1)]);
            for ((d, &p), &q) in delta[j * cols..(j + 1) * cols].iter_mut().zip(a).zip(b) {
                *d = (q - p) * inv;
            }
        }
        let mut s = vec![0.0; n * cols];
        for i in 0..n {
            let [(j0, c0), (j1, c1)] = self.rhs[i];
            let (d0, d1) = (
                &delta[j0 * cols..(j0 + 1) * cols],
                &delta[j1 * cols..(j1 + 1) * cols],
            );
            for ((v, &p), &q) in s[i * cols..(i + 1) * cols].iter_mut().zip(d0).zip(d1) {
                *v = c0 * p + c1 * q;
            }
        }
        for i in 1..n {
            let m = self.mult[i];
            if m != 0.0 {
                let (prev, cur) = s.split_at_mut(i * cols);
                for (c, p) in cur[..cols].iter_mut().zip(&prev[(i - 1) * cols..]) {
                    *c -= m * p;
                }
            }
        }
        let inv = 1.0 / self.pivot[n - 1];
        s[(n - 1) * cols..].iter_mut().for_each(|v| *v *= inv);
        for i in (0..n - 1).rev() {
            let (u, inv) = (self.sup[i], 1.0 / self.pivot[i]);
            let (cur, next) = s.split_at_mut((i + 1) * cols);
            for (c, nx) in cur[i * cols..].iter_mut().zip(&next[..cols]) {
                *c = (*c - u * nx) * inv;
            }
        }
        let mut out = vec![0.0; self.targets.len() * cols];
        for (o, &(j, w)) in out.chunks_exact_mut(cols).zip(&self.targets) {
            let (y0, y1) = (&y[row(j)], &y[row(j + 1)]);
            let (s0, s1) = (&s[row(j)], &s[row(j + 1)]);
            for c in 0..cols {
                o[c] = w[0] * y0[c] + w[1] * y1[c] + w[2] * s0[c] + w[3] * s1[c];
            }
        }
        out
    }

    /// The tensor-product spline of a square `n × n` array onto `targets × targets`.
    fn resample2(&self, a: &Array2<f64>) -> Array2<f64> {
        let n = self.n;
        let m = self.targets.len();
        let flat: Vec<f64> = a.iter().copied().collect();
        let first = self.apply_rows(&flat, n); // m × n: axis 0 done
        let t = transpose(&first, m, n); // n × m
        let second = self.apply_rows(&t, m); // m × m, indexed [axis 1][axis 0]
        to_array(transpose(&second, m, m), m)
    }
}

fn transpose(a: &[f64], rows: usize, cols: usize) -> Vec<f64> {
    let mut t = vec![0.0; a.len()];
    for i in 0..rows {
        for j in 0..cols {
            t[j * rows + i] = a[i * cols + j];
        }
    }
    t
}

// ---------------------------------------------------------------------------------------------
// Nine-point stencil operators, Galerkin multigrid and PCG
// ---------------------------------------------------------------------------------------------

/// Stencil slot of the neighbour `(di, dj)`, `di, dj ∈ {−1, 0, 1}`: `(di+1)·3 + (dj+1)`.
const CENTRE: usize = 4;

/// One grid level: `n × n` interior unknowns, vectors padded with a zero ring to `(n+2)²` so that
/// stencils need no boundary branches (on the finest level the padded vector is the node grid).
struct Level {
    n: usize,
    stencil: Vec<[f64; 9]>,
}

impl Level {
    fn stride(&self) -> usize {
        self.n + 2
    }

    fn len(&self) -> usize {
        self.stride() * self.stride()
    }

    /// The five-point operator of `solve_gwf` on the interior of the `K × K` node grid.
    fn from_coefficient(a: &Array2<f64>) -> Result<Self> {
        let k = a.nrows();
        let n = k - 2;
        let h2 = ((k - 1) * (k - 1)) as f64;
        let mut stencil = vec![[0.0; 9]; n * n];
        for i in 1..k - 1 {
            for j in 1..k - 1 {
                let c = a[[i, j]];
                let faces = [
                    (1, 0.5 * (a[[i - 1, j]] + c)),
                    (3, 0.5 * (a[[i, j - 1]] + c)),
                    (5, 0.5 * (a[[i, j + 1]] + c)),
                    (7, 0.5 * (a[[i + 1, j]] + c)),
                ];
                let st = &mut stencil[(i - 1) * n + (j - 1)];
                for (slot, f) in faces {
                    if !f.is_finite() {
                        return Err(Error::Invalid(format!(
                            "Darcy operator: non-finite face coefficient at node ({i}, {j})"
                        )));
                    }
                    st[slot] = -f * h2;
                    st[CENTRE] += f * h2;
                }
                if st[CENTRE] <= 0.0 {
                    return Err(Error::Solver {
                        solver: "darcy PCG",
                        msg: format!(
                            "matrix not positive definite: diagonal {} at node ({i}, {j})",
                            st[CENTRE]
                        ),
                    });
                }
            }
        }
        Ok(Self { n, stencil })
    }

    fn apply(&self, x: &[f64], y: &mut [f64]) {
        let (n, s) = (self.n, self.stride());
        for i in 0..n {
            let base = (i + 1) * s + 1;
            for j in 0..n {
                let p = base + j;
                let c = &self.stencil[i * n + j];
                y[p] = c[0] * x[p - s - 1]
                    + c[1] * x[p - s]
                    + c[2] * x[p - s + 1]
                    + c[3] * x[p - 1]
                    + c[4] * x[p]
                    + c[5] * x[p + 1]
                    + c[6] * x[p + s - 1]
                    + c[7] * x[p + s]
                    + c[8] * x[p + s + 1];
            }
        }
    }

    #[inline]
    fn relax_point(&self, x: &mut [f64], b: &[f64], i: usize, j: usize) {
        let s = self.stride();
        let p = (i + 1) * s + j + 1;
        let c = &self.stencil[i * self.n + j];
        let off = c[0] * x[p - s - 1]
            + c[1] * x[p - s]
            + c[2] * x[p - s + 1]
            + c[3] * x[p - 1]
            + c[5] * x[p + 1]
            + c[6] * x[p + s - 1]
            + c[7] * x[p + s]
            + c[8] * x[p + s + 1];
        x[p] = (b[p] - off) / c[CENTRE];
    }

    fn gauss_seidel_forward(&self, x: &mut [f64], b: &[f64]) {
        for i in 0..self.n {
            for j in 0..self.n {
                self.relax_point(x, b, i, j);
            }
        }
    }

    /// The adjoint of the forward sweep, so that the V-cycle is symmetric.
    fn gauss_seidel_backward(&self, x: &mut [f64], b: &[f64]) {
        for i in (0..self.n).rev() {
            for j in (0..self.n).rev() {
                self.relax_point(x, b, i, j);
            }
        }
    }

    /// Coarse interior nodes `I = 1..=⌊n/2⌋` sit on fine nodes `2I` (padded indices).
    fn coarse_n(&self) -> usize {
        self.n / 2
    }

    /// The Galerkin coarse operator `PᵀAP` for bilinear interpolation `P`.
    fn galerkin(&self) -> Level {
        let n = self.n;
        let m = self.coarse_n();
        let mut stencil = vec![[0.0; 9]; m * m];
        for pi in 1..=n {
            let wi = coarse_weights(pi, m);
            for pj in 1..=n {
                let wj = coarse_weights(pj, m);
                let c = &self.stencil[(pi - 1) * n + (pj - 1)];
                for (slot, &v) in c.iter().enumerate() {
                    if v == 0.0 {
                        continue;
                    }
                    let qi = pi + slot / 3;
                    let qj = pj + slot % 3;
                    // q = p + (slot/3 − 1, slot%3 − 1), kept shifted by one to stay unsigned.
                    if qi < 2 || qi > n + 1 || qj < 2 || qj > n + 1 {
                        continue;
                    }
                    let vi = coarse_weights(qi - 1, m);
                    let vj = coarse_weights(qj - 1, m);
                    for &(ii, a) in wi.iter().filter(|w| w.1 != 0.0) {
                        for &(ij, b) in wj.iter().filter(|w| w.1 != 0.0) {
                            let wab = a * b * v;
                            let row = &mut stencil[(ii - 1) * m + (ij - 1)];
                            for &(ji, g) in vi.iter().filter(|w| w.1 != 0.0) {
                                for &(jj, d) in vj.iter().filter(|w| w.1 != 0.0) {
                                    // |I − J| ≤ 1 because |p − q| ≤ 1 and both are within 1 of 2I, 2J.
                                    row[(ji + 1 - ii) * 3 + (jj + 1 - ij)] += wab * g * d;
                                }
                            }
                        }
                    }
                }
            }
        }
        Level { n: m, stencil }
    }

    /// `coarse += Pᵀ fine` (full weighting, 1-D weights ½, 1, ½).
    fn restrict(&self, fine: &[f64], coarse: &mut [f64]) {
        let s = self.stride();
        let m = self.coarse_n();
        let cs = m + 2;
        for ci in 1..=m {
            for cj in 1..=m {
                let p = 2 * ci * s + 2 * cj;
                let v = 0.25
                    * (fine[p - s - 1] + fine[p - s + 1] + fine[p + s - 1] + fine[p + s + 1])
                    + 0.5 * (fine[p - s] + fine[p + s] + fine[p - 1] + fine[p + 1])
                    + fine[p];
                coarse[ci * cs + cj] = v;
            }
        }
    }

    /// `fine += P coarse` (bilinear; coarse padding supplies the zero boundary).
    fn prolong_add(&self, coarse: &[f64], fine: &mut [f64]) {
        let s = self.stride();
        let cs = self.coarse_n() + 2;
        for i in 1..=self.n {
            let (i0, i1) = (i / 2, i.div_ceil(2));
            for j in 1..=self.n {
                let (j0, j1) = (j / 2, j.div_ceil(2));
                // Even indices hit a coarse node (i0 == i1); odd ones average the two neighbours.
                let v = 0.25
                    * (coarse[i0 * cs + j0]
                        + coarse[i0 * cs + j1]
                        + coarse[i1 * cs + j0]
                        + coarse[i1 * cs + j1]);
                fine[i * s + j] += v;
            }
        }
    }
}

/// The coarse nodes (1-based) whose bilinear hat covers fine node `q` (1-based), with weights.
fn coarse_weights(q: usize, m: usize) -> [(usize, f64); 2] {
    if q.is_multiple_of(2) {
        [(q / 2, 1.0), (0, 0.0)]
    } else {
        let lo = (q - 1) / 2;
        let hi = lo + 1;
        [
            (lo, if lo >= 1 { 0.5 } else { 0.0 }),
            (hi, if hi <= m { 0.5 } else { 0.0 }),
        ]
    }
}

/// The multigrid hierarchy with its work vectors.
struct Multigrid {
    levels: Vec<Level>,
    x: Vec<Vec<f64>>,
    b: Vec<Vec<f64>>,
    r: Vec<Vec<f64>>,
    /// Dense Cholesky factor (row-major, lower) of the coarsest operator.
    chol: Vec<f64>,
}

/// Below this many interior nodes per side the level is solved directly.
const COARSEST: usize = 5;

impl Multigrid {
    fn new(fine: Level) -> Result<Self> {
        let mut levels = vec![fine];
        while levels[levels.len() - 1].n > COARSEST {
            let next = levels[levels.len() - 1].galerkin();
            levels.push(next);
        }
        let chol = cholesky_of(&levels[levels.len() - 1])?;
        let x = levels.iter().map(|l| vec![0.0; l.len()]).collect();
        let b = levels.iter().map(|l| vec![0.0; l.len()]).collect();
        let r = levels.iter().map(|l| vec![0.0; l.len()]).collect();
        Ok(Self {
            levels,
            x,
            b,
            r,
            chol,
        })
    }

    fn fine(&self) -> &Level {
        &self.levels[0]
    }

    /// `z = M⁻¹ r` for one V(1,1)-cycle started from zero.
    fn precondition(&mut self, r: &[f64], z: &mut [f64]) {
        let last = self.levels.len() - 1;
        self.b[0].copy_from_slice(r);
        for l in 0..last {
            let lv = &self.levels[l];
            let x = &mut self.x[l];
            x.fill(0.0);
            lv.gauss_seidel_forward(x, &self.b[l]);
            let res = &mut self.r[l];
            lv.apply(x, res);
            for (rv, bv) in res.iter_mut().zip(&self.b[l]) {
                *rv = bv - *rv;
            }
            let (_, coarse_b) = self.b.split_at_mut(l + 1);
            lv.restrict(&self.r[l], &mut coarse_b[0]);
        }
        let cl = &self.levels[last];
        cholesky_solve(cl, &self.chol, &self.b[last], &mut self.x[last]);
        for l in (0..last).rev() {
            let (fine_x, coarse_x) = self.x.split_at_mut(l + 1);
            let lv = &self.levels[l];
            lv.prolong_add(&coarse_x[0], &mut fine_x[l]);
            lv.gauss_seidel_backward(&mut fine_x[l], &self.b[l]);
        }
        z.copy_from_slice(&self.x[0]);
    }
}

fn cholesky_of(level: &Level) -> Result<Vec<f64>> {
    let n = level.n;
    let dim = n * n;
    let mut a = vec![0.0; dim * dim];
    for i in 0..n {
        for j in 0..n {
            let row = i * n + j;
            for (slot, &v) in level.stencil[row].iter().enumerate() {
                let (qi, qj) = ((i + slot / 3) as isize - 1, (j + slot % 3) as isize - 1);
                if v != 0.0 && (0..n as isize).contains(&qi) && (0..n as isize).contains(&qj) {
                    a[row * dim + qi as usize * n + qj as usize] += v;
                }
            }
        }
    }
    for j in 0..dim {
        let mut d = a[j * dim + j];
        for k in 0..j {
            d -= a[j * dim + k] * a[j * dim + k];
        }
        if !(d > 0.0 && d.is_finite()) {
            return Err(Error::Solver {
                solver: "multigrid",
                msg: "coarsest operator is not positive definite".into(),
            });
        }
        let d = d.sqrt();
        a[j * dim + j] = d;
        for i in j + 1..dim {
            let mut v = a[i * dim + j];
            for k in 0..j {
                v -= a[i * dim + k] * a[j * dim + k];
            }
            a[i * dim + j] = v / d;
        }
    }
    Ok(a)
}

fn cholesky_solve(level: &Level, l: &[f64], b: &[f64], x: &mut [f64]) {
    let n = level.n;
    let dim = n * n;
    let s = level.stride();
    let mut y: Vec<f64> = (0..dim).map(|r| b[(r / n + 1) * s + r % n + 1]).collect();
    for i in 0..dim {
        let mut v = y[i];
        for k in 0..i {
            v -= l[i * dim + k] * y[k];
        }
        y[i] = v / l[i * dim + i];
    }
    for i in (0..dim).rev() {
        let mut v = y[i];
        for k in i + 1..dim {
            v -= l[k * dim + i] * y[k];
        }
        y[i] = v / l[i * dim + i];
    }
    for (r, v) in y.into_iter().enumerate() {
        x[(r / n + 1) * s + r % n + 1] = v;
    }
}

enum Precond {
    Multigrid(Box<Multigrid>),
    Jacobi(Level, Vec<f64>),
}

impl Precond {
    fn level(&self) -> &Level {
        match self {
            Precond::Multigrid(mg) => mg.fine(),
            Precond::Jacobi(l, _) => l,
        }
    }

    fn apply(&mut self, r: &[f64], z: &mut [f64]) {
        match self {
            Precond::Multigrid(mg) => mg.precondition(r, z),
            Precond::Jacobi(_, inv_diag) => {
                for ((zv, rv), d) in z.iter_mut().zip(r).zip(inv_diag.iter()) {
                    *zv = rv * d;
                }
            }
        }
    }
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Preconditioned conjugate gradients on the padded interior vectors of `op`. Convergence is judged
/// on the recursively updated residual and then confirmed on the true residual `f − Au`; if
/// rounding made the two drift apart the iteration restarts from the true residual.
fn pcg(
    op: Level,
    f: &[f64],
    tol: f64,
    max_iter: usize,
    which: Preconditioner,
) -> Result<(Vec<f64>, SolveStats)> {
    let len = op.len();
    let mut pre = match which {
        Preconditioner::Multigrid => Precond::Multigrid(Box::new(Multigrid::new(op)?)),
        Preconditioner::Jacobi => {
            let s = op.stride();
            let mut inv = vec![0.0; len];
            for i in 0..op.n {
                for j in 0..op.n {
                    inv[(i + 1) * s + j + 1] = 1.0 / op.stencil[i * op.n + j][CENTRE];
                }
            }
            Precond::Jacobi(op, inv)
        }
    };
    let fnorm = dot(f, f).sqrt();
    let mut x = vec![0.0; len];
    if fnorm == 0.0 {
        return Ok((
            x,
            SolveStats {
                iterations: 0,
                rel_residual: 0.0,
            },
        ));
    }
    let mut r = f.to_vec();
    let mut z = vec![0.0; len];
    let mut p = vec![0.0; len];
    let mut q = vec![0.0; len];
    let mut iterations = 0;
    let mut rel = 1.0;
    let fail = |iterations: usize, rel: f64, why: &str| Error::Solver {
        solver: "darcy PCG",
        msg: format!("{why} after {iterations} iterations, relative residual {rel:.3e}"),
    };
    'restart: loop {
        pre.apply(&r, &mut z);
        p.copy_from_slice(&z);
        let mut rz = dot(&r, &z);
        while iterations < max_iter {
            iterations += 1;
            pre.level().apply(&p, &mut q);
            let pq = dot(&p, &q);
            if !(pq > 0.0 && pq.is_finite()) {
                return Err(fail(iterations, rel, "operator not positive definite"));
            }
            let alpha = rz / pq;
            for ((xv, rv), (pv, qv)) in x.iter_mut().zip(r.iter_mut()).zip(p.iter().zip(&q)) {
                *xv += alpha * pv;
                *rv -= alpha * qv;
            }
            rel = dot(&r, &r).sqrt() / fnorm;
            if !rel.is_finite() {
                return Err(fail(iterations, rel, "breakdown"));
            }
            if rel <= tol {
                // Confirm on the true residual.
                pre.level().apply(&x, &mut q);
                for ((rv, fv), qv) in r.iter_mut().zip(f).zip(&q) {
                    *rv = fv - qv;
                }
                rel = dot(&r, &r).sqrt() / fnorm;
                if rel <= tol {
                    return Ok((
                        x,
                        SolveStats {
                            iterations,
                            rel_residual: rel,
                        },
                    ));
                }
                continue 'restart;
            }
            pre.apply(&r, &mut z);
            let rz_new = dot(&r, &z);
            let beta = rz_new / rz;
            rz = rz_new;
            for (pv, zv) in p.iter_mut().zip(&z) {
                *pv = zv + beta * *pv;
            }
        }
        return Err(fail(iterations, rel, "no convergence"));
    }
}

impl DarcyConfig {
    /// A train/test [`TensorDataset`] in the layout of the ONO Darcy script: `fx` = coefficient
    /// (S, K², 1), `y` = solution (S, K², 1), positions on the K×K grid of [0, 1]² (row-major,
    /// `pos[..., 0]` the column coordinate), float64 as the original files. Samples
    /// `0..n_train` of `seed` train, `n_train..n_train + n_test` test.
    ///
    /// `stride` r keeps every r-th cell in both directions (`[::r, ::r]`, as the ONO scripts
    /// subsample 421 → 85 with r = 5). Solving finer and subsampling is also the way to coarse
    /// data: below K ≈ 30 the reference's spline overshoot at the 12/3 jumps makes some node
    /// coefficients so negative that the operator is indefinite and the solve is refused.
    pub fn dataset(
        &self,
        n_train: usize,
        n_test: usize,
        seed: u64,
        stride: usize,
    ) -> Result<TensorDataset> {
        self.dataset_with_progress(n_train, n_test, seed, stride, |_, _| {})
    }

    /// [`DarcyConfig::dataset`], calling `progress(done, n_train + n_test)` as samples finish.
    pub fn dataset_with_progress(
        &self,
        n_train: usize,
        n_test: usize,
        seed: u64,
        stride: usize,
        progress: impl Fn(usize, usize) + Sync,
    ) -> Result<TensorDataset> {
        if stride == 0 {
            return Err(Error::Config {
                what: "stride".into(),
                msg: "must be at least 1".into(),
            });
        }
        if n_train == 0 || n_test == 0 {
            return Err(Error::Config {
                what: "dataset size".into(),
                msg: format!("needs train and test samples, got {n_train} and {n_test}"),
            });
        }
        let (coeff, sol) = self.generate_with_progress(0, n_train + n_test, seed, progress)?;
        let k = self.resolution.div_ceil(stride) as i64;
        let r = stride as isize;
        let to_tensor = |a: &Array3<f64>, from: usize, n: usize| -> Result<Tensor> {
            let part = a.slice(ndarray::s![from..from + n, ..;r, ..;r]);
            let data: Vec<f64> = part.iter().copied().collect();
            Ok(Tensor::from_slice(&data).f_reshape([n as i64, k * k, 1])?)
        };
        let pos = grid_positions_2d(k, k)?.f_to_kind(tch::Kind::Double)?;
        let split = |from: usize, n: usize| -> Result<Split> {
            Ok(Split::new(
                to_tensor(&coeff, from, n)?,
                to_tensor(&sol, from, n)?,
                pos.shallow_clone(),
            ))
        };
        Ok(TensorDataset {
            train: split(0, n_train)?,
            test: split(n_train, n_test)?,
            grid: Some(vec![k, k]),
            query_grid: None,
            test_grid: None,
        })
    }
}

/// Writes `coeff` and `sol` (n, K, K) as the published files hold them: a MAT v5 file with the
/// variables `coeff` and `sol`, compressed as MATLAB's `save`, atomically.
pub fn write_mat(path: &std::path::Path, coeff: &Array3<f64>, sol: &Array3<f64>) -> Result<()> {
    use ono_data::array::{ArrayData, NamedArray};
    let arr = |name: &str, a: &Array3<f64>| {
        NamedArray::new(
            name,
            a.shape().to_vec(),
            ArrayData::F64(a.iter().copied().collect()),
        )
    };
    Ok(ono_data::readers::mat_v5::write(
        path,
        &[arr("coeff", coeff)?, arr("sol", sol)?],
        true,
    )?)
}
