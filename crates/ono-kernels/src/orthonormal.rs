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

use tch::{Kind, Tensor};

use crate::precision::widen;
use crate::{Error, Result};

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
    match mask {
        None => Ok(flat.f_tr()?.f_mm(&flat)?.f_div_scalar((b * n) as f64)?),
        Some(mask) => {
            if mask.size() != [b, n] {
                return Err(Error::Shape {
                    op: OP,
                    expected: format!("mask of shape ({b}, {n})"),
                    got: mask.size(),
                });
            }
            let w = mask.f_to_kind(psi.kind())?.f_reshape([b * n, 1])?;
            let count = w.f_sum(psi.kind())?;
            Ok(flat.f_mul(&w)?.f_tr()?.f_mm(&flat)?.f_div(&count)?)
        }
    }
}

/// Cholesky factor of a symmetric positive (semi-)definite matrix, with the reference's fallback
/// (`psd_safe_cholesky`, reference L569–610): a plain attempt first; if it fails,
/// `base_jitter·10^i` (i = 0…9) is added to the diagonal until one succeeds.
///
/// Returns the lower factor L (A + jitter·I = L Lᵀ, float32 for a 16-bit A) and the jitter used
/// (0 when none was needed).
/// NaN/Inf in A is [`Error::NonFinite`]; failure after the last try is
/// [`Error::NotPositiveDefinite`]. Costs one host read per attempt (to decide whether to retry).
///
/// # Shapes
/// - `a`: (..., k, k)
/// - returns: (..., k, k), lower triangular
pub fn psd_safe_cholesky(a: &Tensor) -> Result<(Tensor, f64)> {
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
    // One host read decides both questions: finite input, and a successful factorization.
    let finite = a.f_isfinite()?.f_all()?;
    let (l, ok) = try_cholesky(a)?;
    let code = finite
        .f_logical_not()?
        .f_to_kind(Kind::Int64)?
        .f_mul_scalar(2)?
        .f_add(&ok.f_logical_not()?.f_to_kind(Kind::Int64)?)?
        .f_int64_value(&[])?;
    if code >= 2 {
        return Err(Error::NonFinite { op: OP });
    }
    if code == 0 {
        return Ok((l, 0.0));
    }
    let k = size[size.len() - 1];
    let eye = Tensor::f_eye(k, (a.kind(), a.device()))?;
    let base = base_jitter(a.kind());
    let mut jitter = base;
    for i in 0..JITTER_TRIES {
        jitter = base * 10f64.powi(i as i32);
        let (l, ok) = try_cholesky(&a.f_add(&eye.f_mul_scalar(jitter)?)?)?;
        if ok.f_int64_value(&[])? != 0 {
            return Ok((l, jitter));
        }
    }
    Err(Error::NotPositiveDefinite {
        op: OP,
        max_jitter: jitter,
    })
}

/// Cholesky without raising; `ok` is a 0-dim bool tensor: every factorization succeeded and the
/// factor is finite (NSL's port also routes a NaN factor into the jitter path).
fn try_cholesky(a: &Tensor) -> Result<(Tensor, Tensor)> {
    let (l, info) = a.f_linalg_cholesky_ex(false, false)?;
    let ok = info
        .f_eq(0)?
        .f_all()?
        .f_logical_and(&l.f_isfinite()?.f_all()?)?;
    Ok((l, ok))
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
