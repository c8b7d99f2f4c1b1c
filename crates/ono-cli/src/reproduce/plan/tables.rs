//! One function per table: which experiments it needs (derived from the bases by typed edits)
//! and which number of which experiment fills each of its cells.

use anyhow::Result;
use ono_data::normalizer::NormalizerKind;
use ono_models::{ModelConfig, NnBlock};
use ono_nn::orthogonal::Orthogonalization;
use ono_train::config::{ModelSection, RolloutLoss, TrainConfig};
use serde::Serialize;

use super::reduced::galerkin_grids;
use super::{
    base, model_label, DataPaths, Measure, PaperOnly, Plan, Profile, Reduced, Source, Task, Work,
    MODELS, NEURALOP_DARCY_ZERO_SHOT,
};
use crate::reproduce::paper;

/// The training resolution of Table 3 (421 / 10 → 43) and the test strides (61, 85, 141, 211,
/// 421).
pub const SUPERRES_TRAIN_STRIDE: usize = 10;
pub const SUPERRES_STRIDES: [usize; 5] = [7, 5, 3, 2, 1];

/// Time steps trained in Table 4 (`time_gen.py`: frames 10–17 of 10 rolled out).
pub const SEEN_STEPS: i64 = 8;

/// What every table's experiments are derived with.
struct Ctx<'a> {
    profile: Profile,
    reduced: Option<Reduced>,
    data: &'a DataPaths,
}

impl Ctx<'_> {
    /// The profile's version of an experiment derived from a base: the published files for the
    /// paper profile, else the reduced sizes.
    fn profiled(&self, mut cfg: TrainConfig, task: Task) -> Result<TrainConfig> {
        match &self.reduced {
            None => {
                if cfg.data.benchmark.is_some() {
                    cfg.data.data_dir = Some(self.data.published.clone());
                }
                Ok(cfg)
            }
            Some(r) => r.reduce(cfg, task, self.data),
        }
    }

    /// Table 1's experiment of `model` on `task` in this profile, if the model has one.
    fn experiment(&self, model: &str, task: Task) -> Result<Option<TrainConfig>> {
        base(model, task)?
            .map(|cfg| self.profiled(cfg, task))
            .transpose()
    }

    /// Why the run `run` of `model` on `task` (its id's tail: the model itself, or an ablation
    /// such as `ono-30`) is left to the paper profile, if it is: an ablation also follows its
    /// model's cell.
    fn paper_only(&self, model: &str, run: &str, task: Task) -> Option<PaperOnly> {
        let r = self.reduced.as_ref()?;
        r.paper_only(model, task)
            .or_else(|| r.paper_only(run, task))
    }

    /// The data a task's experiments read, in words.
    fn data_note(&self, task: Task) -> String {
        match &self.reduced {
            None => format!("published {} files", task.key()),
            Some(r) => r.data_note(task),
        }
    }
}

/// A base the table cannot do without.
fn required(cfg: Option<TrainConfig>, model: &str, task: Task) -> Result<TrainConfig> {
    cfg.ok_or_else(|| anyhow::anyhow!("no base experiment of {model} on {}", task.key()))
}

fn train(config: TrainConfig) -> Work {
    Work::Train {
        config: Box::new(config),
        strides: Vec::new(),
        test_resolutions: Vec::new(),
    }
}

/// The whole plan of a profile.
pub fn plan(profile: Profile, data: &DataPaths) -> Result<Plan> {
    let ctx = Ctx {
        profile,
        reduced: Reduced::of(profile),
        data,
    };
    let mut p = Plan::default();
    table1(&ctx, &mut p)?;
    table2(&ctx, &mut p)?;
    table8(&ctx, &mut p)?;
    table3(&ctx, &mut p)?;
    table4(&ctx, &mut p)?;
    table5(&ctx, &mut p)?;
    table6(&ctx, &mut p)?;
    table7(&ctx, &mut p)?;
    Ok(p)
}

/// Table 1: every model on every benchmark it can take.
fn table1(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for model in MODELS {
        let paper_row = paper::table1(model);
        for task in Task::ALL {
            let col = task.column();
            let in_table = paper_row[col].is_some() || model == "transolver";
            let source = match in_table {
                true => benchmark_cell(ctx, p, model, task)?,
                false => None,
            };
            let column = paper::TABLE1_COLUMNS[col];
            let source = source.unwrap_or(Source::Unsupported);
            p.cell(1, model_label(model), column, model, paper_row[col], source);
        }
    }
    Ok(())
}

/// The ONO paper's benchmark experiments as Table 1 runs them in a profile, for other papers'
/// benchmark tables: the same experiments (ids, data, sizes, seeds), and versions of them.
pub struct BenchmarkRuns<'a>(Ctx<'a>);

impl<'a> BenchmarkRuns<'a> {
    pub fn new(profile: Profile, data: &'a DataPaths) -> Self {
        Self(Ctx {
            profile,
            reduced: Reduced::of(profile),
            data,
        })
    }

    /// Adds the experiment of `model` on `task` (with its seeds) to `p` and returns the source
    /// of its cell; `None` where the model has no base experiment for the task.
    pub fn source(&self, p: &mut Plan, model: &str, task: Task) -> Result<Option<Source>> {
        benchmark_cell(&self.0, p, model, task)
    }

    /// The experiment of `model` on `task` in this profile, to derive a version of it from.
    pub fn experiment(&self, model: &str, task: Task) -> Result<Option<TrainConfig>> {
        self.0.experiment(model, task)
    }

    /// Why this profile leaves `model`'s `task` to the paper profile, if it does.
    pub fn paper_only(&self, model: &str, task: Task) -> Option<PaperOnly> {
        self.0.paper_only(model, model, task)
    }

    /// The data a task's experiments read, in words.
    pub fn data_note(&self, task: Task) -> String {
        self.0.data_note(task)
    }
}

fn benchmark_cell(ctx: &Ctx, p: &mut Plan, model: &str, task: Task) -> Result<Option<Source>> {
    // Geo-FNO on the regular grids is FNO (the paper's own note).
    let owner = match (model, task) {
        ("geofno", Task::Darcy | Task::Ns2d) => "fno",
        _ => model,
    };
    let Some(cfg) = ctx.experiment(owner, task)? else {
        return Ok(None);
    };
    if let Some(why) = ctx.paper_only(owner, owner, task) {
        return Ok(Some(Source::PaperOnly(why)));
    }
    let id = format!("{}/{owner}", task.key());
    let mut work = train(cfg);
    // The reduced profiles' Darcy is the neuraloperator set, whose test problems are also
    // published at 32²: Table 3's zero-shot pair reads FNO's and ONO's.
    if let (
        Work::Train {
            test_resolutions, ..
        },
        true,
        true,
    ) = (
        &mut work,
        ctx.reduced.is_some() && task == Task::Darcy,
        matches!(owner, "fno" | "ono"),
    ) {
        test_resolutions.push(NEURALOP_DARCY_ZERO_SHOT);
    }
    p.add(&id, owner, work, ctx.data_note(task));
    p.add_seeds(&id, ctx.reduced.map_or(1, |r| r.seeds(task)));
    Ok(Some(Source::TestError(id)))
}

/// The timed step of Tables 2 and 8: one per model at Darcy's shapes, batch 8; FNO, LSM and ONO
/// with 4 layers, ONO with k = 16, width 128 and the linear transformer block. Returns its id.
fn runtime_experiment(ctx: &Ctx, p: &mut Plan, model: &str) -> Result<String> {
    let owner = if model == "geofno" { "fno" } else { model };
    let (shapes, steps) = match &ctx.reduced {
        None => ("darcy", 5),
        Some(r) => ("super_resolution", r.timed_steps),
    };
    let mut section = match owner {
        "ono" => ModelSection::preset("ono", "super_resolution"),
        "fno" => ModelSection::preset("fno2d", "darcy"),
        "gnot" => ModelSection::preset("gnot", "gnot_e3"),
        m => ModelSection::preset(m, "darcy"),
    };
    section.edit(|m| match m {
        ModelConfig::Ono(c) => {
            c.n_layers = 4;
            c.n_hidden = 128;
            c.psi_dim = 16;
            c.nn_block = NnBlock::LinearTransformer;
        }
        ModelConfig::Ffno(c) => c.n_layers = 4,
        ModelConfig::Galerkin(c) => {
            let side = if shapes == "darcy" { 85 } else { 43 };
            c.scaler_grids = Some(galerkin_grids(side));
        }
        _ => {}
    })?;
    let id = format!("runtime/{owner}");
    let measure = Measure {
        model: section,
        shapes: shapes.to_string(),
        batch: 8,
        steps,
    };
    let note = format!("random data at the shapes of ONO's `{shapes}` preset, batch 8");
    p.add(&id, owner, Work::Measure(measure), note);
    Ok(id)
}

/// Table 2: time per training step.
fn table2(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for model in MODELS {
        let id = runtime_experiment(ctx, p, model)?;
        p.cell(
            2,
            model_label(model),
            "s / step",
            model,
            None,
            Source::StepTime(id),
        );
    }
    Ok(())
}

/// Table 8: parameters and peak memory of Table 2's steps.
fn table8(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for model in MODELS {
        let id = runtime_experiment(ctx, p, model)?;
        let label = model_label(model);
        p.cell(
            8,
            label,
            "parameters",
            model,
            None,
            Source::Params(id.clone()),
        );
        p.cell(
            8,
            label,
            "peak memory (MB)",
            model,
            None,
            Source::PeakMemory(id),
        );
    }
    Ok(())
}

/// Table 3's FNO rows: how FNO's normalizers meet a finer grid. Ours interpolate the pointwise
/// statistics fitted on the training grid onto it (docs/training.md); FNO's scripts never
/// evaluate off their grid, and statistics that do not depend on it are the per-channel ones.
pub const SUPERRES_FNO_INTERPOLATED: &str = "FNO (pointwise normalizer, interpolated)";
pub const SUPERRES_FNO_PER_CHANNEL: &str = "FNO (per-channel normalizer)";

/// Table 3: trained at 43 × 43, tested at finer grids of the same test samples; FNO both ways
/// (its normalizers pointwise and interpolated, or per channel). The reduced profiles add a
/// second zero-shot pair of columns from Table 1's Darcy runs on the neuraloperator set:
/// trained at 16², tested on the same problems at 32².
fn table3(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (model, per_channel) in [("fno", false), ("fno", true), ("ono", false)] {
        let mut cfg = required(base(model, Task::Darcy)?, model, Task::Darcy)?;
        cfg.data.r = Some(SUPERRES_TRAIN_STRIDE);
        if per_channel {
            cfg.data.normalize_x = Some(NormalizerKind::Unit);
            cfg.data.normalize_y = Some(NormalizerKind::Unit);
        }
        if model == "ono" {
            // ONO2's super-resolution script: its own preset at batch 8, 200 test samples, no
            // derivative term.
            cfg.model = ModelSection::preset("ono", "super_resolution");
            cfg.batch_size = 8;
            cfg.data.ntest = Some(200);
            cfg.loss.derivative_alpha = Some(0.0);
        }
        let (cfg, note) = match &ctx.reduced {
            None => (
                ctx.profiled(cfg, Task::Darcy)?,
                "published Darcy files, trained at r = 10 (43²)".to_string(),
            ),
            Some(r) => (
                r.reduce_superres(cfg, SUPERRES_TRAIN_STRIDE, ctx.data)?,
                r.superres_note(SUPERRES_TRAIN_STRIDE),
            ),
        };
        let id = match per_channel {
            false => format!("superres/{model}"),
            true => format!("superres/{model}-per-channel"),
        };
        let work = Work::Train {
            config: Box::new(cfg),
            strides: SUPERRES_STRIDES.to_vec(),
            test_resolutions: Vec::new(),
        };
        let note = match per_channel {
            false => note,
            true => format!("{note}; per-channel normalizers"),
        };
        p.add(&id, model, work, note);
        let label = match (model, per_channel) {
            ("fno", false) => SUPERRES_FNO_INTERPOLATED,
            ("fno", true) => SUPERRES_FNO_PER_CHANNEL,
            _ => model_label(model),
        };
        p.cell(
            3,
            label,
            "s=43 (trained)",
            model,
            None,
            Source::TestError(id.clone()),
        );
        for (i, stride) in SUPERRES_STRIDES.iter().enumerate() {
            let (side, fno, ono) = paper::TABLE3[i];
            let paper = if model == "fno" { fno } else { ono };
            let column = format!("s={side}");
            p.cell(
                3,
                label,
                &column,
                model,
                Some(paper),
                Source::AtStride(id.clone(), *stride),
            );
        }
        if ctx.reduced.is_some() && !per_channel {
            // Table 1's run (added there, with its zero-shot evaluation).
            let label = model_label(model);
            let id = format!("{}/{model}", Task::Darcy.key());
            let trained = format!(
                "neuralop s={} (trained)",
                super::reduced::NEURALOP_DARCY_SIDE
            );
            p.cell(
                3,
                label,
                &trained,
                model,
                None,
                Source::TestError(id.clone()),
            );
            let zero_shot = format!("neuralop s={NEURALOP_DARCY_ZERO_SHOT}");
            let source = Source::AtResolution(id, NEURALOP_DARCY_ZERO_SHOT);
            p.cell(3, label, &zero_shot, model, None, source);
        }
    }
    Ok(())
}

/// Table 4: NS2d, trained on the first 8 predicted steps, rolled out 10.
fn table4(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for model in ["fno", "ono"] {
        let mut cfg = required(base(model, Task::Ns2d)?, model, Task::Ns2d)?;
        if model == "ono" {
            cfg.model = ModelSection::preset("ono", "time_extrapolation");
            // `time_gen.py` adds the running sum of the frames' losses at every frame.
            cfg.loss.rollout = RolloutLoss::Cumulative;
        }
        cfg.data.train_steps = Some(SEEN_STEPS);
        let cfg = ctx.profiled(cfg, Task::Ns2d)?;
        let (seen, unseen) = if model == "fno" {
            paper::TABLE4_FNO
        } else {
            paper::TABLE4_ONO
        };
        let label = model_label(model);
        // A model left out of Table 1's NS2d column learns this rollout no better (ONO's
        // `time_extrapolation` run: docs/results.md).
        let (seen_source, unseen_source) = match ctx.paper_only(model, model, Task::Ns2d) {
            Some(why) => (Source::PaperOnly(why), Source::PaperOnly(why)),
            None => {
                let id = format!("ns2d-time/{model}");
                p.add(&id, model, train(cfg), ctx.data_note(Task::Ns2d));
                (Source::Seen(id.clone()), Source::Unseen(id))
            }
        };
        p.cell(4, label, "Seen", model, Some(seen), seen_source);
        p.cell(4, label, "Unseen", model, Some(unseen), unseen_source);
    }
    Ok(())
}

/// The benchmarks of Tables 5 and 6.
const ABLATION_TASKS: [Task; 3] = [Task::Airfoil, Task::Elasticity, Task::Pipe];

/// An ablation of Table 1's ONO run on `task`: the run itself where the change is none (the
/// presets already use Nyström and the orthonormalization), else a run of its own named by the
/// changed value; or why the profile leaves it to the paper profile.
fn ablation<T: PartialEq + Serialize>(
    ctx: &Ctx,
    p: &mut Plan,
    task: Task,
    value: T,
    field: fn(&mut ono_models::OnoConfig) -> &mut T,
) -> Result<Source> {
    let mut cfg = required(ctx.experiment("ono", task)?, "ono", task)?;
    let ModelConfig::Ono(mut ono) = cfg.model.config()? else {
        anyhow::bail!("the base of ONO on {} is not an ONO experiment", task.key())
    };
    let id = if *field(&mut ono) == value {
        format!("{}/ono", task.key())
    } else {
        let name = serde_name(&value)?.replace('_', "-");
        cfg.model.edit(|m| {
            if let ModelConfig::Ono(c) = m {
                *field(c) = value;
            }
        })?;
        format!("{}/ono-{name}", task.key())
    };
    Ok(run_unless_paper_only(ctx, p, &id, cfg, task))
}

/// The cell of ONO's run `id` on `task`: the run, or why this profile leaves it to the paper
/// profile.
fn run_unless_paper_only(
    ctx: &Ctx,
    p: &mut Plan,
    id: &str,
    cfg: TrainConfig,
    task: Task,
) -> Source {
    let run = id.rsplit('/').next().unwrap_or(id);
    match ctx.paper_only("ono", run, task) {
        Some(why) => Source::PaperOnly(why),
        None => {
            p.add(id, "ono", train(cfg), ctx.data_note(task));
            p.add_seeds(id, ctx.reduced.map_or(1, |r| r.seeds(task)));
            Source::TestError(id.to_string())
        }
    }
}

/// A value's name in experiment files (`linear_transformer`).
fn serde_name<T: Serialize>(value: &T) -> Result<String> {
    match toml::Value::try_from(value)? {
        toml::Value::String(s) => Ok(s),
        other => anyhow::bail!("`{other}` is not a name"),
    }
}

/// Table 5: ONO with another NN block.
fn table5(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (row, block, paper_row) in paper::TABLE5 {
        for (i, task) in ABLATION_TASKS.into_iter().enumerate() {
            let source = ablation(ctx, p, task, block, |c| &mut c.nn_block)?;
            let column = paper::ABLATION_COLUMNS[i];
            p.cell(5, row, column, "ono", Some(paper_row[i]), source);
        }
    }
    Ok(())
}

/// Table 6: ONO with another normalization of ψ.
fn table6(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (row, o, paper_row) in paper::TABLE6 {
        for (i, task) in ABLATION_TASKS.into_iter().enumerate() {
            let source =
                ablation::<Orthogonalization>(ctx, p, task, o, |c| &mut c.orthogonalization)?;
            let column = paper::ABLATION_COLUMNS[i];
            p.cell(6, row, column, "ono", paper_row.map(|r| r[i]), source);
        }
    }
    Ok(())
}

/// Table 7: ONO-8 (the presets) against ONO-30 (30 layers at the same width).
fn table7(ctx: &Ctx, p: &mut Plan) -> Result<()> {
    for (row, layers, paper_row) in paper::TABLE7 {
        for (i, task) in [Task::Elasticity, Task::Plasticity].into_iter().enumerate() {
            let mut cfg = required(ctx.experiment("ono", task)?, "ono", task)?;
            // The paper's ONO-8 is the presets' run (Table 1's); the reduced profiles' Table 1
            // runs have fewer layers, so their ONO-8 is a run of its own.
            let id = if layers == 8 && ctx.profile == Profile::Paper {
                format!("{}/ono", task.key())
            } else {
                // 30 layers at the quick width would take most of the hour.
                let narrow = ctx.reduced.is_some_and(|r| !r.tiny);
                cfg.model.edit(|m| {
                    if let ModelConfig::Ono(c) = m {
                        c.n_layers = layers;
                        if narrow {
                            c.n_hidden = 32;
                        }
                    }
                })?;
                format!("{}/ono-{layers}", task.key())
            };
            let source = run_unless_paper_only(ctx, p, &id, cfg, task);
            let column = ["Elasticity", "Plasticity"][i];
            p.cell(7, row, column, "ono", Some(paper_row[i]), source);
        }
    }
    Ok(())
}
