//! Debian packages that crates link against: installed with apt-get only when missing and only as
//! root; otherwise the exact command is printed and setup stops.

use std::process::Command;

use anyhow::{bail, Context, Result};

use crate::torch::say;

pub struct Package {
    pub name: &'static str,
    pub why: &'static str,
}

pub fn ensure(packages: &[Package]) -> Result<()> {
    if !has_dpkg() {
        say(
            "no dpkg-query here (not Debian?); assuming the system libraries are installed: \
             OpenBLAS with LAPACK is needed by the tests",
        );
        return Ok(());
    }
    let missing: Vec<&Package> = packages.iter().filter(|p| !installed(p.name)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|p| p.name).collect();
    for p in &missing {
        say(format!("missing Debian package {} ({})", p.name, p.why));
    }
    if !is_root() {
        bail!(
            "install them, then run again:\n    sudo apt-get update && sudo apt-get install -y {}",
            names.join(" ")
        );
    }
    say(format!("installing {} with apt-get", names.join(" ")));
    apt(&["update", "-q"])?;
    let mut args = vec!["install", "-y", "-q", "--no-install-recommends"];
    args.extend(&names);
    apt(&args)?;
    if let Some(p) = missing.iter().find(|p| !installed(p.name)) {
        bail!(
            "apt-get reported success but {} is still not installed",
            p.name
        );
    }
    Ok(())
}

fn apt(args: &[&str]) -> Result<()> {
    // apt's progress goes to stderr: `cargo xtask env`'s stdout is evaluated by the shell.
    let status = Command::new("apt-get")
        .args(args)
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(std::io::stderr())
        .status()
        .context("could not run apt-get")?;
    if !status.success() {
        bail!("apt-get {} failed ({status})", args.join(" "));
    }
    Ok(())
}

fn has_dpkg() -> bool {
    Command::new("dpkg-query")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

fn installed(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f=${db:Status-Status}", name])
        .output()
        .map(|o| o.status.success() && o.stdout.trim_ascii() == b"installed")
        .unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout.trim_ascii() == b"0")
        .unwrap_or(false)
}
