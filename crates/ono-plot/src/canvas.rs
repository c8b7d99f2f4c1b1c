//! The canvas every figure is drawn on: the bundled font, the palette, and the atomic PNG write.

use std::error::Error as StdError;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::OnceLock;

use image::codecs::png::PngEncoder;
use image::{ColorType, ImageEncoder};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::{Error, Result};

/// The font family every text element asks for; it is the name DejaVu Sans is registered under.
pub(crate) const FONT: &str = "sans-serif";

/// Colours of the successive training curves (Tableau 10), chosen to be told apart on white.
pub(crate) const PALETTE: [RGBColor; 10] = [
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

/// What the drawing closures return: plotters' errors, boxed, become [`Error::Plot`] messages.
pub(crate) type DrawResult = std::result::Result<(), Box<dyn StdError>>;

/// Draws a `size` bitmap with `draw`, encodes it as PNG in memory and writes it to `path` with
/// the one atomic writer ([`ono_io::atomic`]), so the target is either the complete new figure or
/// untouched.
pub(crate) fn write_png_atomic<F>(path: &Path, size: (u32, u32), draw: F) -> Result<()>
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
pub(crate) fn register_font() -> std::result::Result<(), String> {
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

pub(crate) fn plot_error(path: &Path, msg: impl Into<String>) -> Error {
    Error::Plot {
        path: path.to_path_buf(),
        msg: msg.into(),
    }
}
