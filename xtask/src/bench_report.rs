//! `cargo xtask bench-report`: criterion's saved estimates as markdown tables, with the log-log
//! slope of time against N (least squares over every N measured), for docs/benchmarks.md.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde_json::Value;

/// One measurement: (group, function, N) → time in nanoseconds.
pub type Table = BTreeMap<String, BTreeMap<String, BTreeMap<i64, f64>>>;

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
        insert(&mut table, group, function, n, median);
    }
    if table.is_empty() {
        bail!(
            "no criterion results under {}: run `cargo xtask bench` first",
            criterion_dir.display()
        );
    }
    Ok(render(&table))
}

fn insert(table: &mut Table, group: &str, function: &str, n: i64, ns: f64) {
    table
        .entry(group.to_owned())
        .or_default()
        .entry(function.to_owned())
        .or_default()
        .insert(n, ns);
}

/// The JSON document of the `slopes` program as markdown: the machine, the shapes and rounds,
/// then [`render`]'s tables of the minimum times.
pub fn slopes_report(json: &[u8]) -> Result<String> {
    let doc: Value = serde_json::from_slice(json).context("parsing the output of slopes")?;
    let mut out = String::from("| machine | |\n|---|---|\n");
    for (k, v) in doc["machine"].as_object().context("no machine facts")? {
        let _ = writeln!(out, "| {k} | {} |", v.as_str().unwrap_or_default());
    }
    let shape = &doc["shape"];
    let _ = writeln!(
        out,
        "\nB = {}, H = {}, d = {}, {}; the {} of {} rounds (sizes shuffled per round, seed {}).",
        shape["batch"],
        shape["heads"],
        shape["dim"],
        shape["dtype"].as_str().unwrap_or_default(),
        doc["statistic"].as_str().unwrap_or_default(),
        doc["rounds"],
        doc["seed"]
    );
    let mut table = Table::new();
    // The largest max/min ratio of one measurement's samples: how quiet the machine was.
    let mut spread: Option<(f64, String)> = None;
    for r in doc["results"].as_array().context("no results")? {
        let samples: Vec<f64> = r["samples_ns"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default();
        if let (Some(max), Some(min)) = (
            samples.iter().copied().reduce(f64::max),
            samples.iter().copied().reduce(f64::min),
        ) {
            let ratio = max / min;
            if spread.as_ref().is_none_or(|(s, _)| ratio > *s) {
                let name = |k: &str| r[k].as_str().unwrap_or_default().to_owned();
                spread = Some((
                    ratio,
                    format!("{} {} N = {}", name("group"), name("kernel"), r["n"]),
                ));
            }
        }
        let (Some(group), Some(kernel), Some(n), Some(t)) = (
            r["group"].as_str(),
            r["kernel"].as_str(),
            r["n"].as_i64(),
            r["min_ns"].as_f64(),
        ) else {
            bail!("a result without group, kernel, n or min_ns: {r}");
        };
        insert(&mut table, group, kernel, n, t);
    }
    out.push_str(&render(&table));
    if let Some((ratio, at)) = spread {
        let _ = writeln!(
            out,
            "\nLargest spread of one measurement's samples (max / min): {ratio:.2} ({at})."
        );
    }
    Ok(out)
}

/// Markdown tables, one per group: a row per function with its time at every N, the
/// least-squares log-log slope and the slopes between neighbouring N.
pub fn render(table: &Table) -> String {
    let mut out = String::new();
    for (group, rows) in table {
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
    out
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
    fn slopes_report_tabulates_the_minimum_times() {
        let doc = r#"{"machine": {"cpu": "X"}, "shape": {"batch": 1}, "rounds": 2, "seed": 3,
            "statistic": "minimum over rounds", "results": [
            {"group": "slopes_fwd", "kernel": "galerkin", "n": 1000, "min_ns": 2e6,
             "samples_ns": [2e6, 3e6]},
            {"group": "slopes_fwd", "kernel": "galerkin", "n": 2000, "min_ns": 4e6},
            {"group": "slopes_fwd", "kernel": "galerkin", "n": 4000, "min_ns": 8e6}]}"#;
        let text = slopes_report(doc.as_bytes()).unwrap();
        assert!(text.contains("| cpu | X |"), "{text}");
        assert!(
            text.contains("| galerkin | 2.0 ms | 4.0 ms | 8.0 ms | 1.00 | 1.00, 1.00 |"),
            "{text}"
        );
        assert!(
            text.contains("spread of one measurement's samples (max / min): 1.50"),
            "{text}"
        );
        assert!(slopes_report(b"{\"machine\": {}}").is_err());
    }

    #[test]
    fn slope_of_power_laws() {
        let lin: BTreeMap<i64, f64> = [(1000, 2.0), (4000, 8.0), (16000, 32.0)].into();
        assert!((loglog_slope(&lin).unwrap() - 1.0).abs() < 1e-12);
        let quad: BTreeMap<i64, f64> = [(10, 3.0), (20, 12.0), (40, 48.0)].into();
        assert!((loglog_slope(&quad).unwrap() - 2.0).abs() < 1e-12);
        assert!(loglog_slope(&[(1, 1.0)].into()).is_none());
    }
}
