//! Grid stencils the reference scripts apply to their data: central differences (zero-padded in
//! 2-D as ONO's and the Galerkin Transformer's `central_diff`, periodic in 1-D as the Galerkin
//! Transformer's Burgers data) and the NaN-padded mean pooling of its `pooling_2d`.

use tch::Tensor;

use crate::{Error, Result};

/// Zero-padded central differences of a field on an s×s grid (the reference `central_diff`):
/// ∂/∂w along the columns and ∂/∂h along the rows, (u[i+1] − u[i−1]) / 2h with u = 0 outside.
///
/// # Shapes
/// - `u`: (B, s·s) or (B, s·s, 1), row-major
/// - returns: (d_columns, d_rows), each (B, s, s)
pub fn central_diff_2d(u: &Tensor, s: i64, h: f64) -> Result<(Tensor, Tensor)> {
    let b = u.size().first().copied().unwrap_or(0);
    if u.numel() as i64 != b * s * s || b == 0 {
        return Err(Error::Shape {
            op: "central_diff_2d",
            expected: format!("(B, {}) for an {s}×{s} grid", s * s),
            got: u.size(),
        });
    }
    let g = u.f_reshape([b, s, s])?.f_constant_pad_nd([1, 1, 1, 1])?;
    let dx = g
        .f_narrow(1, 1, s)?
        .f_narrow(2, 2, s)?
        .f_sub(&g.f_narrow(1, 1, s)?.f_narrow(2, 0, s)?)?
        .f_div_scalar(2.0 * h)?;
    let dy = g
        .f_narrow(1, 2, s)?
        .f_narrow(2, 1, s)?
        .f_sub(&g.f_narrow(1, 0, s)?.f_narrow(2, 1, s)?)?
        .f_div_scalar(2.0 * h)?;
    Ok((dx, dy))
}

/// Central differences of periodic samples u_0 … u_{n−1} (u_{n−1} repeating u_0, as the Burgers
/// files on [0, 1]): the Galerkin Transformer's `BurgersDataset.central_diff`, which pads with
/// u_{n−2} on the left and u_1 on the right, (u[i+1] − u[i−1]) / 2h.
///
/// # Shapes
/// - `u`: (B, n), n ≥ 3; returns (B, n)
pub fn central_diff_periodic_1d(u: &Tensor, h: f64) -> Result<Tensor> {
    let sz = u.size();
    if sz.len() != 2 || sz[1] < 3 {
        return Err(Error::Shape {
            op: "central_diff_periodic_1d",
            expected: "(B, n) with n ≥ 3".into(),
            got: sz,
        });
    }
    let n = sz[1];
    let padded = Tensor::f_cat(
        &[
            u.f_narrow(1, n - 2, 1)?,
            u.shallow_clone(),
            u.f_narrow(1, 1, 1)?,
        ],
        1,
    )?;
    Ok(padded
        .f_narrow(1, 2, n)?
        .f_sub(&padded.f_narrow(1, 0, n)?)?
        .f_div_scalar(2.0 * h)?)
}

/// Non-overlapping k×k mean pooling with the reference's NaN padding (`pooling_2d(…,
/// padding=True)`): the field is centred in a ⌈m/k⌉k × ⌈n/k⌉k frame (the odd cell of padding
/// at the bottom / right) and each window averages the cells it covers.
///
/// # Shapes
/// - `x`: (B, m, n); returns (B, ⌈m/k⌉, ⌈n/k⌉)
pub fn mean_pool_2d(x: &Tensor, k: i64) -> Result<Tensor> {
    let sz = x.size();
    if sz.len() != 3 || k < 1 || sz[1] < 1 || sz[2] < 1 {
        return Err(Error::Shape {
            op: "mean_pool_2d",
            expected: format!("(B, m, n) and a window k ≥ 1, got k = {k}"),
            got: sz,
        });
    }
    let (b, m, n) = (sz[0], sz[1], sz[2]);
    let (ny, nx) = ((m + k - 1) / k, (n + k - 1) / k);
    let (sy, sx) = ((ny * k - m) / 2, (nx * k - n) / 2);
    let pad = [sx, nx * k - n - sx, sy, ny * k - m - sy];
    let sum = |t: &Tensor| -> Result<Tensor> {
        Ok(t.f_constant_pad_nd(pad)?
            .f_reshape([b, ny, k, nx, k])?
            .f_sum_dim_intlist(&[2i64, 4][..], false, t.kind())?)
    };
    let count = sum(&x.f_ones_like()?)?;
    Ok(sum(x)?.f_div(&count)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tch::Kind;

    /// A window over padding only cannot occur (the padding is less than one window), and the
    /// border windows average only the cells they cover: checked against a hand-computed 5×5.
    #[test]
    fn mean_pool_matches_nan_padded_mean() {
        let x = Tensor::arange(25, (Kind::Double, tch::Device::Cpu)).reshape([1, 5, 5]);
        // k = 2: the 6×6 frame puts 0 padding rows on top (sy = 0), one at the bottom.
        let p = Vec::<f64>::try_from(mean_pool_2d(&x, 2).unwrap().reshape([-1])).unwrap();
        let want = [
            (0. + 1. + 5. + 6.) / 4.,
            (2. + 3. + 7. + 8.) / 4.,
            (4. + 9.) / 2.,
            (10. + 11. + 15. + 16.) / 4.,
            (12. + 13. + 17. + 18.) / 4.,
            (14. + 19.) / 2.,
            (20. + 21.) / 2.,
            (22. + 23.) / 2.,
            24.,
        ];
        assert_eq!(p, want);
        // k = 3 on 5: frame 6, (6 − 5) // 2 = 0 padding rows on top, one at the bottom.
        let p = Vec::<f64>::try_from(mean_pool_2d(&x, 3).unwrap().reshape([-1])).unwrap();
        let want0 = (0. + 1. + 2. + 5. + 6. + 7. + 10. + 11. + 12.) / 9.;
        let want2 = (15. + 16. + 17. + 20. + 21. + 22.) / 6.;
        assert_eq!(p.len(), 4);
        assert_eq!((p[0], p[2]), (want0, want2));
        // k = 4 on 5: frame 8, one padding row on top (8 − 5 = 3: 1 above, 2 below).
        let p = Vec::<f64>::try_from(mean_pool_2d(&x, 4).unwrap().reshape([-1])).unwrap();
        let top_left: f64 = [0., 1., 2., 5., 6., 7., 10., 11., 12.].iter().sum::<f64>() / 9.;
        assert_eq!(p[0], top_left);
        assert!(mean_pool_2d(&x, 0).is_err());
    }

    /// Periodic differences of sin(2πx) sampled with both end points are second-order accurate
    /// everywhere, the ends included.
    #[test]
    fn periodic_difference_of_a_sine() {
        let n = 257;
        let h = 1.0 / (n - 1) as f64;
        let x = Tensor::linspace(0.0, 1.0, n, (Kind::Double, tch::Device::Cpu));
        let u = (&x * (2.0 * std::f64::consts::PI)).sin().unsqueeze(0);
        let du = central_diff_periodic_1d(&u, h).unwrap();
        let want = (&x * (2.0 * std::f64::consts::PI)).cos() * (2.0 * std::f64::consts::PI);
        let err = (du.squeeze() - want).abs().max().double_value(&[]);
        assert!(
            err < 4.0 * (2.0 * std::f64::consts::PI).powi(3) * h * h / 6.0,
            "{err}"
        );
        assert!(central_diff_periodic_1d(&u.narrow(1, 0, 2), h).is_err());
    }
}
