//! PNG figures of ono runs and results: training curves ([`training_curves`]), field panels
//! ([`field_panels`]), grouped bars ([`grouped_bars`]) and line charts ([`line_chart`]).
//!
//! The functions take plain slices (`f32` fields with their grid shape, `f64` series), so the
//! crate knows nothing of tensors or of training: the trainer hands its data over as host arrays
//! (`ono_train::observer`) and the `ono` binary draws them. Colours of fields are plotters' own
//! viridis ([`plotters::style::colors::colormaps::ViridisRGB`]).
//!
//! Text is drawn with DejaVu Sans compiled into the binary (`assets/DejaVuSans.ttf`, licence in
//! `assets/DejaVuSans-LICENSE.txt`), so figures render identically on machines without
//! fontconfig or any system font. Every PNG is drawn in memory and written with the one atomic
//! writer ([`ono_io::atomic`]), so a reader never sees a half-written figure and a failed plot
//! leaves the previous one in place.
//!
//! By file: `curves.rs`, `fields.rs`, `charts.rs` (one kind of figure each), `ticks.rs` (axis
//! ranges, ticks and number labels), `canvas.rs` (font, palette, the PNG write).

mod canvas;
mod charts;
mod curves;
mod error;
mod fields;
#[cfg(test)]
mod test_support;
mod ticks;

pub use charts::{grouped_bars, line_chart, ChartSeries, BARS_MAX_WIDTH, CHART_SIZE};
pub use curves::{training_curves, Series, CURVES_SIZE};
pub use error::{Error, Result};
pub use fields::{field_panels, field_panels_size, Panel, FIELD_COLUMNS, NAN_COLOR};
