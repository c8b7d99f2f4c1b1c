//! The training loop of the ONO reference scripts, resumable.
//!
//! Per batch: the schedule's lr (and β1) for this step, forward in training mode, the loss on
//! decoded values, backward, global-norm clipping, AdamW. The loss is read back only every
//! `log.every_steps` batches and before any checkpoint (no host sync per step); a non-finite
//! loss stops the run with the step where it first appeared, before anything is saved.
//!
//! Determinism: the data order of epoch e is a function of (seed, e); torch's generator is
//! reseeded from (seed, step) before every step; everything else is in the checkpoint. A run
//! resumed from any checkpoint therefore ends bit-identical (on the CPU) to an uninterrupted one.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ono_data::benchmarks::{self, Benchmark, LoadOptions};
use ono_data::dataset::{epoch_order, mix, Split, TensorDataset};
use ono_data::normalizer::{Normalizer, NormalizerKind};
use ono_models::{Ono, OnoConfig};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::adamw::AdamW;
use crate::checkpoint::{Checkpoint, EpochRecord, TrainState};
use crate::config::{DataSection, LossSection, ReductionName, Regime, ScheduleKind, TrainConfig};
use crate::loss::{self, MetricSum, RolloutErrors};
use crate::one_cycle::OneCycle;
use crate::progress::Progress;
use crate::{plots, Error, Result};

/// Files of a run inside `output_dir`.
pub struct RunPaths {
    /// `checkpoints/`.
    pub checkpoints: PathBuf,
    /// `metrics.jsonl`.
    pub metrics: PathBuf,
    /// `curves.png`.
    pub curves: PathBuf,
    /// `panels.png`.
    pub panels: PathBuf,
}

impl RunPaths {
    /// The layout under `dir`.
    pub fn new(dir: &Path) -> Self {
        Self {
            checkpoints: dir.join("checkpoints"),
            metrics: dir.join("metrics.jsonl"),
            curves: dir.join("curves.png"),
            panels: dir.join("panels.png"),
        }
    }
}

/// A model with its normalizers, ready to predict (what `ono eval` / `ono predict` load).
pub struct Predictor {
    /// Owns the variables.
    pub vs: VarStore,
    /// The model.
    pub model: Ono,
    /// Input normalizer.
    pub x_norm: Normalizer,
    /// Target normalizer.
    pub y_norm: Normalizer,
    /// Steady, autoregressive or per time step.
    pub regime: Regime,
    /// Float or double.
    pub kind: Kind,
}

impl Predictor {
    /// Loads the model and normalizers of a training checkpoint onto `device`.
    pub fn from_checkpoint(path: &Path, device: Device) -> Result<(Self, TrainState)> {
        let ckpt = Checkpoint::load(path)?;
        let st = &ckpt.state;
        let vs = VarStore::new(device);
        let model = st.model.init(&vs.root())?;
        let model_tensors = ckpt.section("model.");
        ono_nn::weights::copy_into(&vs, &model_tensors, false, path)?;
        let x_norm = Normalizer::from_tensors(st.normalize_x, "norm.x.", &ckpt.tensors)?;
        let y_norm = Normalizer::from_tensors(st.normalize_y, "norm.y.", &ckpt.tensors)?;
        // The resolved regime (the configuration may leave it to the benchmark recipe).
        let regime = st.regime;
        let kind = model_kind(&vs);
        Ok((
            Self {
                vs,
                model,
                x_norm,
                y_norm,
                regime,
                kind,
            },
            ckpt.state,
        ))
    }

    /// Predictions for raw (un-normalized) inputs, in evaluation mode and without gradients.
    /// Steady: (B, N, C). Time series: (B, N, C, T) for `t_out` steps.
    pub fn predict(&self, pos: &Tensor, fx: &Tensor, t_out: i64) -> Result<Tensor> {
        let _g = tch::no_grad_guard();
        let fx = self.x_norm.encode(fx)?;
        match self.regime {
            Regime::Steady => Ok(self
                .y_norm
                .decode(&self.model.forward(pos, &fx, None, false)?)?),
            Regime::Autoregressive => {
                rollout(&self.model, pos, &fx, t_out, None, false).map(|(p, _)| p)
            }
            Regime::PerTimeStep => per_step_predictions(&self.model, &self.y_norm, pos, &fx, t_out),
        }
    }
}

fn model_kind(vs: &VarStore) -> Kind {
    vs.trainable_variables()
        .first()
        .map(|t| t.kind())
        .unwrap_or(Kind::Float)
}

/// Evaluation-mode rollout: `steps` frames, each appended to the sliding window `fx` (teacher
/// forcing from `truth` when given). Returns (B, N, C, steps) and Σ_t Σ_b relL2 when `truth`
/// is given.
fn rollout(
    model: &Ono,
    pos: &Tensor,
    fx: &Tensor,
    steps: i64,
    truth: Option<(&Tensor, bool)>,
    train: bool,
) -> Result<(Tensor, Option<Tensor>)> {
    let mut window = fx.shallow_clone();
    let mut frames = Vec::with_capacity(steps as usize);
    let mut loss: Option<Tensor> = None;
    for t in 0..steps {
        let pred = model.forward(pos, &window, None, train)?;
        let c = pred.size()[2];
        let next = match truth {
            Some((y, teacher)) => {
                let yt = y.f_select(-1, t)?;
                let l = loss::relative_l2(&pred, &yt, ono_nn::loss::Reduction::Sum)?;
                loss = Some(match loss.take() {
                    Some(a) => a.f_add(&l)?,
                    None => l,
                });
                if teacher {
                    yt
                } else {
                    pred.shallow_clone()
                }
            }
            None => pred.shallow_clone(),
        };
        let keep = window.size()[2] - c;
        window = Tensor::f_cat(&[window.f_narrow(2, c, keep)?, next], 2)?;
        frames.push(pred);
    }
    Ok((Tensor::f_stack(&frames, -1)?, loss))
}

/// Every time step of a per-time-step model, t = linspace(0, 1, T). Returns (B, N, C, T).
fn per_step_predictions(
    model: &Ono,
    y_norm: &Normalizer,
    pos: &Tensor,
    fx: &Tensor,
    steps: i64,
) -> Result<Tensor> {
    let b = fx.size()[0];
    let times = time_grid(steps, fx.kind(), fx.device())?;
    let preds = (0..steps)
        .map(|k| {
            let t = times
                .f_narrow(0, k, 1)?
                .f_expand([b], false)?
                .f_reshape([b, 1])?;
            y_norm
                .decode(&model.forward(pos, fx, Some(&t), false)?)
                .map_err(Error::from)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::f_stack(&preds, -1)?)
}

fn time_grid(steps: i64, kind: Kind, device: Device) -> Result<Tensor> {
    Ok(Tensor::f_linspace(0.0, 1.0, steps, (kind, device))?)
}

/// What a finished run reports.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Batches done.
    pub steps: u64,
    /// The last epoch's test errors.
    pub final_test: Option<f64>,
    /// (epoch, error) of the best epoch.
    pub best: Option<(u64, f64)>,
    /// Where the last checkpoint is.
    pub last_checkpoint: PathBuf,
    /// The step the run resumed at (0 for a fresh run).
    pub resumed_at: u64,
}

/// A loss not yet read back to the host.
struct PendingLoss {
    loss: Tensor,
    step: u64,
    /// The batch size (a mean-reduced loss is scaled back to a sum with it).
    batch: i64,
    /// Samples this loss adds to the epoch's count (0 for the 2nd.. time step of a batch).
    new_samples: i64,
}

/// A training run.
pub struct Trainer {
    cfg: TrainConfig,
    device: Device,
    kind: Kind,
    train: Split,
    test: Split,
    grid: Option<Vec<i64>>,
    x_norm: Normalizer,
    y_norm: Normalizer,
    vs: VarStore,
    model: Ono,
    opt: AdamW,
    schedule: Option<OneCycle>,
    state: TrainState,
    paths: RunPaths,
    steps_per_epoch: u64,
    time_steps: i64,
    regime: Regime,
    alpha: f64,
    resumed_at: u64,
    /// Detached losses not yet read back.
    pending: Vec<PendingLoss>,
}

impl Trainer {
    /// Prepares a run: reads and checks the data, fits the normalizers on the training split,
    /// builds the model and optimizer, and — with `resume` — restores `checkpoints/last`.
    /// Without `resume`, an output folder that already holds a checkpoint is refused.
    pub fn new(cfg: TrainConfig, resume: bool) -> Result<Self> {
        cfg.validate()?;
        let device = cfg.device()?;
        if cfg.threads > 0 {
            tch::set_num_threads(cfg.threads);
        }
        let kind = if cfg.double {
            Kind::Double
        } else {
            Kind::Float
        };
        let paths = RunPaths::new(&cfg.output_dir);
        let last = paths.checkpoints.join("last.safetensors");
        let ckpt = if resume && last.exists() {
            Some(Checkpoint::load(&last)?)
        } else {
            if !resume && last.exists() {
                return Err(Error::Checkpoint {
                    path: last,
                    msg: "the output folder already holds a run; pass --resume to continue it or choose another output_dir".into(),
                });
            }
            None
        };

        let resolved = resolve_data(&cfg.data, &cfg.loss)?;
        let (regime, nx_kind, ny_kind, alpha) = (
            resolved.regime,
            resolved.normalize_x,
            resolved.normalize_y,
            resolved.derivative_alpha,
        );
        let data = resolved.dataset;
        let (train, test) = (data.train, data.test);
        let ysz = train.y.size();
        let time_steps = if ysz.len() == 4 { ysz[3] } else { 0 };
        match (regime, ysz.len()) {
            (Regime::Steady, 3) => {}
            (Regime::Autoregressive | Regime::PerTimeStep, 4) => {}
            (r, _) => {
                return Err(Error::config(
                    "data.regime",
                    format!("{r:?} does not fit targets of shape {ysz:?} ((S, N, C) for steady, (S, N, C, T) for time series)"),
                ))
            }
        }
        if regime == Regime::Autoregressive
            && (nx_kind != NormalizerKind::None || ny_kind != NormalizerKind::None)
        {
            return Err(Error::config(
                "data.normalize_x",
                "the autoregressive regime feeds predictions back as inputs and supports no normalizer (NS2d uses none)",
            ));
        }
        if cfg.recompute && regime != Regime::Steady {
            return Err(Error::config(
                "recompute",
                "activation recomputation is implemented for the steady regime only",
            ));
        }
        if regime == Regime::Autoregressive && train.fx.size()[2] % ysz[2] != 0 {
            return Err(Error::config(
                "data.regime",
                format!(
                    "autoregressive inputs must be whole frames: fx has {} channels, a frame {}",
                    train.fx.size()[2],
                    ysz[2]
                ),
            ));
        }
        loss::check_targets(&train.y, "training targets")?;
        loss::check_targets(&test.y, "test targets")?;
        if alpha > 0.0 {
            match &data.grid {
                Some(g)
                    if g.len() == 2 && g[0] == g[1] && ysz[2] == 1 && regime == Regime::Steady => {}
                _ => {
                    return Err(Error::config(
                        "loss.derivative_alpha",
                        "the derivative loss needs steady scalar targets on a square 2-D grid",
                    ))
                }
            }
        }

        // Normalizers: fitted on the training split (or restored), applied once to the inputs.
        let (x_norm, y_norm) = match &ckpt {
            Some(c) => (
                Normalizer::from_tensors(c.state.normalize_x, "norm.x.", &c.tensors)?,
                Normalizer::from_tensors(c.state.normalize_y, "norm.y.", &c.tensors)?,
            ),
            None => (
                Normalizer::fit(nx_kind, &train.fx)?,
                Normalizer::fit(ny_kind, &train.y)?,
            ),
        };
        let to_dev = |s: Split| -> Result<Split> {
            Ok(Split {
                fx: x_norm.encode(&s.fx)?.f_to_device(device)?.f_to_kind(kind)?,
                y: s.y.f_to_device(device)?.f_to_kind(kind)?,
                pos: s.pos.f_to_device(device)?.f_to_kind(kind)?,
            })
        };
        let train = to_dev(train)?;
        let test = to_dev(test)?;

        let model_cfg = match &ckpt {
            Some(c) => c.state.model,
            None => {
                let mut m = cfg.model_config(train.pos.size()[2], train.fx.size()[2], ysz[2])?;
                m.time_input = regime == Regime::PerTimeStep;
                m.validate()
                    .map_err(|e| Error::config("model.overrides", e.to_string()))?;
                m
            }
        };
        // Initialised on the CPU, as the reference (`ONO(...).cuda()`) does, then moved: the
        // initial weights of a seed are the same on every device, since the CPU and CUDA
        // generators draw different numbers.
        tch::manual_seed(cfg.seed as i64);
        let mut vs = VarStore::new(Device::Cpu);
        let model = model_cfg.init(&vs.root())?;
        if kind == Kind::Double {
            vs.double();
        }
        vs.set_device(device);
        let mut opt = AdamW::new(&vs, cfg.optimizer.adamw())?;

        let n_train = train.len() as u64;
        let steps_per_epoch = n_train.div_ceil(cfg.batch_size as u64);
        let total = cfg.epochs * steps_per_epoch;
        let schedule = match cfg.schedule.kind {
            ScheduleKind::OneCycle => Some(cfg.one_cycle(total)?.build()?),
            ScheduleKind::Constant => None,
        };

        let fingerprint = cfg.fingerprint();
        let mut resumed_at = 0;
        let state = match ckpt {
            Some(c) => {
                if c.state.config != fingerprint {
                    return Err(Error::Checkpoint {
                        path: last,
                        msg: format!(
                            "the configuration differs from the one the run was started with ({}); resume with the same settings or start a new output_dir",
                            differing_keys(&c.state.config, &fingerprint).join(", ")
                        ),
                    });
                }
                ono_nn::weights::copy_into(&vs, &c.section("model."), false, &last)?;
                opt.load_state("optim.", &c.section(""), &c.state.optimizer)?;
                resumed_at = c.state.global_step;
                c.state
            }
            None => TrainState {
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
                normalize_x: nx_kind,
                normalize_y: ny_kind,
                regime,
                optimizer: opt.state("optim.")?.1,
            },
        };
        Ok(Self {
            cfg,
            device,
            kind,
            train,
            test,
            grid: data.grid,
            x_norm,
            y_norm,
            vs,
            model,
            opt,
            schedule,
            state,
            paths,
            steps_per_epoch,
            time_steps,
            regime,
            alpha,
            resumed_at,
            pending: Vec::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }

    /// The model.
    pub fn model(&self) -> &Ono {
        &self.model
    }

    /// The variables.
    pub fn var_store(&self) -> &VarStore {
        &self.vs
    }

    /// The run state.
    pub fn state(&self) -> &TrainState {
        &self.state
    }

    /// Batches per epoch.
    pub fn steps_per_epoch(&self) -> u64 {
        self.steps_per_epoch
    }

    /// Where the run writes.
    pub fn paths(&self) -> &RunPaths {
        &self.paths
    }

    /// Trains to the configured number of epochs.
    pub fn run(&mut self, progress: &Progress) -> Result<Summary> {
        let epochs = self.cfg.epochs;
        if self.resumed_at > 0 {
            progress.println(&format!(
                "resumed at step {} (epoch {}, batch {})",
                self.resumed_at,
                self.state.epoch + 1,
                self.state.batch_in_epoch
            ));
            // The metrics file may predate the checkpoint's history by one epoch.
            self.write_metrics()?;
        }
        let bs = self.cfg.batch_size as usize;
        while self.state.epoch < epochs {
            let epoch = self.state.epoch;
            let started = Instant::now();
            let seconds_before = self.state.epoch_seconds;
            let order = epoch_order(self.train.len(), self.cfg.seed, epoch);
            let batches: Vec<&[i64]> = order.chunks(bs).collect();
            let mut lr = 0.0;
            while (self.state.batch_in_epoch as usize) < batches.len() {
                let idx = batches[self.state.batch_in_epoch as usize];
                // Gradients on even when the caller runs inside `no_grad`.
                lr = match tch::with_grad(|| self.train_batch(idx)) {
                    Ok(lr) => lr,
                    Err(e) => {
                        // A non-finite loss read now explains the failure better than the
                        // failure itself (a NaN weight breaks the Cholesky factor first).
                        self.flush_losses()?;
                        return Err(Error::Step {
                            step: self.state.global_step,
                            epoch,
                            source: Box::new(e),
                        });
                    }
                };
                self.state.batch_in_epoch += 1;
                self.state.global_step += 1;
                let step = self.state.global_step;
                if step % self.cfg.log.every_steps == 0 {
                    self.flush_losses()?;
                    let mean = self.state.epoch_loss_sum / self.state.epoch_samples.max(1) as f64;
                    progress.update(epoch, epochs, step, mean, lr);
                }
                let every = self.cfg.checkpoint.every_steps;
                if every > 0
                    && self.state.batch_in_epoch % every == 0
                    && (self.state.batch_in_epoch as usize) < batches.len()
                {
                    self.flush_losses()?;
                    self.state.epoch_seconds = seconds_before + started.elapsed().as_secs_f64();
                    self.save("last")?;
                }
            }
            self.flush_losses()?;
            let due = (epoch + 1) % self.cfg.log.eval_every_epochs == 0 || epoch + 1 == epochs;
            let test = if due {
                Some(self.evaluate_test()?)
            } else {
                None
            };
            let record = EpochRecord {
                epoch,
                step: self.state.global_step,
                train_loss: self.state.epoch_loss_sum / self.state.epoch_samples.max(1) as f64,
                test_rel_l2: test.as_ref().map(|t| t.full),
                test_per_step: test.map(|t| t.per_step).unwrap_or_default(),
                lr,
                seconds: seconds_before + started.elapsed().as_secs_f64(),
            };
            progress.println(&format!(
                "epoch {}/{epochs}: train loss {:.4e}, test rel L2 {}, {:.1} s",
                epoch + 1,
                record.train_loss,
                record
                    .test_rel_l2
                    .map_or("-".into(), |v| format!("{v:.4e}")),
                record.seconds
            ));
            let improved = match (record.test_rel_l2, self.state.best) {
                (Some(e), Some((_, b))) => e < b,
                (Some(_), None) => true,
                _ => false,
            };
            if improved {
                self.state.best = Some((epoch, record.test_rel_l2.unwrap_or(f64::NAN)));
            }
            self.state.history.push(record);
            self.state.epoch += 1;
            self.state.batch_in_epoch = 0;
            self.state.epoch_loss_sum = 0.0;
            self.state.epoch_samples = 0;
            self.state.epoch_seconds = 0.0;
            self.save("last")?;
            if improved && self.cfg.checkpoint.keep_best {
                self.save("best")?;
            }
            self.write_metrics()?;
            self.write_figures()?;
        }
        progress.finish();
        Ok(Summary {
            steps: self.state.global_step,
            final_test: self.state.history.last().and_then(|r| r.test_rel_l2),
            best: self.state.best,
            last_checkpoint: self.paths.checkpoints.join("last.safetensors"),
            resumed_at: self.resumed_at,
        })
    }

    /// One batch (one or, per time step, T optimizer steps). Returns the lr used.
    fn train_batch(&mut self, idx: &[i64]) -> Result<f64> {
        let step = self.state.global_step;
        let (lr, beta1) = match &self.schedule {
            Some(s) => {
                let v = s.at(step)?;
                (v.lr, v.beta1)
            }
            None => (self.cfg.optimizer.lr, None),
        };
        self.opt.set_lr(lr);
        if let Some(b1) = beta1 {
            self.opt.set_beta1(b1);
        }
        tch::manual_seed(mix(self.cfg.seed, step.wrapping_add(1 << 40)) as i64);
        let batch = self.train.batch(idx, self.device, self.kind)?;
        let b = idx.len() as i64;
        let clip = self.cfg.optimizer.max_grad_norm.filter(|&m| m > 0.0);
        match self.regime {
            Regime::Steady if self.cfg.recompute => {
                self.opt.zero_grad();
                let loss =
                    self.model
                        .forward_backward_recompute(&batch.pos, &batch.fx, None, |out| {
                            self.steady_loss(out, &batch.y)
                                .map_err(|e| ono_models::Error::Config(e.to_string()))
                        })?;
                self.opt.step(clip)?;
                self.pending.push(PendingLoss {
                    loss,
                    step,
                    batch: b,
                    new_samples: b,
                });
            }
            Regime::Steady => {
                let out = self.model.forward(&batch.pos, &batch.fx, None, true)?;
                let loss = self.steady_loss(&out, &batch.y)?;
                self.optimize(&loss, clip)?;
                self.pending.push(PendingLoss {
                    loss: loss.f_detach()?,
                    step,
                    batch: b,
                    new_samples: b,
                });
            }
            Regime::Autoregressive => {
                let (_, loss) = rollout(
                    &self.model,
                    &batch.pos,
                    &batch.fx,
                    self.time_steps,
                    Some((&batch.y, self.cfg.data.teacher_forcing)),
                    true,
                )?;
                let loss = loss.ok_or_else(|| Error::Data("a rollout of zero steps".into()))?;
                let loss = self.reduce(loss, b)?;
                self.optimize(&loss, clip)?;
                self.pending.push(PendingLoss {
                    loss: loss.f_detach()?,
                    step,
                    batch: b,
                    new_samples: b,
                });
            }
            Regime::PerTimeStep => {
                // An independent permutation of the time steps per sample (the reference collate).
                let t = self.time_steps;
                let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(mix(
                    self.cfg.seed,
                    step.wrapping_add(1 << 41),
                ));
                let perms: Vec<i64> = (0..b)
                    .flat_map(|_| {
                        let mut p: Vec<i64> = (0..t).collect();
                        p.shuffle(&mut rng);
                        p
                    })
                    .collect();
                let perms = Tensor::from_slice(&perms)
                    .f_view([b, t])?
                    .f_to_device(self.device)?;
                let times = time_grid(t, self.kind, self.device)?;
                let (n, c) = (batch.y.size()[1], batch.y.size()[2]);
                for k in 0..t {
                    let tk = perms.f_select(1, k)?;
                    let t_in = times.f_index_select(0, &tk)?.f_reshape([b, 1])?;
                    let gather = tk.f_view([b, 1, 1, 1])?.f_expand([b, n, c, 1], false)?;
                    let target = batch.y.f_gather(3, &gather, false)?.f_squeeze_dim(3)?;
                    let pred = self.y_norm.decode(&self.model.forward(
                        &batch.pos,
                        &batch.fx,
                        Some(&t_in),
                        true,
                    )?)?;
                    let loss = self.reduce(
                        loss::relative_l2(&pred, &target, ono_nn::loss::Reduction::Sum)?,
                        b,
                    )?;
                    self.optimize(&loss, clip)?;
                    // Reported per sample and time step.
                    self.pending.push(PendingLoss {
                        loss: loss.f_detach()?.f_div_scalar(t as f64)?,
                        step,
                        batch: b,
                        new_samples: if k == 0 { b } else { 0 },
                    });
                }
            }
        }
        Ok(lr)
    }

    /// The steady loss of the model's raw output: decoded, then relative L2 (+ α · derivative).
    fn steady_loss(&self, out: &Tensor, y: &Tensor) -> Result<Tensor> {
        let pred = self.y_norm.decode(out)?;
        let b = pred.size()[0];
        let alpha = self.alpha;
        let loss = match (&self.grid, alpha > 0.0) {
            (Some(g), true) => loss::darcy_loss(&pred, y, g[0], alpha)?,
            _ => loss::relative_l2(&pred, y, ono_nn::loss::Reduction::Sum)?,
        };
        self.reduce(loss, b)
    }

    /// The configured batch reduction of a Σ_b loss.
    fn reduce(&self, sum: Tensor, b: i64) -> Result<Tensor> {
        Ok(match self.cfg.loss.reduction {
            ReductionName::Sum => sum,
            ReductionName::Mean => sum.f_div_scalar(b as f64)?,
        })
    }

    fn optimize(&mut self, loss: &Tensor, clip: Option<f64>) -> Result<()> {
        self.opt.zero_grad();
        loss.f_backward()?;
        self.opt.step(clip)?;
        Ok(())
    }

    /// Reads the pending losses (one host read), stops at the first non-finite one, and adds them
    /// to the epoch's sums.
    fn flush_losses(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let vals = Tensor::f_stack(
            &self
                .pending
                .iter()
                .map(|p| p.loss.f_to_kind(Kind::Double))
                .collect::<Result<Vec<_>, _>>()?,
            0,
        )?;
        let vals = Vec::<f64>::try_from(vals)?;
        for (&v, p) in vals.iter().zip(&self.pending) {
            if !v.is_finite() {
                return Err(Error::NonFiniteLoss {
                    step: p.step,
                    epoch: self.state.epoch,
                    value: v,
                });
            }
            self.state.epoch_loss_sum += match self.cfg.loss.reduction {
                ReductionName::Sum => v,
                ReductionName::Mean => v * p.batch as f64,
            };
            self.state.epoch_samples += p.new_samples as u64;
        }
        self.pending.clear();
        Ok(())
    }

    /// Mean relative L2 on the test split (decoded predictions against raw targets).
    pub fn evaluate_test(&self) -> Result<RolloutErrors> {
        evaluate(
            &self.model,
            &self.y_norm,
            &self.test,
            self.regime,
            self.cfg.batch_size,
            self.time_steps,
            self.device,
            self.kind,
        )
    }

    fn save(&mut self, name: &str) -> Result<PathBuf> {
        // Never write a checkpoint over unread (possibly non-finite) losses.
        self.flush_losses()?;
        let (opt_tensors, opt_state) = self.opt.state("optim.")?;
        self.state.optimizer = opt_state;
        let mut tensors: std::collections::BTreeMap<String, Tensor> = self
            .vs
            .variables()
            .into_iter()
            .map(|(k, v)| (format!("model.{k}"), v))
            .collect();
        tensors.extend(opt_tensors);
        tensors.extend(self.x_norm.tensors("norm.x."));
        tensors.extend(self.y_norm.tensors("norm.y."));
        Checkpoint {
            tensors,
            state: self.state.clone(),
        }
        .save(&self.paths.checkpoints, name)
    }

    fn write_metrics(&self) -> Result<()> {
        let mut text = String::new();
        for r in &self.state.history {
            text.push_str(&serde_json::to_string(r).map_err(|e| Error::Data(e.to_string()))?);
            text.push('\n');
        }
        ono_io::atomic::write_atomic(&self.paths.metrics, text.as_bytes())?;
        Ok(())
    }

    fn write_figures(&self) -> Result<()> {
        let h = &self.state.history;
        let train: Vec<(f64, f64)> = h
            .iter()
            .map(|r| ((r.epoch + 1) as f64, r.train_loss))
            .collect();
        let test: Vec<(f64, f64)> = h
            .iter()
            .filter_map(|r| r.test_rel_l2.map(|e| ((r.epoch + 1) as f64, e)))
            .collect();
        let mut series = vec![plots::Series {
            name: "train loss / sample".into(),
            points: train,
        }];
        if !test.is_empty() {
            series.push(plots::Series {
                name: "test relative L2".into(),
                points: test,
            });
        }
        plots::training_curves(&self.paths.curves, "training", "epoch", "error", &series)?;
        if let (Some(g), true) = (&self.grid, self.cfg.log.panels > 0) {
            if g.len() == 2 {
                self.write_panels(g[0], g[1])?;
            }
        }
        Ok(())
    }

    fn write_panels(&self, h: i64, w: i64) -> Result<()> {
        let k = (self.cfg.log.panels as i64).min(self.test.len());
        let idx: Vec<i64> = (0..k).collect();
        let batch = self.test.batch(&idx, self.device, self.kind)?;
        let pred = {
            let _g = tch::no_grad_guard();
            match self.regime {
                Regime::Steady => self
                    .y_norm
                    .decode(&self.model.forward(&batch.pos, &batch.fx, None, false)?)?,
                Regime::Autoregressive => {
                    rollout(
                        &self.model,
                        &batch.pos,
                        &batch.fx,
                        self.time_steps,
                        None,
                        false,
                    )?
                    .0
                }
                Regime::PerTimeStep => per_step_predictions(
                    &self.model,
                    &self.y_norm,
                    &batch.pos,
                    &batch.fx,
                    self.time_steps,
                )?,
            }
        };
        // First channel (and last time step) of each field, raw input values.
        let last = |t: &Tensor| -> Result<Tensor> {
            let t = if t.dim() == 4 {
                t.f_select(3, t.size()[3] - 1)?
            } else {
                t.shallow_clone()
            };
            Ok(t.f_select(2, 0)?
                .f_to_kind(Kind::Float)?
                .f_to_device(Device::Cpu)?
                .f_contiguous()?)
        };
        let input = self
            .x_norm
            .decode(&batch.fx)?
            .f_select(2, 0)?
            .f_to_kind(Kind::Float)?
            .f_to_device(Device::Cpu)?;
        let (input, truth, pred) = (
            Vec::<f32>::try_from(input.f_reshape([-1])?)?,
            Vec::<f32>::try_from(last(&batch.y)?.f_reshape([-1])?)?,
            Vec::<f32>::try_from(last(&pred)?.f_reshape([-1])?)?,
        );
        let n = (h * w) as usize;
        let panels: Vec<plots::Panel<'_>> = (0..k as usize)
            .map(|i| plots::Panel {
                input: &input[i * n..(i + 1) * n],
                truth: &truth[i * n..(i + 1) * n],
                prediction: &pred[i * n..(i + 1) * n],
            })
            .collect();
        plots::field_panels(&self.paths.panels, h as usize, w as usize, &panels)
    }
}

/// Mean relative L2 of a model on a split (inputs already normalized), in evaluation mode.
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    model: &Ono,
    y_norm: &Normalizer,
    split: &Split,
    regime: Regime,
    batch_size: i64,
    time_steps: i64,
    device: Device,
    kind: Kind,
) -> Result<RolloutErrors> {
    let _g = tch::no_grad_guard();
    let mut sum = MetricSum::new();
    let idx: Vec<i64> = (0..split.len()).collect();
    for chunk in idx.chunks(batch_size.max(1) as usize) {
        let batch = split.batch(chunk, device, kind)?;
        match regime {
            Regime::Steady => {
                let pred = y_norm.decode(&model.forward(&batch.pos, &batch.fx, None, false)?)?;
                sum.add(&pred, &batch.y)?;
            }
            Regime::Autoregressive => {
                let (pred, _) = rollout(model, &batch.pos, &batch.fx, time_steps, None, false)?;
                sum.add_rollout(&pred, &batch.y)?;
            }
            Regime::PerTimeStep => {
                let pred = per_step_predictions(model, y_norm, &batch.pos, &batch.fx, time_steps)?;
                sum.add_rollout(&pred, &batch.y)?;
            }
        }
    }
    sum.finish()
}

/// Top-level keys whose values differ.
fn differing_keys(a: &serde_json::Value, b: &serde_json::Value) -> Vec<String> {
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return vec!["(whole configuration)".into()];
    };
    let mut keys: Vec<String> = a
        .keys()
        .chain(b.keys())
        .filter(|k| a.get(*k) != b.get(*k))
        .cloned()
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Normalized inputs of a split for [`evaluate`] (exposed for `ono eval`).
pub fn normalized(split: &Split, x_norm: &Normalizer, device: Device, kind: Kind) -> Result<Split> {
    Ok(Split {
        fx: x_norm
            .encode(&split.fx)?
            .f_to_device(device)?
            .f_to_kind(kind)?,
        y: split.y.f_to_device(device)?.f_to_kind(kind)?,
        pos: split.pos.f_to_device(device)?.f_to_kind(kind)?,
    })
}

/// The model configuration type, re-exported for callers of [`Predictor`].
pub type ModelConfig = OnoConfig;

/// The data of a run with the settings that come with it.
pub struct ResolvedData {
    /// Train and test splits.
    pub dataset: TensorDataset,
    /// How samples are fed.
    pub regime: Regime,
    /// Input normalizer kind.
    pub normalize_x: NormalizerKind,
    /// Target normalizer kind.
    pub normalize_y: NormalizerKind,
    /// Darcy's derivative-loss weight.
    pub derivative_alpha: f64,
}

/// Reads the dataset file or the benchmark of `cfg.data`, applies `ntrain` / `ntest`, and fills
/// unset settings from the benchmark's reference recipe.
pub fn resolve_data(d: &DataSection, loss: &LossSection) -> Result<ResolvedData> {
    let (dataset, recipe) = match (&d.path, &d.benchmark) {
        (Some(path), _) => {
            let data = TensorDataset::read(path).map_err(|e| match e {
                ono_data::Error::Io { path, source } if source.kind() == std::io::ErrorKind::NotFound => {
                    Error::Data(format!(
                        "data.path: {} does not exist (make one with `ono data darcy`, or point data.path at a dataset file)",
                        path.display()
                    ))
                }
                e => Error::DataCrate(e),
            })?;
            let train = match d.ntrain {
                Some(n) => data
                    .train
                    .take(n)
                    .map_err(|e| Error::config("data.ntrain", e.to_string()))?,
                None => data.train,
            };
            let test = match d.ntest {
                Some(n) => data
                    .test
                    .take(n)
                    .map_err(|e| Error::config("data.ntest", e.to_string()))?,
                None => data.test,
            };
            (
                TensorDataset {
                    train,
                    test,
                    grid: data.grid,
                },
                None,
            )
        }
        (None, Some(name)) => {
            let b: Benchmark = name
                .parse()
                .map_err(|e: ono_data::Error| Error::config("data.benchmark", e.to_string()))?;
            let opts = LoadOptions {
                ntrain: d.ntrain.map(|n| n as usize),
                ntest: d.ntest.map(|n| n as usize),
                r: d.r,
                layout: d.layout,
            };
            let dir = benchmarks::data_dir(d.data_dir.as_deref());
            let loaded = benchmarks::load(b, &dir, &opts)?;
            (loaded.dataset, Some(loaded.recipe))
        }
        (None, None) => return Err(Error::config("data", "needs `path` or `benchmark`")),
    };
    Ok(ResolvedData {
        dataset,
        regime: d
            .regime
            .or(recipe.as_ref().map(|r| r.regime))
            .unwrap_or_default(),
        normalize_x: d
            .normalize_x
            .or(recipe.as_ref().map(|r| r.normalize_x))
            .unwrap_or_default(),
        normalize_y: d
            .normalize_y
            .or(recipe.as_ref().map(|r| r.normalize_y))
            .unwrap_or_default(),
        derivative_alpha: loss
            .derivative_alpha
            .or(recipe.as_ref().map(|r| r.derivative_alpha))
            .unwrap_or(0.0),
    })
}
