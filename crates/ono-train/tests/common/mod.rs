//! What the epoch tests share: one epoch of an architecture on a miniature benchmark or a
//! dataset file.

#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use ono_data::benchmarks::{miniature, Benchmark};
use ono_data::dataset::{Split, TensorDataset};
use ono_train::config::TrainConfig;
use ono_train::observer::{EpochObserver, EpochView, ObserverError};
use ono_train::progress::Progress;
use ono_train::{RunSpec, Summary, Trainer};
use tch::{Device, Kind, Tensor};

/// A fresh scratch folder for one run.
pub fn temp_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-epochs-{name}"))
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
pub fn one_epoch(e: &Epoch<'_>) -> (Summary, ono_testing::Scratch) {
    let b = e.benchmark;
    let dir = temp_dir(&format!("{}-{}-{}", e.arch, e.preset, b.name()));
    let m = miniature::write(b, &dir.join("data")).unwrap();
    let source = format!(
        "benchmark = \"{}\"\ndata_dir = \"{}\"\nlayout = \"fno\"\nntrain = {}\nntest = {}",
        b.name(),
        dir.join("data").display(),
        m.ntrain,
        m.ntest
    );
    run_epoch(e, dir, &source, m.ntrain)
}

/// [`one_epoch`] on a dataset file of `ntrain` training samples instead of the miniature files;
/// `e.benchmark` only names the run (the benchmark the file stands in for).
pub fn one_epoch_on_file(
    e: &Epoch<'_>,
    file: &Path,
    ntrain: usize,
) -> (Summary, ono_testing::Scratch) {
    let dir = temp_dir(&format!(
        "{}-{}-file-{}",
        e.arch,
        e.preset,
        e.benchmark.name()
    ));
    run_epoch(e, dir, &format!("path = \"{}\"", file.display()), ntrain)
}

/// One epoch of `e` in `dir` on the data of the `[data]` lines `source`.
fn run_epoch(
    e: &Epoch<'_>,
    dir: ono_testing::Scratch,
    source: &str,
    ntrain: usize,
) -> (Summary, ono_testing::Scratch) {
    let tag = dir.file_name().unwrap().to_string_lossy().to_string();
    let batch = e.batch.unwrap_or(ntrain);
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
{source}
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
    );
    let cfg = TrainConfig::from_toml(&text).unwrap_or_else(|err| panic!("{tag}: {err}"));
    let mut tr = RunSpec::resolve(cfg)
        .and_then(|run| Trainer::new(run, false))
        .unwrap_or_else(|err| panic!("{tag}: {err}"));
    tr.set_observer(FieldsCheck::default());
    let s = tr
        .run(&Progress::Quiet)
        .unwrap_or_else(|err| panic!("{tag}: {err}"));
    assert_eq!(s.steps, ntrain.div_ceil(batch) as u64, "{tag}");
    // The steps never wait for the device (every library read is counted: tests/host_reads.rs).
    assert_eq!(tr.host_reads().in_steps, 0, "{tag}");
    let err = s.final_test.unwrap();
    assert!(err.is_finite() && err > 0.0, "{tag}: {err}");
    (s, dir)
}

/// An observer that refuses fields of the wrong size or with a non-finite value (the run then
/// fails with its message), and counts the epochs that came with fields.
#[derive(Clone, Default)]
pub struct FieldsCheck {
    pub with_fields: Arc<AtomicUsize>,
}

impl EpochObserver for FieldsCheck {
    fn epoch_finished(&mut self, e: &EpochView<'_>) -> Result<(), ObserverError> {
        let Some(f) = e.fields else {
            return Ok(());
        };
        let n = f.height * f.width;
        if f.samples.is_empty() || n == 0 {
            return Err(format!("empty fields: {} samples of {n} points", f.samples.len()).into());
        }
        for (i, s) in f.samples.iter().enumerate() {
            for (name, v) in [
                ("input", &s.input),
                ("truth", &s.truth),
                ("prediction", &s.prediction),
            ] {
                if v.len() != n || !v.iter().all(|x| x.is_finite()) {
                    return Err(format!(
                        "sample {i}: {name} has {} values (expected {n}) or a non-finite one",
                        v.len()
                    )
                    .into());
                }
            }
        }
        self.with_fields.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// A data set file of the given train and test splits (no grid).
pub fn write_splits(path: &Path, train: Split, test: Split) {
    TensorDataset {
        train,
        test,
        grid: None,
        query_grid: None,
        test_grid: None,
    }
    .write(path)
    .unwrap();
}

/// A steady set of `s` training and 4 test samples on 20 points of [0, 1]: `y` a pointwise
/// function of `fx`.
pub fn steady_dataset(path: &Path, s: i64) {
    let make = |s: i64| {
        let fx = Tensor::randn([s, 20, 1], (Kind::Float, Device::Cpu));
        let y = &fx * 2.0 + fx.square() + 1.0;
        let pos = Tensor::linspace(0.0, 1.0, 20, (Kind::Float, Device::Cpu)).view([1, 20, 1]);
        Split::new(fx, y, pos)
    };
    write_splits(path, make(s), make(4));
}
