//! The `ono` command line's work, as a library: each command group is a module that the binary
//! (`src/main.rs`, clap and the exit status only) calls, and that tests and other programs can
//! call and read the typed outputs of (`reproduce::execute::Outcome`, `compare::Comparison`, …)
//! instead of re-declaring them.

pub mod bench;
pub mod check;
pub mod compare;
pub mod data;
pub mod eval;
pub mod figures;
pub mod info;
pub mod message;
pub mod predict;
pub mod reproduce;
pub mod train;

use anyhow::Result;
use tch::Device;

/// `cpu`, `cuda` or `cuda:N`.
pub fn device(s: &str) -> Result<Device> {
    ono_train::config::parse_device(s).map_err(|m| anyhow::anyhow!("--device: {m}"))
}
