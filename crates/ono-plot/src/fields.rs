//! Field panels: input, truth, prediction and error of a few samples on a 2-D grid, as heatmaps.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::canvas::{plot_error, write_png_atomic, DrawResult, FONT};
use crate::ticks::{format_number, min_max};
use crate::Result;

/// Colour of NaN / infinite field values: a grey that viridis never produces.
pub const NAN_COLOR: RGBColor = RGBColor(150, 150, 150);

/// The longest side of one heatmap, in pixels.
const HEATMAP_SIDE: usize = 200;
/// The shortest side of one heatmap, so that degenerate grids (1×n) stay visible and the
/// min / max labels of the colour bar do not overlap.
const HEATMAP_MIN_SIDE: usize = 48;
/// A field figure taller than this is refused rather than allocating a huge bitmap.
const FIELD_MAX_HEIGHT: u32 = 16_384;

/// The titles of the four columns of [`field_panels`].
pub const FIELD_COLUMNS: [&str; 4] = ["input", "truth", "prediction", "|prediction − truth|"];

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

/// Width and height in pixels of the [`field_panels`] figure of `rows` panels of
/// `height × width` fields; `None` when it cannot be drawn (no rows, an empty shape, too tall).
pub fn field_panels_size(height: usize, width: usize, rows: usize) -> Option<(u32, u32)> {
    FieldLayout::new(height, width, rows).ok().map(|l| l.size())
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

/// Plotters' viridis at `t ∈ [0, 1]`; a non-finite `t` is 0 (plotters' own map would panic on
/// NaN, and a figure must never take a run down).
fn viridis(t: f64) -> RGBColor {
    let t = if t.is_finite() {
        t.clamp(0.0, 1.0)
    } else {
        0.0
    };
    ViridisRGB::get_color(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curves::{training_curves, Series};
    use crate::test_support::{decode_png, pixel, TempDir};
    use crate::Error;

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

    /// Plotters' viridis (8 stops, linearly interpolated) is matplotlib's: its ends #440154 and
    /// #fde725 within one step of rounding, its middle #21918c within three. A non-finite
    /// position is the dark end, not a panic.
    #[test]
    fn viridis_is_matplotlibs() {
        let near = |c: RGBColor, (r, g, b): (u8, u8, u8), tol: u8| {
            c.0.abs_diff(r) <= tol && c.1.abs_diff(g) <= tol && c.2.abs_diff(b) <= tol
        };
        assert!(
            near(viridis(0.0), (0x44, 0x01, 0x54), 1),
            "{:?}",
            viridis(0.0)
        );
        assert!(
            near(viridis(1.0), (0xfd, 0xe7, 0x25), 1),
            "{:?}",
            viridis(1.0)
        );
        assert!(
            near(viridis(0.5), (0x21, 0x91, 0x8c), 3),
            "{:?}",
            viridis(0.5)
        );
        assert_eq!(viridis(f64::NAN), viridis(0.0));
        assert_eq!(viridis(2.0), viridis(1.0));
        assert_ne!(viridis(0.5), NAN_COLOR);
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
            assert_eq!(field_panels_size(h, w, 1), Some(layout.size()));
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
}
