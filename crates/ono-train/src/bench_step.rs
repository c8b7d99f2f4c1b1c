//! Timing of full training steps of any architecture at a benchmark's shapes: forward, loss,
//! backward, clipping and AdamW, on random data, after a warm-up — the figure compared with the
//! PyTorch originals.

use std::time::Instant;

use ono_kernels::{health, host};
use ono_models::ono::OnoPreset;
use ono_models::{DataDims, LossError, Model, ModelConfig, ModelInput, Recompute};
use ono_nn::Precision;
use serde::{Deserialize, Serialize};
use tch::{Device, Kind, Tensor};

use crate::adamw::{AdamW, AdamWConfig, StepPlan};
use crate::graphs::{self, Engine, Graphs, Replayer};
use crate::scaler::LossScaler;
use crate::{loss, Error, Result};

/// Points per sample and, for Darcy's derivative loss, the square grid side of each ONO preset's
/// benchmark (docs/reference-implementations.md#ono-training-recipes).
pub fn preset_points(preset: OnoPreset) -> (i64, Option<i64>) {
    match preset {
        OnoPreset::Darcy => (85 * 85, Some(85)),
        OnoPreset::Ns2d | OnoPreset::TimeExtrapolation => (64 * 64, None),
        OnoPreset::Airfoil => (221 * 51, None),
        OnoPreset::Pipe => (129 * 129, None),
        OnoPreset::Elasticity => (972, None),
        OnoPreset::Plasticity => (101 * 31, None),
        OnoPreset::SuperResolution => (43 * 43, None),
    }
}

/// The optimisation a timed step performs, as the reference implementation being compared with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepRecipe {
    /// The ONO scripts: AdamW (weight decay 1e-5), clipping at 0.1, Darcy's derivative loss.
    Ono,
    /// The FNO scripts: Adam with weight decay 1e-4 as an L2 term, no clipping, the plain sum of
    /// relative L2 errors (`LpLoss(size_average=False)`).
    Fno,
}

impl StepRecipe {
    /// The optimizer's hyper-parameters and the clipping norm of the recipe.
    fn optimizer(self) -> (AdamWConfig, Option<f64>) {
        match self {
            StepRecipe::Ono => (
                AdamWConfig {
                    weight_decay: 1e-5,
                    ..Default::default()
                },
                Some(0.1),
            ),
            StepRecipe::Fno => (
                AdamWConfig {
                    weight_decay: 1e-4,
                    l2_weight_decay: true,
                    ..Default::default()
                },
                None,
            ),
        }
    }
}

impl std::str::FromStr for StepRecipe {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "ono" => Ok(Self::Ono),
            "fno" => Ok(Self::Fno),
            _ => Err(Error::config(
                "--recipe",
                format!("`{s}` is not ono or fno"),
            )),
        }
    }
}

/// The shapes a step is timed at: those of an ONO preset's benchmark (points per sample, batch
/// size, input and output channels, a time input), named like the preset.
#[derive(Debug, Clone, PartialEq)]
pub struct StepShapes {
    /// The ONO preset (and so the benchmark) the shapes come from.
    pub preset: OnoPreset,
    /// Samples per step.
    pub batch: i64,
    /// Points per sample.
    pub points: i64,
    /// The square grid side for Darcy's derivative loss.
    pub square: Option<i64>,
    /// The grid the points form, for the models on grids (the FNO family).
    pub grid: Option<[i64; 2]>,
    /// The data's dimensions.
    pub dims: DataDims,
}

impl StepShapes {
    /// The shapes of `preset`'s benchmark.
    pub fn of(preset: OnoPreset) -> Self {
        let cfg = preset.config();
        let (points, square) = preset_points(preset);
        let grid = match preset {
            OnoPreset::Darcy => Some([85, 85]),
            OnoPreset::Ns2d | OnoPreset::TimeExtrapolation => Some([64, 64]),
            OnoPreset::Airfoil => Some([221, 51]),
            OnoPreset::Pipe => Some([129, 129]),
            OnoPreset::Plasticity => Some([101, 31]),
            OnoPreset::SuperResolution => Some([43, 43]),
            OnoPreset::Elasticity => None,
        };
        Self {
            preset,
            batch: preset.batch_size(),
            points,
            square,
            grid,
            dims: DataDims {
                space_dim: cfg.space_dim,
                fun_dim: cfg.fun_dim,
                out_dim: cfg.out_dim,
                time_input: cfg.time_input,
                functions: Vec::new(),
            },
        }
    }
}

/// One JSON line of `ono bench-step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    /// The architecture.
    pub arch: String,
    /// The architecture's preset.
    pub preset: String,
    /// The optimisation timed.
    pub recipe: StepRecipe,
    /// The benchmark whose shapes were used (an ONO preset name).
    pub shapes: String,
    /// Samples per step.
    pub batch: i64,
    /// Points per sample.
    pub points: i64,
    /// Timed steps.
    pub steps: usize,
    /// Median seconds per step.
    pub median_s: f64,
    /// Fastest step.
    pub min_s: f64,
    /// Peak resident set size of the process in MB (VmHWM; CPU memory), where the system
    /// reports it (Linux).
    pub peak_rss_mb: Option<f64>,
    /// Trainable parameters.
    pub params: i64,
    /// Torch threads.
    pub threads: i32,
    /// How activations were kept (`auto` resolved to the model's choice).
    pub recompute: Recompute,
    /// The kind of the matrix products (`f32`, `bf16`, `f16`).
    pub precision: Precision,
    /// The device.
    pub device: String,
    /// Host reads inside the steps (warm-up included): 0, a step never waits for the device.
    pub host_reads: u64,
    /// How the steps ran as graphs (`--graphs`): captured on a CUDA device, or emulated;
    /// absent for plain steps (and in the lines of earlier releases).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graphs: Option<Engine>,
}

/// Times `steps` training steps of `config` (its data dimensions are set from `shapes`) after
/// `warmup` untimed ones, with the optimisation of `recipe`. The ONO loss is the reference's:
/// Σ_b relative L2, plus Darcy's derivative term (α = 0.1) at the Darcy shapes; one forward per
/// step (NS's ten-frame rollout and
/// Plasticity's twenty time steps are one frame / one step here, as the per-call cost the
/// PyTorch figure was measured on).
///
/// `recompute` selects how the model keeps activations ([`Recompute`]; `Auto` is the model's
/// measured default). `precision` runs the model's products in that kind, as the trainer does
/// (float16 with the loss scaler). `graphs` as a run's (`graphs.rs`): captured, the first step
/// run plainly and the second captured (both untimed: `warmup` is at least 2), then replayed;
/// the inputs are the same tensors at every step, so they are static already.
#[allow(clippy::too_many_arguments)]
pub fn bench_step(
    config: &ModelConfig,
    preset_name: &str,
    shapes: StepShapes,
    recipe: StepRecipe,
    steps: usize,
    warmup: usize,
    device: Device,
    recompute: Recompute,
    precision: Precision,
    graphs: Graphs,
) -> Result<StepReport> {
    if steps == 0 {
        return Err(Error::config("--steps", "must be at least 1"));
    }
    let mut config = config.clone();
    config.set_data_dims(shapes.dims.clone());
    tch::manual_seed(0);
    let mut model = Model::new(&config, device, Kind::Float)?;
    model
        .set_precision(precision)
        .map_err(|e| Error::invalid("--precision", e))?;
    let mut scaler = if precision.needs_loss_scaling() {
        Some(LossScaler::new(device)?)
    } else {
        None
    };
    if !model.operator().supports_recompute(recompute) {
        return Err(Error::config(
            "--recompute",
            format!(
                "the `{}` architecture has no {recompute} mode",
                model.arch()
            ),
        ));
    }
    let (hp, clip) = recipe.optimizer();
    let mut opt = AdamW::new(model.var_store(), hp)?;
    let (b, n, d) = (shapes.batch, shapes.points, shapes.dims.clone());
    let opts = (Kind::Float, device);
    let pos = Tensor::f_rand([b, n, d.space_dim], opts)?;
    let fx = Tensor::f_randn([b, n, d.fun_dim], opts)?;
    let y = Tensor::f_randn([b, n, d.out_dim], opts)?;
    let t = d
        .time_input
        .then(|| Tensor::f_rand([b, 1], opts))
        .transpose()?;
    let input = ModelInput::new(&pos, &fx)
        .with_time(t.as_ref())
        .with_grid(shapes.grid.as_ref().map(|g| &g[..]));
    let recompute = match recompute {
        Recompute::Auto => model.operator().default_recompute(&input),
        other => other,
    };
    let square = match recipe {
        StepRecipe::Ono => shapes.square,
        StepRecipe::Fno => None,
    };
    let (engine, _) = graphs::resolve(graphs, device, 1)?;
    let mut replayer = engine.map(Replayer::new);
    let mut times = Vec::with_capacity(steps);
    // The models' checks are deferred as in training, and read once after the last step.
    let monitor = health::Monitor::new();
    let mut host_reads = 0;
    // The parameters with gradients at the first step, which every graph-safe step repeats.
    let mut present: Option<Vec<Vec<bool>>> = None;
    // With graphs the first step records and the second captures: neither is timed.
    let warmup = if replayer.is_some() {
        warmup.max(2)
    } else {
        warmup
    };
    for i in 0..warmup + steps {
        sync(device);
        let start = Instant::now();
        let reads = host::host_reads();
        {
            let _deferred = monitor.enter(i as u64);
            let skippable = scaler.is_some();
            let mut body = |opt: &mut AdamW, planned: Option<StepPlan>| -> Result<Vec<Vec<bool>>> {
                let scale = scaler.as_ref();
                let mut loss_of = |pred: &Tensor| -> std::result::Result<Tensor, LossError> {
                    let loss = match square {
                        Some(s) => loss::darcy_loss(pred, &y, s, 0.1)?,
                        None => loss::relative_l2(pred, &y, loss::Reduction::Sum, None)?,
                    };
                    Ok(match scale {
                        Some(s) => s.scale(&loss)?,
                        None => loss,
                    })
                };
                opt.zero_grad();
                let _ = model.forward_backward(&input, &mut loss_of, recompute)?;
                let mut grads = opt.gather_grads()?;
                let present = grads.present().to_vec();
                let plan = match planned {
                    Some(p) => p,
                    None => opt.plan(&grads, skippable)?,
                };
                match &mut scaler {
                    Some(s) => s.step_planned(opt, &plan, grads, clip)?,
                    None => {
                        if let Some(m) = clip {
                            let _ = grads.clip_norm_(m)?;
                        }
                        opt.apply(&plan, &grads, None)?;
                    }
                }
                Ok(present)
            };
            let planned = match (&replayer, &present) {
                (Some(_), Some(p)) => Some(opt.plan_for(p, skippable)?),
                _ => None,
            };
            match (planned, replayer.as_mut()) {
                (Some(plan), Some(r)) => r.run(|| body(&mut opt, Some(plan)).map(drop))?,
                _ => present = Some(body(&mut opt, None)?),
            }
        }
        host_reads += host::host_reads() - reads;
        sync(device);
        if i >= warmup {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    if let Some(f) = monitor.check()? {
        return Err(Error::Step {
            step: f.step,
            epoch: 0,
            source: Box::new(Error::deferred(f.error)),
        });
    }
    times.sort_by(f64::total_cmp);
    Ok(StepReport {
        arch: model.arch().into(),
        preset: preset_name.into(),
        recipe,
        shapes: shapes.preset.name().into(),
        batch: b,
        points: n,
        steps,
        median_s: median(&times),
        min_s: times[0],
        peak_rss_mb: peak_rss_mb(),
        params: model.parameter_count(),
        threads: tch::get_num_threads(),
        recompute,
        precision,
        device: format!("{device:?}"),
        host_reads,
        graphs: replayer.map(|r| r.engine()),
    })
}

/// Waits for the device's queued work (nothing to wait for on the CPU).
pub(crate) fn sync(device: Device) {
    if let Device::Cuda(i) = device {
        tch::Cuda::synchronize(i as i64);
    }
}

/// VmHWM of this process in MB (Linux).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}

/// The median of sorted values.
pub(crate) fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line of `ono bench-step` as the release before the typed report printed it reads as a
    /// report; a report without a peak (no `/proc`) and with `none` (written `false`) reads back
    /// as itself.
    #[test]
    fn step_report_reads_earlier_lines_and_round_trips() {
        let line = r#"{"arch":"ono","preset":"elasticity","recipe":"ono","shapes":"elasticity","batch":1,"points":972,"steps":1,"median_s":4.623236449,"min_s":4.623236449,"peak_rss_mb":415.69140625,"params":947,"threads":2,"recompute":"selective","precision":"f32","device":"Cpu","host_reads":0}"#;
        let r: StepReport = serde_json::from_str(line).unwrap();
        assert_eq!(r.median_s, 4.623236449);
        assert_eq!(r.peak_rss_mb, Some(415.69140625));
        assert_eq!((r.params, r.points), (947, 972));
        assert_eq!(r.recompute, Recompute::Selective);
        assert_eq!(r.recipe, StepRecipe::Ono);
        assert_eq!(serde_json::to_string(&r).unwrap(), line);
        let bare = StepReport {
            peak_rss_mb: None,
            recompute: Recompute::None,
            precision: Precision::Bf16,
            recipe: StepRecipe::Fno,
            ..r
        };
        let text = serde_json::to_string(&bare).unwrap();
        assert!(text.contains(r#""peak_rss_mb":null"#) && text.contains(r#""recompute":false"#));
        assert_eq!(serde_json::from_str::<StepReport>(&text).unwrap(), bare);
    }
}
