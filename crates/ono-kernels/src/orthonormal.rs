//! Orthonormalization of neural eigenfunctions (ONO §3.2; reference `ONOBlock` L276–288).
//!
//! ψ (the k eigenfunctions evaluated at the points) is whitened by the Cholesky factor of its
//! pooled, **uncentred** second moment, so that Σ_b Σ_n ψ̃ψ̃ᵀ = B·N·I. Everything is differentiable:
//! training back-propagates through the batch second moment, the Cholesky and the solve.
//!
//! Every function here computes in float32 at least: bfloat16 or float16 input is widened first
//! ([`crate::precision::widen`]), so under mixed precision ψ's statistics, factor and whitened
//! values are float32 (the Cholesky of a bfloat16 second moment would lose the small eigenvalues
//! that whitening divides by).

use std::sync::{Mutex, OnceLock};

use tch::{Device, Kind, Tensor};

use crate::precision::widen;
use crate::{host, points, Error, Result};

/// Number of jittered retries of [`psd_safe_cholesky`] after the plain attempt (reference: 10).
pub const JITTER_TRIES: u32 = 10;

/// First diagonal jitter of the fallback for a dtype: 1e-6 for f32 (and half types), 1e-8 for f64.
pub fn base_jitter(kind: Kind) -> f64 {
    if kind == Kind::Double {
        1e-8
    } else {
        1e-6
    }
}

/// Pooled uncentred second moment C = Σ_b Σ_n ψ_bn ψ_bnᵀ / (number of points), in float32 for
/// 16-bit ψ.
///
/// With a `mask`, only points where it is non-zero count, and the divisor is the number of real
/// points (Σ mask), so padded point clouds give the statistics of their real points. An all-zero
/// mask divides by zero and gives NaN, which the Cholesky then reports as [`Error::NonFinite`].
///
/// # Shapes
/// - `psi`: (B, N, k)
/// - `mask`: (B, N), bool or floating (1 = real point, 0 = padding)
/// - returns: (k, k)
pub fn second_moment(psi: &Tensor, mask: Option<&Tensor>) -> Result<Tensor> {
    const OP: &str = "second_moment";
    let [b, n, k] = dims3(psi, OP, "psi of shape (B, N, k)")?;
    let psi = &widen(psi)?;
    let flat = psi.f_reshape([b * n, k])?;
    if points::split() {
        // The sums over every process's points, then the one division.
        let (sum, count) = match mask {
            None => (
                flat.f_tr()?.f_mm(&flat)?,
                Tensor::f_full([], (b * n) as f64, (psi.kind(), psi.device()))?,
            ),
            Some(mask) => {
                check_mask(OP, mask, b, n)?;
                let w = mask.f_to_kind(psi.kind())?.f_reshape([b * n, 1])?;
                (flat.f_mul(&w)?.f_tr()?.f_mm(&flat)?, w.f_sum(psi.kind())?)
            }
        };
        return Ok(points::sum(&sum)?.f_div(&points::sum(&count)?)?);
    }
    match mask {
        None => Ok(flat.f_tr()?.f_mm(&flat)?.f_div_scalar((b * n) as f64)?),
        Some(mask) => {
            check_mask(OP, mask, b, n)?;
            let w = mask.f_to_kind(psi.kind())?.f_reshape([b * n, 1])?;
            let count = w.f_sum(psi.kind())?;
            Ok(flat.f_mul(&w)?.f_tr()?.f_mm(&flat)?.f_div(&count)?)
        }
    }
}

fn check_mask(op: &'static str, mask: &Tensor, b: i64, n: i64) -> Result<()> {
    if mask.size() != [b, n] {
        return Err(Error::Shape {
            op,
            expected: format!("mask of shape ({b}, {n})"),
            got: mask.size(),
        });
    }
    Ok(())
}

/// Cholesky factor of a symmetric positive (semi-)definite matrix, with the reference's fallback
/// (`psd_safe_cholesky`, reference L569–610): a plain attempt first; if it fails,
/// `base_jitter·10^i` (i = 0…9) is added to the diagonal until one succeeds.
///
/// Returns the lower factor L (A + jitter·I = L Lᵀ, float32 for a 16-bit A) and the jitter used
/// (0 when none was needed).
/// NaN/Inf in A is [`Error::NonFinite`]; failure after the last try is
/// [`Error::NotPositiveDefinite`]. [`psd_safe_cholesky_device`] plus one host read of its status;
/// code inside a training step uses that one and defers the verdict ([`crate::health`]).
///
/// # Shapes
/// - `a`: (..., k, k)
/// - returns: (..., k, k), lower triangular
pub fn psd_safe_cholesky(a: &Tensor) -> Result<(Tensor, f64)> {
    let (l, status) = psd_safe_cholesky_device(a)?;
    let status = host::read_i64(&status)?;
    match cholesky_error(status, a.kind()) {
        Some(e) => Err(e),
        None => Ok((l, jitter_of(status, a.kind()))),
    }
}

/// The status of [`psd_safe_cholesky_device`] when no candidate factorized.
pub const STATUS_NOT_PD: i64 = JITTER_TRIES as i64 + 1;
/// The status of [`psd_safe_cholesky_device`] for a matrix holding NaN or ±Inf.
pub const STATUS_NON_FINITE: i64 = JITTER_TRIES as i64 + 2;

/// [`psd_safe_cholesky`] without a host read: the jitter ladder is decided on the device.
///
/// The candidates A + j_i·I, j_0 = 0 and j_i = `base_jitter`·10^(i−1) for i = 1…[`JITTER_TRIES`],
/// are factorized as one batch (without a graph); the first whose factorization succeeded over the
/// whole batch of A and whose factor is finite is chosen on the device (the first maximum of the
/// verdicts), and factorized once more with the graph, so that the value and the gradient reaching
/// A are those of the reference's first successful attempt (the same computation on the same
/// input).
///
/// `status` (0-dim int64) is the index i of the candidate used (0: no jitter; the jitter is
/// [`jitter_of`]), [`STATUS_NOT_PD`] or [`STATUS_NON_FINITE`]; in those two cases the factor is all
/// NaN, so that a caller that defers the verdict computes NaN rather than a wrong result.
/// [`cholesky_fault`] and [`cholesky_error`] turn the status into a [`crate::health`] fault code
/// and the typed error.
///
/// # Shapes
/// - `a`: (..., k, k)
/// - returns: the factor (..., k, k), lower triangular, and the status ()
pub fn psd_safe_cholesky_device(a: &Tensor) -> Result<(Tensor, Tensor)> {
    const OP: &str = "psd_safe_cholesky";
    let size = a.size();
    if size.len() < 2 || size[size.len() - 1] != size[size.len() - 2] {
        return Err(Error::Shape {
            op: OP,
            expected: "a square matrix (..., k, k)".into(),
            got: size,
        });
    }
    if !a.is_floating_point() {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("needs a floating-point matrix, got {:?}", a.kind()),
        });
    }
    let a = &widen(a)?;
    let shifts = jitter_shifts(a.kind(), a.device(), size.len(), size[size.len() - 1])?;
    // Few, fused operations: on the CPU each costs microseconds of dispatch, more than the
    // factorizations of k ≤ 32 themselves.
    let (ok, index) = tch::no_grad(|| -> Result<(Tensor, Tensor)> {
        // (T, ..., k, k): the shifts broadcast over the batch of A.
        let (l, info) = a.f_add(&shifts)?.f_linalg_cholesky_ex(false, false)?;
        let ok = succeeded(&l, &info, 1)?;
        // The first maximum: the first successful candidate (index 0 and false when none is).
        Ok(ok.f_max_dim(0, false)?)
    })?;
    let (l, info) = a
        .f_add(&shifts.f_index(&[Some(&index)])?)?
        .f_linalg_cholesky_ex(false, false)?;
    // The chosen candidate is factorized again on its own. The CPU runs the same LAPACK call per
    // matrix of a batch, so the verdict stands; a GPU may factorize batches with another kernel,
    // so there a disagreement fails rather than pass unchecked.
    let good = match a.device() {
        Device::Cpu => ok,
        _ => ok.f_logical_and(&succeeded(&l, &info, 0)?)?,
    };
    let finite = a.f_isfinite()?.f_all()?;
    let good = good.f_logical_and(&finite)?;
    let status = index
        .f_where_scalarother(&good, STATUS_NOT_PD)?
        .f_where_scalarother(&finite, STATUS_NON_FINITE)?;
    Ok((l.f_where_scalarother(&good, f64::NAN)?, status))
}

/// Per factorization along the first `lead` dimensions: the whole batch behind it succeeded and
/// gave a finite factor. One expression: 0·Σ L is NaN exactly when L holds NaN or ±Inf (or when
/// its sum overflows, a factor beyond any use), and LAPACK's `info` is never negative here.
fn succeeded(l: &Tensor, info: &Tensor, lead: usize) -> Result<Tensor> {
    let rest = |t: &Tensor| -> Vec<i64> { (lead as i64..t.dim() as i64).collect() };
    let info = match rest(info).as_slice() {
        [] => info.shallow_clone(),
        dims => info.f_sum_dim_intlist(dims, false, Kind::Int64)?,
    };
    Ok(l.f_sum_dim_intlist(rest(l).as_slice(), false, l.kind())?
        .f_mul_scalar(0)?
        .f_add(&info)?
        .f_eq(0)?)
}

const TRIES_WITH_PLAIN: i64 = JITTER_TRIES as i64 + 1;

/// The jitter of candidate `status` of [`psd_safe_cholesky_device`] for a dtype (0 for the plain
/// attempt and for the failure codes).
pub fn jitter_of(status: i64, kind: Kind) -> f64 {
    match status {
        1..=TRIES_I64 => base_jitter(kind) * 10f64.powi(status as i32 - 1),
        _ => 0.0,
    }
}

const TRIES_I64: i64 = JITTER_TRIES as i64;

/// The typed error of a status of [`psd_safe_cholesky_device`], `None` for a success.
pub fn cholesky_error(status: i64, kind: Kind) -> Option<Error> {
    (status > TRIES_I64).then(|| cholesky_fault_error(status, kind))
}

/// A status of [`psd_safe_cholesky_device`] as a [`crate::health`] fault: 0 for a success, else
/// the status itself, which [`cholesky_fault_error`] names.
pub fn cholesky_fault(status: &Tensor) -> Result<Tensor> {
    Ok(status.f_masked_fill(&status.f_le(TRIES_I64)?, 0)?)
}

/// The typed error of a non-zero fault of [`cholesky_fault`].
pub fn cholesky_fault_error(fault: i64, kind: Kind) -> Error {
    const OP: &str = "psd_safe_cholesky";
    if fault == STATUS_NON_FINITE {
        Error::NonFinite { op: OP }
    } else {
        Error::NotPositiveDefinite {
            op: OP,
            max_jitter: jitter_of(TRIES_I64, kind),
        }
    }
}

/// The diagonal shifts j_i·I of every candidate for a matrix of `rank` dimensions, (T, 1, …, 1,
/// k, k) of `kind` on `device`: built once per (dtype, device, rank, k) and kept, so that a call
/// uploads nothing (an upload waits for the GPU). The jitter is rounded to the dtype as
/// `eye · jitter` rounds it, which the reference computes.
fn jitter_shifts(kind: Kind, device: Device, rank: usize, k: i64) -> Result<Tensor> {
    type Cache = Mutex<Vec<((Kind, Device, usize, i64), Tensor)>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let key = (kind, device, rank, k);
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some((_, t)) = cache.iter().find(|(c, _)| *c == key) {
        return Ok(t.shallow_clone());
    }
    let jitters: Vec<f64> = (0..TRIES_WITH_PLAIN).map(|i| jitter_of(i, kind)).collect();
    let mut shape = vec![TRIES_WITH_PLAIN];
    shape.extend(std::iter::repeat_n(1, rank - 2));
    shape.extend([k, k]);
    let shifts = tch::no_grad(|| -> Result<Tensor> {
        let eye = Tensor::f_eye(k, (Kind::Double, Device::Cpu))?;
        Ok(Tensor::from_slice(&jitters)
            .f_view([TRIES_WITH_PLAIN, 1, 1])?
            .f_mul(&eye)?
            .f_view(shape.as_slice())?
            .f_to_kind(kind)?
            .f_to_device(device)?)
    })?;
    cache.push((key, shifts.shallow_clone()));
    Ok(shifts)
}

/// ψ̃ = ψ L⁻ᵀ by a triangular solve (no explicit inverse), in float32 for 16-bit ψ or L.
///
/// # Shapes
/// - `psi`: (..., N, k)
/// - `l`: (k, k) lower triangular (or batched (..., k, k) broadcastable with `psi`)
/// - returns: (..., N, k)
pub fn whiten(psi: &Tensor, l: &Tensor) -> Result<Tensor> {
    check_factor(psi, l, "whiten")?;
    let (psi, l) = (widen(psi)?, widen(l)?);
    // Solve X Lᵀ = ψ for X, i.e. a right solve with the upper-triangular Lᵀ.
    Ok(l.f_transpose(-2, -1)?
        .f_linalg_solve_triangular(&psi, true, false, false)?)
}

/// ψ̃ = ψ (L⁻¹)ᵀ through the explicit inverse, exactly as the reference computes it (L287–288).
/// Mathematically identical to [`whiten`]; fp32 round-off differs. Float32 for 16-bit ψ or L.
///
/// # Shapes
/// - `psi`: (..., N, k)
/// - `l`: (k, k) lower triangular
/// - returns: (..., N, k)
pub fn whiten_explicit_inverse(psi: &Tensor, l: &Tensor) -> Result<Tensor> {
    check_factor(psi, l, "whiten_explicit_inverse")?;
    let (psi, l) = (widen(psi)?, widen(l)?);
    Ok(psi.f_matmul(&l.f_inverse()?.f_transpose(-2, -1)?)?)
}

fn check_factor(psi: &Tensor, l: &Tensor, op: &'static str) -> Result<()> {
    let (ps, ls) = (psi.size(), l.size());
    let k = ps.last().copied();
    let ok = ls.len() >= 2 && ls[ls.len() - 1] == ls[ls.len() - 2] && k == ls.last().copied();
    if !ok || ps.len() < 2 {
        return Err(Error::Shape {
            op,
            expected: format!("psi (..., N, k) with a (k, k) factor; psi is {ps:?}"),
            got: ls,
        });
    }
    Ok(())
}

pub(crate) fn dims3(t: &Tensor, op: &'static str, expected: &str) -> Result<[i64; 3]> {
    match t.size()[..] {
        [a, b, c] => Ok([a, b, c]),
        _ => Err(Error::Shape {
            op,
            expected: expected.into(),
            got: t.size(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use ndarray_linalg::cholesky::{Cholesky, UPLO};
    use ono_testing::{assert_close, seeded};
    use rand::Rng;
    use tch::Device;

    extern crate openblas_src;

    fn random_spd(rng: &mut impl Rng, k: usize) -> Array2<f64> {
        let g = Array2::from_shape_fn((k, 2 * k), |_| rng.gen_range(-1.0..1.0));
        g.dot(&g.t()) / (2 * k) as f64 + Array2::<f64>::eye(k) * 1e-2
    }

    fn to_tensor(a: &Array2<f64>) -> Tensor {
        let (r, c) = a.dim();
        Tensor::from_slice(a.as_standard_layout().as_slice().unwrap()).view([r as i64, c as i64])
    }

    #[test]
    fn cholesky_matches_f64_lapack_oracle() {
        let mut rng = seeded(11);
        for k in [1usize, 3, 8, 32] {
            let a = random_spd(&mut rng, k);
            let oracle = a.cholesky(UPLO::Lower).expect("SPD by construction");
            for kind in [Kind::Double, Kind::Float] {
                let (l, jitter) = psd_safe_cholesky(&to_tensor(&a).to_kind(kind)).unwrap();
                assert_eq!(jitter, 0.0);
                let tol = if kind == Kind::Double { 1e-12 } else { 1e-4 };
                assert_close(&l, &to_tensor(&oracle), tol, tol);
            }
        }
    }

    #[test]
    fn singular_matrix_takes_the_jitter_path() {
        seeded(0);
        // Rank one: plain Cholesky fails; the smallest jitter suffices.
        let v = Tensor::from_slice(&[1.0f64, 2.0, 3.0]).view([3, 1]);
        let a = v.matmul(&v.tr()) - Tensor::eye(3, (Kind::Double, Device::Cpu)) * 1e-3;
        let (l, jitter) = psd_safe_cholesky(&a).unwrap();
        assert!(
            jitter > 1e-3,
            "jitter {jitter} must exceed the negative shift 1e-3"
        );
        let eye = Tensor::eye(3, (Kind::Double, Device::Cpu));
        assert_close(&l.matmul(&l.tr()), &(a + eye * jitter), 1e-10, 1e-10);
    }

    /// The reference's ladder as the host loop it is (one read per attempt): the truth the
    /// device ladder must reproduce.
    fn host_ladder(a: &Tensor) -> Option<(Tensor, f64)> {
        let try_one = |m: &Tensor| {
            let (l, info) = m.linalg_cholesky_ex(false, false);
            let ok =
                info.eq(0).all().int64_value(&[]) != 0 && l.isfinite().all().int64_value(&[]) != 0;
            ok.then_some(l)
        };
        if let Some(l) = try_one(a) {
            return Some((l, 0.0));
        }
        let k = a.size()[a.dim() - 1];
        let eye = Tensor::eye(k, (a.kind(), a.device()));
        (0..JITTER_TRIES as i32).find_map(|i| {
            let j = base_jitter(a.kind()) * 10f64.powi(i);
            try_one(&(a + &eye * j)).map(|l| (l, j))
        })
    }

    /// Matrices whose plain factorization fails to different depths: rank one minus a shift s
    /// needs the first jitter above s.
    fn deficient(shift: f64, kind: Kind) -> Tensor {
        let v = Tensor::from_slice(&[1.0f64, 2.0, 3.0, -1.0]).view([4, 1]);
        (v.matmul(&v.tr()) - Tensor::eye(4, (Kind::Double, Device::Cpu)) * shift).to_kind(kind)
    }

    #[test]
    fn device_ladder_is_the_host_ladder_bit_for_bit() {
        let mut rng = seeded(5);
        let mut cases: Vec<Tensor> = [2usize, 8, 16, 32]
            .iter()
            .map(|&k| to_tensor(&random_spd(&mut rng, k)))
            .collect();
        for shift in [0.0, 1e-7, 3e-6, 2e-4, 0.5, 5.0, 50.0] {
            cases.push(deficient(shift, Kind::Double));
        }
        let mut seen = std::collections::BTreeSet::new();
        for a in cases {
            for kind in [Kind::Double, Kind::Float] {
                let a = a.to_kind(kind);
                let before = host::host_reads();
                let (l, status) = psd_safe_cholesky_device(&a).unwrap();
                assert_eq!(host::host_reads(), before, "the ladder reads nothing");
                let status = status.int64_value(&[]);
                seen.insert(status);
                let Some((want, jitter)) = host_ladder(&a) else {
                    // 50 is beyond the f64 ladder (largest jitter 10).
                    assert_eq!((status, kind), (STATUS_NOT_PD, Kind::Double));
                    assert!(l.isnan().all().int64_value(&[]) != 0);
                    continue;
                };
                assert_eq!(jitter_of(status, kind), jitter, "{kind:?} {:?}", a.size());
                assert!(l.equal(&want), "{kind:?} status {status}");
                assert_eq!(psd_safe_cholesky(&a).unwrap().1, jitter);
            }
        }
        assert!(seen.len() >= 6, "statuses exercised: {seen:?}");
    }

    /// The covariance buffers the official ONO code computed (fixtures/ono), some of them badly
    /// conditioned (the upstream initialisation), and the same shifted down to need the ladder.
    #[test]
    fn device_ladder_matches_on_the_reference_covariances() {
        let dir = ono_testing::fixtures_dir().join("ono");
        let mut statuses = std::collections::BTreeSet::new();
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "safetensors") {
                continue;
            }
            for (name, cov) in Tensor::read_safetensors(&path).unwrap() {
                if !name.ends_with("feature_cov") {
                    continue;
                }
                let k = cov.size()[0];
                let eye = Tensor::eye(k, (cov.kind(), Device::Cpu));
                let smallest = cov.linalg_eigvalsh("L").min().double_value(&[]);
                for a in [cov.shallow_clone(), &cov - eye * (smallest + 1e-7)] {
                    let (l, status) = psd_safe_cholesky_device(&a).unwrap();
                    let status = status.int64_value(&[]);
                    statuses.insert(status);
                    let (want, jitter) = host_ladder(&a).expect("the ladder suffices");
                    assert_eq!(jitter_of(status, a.kind()), jitter, "{name}");
                    assert!(l.equal(&want), "{}: {name}", path.display());
                    count += 1;
                }
            }
        }
        assert!(count >= 40, "{count} matrices");
        assert!(statuses.len() >= 3, "statuses {statuses:?}");
    }

    #[test]
    fn batched_matrices_share_the_first_jitter_that_suits_all() {
        seeded(0);
        let good = Tensor::eye(4, (Kind::Double, Device::Cpu)) * 2.0;
        let a = Tensor::stack(&[good, deficient(2e-4, Kind::Double)], 0);
        let (l, status) = psd_safe_cholesky_device(&a).unwrap();
        let (want, jitter) = host_ladder(&a).unwrap();
        assert!(jitter > 2e-4);
        assert_eq!(jitter_of(status.int64_value(&[]), Kind::Double), jitter);
        assert!(l.equal(&want));
    }

    #[test]
    fn gradient_reaches_the_matrix_through_the_chosen_candidate_only() {
        let mut rng = seeded(1);
        let w = Tensor::randn([4, 4], (Kind::Double, Device::Cpu));
        let eye = Tensor::eye(4, (Kind::Double, Device::Cpu));
        // A plain success and a jittered one.
        for a0 in [
            to_tensor(&random_spd(&mut rng, 4)),
            deficient(2e-4, Kind::Double),
        ] {
            let a = a0.set_requires_grad(true);
            let (l, status) = psd_safe_cholesky_device(&a).unwrap();
            (&l * &w).sum(Kind::Double).backward();
            let got = a.grad();
            let j = jitter_of(status.int64_value(&[]), Kind::Double);
            let b = a.detach().set_requires_grad(true);
            let lb = (&b + &eye * j).linalg_cholesky(false);
            (&lb * &w).sum(Kind::Double).backward();
            assert!(got.isfinite().all().int64_value(&[]) != 0);
            assert!(got.equal(&b.grad()), "jitter {j}: {got} vs {}", b.grad());
        }
    }

    #[test]
    fn failures_give_a_nan_factor_and_a_status() {
        for (a, want) in [
            (
                Tensor::from_slice(&[1.0f32, f32::NAN, f32::NAN, 1.0]).view([2, 2]),
                STATUS_NON_FINITE,
            ),
            (
                Tensor::eye(2, (Kind::Float, Device::Cpu)) * -1e6,
                STATUS_NOT_PD,
            ),
        ] {
            let (l, status) = psd_safe_cholesky_device(&a).unwrap();
            assert_eq!(status.int64_value(&[]), want);
            assert!(l.isnan().all().int64_value(&[]) != 0);
            assert_eq!(cholesky_fault(&status).unwrap().int64_value(&[]), want);
            assert!(cholesky_error(want, Kind::Float).is_some());
        }
        let (_, ok) = psd_safe_cholesky_device(&deficient(2e-4, Kind::Float)).unwrap();
        assert_eq!(cholesky_fault(&ok).unwrap().int64_value(&[]), 0);
    }

    #[test]
    fn nan_and_hopeless_matrices_are_typed_errors() {
        seeded(0);
        let nan = Tensor::from_slice(&[1.0f32, f32::NAN, f32::NAN, 1.0]).view([2, 2]);
        assert!(matches!(
            psd_safe_cholesky(&nan),
            Err(Error::NonFinite { .. })
        ));
        let neg = Tensor::eye(2, (Kind::Float, Device::Cpu)) * -1e6;
        assert!(matches!(
            psd_safe_cholesky(&neg),
            Err(Error::NotPositiveDefinite { max_jitter, .. }) if (max_jitter - 1e3).abs() < 1e-6
        ));
        let rect = Tensor::zeros([2, 3], (Kind::Float, Device::Cpu));
        assert!(matches!(psd_safe_cholesky(&rect), Err(Error::Shape { .. })));
    }
}
