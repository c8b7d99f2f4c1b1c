//! The edge of a run: an experiment ([`TrainConfig`]) resolved and checked into a [`RunSpec`],
//! which [`crate::Trainer::new`] consumes as it is. [`RunSpec::resolve`] is the one place a
//! configuration is checked: the values alone ([`TrainConfig::validate`]), then the settings the
//! file leaves unset filled from the benchmark's recipe, the data read, and everything that
//! depends on the data (regime against target shapes, loss against grid, the model's dimensions).
//! Every refusal names its key.

use ono_data::dataset::TensorDataset;
use ono_data::normalizer::NormalizerKind;
use ono_models::{DataDims, ModelConfig, Recompute};
use tch::{Device, Kind};

use crate::config::{LossKind, Parallelism, ReductionName, RolloutLoss, TrainConfig};
use crate::data_source::resolve_data;
use crate::loss;
use crate::normalizers::NormalizerKinds;
use crate::regime::Regime;
use crate::{Error, Result};

pub use crate::loss::LossSpec;

/// A checked run: the experiment with every unset value resolved, its data, and the model
/// configuration with the data's dimensions.
pub struct RunSpec {
    /// The experiment as written (its values checked).
    pub config: TrainConfig,
    /// The device named by `device`.
    pub device: Device,
    /// The parameters' kind: float64 with `double`, else float32.
    pub kind: Kind,
    /// The data: `ntrain` / `ntest` applied, the input function moved to its own points with
    /// `data.fx_as_function`, the training targets cut to `data.train_steps`.
    pub data: TensorDataset,
    /// How samples are fed.
    pub regime: Regime,
    /// The normalizers to fit.
    pub normalizers: NormalizerKinds,
    /// The training loss.
    pub loss: LossSpec,
    /// The model configuration of a fresh run (a resumed run takes its checkpoint's).
    pub model: ModelConfig,
}

impl RunSpec {
    /// Checks `config`, reads its data and resolves everything the run needs. Nothing after this
    /// checks the configuration again.
    pub fn resolve(config: TrainConfig) -> Result<Self> {
        config.validate()?;
        let device = config.device()?;
        crate::graphs::check_config(config.graphs, device, config.accumulate_steps)?;
        // Before the data are read: their preparation runs torch reductions, whose order follows
        // the thread count.
        if config.threads > 0 {
            tch::set_num_threads(config.threads);
        }
        let kind = if config.double {
            Kind::Double
        } else {
            Kind::Float
        };
        let resolved = resolve_data(&config.data, &config.loss)?;
        let regime = resolved.regime;
        let normalizers = NormalizerKinds {
            x: resolved.normalize_x,
            y: resolved.normalize_y,
            pos: config.data.normalize_pos.unwrap_or_default(),
            theta: config.data.normalize_theta.unwrap_or_default(),
        };
        let loss = LossSpec {
            // The Galerkin losses are batch means by definition.
            reduction: match resolved.loss {
                LossKind::GalerkinH1 | LossKind::Gnot => ReductionName::Mean,
                LossKind::RelL2 => config.loss.reduction,
            },
            alpha: resolved.derivative_alpha,
            kind: resolved.loss,
            h1_gamma: resolved.h1_gamma,
            rollout: config.loss.rollout,
        };
        let data = resolved.dataset;
        check_data(&config, &data, regime, normalizers, &loss)?;

        let train = &data.train;
        let model = config.model_config(DataDims {
            // The space-time regime appends the time value to the positions.
            space_dim: train.pos.size()[2] + i64::from(regime == Regime::SpaceTime),
            // θ reaches the model appended to fx at every point (decoder.rs).
            fun_dim: train.fx.size()[2] + train.theta.as_ref().map_or(0, |t| t.size()[1]),
            out_dim: train.y.size()[2],
            time_input: regime.time_input(),
            functions: train.functions.iter().map(|f| f.values.size()[2]).collect(),
        })?;
        Ok(Self {
            config,
            device,
            kind,
            data,
            regime,
            normalizers,
            loss,
            model,
        })
    }
}

/// Refuses settings the data cannot serve: a regime that does not fit the targets' shape, a
/// loss that needs a grid or channels the data lack, normalizers the autoregressive regime
/// cannot feed back, all-zero targets.
fn check_data(
    cfg: &TrainConfig,
    data: &TensorDataset,
    regime: Regime,
    normalizers: NormalizerKinds,
    loss: &LossSpec,
) -> Result<()> {
    check_loss(loss, data, regime)?;
    if cfg.parallel == Parallelism::Points {
        check_points(data, regime, loss)?;
    }
    if loss.rollout != RolloutLoss::Sum && regime != Regime::Autoregressive {
        return Err(Error::config(
            "loss.rollout",
            format!("weights the frames of an autoregressive rollout; {regime:?} trains none"),
        ));
    }
    let (train, test) = (&data.train, &data.test);
    let ysz = train.y.size();
    match (regime.is_time_series(), ysz.len()) {
        (false, 3) | (true, 4) => {}
        _ => {
            return Err(Error::config(
                "data.regime",
                format!("{regime:?} does not fit targets of shape {ysz:?} ((S, N, C) for steady, (S, N, C, T) for time series)"),
            ))
        }
    }
    let steady_only = train.query.is_some()
        || train.aux.is_some()
        || train.lengths.is_some()
        || train.theta.is_some()
        || !train.functions.is_empty();
    if regime != Regime::Steady && steady_only {
        return Err(Error::config(
            "data.regime",
            format!("{regime:?} feeds time series at their input points; query points, aux channels, samples of different sizes, θ and input functions on their own points (data.fx_as_function) need the steady regime"),
        ));
    }
    if regime == Regime::Autoregressive
        && (normalizers.x != NormalizerKind::None || normalizers.y != NormalizerKind::None)
    {
        return Err(Error::config(
            "data.normalize_x",
            "the autoregressive regime feeds predictions back as inputs and supports no normalizer (NS2d uses none)",
        ));
    }
    if regime == Regime::SpaceTime && data.grid.is_none() {
        return Err(Error::config(
            "data.regime",
            "space_time treats time as a grid axis and needs data on a grid",
        ));
    }
    if !matches!(cfg.recompute, Recompute::None | Recompute::Auto) && regime != Regime::Steady {
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
    if loss.alpha > 0.0 {
        match data.target_grid() {
            Some(g) if g.len() == 2 && g[0] == g[1] && ysz[2] == 1 && regime == Regime::Steady => {}
            _ => {
                return Err(Error::config(
                    "loss.derivative_alpha",
                    "the derivative loss needs steady scalar targets on a square 2-D grid",
                ))
            }
        }
    }
    Ok(())
}

/// Refuses what point sharding (`parallel = "points"`) cannot split yet: everything but the
/// steady regime on targets at the input points with the relative L2. (The models' own
/// refusals come at their first forward, naming the operation that needs every point.)
fn check_points(data: &TensorDataset, regime: Regime, loss: &LossSpec) -> Result<()> {
    let refuse = |key: &str, what: String| {
        Err(Error::config(
            key,
            format!("{what}; parallel = \"points\" splits steady samples whose targets are at the input points, under the relative L2"),
        ))
    };
    if regime != Regime::Steady {
        return refuse(
            "data.regime",
            format!("{regime:?} is not split over points yet"),
        );
    }
    if data.train.query.is_some() || data.test.query.is_some() {
        return refuse(
            "data",
            "targets at query points of their own are not split yet".into(),
        );
    }
    if !data.train.functions.is_empty() {
        return refuse(
            "data.fx_as_function",
            "input functions on their own points are not split yet".into(),
        );
    }
    if loss.kind != LossKind::RelL2 {
        return refuse(
            "loss.kind",
            format!("{:?} is not split over points yet", loss.kind),
        );
    }
    if loss.alpha > 0.0 {
        return refuse(
            "loss.derivative_alpha",
            "the derivative term differentiates on the whole grid".into(),
        );
    }
    Ok(())
}

/// Refuses a loss the data cannot feed: the Galerkin losses need steady scalar targets on a 1-D
/// or 2-D grid (every side ≥ 3), and with γ > 0 the targets' derivatives as `aux` (1 channel in
/// 1-D; ∂_row u, ∂_column u and the coefficient in 2-D).
fn check_loss(spec: &LossSpec, data: &TensorDataset, regime: Regime) -> Result<()> {
    if spec.kind != LossKind::GalerkinH1 {
        return Ok(());
    }
    let bad = |msg: String| Err(Error::config("loss.kind", msg));
    let ysz = data.train.y.size();
    let grid = data.target_grid().unwrap_or(&[]);
    if regime != Regime::Steady || ysz.len() != 3 || ysz[2] != 1 {
        return bad(format!(
            "galerkin_h1 needs steady scalar targets (S, M, 1), got {ysz:?} in the {regime:?} regime"
        ));
    }
    if !(grid.len() == 1 || grid.len() == 2) || grid.iter().any(|&n| n < 3) {
        return bad(format!(
            "galerkin_h1 differentiates on the targets' grid: it needs a 1-D or 2-D grid with at least 3 points a side, got {grid:?}"
        ));
    }
    if spec.h1_gamma > 0.0 {
        let want = if grid.len() == 1 { 1 } else { 3 };
        let got = data.train.aux.as_ref().map(|a| a.size()[2]);
        if got != Some(want) {
            return bad(format!(
                "galerkin_h1 with h1_gamma {} needs the targets' derivatives as {want} aux channel(s) (data.layout = \"galerkin\" provides them), the data have {}",
                spec.h1_gamma,
                got.map_or("none".into(), |c| c.to_string())
            ));
        }
    }
    Ok(())
}
