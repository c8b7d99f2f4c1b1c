//! Training curves: loss and error against epoch on a log axis.

use std::path::Path;

use plotters::prelude::*;

use crate::canvas::{plot_error, write_png_atomic, FONT, PALETTE};
use crate::ticks::{format_number, log_range, log_ticks, min_max};
use crate::Result;

/// Size of a training-curve figure, in pixels.
pub const CURVES_SIZE: (u32, u32) = (1000, 640);

/// Series with at most this many plottable points get markers, so sparse curves (validation
/// every few epochs, a single point) stay visible.
const MARKER_MAX_POINTS: usize = 50;

/// One line on a chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend entry.
    pub name: String,
    /// `(x, y)` pairs, drawn in the given order.
    pub points: Vec<(f64, f64)>,
}

impl Series {
    /// A series from a name and its points.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Self {
        Series {
            name: name.into(),
            points,
        }
    }
}

/// Draws training curves to the PNG `path` ([`CURVES_SIZE`] pixels): x is linear (epochs), y is
/// on a log10 axis, one coloured line per series with a legend, axis labels and a title.
///
/// Points with a non-finite coordinate or `y ≤ 0` cannot sit on a log axis and are skipped; a
/// series left without points still gets a legend entry marked "(no data)".
///
/// # Errors
/// [`Error::Plot`] when `series` is empty, when no series has a plottable point, or when drawing
/// fails; [`Error::File`] when the file cannot be written.
pub fn training_curves(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
) -> Result<()> {
    if series.is_empty() {
        return Err(plot_error(path, "no series to draw"));
    }
    let kept: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|s| {
            s.points
                .iter()
                .copied()
                .filter(|&(x, y)| x.is_finite() && y.is_finite() && y > 0.0)
                .collect()
        })
        .collect();
    let all = || kept.iter().flatten();
    let (Some((x_min, x_max)), Some((y_min, y_max))) =
        (min_max(all().map(|p| p.0)), min_max(all().map(|p| p.1)))
    else {
        return Err(plot_error(
            path,
            "no series has a point with finite x and finite y > 0 (needed on a log axis)",
        ));
    };
    let x_range = if x_max > x_min {
        x_min..x_max
    } else {
        x_min - 1.0..x_max + 1.0
    };
    let y_range = log_range(y_min, y_max);
    let (bold, light) = log_ticks(y_range.start, y_range.end);

    write_png_atomic(path, CURVES_SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (FONT, 26))
            .margin(20)
            .x_label_area_size(56)
            .y_label_area_size(84)
            .build_cartesian_2d(
                x_range,
                y_range
                    .log_scale()
                    .with_key_points(bold)
                    .with_light_points(light),
            )?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_labels(10)
            .x_label_formatter(&|v| format_number(*v))
            .y_label_formatter(&|v| format_number(*v))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 19))
            .bold_line_style(RGBColor(205, 205, 205))
            .light_line_style(RGBColor(238, 238, 238))
            .draw()?;

        for (i, (s, points)) in series.iter().zip(&kept).enumerate() {
            let style = PALETTE[i % PALETTE.len()].stroke_width(2);
            let label = if points.is_empty() {
                format!("{} (no data)", s.name)
            } else {
                s.name.clone()
            };
            chart
                .draw_series(LineSeries::new(points.iter().copied(), style))?
                .label(label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 24, y)], style));
            if points.len() <= MARKER_MAX_POINTS {
                chart.draw_series(
                    points
                        .iter()
                        .map(|&p| Circle::new(p, 3, style.color.filled())),
                )?;
            }
        }

        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .margin(12)
            .legend_area_size(30)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.9))
            .border_style(RGBColor(170, 170, 170))
            .draw()?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{decode_png, TempDir};
    use crate::Error;

    fn curves() -> Vec<Series> {
        let train = (1..=40)
            .map(|e| (e as f64, 0.8 * (-(e as f64) / 9.0).exp() + 2e-3))
            .collect();
        // Sparse, with points a log axis cannot show: they must be skipped, not fail the plot.
        let test = vec![
            (0.0, f64::NAN),
            (5.0, 0.31),
            (10.0, 0.0),
            (15.0, 0.09),
            (20.0, -1.0),
            (25.0, f64::INFINITY),
            (30.0, 0.02),
            (40.0, 0.012),
        ];
        vec![
            Series::new("train loss", train),
            Series::new("test relative L2", test),
            Series::new("empty", vec![]),
        ]
    }

    #[test]
    fn training_curves_writes_a_png_of_the_expected_size() {
        let dir = TempDir::new("curves");
        let path = dir.0.join("curves.png");
        training_curves(&path, "Darcy FNO", "epoch", "loss", &curves()).unwrap();
        let img = decode_png(&path);
        assert_eq!(img.dimensions(), CURVES_SIZE);
        let coloured = img.pixels().filter(|p| p[0] != p[1] || p[1] != p[2]);
        assert!(coloured.count() > 500, "the curves were not drawn");
        assert_eq!(dir.entries(), ["curves.png"]);

        // A flat curve and a single point get an axis too.
        let flat = [Series::new("flat", vec![(3.0, 0.5), (4.0, 0.5)])];
        training_curves(&dir.0.join("flat.png"), "", "x", "y", &flat).unwrap();
        let single = [Series::new("one", vec![(3.0, 0.5)])];
        training_curves(&dir.0.join("single.png"), "", "x", "y", &single).unwrap();
        assert_eq!(
            decode_png(&dir.0.join("single.png")).dimensions(),
            CURVES_SIZE
        );
        assert_eq!(dir.entries(), ["curves.png", "flat.png", "single.png"]);
    }

    #[test]
    fn failures_keep_the_previous_figure_and_io_errors_name_the_path() {
        let dir = TempDir::new("atomic");
        let path = dir.0.join("fig.png");
        std::fs::write(&path, b"previous").unwrap();
        assert!(training_curves(&path, "t", "x", "y", &[]).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"previous");

        let missing = dir.0.join("no-such-dir").join("fig.png");
        let series = [Series::new("a", vec![(0.0, 1.0), (1.0, 0.5)])];
        match training_curves(&missing, "t", "x", "y", &series) {
            Err(Error::File(ono_io::Error::Io { path, .. })) => {
                assert!(path.starts_with(dir.0.join("no-such-dir")))
            }
            other => panic!("expected Error::File(Io), got {other:?}"),
        }
        assert_eq!(dir.entries(), ["fig.png"]);

        // A successful plot replaces the file in one step.
        training_curves(&path, "t", "x", "y", &series).unwrap();
        assert_eq!(decode_png(&path).dimensions(), CURVES_SIZE);
        assert_eq!(dir.entries(), ["fig.png"]);
    }
}
