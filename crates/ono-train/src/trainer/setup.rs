//! Setting a run up, in the order it happens: the checkpoint a resumed run starts from
//! ([`resume_from`]: its configuration must be the run's), the data normalized, the model,
//! optimizer and loss scaler ([`build`]), the micro-batches per step a resumed run keeps
//! ([`micro_batches`]), the state restored or fresh, and in a data-parallel run the processes'
//! agreement ([`agree`]) before every process takes rank 0's variables.

use std::path::Path;

use ono_data::dataset::{point_share, Split, TensorDataset};
use ono_models::{Model, ModelConfig};
use tch::{Device, Kind};

use super::{HostReads, Trainer};
use crate::adamw::AdamW;
use crate::checkpoint::{Checkpoint, TrainState};
use crate::config::{Fingerprint, Parallelism, ScheduleKind, TrainConfig};
use crate::evaluate::normalized;
use crate::graphs::{self, Graphs, InferenceGraphs, StepGraphs};
use crate::normalizers::Normalizers;
use crate::one_cycle::OneCycle;
use crate::parallel::{self, DataParallel};
use crate::run::RunSpec;
use crate::run_folder::{RunFolder, Slot};
use crate::scaler::LossScaler;
use crate::{Error, Result};

impl Trainer {
    /// [`Trainer::new`] as one process of a data-parallel run (`None`: a single process). Every
    /// process must be given the same run; they check that they agree (configuration, model,
    /// data shapes, the step they resume at) and start from rank 0's variables. On CUDA each
    /// process trains on `cuda:LOCAL_RANK`.
    ///
    /// A resumed run keeps the micro-batches per step its checkpoint was trained with
    /// (`accumulate_steps` × processes), so that it continues exactly: at another number of
    /// processes that divides them, `accumulate_steps` is adjusted (and said); otherwise the
    /// resume is refused.
    pub fn with_parallel(
        mut run: RunSpec,
        resume: bool,
        mut parallel: Option<DataParallel>,
    ) -> Result<Self> {
        if let Some(p) = &parallel {
            run.device = DataParallel::device_for(p.launch(), run.device);
        }
        let RunSpec {
            config: cfg,
            device,
            kind,
            data,
            regime,
            normalizers: kinds,
            loss: loss_spec,
            model: model_cfg,
        } = run;
        let folder = RunFolder::new(&cfg.output_dir);
        let last = folder.checkpoint(Slot::Last);
        let fingerprint = cfg.fingerprint();
        let ckpt = resume_from(&last, resume, &fingerprint)?;

        let target_grid = data.target_grid().map(<[i64]>::to_vec);
        let test_grid = data.effective_test_grid().map(<[i64]>::to_vec);
        let time_steps = data.train.y.size().get(3).copied().unwrap_or(0);
        let test_steps = data.test.y.size().get(3).copied().unwrap_or(0);

        // Normalizers: fitted on the training split's real points (or restored), applied once
        // to the inputs; a test split at another resolution gets them at its own points.
        let normalizers = match &ckpt {
            Some(c) => c.normalizers()?,
            None => Normalizers::fit(kinds, &data.train)?,
        };
        let test_normalizers = normalizers.for_test_split(&data)?;
        let point_sharded = cfg.parallel == Parallelism::Points && parallel.is_some();
        let share = parallel
            .as_ref()
            .filter(|_| point_sharded)
            .map(|p| (p.rank(), p.world()));
        let (train, test, point_norms) = on_device(
            &data,
            (&normalizers, &test_normalizers),
            share,
            device,
            kind,
        )?;

        let model_cfg = match &ckpt {
            Some(c) => c.state.model.clone(),
            None => model_cfg,
        };
        let (model, mut opt, mut scaler) = build(&model_cfg, &cfg, device, kind)?;

        // Split points: every process trains every micro-batch, as one process would.
        let world = match &parallel {
            Some(p) if !point_sharded => p.world() as u64,
            _ => 1,
        };
        let (micro_batches, mut notes) = micro_batches(ckpt.as_ref(), world, &cfg, &last)?;
        if cfg.parallel == Parallelism::Points && parallel.is_none() {
            notes.push(
                "parallel = \"points\" in a single process: nothing to split, whole samples \
                 train here (start it with torchrun, srun or mpirun to split the points)"
                    .into(),
            );
        }
        let (graphs, eval_graphs) = step_graphs(&cfg, device, micro_batches / world, &mut notes)?;
        let steps_per_epoch = (train.len() as u64).div_ceil(cfg.batch_size as u64);
        let schedule = schedule(&cfg, cfg.epochs * steps_per_epoch)?;

        let (mut state, resumed_at) = match ckpt {
            Some(c) => {
                model.load_tensors(&c.section("model."), &last)?;
                opt.load_state("optim.", &c.section(""), &c.state.optimizer)?;
                if let Some(s) = &mut scaler {
                    s.load("scaler.", &c.section(""))?;
                }
                let at = c.state.global_step;
                (c.state, at)
            }
            None => {
                let fresh = TrainState {
                    global_step: 0,
                    epoch: 0,
                    batch_in_epoch: 0,
                    epoch_loss_sum: 0.0,
                    epoch_samples: 0,
                    epoch_seconds: 0.0,
                    best: None,
                    history: Vec::new(),
                    config: fingerprint,
                    model: model_cfg,
                    grid: data.grid.clone(),
                    query_grid: data.query_grid.clone(),
                    normalizers: kinds,
                    regime,
                    optimizer: opt.state("optim.")?.1,
                    micro_batches,
                };
                (fresh, 0)
            }
        };
        state.micro_batches = micro_batches;
        if let Some(p) = &mut parallel {
            // The whole splits as read (a point-sharded process holds a share of them).
            agree(p, &state, &data.train, &data.test, resumed_at, device)?;
            p.share_model(&model)?;
        }
        Ok(Self {
            cfg,
            device,
            kind,
            train,
            test,
            grid: data.grid,
            target_grid,
            test_grid,
            normalizers,
            test_normalizers,
            model,
            opt,
            scaler,
            schedule,
            state,
            folder,
            steps_per_epoch,
            time_steps,
            test_steps,
            regime,
            loss: loss_spec,
            resumed_at,
            pending: Vec::new(),
            health: ono_kernels::health::Monitor::new(),
            unchecked: false,
            reads: HostReads::default(),
            observer: None,
            micro_batches,
            accumulate: micro_batches / world,
            parallel,
            point_norms,
            notes,
            graphs,
            eval_graphs,
        })
    }
}

/// Both splits normalized on the training device. With `share` = (rank, world) of a
/// point-sharded run, this process's share of every sample's points, cut before the data reach
/// the device, and the normalizers cut alike (their pointwise statistics are the whole training
/// split's), which decode its outputs.
#[allow(clippy::type_complexity)]
fn on_device(
    data: &TensorDataset,
    (norms, test_norms): (&Normalizers, &Normalizers),
    share: Option<(usize, usize)>,
    device: Device,
    kind: Kind,
) -> Result<(Split, Split, Option<(Normalizers, Normalizers)>)> {
    let Some((rank, world)) = share else {
        return Ok((
            normalized(&data.train, norms, device, kind)?,
            normalized(&data.test, test_norms, device, kind)?,
            None,
        ));
    };
    let (ts, tl) = point_share(data.train.points(), rank, world);
    let (es, el) = point_share(data.test.points(), rank, world);
    let cut = (norms.point_share(ts, tl)?, test_norms.point_share(es, el)?);
    let train = normalized(&data.train.point_share(ts, tl)?, &cut.0, device, kind)?;
    let test = normalized(&data.test.point_share(es, el)?, &cut.1, device, kind)?;
    Ok((train, test, Some(cut)))
}

/// The checkpoint at `last` to resume from: `None` for a fresh run. A run is never started
/// over an existing one (`resume` is needed), and a checkpoint of another experiment is refused
/// by the keys that differ.
fn resume_from(last: &Path, resume: bool, fingerprint: &Fingerprint) -> Result<Option<Checkpoint>> {
    if !last.exists() {
        return Ok(None);
    }
    if !resume {
        return Err(Error::Checkpoint {
            path: last.to_path_buf(),
            msg: "the output folder already holds a run; pass --resume to continue it or choose another output_dir".into(),
        });
    }
    let c = Checkpoint::load(last)?;
    if !c.state.config.same_experiment(fingerprint) {
        return Err(Error::Checkpoint {
            path: last.to_path_buf(),
            msg: format!(
                "the configuration differs from the one the run was started with ({}); resume with the same settings or start a new output_dir",
                c.state.config.differing_keys(fingerprint).join(", ")
            ),
        });
    }
    Ok(Some(c))
}

/// The model (seeded by the run's seed, in its precision), its optimizer, and float16's loss
/// scaler; a recomputation mode the model's blocks do not have is refused by name.
fn build(
    model_cfg: &ModelConfig,
    cfg: &TrainConfig,
    device: Device,
    kind: Kind,
) -> Result<(Model, AdamW, Option<LossScaler>)> {
    tch::manual_seed(cfg.seed as i64);
    let mut model = Model::new(model_cfg, device, kind)?;
    model
        .set_precision(cfg.precision)
        .map_err(|e| Error::invalid("precision", e))?;
    let scaler = if cfg.precision.needs_loss_scaling() {
        Some(LossScaler::new(device)?)
    } else {
        None
    };
    // The model's own refusal: which modes it runs depends on the blocks it was built with.
    if !model.operator().supports_recompute(cfg.recompute) {
        return Err(Error::config(
            "recompute",
            format!(
                "the `{}` architecture has no {} mode",
                model.arch(),
                cfg.recompute
            ),
        ));
    }
    let opt = AdamW::new(model.var_store(), cfg.optimizer.adamw())?;
    Ok((model, opt, scaler))
}

/// The learning-rate schedule over `total` steps (the one-cycle's; the others are computed per
/// step from the configuration).
fn schedule(cfg: &TrainConfig, total: u64) -> Result<Option<OneCycle>> {
    Ok(match cfg.schedule.kind {
        ScheduleKind::OneCycle => Some(cfg.one_cycle(total)?.build()?),
        ScheduleKind::Constant | ScheduleKind::Step | ScheduleKind::Cosine => None,
    })
}

/// Micro-batches per optimizer step over `world` processes, and what to say about them: the
/// checkpoint's count wins, so that a resumed run continues exactly (refused when the processes
/// cannot share it evenly); the count must leave every micro-batch a sample.
/// The run's graphs (`graphs`) of its steps and of its evaluation's forwards; what to say about
/// them is added to `notes`.
fn step_graphs(
    cfg: &TrainConfig,
    device: Device,
    accumulate: u64,
    notes: &mut Vec<String>,
) -> Result<(
    Option<StepGraphs>,
    Option<std::cell::RefCell<InferenceGraphs>>,
)> {
    let (engine, said) = graphs::resolve(cfg.graphs, device, accumulate)?;
    notes.extend(said);
    let fall_back = cfg.graphs == Graphs::Auto;
    Ok((
        engine.map(|e| StepGraphs::new(e, fall_back)),
        engine.map(|e| std::cell::RefCell::new(InferenceGraphs::new(e, fall_back))),
    ))
}

fn micro_batches(
    ckpt: Option<&Checkpoint>,
    world: u64,
    cfg: &TrainConfig,
    last: &Path,
) -> Result<(u64, Vec<String>)> {
    let mut notes = Vec::new();
    let micro_batches = match ckpt {
        Some(c) if c.state.micro_batches != world * cfg.accumulate_steps => {
            let m = c.state.micro_batches;
            if !m.is_multiple_of(world) {
                return Err(Error::Checkpoint {
                    path: last.to_path_buf(),
                    msg: format!(
                        "the run was trained with {m} micro-batches per step, which {world} processes cannot share evenly; resume it with a number of processes that divides {m}"
                    ),
                });
            }
            notes.push(format!(
                "resuming with accumulate_steps = {} on {world} process(es): the run was trained with {m} micro-batches per step",
                m / world
            ));
            m
        }
        _ => world * cfg.accumulate_steps,
    };
    if micro_batches > cfg.batch_size as u64 {
        return Err(Error::config(
            "accumulate_steps",
            format!(
                "{} micro-batches in each of {world} processes cannot share a batch of {} samples",
                micro_batches / world,
                cfg.batch_size
            ),
        ));
    }
    Ok((micro_batches, notes))
}

/// Checks that every process describes the run alike (version, configuration, model,
/// micro-batches, data, the step it resumes at) before any step.
fn agree(
    p: &DataParallel,
    state: &TrainState,
    train: &ono_data::dataset::Split,
    test: &ono_data::dataset::Split,
    resumed_at: u64,
    device: Device,
) -> Result<()> {
    let config = serde_json::to_string(&state.config).unwrap_or_default();
    let model = serde_json::to_string(&state.model).unwrap_or_default();
    let items = [
        (
            "ono version",
            parallel::fingerprint(env!("CARGO_PKG_VERSION").as_bytes()),
        ),
        ("configuration", parallel::fingerprint(config.as_bytes())),
        ("model", parallel::fingerprint(model.as_bytes())),
        ("micro-batches per step", state.micro_batches),
        ("training data", parallel::split_hash(train)?),
        ("test data", parallel::split_hash(test)?),
        ("resumed step", resumed_at),
    ];
    p.agree(&items, device)
}
