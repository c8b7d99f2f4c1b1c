//! What the epoch tests share: one epoch of an architecture on a miniature benchmark.

#![allow(dead_code)]

use std::path::PathBuf;

use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::progress::Progress;
use ono_train::{Summary, Trainer};

/// A fresh scratch folder for one run.
pub fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ono-epochs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One epoch to run.
pub struct Epoch<'a> {
    pub arch: &'a str,
    pub preset: &'a str,
    /// Lines of `[model.overrides]`.
    pub overrides: &'a str,
    pub benchmark: Benchmark,
    /// More lines of `[data]` (its `layout` is `fno`).
    pub data: &'a str,
    /// The `[optimizer]` / `[schedule]` sections.
    pub recipe: &'a str,
    /// Samples per step; `None`: the whole training split.
    pub batch: Option<usize>,
}

/// Runs `e` on the benchmark's miniature files, checks the step count and a finite positive test
/// error, and returns the summary and the run's folder.
pub fn one_epoch(e: &Epoch<'_>) -> (Summary, PathBuf) {
    let b = e.benchmark;
    let tag = format!("{}-{}-{}", e.arch, e.preset, b.name());
    let dir = temp_dir(&tag);
    let m = miniature::write(b, &dir.join("data")).unwrap();
    let batch = e.batch.unwrap_or(m.ntrain);
    let text = format!(
        r#"
epochs = 1
batch_size = {batch}
threads = 1
output_dir = "{out}"

[model]
arch = "{arch}"
preset = "{preset}"
[model.overrides]
{overrides}

[data]
benchmark = "{name}"
data_dir = "{data}"
layout = "fno"
ntrain = {ntrain}
ntest = {ntest}
{extra}

{recipe}

[log]
panels = 1
"#,
        arch = e.arch,
        preset = e.preset,
        overrides = e.overrides,
        extra = e.data,
        recipe = e.recipe,
        out = dir.join("run").display(),
        name = b.name(),
        data = dir.join("data").display(),
        ntrain = m.ntrain,
        ntest = m.ntest,
    );
    let cfg = TrainConfig::from_toml(&text).unwrap_or_else(|err| panic!("{tag}: {err}"));
    let mut tr = Trainer::new(cfg, false).unwrap_or_else(|err| panic!("{tag}: {err}"));
    let s = tr
        .run(&Progress::Quiet)
        .unwrap_or_else(|err| panic!("{tag}: {err}"));
    assert_eq!(s.steps, m.ntrain.div_ceil(batch) as u64, "{tag}");
    let err = s.final_test.unwrap();
    assert!(err.is_finite() && err > 0.0, "{tag}: {err}");
    (s, dir)
}
