//! `ono check-reference`: a port against one reference fixture case (weights, inputs, outputs and
//! gradients made by the reference PyTorch code), in float32 and float64.

use std::path::Path;

use anyhow::Result;
use ono_models::fixture::{check, Fixture, Report};
use tch::{Device, Kind};

/// Which precisions to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precisions {
    pub f32: bool,
    pub f64: bool,
}

/// Checks the case; prints every compared quantity and, on failure, the tensors beyond their
/// tolerances. Returns whether every check passed.
pub fn run(weights: &Path, json: &Path, device: Device, precisions: Precisions) -> Result<bool> {
    let fixture = Fixture::load(weights, json)?;
    let mut reports = Vec::new();
    if precisions.f32 {
        reports.push(check(
            &fixture,
            Kind::Float,
            device,
            &fixture.f32_tolerances()?,
        )?);
    }
    if precisions.f64 {
        reports.push(check(
            &fixture,
            Kind::Double,
            device,
            &fixture.f64_tolerances(),
        )?);
    }
    for r in &reports {
        print!("{r}");
    }
    let failed: Vec<String> = reports.iter().flat_map(failures).collect();
    if failed.is_empty() {
        println!(
            "{} ({}): all within tolerance",
            fixture.name,
            fixture.config.arch()
        );
        Ok(true)
    } else {
        println!("{}: FAILED", fixture.name);
        for line in &failed {
            println!("  {line}");
        }
        Ok(false)
    }
}

/// One line per check beyond its tolerance, naming the tensor.
fn failures(r: &Report) -> Vec<String> {
    r.checks
        .iter()
        .filter(|c| !c.passed())
        .map(|c| {
            format!(
                "{:?} {}: rel err {:.3e} > tol {:.1e}",
                r.kind, c.name, c.error, c.tolerance
            )
        })
        .collect()
}
