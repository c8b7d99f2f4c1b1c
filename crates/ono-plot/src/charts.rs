//! Charts of results: grouped bars and line charts over named series.

use std::ops::Range;
use std::path::Path;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::canvas::{plot_error, register_font, write_png_atomic, DrawResult, FONT, PALETTE};
use crate::curves::CURVES_SIZE;
use crate::ticks::{format_number, linear_ticks, log_range, log_ticks, min_max, x_ticks};
use crate::Result;

/// Size of a [`line_chart`] figure, and of a [`grouped_bars`] one unless its labels need more width.
pub const CHART_SIZE: (u32, u32) = CURVES_SIZE;

/// One named series of a chart: `values[i]` belongs to the i-th group / x value; `None` is a missing value (drawn as nothing).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartSeries {
    /// The legend entry.
    pub name: String,
    /// One value per group of [`grouped_bars`] or per x of [`line_chart`].
    pub values: Vec<Option<f64>>,
}

impl ChartSeries {
    /// A series from a name and its values.
    pub fn new(name: impl Into<String>, values: Vec<Option<f64>>) -> Self {
        ChartSeries {
            name: name.into(),
            values,
        }
    }
}

/// Grouped bars: one group per entry of `groups` (e.g. benchmarks), one bar per series (e.g. models) inside each group, a
/// legend, y label; `log_y` draws a log axis (for relative errors spanning decades). Missing values leave a gap.
///
/// The figure is [`CHART_SIZE`] pixels unless the group labels need more width, up to
/// [`BARS_MAX_WIDTH`]. On a linear axis bars start at 0; on a log axis at the bottom of the axis.
/// Non-finite values and, with `log_y`, values ≤ 0 are missing; a series without any value gets a
/// legend entry marked "(no data)".
///
/// # Errors
/// [`Error::Plot`] when `series` is empty, a series does not have one value per group, no value
/// is drawable, or drawing fails; [`Error::File`] when the file cannot be written.
pub fn grouped_bars(
    path: &Path,
    title: &str,
    groups: &[String],
    series: &[ChartSeries],
    y_label: &str,
    log_y: bool,
) -> Result<()> {
    let kept = drawable_values(path, series, groups.len(), "group", log_y)?;
    let axis = ValueAxis::new(kept.iter().flatten().flatten().copied(), log_y, true);
    register_font().map_err(|m| plot_error(path, m))?;
    let legend_w = legend_width(series, &kept);
    let size = bar_chart_size(groups, series.len(), legend_w);
    let x_axis = ValueAxis {
        log: false,
        range: 0.0..groups.len() as f64,
        bold: (0..groups.len()).map(|i| i as f64 + 0.5).collect(),
        light: Vec::new(),
    };
    let base = if log_y {
        axis.range.start
    } else {
        axis.to_plot(0.0)
    };
    // The bars of a group fill 80% of its slot, so that groups stay apart.
    let slot = 0.8 / series.len() as f64;

    let group_name = |v: &f64| {
        groups
            .get(v.floor().max(0.0) as usize)
            .cloned()
            .unwrap_or_default()
    };
    let frame = ValueFrame {
        title,
        x: x_axis,
        x_label: "",
        x_format: &group_name,
        // Vertical grid lines would run through the bars.
        x_grid: false,
        y: axis,
        y_label,
        legend_w,
        swatch: Swatch::Bar,
    };

    write_png_atomic(path, size, |root| {
        draw_value_chart(root, &frame, series, &kept, |chart| {
            for (j, values) in kept.iter().enumerate() {
                let color = PALETTE[j % PALETTE.len()];
                let bars = values.iter().enumerate().filter_map(|(i, v)| {
                    let x0 = i as f64 + 0.1 + j as f64 * slot;
                    v.map(|v| {
                        Rectangle::new(
                            [
                                (x0 + 0.06 * slot, base),
                                (x0 + 0.94 * slot, frame.y.to_plot(v)),
                            ],
                            color.filled(),
                        )
                    })
                });
                chart.draw_series(bars)?;
            }
            Ok(())
        })
    })
}

/// Lines with markers over numeric x (e.g. resolution 43..421, or time step), one per series, legend, axis labels,
/// optional log y. Missing values break the line.
///
/// The figure is [`CHART_SIZE`] pixels. Points are joined in the order of `x`. When there are
/// few x values, far enough apart to be labelled, the x ticks sit on them (e.g. the resolutions
/// of a super-resolution study); otherwise they are round numbers. Non-finite values and, with
/// `log_y`, values ≤ 0 are missing; a series without any value gets a legend entry marked
/// "(no data)".
///
/// # Errors
/// [`Error::Plot`] when `series` is empty, a series does not have one value per x, an x is not
/// finite, no value is drawable, or drawing fails; [`Error::File`] when the file cannot be
/// written.
pub fn line_chart(
    path: &Path,
    title: &str,
    x: &[f64],
    x_label: &str,
    series: &[ChartSeries],
    y_label: &str,
    log_y: bool,
) -> Result<()> {
    if let Some((i, v)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(plot_error(
            path,
            format!("x[{i}] is {v}; every x must be finite"),
        ));
    }
    let kept = drawable_values(path, series, x.len(), "x value", log_y)?;
    let axis = ValueAxis::new(kept.iter().flatten().flatten().copied(), log_y, false);
    let (x_min, x_max) = min_max(x.iter().copied()).unwrap_or((0.0, 0.0));
    // Padding keeps the end markers off the frame.
    let pad = if x_max > x_min {
        (x_max - x_min) * 0.03
    } else {
        1.0
    };
    let (lo, hi) = (x_min - pad, x_max + pad);
    let x_axis = ValueAxis {
        log: false,
        range: lo..hi,
        bold: x_ticks(x, lo, hi),
        light: Vec::new(),
    };
    register_font().map_err(|m| plot_error(path, m))?;
    let legend_w = legend_width(series, &kept);

    let number = |v: &f64| format_number(*v);
    let frame = ValueFrame {
        title,
        x: x_axis,
        x_label,
        x_format: &number,
        x_grid: true,
        y: axis,
        y_label,
        legend_w,
        swatch: Swatch::Line,
    };

    write_png_atomic(path, CHART_SIZE, |root| {
        draw_value_chart(root, &frame, series, &kept, |chart| {
            for (j, values) in kept.iter().enumerate() {
                let color = PALETTE[j % PALETTE.len()];
                let points: Vec<Option<(f64, f64)>> = x
                    .iter()
                    .zip(values)
                    .map(|(&xi, v)| v.map(|v| (xi, frame.y.to_plot(v))))
                    .collect();
                let runs = points.split(Option::is_none).filter(|r| !r.is_empty());
                for run in runs {
                    let run: Vec<(f64, f64)> = run.iter().flatten().copied().collect();
                    chart
                        .draw_series(LineSeries::new(run.iter().copied(), color.stroke_width(2)))?;
                    chart.draw_series(run.iter().map(|&p| Circle::new(p, 4, color.filled())))?;
                }
            }
            Ok(())
        })
    })
}

/// The widest a [`grouped_bars`] figure grows to fit its group labels; past it labels may overlap.
pub const BARS_MAX_WIDTH: u32 = 4000;

/// Margin and y-label area of the value charts, as in [`training_curves`].
const CHART_MARGIN: u32 = 20;
const CHART_Y_LABEL_AREA: u32 = 84;
/// Vertical pitch of the legend entries of the value charts.
const LEGEND_ROW: i32 = 26;

/// The frame of a [`grouped_bars`] or [`line_chart`] figure.
struct ValueFrame<'a> {
    title: &'a str,
    x: ValueAxis,
    x_label: &'a str,
    x_format: &'a dyn Fn(&f64) -> String,
    /// Whether vertical grid lines mark the x ticks.
    x_grid: bool,
    y: ValueAxis,
    y_label: &'a str,
    /// Width of the legend strip on the right.
    legend_w: u32,
    swatch: Swatch,
}

/// A chart in the style of [`training_curves`] with the legend beside it: `draw` adds the data.
fn draw_value_chart<F>(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    frame: &ValueFrame<'_>,
    series: &[ChartSeries],
    kept: &[Vec<Option<f64>>],
    draw: F,
) -> DrawResult
where
    F: FnOnce(
        &mut ChartContext<'_, BitMapBackend<'_>, Cartesian2d<ValueAxis, ValueAxis>>,
    ) -> DrawResult,
{
    let (width, _) = root.dim_in_pixel();
    let (plot, legend) = root.split_horizontally(width.saturating_sub(frame.legend_w));
    let mut chart = ChartBuilder::on(&plot)
        .caption(frame.title, (FONT, 26))
        .margin(CHART_MARGIN)
        .x_label_area_size(56)
        .y_label_area_size(CHART_Y_LABEL_AREA)
        .build_cartesian_2d(frame.x.clone(), frame.y.clone())?;
    let y_format = |v: &f64| frame.y.label(*v);
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(frame.x_label)
        .y_desc(frame.y_label)
        .x_label_formatter(frame.x_format)
        .y_label_formatter(&y_format)
        .label_style((FONT, 16))
        .axis_desc_style((FONT, 19))
        .bold_line_style(RGBColor(205, 205, 205))
        .light_line_style(RGBColor(238, 238, 238));
    if !frame.x_grid {
        mesh.disable_x_mesh();
    }
    mesh.draw()?;
    draw(&mut chart)?;
    draw_legend(&legend, series, kept, frame.swatch)
}

/// Checks that there is a series, that each has `expected` values, and that one value is
/// drawable; returns the values with those a (log) axis cannot show replaced by `None`.
fn drawable_values(
    path: &Path,
    series: &[ChartSeries],
    expected: usize,
    per: &str,
    log_y: bool,
) -> Result<Vec<Vec<Option<f64>>>> {
    if series.is_empty() {
        return Err(plot_error(path, "no series to draw"));
    }
    if let Some(s) = series.iter().find(|s| s.values.len() != expected) {
        return Err(plot_error(
            path,
            format!(
                "series {:?} has {} values, expected {expected} (one per {per})",
                s.name,
                s.values.len()
            ),
        ));
    }
    let kept: Vec<Vec<Option<f64>>> = series
        .iter()
        .map(|s| {
            s.values
                .iter()
                .map(|v| v.filter(|v| v.is_finite() && (!log_y || *v > 0.0)))
                .collect()
        })
        .collect();
    if kept.iter().flatten().all(Option::is_none) {
        let msg = if log_y {
            "no series has a finite value > 0 (needed on a log axis)"
        } else {
            "no series has a finite value"
        };
        return Err(plot_error(path, msg));
    }
    Ok(kept)
}

/// The y axis of a value chart. A log axis is drawn as a linear one over log10 of the values,
/// which gives both kinds one coordinate type; `to_plot` and `label` convert. A linear x axis
/// with its own ticks is one too.
#[derive(Debug, Clone)]
struct ValueAxis {
    log: bool,
    /// In plot units (log10 of the value on a log axis).
    range: Range<f64>,
    bold: Vec<f64>,
    light: Vec<f64>,
}

impl ValueAxis {
    /// The axis around `values` (drawable ones, at least one); `with_zero` keeps 0 on a linear
    /// axis, where bars start.
    fn new(values: impl Iterator<Item = f64>, log: bool, with_zero: bool) -> Self {
        let (lo, hi) = min_max(values).unwrap_or((1.0, 1.0));
        if log {
            let mut range = log_range(lo, hi);
            if with_zero {
                // Bars rise from the bottom of the axis: put it at a whole decade at least 0.3
                // decades under the smallest value, so that the shortest bar stays visible.
                range.start = 10f64.powf((lo.log10() - 0.3).floor());
            }
            let (bold, light) = log_ticks(range.start, range.end);
            return ValueAxis {
                log,
                range: range.start.log10()..range.end.log10(),
                bold: bold.iter().map(|v| v.log10()).collect(),
                light: light.iter().map(|v| v.log10()).collect(),
            };
        }
        let (lo, hi) = if with_zero {
            (lo.min(0.0), hi.max(0.0))
        } else {
            (lo, hi)
        };
        let pad = if hi > lo {
            (hi - lo) * 0.05
        } else if lo != 0.0 {
            lo.abs() * 0.1
        } else {
            1.0
        };
        // Bars rise from 0: no padding below a zero floor (or above a zero ceiling).
        let lo = if with_zero && lo == 0.0 {
            0.0
        } else {
            lo - pad
        };
        let hi = if with_zero && hi == 0.0 && lo < 0.0 {
            0.0
        } else {
            hi + pad
        };
        ValueAxis {
            log,
            range: lo..hi,
            bold: linear_ticks(lo, hi),
            light: Vec::new(),
        }
    }

    fn to_plot(&self, v: f64) -> f64 {
        if self.log {
            v.log10()
        } else {
            v
        }
    }

    fn label(&self, t: f64) -> String {
        format_number(if self.log { 10f64.powf(t) } else { t })
    }
}

// Plotters' own linear f64 axis with custom ticks (`WithKeyPoints<RangedCoordf64>`) has no
// value formatter, which its mesh requires even when every label is formatted by hand.
impl Ranged for ValueAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        RangedCoordf64::from(self.range.clone()).map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            self.light.clone()
        } else {
            self.bold.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.clone()
    }
}

/// How a legend entry shows its series.
#[derive(Clone, Copy)]
enum Swatch {
    Bar,
    Line,
}

fn legend_label(s: &ChartSeries, kept: &[Option<f64>]) -> String {
    if kept.iter().all(Option::is_none) {
        format!("{} (no data)", s.name)
    } else {
        s.name.clone()
    }
}

/// Width of the legend strip right of the plot: the longest label, clamped so that the plot
/// keeps most of the figure.
fn legend_width(series: &[ChartSeries], kept: &[Vec<Option<f64>>]) -> u32 {
    let widest = series
        .iter()
        .zip(kept)
        .map(|(s, k)| text_width(&legend_label(s, k), 16))
        .max()
        .unwrap_or(0);
    (widest + 60).clamp(120, 360)
}

/// Width of `text` in the bundled font, or an estimate should it fail to lay out.
fn text_width(text: &str, size: u32) -> u32 {
    (FONT, size)
        .into_font()
        .box_size(text)
        .map(|(w, _)| w)
        .unwrap_or(text.chars().count() as u32 * size * 3 / 5)
}

/// Size of a [`grouped_bars`] figure: [`CHART_SIZE`], widened so that each group is as wide as
/// its label and has room for its bars.
fn bar_chart_size(groups: &[String], series: usize, legend_w: u32) -> (u32, u32) {
    let widest = groups.iter().map(|g| text_width(g, 16)).max().unwrap_or(0);
    let pitch = (widest + 16).max(series as u32 * 10 + 12);
    let needed = (groups.len() as u32)
        .saturating_mul(pitch)
        .saturating_add(2 * CHART_MARGIN + CHART_Y_LABEL_AREA + legend_w);
    (needed.clamp(CHART_SIZE.0, BARS_MAX_WIDTH), CHART_SIZE.1)
}

/// Draws one entry per series, top down, in the legend strip.
fn draw_legend(
    area: &DrawingArea<BitMapBackend<'_>, Shift>,
    series: &[ChartSeries],
    kept: &[Vec<Option<f64>>],
    swatch: Swatch,
) -> DrawResult {
    let style = TextStyle::from((FONT, 16).into_font())
        .color(&BLACK)
        .pos(Pos::new(HPos::Left, VPos::Center));
    // Level with the top of the plot, below the caption.
    let top = 80;
    for (j, (s, k)) in series.iter().zip(kept).enumerate() {
        let color = PALETTE[j % PALETTE.len()];
        let y = top + j as i32 * LEGEND_ROW;
        match swatch {
            Swatch::Bar => {
                area.draw(&Rectangle::new([(4, y - 7), (20, y + 7)], color.filled()))?;
            }
            Swatch::Line => {
                area.draw(&PathElement::new(
                    vec![(0, y), (24, y)],
                    color.stroke_width(2),
                ))?;
                area.draw(&Circle::new((12, y), 4, color.filled()))?;
            }
        }
        area.draw_text(&legend_label(s, k), &style, (32, y))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{decode_png, pixel, TempDir};
    use crate::Error;

    fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    /// Runs of adjacent image columns in which at least `min` pixels are `color`, left to right,
    /// as `(first column, most such pixels in one column)`: the bars of one series, or the
    /// pieces of one line.
    fn column_runs(img: &image::RgbImage, color: RGBColor, min: u32) -> Vec<(u32, u32)> {
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut in_run = false;
        for x in 0..img.width() {
            let n = (0..img.height())
                .filter(|&y| pixel(img, (x as i32, y as i32)) == color)
                .count() as u32;
            if n >= min {
                match runs.last_mut() {
                    Some(run) if in_run => run.1 = run.1.max(n),
                    _ => runs.push((x, n)),
                }
            }
            in_run = n >= min;
        }
        runs
    }

    fn assert_near(a: u32, b: f64, what: &str) {
        assert!(
            (f64::from(a) - b).abs() <= 2.0,
            "{what}: {a} pixels, expected {b:.1}"
        );
    }

    #[test]
    fn grouped_bars_are_as_tall_as_their_values() {
        let dir = TempDir::new("bars");
        let path = dir.0.join("bars.png");
        let groups = names(&["darcy", "burgers", "navier-stokes"]);
        let series = [
            ChartSeries::new("FNO", vec![Some(1.0), Some(2.0), Some(4.0)]),
            ChartSeries::new("UNO", vec![None, Some(3.0), Some(f64::NAN)]),
            ChartSeries::new("nothing yet", vec![None, None, None]),
        ];
        grouped_bars(&path, "test error", &groups, &series, "relative L2", false).unwrap();
        let img = decode_png(&path);
        assert_eq!(img.dimensions(), CHART_SIZE);
        assert_eq!(dir.entries(), ["bars.png"]);

        // Bars start at 0 on a linear axis, so their heights are proportional to the values;
        // the legend swatches (16 pixels) stay under the threshold of 20.
        let fno = column_runs(&img, PALETTE[0], 20);
        assert_eq!(fno.len(), 3, "FNO bars: {fno:?}");
        let unit = f64::from(fno[0].1);
        assert!(unit > 50.0, "a bar of 1 is {unit} pixels");
        assert_near(fno[1].1, 2.0 * unit, "FNO burgers");
        assert_near(fno[2].1, 4.0 * unit, "FNO navier-stokes");
        // UNO is missing in the first group and NaN in the last: one bar, in the middle group.
        let uno = column_runs(&img, PALETTE[1], 20);
        assert_eq!(uno.len(), 1, "UNO bars: {uno:?}");
        assert_near(uno[0].1, 3.0 * unit, "UNO burgers");
        assert!(fno[1].0 < uno[0].0 && uno[0].0 < fno[2].0);

        // Changing one value changes the figure.
        let mut changed = series.clone();
        changed[0].values[2] = Some(3.5);
        let path2 = dir.0.join("changed.png");
        grouped_bars(
            &path2,
            "test error",
            &groups,
            &changed,
            "relative L2",
            false,
        )
        .unwrap();
        let img2 = decode_png(&path2);
        let differing = img.pixels().zip(img2.pixels()).filter(|(a, b)| a != b);
        assert!(differing.count() > 100);
    }

    #[test]
    fn log_bars_rise_by_the_same_height_per_decade() {
        let dir = TempDir::new("log-bars");
        let path = dir.0.join("bars.png");
        let groups = names(&["a", "b", "c"]);
        let series = [
            ChartSeries::new("decades", vec![Some(1e-3), Some(1e-2), Some(1e-1)]),
            // A log axis cannot show 0 or -1: they are gaps, not errors.
            ChartSeries::new("partial", vec![Some(0.0), Some(-1.0), Some(0.05)]),
        ];
        grouped_bars(&path, "", &groups, &series, "error", true).unwrap();
        let img = decode_png(&path);
        assert_eq!(img.dimensions(), CHART_SIZE);
        let runs = column_runs(&img, PALETTE[0], 20);
        assert_eq!(runs.len(), 3, "{runs:?}");
        let (h1, h2, h3) = (runs[0].1, runs[1].1, runs[2].1);
        assert!(h1 > 20 && h2 > h1 && h3 > h2, "{runs:?}");
        assert_near(h3 - h2, f64::from(h2 - h1), "one decade");
        assert_eq!(column_runs(&img, PALETTE[1], 20).len(), 1);
    }

    #[test]
    fn grouped_bars_widen_for_many_long_labels() {
        let dir = TempDir::new("wide-bars");
        let path = dir.0.join("bars.png");
        let groups: Vec<String> = (0..30).map(|i| format!("benchmark-{i:02}")).collect();
        let series = [ChartSeries::new(
            "model",
            (0..30).map(|i| Some(10.0 + i as f64)).collect(),
        )];
        grouped_bars(&path, "t", &groups, &series, "y", false).unwrap();
        let (w, h) = decode_png(&path).dimensions();
        assert_eq!(h, CHART_SIZE.1);
        assert!(w > CHART_SIZE.0 && w <= BARS_MAX_WIDTH, "width {w}");
        assert_eq!(column_runs(&decode_png(&path), PALETTE[0], 20).len(), 30);
    }

    #[test]
    fn line_chart_draws_lines_that_break_at_missing_values() {
        let dir = TempDir::new("lines");
        let x = [43.0, 85.0, 141.0, 211.0, 421.0];
        let draw = |name: &str, middle: Option<f64>, log_y: bool| {
            let path = dir.0.join(name);
            let series = [
                ChartSeries::new(
                    "flat",
                    vec![Some(1.0), Some(1.0), middle, Some(1.0), Some(1.0)],
                ),
                ChartSeries::new(
                    "rising",
                    vec![
                        Some(0.01),
                        Some(0.1),
                        Some(f64::INFINITY),
                        Some(2.0),
                        Some(3.0),
                    ],
                ),
                ChartSeries::new("missing", vec![None; 5]),
            ];
            line_chart(
                &path,
                "resolution",
                &x,
                "resolution",
                &series,
                "error",
                log_y,
            )
            .unwrap();
            decode_png(&path)
        };
        for log_y in [false, true] {
            let whole = draw("whole.png", Some(1.0), log_y);
            let broken = draw("broken.png", None, log_y);
            assert_eq!(whole.dimensions(), CHART_SIZE);
            let coloured = whole.pixels().filter(|p| p[0] != p[1] || p[1] != p[2]);
            assert!(coloured.count() > 500, "the lines were not drawn");
            // One line plus its legend swatch; a gap at the middle x splits the line in two.
            assert_eq!(column_runs(&whole, PALETTE[0], 1).len(), 2, "log_y {log_y}");
            assert_eq!(
                column_runs(&broken, PALETTE[0], 1).len(),
                3,
                "log_y {log_y}"
            );
            assert!(column_runs(&whole, PALETTE[1], 1).len() >= 2);
        }
        assert_eq!(dir.entries(), ["broken.png", "whole.png"]);
    }

    #[test]
    fn bad_chart_input_is_refused_and_leaves_no_file() {
        let dir = TempDir::new("bad-charts");
        let path = dir.0.join("bad.png");
        let groups = names(&["a", "b"]);
        let x = [1.0, 2.0];
        let good = ChartSeries::new("good", vec![Some(1.0), Some(2.0)]);
        let short = ChartSeries::new("short", vec![Some(1.0)]);
        let mismatched = [good.clone(), short.clone()];
        let not_positive = [ChartSeries::new("zero", vec![Some(0.0), Some(-3.0)])];
        let not_finite = [ChartSeries::new(
            "nan",
            vec![Some(f64::NAN), Some(f64::INFINITY)],
        )];
        let bars = |s: &[ChartSeries], log| grouped_bars(&path, "t", &groups, s, "y", log);
        let lines = |x: &[f64], s: &[ChartSeries], log| line_chart(&path, "t", x, "x", s, "y", log);
        let refusals = [
            (bars(&[], false), "no series"),
            (bars(&mismatched, false), "\"short\" has 1 values"),
            (bars(&not_positive, true), "log axis"),
            (bars(&not_finite, false), "no series has a finite value"),
            (lines(&x, &[], false), "no series"),
            (lines(&x, &[short], false), "expected 2 (one per x value)"),
            (lines(&x, &not_positive, true), "log axis"),
            (
                lines(&x, &not_finite, false),
                "no series has a finite value",
            ),
            (lines(&[1.0, f64::NAN], &[good], false), "x[1] is NaN"),
        ];
        for (r, expected) in refusals {
            match r {
                Err(Error::Plot { path: p, msg }) => {
                    assert_eq!(p, path);
                    assert!(msg.contains(expected), "{msg:?} lacks {expected:?}");
                }
                other => panic!("expected Error::Plot ({expected}), got {other:?}"),
            }
        }
        assert!(dir.entries().is_empty(), "left behind: {:?}", dir.entries());

        // A single value or a single x is drawable.
        let one = [ChartSeries::new("one", vec![Some(0.5)])];
        grouped_bars(&path, "t", &groups[..1], &one, "y", true).unwrap();
        line_chart(&path, "t", &[3.0], "x", &one, "y", false).unwrap();
        assert_eq!(dir.entries(), ["bad.png"]);
    }
}
