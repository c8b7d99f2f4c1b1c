//! PNG figures: training curves and field panels.
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

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use plotters::style::FontStyle;

use crate::{Error, Result};

/// The font family every text element asks for; it is the name DejaVu Sans is registered under.
const FONT: &str = "sans-serif";

/// Size of a training-curve figure, in pixels.
pub const CURVES_SIZE: (u32, u32) = (1000, 640);

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
