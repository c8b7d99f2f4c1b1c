//! The interpolation sizes of `FourierTransformer2D` from a fine/coarse grid pair: the reference's
//! `DarcyDataset.get_scaler_sizes(n_f, n_c, scale_factor)` (`libs/ft.py` L699–714 @ f9e7d6a), in
//! the same f64 arithmetic, so that a configuration given by its grids builds the reference's
//! model. Checked against the reference function itself on every pair of
//! `fixtures/galerkin/scaler_sizes.csv`.

use crate::{Error, Result};

/// The downscaler's and the upscaler's two interpolation sizes, ((h, w), (h, w)) each.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScalerSizes {
    /// The scale factor f of the reference's default path (None for explicit sizes).
    pub factor: Option<f64>,
    /// Fine → middle → coarse.
    pub down: [[i64; 2]; 2],
    /// Coarse → middle → output grid.
    pub up: [[i64; 2]; 2],
}

impl ScalerSizes {
    /// The grid the model's output lies on (the upscaler's last size).
    pub fn output_grid(&self) -> [i64; 2] {
        self.up[1]
    }

    /// The grid the attention runs on (the downscaler's last size).
    pub fn coarse_grid(&self) -> [i64; 2] {
        self.down[1]
    }
}

/// `np.round(x, decimals)`: x·10^d rounded half to even (`rint`), divided by 10^d.
fn np_round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round_ties_even() / scale
}

/// The reference's scale factor: √(n_c/n_f) rounded to 4 decimals; if the last digit of its
/// shortest decimal form is below 5 the 3-decimal rounding is raised by 0.005; then the nearest
/// multiple of 0.005 (by `int(f/5e-3 + 0.5)`, a truncation). Python's `str` of a float and Rust's
/// `{:?}` are both the shortest round-trip form (`1.0` for one).
pub fn scale_factor(n_f: i64, n_c: i64) -> Result<f64> {
    if n_f < 1 || n_c < 1 {
        return Err(Error::Config(format!(
            "galerkin: get_scaler_sizes needs positive grid sizes, got n_f {n_f}, n_c {n_c}"
        )));
    }
    let factor = np_round((n_c as f64 / n_f as f64).sqrt(), 4);
    let last_digit = format!("{factor:?}")
        .chars()
        .last()
        .and_then(|c| c.to_digit(10))
        .unwrap_or(0);
    let mut factor = np_round(factor, 3);
    if last_digit < 5 {
        factor += 5e-3;
    }
    Ok((factor / 5e-3 + 5e-1).trunc() * 5e-3)
}

/// `DarcyDataset.get_scaler_sizes(n_f, n_c, scale_factor)` as sizes. n_m = round(n_f·f) − 1
/// (half to even, as Python's `round`); the upscaler is (n_m, n_m) → (n_f, n_f). The downscaler:
/// - `scale_factor` (the reference's default): interpolation by f twice, which with
///   `recompute_scale_factor=True, align_corners=True` gives ⌊n·f⌋ in double each time:
///   (⌊n_f f⌋, ⌊⌊n_f f⌋ f⌋). That need not be n_c (29/8: 29 → 15 → 7); the caller checks.
/// - otherwise (n_m, n_c).
pub fn get_scaler_sizes(n_f: i64, n_c: i64, scale_factor: bool) -> Result<ScalerSizes> {
    let f = self::scale_factor(n_f, n_c)?;
    let n_m = (n_f as f64 * f).round_ties_even() as i64 - 1;
    let down = if scale_factor {
        let d1 = (n_f as f64 * f).floor() as i64;
        let d2 = (d1 as f64 * f).floor() as i64;
        [[d1, d1], [d2, d2]]
    } else {
        [[n_m, n_m], [n_c, n_c]]
    };
    Ok(ScalerSizes {
        factor: Some(f),
        down,
        up: [[n_m, n_m], [n_f, n_f]],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of docs/models.md (gnot-galerkin.md A2): the paper's grid pairs.
    #[test]
    fn the_papers_pairs() {
        for (n_f, n_c, f, d1, n_m) in [
            (141, 43, 0.555, 78, 77),
            (141, 71, 0.710, 100, 99),
            (211, 61, 0.540, 113, 113),
            (85, 29, 0.590, 50, 49),
            (141, 36, 0.510, 71, 71),
        ] {
            let s = get_scaler_sizes(n_f, n_c, true).unwrap();
            let got = s.factor.unwrap();
            assert!((got - f).abs() < 1e-12, "{n_f}/{n_c}: {got}");
            assert_eq!(s.down, [[d1, d1], [n_c, n_c]], "{n_f}/{n_c}");
            assert_eq!(s.up, [[n_m, n_m], [n_f, n_f]], "{n_f}/{n_c}");
        }
    }

    /// 29/8: f = 0.53 misses the coarse grid on the scale-factor path (29 → 15 → 7); the
    /// explicit-size path is the `gt2d_small` fixture's 29 → 14 → 8, up 14 → 29.
    #[test]
    fn the_29_8_pitfall() {
        let s = get_scaler_sizes(29, 8, true).unwrap();
        assert_eq!(s.down, [[15, 15], [7, 7]]);
        let s = get_scaler_sizes(29, 8, false).unwrap();
        assert_eq!(s.down, [[14, 14], [8, 8]]);
        assert_eq!(s.up, [[14, 14], [29, 29]]);
    }

    #[test]
    fn non_positive_grids_are_errors() {
        assert!(matches!(
            get_scaler_sizes(0, 8, true),
            Err(Error::Config(_))
        ));
        assert!(get_scaler_sizes(29, -1, false).is_err());
    }
}
