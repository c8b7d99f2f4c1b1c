//! The Galerkin Transformer's inverse coefficient problem (`ex3_darcy_inv.py`, `DarcyDataset(…,
//! inverse_problem=True)`) on the Darcy files: from the solution u on a fine grid, recover the
//! coefficient a on a coarse one.
//!
//! - Input: u[::r, ::r] (r = `subsample_nodes`, 3 → 141 points a side), normalized pointwise by
//!   the Galerkin Transformer's `UnitGaussianNormalizer` fitted on the training samples (NumPy's
//!   population std, eps 1e-5; the test samples use the training statistics), **then** noise:
//!   `noise`·N(0, 1) added once, to train and test alike (default 0.01; the paper also reports
//!   0.1). The input is therefore normalized here, and the run uses no input normalizer.
//! - Target: the coefficient mean-pooled r×r to the fine grid and then (R/r)×(R/r) to the coarse
//!   grid (R = `subsample_attn`, 12 → 36), both with the reference's NaN-padded windows
//!   (`pooling_2d`), on the query points (the coarse grid's positions).
//! - Splits: train = smooth1[:1024], test = smooth2[-100:].
//! - `coarse_r = r`: the target on the input's own points (pooled r×r), and no query points: the
//!   paper's FNO2d rows (Table 3, "only n_f" and "only n_c"), whose output lies on their input
//!   grid.
//!
//! The noise is drawn from ChaCha8 streams seeded by the reference's seed 1127802 (train: stream
//! 0, test: stream 1), so the data are the same on every run; NumPy's stream is not reproduced.

use std::path::Path;

use rand::SeedableRng;
use rand_distr::{Distribution, StandardNormal};
use tch::{Kind, Tensor};

use super::darcy::{files, read_full, split_note};
use super::{Benchmark, LoadOptions, Loaded, Take};
use crate::dataset::{grid_positions_2d, mix, Split, TensorDataset};
use crate::normalizer::{Normalizer, NormalizerKind};
use crate::stencils::mean_pool_2d;
use crate::{Error, Result};

/// The seed of the reference scripts, keying the noise streams.
const NOISE_SEED: u64 = 1_127_802;

pub(super) fn load(dir: &Path, opts: &LoadOptions) -> Result<Loaded> {
    let b = Benchmark::DarcyInverse;
    let (train_path, test_path) = files(dir, b)?;
    let r = opts.r.unwrap_or(3).max(1) as i64;
    let coarse_r = opts.coarse_r.unwrap_or(12) as i64;
    let noise = opts.noise.unwrap_or(0.01);
    if coarse_r < r || coarse_r % r != 0 {
        return Err(Error::Config {
            what: "coarse_r".into(),
            msg: format!(
                "the coarse stride must be a multiple of the fine stride r = {r} (the target is pooled {r}×{r}, then (coarse_r / r)²), got {coarse_r}"
            ),
        });
    }
    if !(noise.is_finite() && noise >= 0.0) {
        return Err(Error::Config {
            what: "noise".into(),
            msg: format!("must be finite and ≥ 0, got {noise}"),
        });
    }
    let (ntrain0, ntest0) = Benchmark::DarcyInverse.default_split(opts.layout);
    let (ntrain, ntest) = (opts.ntrain.unwrap_or(ntrain0), opts.ntest.unwrap_or(ntest0));
    let (tr, te) = (Take::First(ntrain), Take::Last(ntest));
    // (u on the fine grid (S, n·n, 1), coefficient on the coarse grid (S, m·m, 1), n, m, total)
    let part =
        |path: &Path, take_n: Take, what: &str| -> Result<(Tensor, Tensor, i64, i64, usize)> {
            let full = read_full(path, take_n, what)?;
            let k = full.k;
            let u = full.sol.f_slice(1, 0, k, r)?.f_slice(2, 0, k, r)?;
            let n = u.size()[1];
            let a = mean_pool_2d(&mean_pool_2d(&full.coeff, r)?, coarse_r / r)?;
            let m = a.size()[1];
            Ok((
                u.f_reshape([-1, n * n, 1])?,
                a.f_reshape([-1, m * m, 1])?,
                n,
                m,
                full.total,
            ))
        };
    let (u_train, a_train, n, m, total_train) = part(&train_path, tr, "ntrain")?;
    let (u_test, a_test, _, _, total_test) = part(&test_path, te, "ntest")?;
    let norm = Normalizer::fit(NormalizerKind::GaussianPopulation, &u_train)?;
    let noisy = |u: &Tensor, stream: u64| -> Result<Tensor> {
        let x = norm.encode(u)?;
        if noise == 0.0 {
            return Ok(x.f_to_kind(Kind::Float)?);
        }
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(NOISE_SEED, stream));
        let z: Vec<f64> = (0..x.numel())
            .map(|_| StandardNormal.sample(&mut rng))
            .collect();
        let z = Tensor::from_slice(&z).f_reshape(x.size())?;
        Ok(x.f_add(&z.f_mul_scalar(noise)?.f_to_kind(x.kind())?)?
            .f_to_kind(Kind::Float)?)
    };
    let fine = grid_positions_2d(n, n)?;
    let coarse = grid_positions_2d(m, m)?;
    let same_grid = coarse_r == r;
    let split = |fx: Tensor, y: Tensor| -> Result<Split> {
        let mut s = Split::new(fx, y.f_to_kind(Kind::Float)?, fine.shallow_clone());
        if !same_grid {
            s.query = Some(coarse.shallow_clone());
        }
        Ok(s)
    };
    Ok(Loaded {
        benchmark: b,
        dataset: TensorDataset {
            train: split(noisy(&u_train, 0)?, a_train)?,
            test: split(noisy(&u_test, 1)?, a_test)?,
            grid: Some(vec![n, n]),
            query_grid: (!same_grid).then(|| vec![m, m]),
            test_grid: None,
        },
        files: vec![train_path.clone(), test_path.clone()],
        notes: vec![
            format!("input: u on the fine grid {n}×{n} (r = {r}), normalized, noise {noise}"),
            format!(
                "target: the coefficient pooled to the coarse grid {m}×{m} (coarse_r = {coarse_r})"
            ),
            split_note((&train_path, tr, total_train), (&test_path, te, total_test)),
        ],
    })
}
