//! The graph-safe training step (issue #47) equals the plain step, for every architecture: a
//! run under `graphs = "emulate"` (static input buffers, the optimizer's learning rate, β1 and
//! bias corrections and the health checks' step label as device data, the optimizer's plan and
//! the queued losses repeated from each step shape's first run) ends with the plain run's
//! parameters, optimizer state and losses, bit for bit, over two epochs with a smaller last
//! batch; and so does such a run stopped after its first epoch and resumed. On CUDA the same
//! discipline is captured and replayed (`benches/gpu/check.sh` exercises it there).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use ono_data::benchmarks::{miniature, Benchmark};
use ono_train::checkpoint::Checkpoint;
use ono_train::config::TrainConfig;
use ono_train::graphs::GraphStats;
use ono_train::observer::{EpochObserver, EpochView, ObserverError};
use ono_train::progress::Progress;
use ono_train::{Error, RunSpec, Trainer};
use tch::Tensor;

use common::temp_dir;

/// AdamW, OneCycle and clipping at 0.1 (the ONO scripts' and NSL's recipe, clipping on so that
/// the norm's kernels are in the step).
const ADAMW: &str = "[optimizer]\nmax_grad_norm = 0.1";
/// The FNO scripts' optimisation (Adam with L2 decay, StepLR, no clipping).
const FNO: &str = "[optimizer]\nkind = \"adam\"\nweight_decay = 1e-4\nmax_grad_norm = 0\n\n[schedule]\nkind = \"step\"";

/// A two-layer ONO.
const ONO_SMALL: &str = "n_layers = 2\nn_hidden = 16\nn_head = 2\npsi_dim = 4";

/// One architecture on one miniature benchmark.
struct Case {
    arch: &'static str,
    preset: &'static str,
    overrides: &'static str,
    benchmark: Benchmark,
    /// More lines at the top level and of `[data]`.
    top: &'static str,
    data: &'static str,
    recipe: &'static str,
    /// Samples per step (None: the whole split).
    batch: Option<usize>,
}

/// Stops a run after its epoch `at` (0-based) is saved, as a kill between epochs would.
struct StopAfter(u64);

impl EpochObserver for StopAfter {
    fn epoch_finished(&mut self, e: &EpochView<'_>) -> Result<(), ObserverError> {
        if e.history.len() as u64 == self.0 + 1 {
            return Err("stopped".into());
        }
        Ok(())
    }
}

fn config(c: &Case, data: &Path, out: &Path, graphs: &str, ntrain: usize) -> TrainConfig {
    let m = miniature::write(c.benchmark, data).unwrap();
    let text = format!(
        r#"
seed = 5
epochs = 2
batch_size = {batch}
threads = 1
output_dir = "{out}"
graphs = "{graphs}"
{top}

[model]
arch = "{arch}"
preset = "{preset}"
[model.overrides]
{overrides}

[data]
benchmark = "{bench}"
data_dir = "{dir}"
layout = "fno"
ntrain = {ntrain}
ntest = {ntest}
{extra}

{recipe}

[log]
every_steps = 3
panels = 0
"#,
        batch = c.batch.unwrap_or(ntrain),
        out = out.display(),
        top = c.top,
        arch = c.arch,
        preset = c.preset,
        overrides = c.overrides,
        bench = c.benchmark.name(),
        dir = data.display(),
        ntrain = m.ntrain,
        ntest = m.ntest,
        extra = c.data,
        recipe = c.recipe,
    );
    TrainConfig::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", c.arch))
}

/// Trains `cfg` (resuming with `resume`), stopping after epoch `stop` if given; the trainer's
/// graph statistics and the epochs' (train loss, test error), as bits.
type History = Vec<(u64, Option<u64>)>;

fn train(cfg: TrainConfig, resume: bool, stop: Option<u64>) -> (Option<GraphStats>, History) {
    let mut tr = Trainer::new(RunSpec::resolve(cfg).unwrap(), resume).unwrap();
    if let Some(at) = stop {
        tr.set_observer(StopAfter(at));
    }
    match (tr.run(&Progress::Quiet), stop) {
        (Ok(_), None) => {}
        (Err(Error::Observer { .. }), Some(_)) => {}
        (other, _) => panic!("unexpected end of the run: {:?}", other.map(|s| s.steps)),
    }
    assert_eq!(tr.host_reads().in_steps, 0, "no host read inside a step");
    let history = tr
        .state()
        .history
        .iter()
        .map(|r| (bits(r.train_loss), r.test_rel_l2.map(bits)))
        .collect();
    (tr.graph_stats(), history)
}

/// A float's bits, every NaN as one (a NaN read back from a checkpoint loses its sign).
fn bits(x: f64) -> u64 {
    if x.is_nan() {
        f64::NAN.to_bits()
    } else {
        x.to_bits()
    }
}

fn tensors(run: &Path) -> BTreeMap<String, Tensor> {
    Checkpoint::load(&run.join("checkpoints/last.safetensors"))
        .unwrap()
        .tensors
}

/// Every tensor of two checkpoints (model, optimizer moments and skip counts, normalizers,
/// loss scaler) is the same, bit for bit.
fn assert_same(tag: &str, a: &Path, b: &Path) {
    let (ta, tb) = (tensors(a), tensors(b));
    assert_eq!(
        ta.keys().collect::<Vec<_>>(),
        tb.keys().collect::<Vec<_>>(),
        "{tag}"
    );
    for (k, x) in &ta {
        assert!(x.equal(&tb[k]), "{tag}: {k} differs");
    }
    let (sa, sb) = (
        Checkpoint::load(&a.join("checkpoints/last.safetensors")).unwrap(),
        Checkpoint::load(&b.join("checkpoints/last.safetensors")).unwrap(),
    );
    assert_eq!(sa.state.optimizer, sb.state.optimizer, "{tag}: step counts");
    assert_eq!(sa.state.global_step, sb.state.global_step, "{tag}");
}

/// The plain run, the emulated run and the emulated run stopped after its first epoch and
/// resumed, all ending alike.
fn check(c: &Case) {
    ono_testing::init();
    // Runs of other tests draw from torch's one generator too.
    let _rng = ono_testing::torch_rng_lock();
    let tag = format!("{}-{}-{}", c.arch, c.preset, c.benchmark.name());
    let dir = temp_dir(&format!("graphs-{tag}"));
    let data = dir.join("data");
    let ntrain = miniature::write(c.benchmark, &data).unwrap().ntrain;
    let run = |name: &str, graphs: &str| config(c, &data, &dir.join(name), graphs, ntrain);

    let (none, plain) = train(run("plain", "off"), false, None);
    assert!(none.is_none(), "{tag}: graphs off");
    let (stats, emulated) = train(run("emulated", "emulate"), false, None);
    let stats = stats.expect("an engine");
    assert_eq!(plain, emulated, "{tag}: the epochs' losses and errors");
    assert_same(&tag, &dir.join("plain"), &dir.join("emulated"));
    let steps = ntrain.div_ceil(c.batch.unwrap_or(ntrain)) as u64 * 2;
    assert!(stats.replayed > 0, "{tag}: {stats:?}");
    assert!(
        stats.recorded + stats.replayed + stats.plain >= steps,
        "{tag}: {stats:?} for {steps} batches"
    );

    let (_, first) = train(run("resumed", "emulate"), false, Some(0));
    assert_eq!(first.len(), 1, "{tag}");
    let (_, resumed) = train(run("resumed", "emulate"), true, None);
    assert_eq!(plain, resumed, "{tag}: resumed");
    assert_same(&tag, &dir.join("plain"), &dir.join("resumed"));
}

#[test]
fn ono_emulated_steps_train_as_plain_steps_in_every_regime_and_precision() {
    for (preset, benchmark, top) in [
        // Darcy's derivative loss, selective recomputation (ONO's auto).
        ("darcy", Benchmark::Darcy, ""),
        // Autoregressive rollout.
        ("ns2d", Benchmark::Ns2d, ""),
        // One optimizer step per time step (two variants: the first counts the samples).
        ("plasticity", Benchmark::Plasticity, ""),
        // Float16 loss scaling: the skip counts and the scale are device state.
        ("elasticity", Benchmark::Elasticity, "precision = \"f16\""),
    ] {
        check(&Case {
            arch: "ono",
            preset,
            overrides: ONO_SMALL,
            benchmark,
            top,
            data: "",
            recipe: ADAMW,
            batch: Some(3),
        });
    }
}

#[test]
fn fno_family_emulated_steps_train_as_plain_steps() {
    let small2 = "modes = [3, 3]\nwidth = 6";
    for (arch, preset, overrides, benchmark, data, batch) in [
        (
            "fno1d",
            "burgers",
            "modes = [4]\nwidth = 6",
            Benchmark::Burgers,
            "",
            Some(3),
        ),
        ("fno2d", "darcy", small2, Benchmark::Darcy, "", Some(3)),
        // Space-time: time as a third grid axis.
        (
            "fno3d",
            "plasticity",
            "modes = [2, 2, 2]\nwidth = 6",
            Benchmark::Plasticity,
            "regime = \"space_time\"",
            Some(3),
        ),
        (
            "geofno",
            "elasticity",
            "modes = [3, 3]\nwidth = 6\nlatent = [12, 12]\niphi_width = 8",
            Benchmark::Elasticity,
            "",
            Some(3),
        ),
        (
            "nsl_fno",
            "darcy",
            "n_hidden = 8\nmodes = 3",
            Benchmark::Darcy,
            "",
            Some(3),
        ),
        (
            "ffno",
            "ns",
            "n_hidden = 8\nmodes = 3\nn_layers = 2",
            Benchmark::Ns2d,
            "",
            Some(3),
        ),
        // U-FNO's U-Net needs the miniature's whole split in one batch (baseline_epochs.rs).
        (
            "ufno",
            "darcy",
            "n_hidden = 2\nmodes = 3",
            Benchmark::Darcy,
            "",
            None,
        ),
    ] {
        check(&Case {
            arch,
            preset,
            overrides,
            benchmark,
            top: "",
            data,
            recipe: FNO,
            batch,
        });
    }
}

#[test]
fn attention_and_other_families_emulated_steps_train_as_plain_steps() {
    let galerkin = "n_hidden = 16\nn_head = 2\nnum_encoder_layers = 1\ndim_feedforward = 32\nfreq_dim = 8\nnum_regressor_layers = 1\nfourier_modes = 4";
    let gnot = "n_hidden = 8\nn_head = 2\nn_layers = 1\nn_experts = 2\nmlp_layers = 1";
    for (arch, preset, overrides, benchmark, data) in [
        (
            "mlp",
            "small",
            "width = 16\nn_layers = 2",
            Benchmark::Darcy,
            "",
        ),
        ("galerkin", "burgers", galerkin, Benchmark::Burgers, ""),
        // Autoregressive on NS2d's grid.
        ("galerkin", "burgers", galerkin, Benchmark::Ns2d, ""),
        // The input function as GNOT's branch (its own points).
        (
            "gnot",
            "gnot",
            gnot,
            Benchmark::Darcy,
            "fx_as_function = true",
        ),
        (
            "lsm",
            "darcy",
            "n_hidden = 4\nn_heads = 2",
            Benchmark::Darcy,
            "",
        ),
        (
            "transolver",
            "darcy",
            "n_hidden = 8\nn_heads = 2\nn_layers = 2\nmlp_ratio = 1\nslice_num = 4",
            Benchmark::Darcy,
            "",
        ),
        // A time value per sample, one optimizer step per time step.
        (
            "transolver",
            "plasticity",
            "n_hidden = 8\nn_heads = 2\nn_layers = 2\nmlp_ratio = 1\nslice_num = 4",
            Benchmark::Plasticity,
            "",
        ),
    ] {
        check(&Case {
            arch,
            preset,
            overrides,
            benchmark,
            top: "",
            data,
            recipe: ADAMW,
            // LSM's U-Net normalizes its coarsest level over the batch: no batch of one.
            batch: Some(4),
        });
    }
}

/// A step whose host code differs from its first run of the shape is caught: an emulated step
/// checks that the parameters with gradients are those its plan was made for.
#[test]
fn a_plan_for_other_gradients_is_refused() {
    ono_testing::init();
    let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    let a = vs.root().var("a", &[3], tch::nn::Init::Const(1.0));
    let b = vs.root().var("b", &[2], tch::nn::Init::Const(1.0));
    let mut opt = ono_train::adamw::AdamW::new(&vs, Default::default()).unwrap();
    // Planned for both parameters; only `a` has a gradient.
    let plan = opt.plan_for(&[vec![true, true]], false).unwrap();
    (&a * 2.0).sum(tch::Kind::Float).backward();
    let _ = &b;
    let grads = opt.gather_grads().unwrap();
    let e = opt.apply(&plan, &grads, None).unwrap_err();
    assert!(e.to_string().contains("not graph-safe"), "{e}");
}

/// A predictor with graphs (emulated) gives the plain predictor's outputs bit for bit, for
/// repeated inputs of one shape (recorded, then replayed) and for a second shape.
#[test]
fn an_emulated_predictor_predicts_as_the_plain_one() {
    ono_testing::init();
    let _rng = ono_testing::torch_rng_lock();
    let c = Case {
        arch: "ono",
        preset: "darcy",
        overrides: ONO_SMALL,
        benchmark: Benchmark::Darcy,
        top: "",
        data: "",
        recipe: ADAMW,
        batch: Some(3),
    };
    let dir = temp_dir("graphs-predictor");
    let data = dir.join("data");
    let ntrain = miniature::write(c.benchmark, &data).unwrap().ntrain;
    let mut cfg = config(&c, &data, &dir.join("run"), "off", ntrain);
    cfg.epochs = 1;
    train(cfg, false, None);
    let ckpt = dir.join("run/checkpoints/last.safetensors");
    let (plain, state) = ono_train::Predictor::from_checkpoint(&ckpt, tch::Device::Cpu).unwrap();
    let (mut graphed, _) = ono_train::Predictor::from_checkpoint(&ckpt, tch::Device::Cpu).unwrap();
    let note = graphed
        .set_graphs(ono_train::graphs::Graphs::Emulate)
        .unwrap();
    assert!(note.unwrap().contains("emulated"));
    let grid = state.grid.clone().unwrap();
    let n: i64 = grid.iter().product();
    tch::manual_seed(11);
    for b in [2, 2, 2, 3, 3] {
        let pos = Tensor::rand([b, n, 2], (tch::Kind::Float, tch::Device::Cpu));
        let fx = Tensor::rand([b, n, 1], (tch::Kind::Float, tch::Device::Cpu));
        let want = plain.predict(&pos, &fx, 0, Some(&grid), None).unwrap();
        let got = graphed.predict(&pos, &fx, 0, Some(&grid), None).unwrap();
        assert!(got.equal(&want), "batch of {b}");
    }
    assert_eq!(graphed.graph_shapes(), Some(2));
    assert_eq!(plain.graph_shapes(), None);
}
