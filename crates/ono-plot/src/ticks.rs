//! Axis ranges, ticks and number labels shared by the figures.

use std::ops::Range;

pub(crate) fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// The y range of a log axis around `[lo, hi]` (both > 0), padded by 4% of its span in log
/// space so that curves do not run along the frame.
pub(crate) fn log_range(lo: f64, hi: f64) -> Range<f64> {
    let (l, h) = (lo.log10(), hi.log10());
    let pad = ((h - l) * 0.04).max(0.05);
    let (l, h) = if h - l < 0.3 {
        // A flat curve would otherwise get a sliver of an axis with a single tick.
        let mid = (l + h) / 2.0;
        (mid - 0.3, mid + 0.3)
    } else {
        (l - pad, h + pad)
    };
    10f64.powf(l)..10f64.powf(h)
}

/// Labelled (bold) and grid-only (light) ticks of a log axis over `[lo, hi]`: whole decades
/// when the range holds three or more, else 1-2-5 or 1…9 multiples so that every axis gets at
/// least two labels.
pub(crate) fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
    let first = lo.log10().floor() as i32;
    let last = hi.log10().ceil() as i32;
    let within = |v: &f64| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9);
    let multiples = |ms: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|k| ms.iter().map(move |m| m * 10f64.powi(k)))
            .filter(within)
            .collect()
    };
    let all: Vec<f64> = multiples(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let decades = multiples(&[1.0]);
    // Two labelled decades leave most of the axis unlabelled; 1-2-5 reads better up to three.
    if decades.len() >= 3 {
        // Keep at most ~8 labelled decades; the grid then only marks the labelled ones.
        let stride = decades.len().div_ceil(8);
        let bold: Vec<f64> = decades.iter().copied().step_by(stride).collect();
        let light = if stride == 1 { all } else { bold.clone() };
        return (bold, light);
    }
    let one_two_five = multiples(&[1.0, 2.0, 5.0]);
    if one_two_five.len() >= 2 {
        return (one_two_five, all);
    }
    (all.clone(), all)
}

/// Formats an axis or colour-bar value with about three significant digits: plain decimals
/// between 1e-3 and 1e5, scientific notation outside, trailing zeros dropped.
pub(crate) fn format_number(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    if !v.is_finite() {
        return format!("{v}");
    }
    let a = v.abs();
    if (1e-3..1e5).contains(&a) {
        let decimals = (2 - a.log10().floor() as i32).clamp(0, 6) as usize;
        trim_zeros(&format!("{v:.decimals$}"))
    } else {
        let s = format!("{v:.2e}");
        match s.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim_zeros(mantissa)),
            None => s,
        }
    }
}

pub(crate) fn trim_zeros(s: &str) -> String {
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        if t == "-0" {
            "0".into()
        } else {
            t.into()
        }
    } else {
        s.into()
    }
}
/// Round ticks (1, 2, 2.5 or 5 times a power of ten apart) over `[lo, hi]`, at most 10 of them.
pub(crate) fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = hi - lo;
    if !(span > 0.0 && span.is_finite()) {
        return vec![lo];
    }
    let exponent = (span / 10.0).log10().floor() as i32;
    let magnitude = 10f64.powi(exponent);
    let multiple = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| span / (m * magnitude) <= 10.0)
        .unwrap_or(10.0);
    let step = multiple * magnitude;
    let first = (lo / step - 1e-9).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    // `k · multiple` is exact and one division by a power of ten rounds once, so ticks come out
    // as the decimals they print as (0.6, not 0.6000000000000001).
    let scale = |v: f64| {
        if exponent >= 0 {
            v * magnitude
        } else {
            v / 10f64.powi(-exponent)
        }
    };
    (first..=last).map(|k| scale(k as f64 * multiple)).collect()
}

/// The x ticks of a line chart: the x values themselves when there are at most 12 distinct ones
/// and no two are closer than 1/20 of the range, else round numbers.
pub(crate) fn x_ticks(x: &[f64], lo: f64, hi: f64) -> Vec<f64> {
    let mut distinct = x.to_vec();
    distinct.sort_by(f64::total_cmp);
    distinct.dedup();
    let readable = distinct.windows(2).all(|w| w[1] - w[0] >= (hi - lo) / 20.0);
    if !distinct.is_empty() && distinct.len() <= 12 && readable {
        distinct
    } else {
        linear_ticks(lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_and_x_ticks_are_round_or_the_data() {
        assert_eq!(linear_ticks(0.0, 1.05), [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]);
        assert_eq!(
            linear_ticks(-0.3, 4.2),
            [0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0]
        );
        assert_eq!(
            linear_ticks(-7.0, 33.0),
            [-5.0, 0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0]
        );
        assert_eq!(
            linear_ticks(0.0, 42.0),
            [0.0, 5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
        );
        let x = [43.0, 85.0, 141.0, 211.0, 421.0];
        assert_eq!(x_ticks(&x, 30.0, 430.0), x);
        let crowded = [43.0, 45.0, 421.0];
        assert_eq!(x_ticks(&crowded, 30.0, 430.0), linear_ticks(30.0, 430.0));
        assert_eq!(linear_ticks(30.0, 430.0)[0], 50.0);
    }

    #[test]
    fn numbers_and_ticks_are_formatted_compactly() {
        assert_eq!(format_number(0.0), "0");
        assert_eq!(format_number(0.002), "0.002");
        assert_eq!(format_number(1.0), "1");
        assert_eq!(format_number(12.5), "12.5");
        assert_eq!(format_number(1e-5), "1e-5");
        assert_eq!(format_number(-2.5e6), "-2.5e6");
        assert_eq!(format_number(123_456.0), "1.23e5");
        let (bold, light) = log_ticks(1e-4, 1.0);
        assert_eq!(bold.len(), 5);
        assert!(light.len() > bold.len());
        let (bold, _) = log_ticks(0.15, 0.6);
        assert!(bold.len() >= 2, "{bold:?}");
    }
}
