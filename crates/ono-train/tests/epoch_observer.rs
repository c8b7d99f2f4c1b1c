//! The trainer draws nothing itself: after every epoch it hands an `EpochObserver` the history and,
//! on a 2-D grid, the first `log.panels` test samples as host arrays. Those arrays are checked
//! against the data file (input, truth) and against a prediction of the saved checkpoint through
//! `Predictor` (prediction); an observer's failure stops the run with the epoch's checkpoint kept.

mod common;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ono_data::dataset::{Split, TensorDataset};
use ono_train::checkpoint::EpochRecord;
use ono_train::config::TrainConfig;
use ono_train::observer::{EpochObserver, EpochView, Fields, ObserverError};
use ono_train::progress::Progress;
use ono_train::{Error, Predictor, RunSpec, Trainer};
use tch::{Device, Kind, Tensor};

use common::temp_dir;

const H: i64 = 6;
const W: i64 = 5;

/// What an observer saw of one epoch.
#[derive(Debug, Clone)]
struct Seen {
    history: Vec<EpochRecord>,
    curves: PathBuf,
    fields: Option<Fields>,
}

/// Records every epoch; fails at `fail_at` (0-based), if set.
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Seen>>>,
    fail_at: Option<u64>,
}

impl EpochObserver for Recorder {
    fn epoch_finished(&mut self, e: &EpochView<'_>) -> Result<(), ObserverError> {
        let epoch = e.history.last().map(|r| r.epoch);
        if epoch.is_some() && epoch == self.fail_at {
            return Err("the disk is full".into());
        }
        self.seen.lock().unwrap().push(Seen {
            history: e.history.to_vec(),
            curves: e.folder.curves(),
            fields: e.fields.cloned(),
        });
        Ok(())
    }
}

/// 10 training and 3 test samples on an `H × W` grid of [0, 1]²: two input channels, `y` a
/// pointwise function of them (in raw units far from 0 and 1, so that the normalizers matter).
fn grid_dataset(path: &Path) {
    let n = H * W;
    let opts = (Kind::Float, Device::Cpu);
    let r = Tensor::linspace(0.0, 1.0, H, opts);
    let c = Tensor::linspace(0.0, 1.0, W, opts);
    let pos = Tensor::stack(
        &[
            r.view([H, 1]).expand([H, W], false),
            c.view([1, W]).expand([H, W], false),
        ],
        2,
    )
    .view([1, n, 2]);
    let make = |s: i64| {
        let fx = Tensor::randn([s, n, 2], opts) * 3.0 + 10.0;
        let y = (fx.narrow(2, 0, 1) * 0.5).sin() * 4.0 + fx.narrow(2, 1, 1) - 7.0;
        Split::new(fx, y, pos.shallow_clone())
    };
    TensorDataset {
        train: make(10),
        test: make(3),
        grid: Some(vec![H, W]),
        query_grid: None,
        test_grid: None,
    }
    .write(path)
    .unwrap();
}

fn config(dir: &Path, epochs: u64, panels: usize) -> TrainConfig {
    let text = format!(
        r#"
seed = 5
epochs = {epochs}
batch_size = 5
threads = 1
output_dir = "{out}"

[model]
preset = "ns2d"
[model.overrides]
n_layers = 1
n_hidden = 16
n_head = 2
psi_dim = 4

[data]
path = "{data}"
normalize_x = "unit"
normalize_y = "unit"

[log]
eval_every_epochs = 2
panels = {panels}
"#,
        out = dir.join("run").display(),
        data = dir.join("grid.safetensors").display(),
    );
    TrainConfig::from_toml(&text).unwrap()
}

fn data_dir(name: &str) -> ono_testing::Scratch {
    ono_testing::init();
    tch::manual_seed(0);
    let dir = temp_dir(name);
    grid_dataset(&dir.join("grid.safetensors"));
    dir
}

fn host(t: &Tensor) -> Vec<f32> {
    Vec::<f32>::try_from(t.to_kind(Kind::Float).contiguous()).unwrap()
}

/// Largest |a - b| over the largest |b|.
fn rel_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs()));
    let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs()));
    diff / scale
}

#[test]
fn the_observer_sees_every_epoch_and_the_fields_of_the_checkpoint() {
    let dir = data_dir("observer-fields");
    let cfg = config(&dir, 3, 2);
    let mut tr = Trainer::new(RunSpec::resolve(cfg.clone()).unwrap(), false).unwrap();
    let rec = Recorder::default();
    tr.set_observer(rec.clone());
    tr.run(&Progress::Quiet).unwrap();
    let seen = rec.seen.lock().unwrap().clone();

    // Once per epoch, evaluated or not, with the history so far.
    assert_eq!(seen.len(), 3);
    for (i, s) in seen.iter().enumerate() {
        assert_eq!(s.history.len(), i + 1);
        assert_eq!(s.history[..], tr.state().history[..=i]);
        assert_eq!(s.curves, dir.join("run/curves.png"));
    }
    let evaluated: Vec<bool> = tr
        .state()
        .history
        .iter()
        .map(|r| r.test_rel_l2.is_some())
        .collect();
    assert_eq!(evaluated, [false, true, true]);
    // This crate draws nothing: the figures are the observer's business.
    assert!(!dir.join("run/curves.png").exists());
    assert!(!dir.join("run/panels.png").exists());

    // The last epoch's fields: the first two test samples, first channel, raw values.
    let f = seen[2].fields.as_ref().expect("fields on a 2-D grid");
    assert_eq!((f.height, f.width), (H as usize, W as usize));
    assert_eq!(f.samples.len(), 2);
    let data = TensorDataset::read(&dir.join("grid.safetensors")).unwrap();
    let (fx, y) = (data.test.fx.narrow(0, 0, 2), data.test.y.narrow(0, 0, 2));
    let (predictor, _) =
        Predictor::from_checkpoint(&dir.join("run/checkpoints/last.safetensors"), Device::Cpu)
            .unwrap();
    let pred = predictor
        .predict(
            &data.test.pos.narrow(0, 0, 1).expand([2, H * W, 2], false),
            &fx,
            0,
            Some(&[H, W]),
            None,
        )
        .unwrap();
    for (i, s) in f.samples.iter().enumerate() {
        let i = i as i64;
        let n = (H * W) as usize;
        assert_eq!(
            (s.input.len(), s.truth.len(), s.prediction.len()),
            (n, n, n)
        );
        // Normalizing and decoding the input again costs a few ulps.
        let input = host(&fx.get(i).select(1, 0));
        assert!(rel_diff(&s.input, &input) < 1e-5, "input of sample {i}");
        assert_eq!(s.truth, host(&y.get(i).select(1, 0)), "truth of sample {i}");
        let p = host(&pred.get(i).select(1, 0));
        assert!(
            rel_diff(&s.prediction, &p) < 1e-5,
            "prediction of sample {i}"
        );
        assert_ne!(s.prediction, s.truth);
    }
    // Each epoch's prediction is that epoch's model: the weights moved between epochs.
    let first = seen[0].fields.as_ref().unwrap();
    assert_eq!(first.samples[0].truth, f.samples[0].truth);
    assert_ne!(first.samples[0].prediction, f.samples[0].prediction);
}

#[test]
fn no_fields_without_panels_and_a_failed_observer_stops_the_run_after_its_checkpoint() {
    let dir = data_dir("observer-fails");
    let mut tr = Trainer::new(RunSpec::resolve(config(&dir, 3, 0)).unwrap(), false).unwrap();
    let rec = Recorder {
        fail_at: Some(1),
        ..Recorder::default()
    };
    tr.set_observer(rec.clone());
    match tr.run(&Progress::Quiet) {
        Err(Error::Observer { epoch: 1, source }) => {
            assert_eq!(source.to_string(), "the disk is full")
        }
        other => panic!("expected Error::Observer at epoch 1, got {other:?}"),
    }
    let seen = rec.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    // `log.panels = 0`: no prediction is made for the observer.
    assert!(seen[0].fields.is_none());
    // The failing epoch was saved before the observer ran: a resumed run goes on with the next.
    let mut resumed = Trainer::new(RunSpec::resolve(config(&dir, 3, 0)).unwrap(), true).unwrap();
    let rec = Recorder::default();
    resumed.set_observer(rec.clone());
    resumed.run(&Progress::Quiet).unwrap();
    let seen = rec.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].history.len(), 3);
    assert_eq!(seen[0].history[..], resumed.state().history[..]);
}
