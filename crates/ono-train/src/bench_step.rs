//! Timing of full training steps at a preset's shapes: forward, loss, backward, clipping and
//! AdamW, on random data, after a warm-up — the figure compared with the PyTorch original.

use std::time::Instant;

use ono_models::Preset;
use serde::Serialize;
use tch::nn::VarStore;
use tch::{Device, Kind, Tensor};

use crate::adamw::{AdamW, AdamWConfig};
use crate::{loss, Error, Result};

/// Points per sample and time steps of each preset's benchmark (reference notes §3.1).
pub fn preset_points(preset: Preset) -> (i64, Option<i64>) {
    match preset {
        Preset::Darcy => (85 * 85, Some(85)),
        Preset::Ns2d | Preset::TimeExtrapolation => (64 * 64, None),
        Preset::Airfoil => (221 * 51, None),
        Preset::Pipe => (129 * 129, None),
        Preset::Elasticity => (972, None),
        Preset::Plasticity => (101 * 31, None),
        Preset::SuperResolution => (43 * 43, None),
    }
}

/// One JSON line of `ono bench-step`.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    /// The preset.
    pub preset: String,
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
    /// Peak resident set size of the process in MB (VmHWM; CPU memory).
    pub peak_rss_mb: f64,
    /// Trainable parameters.
    pub params: i64,
    /// Torch threads.
    pub threads: i32,
    /// Whether activations were recomputed per block.
    pub recompute: bool,
    /// The device.
    pub device: String,
}

/// Times `steps` training steps after `warmup` untimed ones. The loss is the reference's:
/// Σ_b relative L2, plus Darcy's derivative term (α = 0.1) at the Darcy preset; one forward per
/// step (NS's ten-frame rollout and Plasticity's twenty time steps are one frame / one step here,
/// as the per-call cost the PyTorch figure was measured on).
///
/// `recompute` trains with per-block activation recomputation
/// ([`ono_models::Ono::forward_backward_recompute`]): less memory, one more forward per block.
pub fn bench_step(
    preset: Preset,
    steps: usize,
    warmup: usize,
    device: Device,
    recompute: bool,
) -> Result<StepReport> {
    if steps == 0 {
        return Err(Error::config("--steps", "must be at least 1"));
    }
    tch::manual_seed(0);
    let cfg = preset.config();
    let vs = VarStore::new(device);
    let model = cfg.init(&vs.root())?;
    let mut opt = AdamW::new(
        &vs,
        AdamWConfig {
            weight_decay: 1e-5,
            ..Default::default()
        },
    )?;
    let (n, square) = preset_points(preset);
    let b = preset.batch_size();
    let opts = (Kind::Float, device);
    let pos = Tensor::f_rand([b, n, cfg.space_dim], opts)?;
    let fx = Tensor::f_randn([b, n, cfg.fun_dim], opts)?;
    let y = Tensor::f_randn([b, n, cfg.out_dim], opts)?;
    let t = cfg
        .time_input
        .then(|| Tensor::f_rand([b, 1], opts))
        .transpose()?;
    let mut times = Vec::with_capacity(steps);
    for i in 0..warmup + steps {
        sync(device);
        let start = Instant::now();
        let loss_of = |pred: &Tensor| -> ono_models::Result<Tensor> {
            let l = match square {
                Some(s) => loss::darcy_loss(pred, &y, s, 0.1),
                None => loss::relative_l2(pred, &y, ono_nn::loss::Reduction::Sum),
            };
            l.map_err(|e| ono_models::Error::Config(e.to_string()))
        };
        opt.zero_grad();
        if recompute {
            let _ = model.forward_backward_recompute(&pos, &fx, t.as_ref(), loss_of)?;
        } else {
            let pred = model.forward(&pos, &fx, t.as_ref(), true)?;
            loss_of(&pred)?.f_backward()?;
        }
        opt.step(Some(0.1))?;
        sync(device);
        if i >= warmup {
            times.push(start.elapsed().as_secs_f64());
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(StepReport {
        preset: preset.name().into(),
        batch: b,
        points: n,
        steps,
        median_s: median(&times),
        min_s: times[0],
        peak_rss_mb: peak_rss_mb().unwrap_or(f64::NAN),
        params: ono_models::parameter_count(&vs),
        threads: tch::get_num_threads(),
        recompute,
        device: format!("{device:?}"),
    })
}

fn sync(device: Device) {
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
fn median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        0.5 * (sorted[n / 2 - 1] + sorted[n / 2])
    }
}
