//! Experiment configuration (TOML): model architecture, preset and overrides, data, loss, optimizer, schedule,
//! epochs, batch size, seed, device and checkpoint policy. Unknown keys are refused, and every
//! value error names its dotted key.

use std::path::{Path, PathBuf};

use ono_data::benchmarks::{Benchmark, Layout};
use ono_data::normalizer::NormalizerKind;
use ono_models::{DataDims, ModelConfig, Recompute};
use ono_nn::Precision;
use serde::{Deserialize, Serialize};
use tch::Device;

use crate::adamw::AdamWConfig;
pub use crate::graphs::Graphs;
use crate::one_cycle::{Anneal, OneCycleConfig};
use crate::{Error, Result};

/// What the processes of a multi-process run split ([`TrainConfig::parallel`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Parallelism {
    /// Each process trains a share of every optimizer step's samples (`crate::parallel`).
    #[default]
    Data,
    /// Each process holds a contiguous share of every sample's points; the models' sums over
    /// points are all-reduced (`ono_kernels::points`).
    Points,
}

/// A whole experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainConfig {
    /// Seed of the model initialisation, data order and any torch randomness.
    #[serde(default)]
    pub seed: u64,
    /// Passes over the training split.
    pub epochs: u64,
    /// Samples per optimizer step, whatever the number of processes and micro-batches.
    pub batch_size: i64,
    /// Micro-batches per optimizer step in each process: a step's `batch_size` samples are cut
    /// into `accumulate_steps` × (number of processes) contiguous micro-batches, each
    /// forward-and-backward on its own, their gradients summed (a mean-reduced loss weighted by
    /// its micro-batch's share) before one optimizer step. The step's samples are unchanged, so
    /// with a loss that is a plain sum over samples (FNO's) the step is the one big batch's up to
    /// rounding; models whose forward depends on the batch (ONO's whitening, BatchNorm) see
    /// micro-batches. Left out of the serialized form when 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub accumulate_steps: u64,
    /// What the processes of a launch (torchrun, srun, mpirun) split: `data` (default), each
    /// process a share of every step's samples; `points`, each process a contiguous share of
    /// every sample's points, for meshes larger than one device (docs/training.md). Either
    /// computes what one process computes. Left out of the serialized form when `data`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub parallel: Parallelism,
    /// `cpu`, `cuda` or `cuda:N`.
    #[serde(default = "default_device")]
    pub device: String,
    /// Torch intra-op threads (0: libtorch's default).
    #[serde(default)]
    pub threads: i32,
    /// Train in float64 instead of float32.
    #[serde(default)]
    pub double: bool,
    /// The kind of the matrix products: `f32` (the parameters' own), `bf16` or `f16` (mixed
    /// precision: float32 parameters, gradients and optimizer state; `f16` adds dynamic loss
    /// scaling). Left out of the serialized form when `f32`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub precision: Precision,
    /// How activations are kept for the backward pass (`"auto"`, `"none"`, `"blocks"`,
    /// `"selective"`; `true`/`false` mean blocks/none). Modes other than
    /// none and auto need the steady regime; auto is plain in the other regimes.
    #[serde(default, skip_serializing_if = "is_auto")]
    pub recompute: Recompute,
    /// The training step as a CUDA graph (`graphs.rs`): `auto` (captured on CUDA where the step
    /// is graph-safe, else plain steps, the reason said), `on` (captured, or the run refused),
    /// `off`, `emulate` (the graph-safe step without capture, on any device). How a run goes,
    /// not what it computes: left out of the fingerprint, and of the serialized form when `auto`.
    #[serde(default, skip_serializing_if = "is_default")]
    pub graphs: Graphs,
    /// Where checkpoints, metrics and figures go (relative paths: to the config file).
    pub output_dir: PathBuf,
    /// The model.
    pub model: ModelSection,
    /// The data.
    pub data: DataSection,
    /// The loss.
    #[serde(default)]
    pub loss: LossSection,
    /// AdamW and clipping.
    #[serde(default)]
    pub optimizer: OptimizerSection,
    /// The learning-rate schedule.
    #[serde(default)]
    pub schedule: ScheduleSection,
    /// Checkpoint policy.
    #[serde(default)]
    pub checkpoint: CheckpointSection,
    /// Logging and figures.
    #[serde(default)]
    pub log: LogSection,
}

fn default_device() -> String {
    "cpu".into()
}

/// An architecture, a preset of it and the fields to change in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// The architecture (`ono`, `mlp`, …; see `ono_models::ARCHS`). ONO when absent, and then
    /// left out of the serialized form (an added key's default keeps a file's meaning:
    /// `ono_io::format`).
    #[serde(default = "default_arch", skip_serializing_if = "is_default_arch")]
    pub arch: String,
    /// One of the architecture's presets (ONO: `darcy`, `ns2d`, `elasticity`, ...; mlp: `default`,
    /// `small`). Absent: the architecture's default configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
    /// Any field of the architecture's configuration. `space_dim`, `fun_dim`, `out_dim` and
    /// `time_input` are taken from the data.
    #[serde(default)]
    pub overrides: toml::Table,
}

impl ModelSection {
    /// An architecture's preset, unchanged.
    pub fn preset(arch: &str, preset: &str) -> Self {
        Self {
            arch: arch.to_string(),
            preset: Some(preset.to_string()),
            overrides: toml::Table::new(),
        }
    }

    /// The preset (or the architecture's default) before the overrides and the data's
    /// dimensions.
    pub fn base_config(&self) -> Result<ModelConfig> {
        let arch = self.arch.as_str();
        match &self.preset {
            Some(p) => ModelConfig::preset(arch, p).map_err(|e| {
                let key = if ono_models::ARCHS.contains(&arch) {
                    "model.preset"
                } else {
                    "model.arch"
                };
                Error::invalid(key, e)
            }),
            None => ModelConfig::from_fields(arch, serde_json::json!({}))
                .map_err(|e| Error::invalid("model.arch", e)),
        }
    }

    /// The preset with the overrides, before the data's dimensions.
    pub fn config(&self) -> Result<ModelConfig> {
        with_overrides(&self.base_config()?, &self.overrides, "model.overrides")
    }

    /// Changes the model by a typed edit of its configuration. The fields that then differ
    /// from the preset become the overrides, so the experiment file says only what the edit
    /// changed, by the fields' own names.
    pub fn edit(&mut self, f: impl FnOnce(&mut ModelConfig)) -> Result<()> {
        let base = self.base_config()?;
        let mut cfg = with_overrides(&base, &self.overrides, "model.overrides")?;
        f(&mut cfg);
        if cfg.arch() != base.arch() {
            return Err(Error::config(
                "model.arch",
                format!(
                    "an edit cannot change the architecture ({} to {})",
                    base.arch(),
                    cfg.arch()
                ),
            ));
        }
        let fields = |c: &ModelConfig| c.fields().map_err(|e| Error::invalid("model", e));
        let (now, was) = (fields(&cfg)?, fields(&base)?);
        let mut overrides = toml::Table::new();
        for (k, v) in now.as_object().into_iter().flatten() {
            if was.get(k) == Some(v) {
                continue;
            }
            let key = format!("model.overrides.{k}");
            let value = toml::Value::try_from(v).map_err(|e| Error::config(&key, e.to_string()))?;
            overrides.insert(k.clone(), value);
        }
        cfg.validate()
            .map_err(|e| Error::invalid("model.overrides", e))?;
        self.overrides = overrides;
        Ok(())
    }
}

fn default_arch() -> String {
    ono_models::registry::DEFAULT_ARCH.to_string()
}

fn is_default_arch(arch: &str) -> bool {
    arch == ono_models::registry::DEFAULT_ARCH
}

pub use crate::regime::Regime;

/// The data and how to use it: a dataset file (`path`) or a published benchmark read from its
/// original files (`benchmark`, with `data_dir` or `$ONO_DATA_DIR`). Unset normalizers, regime and
/// derivative weight take the benchmark's reference values (or none / steady / 0 for a file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DataSection {
    /// A dataset file (`ono_data::dataset::TensorDataset`, safetensors); relative to the config.
    #[serde(default)]
    pub path: Option<PathBuf>,
    /// A published benchmark (`darcy`, `ns2d`, `burgers`, `airfoil`, `pipe`, `elasticity`,
    /// `elasticity_grid`, `plasticity`, `darcy_inverse`, `neuralop_darcy`, `neuralop_burgers`).
    #[serde(default, with = "benchmark_name")]
    pub benchmark: Option<Benchmark>,
    /// Point clouds whose samples differ in size (GNOT's multi-input-output files: a pickle or
    /// its converted .npz per split), relative to the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point_clouds: Option<PointCloudFiles>,
    /// Present the input function at the points to the model as an input function on its own
    /// points, rows (x, f(x)) (how GNOT takes the standard benchmarks: its branch), instead of
    /// as channels at the points.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fx_as_function: bool,
    /// `shuffled` (default: a new permutation every epoch) or `fixed_chunks` (GNOT's
    /// `MIODataLoader`: contiguous chunks whose order is shuffled once, the same every epoch).
    #[serde(default, skip_serializing_if = "is_default")]
    pub batch_order: BatchOrder,
    /// Where the benchmark's files are (default `$ONO_DATA_DIR`, else `./data`); relative to the
    /// config.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// Subsampling stride of the benchmark (Darcy 5, Burgers 8 by default).
    #[serde(default)]
    pub r: Option<usize>,
    /// Whose script layout to reproduce (`ono`, `fno` or `galerkin`).
    #[serde(default)]
    pub layout: Layout,
    /// `darcy_inverse`: the coarse grid's stride on the 421 grid (12 → 36 a side).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse_r: Option<usize>,
    /// `darcy_inverse`: the standard deviation of the noise on the normalized input (0.01).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<f64>,
    /// `neuralop_darcy`: the resolution of the test set, 16 (default, the training resolution)
    /// or 32 (the same test problems at 32²: a zero-shot test, every epoch's test error at 32²).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_resolution: Option<usize>,
    /// Training samples (the first `ntrain` of a file; the benchmark's split otherwise).
    #[serde(default)]
    pub ntrain: Option<i64>,
    /// Test samples.
    #[serde(default)]
    pub ntest: Option<i64>,
    /// Normalizer of the input functions.
    #[serde(default)]
    pub normalize_x: Option<NormalizerKind>,
    /// Normalizer of the targets (the loss is computed on decoded values, as ONO).
    #[serde(default)]
    pub normalize_y: Option<NormalizerKind>,
    /// Normalizer of the positions (GNOT normalizes its query coordinates; `none` or `unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize_pos: Option<NormalizerKind>,
    /// Normalizer of the global parameters θ (`none` or `unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize_theta: Option<NormalizerKind>,
    /// Steady, autoregressive or per time step.
    #[serde(default)]
    pub regime: Option<Regime>,
    /// Autoregressive: feed the true frame back in training (the reference) instead of the
    /// prediction.
    #[serde(default = "yes")]
    pub teacher_forcing: bool,
    /// Time extrapolation (ONO's `time_gen.py`): the training targets keep only their first
    /// `train_steps` time steps, the test targets all T, so evaluation rolls out past the
    /// horizon seen in training. Time series only (autoregressive or per time step).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub train_steps: Option<i64>,
}

fn yes() -> bool {
    true
}

/// `data.benchmark` by its name: written as [`Benchmark::name`], read as [`Benchmark`]'s
/// `FromStr` reads a name (any case, `-` for `_`), so files and checkpoints of earlier versions
/// read unchanged and an unknown name is refused, with the known ones, as the file is read.
mod benchmark_name {
    use ono_data::benchmarks::Benchmark;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &Option<Benchmark>, s: S) -> Result<S::Ok, S::Error> {
        match b {
            Some(b) => s.serialize_some(b.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Benchmark>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|name| name.parse().map_err(serde::de::Error::custom))
            .transpose()
    }
}

/// The order of the training batches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchOrder {
    #[default]
    Shuffled,
    FixedChunks,
}

/// The two files of a point-cloud data set.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointCloudFiles {
    pub train: PathBuf,
    pub test: PathBuf,
}

/// The training loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LossSection {
    /// Σ over the batch (the reference) or the mean. The Galerkin Transformer's losses are
    /// means by definition and ignore it.
    pub reduction: ReductionName,
    /// Weight α of ONO Darcy's derivative term (0.1 in the reference Darcy script; needs a 2-D
    /// square grid). Unset: the benchmark's value, 0 for a dataset file.
    pub derivative_alpha: Option<f64>,
    /// `rel_l2` (the relative L2, with ONO Darcy's derivative term when `derivative_alpha` > 0),
    /// `gnot` (GNOT's per-channel relative L2 on normalized targets, a batch mean) or
    /// `galerkin_h1` (the Galerkin Transformer's `WeightedL2Loss` / `WeightedL2Loss2d`: the
    /// batch mean of √ of the relative squared error plus the H¹ term weighted by `h1_gamma`,
    /// whose target derivatives the data carry as `aux`). Unset: the benchmark's recipe
    /// (`galerkin_h1` in the Galerkin layout), else `rel_l2`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<LossKind>,
    /// γ of the Galerkin H¹ term (0.1 in `ex1_burgers`, 0.5 in `ex2_darcy`, 0 in the inverse
    /// problem). Unset: the recipe's value, else 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub h1_gamma: Option<f64>,
    /// How the frames of an autoregressive training rollout add up to its loss: `sum` (each
    /// frame once: NSL, ONO's `NS_example2.py`) or `cumulative` (ONO's `time_gen.py`, Table 4).
    #[serde(skip_serializing_if = "RolloutLoss::is_sum")]
    pub rollout: RolloutLoss,
}

impl Default for LossSection {
    fn default() -> Self {
        Self {
            reduction: ReductionName::Sum,
            derivative_alpha: None,
            kind: None,
            h1_gamma: None,
            rollout: RolloutLoss::Sum,
        }
    }
}

/// How the per-frame losses l₀ … l_{T−1} of an autoregressive training rollout add up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RolloutLoss {
    /// Σₛ lₛ.
    #[default]
    Sum,
    /// Σₛ Σ_{k≤s} l_k = Σ_k (T − k) l_k: `time_gen.py` adds the running sum of the frames'
    /// losses at every frame (`l2loss += …; loss += l2loss`), so the early frames, which every
    /// later one is rolled out from, weigh most.
    Cumulative,
}

impl RolloutLoss {
    fn is_sum(&self) -> bool {
        *self == RolloutLoss::Sum
    }
}

/// Which training loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LossKind {
    /// The relative L2 (+ ONO Darcy's derivative term).
    RelL2,
    /// The Galerkin Transformer's `WeightedL2Loss` (1-D) / `WeightedL2Loss2d` (2-D).
    GalerkinH1,
    /// GNOT's `WeightedLpRelLoss(p=2)`: per sample and channel √(Σ(ŷ−y)²/Σy²) over the real
    /// points, averaged over samples × channels, on normalized targets.
    Gnot,
}

/// Batch reduction of the relative L2.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReductionName {
    /// Σ_b.
    Sum,
    /// mean_b.
    Mean,
}

/// The optimizer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OptimizerKind {
    /// `torch.optim.AdamW` (ONO, NSL): decoupled weight decay.
    #[default]
    Adamw,
    /// `torch.optim.Adam` (the FNO and Geo-FNO scripts): weight decay as an L2 term of the
    /// gradient.
    Adam,
}

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn one() -> u64 {
    1
}

fn is_one(v: &u64) -> bool {
    *v == 1
}

/// AdamW and clipping; the paper's values by default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OptimizerSection {
    /// `adamw` or `adam` (left out of the fingerprint when default, so earlier runs resume).
    #[serde(skip_serializing_if = "is_default")]
    pub kind: OptimizerKind,
    /// Peak learning rate.
    pub lr: f64,
    /// Decoupled weight decay.
    pub weight_decay: f64,
    /// (β1, β2).
    pub betas: (f64, f64),
    /// ε.
    pub eps: f64,
    /// Global-norm clipping (0.1 in ONO, the default); 0 turns clipping off.
    pub max_grad_norm: Option<f64>,
}

impl Default for OptimizerSection {
    fn default() -> Self {
        Self {
            kind: OptimizerKind::Adamw,
            lr: 1e-3,
            weight_decay: 1e-5,
            betas: (0.9, 0.999),
            eps: 1e-8,
            max_grad_norm: Some(0.1),
        }
    }
}

impl OptimizerSection {
    /// The AdamW hyper-parameters.
    pub fn adamw(&self) -> AdamWConfig {
        AdamWConfig {
            lr: self.lr,
            betas: self.betas,
            eps: self.eps,
            weight_decay: self.weight_decay,
            amsgrad: false,
            l2_weight_decay: self.kind == OptimizerKind::Adam,
        }
    }
}

/// Learning-rate schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ScheduleSection {
    /// `one_cycle` (the paper) or `constant`.
    pub kind: ScheduleKind,
    /// OneCycle's warm-up fraction.
    pub pct_start: f64,
    /// Cosine or linear.
    pub anneal_strategy: Anneal,
    /// initial lr = lr / div_factor.
    pub div_factor: f64,
    /// final lr = initial lr / final_div_factor.
    pub final_div_factor: f64,
    /// Cycle Adam's β1 between the two momenta.
    pub cycle_momentum: bool,
    /// β1 at the peak rate.
    pub base_momentum: f64,
    /// β1 at the ends.
    pub max_momentum: f64,
    /// Three phases.
    pub three_phase: bool,
    /// `step`: the rate is multiplied by `gamma` every `step_size` epochs.
    #[serde(skip_serializing_if = "is_default_step_size")]
    pub step_size: u64,
    /// `step`: the factor.
    #[serde(skip_serializing_if = "is_default_gamma")]
    pub gamma: f64,
}

/// `StepLR(step_size = 100, gamma = 0.5)` of the FNO scripts.
const STEP_SIZE: u64 = 100;
const GAMMA: f64 = 0.5;

fn is_default_step_size(v: &u64) -> bool {
    *v == STEP_SIZE
}

fn is_default_gamma(v: &f64) -> bool {
    *v == GAMMA
}

/// Which schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleKind {
    /// `OneCycleLR`, stepped once per batch.
    OneCycle,
    /// The optimizer's lr throughout.
    Constant,
    /// `StepLR` stepped once per epoch, as the FNO scripts: lr · gamma^⌊epoch / step_size⌋.
    Step,
    /// `CosineAnnealingLR(T_max = epochs)` stepped once per epoch, as NSL's Elasticity scripts:
    /// lr · (1 + cos(π · epoch / epochs)) / 2.
    Cosine,
}

impl Default for ScheduleSection {
    fn default() -> Self {
        let d = OneCycleConfig::default();
        Self {
            kind: ScheduleKind::OneCycle,
            pct_start: d.pct_start,
            anneal_strategy: d.anneal_strategy,
            div_factor: d.div_factor,
            final_div_factor: d.final_div_factor,
            cycle_momentum: d.cycle_momentum,
            base_momentum: d.base_momentum,
            max_momentum: d.max_momentum,
            three_phase: d.three_phase,
            step_size: STEP_SIZE,
            gamma: GAMMA,
        }
    }
}

/// When checkpoints are written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CheckpointSection {
    /// Also every this many batches within an epoch (0: only at epoch ends).
    pub every_steps: u64,
    /// Keep `best.safetensors`, the epoch with the lowest test error.
    pub keep_best: bool,
    /// Report the best epoch as the run's result (its test error, `best.safetensors`) instead
    /// of the last, as the Galerkin Transformer's `run_train` does. Its selection set is the
    /// test split (the reference's validation set is its test set): an optimistic number.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub select_best: bool,
}

impl Default for CheckpointSection {
    fn default() -> Self {
        Self {
            every_steps: 0,
            keep_best: true,
            select_best: false,
        }
    }
}

/// Logging and figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogSection {
    /// Read the loss back (and check it is finite) every this many batches.
    pub every_steps: u64,
    /// Test samples drawn as input / truth / prediction / error panels (2-D grids only).
    pub panels: usize,
    /// Evaluate on the test split every this many epochs (and always after the last).
    pub eval_every_epochs: u64,
}

impl Default for LogSection {
    fn default() -> Self {
        Self {
            every_steps: 10,
            panels: 3,
            eval_every_epochs: 1,
        }
    }
}

impl TrainConfig {
    /// Reads a TOML file (see [`TrainConfig::from_toml`]); relative paths become relative to the
    /// file's folder.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let mut cfg = Self::from_toml(&text).map_err(|e| match e {
            Error::Config { key, msg } => Error::Config {
                key,
                msg: format!("{msg} (in {})", path.display()),
            },
            e => e,
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let clouds = cfg
            .data
            .point_clouds
            .as_mut()
            .map(|c| [&mut c.train, &mut c.test]);
        for p in [cfg.data.path.as_mut(), cfg.data.data_dir.as_mut()]
            .into_iter()
            .flatten()
            .chain(clouds.into_iter().flatten())
        {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        }
        if cfg.output_dir.is_relative() {
            cfg.output_dir = base.join(&cfg.output_dir);
        }
        Ok(cfg)
    }

    /// Parses TOML text: unknown keys and values of the wrong type are refused. The values are
    /// checked once, by [`TrainConfig::validate`], which [`crate::run::RunSpec::resolve`]
    /// calls on the way into a run.
    pub fn from_toml(text: &str) -> Result<Self> {
        toml::from_str(text).map_err(|e| {
            // toml names unknown or mistyped keys in its message; keep it whole.
            Error::config("(toml)", e.to_string().trim().replace('\n', " "))
        })
    }

    /// Checks every value that can be checked without the data; errors name the key.
    pub fn validate(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(Error::config("epochs", "must be at least 1"));
        }
        if self.batch_size <= 0 {
            return Err(Error::config("batch_size", "must be positive"));
        }
        if self.accumulate_steps == 0 {
            return Err(Error::config("accumulate_steps", "must be at least 1"));
        }
        if self.accumulate_steps > self.batch_size as u64 {
            return Err(Error::config(
                "accumulate_steps",
                format!(
                    "{} micro-batches cannot share a batch of {} samples",
                    self.accumulate_steps, self.batch_size
                ),
            ));
        }
        if self.threads < 0 {
            return Err(Error::config("threads", "must be ≥ 0"));
        }
        if self.double && self.precision != Precision::F32 {
            return Err(Error::config(
                "precision",
                format!(
                    "`{}` keeps float32 parameters and cannot be combined with double = true",
                    self.precision
                ),
            ));
        }
        self.device()?;
        match (
            &self.data.path,
            &self.data.benchmark,
            &self.data.point_clouds,
        ) {
            (Some(_), None, None) | (None, None, Some(_)) => {}
            (None, Some(_), None) => {}
            _ => {
                return Err(Error::config(
                    "data",
                    "give exactly one of `path` (a dataset file), `benchmark` (a published benchmark) and `point_clouds` (train and test point-cloud files)",
                ))
            }
        }
        for (k, v) in [
            ("data.ntrain", self.data.ntrain),
            ("data.ntest", self.data.ntest),
            ("data.train_steps", self.data.train_steps),
        ] {
            if matches!(v, Some(n) if n <= 0) {
                return Err(Error::config(k, "must be positive"));
            }
        }
        let a = self.loss.derivative_alpha.unwrap_or(0.0);
        if !(a.is_finite() && a >= 0.0) {
            return Err(Error::config(
                "loss.derivative_alpha",
                "must be finite and ≥ 0",
            ));
        }
        let g = self.loss.h1_gamma.unwrap_or(0.0);
        if !(g.is_finite() && g >= 0.0) {
            return Err(Error::config("loss.h1_gamma", "must be finite and ≥ 0"));
        }
        for (k, v) in [
            ("data.normalize_pos", self.data.normalize_pos),
            ("data.normalize_theta", self.data.normalize_theta),
        ] {
            if v.is_some_and(|v| v.is_pointwise()) {
                return Err(Error::config(k, "must be none or unit (per channel)"));
            }
        }
        if let Some(noise) = self.data.noise {
            if !(noise.is_finite() && noise >= 0.0) {
                return Err(Error::config("data.noise", "must be finite and ≥ 0"));
            }
        }
        if let Some(m) = self.optimizer.max_grad_norm {
            if !(m.is_finite() && m >= 0.0) {
                return Err(Error::config(
                    "optimizer.max_grad_norm",
                    "must be finite and ≥ 0 (0 turns clipping off)",
                ));
            }
        }
        self.optimizer.adamw().validate()?;
        match self.schedule.kind {
            ScheduleKind::OneCycle => self.one_cycle(1)?.validate()?,
            ScheduleKind::Step => {
                if self.schedule.step_size == 0 {
                    return Err(Error::config("schedule.step_size", "must be at least 1"));
                }
                if !(self.schedule.gamma.is_finite() && self.schedule.gamma > 0.0) {
                    return Err(Error::config("schedule.gamma", "must be finite and > 0"));
                }
            }
            ScheduleKind::Constant | ScheduleKind::Cosine => {}
        }
        if self.checkpoint.select_best && !self.checkpoint.keep_best {
            return Err(Error::config(
                "checkpoint.select_best",
                "needs checkpoint.keep_best (the best epoch's checkpoint is the result)",
            ));
        }
        if self.log.every_steps == 0 {
            return Err(Error::config("log.every_steps", "must be at least 1"));
        }
        if self.log.eval_every_epochs == 0 {
            return Err(Error::config("log.eval_every_epochs", "must be at least 1"));
        }
        self.base_model_config()?;
        Ok(())
    }

    /// The device named by `device`.
    pub fn device(&self) -> Result<Device> {
        parse_device(&self.device).map_err(|m| Error::config("device", m))
    }

    /// The preset (or the architecture's default) before the overrides and the data's
    /// dimensions.
    pub fn base_model_config(&self) -> Result<ModelConfig> {
        self.model.base_config()
    }

    /// The model configuration: the preset, then the overrides, then the data's dimensions.
    pub fn model_config(&self, dims: DataDims) -> Result<ModelConfig> {
        let mut cfg = self.model.config()?;
        cfg.set_data_dims(dims);
        cfg.validate()
            .map_err(|e| Error::invalid("model.overrides", e))?;
        Ok(cfg)
    }

    /// The lr of a schedule stepped once per epoch (`step`, `cosine`, `constant`) during
    /// `epoch` (from 0); `None` for the one-cycle schedule, which steps per batch.
    pub fn epoch_lr(&self, epoch: u64) -> Option<f64> {
        let lr = self.optimizer.lr;
        match self.schedule.kind {
            ScheduleKind::OneCycle => None,
            ScheduleKind::Constant => Some(lr),
            ScheduleKind::Step => {
                let decays = (epoch / self.schedule.step_size.max(1)) as i32;
                Some(lr * self.schedule.gamma.powi(decays))
            }
            ScheduleKind::Cosine => {
                let t = epoch as f64 / self.epochs.max(1) as f64;
                Some(lr * (1.0 + (std::f64::consts::PI * t).cos()) / 2.0)
            }
        }
    }

    /// The one-cycle schedule for `total_steps` batches.
    pub fn one_cycle(&self, total_steps: u64) -> Result<OneCycleConfig> {
        let s = &self.schedule;
        Ok(OneCycleConfig {
            max_lr: self.optimizer.lr,
            total_steps,
            pct_start: s.pct_start,
            anneal_strategy: s.anneal_strategy,
            cycle_momentum: s.cycle_momentum,
            base_momentum: s.base_momentum,
            max_momentum: s.max_momentum,
            div_factor: s.div_factor,
            final_div_factor: s.final_div_factor,
            three_phase: s.three_phase,
        })
    }

    /// The parts of the configuration a resumed run must share with the run it continues
    /// (everything that changes the numbers; not the device, threads or logging).
    pub fn fingerprint(&self) -> Fingerprint {
        Fingerprint(TrainConfig {
            accumulate_steps: one(),
            graphs: Graphs::Auto,
            parallel: Parallelism::Data,
            device: default_device(),
            threads: 0,
            output_dir: PathBuf::new(),
            checkpoint: CheckpointSection::default(),
            log: LogSection::default(),
            ..self.clone()
        })
    }
}

/// The keys of a [`TrainConfig`] that say how and where a run goes, not what it computes: a
/// resumed run may change them, and its [`Fingerprint`] leaves them out. (How many processes
/// share a step is checked apart, from the checkpoint's micro-batches.)
const RUN_KEYS: [&str; 8] = [
    "accumulate_steps",
    "graphs",
    "parallel",
    "device",
    "threads",
    "output_dir",
    "checkpoint",
    "log",
];

/// The parts of a [`TrainConfig`] that change the numbers: the configuration a checkpoint
/// stores and a resumed run must match. It is the configuration itself with the [run
/// keys](RUN_KEYS) at their defaults (what it dereferences to), and its serialized form is the
/// configuration's without them, so the checkpoints written when it was a struct of its own
/// read as it; sections added since take their defaults.
///
/// (Not a field of [`TrainConfig`] under `#[serde(flatten)]`: serde then reads the flattened
/// part from a buffer, and toml's errors in it lose their line and key.)
#[derive(Debug, Clone, PartialEq)]
pub struct Fingerprint(TrainConfig);

impl std::ops::Deref for Fingerprint {
    type Target = TrainConfig;

    fn deref(&self) -> &TrainConfig {
        &self.0
    }
}

impl Fingerprint {
    /// The serialized form: the configuration's, the run keys left out.
    fn to_map(&self) -> serde_json::Result<serde_json::Map<String, serde_json::Value>> {
        let mut map = match serde_json::to_value(&self.0)? {
            serde_json::Value::Object(map) => map,
            _ => return Err(serde::ser::Error::custom("a configuration is a table")),
        };
        for key in RUN_KEYS {
            map.remove(key);
        }
        Ok(map)
    }

    /// The keys (as in the experiment file) whose values differ from `other`'s. The models are
    /// compared resolved (preset and overrides applied), so two spellings of one model agree.
    pub fn differing_keys(&self, other: &Self) -> Vec<String> {
        let (Ok(a), Ok(b)) = (self.to_map(), other.to_map()) else {
            return vec!["(configuration)".into()];
        };
        let same_model = match (self.model.config(), other.model.config()) {
            (Ok(a), Ok(b)) => a == b,
            _ => self.model == other.model,
        };
        let mut keys: Vec<String> = a
            .keys()
            .chain(b.keys().filter(|k| !a.contains_key(*k)))
            .cloned()
            .collect();
        keys.retain(|k| match k.as_str() {
            "model" => !same_model,
            _ => a.get(k) != b.get(k),
        });
        keys
    }

    /// Whether `other` is the same experiment: no [differing key](Self::differing_keys).
    pub fn same_experiment(&self, other: &Self) -> bool {
        self.differing_keys(other).is_empty()
    }
}

impl Serialize for Fingerprint {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        self.to_map()
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Fingerprint {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let mut map = serde_json::Map::deserialize(d)?;
        for key in RUN_KEYS {
            map.remove(key);
        }
        // The one run key without a default; `fingerprint()` sets the same.
        map.insert(
            "output_dir".into(),
            serde_json::Value::String(String::new()),
        );
        serde_json::from_value(serde_json::Value::Object(map))
            .map(Self)
            .map_err(serde::de::Error::custom)
    }
}

impl TrainConfig {
    /// Whether `other` is the same experiment: the same settings that change the numbers (the
    /// [`fingerprint`](Self::fingerprint)'s) and the same model once its preset and overrides
    /// are resolved, however the overrides spell it.
    pub fn same_experiment(&self, other: &Self) -> bool {
        self.fingerprint().same_experiment(&other.fingerprint())
    }
}

/// `base` with the fields of `overrides` replaced; errors name `key` and refuse fields the
/// architecture does not have, listing those it has.
pub fn with_overrides(
    base: &ModelConfig,
    overrides: &toml::Table,
    key: &str,
) -> Result<ModelConfig> {
    let arch = base.arch();
    let fields = base.fields().map_err(|e| Error::invalid(key, e))?;
    let mut obj = fields.as_object().cloned().unwrap_or_default();
    for (k, v) in overrides {
        if !obj.contains_key(k) {
            return Err(Error::config(
                format!("{key}.{k}"),
                format!(
                    "not a field of the {arch} configuration (known: {})",
                    obj.keys().cloned().collect::<Vec<_>>().join(", ")
                ),
            ));
        }
        let jv = serde_json::to_value(v)
            .map_err(|e| Error::config(format!("{key}.{k}"), e.to_string()))?;
        obj.insert(k.clone(), jv);
    }
    ModelConfig::from_fields(arch, serde_json::Value::Object(obj))
        .map_err(|e| Error::invalid(key, e))
}

/// `cpu`, `cuda`, `cuda:N`.
pub fn parse_device(s: &str) -> std::result::Result<Device, String> {
    match s {
        "cpu" => Ok(Device::Cpu),
        "cuda" => Ok(Device::Cuda(0)),
        _ => s
            .strip_prefix("cuda:")
            .and_then(|n| n.parse::<usize>().ok())
            .map(Device::Cuda)
            .ok_or_else(|| format!("`{s}` is not cpu, cuda or cuda:N")),
    }
}

fn is_auto(r: &Recompute) -> bool {
    *r == Recompute::Auto
}
