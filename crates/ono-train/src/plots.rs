//! PNG figures: training curves, field panels, and grouped-bar and line charts of results.
//!
//! Text is drawn with DejaVu Sans compiled into the binary (`assets/DejaVuSans.ttf`, licence in
//! `assets/DejaVuSans-LICENSE.txt`), so figures render identically on machines without
//! fontconfig or any system font. Every PNG is drawn to a temporary file next to its target and
//! renamed over it, so a reader never sees a half-written figure and a failed plot leaves the
//! previous one in place.

use std::error::Error as StdError;
use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::OnceLock;

use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use crate::{Error, Result};

/// The font family every text element asks for; it is the name DejaVu Sans is registered under.
const FONT: &str = "sans-serif";

/// Size of a training-curve figure, in pixels.
pub const CURVES_SIZE: (u32, u32) = (1000, 640);

/// Size of a [`line_chart`] figure, and of a [`grouped_bars`] one unless its labels need more width.
pub const CHART_SIZE: (u32, u32) = CURVES_SIZE;

/// Colour of NaN / infinite field values: a grey that viridis never produces.
pub const NAN_COLOR: RGBColor = RGBColor(150, 150, 150);

/// Colours of the successive training curves (Tableau 10), chosen to be told apart on white.
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Matplotlib's viridis at 0, 0.1, …, 1. Plotters' own copy sits behind its `colormaps`
/// feature, which the workspace does not enable, and eleven stops interpolate it closely.
const VIRIDIS: [(u8, u8, u8); 11] = [
    (0x44, 0x01, 0x54),
    (0x48, 0x24, 0x75),
    (0x41, 0x44, 0x87),
    (0x35, 0x5f, 0x8d),
    (0x2a, 0x78, 0x8e),
    (0x21, 0x91, 0x8c),
    (0x22, 0xa8, 0x84),
    (0x44, 0xbf, 0x70),
    (0x7a, 0xd1, 0x51),
    (0xbd, 0xdf, 0x26),
    (0xfd, 0xe7, 0x25),
];

/// Series with at most this many plottable points get markers, so sparse curves (validation
/// every few epochs, a single point) stay visible.
const MARKER_MAX_POINTS: usize = 50;

/// The longest side of one heatmap, in pixels.
const HEATMAP_SIDE: usize = 200;
/// The shortest side of one heatmap, so that degenerate grids (1×n) stay visible and the
/// min / max labels of the colour bar do not overlap.
const HEATMAP_MIN_SIDE: usize = 48;
/// A field figure taller than this is refused rather than allocating a huge bitmap.
const FIELD_MAX_HEIGHT: u32 = 16_384;

/// The titles of the four columns of [`field_panels`].
pub const FIELD_COLUMNS: [&str; 4] = ["input", "truth", "prediction", "|prediction − truth|"];

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

/// One row of [`field_panels`]: three `height × width` fields, row-major, row 0 at the top.
#[derive(Debug, Clone, Copy)]
pub struct Panel<'a> {
    /// The model input (e.g. the coefficient field).
    pub input: &'a [f32],
    /// The reference solution.
    pub truth: &'a [f32],
    /// The model's prediction.
    pub prediction: &'a [f32],
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

/// Draws one row per panel and four columns (input, truth, prediction, |prediction − truth|)
/// of `height × width` heatmaps to the PNG `path`, using viridis.
///
/// Truth and prediction of a row share one colour scale so that they can be compared by eye;
/// input and error each get their own. Every heatmap has a colour bar labelled with its min and
/// max. Non-finite values are drawn in [`NAN_COLOR`] and ignored by the colour scales.
///
/// # Errors
/// [`Error::Plot`] when `panels` is empty, `height` or `width` is 0, a slice is not
/// `height * width` long, the figure would be too tall, or drawing fails; [`Error::File`] when the
/// file cannot be written.
pub fn field_panels(path: &Path, height: usize, width: usize, panels: &[Panel<'_>]) -> Result<()> {
    let layout = FieldLayout::new(height, width, panels.len()).map_err(|m| plot_error(path, m))?;
    let cells = height
        .checked_mul(width)
        .ok_or_else(|| plot_error(path, format!("field shape {height}×{width} overflows")))?;
    for (i, p) in panels.iter().enumerate() {
        for (name, field) in [
            ("input", p.input),
            ("truth", p.truth),
            ("prediction", p.prediction),
        ] {
            if field.len() != cells {
                return Err(plot_error(
                    path,
                    format!(
                        "panel {i}: {name} has {} values, expected {height}×{width} = {cells}",
                        field.len()
                    ),
                ));
            }
        }
    }

    write_png_atomic(path, layout.size(), |root| {
        let title_style = TextStyle::from((FONT, 19).into_font())
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        for (col, title) in FIELD_COLUMNS.iter().enumerate() {
            let (x, _) = layout.heatmap_origin(0, col);
            let centre = x + layout.heat_w as i32 / 2;
            root.draw_text(title, &title_style, (centre, layout.top as i32 / 2))?;
        }

        let row_style = TextStyle::from((FONT, 16).into_font().transform(FontTransform::Rotate270))
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        for (row, p) in panels.iter().enumerate() {
            let (_, y) = layout.heatmap_origin(row, 0);
            let centre = (layout.left as i32 / 2, y + layout.heat_h as i32 / 2);
            root.draw_text(&format!("sample {row}"), &row_style, centre)?;

            let error: Vec<f32> = p
                .prediction
                .iter()
                .zip(p.truth)
                .map(|(a, b)| (a - b).abs())
                .collect();
            let input_scale = finite_range(p.input.iter().copied());
            let shared = finite_range(p.truth.iter().chain(p.prediction).copied());
            let error_scale = finite_range(error.iter().copied());
            let fields: [(&[f32], Scale); 4] = [
                (p.input, input_scale),
                (p.truth, shared),
                (p.prediction, shared),
                (&error, error_scale),
            ];
            for (col, (field, scale)) in fields.into_iter().enumerate() {
                draw_heatmap(root, &layout, row, col, height, width, field, scale)?;
            }
        }
        Ok(())
    })
}

/// Pixel geometry of a [`field_panels`] figure; also what the tests probe pixels with.
#[derive(Debug, Clone, Copy)]
struct FieldLayout {
    /// Heatmap size in pixels.
    heat_w: usize,
    heat_h: usize,
    /// Width of the column of row labels.
    left: usize,
    /// Height of the band of column titles.
    top: usize,
    /// Horizontal pitch of the columns.
    cell_w: usize,
    /// Vertical pitch of the rows.
    row_h: usize,
    rows: usize,
}

impl FieldLayout {
    const GAP_TO_BAR: usize = 8;
    const BAR_W: usize = 14;
    const GAP_TO_LABELS: usize = 5;
    const LABEL_W: usize = 76;
    const GAP_TO_NEXT: usize = 18;
    /// Wide enough for the longest column title.
    const MIN_CELL_W: usize = 200;
    const ROW_GAP: usize = 22;
    const RIGHT: usize = 8;
    const BOTTOM: usize = 14;

    fn new(height: usize, width: usize, rows: usize) -> std::result::Result<Self, String> {
        if rows == 0 {
            return Err("no panels to draw".into());
        }
        if height == 0 || width == 0 {
            return Err(format!("empty field shape {height}×{width}"));
        }
        let long = height.max(width);
        // Small grids get an integer zoom so that every cell is the same number of pixels;
        // large ones are sampled down to HEATMAP_SIDE.
        let scale = if long <= HEATMAP_SIDE {
            (HEATMAP_SIDE / long) as f64
        } else {
            HEATMAP_SIDE as f64 / long as f64
        };
        let side = |n: usize| ((n as f64 * scale).round() as usize).max(HEATMAP_MIN_SIDE);
        let (heat_w, heat_h) = (side(width), side(height));
        let cell_w = (heat_w
            + Self::GAP_TO_BAR
            + Self::BAR_W
            + Self::GAP_TO_LABELS
            + Self::LABEL_W
            + Self::GAP_TO_NEXT)
            .max(Self::MIN_CELL_W);
        let layout = FieldLayout {
            heat_w,
            heat_h,
            left: 34,
            top: 44,
            cell_w,
            row_h: heat_h + Self::ROW_GAP,
            rows,
        };
        let total = (layout.top + Self::BOTTOM).saturating_add(rows.saturating_mul(layout.row_h));
        if total > FIELD_MAX_HEIGHT as usize {
            let fit = (FIELD_MAX_HEIGHT as usize - layout.top - Self::BOTTOM) / layout.row_h;
            return Err(format!(
                "{rows} panels of {height}×{width} would make a figure {total} pixels tall; \
                 at most {fit} fit"
            ));
        }
        Ok(layout)
    }

    /// Width and height of the whole figure.
    fn size(&self) -> (u32, u32) {
        let w = self.left + 4 * self.cell_w + Self::RIGHT;
        let h = self.top + self.rows * self.row_h + Self::BOTTOM;
        (w as u32, h as u32)
    }

    /// Top-left pixel of the heatmap at `row`, `col`.
    fn heatmap_origin(&self, row: usize, col: usize) -> (i32, i32) {
        let x = self.left + col * self.cell_w;
        let y = self.top + row * self.row_h;
        (x as i32, y as i32)
    }
}

/// The colour-scale limits `(min, max)` of a field; `None` when it has no finite value.
type Scale = Option<(f32, f32)>;

/// Draws one heatmap with its colour bar and min / max labels.
#[allow(clippy::too_many_arguments)]
fn draw_heatmap(
    root: &DrawingArea<BitMapBackend<'_>, Shift>,
    layout: &FieldLayout,
    row: usize,
    col: usize,
    height: usize,
    width: usize,
    field: &[f32],
    scale: Scale,
) -> DrawResult {
    let (x0, y0) = layout.heatmap_origin(row, col);
    let (hw, hh) = (layout.heat_w, layout.heat_h);
    // Nearest-neighbour sampling of the grid: one lookup per output pixel, whatever the grid.
    for py in 0..hh {
        let r = py * height / hh;
        for px in 0..hw {
            let c = px * width / hw;
            let v = field[r * width + c];
            let color = match scale {
                Some((lo, hi)) if v.is_finite() => viridis(normalise(v, lo, hi)),
                _ => NAN_COLOR,
            };
            root.draw_pixel((x0 + px as i32, y0 + py as i32), &color)?;
        }
    }
    let frame = RGBColor(90, 90, 90);
    let (x1, y1) = (x0 + hw as i32, y0 + hh as i32);
    root.draw(&Rectangle::new([(x0 - 1, y0 - 1), (x1, y1)], frame))?;

    let bx0 = x1 + FieldLayout::GAP_TO_BAR as i32;
    let bx1 = bx0 + FieldLayout::BAR_W as i32;
    for py in 0..hh {
        let t = if hh > 1 {
            1.0 - py as f64 / (hh - 1) as f64
        } else {
            0.5
        };
        // A constant field is drawn in the middle colour (see `normalise`); a gradient bar
        // next to it would suggest a range that is not there.
        let color = match scale {
            Some((lo, hi)) if lo < hi => viridis(t),
            Some(_) => viridis(0.5),
            None => NAN_COLOR,
        };
        let y = y0 + py as i32;
        root.draw(&PathElement::new(vec![(bx0, y), (bx1 - 1, y)], color))?;
    }
    root.draw(&Rectangle::new([(bx0 - 1, y0 - 1), (bx1, y1)], frame))?;

    let lx = bx1 + FieldLayout::GAP_TO_LABELS as i32;
    let font = (FONT, 14).into_font();
    let top = TextStyle::from(font.clone()).pos(Pos::new(HPos::Left, VPos::Top));
    let bottom = TextStyle::from(font.clone()).pos(Pos::new(HPos::Left, VPos::Bottom));
    let middle = TextStyle::from(font).pos(Pos::new(HPos::Left, VPos::Center));
    let centre = (lx, y0 + hh as i32 / 2);
    match scale {
        Some((lo, hi)) if lo < hi => {
            root.draw_text(&format_number(f64::from(hi)), &top, (lx, y0))?;
            root.draw_text(&format_number(f64::from(lo)), &bottom, (lx, y1))?;
        }
        Some((lo, _)) => {
            let text = format!("const {}", format_number(f64::from(lo)));
            root.draw_text(&text, &middle, centre)?;
        }
        None => root.draw_text("all NaN", &middle, centre)?,
    }
    Ok(())
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

/// Round ticks (1, 2, 2.5 or 5 times a power of ten apart) over `[lo, hi]`, at most 10 of them.
fn linear_ticks(lo: f64, hi: f64) -> Vec<f64> {
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
fn x_ticks(x: &[f64], lo: f64, hi: f64) -> Vec<f64> {
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

/// What the drawing closures return: plotters' errors, boxed, become [`Error::Plot`] messages.
type DrawResult = std::result::Result<(), Box<dyn StdError>>;

/// Draws a `size` bitmap with `draw`, encodes it as PNG in memory and writes it to `path` with
/// the one atomic writer ([`ono_io::atomic`]), so the target is either the complete new figure or
/// untouched.
fn write_png_atomic<F>(path: &Path, size: (u32, u32), draw: F) -> Result<()>
where
    F: FnOnce(&DrawingArea<BitMapBackend<'_>, Shift>) -> DrawResult,
{
    register_font().map_err(|m| plot_error(path, m))?;
    if path.file_name().is_none() {
        return Err(plot_error(path, "the path has no file name"));
    }
    let (width, height) = size;
    let mut rgb = vec![0u8; width as usize * height as usize * 3];
    // Plotters can panic on odd input; a figure must never take a training run down with it.
    let drawn = catch_unwind(AssertUnwindSafe(|| -> DrawResult {
        let root = BitMapBackend::with_buffer(&mut rgb, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
        Ok(())
    }));
    let failure = match drawn {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e.to_string()),
        Err(panic) => Some(format!("drawing panicked: {}", panic_message(&*panic))),
    };
    if let Some(msg) = failure {
        return Err(plot_error(path, msg));
    }
    ono_io::atomic::write_atomic_with(path, |out| {
        PngEncoder::new(out)
            .write_image(&rgb, width, height, ColorType::Rgb8)
            .map_err(std::io::Error::other)
    })?;
    Ok(())
}

/// Registers the bundled DejaVu Sans as plotters' `sans-serif`, once per process.
fn register_font() -> std::result::Result<(), String> {
    static REGISTERED: OnceLock<std::result::Result<(), String>> = OnceLock::new();
    REGISTERED
        .get_or_init(|| {
            plotters::style::register_font(
                FONT,
                FontStyle::Normal,
                include_bytes!("../assets/DejaVuSans.ttf"),
            )
            .map_err(|_| "the bundled DejaVuSans.ttf is not a valid font".to_string())
        })
        .clone()
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

fn plot_error(path: &Path, msg: impl Into<String>) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}

fn min_max(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values.fold(None, |acc, v| match acc {
        None => Some((v, v)),
        Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
    })
}

/// Min and max of the finite values, or `None` when there is none.
fn finite_range(values: impl Iterator<Item = f32>) -> Scale {
    min_max(values.filter(|v| v.is_finite()).map(f64::from)).map(|(a, b)| (a as f32, b as f32))
}

/// Maps `v` to `[0, 1]`; a constant field sits in the middle of the colour map.
fn normalise(v: f32, lo: f32, hi: f32) -> f64 {
    let span = f64::from(hi) - f64::from(lo);
    if span > 0.0 {
        ((f64::from(v) - f64::from(lo)) / span).clamp(0.0, 1.0)
    } else {
        0.5
    }
}

/// Viridis at `t ∈ [0, 1]`, linearly interpolated between the stops.
fn viridis(t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    let pos = t * (VIRIDIS.len() - 1) as f64;
    let i = (pos.floor() as usize).min(VIRIDIS.len() - 2);
    let f = pos - i as f64;
    let (a, b) = (VIRIDIS[i], VIRIDIS[i + 1]);
    let mix = |p: u8, q: u8| (f64::from(p) + (f64::from(q) - f64::from(p)) * f).round() as u8;
    RGBColor(mix(a.0, b.0), mix(a.1, b.1), mix(a.2, b.2))
}

/// The y range of a log axis around `[lo, hi]` (both > 0), padded by 4% of its span in log
/// space so that curves do not run along the frame.
fn log_range(lo: f64, hi: f64) -> Range<f64> {
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
fn log_ticks(lo: f64, hi: f64) -> (Vec<f64>, Vec<f64>) {
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
fn format_number(v: f64) -> String {
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

fn trim_zeros(s: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A fresh directory for one test; removed on drop unless `ONO_KEEP_TEST_PLOTS` is set, to
    /// let a person look at the figures.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(test: &str) -> Self {
            let dir =
                std::env::temp_dir().join(format!("ono-train-plots-{}-{test}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }

        fn entries(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(&self.0)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            if std::env::var_os("ONO_KEEP_TEST_PLOTS").is_some() {
                eprintln!("kept test figures in {}", self.0.display());
            } else {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn decode_png(path: &Path) -> image::RgbImage {
        let bytes = std::fs::read(path).unwrap();
        assert!(
            bytes.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{} lacks the PNG signature",
            path.display()
        );
        image::load_from_memory_with_format(&bytes, image::ImageFormat::Png)
            .unwrap()
            .to_rgb8()
    }

    fn pixel(img: &image::RgbImage, (x, y): (i32, i32)) -> RGBColor {
        let p = img.get_pixel(x as u32, y as u32);
        RGBColor(p[0], p[1], p[2])
    }

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

    /// A field that is min on the left and max on the right, with a NaN at the top-left corner.
    fn ramp(h: usize, w: usize, scale: f32) -> Vec<f32> {
        let mut f: Vec<f32> = (0..h * w).map(|i| scale * (i % w) as f32).collect();
        f[0] = f32::NAN;
        f
    }

    #[test]
    fn field_panels_draw_heatmaps_that_follow_the_data() {
        let dir = TempDir::new("fields");
        let path = dir.0.join("fields.png");
        let (h, w) = (24, 32);
        let input: Vec<f32> = (0..h * w).map(|i| ((i / w) as f32).sin()).collect();
        let truth = ramp(h, w, 1.0);
        let prediction: Vec<f32> = truth.iter().map(|v| v * 1.1 + 0.5).collect();
        let panels = [
            Panel {
                input: &input,
                truth: &truth,
                prediction: &prediction,
            },
            Panel {
                input: &input,
                truth: &prediction,
                prediction: &truth,
            },
        ];
        field_panels(&path, h, w, &panels).unwrap();
        let img = decode_png(&path);
        let layout = FieldLayout::new(h, w, panels.len()).unwrap();
        assert_eq!(img.dimensions(), layout.size());
        assert_eq!(dir.entries(), ["fields.png"]);

        // Truth panel of row 0: column 0 is the row minimum, column w-1 the maximum. The
        // prediction extends above the truth's max, so the right edge is bright but not the top.
        let (x0, y0) = layout.heatmap_origin(0, 1);
        let mid = y0 + layout.heat_h as i32 / 2;
        let left = pixel(&img, (x0 + 2, mid));
        let right = pixel(&img, (x0 + layout.heat_w as i32 - 2, mid));
        assert_eq!(
            left,
            viridis(0.0),
            "the minimum is not the dark end of viridis"
        );
        assert_ne!(left, right);
        assert!(
            right.1 > 150,
            "the maximum is not a bright colour: {right:?}"
        );
        // The NaN cell is grey and did not poison the scale (checked by the colours above).
        assert_eq!(pixel(&img, (x0 + 1, y0 + 1)), NAN_COLOR);
        // The prediction panel shares the scale: its right edge is the top of viridis.
        let (px0, _) = layout.heatmap_origin(0, 2);
        let p_right = pixel(&img, (px0 + layout.heat_w as i32 - 2, mid));
        assert_eq!(p_right, viridis(1.0));
    }

    #[test]
    fn large_and_degenerate_grids_fit() {
        let dir = TempDir::new("shapes");
        for (h, w) in [(1, 300), (513, 257), (1, 1)] {
            let f: Vec<f32> = (0..h * w).map(|i| i as f32).collect();
            let panel = Panel {
                input: &f,
                truth: &f,
                prediction: &f,
            };
            let path = dir.0.join(format!("f{h}x{w}.png"));
            field_panels(&path, h, w, &[panel]).unwrap();
            let img = decode_png(&path);
            let layout = FieldLayout::new(h, w, 1).unwrap();
            assert_eq!(img.dimensions(), layout.size());
            if h * w > 1 {
                // Row 0 is at the top: the first value (the minimum) is the top-left pixel.
                let (x0, y0) = layout.heatmap_origin(0, 1);
                let (x1, y1) = (x0 + layout.heat_w as i32 - 1, y0 + layout.heat_h as i32 - 1);
                assert_eq!(pixel(&img, (x0, y0)), viridis(0.0));
                // Down-sampling may skip the very last cell, so the maximum is only approached.
                let (RGBColor(r, g, b), RGBColor(er, eg, eb)) =
                    (pixel(&img, (x1, y1)), viridis(1.0));
                assert!(r.abs_diff(er) < 8 && g.abs_diff(eg) < 8 && b.abs_diff(eb) < 8);
            }
        }
    }

    #[test]
    fn bad_input_is_refused_and_leaves_no_file() {
        let dir = TempDir::new("bad");
        let path = dir.0.join("bad.png");
        let f = vec![0.0f32; 12];
        let short = vec![0.0f32; 11];
        let good = Panel {
            input: &f,
            truth: &f,
            prediction: &f,
        };
        let bad = Panel {
            input: &f,
            truth: &f,
            prediction: &short,
        };
        let all_nan = vec![f32::NAN; 12];
        let nan_panel = Panel {
            input: &all_nan,
            truth: &all_nan,
            prediction: &all_nan,
        };
        let refusals = [
            field_panels(&path, 3, 4, &[]),
            field_panels(&path, 3, 4, &[good, bad]),
            field_panels(&path, 4, 4, &[good]),
            field_panels(&path, 0, 4, &[good]),
            field_panels(&path, 3, 4, &vec![good; 500]),
            training_curves(&path, "t", "x", "y", &[]),
            training_curves(
                &path,
                "t",
                "x",
                "y",
                &[Series::new(
                    "bad",
                    vec![(0.0, 0.0), (1.0, -1.0), (2.0, f64::NAN)],
                )],
            ),
        ];
        for r in refusals {
            match r {
                Err(Error::Plot { path: p, msg }) => {
                    assert_eq!(p, path);
                    assert!(!msg.is_empty());
                }
                other => panic!("expected Error::Plot, got {other:?}"),
            }
        }
        assert!(dir.entries().is_empty(), "left behind: {:?}", dir.entries());

        // An all-NaN field is drawable: grey, labelled, no error.
        field_panels(&path, 3, 4, &[nan_panel]).unwrap();
        assert_eq!(dir.entries(), ["bad.png"]);
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
        assert_eq!(viridis(0.0), RGBColor(0x44, 0x01, 0x54));
        assert_eq!(viridis(1.0), RGBColor(0xfd, 0xe7, 0x25));
    }
}
