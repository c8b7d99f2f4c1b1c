//! A training step never waits for the device (issue #19, item 1): every host read of library
//! code goes through `ono_kernels::host` (a source scan below refuses any other), the counter
//! stays still inside the steps of the trainer and of `bench_step`, and the logging interval
//! reads once. A failed check inside a step still reaches the user as the typed error, at the
//! next check, with the step it happened at.

mod common;

use std::path::{Path, PathBuf};

use ono_models::ono::OnoPreset;
use ono_models::ModelConfig;
use ono_train::bench_step::{bench_step, StepRecipe, StepShapes};
use ono_train::config::TrainConfig;
use ono_train::graphs::{Engine, Graphs};
use ono_train::progress::Progress;
use ono_train::{Error, HostReads, RunSpec, Trainer};
use tch::Device;

use common::{steady_dataset, temp_dir};

/// ONO (two orthogonal blocks: two Cholesky factorizations per forward) on 12 samples, 2 per
/// step, the loss read every 2 steps.
fn config(dir: &Path, out: &str, extra: &str) -> TrainConfig {
    let text = format!(
        r#"
seed = 3
epochs = 1
batch_size = 2
threads = 1
output_dir = "{}"
{extra}

[model]
preset = "ns2d"
[model.overrides]
n_layers = 2
n_hidden = 16
n_head = 2
psi_dim = 4

[data]
path = "{}"
normalize_y = "unit"

[log]
every_steps = 2
panels = 0
"#,
        dir.join(out).display(),
        dir.join("s.safetensors").display()
    );
    TrainConfig::from_toml(&text).unwrap()
}

/// A fresh folder with the data set `s.safetensors` (12 training samples); the torch seed reset.
fn data_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir(name);
    steady_dataset(&dir.join("s.safetensors"), 12);
    dir
}

#[test]
fn training_steps_read_nothing_and_each_logging_interval_reads_once() {
    let _rng = ono_testing::torch_rng_lock();
    let dir = data_dir("host-reads-steps");
    for (out, extra) in [
        ("plain", "recompute = \"none\""),
        ("recompute", "recompute = true"),
        ("selective", "recompute = \"selective\""),
    ] {
        let mut tr =
            Trainer::new(RunSpec::resolve(config(&dir, out, extra)).unwrap(), false).unwrap();
        let s = tr.run(&Progress::Quiet).unwrap();
        assert_eq!(s.steps, 6);
        assert!(s.final_test.unwrap().is_finite());
        // Steps 2, 4 and 6 end a logging interval; the epoch's end and its checkpoint find
        // nothing left to read.
        assert_eq!(
            tr.host_reads(),
            HostReads {
                in_steps: 0,
                checks: 3,
                at_checks: 3,
            },
            "{out}"
        );
    }
}

#[test]
fn a_failed_factorization_is_the_typed_error_at_the_next_check() {
    let _rng = ono_testing::torch_rng_lock();
    let dir = data_dir("host-reads-nan");
    let mut tr = Trainer::new(RunSpec::resolve(config(&dir, "run", "")).unwrap(), false).unwrap();
    // A NaN weight in the eigenfunction projection of the first block: its covariance is NaN
    // from the first step on (the loss too, but the failed check names the cause).
    let vars = tr.model().var_store().variables();
    let (name, w) = vars
        .iter()
        .filter(|(n, _)| n.contains("proj.weight"))
        .min_by_key(|(n, _)| n.as_str())
        .expect("an eigenfunction projection");
    let _ = tch::no_grad(|| w.shallow_clone().fill_(f64::NAN));
    let err = tr.run(&Progress::Quiet).unwrap_err();
    match &err {
        Error::Step { step, source, .. } => {
            assert_eq!(*step, 0, "{name}: {err}");
            assert!(
                matches!(
                    **source,
                    Error::Models(ono_models::Error::Nn(ono_nn::Error::Kernel(
                        ono_kernels::Error::NonFinite { .. }
                    )))
                ),
                "{err}"
            );
        }
        _ => panic!("{err:?}"),
    }
    assert!(err.to_string().contains("optimizer step 0"), "{err}");
    // Found at the first logging interval (step 2), without reading inside the steps.
    assert_eq!(
        tr.host_reads(),
        HostReads {
            in_steps: 0,
            checks: 1,
            at_checks: 1,
        }
    );
    // Nothing was saved after the failure.
    assert!(!tr.folder().has_checkpoint());
}

#[test]
fn bench_step_reads_nothing_inside_its_steps() {
    let _rng = ono_testing::torch_rng_lock();
    ono_testing::init();
    let base = ModelConfig::preset("ono", "elasticity").unwrap();
    let small: toml::Table = "n_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4"
        .parse()
        .unwrap();
    let config = ono_train::config::with_overrides(&base, &small, "overrides").unwrap();
    for recompute in [
        ono_models::Recompute::None,
        ono_models::Recompute::Blocks,
        ono_models::Recompute::Selective,
    ] {
        // Plain steps, and graph-safe ones (emulated: the plan made before each step).
        for graphs in [Graphs::Off, Graphs::Emulate] {
            let mut shapes = StepShapes::of(OnoPreset::Elasticity);
            shapes.batch = 2;
            let r = bench_step(
                &config,
                "elasticity",
                shapes,
                StepRecipe::Ono,
                2,
                1,
                Device::Cpu,
                recompute,
                ono_nn::Precision::F32,
                graphs,
            )
            .unwrap();
            assert_eq!(r.host_reads, 0, "recompute {recompute:?}, graphs {graphs}");
            assert!(r.min_s > 0.0);
            let engine = (graphs == Graphs::Emulate).then_some(Engine::Emulated);
            assert_eq!(r.graphs, engine);
        }
    }
}

/// Host reads that do not go through `ono_kernels::host` (which counts them), in the library code
/// (not the tests) of a Rust source: (line, text).
fn uncounted_reads(source: &str) -> Vec<(usize, String)> {
    const READS: [&str; 13] = [
        "int64_value(",
        "double_value(",
        "copy_data",
        ".equal(",
        "f_equal(",
        "allclose(",
        "nonzero(",
        "masked_select(",
        "unique_dim(",
        "unique_consecutive(",
        "bool::try_from(",
        "f64::try_from(",
        "f32::try_from(",
    ];
    let mut found = Vec::new();
    let mut lines = source.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        if line.trim() == "#[cfg(test)]" {
            // Skip the item: to the end of its braces, or of its line when it has none.
            let mut depth = 0i64;
            for (_, l) in lines.by_ref() {
                depth += l.matches('{').count() as i64 - l.matches('}').count() as i64;
                if depth <= 0 && (l.contains('}') || l.trim_end().ends_with(';')) {
                    break;
                }
            }
            continue;
        }
        let code = line.split("//").next().unwrap_or("");
        let vec_read = code.contains("Vec::try_from(")
            || (code.contains("Vec::<") && code.contains(">::try_from("));
        if vec_read || READS.iter().any(|r| code.contains(r)) {
            found.push((i + 1, line.trim().to_string()));
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn library_code_reads_the_host_only_through_the_counter() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let mut files = Vec::new();
    for c in ["ono-kernels", "ono-nn", "ono-models", "ono-train"] {
        rust_files(&crates.join(c).join("src"), &mut files);
    }
    assert!(files.len() > 50, "{} files", files.len());
    let door = crates.join("ono-kernels/src/host.rs");
    let mut offences = Vec::new();
    for f in files.iter().filter(|f| **f != door) {
        for (line, text) in uncounted_reads(&std::fs::read_to_string(f).unwrap()) {
            offences.push(format!("{}:{line}: {text}", f.display()));
        }
    }
    assert!(
        offences.is_empty(),
        "read through ono_kernels::host instead:\n{}",
        offences.join("\n")
    );
}

#[test]
fn the_scan_finds_reads_outside_tests_only() {
    let src = "fn f(t: &Tensor) -> f64 {\n    t.f_double_value(&[]).unwrap()\n}\n\
               fn g(t: &Tensor) -> Vec<f32> { Vec::<f32>::try_from(t).unwrap() }\n\
               // a comment on int64_value( is fine\n\
               #[cfg(test)]\nmod tests {\n    fn h(t: &Tensor) -> bool {\n        \
               bool::try_from(t).unwrap()\n    }\n}\n\
               fn k(t: &Tensor) -> bool { t.equal(t) }\n";
    let found: Vec<usize> = uncounted_reads(src).into_iter().map(|(l, _)| l).collect();
    assert_eq!(found, vec![2, 4, 12]);
}
