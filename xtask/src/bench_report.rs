//! `cargo xtask bench-report`: criterion's saved estimates as markdown tables, with the log-log
//! slope of time against N (least squares over every N measured), for docs/benchmarks.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// One measurement: (group, function, N) → median time in nanoseconds.
type Table = BTreeMap<String, BTreeMap<String, BTreeMap<i64, f64>>>;

pub fn report(criterion_dir: &Path) -> Result<String> {
    let mut table = Table::new();
    let mut files = Vec::new();
    collect(criterion_dir, &mut files)?;
    for bench in files {
        let meta: Value = read_json(&bench)?;
        let estimates: Value = read_json(&bench.with_file_name("estimates.json"))?;
        let (Some(group), Some(function), Some(n)) = (
            meta["group_id"].as_str(),
            meta["function_id"].as_str(),
            meta["value_str"]
                .as_str()
                .and_then(|v| v.parse::<i64>().ok()),
        ) else {
            continue;
        };
        let median = estimates["median"]["point_estimate"]
            .as_f64()
            .with_context(|| format!("no median in {}", bench.display()))?;
        table
            .entry(group.to_owned())
            .or_default()
            .entry(function.to_owned())
            .or_default()
            .insert(n, median);
    }
    if table.is_empty() {
        bail!(
            "no criterion results under {}: run `cargo xtask bench` first",
            criterion_dir.display()
        );
    }
    let mut out = String::new();
    for (group, rows) in &table {
        let ns: Vec<i64> = {
            let mut ns: Vec<i64> = rows.values().flat_map(|r| r.keys().copied()).collect();
            ns.sort_unstable();
            ns.dedup();
            ns
        };
        let _ = writeln!(out, "\n### {group}\n");
        let header: Vec<String> = ns.iter().map(|n| format!("N = {n}")).collect();
        let _ = writeln!(
            out,
            "| kernel | {} | slope | slopes between neighbours |",
            header.join(" | ")
        );
        let _ = writeln!(out, "|---|{}---|---|", "---:|".repeat(ns.len()));
        for (function, times) in rows {
            let cells: Vec<String> = ns
                .iter()
                .map(|n| times.get(n).map_or("–".into(), |t| format_ms(*t)))
                .collect();
            let slope = loglog_slope(times).map_or("–".into(), |s| format!("{s:.2}"));
            let pairs: Vec<(&i64, &f64)> = times.iter().collect();
            let local: Vec<String> = pairs
                .windows(2)
                .map(|w| {
                    let pair: BTreeMap<i64, f64> = [(*w[0].0, *w[0].1), (*w[1].0, *w[1].1)].into();
                    loglog_slope(&pair).map_or("–".into(), |s| format!("{s:.2}"))
                })
                .collect();
            let _ = writeln!(
                out,
                "| {function} | {} | {slope} | {} |",
                cells.join(" | "),
                local.join(", ")
            );
        }
    }
    Ok(out)
}

/// Least-squares slope of ln(time) against ln(N).
pub fn loglog_slope(times: &BTreeMap<i64, f64>) -> Option<f64> {
    if times.len() < 2 {
        return None;
    }
    let pts: Vec<(f64, f64)> = times
        .iter()
        .map(|(&n, &t)| ((n as f64).ln(), t.ln()))
        .collect();
    let m = pts.len() as f64;
    let (sx, sy) = pts.iter().fold((0.0, 0.0), |(a, b), (x, y)| (a + x, b + y));
    let (mx, my) = (sx / m, sy / m);
    let sxy: f64 = pts.iter().map(|(x, y)| (x - mx) * (y - my)).sum();
    let sxx: f64 = pts.iter().map(|(x, _)| (x - mx) * (x - mx)).sum();
    Some(sxy / sxx)
}

fn format_ms(ns: f64) -> String {
    let ms = ns / 1e6;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.ends_with("new/benchmark.json") {
            out.push(path);
        }
    }
    Ok(())
}

fn read_json(path: &Path) -> Result<Value> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_power_laws() {
        let lin: BTreeMap<i64, f64> = [(1000, 2.0), (4000, 8.0), (16000, 32.0)].into();
        assert!((loglog_slope(&lin).unwrap() - 1.0).abs() < 1e-12);
        let quad: BTreeMap<i64, f64> = [(10, 3.0), (20, 12.0), (40, 48.0)].into();
        assert!((loglog_slope(&quad).unwrap() - 2.0).abs() < 1e-12);
        assert!(loglog_slope(&[(1, 1.0)].into()).is_none());
    }
}
