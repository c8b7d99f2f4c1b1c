//! Checks the ONO port against a reference fixture (any configuration its JSON describes).
//!
//! ```text
//! cargo run -p ono-models --example check_reference -- CASE.safetensors CASE.json [--device cpu|cuda] [--f32-only|--f64-only]
//! ```
//! Prints every compared quantity with its normwise relative error and tolerance (float32: the
//! JSON's `suggested_tolerances`; float64: 1e-9 on outputs, 1e-8 on gradients), and exits 1 if any
//! is beyond its tolerance.

use std::path::PathBuf;
use std::process::ExitCode;

use tch::{Device, Kind};

use ono_models::reference_check::{check, Fixture, F64_TOLERANCES};

fn main() -> ExitCode {
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run() -> anyhow::Result<bool> {
    let mut files = Vec::new();
    let mut device = Device::Cpu;
    let (mut f32_on, mut f64_on) = (true, true);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--device" => {
                device = match args.next().as_deref() {
                    Some("cpu") => Device::Cpu,
                    Some("cuda") => Device::Cuda(0),
                    other => anyhow::bail!("--device takes cpu or cuda, got {other:?}"),
                }
            }
            "--f32-only" => f64_on = false,
            "--f64-only" => f32_on = false,
            "-h" | "--help" => {
                println!(
                    "usage: check_reference CASE.safetensors CASE.json [--device cpu|cuda] [--f32-only|--f64-only]"
                );
                return Ok(true);
            }
            _ => files.push(PathBuf::from(arg)),
        }
    }
    let [weights, json] = files.as_slice() else {
        anyhow::bail!("expected CASE.safetensors and CASE.json, got {files:?} (see --help)");
    };
    let fixture = Fixture::load(weights, json)?;
    let mut ok = true;
    if f32_on {
        let report = check(&fixture, Kind::Float, device, fixture.f32_tolerances()?)?;
        print!("{report}");
        ok &= report.passed();
    }
    if f64_on {
        let report = check(&fixture, Kind::Double, device, F64_TOLERANCES)?;
        print!("{report}");
        ok &= report.passed();
    }
    println!("{}", if ok { "all within tolerance" } else { "FAILED" });
    Ok(ok)
}
