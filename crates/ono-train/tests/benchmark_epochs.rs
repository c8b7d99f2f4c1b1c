//! ONO trains one epoch end to end on every miniature benchmark, through its loader and the
//! benchmark's reference recipe (regime, normalizers, derivative loss), handing the test fields
//! of the 2-D grids to an observer.

mod common;

use std::sync::atomic::Ordering;

use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::config::TrainConfig;
use ono_train::progress::Progress;
use ono_train::{RunSpec, Trainer};

fn temp_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::Scratch::new(&format!("ono-epoch-{name}"))
}

#[test]
fn one_epoch_on_every_miniature_benchmark() {
    for b in Benchmark::ALL {
        // The inverse problem's targets live on query points, which ONO does not take (the
        // Galerkin Transformer trains on it in tests/baseline_epochs.rs).
        if b == Benchmark::DarcyInverse {
            continue;
        }
        let dir = temp_dir(b.name());
        let m = miniature::write(b, &dir.join("data")).unwrap();
        let preset = match b {
            Benchmark::Burgers | Benchmark::ElasticityGrid | Benchmark::NeuralopBurgers => "ns2d",
            Benchmark::Ns2d => "ns2d",
            Benchmark::NeuralopDarcy => "darcy",
            _ => b.name(),
        };
        let text = format!(
            r#"
epochs = 1
batch_size = 2
threads = 1
output_dir = "{out}"

[model]
preset = "{preset}"
[model.overrides]
n_layers = 1
n_hidden = 16
n_head = 2
psi_dim = 4
nn_block = "linear_transformer"

[data]
benchmark = "{name}"
data_dir = "{data}"
ntrain = {ntrain}
ntest = {ntest}

[log]
panels = 1
"#,
            out = dir.join("run").display(),
            name = b.name(),
            data = dir.join("data").display(),
            ntrain = m.ntrain,
            ntest = m.ntest,
        );
        let cfg = TrainConfig::from_toml(&text).unwrap();
        let mut tr = RunSpec::resolve(cfg)
            .and_then(|run| Trainer::new(run, false))
            .unwrap_or_else(|e| panic!("{}: {e}", b.name()));
        let check = common::FieldsCheck::default();
        tr.set_observer(check.clone());
        let s = tr
            .run(&Progress::Quiet)
            .unwrap_or_else(|e| panic!("{}: {e}", b.name()));
        assert_eq!(s.steps, m.ntrain.div_ceil(2) as u64, "{}", b.name());
        let err = s.final_test.unwrap();
        assert!(err.is_finite() && err > 0.0, "{}: {err}", b.name());
        assert!(dir.join("run/metrics.jsonl").exists());
        if matches!(b, Benchmark::Darcy | Benchmark::NeuralopDarcy) {
            assert_eq!(check.with_fields.load(Ordering::Relaxed), 1, "{}", b.name());
        }
    }
}
